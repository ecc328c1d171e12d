"""The engine's front door: parse, plan, evaluate every shard, merge, present.

`search_shards` is the unit a Ray shard searcher will run over the shards it owns;
`merge_results` combines the results of many shards (or many searchers) into one ranked,
capped answer; `Searcher` does both in one process over an index directory.
"""

from __future__ import annotations

import logging
import os
import time

from codesearch.errors import IndexFormatError
from codesearch.index.format import SUFFIX
from codesearch.index.shard import Shard
from codesearch.query.parser import parse
from codesearch.query.planner import Plan, plan
from codesearch.search.evaluate import FileMatch, ShardResult, evaluate_shard
from codesearch.search.options import FLUSH_FINAL, FLUSH_TIMER, SearchOptions, Stats
from codesearch.search.present import file_result, repository_info

log = logging.getLogger(__name__)


def make_plan(query: str, options: SearchOptions) -> Plan:
    """Parse and plan a query; raises `QueryParseError` / `SearchContextNotFound`."""
    return plan(parse(query, is_regex=options.is_regex, case_sensitive=options.case_sensitive), options.contexts)


def search_shards(shards: list[Shard], p: Plan, options: SearchOptions, deadline: float) -> list[ShardResult]:
    """Evaluate `p` on each shard in order, stopping once the budget is spent.

    A shard whose evaluation fails (a corrupt posting list, say) counts as a crash and the
    other shards still answer.
    """
    results: list[ShardResult] = []
    found = 0
    for i, shard in enumerate(shards):
        if found > options.matches or time.monotonic() > deadline:
            skipped = ShardResult(truncated=True)
            skipped.stats.shardsSkipped = len(shards) - i
            results.append(skipped)
            break
        try:
            r = evaluate_shard(shard, p, options.matches - found, deadline)
        except Exception as e:  # one bad shard must not fail the search
            log.error("search of %s failed: %s", shard.path, e)
            r = ShardResult(truncated=True)
            r.stats.crashes = 1
        results.append(r)
        found += r.total_matches
    return results


def merge_results(results: list[ShardResult], options: SearchOptions, started: float, plan_ns: int = 0) -> dict:
    """Rank, cap and present the results of many shards as one ``POST /api/search`` response."""
    stats = Stats()
    files: list[FileMatch] = []
    truncated = False
    for si, r in enumerate(results):
        stats.add(r.stats)
        stats.totalMatchCount += r.total_matches
        truncated |= r.truncated
        for fm in r.files:
            fm.order = (si, fm.doc)
            files.append(fm)
        if r.timed_out:
            stats.flushReason = FLUSH_TIMER
    files.sort(key=lambda f: (-f.score, f.order))
    kept: list[FileMatch] = []
    remaining = options.matches
    for fm in files:
        if len(kept) >= options.matches or (remaining <= 0 and fm.match_count):
            truncated = True
            break
        if fm.match_count > remaining:
            fm.name_ranges = fm.name_ranges[:remaining]
            fm.ranges = fm.ranges[: remaining - len(fm.name_ranges)]
            kept_ranges = set(fm.ranges)
            fm.symbol_hits = [h for h in fm.symbol_hits if (h.start, h.end) in kept_ranges]
            truncated = True
        remaining -= fm.match_count
        kept.append(fm)
    out_files = [file_result(fm, options.context_lines, options.whole, options.public_url) for fm in kept]
    repos = {}
    for fm in kept:
        repo = fm.shard.repo(fm.doc)
        repos.setdefault(repo.id, repo)
    stats.actualMatchCount = sum(fm.match_count for fm in kept)
    stats.totalMatchCount = max(stats.totalMatchCount, stats.actualMatchCount)
    if truncated and stats.totalMatchCount <= stats.actualMatchCount:
        stats.totalMatchCount = stats.actualMatchCount + 1  # there is more than we return
    stats.fileCount = len(kept)
    stats.matchTreeConstruction = plan_ns
    stats.duration = time.perf_counter_ns() - started
    return {
        "stats": stats.to_json(),
        "files": out_files,
        "repositoryInfo": [repository_info(r) for r in repos.values()],
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
        for name in sorted(os.listdir(index_dir)):
            if name.endswith(SUFFIX) and not name.startswith("."):
                try:
                    self.shards.append(Shard(os.path.join(index_dir, name), verify=verify))
                except IndexFormatError as e:
                    log.error("%s", e)
                    self.errors.append(str(e))

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
        results = search_shards(self.shards, p, options, deadline)
        return merge_results(results, options, started, plan_ns)

    def close(self) -> None:
        for s in self.shards:
            s.close()
