#!/usr/bin/env python3
"""Where the CPU of a first sync goes, per small repository (issue 25, item 5).

Usage:
    python bench/bench_sync_cpu.py --repos DIR [--data DIR] [--profile OUT.prof] [--top 40]

Runs the service's own path in this one process, without Ray, on a folder of git repositories
(e.g. symlinks to 300 small repositories of /work/corpus-large/repos): the `Scheduler` (config
applied, a sync job queued), one `ConnectionSyncer` job (the listing), then a `RepoIndexer`
claiming and running index jobs until none is left, then the `Compactor` until it has nothing to
merge, then one more scheduler tick (the index integrity check and the searchers' reload
decision). CPU seconds, not wall time (the machine is shared): this process's user+system time
per phase, and its child processes' (git, ctags) from `RUSAGE_CHILDREN`. With ``--profile``,
cProfile (CPU time) of the index jobs goes to OUT.prof and its top functions (cumulative) are printed.
A benchmark: it prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _cpu() -> tuple[float, float]:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


class Phase:
    def __init__(self, rows: list[tuple[str, float, float, float]], name: str):
        self.rows, self.name = rows, name

    def __enter__(self) -> Phase:
        self.t0, self.c0 = _cpu(), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        s, c = _cpu()
        self.rows.append((self.name, s - self.t0[0], c - self.t0[1], time.monotonic() - self.c0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", required=True, help="a folder of git repositories (or symlinks to them)")
    ap.add_argument("--data", default="", help="data directory (wiped first; default: a temporary one)")
    ap.add_argument("--profile", default="", help="write cProfile of the indexing phase here")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--no-compact", action="store_true")
    args = ap.parse_args()

    from codesearch.runtime.compactor import Compactor
    from codesearch.runtime.scheduler import Scheduler
    from codesearch.runtime.workers import ConnectionSyncer, RepoIndexer, RuntimeOptions

    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="sync-cpu-"))
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    config = data / "config.json"
    root = Path(args.repos).resolve()
    config.write_text(json.dumps({"connections": {"bench": {"type": "git", "url": f"file://{root}/*"}}}))
    rows: list[tuple[str, float, float, float]] = []
    opts = RuntimeOptions(poll_s=0.01)
    with Phase(rows, "scheduler start-up + tick"):
        sched = Scheduler(str(config), str(data), opts)
        sched.startup()
        sched.tick()
    with Phase(rows, "connection sync (listing)"):
        syncer = ConnectionSyncer(str(data), "sync-0", opts)
        while syncer.run_once():
            pass
    repos = len(sched.store.repo_ids())
    indexer = RepoIndexer(str(data), "index-0", opts)
    prof = cProfile.Profile(time.process_time) if args.profile else None
    if prof:  # a job runs on a thread of its own (`_Worker.run_once`): profile it there
        run_job = indexer.run_job

        def profiled(job: object) -> None:
            prof.enable()
            try:
                run_job(job)  # type: ignore[arg-type]
            finally:
                prof.disable()

        indexer.run_job = profiled  # type: ignore[method-assign]
    with Phase(rows, "index jobs"):
        while indexer.run_once():
            pass
    if not args.no_compact:
        with Phase(rows, "compaction"):
            comp = Compactor(str(data))
            while comp.run_once():
                pass
    with Phase(rows, "scheduler tick after"):
        sched.tick()
    index_dir = data / "index"
    shards = [p for p in index_dir.iterdir() if p.name.endswith(".shard")] if index_dir.is_dir() else []
    print(f"{repos} repositories, {indexer.done} jobs done, {indexer.failed} failed; {len(shards)} shards, "
          f"{sum(p.stat().st_size for p in shards) / 1e6:.1f} MB")
    # how long each repository's index job was held, from its claim to its completion (a job of a
    # batch is completed when the batch is swapped in: what batching adds to its first sync)
    held = sorted((j.finished_at - j.started_at).total_seconds() for j in
                  sched.store.list_jobs(kind="index", state="COMPLETED", limit=100_000) if j.started_at and j.finished_at)
    if held:
        print(f"index jobs held, claim to completion: p50 {held[len(held) // 2]:.2f} s, "
              f"p90 {held[int(len(held) * 0.9)]:.2f} s, max {held[-1]:.2f} s")
    print(f"| phase | CPU s (this process) | CPU s (git, ctags) | CPU s per repository | wall s |")
    print("|---|---:|---:|---:|---:|")
    total = 0.0
    for name, s, c, w in rows:
        total += s + c
        print(f"| {name} | {s:.2f} | {c:.2f} | {(s + c) / max(1, repos) * 1000:.0f} ms | {w:.1f} |")
    print(f"| total | | | {total / max(1, repos) * 1000:.0f} ms | |")
    if prof:
        prof.dump_stats(args.profile)
        pstats.Stats(args.profile).sort_stats("cumulative").print_stats(args.top)
    sched.close()
    indexer.close()
    syncer.close()
    if not args.data:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
