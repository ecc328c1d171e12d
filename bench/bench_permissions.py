#!/usr/bin/env python3
"""What the permission rule costs (issue 14): computing who sees what, and searching a subset.

Usage:
    python bench/bench_permissions.py                      # both parts
    python bench/bench_permissions.py --index bench/.work/scale/data-1000/index   # another index

Part 1, the rule (`codesearch.permissions.PermissionPolicy`) over a state database of its own
(SQLite in a temporary directory) with N repositories (N = 1000, 3000, 10000) in two enforcing
connections, a third of them private, 200 users with one linked account each and repo-driven
grants giving each private repository to 10% of the users, plus user-driven grants: the time to
read the repository facts once (shared by every caller, cached 5 s), to compute one user's
visible set (cached 5 s per user), and a cached look-up.

Part 2, the search: the index that bench/bench_scale.py built for N = 1000 repositories over the
974 MB corpus of bench/corpus.py (run it first with ``--n 1000``), searched in this process by
the engine (`Searcher`) for the 7 query classes of bench_engine.py, with ``visible_repos`` None
(no rule), every repository but one, half of them, and 10 of them: p50 of --runs runs per cell,
and the ratio to the unrestricted search. Rows with fewer repositories do less work; the row
"all but one" is the rule's overhead on a caller who sees nearly everything.

A benchmark, not a test: it prints a table and asserts nothing.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _p50(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def rule_costs(ns: list[int], runs: int) -> list[tuple]:
    from codesearch import permissions
    from codesearch.permissions import ConnectionRule, PermissionSettings
    from codesearch.store import Store

    rows = []
    for n in ns:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.open(tmp)
            rng = random.Random(n)
            hosts = {"a": "github:https://a.example.com", "b": "gitlab:https://b.example.com"}
            for name in hosts:
                store.upsert_connection(name, "github", {"type": "github"})
            ids = {}
            for conn in hosts:
                listing = [dict(name=f"{conn}.example.com/org/r{i}", display_name=f"org/r{i}", code_host_type="github",
                                clone_url=f"https://{conn}.example.com/org/r{i}.git", public=rng.random() > 1 / 3,
                                external_id=str(i)) for i in range(n // 2)]
                ids.update(store.upsert_repos(conn, listing).ids)
            users = []
            for u in range(200):
                row = store.create_user(f"u{u}@example.com")
                host = hosts["a" if u % 2 else "b"]
                acc = store.link_account(row.id, provider=host, provider_type="github", host=host, subject=str(u))
                users.append((row, acc, host))
            facts = store.repo_access_facts()
            private = [f.id for f in facts if not f.public]
            by_conn = {f.id: f.connection_ids[0] for f in facts}
            conn_ids = {c.name: c.id for c in store.list_connections()}
            for rid in private:
                host = hosts["a"] if by_conn[rid] == conn_ids["a"] else hosts["b"]
                subjects = [str(u) for u, (_, _, h) in enumerate(users) if h == host and rng.random() < 0.1]
                store.replace_repo_grants(rid, host, subjects)
            for row, acc, host in users[:50]:
                store.replace_account_grants(acc.id, rng.sample(private, min(len(private), 50)))
            permissions.write_settings(store, PermissionSettings(enabled=True, connections={
                name: ConnectionRule(True, False, host) for name, host in hosts.items()}))
            user = users[7][0]

            def cold_facts():
                permissions.PermissionPolicy(lambda: store, ttl_s=60)._snapshot()

            policy = permissions.PermissionPolicy(lambda: store, ttl_s=3600)
            policy._snapshot()

            def cold_user():
                policy._users.clear()
                policy.visible(policy.identity(user))

            seen = len(policy.visible(policy.identity(user)))
            cached = _p50(lambda: policy.visible(policy.identity(user)), runs * 20)
            rows.append((n, seen, _p50(cold_facts, runs), _p50(cold_user, runs), cached))
            store.close()
    return rows


def search_costs(index: str, runs: int) -> list[tuple]:
    from bench_engine import QUERIES

    from codesearch.search.engine import Searcher
    from codesearch.search.options import SearchOptions

    searcher = Searcher(index)
    every = sorted({r.id for s in searcher.shards for r in s.repos})
    rng = random.Random(1)
    subsets = {"no rule": None, "all but one": frozenset(every[1:]),
               "half": frozenset(rng.sample(every, len(every) // 2)), "10 repos": frozenset(rng.sample(every, 10))}
    rows = []
    for q in QUERIES:
        cells = {}
        for label, visible in subsets.items():
            opts = SearchOptions(matches=100, context_lines=0, is_regex=q.is_regex, case_sensitive=q.case_sensitive,
                                 visible_repos=visible)
            query = q.cs_query
            searcher.search(query, options=opts)  # warm
            cells[label] = _p50(lambda: searcher.search(query, options=opts), runs)
        rows.append((q.cls, cells))
    return rows, len(every)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, nargs="*", default=[1000, 3000, 10000])
    ap.add_argument("--index", default=str(ROOT / "bench/.work/scale/data-1000/index"))
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()

    print("## The rule: PermissionPolicy over a state database (SQLite), 200 users\n")
    print("| repositories | visible to the user | repository facts (cold) | one user's set (cold) | cached |")
    print("|---:|---:|---:|---:|---:|")
    for n, seen, facts, user, cached in rule_costs(args.n, args.runs):
        print(f"| {n} | {seen} | {facts * 1000:.1f} ms | {user * 1000:.1f} ms | {cached * 1e6:.1f} µs |")

    if not os.path.isdir(args.index):
        print(f"\n(no index at {args.index}: run bench/bench_scale.py --n 1000 first for part 2)")
        return
    rows, repos = search_costs(args.index, args.runs)
    labels = ["no rule", "all but one", "half", "10 repos"]
    print(f"\n## Searching a subset: engine over {args.index} ({repos} repositories), p50 of {args.runs}\n")
    print("| query class | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for name, cells in rows:
        base = cells["no rule"]
        parts = [f"{base * 1000:.1f} ms"] + [f"{cells[k] * 1000:.1f} ms ({cells[k] / base:.2f}×)" for k in labels[1:]]
        print(f"| {name} | " + " | ".join(parts) + " |")


if __name__ == "__main__":
    main()
