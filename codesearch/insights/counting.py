"""Count queries over a `Snapshot`: per commit, the matches and the matching files.

The engine evaluates each query on each shard of the snapshot exactly as a search does
(`codesearch.search.evaluate.ShardEvaluator`: trigram candidates, then every candidate
verified), with a budget no count reaches, so nothing is capped. The search's own front door
(`Searcher.search`) would present files by path: two blobs at one path (the file before and
after a change) would be indistinguishable there, while the evaluator answers with document
numbers, whose commit masks say which commits each count belongs to.

What a query counts (`PointCount` in `codesearch.insights.spec`): the match ranges of its
content and symbol terms that are not under a negation, as the search shows them; a query
without such terms (``file:\\.proto$``) counts each matching file once. A document whose
verification ran out of time would make a count wrong without saying so: it is an error.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from codesearch.errors import CodesearchError
from codesearch.index.shard import Shard
from codesearch.query import ast
from codesearch.query.planner import ContentLeaf, Plan, SymbolLeaf
from codesearch.search.evaluate import ShardEvaluator

__all__ = ["Counts", "count_plan", "counts_content"]

#: A budget no count reaches (the evaluator stops past its budget of matches or files).
_UNBOUNDED = 1 << 62


@dataclass
class Counts:
    """Per commit (bit i of the snapshot's masks): matches and matching files of one query."""

    matches: list[int]
    files: list[int]


def counts_content(plan: Plan) -> bool:
    """Whether the plan has a content or symbol term outside any negation (then its matches are
    counted; otherwise its matching files)."""
    return any(isinstance(n, (ContentLeaf, SymbolLeaf)) for n in ast.positive_leaves(plan.root))


def count_plan(shards: Sequence[Shard], plan: Plan, commits: int, deadline: float, what: str) -> Counts:
    """The counts of `plan` per commit over `shards` (`codesearch.index.shard.Shard`s whose
    documents carry commit masks over `commits` commits). `what` names the query and the
    repository in errors. CodesearchError when the `deadline` (a ``time.monotonic()`` instant)
    passes or a document's verification runs out of time."""
    content = counts_content(plan)
    by_mask: dict[int, list[int]] = {}  # commit mask → [matches, files]
    for shard in shards:
        result = ShardEvaluator(shard, plan, _UNBOUNDED, deadline).run()
        if result.timed_out or result.truncated or result.stats.crashes:
            late = time.monotonic() > deadline
            raise CodesearchError(
                f"{what}: the count {'ran out of time' if late else 'is incomplete (a file took too long to check)'}"
            )
        for fm in result.files:
            mask = shard.branch_bits(fm.doc)
            acc = by_mask.setdefault(mask, [0, 0])
            acc[0] += len(fm.ranges) if content else 1
            acc[1] += 1
    matches, files = [0] * commits, [0] * commits
    for mask, (m, f) in by_mask.items():
        for bit in range(commits):
            if mask >> bit & 1:
                matches[bit] += m
                files[bit] += f
    return Counts(matches, files)
