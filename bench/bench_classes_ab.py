#!/usr/bin/env python3
"""The query classes of bench_engine.py in-process, this tree against the code of another commit.

Usage:
    python bench/bench_classes_ab.py --index DIR --against REV [--rounds 2] [--runs 7]
    python bench/bench_classes_ab.py --index DIR --other-index DIR2   # this tree over two indexes

What a change to the search path is worth, measured over an index that exists (the 10 GB one
takes 20 s to open and 9 minutes to build, so bench_engine.py's whole run is not needed for
it): for each tree (this one, and a copy of commit REV's package made as bench_http_path.py
makes it), a process of its own (``PYTHONPATH`` = the tree) opens a `Searcher` over --index and
runs each class of `bench_engine.QUERIES` once to warm up, then --runs times, capped at
``matches=100`` as bench_engine does. The trees take turns, --rounds times each, so a change in
the machine's load shows in both; the table gives per class the median over all of a tree's
runs, the ratio, and whether the two trees returned the same files (a faster wrong answer is
worse than a slow right one). With --corpus and --csearch-index, the capped classes (those
bench_engine.py compares with ``| head -n 100``: the others read the whole corpus in rg) are also
timed in ``csearch | head -n 100`` and ``rg | head -n 100`` between the turns, as its
``--capped-peers-only`` does.

With --other-index instead of --against, this tree is measured over two indexes of the same
corpus (built by two versions of the builder): what a change of the index is worth.

With --cold, the shards' posting list caches are emptied before every timed run: a search
repeated 7 times decodes its posting lists once and then finds them cached, which a user's new
query does not (at 10 GB an any-case rare literal took 14 ms warm and 48 ms cold).

The other tree needs the compiled kernels: the extension of this checkout is copied into it when
its ``kernels.c`` is the same, else its own is built there (``setup.py build_ext --inplace``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_engine import QUERIES, make_rg_runner  # noqa: E402
from bench_http_path import ROOT, machine, tree_at  # noqa: E402
from peers import make_csearch_runner  # noqa: E402

#: Runs in a process whose PYTHONPATH is the tree measured; prints one JSON object.
SCRIPT = r"""
import json, sys, time
from codesearch.search.engine import Searcher

index, runs, cases, cold = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4] == "1"
s = Searcher(index)


def forget():
    # a query not asked before: no posting list of it decoded yet (the trigram indexes' caches)
    for shard in s.shards:
        for ix in (shard.content_index, shard.name_index):
            ix._lookup.cache_clear()
            ix._sizes.cache_clear()


out = {}
for name, query, is_regex, case_sensitive in cases:
    def one():
        return s.search(query, matches=100, is_regex=is_regex, case_sensitive=case_sensitive)
    first = one()
    times = []
    for _ in range(runs):
        if cold:
            forget()
        t = time.perf_counter()
        one()
        times.append((time.perf_counter() - t) * 1e3)
    files = sorted([f["repository"], f["fileName"]["text"]] for f in first["files"])
    out[name] = {"ms": times, "files": files, "loaded": first["stats"]["contentBytesLoaded"]}
print(json.dumps(out))
"""


def with_kernels(tree: Path) -> None:
    """Give `tree` compiled kernels: this checkout's when they are built from the same source,
    else its own, built in place with this checkout's setup.py (the compiler flags of a release)."""
    ours = ROOT / "codesearch" / "index"
    theirs = tree / "codesearch" / "index"
    if list(theirs.glob("_kernels*.so")) or not (theirs / "kernels.c").exists():
        return
    if (theirs / "kernels.c").read_bytes() == (ours / "kernels.c").read_bytes():
        for so in ours.glob("_kernels*.so"):
            shutil.copy2(so, theirs / so.name)
        return
    shutil.copy2(ROOT / "setup.py", tree / "setup.py")
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "--build-temp", "build"], cwd=tree,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: building its kernels failed:\n{done.stderr}")


def run(tree: Path, index: str, runs: int, cold: bool = False) -> dict:
    cases = [[q.cls, q.cs_query, q.is_regex, q.case_sensitive] for q in QUERIES]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, index, str(runs), json.dumps(cases), "1" if cold else "0"],
                          env=env, capture_output=True, text=True, cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, help="an index directory (`codesearch index` output)")
    ap.add_argument("--against", metavar="REV", help="the commit to compare with")
    ap.add_argument("--other-index", help="or: the index to compare --index with, this tree over both")
    ap.add_argument("--rounds", type=int, default=2, help="turns of each tree (default 2)")
    ap.add_argument("--runs", type=int, default=7, help="timed runs per class and turn (default 7)")
    ap.add_argument("--corpus", help="the corpus the index was built from (for rg)")
    ap.add_argument("--csearch-index", help="cindex's index of --corpus (for csearch)")
    ap.add_argument("--cold", action="store_true",
                    help="empty the shards' posting list caches before every timed run: each run is a query "
                         "the searcher has not decoded yet, as a user's new query is")
    a = ap.parse_args()
    if bool(a.against) == bool(a.other_index):
        ap.error("give one of --against and --other-index")
    a.index = os.path.abspath(a.index)  # the trees run in their own directories
    if a.against:
        other, sha = tree_at(a.against)
        with_kernels(other)
        trees = [("this tree", ROOT, a.index), (f"{a.against} ({sha})", other, a.index)]
    else:
        trees = [(a.index, ROOT, a.index), (a.other_index, ROOT, os.path.abspath(a.other_index))]
    print(machine(), "· load average", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    got: dict[str, dict[str, list[float]]] = {label: {} for label, _, _ in trees}
    files: dict[str, dict[str, list]] = {label: {} for label, _, _ in trees}
    loaded: dict[str, dict[str, int]] = {label: {} for label, _, _ in trees}
    capped = [q for q in QUERIES if "capped" in q.cls] if a.corpus and a.csearch_index else []
    peers = {"csearch | head": {}, "rg | head": {}}
    for r in range(a.rounds):
        for label, tree, index in trees:
            print(f"round {r + 1}: {label}", file=sys.stderr, flush=True)
            for name, res in run(tree, index, a.runs, a.cold).items():
                got[label].setdefault(name, []).extend(res["ms"])
                files[label][name] = res["files"]
                loaded[label][name] = res["loaded"]
        if capped:
            print(f"round {r + 1}: peers", file=sys.stderr, flush=True)
            time_peers(capped, Path(a.corpus), Path(a.csearch_index), a.runs, peers)
    mine, theirs = (label for label, _, _ in trees)
    caches = ", posting list caches emptied before each run" if a.cold else ""
    print(f"\nin-process p50 ms over {a.rounds} turns × {a.runs} runs, matches=100{caches}\n")
    print(f"| class | {mine} | {theirs} | ratio | same files | csearch \\| head | rg \\| head | ÷ csearch | ÷ rg |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|")
    for q in QUERIES:
        m, t = statistics.median(got[mine][q.cls]), statistics.median(got[theirs][q.cls])
        same = "yes" if files[mine][q.cls] == files[theirs][q.cls] else "**no**"
        row = f"| {q.cls} | {m:.1f} | {t:.1f} | {m / t:.2f} | {same} |"
        for peer in peers.values():
            p = statistics.median(peer[q.cls]) if q.cls in peer else None
            row += f" {p:.1f} |" if p else " – |"
        for peer in peers.values():
            row += f" {m / statistics.median(peer[q.cls]):.2f}× |" if q.cls in peer else " – |"
        print(row)
    print(f"\ncontent read to verify (MB, `contentBytesLoaded` of the first run)\n")
    print(f"| class | {mine} | {theirs} |")
    print("|---|---:|---:|")
    for q in QUERIES:
        print(f"| {q.cls} | {loaded[mine][q.cls] / 1e6:.1f} | {loaded[theirs][q.cls] / 1e6:.1f} |")


def time_peers(cases: list, corpus: Path, csearch_index: Path, runs: int, into: dict) -> None:
    """``csearch | head -n 100`` and ``rg | head -n 100`` for `cases`: one warm-up, then `runs`."""
    import time

    tools = {"csearch | head": (make_csearch_runner(csearch_index, corpus), ()),
             "rg | head": (make_rg_runner(None), (corpus,))}
    for q in cases:
        for label, (runner, extra) in tools.items():
            runner(q, *extra, "capped")
            for _ in range(runs):
                t = time.perf_counter()
                runner(q, *extra, "capped")
                into[label].setdefault(q.cls, []).append((time.perf_counter() - t) * 1e3)


if __name__ == "__main__":
    main()
