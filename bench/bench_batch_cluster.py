#!/usr/bin/env python3
"""Batch search on a 2-node cluster (issue 27): the batch of bench_batch.py (capped queries over the
1 GB corpus index, `codesearch.data.search` over an index directory) on ONE node against the same
batch on TWO nodes, each node with its own data directory holding its own copy of the index.

Usage:
    python bench/corpus.py && python bench/bench_engine.py     # once: the corpus and its index
    nice -n 10 python bench/bench_batch_cluster.py             # 1,000 queries, 3 rounds
    python bench/bench_batch_cluster.py --queries 200 --repeat 3    # a shorter run

One run, one process:
  * a `ray.cluster_utils.Cluster` of two nodes of ONE logical CPU each (the machine has 2 cores: one
    core per simulated node, so one node against two is one core against two), each with a custom
    resource ``node<i>``, as bench/capacity.py builds its cluster;
  * node 0's data directory is the index itself (where it was built); node 1 gets its own copy in
    ``bench/.work/cluster/node1/index``, fetched through Ray from a `ShardSource` actor on node 0
    (`codesearch.runtime.shard_copy`, as a searcher on a node without the data directory does: every
    shard verified against its digest; a copy left by an earlier run is reused when it still matches);
  * the source: ``IndexSource.per_node({node 0: the index, node 1: its copy})``: a read task opens the
    copy of the node it runs on;
  * timed in turn (one node, two nodes, one node, two nodes, …; `--repeat` rounds, medians): the batch
    with its read tasks held to node 0 (a ``node0`` resource on each task), and the same batch free to
    run on both nodes (`codesearch.data.search`), two read tasks per CPU each time (the default of
    `codesearch.data.search`: 2 tasks on one node, 4 on two), every row read out with ``iter_batches``;
  * where the time goes, for each run: every read task logs (through `TimedIndexSource`, an
    `IndexSource` that times its `open` and its answers) its node, the seconds it took to open the
    shards, the seconds and CPU seconds of its answers; the driver's own CPU seconds and the whole
    machine's busy cores (``/proc/stat``) over the run; Ray Data's count of the nodes used; the load average;
  * a check: both give the same rows, query by query.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # codesearch
sys.path.insert(0, str(HERE))  # bench_batch

from bench_batch import batch_rows, consume, make_queries  # noqa: E402

WORK = HERE / ".work"
TASKS_PER_CPU = 2


def copy_index(index: str, dest: Path, node: str) -> float:
    """Copy the index to `dest` on the node with resource `node`, through Ray (a `ShardSource` actor
    on node 0, `ShardCopies` in a task on `node`); returns the seconds it took."""
    import ray

    from codesearch.runtime.shard_copy import ShardCopies, ShardSource

    manifest = Path(index, "manifest.json").read_bytes()
    shards = sorted({s for repo in json.loads(manifest)["repos"].values() for s in repo["shards"]})
    source = ray.remote(ShardSource).options(num_cpus=0, resources={"node0": 0.01}).remote(index)

    @ray.remote(num_cpus=0, resources={node: 0.01})
    def fetch(src) -> list[str]:
        copies = ShardCopies(str(dest), src)
        done = [copies.local(os.path.join(index, name)) for name in shards]
        tmp = dest / ".manifest.json.tmp"
        tmp.write_bytes(manifest)
        os.replace(tmp, dest / "manifest.json")
        return done

    t0 = time.perf_counter()
    try:
        ray.get(fetch.remote(source))
    finally:
        ray.kill(source)
    return time.perf_counter() - t0


def timed_source_class():
    """`TimedIndexSource` (made after `codesearch` is importable): an `IndexSource` whose read tasks
    append a line of JSON to `log` when they close: node, open seconds, answer seconds, answer CPU
    seconds, start and end (Unix time)."""
    from codesearch.data.sources import IndexSource

    @dataclasses.dataclass(frozen=True)
    class TimedIndexSource(IndexSource):
        log: str = ""

        def open(self):
            import ray

            start, c0 = time.time(), time.process_time()
            runner = super().open()
            return TimedRunner(runner, self.log, ray.get_runtime_context().get_node_id(), start,
                               time.time() - start, time.process_time() - c0)

    return TimedIndexSource


class TimedRunner:
    def __init__(self, runner, log: str, node: str, start: float, open_s: float, open_cpu: float):
        self.runner, self.log, self.node, self.start = runner, log, node, start
        self.open_s, self.open_cpu, self.answer_s, self.answer_cpu, self.queries = open_s, open_cpu, 0.0, 0.0, 0

    def answer(self, specs, per_file):
        t0, c0 = time.perf_counter(), time.process_time()
        out = self.runner.answer(specs, per_file)
        self.answer_s += time.perf_counter() - t0
        self.answer_cpu += time.process_time() - c0
        self.queries += len(specs)
        return out

    def close(self) -> None:
        import psutil

        self.runner.close()
        line = {"node": self.node, "start": self.start, "end": time.time(), "open_s": self.open_s,
                "open_cpu": self.open_cpu, "answer_s": self.answer_s, "answer_cpu": self.answer_cpu,
                "queries": self.queries, "pid": os.getpid(), "worker_born": psutil.Process().create_time()}
        with open(self.log, "a") as f:
            f.write(json.dumps(line) + "\n")


def busy_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def driver_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def nodes_used(ds) -> str:
    """Ray Data's count of the nodes the read tasks of `ds` (consumed) ran on."""
    found = re.findall(r"(\d+) nodes used", ds.stats())
    return found[0] if found else "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default=str(WORK / "index"), help="the 1 GB corpus index (bench_engine.py builds it)")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--regex-every", type=int, default=10, help="every N-th query is a regex (0: none)")
    ap.add_argument("--matches", type=int, default=100, help="the cap of every query")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of (one node, two nodes)")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--tasks-per-cpu", type=int, default=TASKS_PER_CPU,
                    help="read tasks per CPU (default: as codesearch.data.search plans them)")
    ap.add_argument("--strategy", default=None,
                    help="a Ray scheduling strategy for the read tasks on two nodes (SPREAD, DEFAULT), through "
                         "ray.data.read_datasource (default: codesearch.data.search's own)")
    args = ap.parse_args()
    index = os.path.realpath(args.index)
    if not Path(index, "manifest.json").is_file():
        raise SystemExit(f"no index at {index}: build it with bench/bench_engine.py (or pass --index)")
    load_start = os.getloadavg()

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    import ray.data
    from ray.cluster_utils import Cluster
    from ray.data import DataContext

    import codesearch.data as csd
    from codesearch.data.datasource import BatchDatasource
    from codesearch.data.queries import Defaults, specs_of
    from codesearch.data.sources import IndexSource

    queries = make_queries(index, args.queries, args.regex_every, args.matches, args.seed)
    copy_dir = WORK / "cluster" / "node1" / "index"
    copy_dir.mkdir(parents=True, exist_ok=True)

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": 256 << 20,
                                                            "include_dashboard": False, "resources": {"node0": 1}})
    cluster.add_node(num_cpus=1, object_store_memory=256 << 20, resources={"node1": 1})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
    context = DataContext.get_current()
    context.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    times: dict[str, list[float]] = {"one": [], "two": []}
    used: dict[str, list[str]] = {"one": [], "two": []}
    parts: dict[str, list[dict]] = {"one": [], "two": []}
    loads: list[float] = []
    try:
        node_ids = {}
        for n in ray.nodes():
            for r in ("node0", "node1"):
                if r in n["Resources"]:
                    node_ids[r] = n["NodeID"]
        print(f"copying the index to node 1 ({copy_dir})", file=sys.stderr, flush=True)
        copy_s = copy_index(index, copy_dir, "node1")
        timed_source = timed_source_class()
        paths = {node_ids["node0"]: index, node_ids["node1"]: str(copy_dir)}
        names = {v: k for k, v in node_ids.items()}
        logs = WORK / "cluster" / "logs"
        logs.mkdir(parents=True, exist_ok=True)

        def source_for(log: Path):
            base = IndexSource.per_node(paths, index)
            return timed_source(base.path, base.verify, base.node_paths, log=str(log))

        specs = specs_of(queries, Defaults(), contexts_known=True)

        def one_node(source):
            n = args.tasks_per_cpu * 1
            return ray.data.read_datasource(BatchDatasource(specs, source, tasks=n), num_cpus=1,
                                            override_num_blocks=n, resources={"node0": 0.001})

        def two_nodes(source):
            if args.strategy is None:
                return csd.search(queries, source, tasks=args.tasks_per_cpu * 2)
            n = args.tasks_per_cpu * 2
            return ray.data.read_datasource(BatchDatasource(specs, source, tasks=n), num_cpus=1,
                                            override_num_blocks=n, scheduling_strategy=args.strategy)

        ways = {"one": one_node, "two": two_nodes}
        print("warming up (both copies in the page cache, Ray Data's workers)", file=sys.stderr, flush=True)
        for key, make in ways.items():
            consume(make(source_for(logs / f"warm-{key}.jsonl")))
        for r in range(args.repeat):
            for key, make in ways.items():
                log = logs / f"{key}-{r}.jsonl"
                log.unlink(missing_ok=True)
                ds = make(source_for(log))
                b0, d0, w0 = busy_jiffies(), driver_cpu(), time.time()
                t0 = time.perf_counter()
                n_rows = consume(ds)
                wall = time.perf_counter() - t0
                b1, d1, w1 = busy_jiffies(), driver_cpu(), time.time()
                times[key].append(wall)
                used[key].append(nodes_used(ds))
                loads.append(os.getloadavg()[0])
                tasks = [json.loads(line) for line in log.read_text().splitlines()]
                per_node = {}
                for t in tasks:
                    per_node[names.get(t["node"], "?")] = per_node.get(names.get(t["node"], "?"), 0) + 1
                parts[key].append({
                    "wall": wall, "tasks": len(tasks), "per_node": per_node,
                    "first_start": min(t["start"] for t in tasks) - w0, "tail": w1 - max(t["end"] for t in tasks),
                    "open_s": sum(t["open_s"] for t in tasks), "answer_s": sum(t["answer_s"] for t in tasks),
                    "answer_cpu": sum(t["answer_cpu"] + t["open_cpu"] for t in tasks),
                    "task_wall": sum(t["end"] - t["start"] for t in tasks),
                    "driver_cpu": d1 - d0,
                    "busy_cores": (b1[0] - b0[0]) / max(b1[1] - b0[1], 1) * (os.cpu_count() or 1),
                    "timeline": sorted((round(t["start"] - w0, 2), round(t["end"] - w0, 2), names.get(t["node"], "?"),
                                        t["pid"], round(t["start"] - t["worker_born"], 1)) for t in tasks),
                })
                print(f"round {r + 1}: {key} node(s) {wall:.1f} s, {n_rows:,} rows, nodes used {used[key][-1]}, "
                      f"load {loads[-1]:.1f}; {parts[key][-1]}", file=sys.stderr, flush=True)
        print("checking that both give the same rows", file=sys.stderr, flush=True)
        rows = {key: batch_rows(make(source_for(logs / f"check-{key}.jsonl"))) for key, make in ways.items()}
    finally:
        ray.shutdown()
        cluster.shutdown()
    load_end = os.getloadavg()

    differ = [i for i in range(len(queries)) if rows["one"].get(i, []) != rows["two"].get(i, [])]
    n_rows = sum(len(r) for r in rows["two"].values())
    med = {k: statistics.median(v) for k, v in times.items()}
    n_regex = sum(1 for q in queries if q.get("isRegexEnabled"))
    print(f"\n## Batch search on a 2-node cluster: {len(queries):,} capped queries (`matches` {args.matches}) "
          f"over the 1 GB corpus index\n")
    print(f"Ray `Cluster` of 2 nodes of 1 logical CPU each on a {os.cpu_count()}-core machine shared with other work: "
          f"load average {' '.join(f'{x:.1f}' for x in load_start)} at the start, "
          f"{' '.join(f'{x:.1f}' for x in load_end)} at the end (1-minute load after each run: "
          f"{', '.join(f'{x:.1f}' for x in loads)}). Queries: {len(queries) - n_regex:,} identifiers from the index's "
          f"symbol tables, {n_regex:,} regexes (`NAME\\s*\\(`). Node 1's copy of the index fetched through Ray "
          f"in {copy_s:.1f} s (before the runs). {args.repeat} rounds, taken in turn (one node, two nodes, …).\n")
    print("| nodes | read tasks | nodes used (Ray Data) | seconds per run | median s | queries/s | rows | ÷ one node |")
    print("|---|---:|---|---|---:|---:|---:|---:|")
    tpc = args.tasks_per_cpu
    for key, label, tasks in (("one", "1 (tasks held to node 0)", tpc), ("two", "2", 2 * tpc)):
        print(f"| {label} | {tasks} | {', '.join(used[key])} | {', '.join(f'{t:.1f}' for t in times[key])} | "
              f"{med[key]:.1f} | {len(queries) / med[key]:.1f} | {n_rows:,} | {med['one'] / med[key]:.2f}× |")
    print(f"\nRows on two nodes equal the rows on one node for {len(queries) - len(differ):,} of {len(queries):,} "
          f"queries" + (f" (differ: query ids {differ[:20]})" if differ else "") + ".")
    print("\nWhere the time goes, run by run (task seconds are summed over the run's read tasks; \"CPU ÷ wall\": "
          "the tasks' CPU seconds over their wall seconds, below 1 when they wait for a core; busy cores: the whole "
          "machine's, from /proc/stat, over the run):\n")
    print("| nodes | run | wall s | tasks per node | first task starts after s | open shards s | answering s | "
          "task CPU s | task CPU ÷ task wall | last task end → done s | driver CPU s | busy cores (of "
          f"{os.cpu_count()}) |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key in ("one", "two"):
        for r, p in enumerate(parts[key]):
            print(f"| {key} | {r + 1} | {p['wall']:.1f} | "
                  f"{', '.join(f'{k}: {v}' for k, v in sorted(p['per_node'].items()))} | {p['first_start']:.2f} | "
                  f"{p['open_s']:.2f} | {p['answer_s']:.1f} | {p['answer_cpu']:.1f} | "
                  f"{p['answer_cpu'] / max(p['task_wall'], 1e-9):.2f} | {p['tail']:.2f} | {p['driver_cpu']:.1f} | "
                  f"{p['busy_cores']:.2f} |")
    print("\nRead tasks of each run: (start s, end s after the run began, node, worker pid, the worker's age at the "
          "start in s):\n")
    for key in ("one", "two"):
        for r, p in enumerate(parts[key]):
            print(f"- {key} node(s), run {r + 1}: {p['timeline']}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
