"""What a query costs, shard by shard: the parsed query, the plan with each leaf's trigram
query, and per shard how many documents the posting lists leave as candidates and what that took.

This runs the first half of `ShardEvaluator.run` (repository predicates folded to constants,
candidates from the posting lists, the default-branch rule) without verifying any document, so
an explanation is cheap and its candidate counts are exactly what a search would verify.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
from pyroaring import BitMap

from codesearch.index.shard import Shard
from codesearch.query import ast
from codesearch.query.planner import Plan, render
from codesearch.search.evaluate import ShardEvaluator, _resolve_repos
from codesearch.search.options import Stats


def explain_shard(shard: Shard, plan: Plan) -> dict[str, Any]:
    """``{shard, documents, skipped, candidates, candidateBytes, exact, trigramLookups,
    indexBytesLoaded, durationNs}`` for one shard (`skipped`: repo predicates or the empty shard
    rule it out; `candidateBytes`: the content a search would verify at most, without a cap).
    A search's own `stats` then say what it verified: `ngramMatches` candidate files,
    `filesConsidered` checked, `contentBytesLoaded` bytes verified."""
    t0 = time.perf_counter_ns()
    ev = ShardEvaluator(shard, plan, budget=1, deadline=float("inf"))
    live = len(shard.docs_where("all")) if shard.dead else shard.doc_count  # tombstoned or hidden ones do not count
    out: dict[str, Any] = {
        "shard": os.path.basename(shard.path),
        "documents": live,
        "skipped": False,
        "candidates": 0,
        "candidateBytes": 0,
        "exact": True,
        "trigramLookups": 0,
        "indexBytesLoaded": 0,
    }
    root = _resolve_repos(plan.root, shard.live_repos)
    if isinstance(root, ast.Const) and not root.value or shard.doc_count == 0 or not shard.live_repos:
        out["skipped"] = True
    else:
        cand, exact = ev.candidates(root)
        if plan.default_branch_only:
            on_default = shard.docs_where("default-branch")
            cand = on_default if cand is None else cand & on_default
        elif cand is not None and shard.dead:
            cand = cand & shard.docs_where("all")
        docs = shard.docs_where("all") if cand is None else cand
        out["candidates"] = len(docs)
        out["candidateBytes"] = _content_bytes(shard, docs)
        out["exact"] = bool(exact)
    stats: Stats = ev.stats
    out["trigramLookups"] = stats.ngramLookups
    out["indexBytesLoaded"] = stats.indexBytesLoaded
    out["durationNs"] = time.perf_counter_ns() - t0
    return out


def _content_bytes(shard: Shard, docs: BitMap) -> int:
    """Bytes of content of `docs`: what verifying all of them would read."""
    if not docs:
        return 0
    ids = np.fromiter(docs, dtype=np.int64, count=len(docs))
    offs = shard.cont_offs.astype(np.int64)
    return int((offs[ids + 1] - offs[ids]).sum())


def explain(plan: Plan, shards: Iterable[Shard]) -> dict[str, Any]:
    """The whole explanation for one process's shards."""
    per_shard = [explain_shard(s, plan) for s in shards]
    return {
        "query": str(plan.query),
        "plan": render(plan.root),
        "defaultBranchOnly": plan.default_branch_only,
        "shards": per_shard,
        "documents": sum(s["documents"] for s in per_shard),
        "candidates": sum(s["candidates"] for s in per_shard),
        "candidateBytes": sum(s["candidateBytes"] for s in per_shard),
    }
