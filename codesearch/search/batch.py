"""Many searches over the same shards at once, each answered exactly as if it ran alone.

`search_batch` is the shard loop of a search, for one query or many: for each query it returns
what that query alone gets (`codesearch.search.engine.search_shards` is the batch of one, so
there is one way shards are searched). What many queries share:

- the shards, opened once by the caller (a `Searcher`, a read task of `codesearch.data`);
- the posting lists: every trigram the queries of a batch may ask a shard about is looked up in
  one vectorised pass over its dictionary, and each list decoded once for all of them and for the
  caller's next batches (`codesearch.search.postings`; a search alone uses the trigram index's
  cache of recently decoded lists, `TrigramIndex.postings`);
- the documents: shard by shard, the candidates of every query still searching are merged in
  document order (`_sweep`), and each document is read once (`SharedDocument`) for every query
  that checks it, then the next. Each query still checks its own candidates in its own order and
  stops at its own budget (`Verification`), so the merge changes what is read, not what is found.

Per query, as a search alone: the documents that define a searched identifier are checked first,
best first over all shards (`definitions_first`); then the shards in order, each with what is
left of the `matches` budget; once the budget is spent or the deadline passed, the remaining
shards are skipped. A shard whose search fails counts as a crash for that query alone.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from pyroaring import BitMap

from codesearch.index.format import symbol_key
from codesearch.index.shard import Shard
from codesearch.query import ast
from codesearch.query.planner import Plan
from codesearch.search.evaluate import (
    ShardEvaluator,
    ShardResult,
    Verification,
    identifier_leaves,
    searches_identifiers,
)
from codesearch.search.options import SearchOptions
from codesearch.search.postings import PostingLists, PostingTable, content_trigrams
from codesearch.search.visibility import visible_shards

log = logging.getLogger(__name__)


@dataclass
class BatchQuery:
    """One query of a batch: its plan, options (`matches`, the repositories it may see), the
    `time.monotonic()` instant it must end by, and what says it was abandoned."""

    plan: Plan
    options: SearchOptions
    deadline: float
    cancelled: Callable[[], bool] | None = None


class SharedDocument:
    """The document a sweep of one shard is at, read at most once whoever checks it: the
    `DocReader` of every evaluator of the sweep. A document other than the current one (none is
    asked for in a sweep; kept for safety) is read from the shard as usual."""

    def __init__(self, shard: Shard):
        self.shard = shard
        self.doc = -1
        self._content: bytes | None = None
        self._names: list[bytes] | None = None

    def at(self, doc: int) -> None:
        if doc != self.doc:
            self.doc, self._content, self._names = doc, None, None

    def content(self, doc: int) -> bytes:
        if doc != self.doc:
            return self.shard.content(doc)
        if self._content is None:
            self._content = self.shard.content(doc)
        return self._content

    def content_view(self, doc: int) -> memoryview | bytes:
        if doc == self.doc and self._content is not None:
            return self._content
        return self.shard.content_view(doc)

    def symbol_names(self, doc: int) -> list[bytes]:
        if doc != self.doc:
            return self.shard.symbol_names(doc)
        if self._names is None:
            self._names = self.shard.symbol_names(doc)
        return self._names


@dataclass
class _Search:
    """One query's progress through the shards of a batch."""

    query: BatchQuery
    #: shard index in the batch → the shard as this query sees it (`visible_shards`)
    views: dict[int, Shard]
    #: the shards this query searches, in order (the values of `views`)
    visible: list[Shard]
    #: shard index in the batch → its position among `visible`
    positions: dict[int, int]
    first: dict[int, tuple[ShardResult, BitMap]]
    #: the trigrams its plan may look up in a shard's content index (`content_trigrams`)
    trigrams: list[int]
    found: int = 0
    results: list[ShardResult] = field(default_factory=list)
    stopped: bool = False

    def close(self, position: int, result: ShardResult) -> None:
        """Record the result of the shard at `position` (among `visible`)."""
        self.found += result.total_matches
        self.results.append(_combine(self.first[position][0], result) if position in self.first else result)


@dataclass
class _Job:
    """One query checking one shard in a sweep."""

    search: _Search
    position: int
    evaluator: ShardEvaluator
    verification: Verification
    started_ns: int
    candidates: Iterator[int]
    error: Exception | None = None


def search_batch(
    shards: list[Shard], queries: Sequence[BatchQuery], lists: PostingLists | None = None
) -> list[list[ShardResult]]:
    """Search `shards` (in order) for every query of `queries`: per query, its shard results, the
    same as a search of that query alone. `lists` keeps the posting lists decoded for many queries
    across the batches of one caller (a search alone uses the trigram index's cache). See the
    module docstring."""
    searches = [_begin(shards, q) for q in queries]
    if len(queries) > 1 and lists is None:
        lists = PostingLists()
    for i, shard in enumerate(shards):
        jobs: list[_Job] = []
        shared = SharedDocument(shard)
        entering = [s for s in searches if not s.stopped and i in s.views]
        table = _table(shard, entering, lists) if lists is not None and len(entering) > 1 else None
        for s in entering:
            job = _enter(s, i, shared, table)
            if job is not None:
                jobs.append(job)
        _sweep(jobs, shared)
        for job in jobs:
            view = job.search.views[i]
            if job.error is not None:
                job.search.close(job.position, _crashed(view, job.error))
            else:
                job.verification.finish(job.started_ns)
                job.search.close(job.position, job.evaluator.result)
    return [s.results for s in searches]


def _begin(shards: list[Shard], q: BatchQuery) -> _Search:
    """A query's search before its first shard: the shards it may see, its definitions checked."""
    views = {}
    for i, shard in enumerate(shards):
        seen = visible_shards([shard], q.options.visible_repos)
        if seen:
            views[i] = seen[0]
    visible = list(views.values())
    first = (
        definitions_first(visible, q.plan, q.options, q.deadline, q.cancelled) if searches_identifiers(q.plan) else {}
    )
    s = _Search(q, views, visible, {i: j for j, i in enumerate(views)}, first, list(content_trigrams(q.plan.root)))
    s.found = sum(r.total_matches for r, _ in first.values())
    return s


def _table(shard: Shard, entering: list[_Search], lists: PostingLists) -> PostingTable:
    """The posting lists of `shard` that the queries about to search it may need, looked up together."""
    index = shard.content_index
    return PostingTable(index, itertools.chain.from_iterable(s.trigrams for s in entering), lists.of(index), shard.path)


def _enter(s: _Search, i: int, shared: SharedDocument, table: PostingTable | None = None) -> _Job | None:
    """Start query `s` on shard `i`: a job for the sweep, or None when the shard is already
    answered (skipped, no candidate, failed)."""
    q, position = s.query, s.positions[i]
    late = _late(q.deadline, q.cancelled)
    if s.found > q.options.search_budget or late:
        skipped = ShardResult(truncated=True, timed_out=late)
        skipped.stats.shardsSkipped = len(s.visible) - position
        s.results.extend(s.first[j][0] for j in range(position, len(s.visible)) if j in s.first)
        s.results.append(skipped)
        s.stopped = True
        return None
    done = s.first[position][1] if position in s.first else None
    started = time.perf_counter_ns()
    view = s.views[i]
    budget = q.options.search_budget - s.found
    ev = ShardEvaluator(
        view,
        q.plan,
        budget,
        q.deadline,
        q.cancelled,
        reader=shared,
        file_matches=q.options.file_matches,
        content_lookup=table,
    )
    try:
        v = ev.verification(done)
    except Exception as e:  # one bad shard must not fail the search
        s.close(position, _crashed(view, e))
        return None
    if v is None:
        s.close(position, ev.result)
        return None
    return _Job(s, position, ev, v, started, iter(v.candidates))


def _sweep(jobs: list[_Job], shared: SharedDocument) -> None:
    """Feed every job its candidates, all jobs' candidates merged in document order, each
    document read once (`shared`) for the jobs that check it; a job leaves at its first False
    or failure."""
    heap: list[tuple[int, int]] = []
    for k, job in enumerate(jobs):
        doc = next(job.candidates, None)
        if doc is not None:
            heap.append((doc, k))
    heapq.heapify(heap)
    while heap:
        doc, k = heapq.heappop(heap)
        shared.at(doc)
        job = jobs[k]
        try:
            going = job.verification.step(doc)
        except Exception as e:  # noqa: BLE001 - the shard's failure for this query (`_crashed`)
            job.error, going = e, False
        if going:
            following = next(job.candidates, None)
            if following is not None:
                heapq.heappush(heap, (following, k))


def definitions_first(
    shards: list[Shard], p: Plan, options: SearchOptions, deadline: float, cancelled: Callable[[], bool] | None
) -> dict[int, tuple[ShardResult, BitMap]]:
    """Verify the documents that define a searched identifier, best definition first over all
    `shards`, within the `matches` budget: shard index → (its result, the documents checked).
    So a cap never hides the file that defines what was searched."""
    evaluators: dict[int, ShardEvaluator] = {}
    roots: dict[int, ast.Node] = {}
    ranked: list[tuple[int, int, int]] = []  # (-bonus, shard index, document)
    names = {leaf.node.pattern.encode("utf-8") for leaf in identifier_leaves(list(ast.positive_leaves(p.root)))}
    keys = np.array(sorted(symbol_key(n) for n in names), dtype=np.uint64)
    for i, shard in enumerate(shards):
        if not shard.may_define(keys):
            continue
        ev = ShardEvaluator(shard, p, options.search_budget, deadline, cancelled, file_matches=options.file_matches)
        try:
            root = ev.start()
            if root is not None:
                ranked.extend((-bonus, i, doc) for bonus, doc in ev.ranked_definitions(options.search_budget + 1))
        except Exception as e:  # noqa: BLE001 - the second pass reports the shard's failure
            log.error("definitions of %s failed: %s", shard.path, e)
            continue
        if root is not None:  # (a shard that no document can match has no definitions)
            evaluators[i], roots[i] = ev, root
    ranked.sort()
    found = 0
    for _, i, doc in ranked:
        if found > options.search_budget or _late(deadline, cancelled):
            evaluators[i].result.truncated = True
            break
        ev = evaluators[i]
        ev.stats.shardsScanned = 1
        fm = ev.check(roots[i], doc, options.search_budget - found + 1)
        found += fm.match_count if fm is not None else 0
    return {i: (ev.result, ev.verified) for i, ev in evaluators.items() if ev.verified}


def _late(deadline: float, cancelled: Callable[[], bool] | None) -> bool:
    return time.monotonic() > deadline or (cancelled is not None and cancelled())


def _crashed(shard: Shard, e: Exception) -> ShardResult:
    log.error("search of %s failed: %s", shard.path, e)
    r = ShardResult(truncated=True)
    r.stats.crashes = 1
    return r


def _combine(definitions: ShardResult, rest: ShardResult) -> ShardResult:
    """One shard's two passes as one result (definitions first)."""
    out = ShardResult(
        files=definitions.files + rest.files,
        stats=rest.stats,
        total_matches=definitions.total_matches + rest.total_matches,
        truncated=definitions.truncated or rest.truncated,
        timed_out=definitions.timed_out or rest.timed_out,
    )
    d = definitions.stats
    for k in (
        "filesConsidered",
        "filesLoaded",
        "contentBytesLoaded",
        "regexpsConsidered",
        "matchTreeSearch",
        "crashes",
    ):
        setattr(out.stats, k, getattr(out.stats, k) + getattr(d, k))
    out.stats.shardsScanned = max(out.stats.shardsScanned, d.shardsScanned)
    return out
