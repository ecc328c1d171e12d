#!/usr/bin/env python3
"""Where a search's time goes between the API replica and the searchers (issue 25).

Usage:
    python bench/bench_fanout.py --index DIR                     # this tree
    python bench/bench_fanout.py --index DIR --against 500fec6   # and the code of another commit

For each tree (this one, and with --against a copy of that commit's tree, as bench_http_path.py
makes it), a process of its own (``PYTHONPATH`` = the tree) starts a local Ray instance, a
`SearcherPool` of --searchers searchers over --index, and from an event loop (as a replica does)
runs each query --rounds times through ``start`` and ``async for`` (the searcher protocol). The searchers'
`make_plan` and `partial_result` are wrapped (in the searcher processes, through ``__ray_call__``)
to stamp each answer with the wall time its search started and ended, so each answer's time
splits into: the replica checking or planning the query and sending the tasks; the trip to the
searcher; the search; the trip back to the replica's event loop. Prints the p50 of each part, and
the CPU time per search of the caller and of the searchers together (read from ``/proc``). The
searches go as a replica's do: over the searchers' local links once connected
(`codesearch.runtime.search_link`), through Ray with ``CODESEARCH_SEARCH_LINK=off`` in the
environment or in a tree from before the links.

Wall clocks of processes of one machine agree closely enough for this (microseconds); the
machine's load shows in every part (the script prints the load average; the trees are measured in
turn, query by query). No HTTP: what Serve's proxy and the app add is bench_http_path.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_http_path import ROOT, WORK, machine, tree_at  # noqa: E402

#: Runs in a process whose PYTHONPATH is the tree measured; prints one JSON object.
SCRIPT = r"""
import asyncio, json, statistics, sys, time
import ray
from codesearch.runtime.searchers import SearcherPool
from codesearch.search.options import SearchOptions

index, searchers, rounds, queries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
pool = SearcherPool.create(index, searchers)


def stamp(self):
    import threading, time
    try:
        from codesearch.runtime import shard_searcher as S
    except ImportError:  # a tree from before runtime/searchers.py was split
        from codesearch.runtime import searchers as S
    if getattr(S, "_bench_stamped", False):
        return
    local = threading.local()
    make_plan, partial_result = S.make_plan, S.partial_result

    def planned(*a, **k):
        local.started = time.time()
        return make_plan(*a, **k)

    def presented(*a, **k):
        out = partial_result(*a, **k)
        out.bench_started, out.bench_ended = local.started, time.time()
        return out

    S.make_plan, S.partial_result, S._bench_stamped = planned, presented, True


ray.get([a.__ray_call__.remote(stamp) for a in pool.actors])
pids = ray.get([a.__ray_call__.remote(lambda self: __import__("os").getpid()) for a in pool.actors])


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / __import__("os").sysconf("SC_CLK_TCK")
options = SearchOptions(matches=100, public_url="http://127.0.0.1")


async def one(query):
    t0 = time.time()
    fan = await (pool.start(query, options) if hasattr(pool, "start") else pool.fan_out_async(query, options))
    sent = time.time()
    answers = []
    # (fan_out_async and partials_async: a tree from before the searcher protocol)
    async for p in (fan if hasattr(type(fan), "__aiter__") else fan.partials_async()):
        answers.append((p.bench_started, p.bench_ended, time.time()))
    return t0, sent, answers, time.time()


async def main():
    out = {}
    for query in queries:
        for _ in range(max(10, rounds // 10)):
            await one(query)
        caller, searchers = time.process_time(), [cpu_s(p) for p in pids]
        runs = [await one(query) for _ in range(rounds)]
        caller, searchers = time.process_time() - caller, sum(cpu_s(p) for p in pids) - sum(searchers)
        ms = lambda xs: round(statistics.median(xs) * 1000, 2)
        row = {"check and send": ms([r[1] - r[0] for r in runs]), "total": ms([r[3] - r[0] for r in runs]),
               "CPU per search: caller": round(caller / rounds * 1000, 2),
               "CPU per search: searchers": round(searchers / rounds * 1000, 2)}
        for i in range(len(runs[0][2])):
            row[f"answer {i + 1}: to the searcher"] = ms([r[2][i][0] - r[0] for r in runs])
            row[f"answer {i + 1}: search"] = ms([r[2][i][1] - r[2][i][0] for r in runs])
            row[f"answer {i + 1}: back"] = ms([r[2][i][2] - r[2][i][1] for r in runs])
        out[query] = row
    return out


print(json.dumps(asyncio.run(main())))
pool.close()
ray.shutdown()
"""


def measure(tree: Path, index: Path, searchers: int, rounds: int, queries: list[str], extra: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree), "RAY_AUTH_MODE": "disabled", **extra}
    for name in ("RAY_ADDRESS",):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(index), str(searchers), str(rounds), json.dumps(queries)],
                          cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, default=WORK / "venv-600-300" / "data" / "index",
                    help="an index directory (default: bench_http_path.py --venv-repos 600's)")
    ap.add_argument("--against", metavar="REV", help="also measure the code of this commit")
    ap.add_argument("--queries", nargs="+", default=["getproxies_environment", "zq_no_such_identifier_anywhere_q"])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--without-link", action="store_true",
                    help="also measure this tree with the searchers' local links off (every search a Ray task)")
    a = ap.parse_args()
    if not a.index.is_dir():
        ap.error(f"{a.index} is not an index directory (make it with bench_http_path.py --venv-repos 600)")
    trees: list[tuple[str, Path, dict]] = [("this tree", ROOT, {})]
    if a.without_link:
        trees.append(("this tree, links off", ROOT, {"CODESEARCH_SEARCH_LINK": "off"}))
    if a.against:
        tree, sha = tree_at(a.against)
        trees.append((f"{a.against} ({sha})", tree, {}))
    results: dict[str, dict] = {label: {} for label, _, _ in trees}
    for query in a.queries:  # the trees in turn, query by query: a change of load falls on both
        for label, tree, extra in trees:
            results[label].update(measure(tree, a.index, a.searchers, a.rounds, [query], extra))
    print(f"machine: {machine()}; load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{a.searchers} searchers over {a.index}; p50 of {a.rounds} searches, ms\n")
    for query in a.queries:
        parts = list(results[trees[0][0]][query])  # (a part only one tree has shows as nan elsewhere)
        print(f"`{query}`\n")
        print("| part | " + " | ".join(label for label, _, _ in trees) + " |")
        print("|---|" + "---:|" * len(trees))
        for part in parts:
            print(f"| {part} | " + " | ".join(f"{results[label][query].get(part, float('nan')):.2f}"
                                             for label, _, _ in trees) + " |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
