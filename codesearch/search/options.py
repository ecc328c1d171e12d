"""What a search is asked to do, and what it costs (the `stats` of docs/http-api.md#search)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from codesearch import defaults

DEFAULT_PUBLIC_URL = defaults.PUBLIC_URL
#: the matches a search in another order than relevance looks at, at least (`SearchOptions.search_budget`)
SORT_WINDOW = 10_000
#: With a per-file cap (`SearchOptions.file_matches`), the matches of one file are counted up to
#: this many: past it, ``moreMatches`` is a lower bound (``moreMatchesExact`` false).
MAX_COUNTED_PER_FILE = 1000


@dataclass
class SearchOptions:
    """The request fields of ``POST /api/search`` plus the engine's budgets."""

    matches: int = 100
    context_lines: int = 0
    whole: bool = False
    is_regex: bool = False
    case_sensitive: bool = False
    #: Seconds the whole search may take before it returns what it found (non-exhaustive).
    timeout_s: float = 30.0
    #: Public base URL of the service, for `webUrl`.
    public_url: str = DEFAULT_PUBLIC_URL
    #: Search contexts: name → repository names.
    contexts: dict[str, set[str]] = field(default_factory=dict)
    #: The repositories (ids) the caller may see, or None for every one: the searchers search
    #: as if the others were not indexed (`codesearch.search.visibility`).
    visible_repos: frozenset[int] | None = None
    #: The order of the files (`codesearch.search.sorting`: relevance, path, recency).
    sort: str = "relevance"
    #: Copies of a file kept (`codesearch.search.duplicates`) do not count against `matches` (the
    #: results page, which shows them folded under the first).
    fold_copies: bool = False
    #: The most match ranges kept per file; 0 keeps them all (the API's `matches` semantics). The
    #: results page sets it so that one file with hundreds of matches cannot spend the page's
    #: whole `matches` budget: a file keeps its first ranges (file name and definitions first) and
    #: counts the rest (``moreMatches``, up to `MAX_COUNTED_PER_FILE`), and the budget goes on.
    file_matches: int = 0

    @property
    def search_budget(self) -> int:
        """The matches the searchers look for before they stop early: `matches`; as many again when
        copies are folded, so that the copies kept free of `matches` are found too (at most twice
        the work of the same search unfolded); in another order than relevance, at least
        `SORT_WINDOW`, so that the files kept are the first in that order of that many, not of the
        first `matches` found (files are found in index order)."""
        budget = 2 * self.matches if self.fold_copies else self.matches
        return budget if self.sort == "relevance" else max(budget, SORT_WINDOW)

    def deadline(self, start: float | None = None) -> float:
        return (start if start is not None else time.monotonic()) + self.timeout_s


FLUSH_FINAL = "FLUSH_REASON_FINAL_FLUSH"
FLUSH_TIMER = "FLUSH_REASON_TIMER_EXPIRED"
FLUSH_MAX_SIZE = "FLUSH_REASON_MAX_SIZE"


@dataclass
class Stats:
    """Zoekt's statistics, with the API's units (docs/http-api.md#search): durations in whole
    nanoseconds, sizes in bytes.

    actualMatchCount     match ranges returned (chunk ranges plus file-name ranges)
    totalMatchCount      match ranges found (counting may stop past the `matches` cap)
    duration             wall time of the search
    fileCount            files returned
    filesSkipped         candidate files not examined because enough matches were found
    contentBytesLoaded   bytes of file content read for verification
    indexBytesLoaded     bytes of posting lists read
    crashes              shards whose search failed
    shardFilesConsidered files in the shards searched
    filesConsidered      candidate files examined
    filesLoaded          files whose content was read
    shardsScanned        shards searched
    shardsSkipped        shards not searched because the budget was spent
    shardsSkippedFilter  shards ruled out by repository predicates or trigrams alone
    ngramMatches         candidate files produced by the trigram index
    ngramLookups         trigram dictionary lookups
    wait                 time queued before the search started
    matchTreeConstruction time spent planning
    matchTreeSearch      time spent evaluating
    regexpsConsidered    regex (or literal) scans over file contents
    flushReason          why results were sent
    """

    actualMatchCount: int = 0
    totalMatchCount: int = 0
    duration: int = 0
    fileCount: int = 0
    filesSkipped: int = 0
    contentBytesLoaded: int = 0
    indexBytesLoaded: int = 0
    crashes: int = 0
    shardFilesConsidered: int = 0
    filesConsidered: int = 0
    filesLoaded: int = 0
    shardsScanned: int = 0
    shardsSkipped: int = 0
    shardsSkippedFilter: int = 0
    ngramMatches: int = 0
    ngramLookups: int = 0
    wait: int = 0
    matchTreeConstruction: int = 0
    matchTreeSearch: int = 0
    regexpsConsidered: int = 0
    flushReason: str = FLUSH_FINAL

    def add(self, other: Stats) -> None:
        """Accumulate another shard's counters (not the match counts, which the merge sets).
        Only the counters `other` has moved: a search adds one `Stats` per shard, most zero."""
        mine, theirs = vars(self), vars(other)
        for k in _ADDED:
            v = theirs[k]
            if v:
                mine[k] += v

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


#: The counters `Stats.add` accumulates: the integer ones but the match counts, the duration and
#: the wait, which the merge sets.
_ADDED = tuple(
    f.name
    for f in dataclasses.fields(Stats)
    if f.type in ("int", int) and f.name not in ("actualMatchCount", "duration", "wait", "fileCount")
)
