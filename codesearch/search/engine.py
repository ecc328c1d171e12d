"""The engine's front door: parse, plan, evaluate every shard, merge, present.

`search_shards` is the unit a Ray shard searcher runs over the shards it owns, and
`partial_result` turns its results into plain, ranked, capped, presented data;
`merge_partials` combines the partial results of many searchers into one ranked, capped
answer. `Searcher` does all three in one process over an index directory, so the in-process
and the distributed search share one code path.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from codesearch.errors import IndexFormatError
from codesearch.index.manifest import current_shards
from codesearch.index.shard import Shard
from codesearch.query.parser import parse
from codesearch.query.planner import Plan, plan
from codesearch.search.evaluate import FileMatch, ShardResult, evaluate_shard
from codesearch.search.options import FLUSH_TIMER, SearchOptions, Stats
from codesearch.search.present import file_result, repository_info, truncate_file_result

log = logging.getLogger(__name__)


def make_plan(query: str, options: SearchOptions) -> Plan:
    """Parse and plan a query; raises `QueryParseError` / `SearchContextNotFound`."""
    return plan(parse(query, is_regex=options.is_regex, case_sensitive=options.case_sensitive), options.contexts)


def search_shards(shards: list[Shard], p: Plan, options: SearchOptions, deadline: float,
                  cancelled: Callable[[], bool] | None = None) -> list[ShardResult]:
    """Evaluate `p` on each shard in order, stopping once the budget is spent, at the
    `deadline` (a `time.monotonic()` instant) or when `cancelled()` turns true.

    A shard whose evaluation fails (a corrupt posting list, say) counts as a crash and the
    other shards still answer.
    """
    results: list[ShardResult] = []
    found = 0
    for i, shard in enumerate(shards):
        late = time.monotonic() > deadline or (cancelled is not None and cancelled())
        if found > options.matches or late:
            skipped = ShardResult(truncated=True, timed_out=late)
            skipped.stats.shardsSkipped = len(shards) - i
            results.append(skipped)
            break
        try:
            r = evaluate_shard(shard, p, options.matches - found, deadline, cancelled)
        except Exception as e:  # one bad shard must not fail the search
            log.error("search of %s failed: %s", shard.path, e)
            r = ShardResult(truncated=True)
            r.stats.crashes = 1
        results.append(r)
        found += r.total_matches
    return results


@dataclass
class PartialResult:
    """What one searcher (a process owning some shards) sends back: ranked, capped, presented.

    Plain data (picklable, small): files as ``(score, order, match_count, file_result)`` with
    the `POST /api/search` file shape already built next to the shard contents, so the merge
    needs no access to shards and a search stays one hop from the merging process.
    """

    files: list[tuple[int, tuple, int, dict]] = field(default_factory=list)
    repos: dict[int, dict] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    total_matches: int = 0
    truncated: bool = False
    timed_out: bool = False


def _cap(items, options: SearchOptions, count, truncate) -> tuple[list, bool]:
    """Keep ranked items while the `matches` budget lasts (files and match ranges)."""
    kept, remaining, truncated = [], options.matches, False
    for item in items:
        n = count(item)
        if len(kept) >= options.matches or (remaining <= 0 and n):
            return kept, True
        if n > remaining:
            item = truncate(item, remaining)
            truncated = True
            n = count(item)
        remaining -= n
        kept.append(item)
    return kept, truncated


def _truncate_match(fm: FileMatch, keep: int) -> FileMatch:
    fm.name_ranges = fm.name_ranges[:keep]
    fm.ranges = fm.ranges[: keep - len(fm.name_ranges)]
    kept_ranges = set(fm.ranges)
    fm.symbol_hits = [h for h in fm.symbol_hits if (h.start, h.end) in kept_ranges]
    return fm


def partial_result(results: list[ShardResult], options: SearchOptions, origin: int = 0) -> PartialResult:
    """Rank, cap and present the shard results of one searcher (`origin` orders searchers)."""
    out = PartialResult()
    files: list[FileMatch] = []
    for si, r in enumerate(results):
        out.stats.add(r.stats)
        out.total_matches += r.total_matches
        out.truncated |= r.truncated
        out.timed_out |= r.timed_out
        for fm in r.files:
            fm.order = (origin, si, fm.doc)
            files.append(fm)
    files.sort(key=lambda f: (-f.score, f.order))
    kept, truncated = _cap(files, options, lambda f: f.match_count, _truncate_match)
    out.truncated |= truncated
    for fm in kept:
        repo = fm.shard.repo(fm.doc)
        out.repos.setdefault(repo.id, repository_info(repo))
        out.files.append((fm.score, fm.order, fm.match_count,
                          file_result(fm, options.context_lines, options.whole, options.public_url)))
    return out


def merge_partials(partials: list[PartialResult], options: SearchOptions, started: int, plan_ns: int = 0,
                   missed: Stats | None = None) -> dict:
    """Merge the answers of many searchers into one ``POST /api/search`` response. `missed`
    counts what searchers that gave no answer would have searched (crashes, shards skipped):
    with any, the answer is not exhaustive."""
    stats = Stats()
    files, repos, truncated = [], {}, False
    if missed is not None:
        stats.add(missed)
        stats.flushReason = missed.flushReason
        truncated = bool(missed.crashes)
    for p in partials:
        stats.add(p.stats)
        stats.totalMatchCount += p.total_matches
        truncated |= p.truncated
        if p.timed_out:
            stats.flushReason = FLUSH_TIMER
        files.extend(p.files)
        repos.update(p.repos)
    files.sort(key=lambda f: (-f[0], f[1]))
    kept, capped = _cap(files, options, lambda f: f[2],
                        lambda f, keep: (f[0], f[1], keep, truncate_file_result(f[3], keep, options.context_lines)))
    truncated |= capped
    out_files = [f[3] for f in kept]
    stats.actualMatchCount = sum(f[2] for f in kept)
    stats.totalMatchCount = max(stats.totalMatchCount, stats.actualMatchCount)
    if truncated and stats.totalMatchCount <= stats.actualMatchCount:
        stats.totalMatchCount = stats.actualMatchCount + 1  # there is more than we return
    stats.fileCount = len(out_files)
    stats.matchTreeConstruction = plan_ns
    stats.duration = time.perf_counter_ns() - started
    used = {f["repositoryId"] for f in out_files}
    return {
        "stats": stats.to_json(),
        "files": out_files,
        "repositoryInfo": [r for rid, r in repos.items() if rid in used],
        "isSearchExhaustive": stats.totalMatchCount <= stats.actualMatchCount,
    }


class Searcher:
    """All shards of an index directory, searched in one process."""

    def __init__(self, index_dir: str, verify: bool = True):
        self.index_dir = index_dir
        self.shards: list[Shard] = []
        self.errors: list[str] = []
        if not os.path.isdir(index_dir):
            raise IndexFormatError(index_dir, "index directory does not exist")
        self.verify = verify
        self.reload()

    def reload(self) -> None:
        """Follow the index manifest: open shards that appeared, drop those that were replaced.

        Searches that already hold the old shard list finish on it (the files stay mapped). If
        a shard named by the manifest vanished before it could be opened, a newer manifest has
        replaced it: read the manifest again (a few times at most).
        """
        for _ in range(5):
            errors, vanished = [], False
            old = {s.path: s for s in self.shards}
            shards = []
            for path in current_shards(self.index_dir):
                if path in old:
                    shards.append(old.pop(path))
                    continue
                try:
                    shards.append(Shard(path, verify=self.verify))
                except IndexFormatError as e:
                    if not os.path.exists(path):
                        vanished = True
                        break
                    log.error("%s", e)
                    errors.append(str(e))
            if not vanished:
                self.shards, self.errors = shards, errors
                return

    def search(self, query: str, matches: int = 100, context_lines: int = 0, whole: bool = False,
               is_regex: bool = False, case_sensitive: bool = False, options: SearchOptions | None = None) -> dict:
        """Run a query; returns the ``POST /api/search`` response as a dict."""
        if options is None:
            options = SearchOptions(matches=matches, context_lines=context_lines, whole=whole,
                                    is_regex=is_regex, case_sensitive=case_sensitive)
        started = time.perf_counter_ns()
        deadline = options.deadline()
        p = make_plan(query, options)
        plan_ns = time.perf_counter_ns() - started
        results = search_shards(list(self.shards), p, options, deadline)
        return merge_partials([partial_result(results, options)], options, started, plan_ns)

    def close(self) -> None:
        for s in self.shards:
            s.close()
