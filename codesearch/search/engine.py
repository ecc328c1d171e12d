"""The engine's front door: parse, plan, evaluate every shard, merge, present.

`search_shards` is the unit a Ray shard searcher runs over the shards it owns, and
`partial_result` turns its results into plain, ranked, capped, presented data;
`merge_partials` combines the partial results of many searchers into one ranked, capped
answer. `Searcher` does all three in one process over an index directory, so the in-process
and the distributed search share one code path; it is a `codesearch.search.protocol.Streamer`
(its `start` streams one partial result, the whole index's), as the Ray pool is.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from codesearch.errors import CodesearchError, IndexFormatError, QueryError
from codesearch.index.manifest import current_index, shard_repos
from codesearch.index.shard import Shard
from codesearch.query import ast
from codesearch.query.parser import parse
from codesearch.query.planner import Plan, check, plan
from codesearch.search.batch import BatchQuery, search_batch
from codesearch.search.document import FileMatch, truncate_match
from codesearch.search.duplicates import Folding
from codesearch.search.evaluate import ShardResult, is_identifier
from codesearch.search.options import FLUSH_TIMER, SearchOptions, Stats
from codesearch.search.postings import PostingLists
from codesearch.search.present import file_result, repository_info, truncate_file_result
from codesearch.search.sorting import match_key, presented_key

log = logging.getLogger(__name__)


#: The longest query planned. Parsing and planning are linear, about 20 µs per character, and
#: every searcher plans again: 16,384 characters (a third of a second) is more than any query a
#: person or a tool writes, and a megabyte-long query no longer holds a CPU for a minute.
MAX_QUERY_LENGTH = 16_384
#: Queries up to this long are parsed (and, in process, planned) on the event loop by a searcher's
#: ``start`` (`codesearch.search.protocol.Streamer`); a longer one, whose regexes may take
#: milliseconds to compile, in a thread, so that the loop answers other requests meanwhile (a plan
#: of 200 characters takes at most a few milliseconds even for an alternation of literals,
#: typical queries a few tens of microseconds).
INLINE_PLAN_CHARS = 200


def make_plan(query: str, options: SearchOptions) -> Plan:
    """Parse and plan a query; raises `QueryError` (too long, too deep, does not parse) /
    `SearchContextNotFound`."""
    return plan(_parse(query, options), options.contexts)


def check_query(query: str, options: SearchOptions) -> ast.Node:
    """The parsed query, having raised every error `make_plan` raises, without planning it: what
    a caller of searchers needs before it asks them (they plan the query themselves). Parsing a
    query takes microseconds; its plan's trigram queries take 60-450 µs more (a literal, a
    ``sym:`` regex), which the process in the middle of every request has no use for."""
    tree = _parse(query, options)
    check(tree, options.contexts)
    return tree


def _parse(query: str, options: SearchOptions) -> ast.Node:
    if len(query) > MAX_QUERY_LENGTH:
        raise QueryError(f"the query is {len(query)} characters long; at most {MAX_QUERY_LENGTH} are allowed")
    return parse(query, is_regex=options.is_regex, case_sensitive=options.case_sensitive)


def names_identifier(tree: ast.Node) -> bool:
    """`searches_identifiers` for a parsed query: a content term not under a negation is a plain
    identifier."""
    return any(isinstance(n, ast.Content) and is_identifier(n.pattern) for n in ast.positive_leaves(tree))


def search_shards(
    shards: list[Shard], p: Plan, options: SearchOptions, deadline: float, cancelled: Callable[[], bool] | None = None
) -> list[ShardResult]:
    """Evaluate `p` on each shard in order, stopping once the budget is spent, at the
    `deadline` (a `time.monotonic()` instant) or when `cancelled()` turns true: a batch of one
    (`codesearch.search.batch`, where the order of the work is told).

    When the query searches for an identifier, the documents that define it are verified
    first, best definition first across all the shards, so the budget is spent on them and no
    cap hides the definition; then the other candidates, shard by shard. A shard whose
    evaluation fails (a corrupt posting list, say) counts as a crash and the other shards still
    answer. Repositories outside `options.visible_repos` are not searched at all
    (`visibility.visible_shards`).
    """
    return search_batch(shards, [BatchQuery(p, options, deadline, cancelled)])[0]


class PresentedFile(NamedTuple):
    """A searcher's file, ready to merge: ranked (`score`, then `order`: searcher, shard, document),
    counted (`match_count` ranges) and presented (`file`, the ``POST /api/search`` file object). A
    named tuple: it crosses a process boundary with every search, and pickles as small as a tuple."""

    score: int
    order: tuple[int, ...]
    match_count: int
    file: dict[str, Any]
    #: the file's last commit time (Unix seconds, 0 unknown): the key of ``sort: recency``
    time: int = 0


@dataclass
class PartialResult:
    """What one searcher (a process owning some shards) sends back: ranked, capped, presented.

    Plain data (picklable, small): files as ``(score, order, match_count, file_result)`` with
    the `POST /api/search` file shape already built next to the shard contents, so the merge
    needs no access to shards and a search stays one hop from the merging process.
    """

    files: list[PresentedFile] = field(default_factory=list)
    repos: dict[int, dict[str, Any]] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    total_matches: int = 0
    truncated: bool = False
    timed_out: bool = False
    #: Shards of the index this searcher could not open (a checksum refused, truncated, missing):
    #: their documents were not searched, so no answer that includes this one is exhaustive.
    refused: int = 0
    #: The repositories (id → name) whose documents those shards hold, as the caller may see them.
    missing: dict[int, str] = field(default_factory=dict)


class Refusals:
    """The shards a searcher could not open, and the repositories whose documents they hold
    (`manifest.shard_repos`): what every answer of that searcher says it missed (`attach`)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.missing: dict[int, str] = {}

    def add(self, path: str, error: str) -> None:
        log.error("%s", error)
        self.errors.append(error)
        self.missing.update(shard_repos(path))

    def attach(self, out: PartialResult, options: SearchOptions) -> PartialResult:
        """`out`, marked with the refused shards and the missing repositories `options` lets the caller see."""
        if self.errors:
            out.refused = len(self.errors)
            allowed = options.visible_repos
            out.missing = {i: n for i, n in self.missing.items() if allowed is None or i in allowed}
        return out


def missing_repositories(missing: dict[int, str]) -> list[dict[str, Any]]:
    """``missingRepositories`` of an answer (an additive field, docs/http-api.md#search): the
    repositories whose documents the search could not read, by name."""
    return [{"id": i, "name": n} for i, n in sorted(missing.items(), key=lambda item: (item[1], item[0]))]


_Ranked = TypeVar("_Ranked")


def _cap(
    items: list[_Ranked],
    options: SearchOptions,
    count: Callable[[_Ranked], int],
    truncate: Callable[[_Ranked, int], _Ranked],
    content: Callable[[_Ranked], str | None] = lambda _: None,
    folding: Folding | None = None,
) -> tuple[list[_Ranked], bool]:
    """Keep ordered items while the `matches` budget lasts (files and match ranges): `count`
    tells an item's matches, `truncate` cuts one to fewer. With `folding` (`options.fold_copies`),
    a copy of a kept item's `content` is kept free of the budget while `folding` allows."""
    kept: list[_Ranked] = []
    remaining, truncated = options.matches, False
    charged = 0
    for item in items:
        n = count(item)
        if folding is not None and folding.keeps_free(content(item), n):
            kept.append(item)
            continue
        if charged >= options.matches or (remaining <= 0 and n):
            return kept, True
        if n > remaining:
            item = truncate(item, remaining)
            truncated = True
            n = count(item)
        remaining -= n
        charged += 1
        kept.append(item)
        if folding is not None:
            folding.kept(content(item))
    return kept, truncated


def folding_for(options: SearchOptions) -> Folding | None:
    """A search's `Folding` when it folds copies: at most `matches` copies kept free."""
    return Folding(free=options.matches) if options.fold_copies else None


def _content_of(fm: FileMatch) -> str | None:
    oid = fm.shard.content_id(fm.doc)
    return oid.hex() if oid is not None else None


def ranked_files(
    results: list[ShardResult], options: SearchOptions, origin: int = 0, counters: bool = True
) -> tuple[list[FileMatch], PartialResult]:
    """Rank and cap the shard results of one searcher (`origin` orders searchers): the files, best
    first, that `partial_result` presents, and the partial result without them (its counters, left
    at zero without `counters`: a batch's rows have no use for them)."""
    out = PartialResult()
    files: list[FileMatch] = []
    for si, r in enumerate(results):
        if counters:
            out.stats.add(r.stats)
        out.total_matches += r.total_matches
        out.truncated |= r.truncated
        out.timed_out |= r.timed_out
        for fm in r.files:
            fm.order = (origin, si, fm.doc)
            files.append(fm)
    files.sort(key=match_key(options.sort))
    kept, truncated = _cap(files, options, lambda f: f.match_count, truncate_match, _content_of, folding_for(options))
    out.truncated |= truncated
    return kept, out


def partial_result(results: list[ShardResult], options: SearchOptions, origin: int = 0) -> PartialResult:
    """Rank, cap and present the shard results of one searcher (`origin` orders searchers)."""
    kept, out = ranked_files(results, options, origin)
    for fm in kept:
        repo = fm.shard.repo(fm.doc)
        out.repos.setdefault(repo.id, repository_info(repo))
        presented = file_result(fm, options.context_lines, options.whole, options.public_url)
        if options.file_matches:  # (only then: the API's file objects stay Sourcebot's)
            presented["moreMatches"], presented["moreMatchesExact"] = fm.more, fm.more_exact
        out.files.append(PresentedFile(fm.score, fm.order, fm.match_count, presented, fm.shard.commit_time(fm.doc)))
    return out


def _cut(f: PresentedFile, keep: int, options: SearchOptions) -> PresentedFile:
    """A presented file cut to its first `keep` match ranges (`truncate_file_result`); with a
    per-file cap, the ranges cut are counted in its ``moreMatches``."""
    out = truncate_file_result(f.file, keep, options.context_lines)
    if "moreMatches" in out:
        out["moreMatches"] += f.match_count - keep
    return f._replace(match_count=keep, file=out)


def merge_partials(
    partials: list[PartialResult],
    options: SearchOptions,
    started: int,
    plan_ns: int = 0,
    missed: Stats | None = None,
    folding: Folding | None = None,
) -> dict[str, Any]:
    """Merge the answers of many searchers into one ``POST /api/search`` response. `missed`
    counts what searchers that gave no answer would have searched (crashes, shards skipped):
    with any, the answer is not exhaustive. `folding` carries the copies kept free across the
    merges of one stream (`codesearch.app.search.StreamMerger`); a search that folds and gives
    none folds within this merge."""
    stats = Stats()
    files: list[PresentedFile] = []
    repos: dict[int, dict[str, Any]] = {}
    truncated = False
    refused, missing = 0, dict[int, str]()
    if missed is not None:
        stats.add(missed)
        stats.flushReason = missed.flushReason
        truncated = bool(missed.crashes)
    for p in partials:
        refused += p.refused
        missing.update(p.missing)
        stats.add(p.stats)
        stats.totalMatchCount += p.total_matches
        truncated |= p.truncated
        if p.timed_out:
            stats.flushReason = FLUSH_TIMER
        files.extend(p.files)
        repos.update(p.repos)
    files.sort(key=presented_key(options.sort))
    kept, capped = _cap(
        files,
        options,
        lambda f: f.match_count,
        lambda f, keep: _cut(f, keep, options),
        lambda f: f.file.get("contentHash"),
        folding if folding is not None else folding_for(options),
    )
    truncated |= capped
    out_files = [f.file for f in kept]
    stats.actualMatchCount = sum(f.match_count for f in kept)
    stats.totalMatchCount = max(stats.totalMatchCount, stats.actualMatchCount)
    if truncated and stats.totalMatchCount <= stats.actualMatchCount:
        stats.totalMatchCount = stats.actualMatchCount + 1  # there is more than we return
    stats.fileCount = len(out_files)
    stats.matchTreeConstruction = plan_ns
    stats.duration = time.perf_counter_ns() - started
    used = {f["repositoryId"] for f in out_files}
    out: dict[str, Any] = {
        "stats": stats.to_json(),
        "files": out_files,
        "repositoryInfo": [r for rid, r in repos.items() if rid in used],
        "isSearchExhaustive": stats.totalMatchCount <= stats.actualMatchCount and not refused,
    }
    if refused:  # shards that could not be read: say so, and whose documents were not searched
        out["missingRepositories"] = missing_repositories(missing)
    return out


class Searcher:
    """All shards of an index directory, searched in one process."""

    def __init__(self, index_dir: str, verify: bool = True):
        self.index_dir = index_dir
        self.shards: list[Shard] = []
        self.refusals = Refusals()
        if not os.path.isdir(index_dir):
            raise IndexFormatError(index_dir, "index directory does not exist")
        self.verify = verify
        #: the posting lists `search_many` and `files_many` decoded, kept for their next batches
        self.lists = PostingLists()
        self.reload()

    def reload(self) -> None:
        """Follow the index manifest: open shards that appeared, drop those that were replaced,
        apply the tombstones of this version of the index.

        Searches that already hold the old shard list finish on it (the files stay mapped). If
        a shard named by the manifest vanished before it could be opened, a newer manifest has
        replaced it: read the manifest again (a few times at most); a file still missing then is
        refused like a corrupt one. Refused shards are listed in `refusals`: every answer says
        it is not exhaustive and which repositories it missed.
        """
        for attempt in range(5):
            refusals, vanished = Refusals(), False
            old = {s.path: s for s in self.shards}
            shards = []
            for entry in current_index(self.index_dir):
                path = entry.path
                if path in old:
                    shards.append(old.pop(path).with_dead(entry.dead))
                    continue
                try:
                    shards.append(Shard(path, verify=self.verify).with_dead(entry.dead))
                except IndexFormatError as e:
                    if not os.path.exists(path) and attempt < 4:
                        vanished = True
                        break
                    refusals.add(path, str(e))
            if not vanished:
                self.shards, self.refusals = shards, refusals
                return

    @property
    def errors(self) -> list[str]:
        """Why each refused shard was refused (path: reason)."""
        return self.refusals.errors

    def search(
        self,
        query: str,
        matches: int = 100,
        context_lines: int = 0,
        whole: bool = False,
        is_regex: bool = False,
        case_sensitive: bool = False,
        options: SearchOptions | None = None,
    ) -> dict[str, Any]:
        """Run a query; returns the ``POST /api/search`` response as a dict."""
        if options is None:
            options = SearchOptions(
                matches=matches,
                context_lines=context_lines,
                whole=whole,
                is_regex=is_regex,
                case_sensitive=case_sensitive,
            )
        started = time.perf_counter_ns()
        deadline = options.deadline()
        p = make_plan(query, options)
        plan_ns = time.perf_counter_ns() - started
        results = search_shards(list(self.shards), p, options, deadline)
        return merge_partials(
            [self.refusals.attach(partial_result(results, options), options)], options, started, plan_ns
        )

    def search_many(self, queries: Sequence[tuple[str, SearchOptions]]) -> list[dict[str, Any] | CodesearchError]:
        """Run many queries at once, sharing the shards' work (`codesearch.search.batch`): each
        answer is what `search` answers for that query (the ``POST /api/search`` response), or,
        for a query that does not parse or plan, its error in its place. Every query's deadline
        counts from the start of the batch."""
        started = time.perf_counter_ns()
        results, plan_ns = self._batch(queries)
        return [
            r
            if isinstance(r, CodesearchError)
            else merge_partials([self.refusals.attach(partial_result(r, o), o)], o, started, plan_ns)
            for r, (_, o) in zip(results, queries, strict=True)
        ]

    def files_many(self, queries: Sequence[tuple[str, SearchOptions]]) -> list[list[FileMatch] | CodesearchError]:
        """`search_many` before presentation: per query the files its answer holds, ranked and
        capped, with their match ranges (for a caller that reads matches, not Sourcebot's JSON:
        `present.match_lines`); or its error."""
        results, _ = self._batch(queries)
        return [
            r if isinstance(r, CodesearchError) else ranked_files(r, o, counters=False)[0]
            for r, (_, o) in zip(results, queries, strict=True)
        ]

    def _batch(
        self, queries: Sequence[tuple[str, SearchOptions]]
    ) -> tuple[list[list[ShardResult] | CodesearchError], int]:
        """Plan every query and search them together: their shard results (or errors), and the
        nanoseconds planning took."""
        started = time.perf_counter_ns()
        out: list[list[ShardResult] | CodesearchError] = []
        planned: list[tuple[int, BatchQuery]] = []
        for k, (query, options) in enumerate(queries):
            try:
                planned.append((k, BatchQuery(make_plan(query, options), options, options.deadline())))
            except CodesearchError as e:
                out.append(e)
                continue
            out.append([])
        plan_ns = time.perf_counter_ns() - started
        searched = search_batch(list(self.shards), [q for _, q in planned], self.lists)
        for (k, _), shard_results in zip(planned, searched, strict=True):
            out[k] = shard_results
        return out, plan_ns

    async def start(self, query: str, options: SearchOptions, request_id: str | None = None) -> LocalStream:
        """The search of `query` as a stream (`codesearch.search.protocol.Streamer`): planned here, on
        the event loop for a short query and in a thread for a long one (`INLINE_PLAN_CHARS`), then
        searched in a thread when the stream is read. `request_id` is for the protocol (the pool's
        searchers log it); one process has no other log to name it in."""
        deadline = options.deadline()
        if len(query) <= INLINE_PLAN_CHARS:
            p = make_plan(query, options)
        else:
            p = await asyncio.to_thread(make_plan, query, options)
        return LocalStream(list(self.shards), p, options, deadline, self.refusals)

    def close(self) -> None:
        for s in self.shards:
            s.close()


class LocalStream:
    """A search of the in-process `Searcher` (`Searcher.start`): one partial result, the whole
    index's, searched in a worker thread; `abandon` stops it between two documents."""

    def __init__(
        self, shards: list[Shard], p: Plan, options: SearchOptions, deadline: float, refusals: Refusals | None = None
    ):
        self.shards = shards
        self.refusals = refusals or Refusals()
        self.plan = p
        self.options = options
        self.deadline = deadline
        #: Nothing is ever missed in one process: every shard answers or counts its own crash.
        self.missed = Stats()
        self._abandoned = threading.Event()

    async def __aiter__(self) -> AsyncIterator[PartialResult]:
        if self._abandoned.is_set():
            return
        results = await asyncio.to_thread(
            search_shards, self.shards, self.plan, self.options, self.deadline, self._abandoned.is_set
        )
        yield self.refusals.attach(partial_result(results, self.options), self.options)

    def abandon(self) -> None:
        self._abandoned.set()
