#!/usr/bin/env python3
"""Scale-out of the shard searchers: the same query load on 1 and 2 searcher nodes.

Usage:
    python bench/bench_scaleout.py              # the full corpus's index (bench/.work/index, built
                                                #   by bench_engine.py / bench_service.py; built here if missing)
    python bench/bench_scaleout.py --quick      # smoke run: a small generated corpus, 5 s per measurement
    python bench/bench_scaleout.py --seconds 30 --clients 8

One run:
  * calibration in this process: each query's engine time, each shard's cost per round of each
    mix (for the cost-balanced split) and each searcher's share of the work for every split;
  * the no-Ray ceiling: for every split, plain processes (one per searcher, running together, no
    Ray, no driver) run the mix over their shards; the slowest one's rate is what the split and
    the cores allow before any Ray or driver cost;
  * a simulated Ray cluster on this machine (`ray.cluster_utils.Cluster`, RAY_AUTH_MODE=disabled):
    a head node with ``num_cpus=1`` (custom resource ``node0``), and three configurations:
      - **1 node**: one `ShardSearcher` actor (``num_cpus=1``, pinned to ``node0``) owning every shard;
      - **2 nodes, size-balanced**: a worker node with ``num_cpus=1`` (``node1``) is added; two
        searchers, one pinned to each node, the shards split by file size (`balance`, what
        `SearcherPool.create` does);
      - **2 nodes, cost-balanced**: the same, the shards split by their measured cost for the mix;
      - **2 nodes, 2 copies**: two searchers each owning every shard, one per node, as
        `SearcherPool(..., copies=2)` (`codesearch serve --searchers 1 --searcher-copies 2`):
        each request goes to one of them, round robin;
  * load: ``--clients`` threads (8) in the driver calling `SearcherPool.search` (fan-out to every
    searcher, merge) back to back for ``--seconds`` (20) per measurement after two warm-up rounds,
    queries round robin over a mix; two mixes:
      - ``engine``: the 7 query classes of bench_engine.py (``matches=100``), the realistic mix;
      - ``full-scan``: 3 regexes without a usable trigram that match nothing
        (``\\bz\\d{2}q``, ``\\bq\\d{4}\\b``, ``Py\\w+_\\d{6}``, ~15-23 ms each on the full corpus):
        every searcher verifies all of its documents, so the work divides by the searchers and the
        driver's share per request is small (searcher-bound);
  * per measurement: requests, req/s, p50/p95 latency, and CPU use over the window (the driver
    process, the searcher processes, the whole machine from /proc/stat), CPU per request;
  * the throughput ratios against 1 node (target ≥ 1.7×) next to the no-Ray ceiling.

Both "nodes" run on this machine: the driver (client threads, plan + merge of every request),
Ray's own processes and the searchers share its cores. With 2 cores the 2-node run has one core
per searcher and nothing left for the driver; see bench/README.md and bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench_engine
sys.path.insert(0, str(HERE.parent))  # codesearch

import bench_engine as be  # noqa: E402  (query classes, machine info, percentile, corpus paths)

FULL_SCAN = [
    be.QueryCase("full scan: \\bz\\d{2}q", r"\bz\d{2}q", True, True),
    be.QueryCase("full scan: \\bq\\d{4}\\b", r"\bq\d{4}\b", True, True),
    be.QueryCase("full scan: Py\\w+_\\d{6}", r"Py\w+_\d{6}", True, True),
]
MIXES = {"engine": be.QUERIES, "full-scan": FULL_SCAN}
TARGET = 1.7


# ----------------------------------------------------------------------------- quick corpus


def generate_corpus(root: Path, mb: float = 24.0, seed: int = 7) -> list[Path]:
    """A deterministic corpus of C- and Python-like files (3 projects, ~`mb` MB) that contains
    the tokens of the engine benchmark's queries at realistic rates."""
    rng = random.Random(seed)
    words = ["static_cast", "Py_INCREF", "PyObject", "deprecationwarning", "DeprecationWarning", "handler", "buffer",
             "size_t", "return", "const", "value", "result", "index", "array", "module", "config", "parse", "state"]
    projects = [root / f"gen-{name}" for name in ("alpha", "beta", "gamma")]
    target = int(mb * 1e6)
    written = 0
    n = 0
    while written < target:
        proj = projects[n % len(projects)]
        ext = ".c" if n % 3 else ".py"
        d = proj / f"pkg{n % 17}" / f"mod{n % 5}"
        d.mkdir(parents=True, exist_ok=True)
        lines = []
        for i in range(rng.randint(60, 160)):
            w = rng.sample(words, 3)
            ident = f"{w[0].lower()}_{rng.randint(0, 99999)}"
            if ext == ".c":
                lines.append(f"    {w[1]}({ident}, {w[2]}[{i}]); /* {rng.choice(words)} {rng.randint(0, 999)} */")
            else:
                lines.append(f"    {ident} = {w[1]}({w[2]!r}, {i})  # {rng.choice(words)}")
            if rng.random() < 0.002:
                lines.append("    grpc_channel_create(PyArray_DescrNewByteorder(x));")
        text = "\n".join(lines) + "\n"
        (d / f"file{n}{ext}").write_text(text)
        written += len(text)
        n += 1
    return projects


def ensure_index(args) -> Path:
    from codesearch.index.builder import IndexSettings
    from codesearch.index.paths import index_paths

    if args.quick:
        base = be.WORK / "scaleout-quick"
        index_dir = base / "index"
        if index_dir.is_dir() and any(index_dir.glob("*.shard")):
            print(f"Index: reused {index_dir} (generated corpus)")
            return index_dir
        shutil.rmtree(base, ignore_errors=True)
        projects = generate_corpus(base / "corpus")
        t0 = time.perf_counter()
        # small shards so that two searchers have something to balance
        stats = index_paths([str(p) for p in projects], str(index_dir),
                            IndexSettings(shard_max_bytes=4 << 20, ctags=False))
        print(f"Index: generated corpus ({stats.input_bytes / 1e6:.1f} MB) indexed into {index_dir} in "
              f"{time.perf_counter() - t0:.1f} s ({len(stats.shards)} shards)")
        return index_dir
    index_dir = Path(args.index_dir)
    if index_dir.is_dir() and any(index_dir.glob("*.shard")):
        print(f"Index: reused {index_dir}")
        return index_dir
    if not be.CORPUS.is_dir():
        raise SystemExit(f"no index at {index_dir} and no corpus at {be.CORPUS}: run python bench/corpus.py, "
                         f"or use --quick")
    projects = sorted(p for p in be.CORPUS.iterdir() if p.is_dir() and not p.name.endswith(".partial"))
    index_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    stats = index_paths([str(p) for p in projects], str(index_dir), IndexSettings())
    print(f"Index: built {index_dir} in {time.perf_counter() - t0:.1f} s ({len(stats.shards)} shards)")
    return index_dir


# ----------------------------------------------------------------------------- measuring


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    parts = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0.0)  # idle + iowait
    total = sum(parts[:8])
    return total - idle, total


def actor_cpus(actors) -> list[float]:
    """CPU seconds used so far by each searcher's process (user + system)."""
    import ray

    def cpu(_self):
        return time.process_time()  # user + system, in ns steps (os.times counts 10 ms ticks)

    return ray.get([a.__ray_call__.remote(cpu) for a in actors], timeout=60)


def actor_cpu(actors) -> float:
    """CPU seconds used so far by the searcher processes together."""
    return sum(actor_cpus(actors))


def run_load(pool, queries: list[be.QueryCase], clients: int, seconds: float, matches: int) -> dict:
    from codesearch.search.options import SearchOptions

    opts = [SearchOptions(matches=matches, context_lines=0, is_regex=q.is_regex, case_sensitive=q.case_sensitive)
            for q in queries]
    lock = threading.Lock()
    counter = [0]
    lat: list[float] = []
    per_class: dict[str, list[float]] = {q.cls: [] for q in queries}
    errors: list[str] = []
    crashes = [0]
    stop_at = [float("inf")]
    barrier = threading.Barrier(clients + 1)

    def worker():
        barrier.wait()
        while True:
            with lock:
                i = counter[0]
                counter[0] += 1
            if time.perf_counter() >= stop_at[0]:
                return
            k = i % len(queries)
            t0 = time.perf_counter()
            try:
                r = pool.search(queries[k].cs_query, opts[k])
                c = r["stats"]["crashes"]
            except Exception as e:  # noqa: BLE001 - counted, reported
                with lock:
                    errors.append(f"{type(e).__name__}: {e}"[:200])
                continue
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                per_class[queries[k].cls].append(dt)
                crashes[0] += c

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    s_cpu0 = actor_cpu(pool.actors)
    m0 = cpu_times()
    d0 = time.process_time()
    t0 = time.perf_counter()
    stop_at[0] = t0 + seconds
    barrier.wait()
    for t in threads:
        t.join(timeout=seconds + 120)
    wall = time.perf_counter() - t0
    d1 = time.process_time()
    m1 = cpu_times()
    s_cpu1 = actor_cpu(pool.actors)
    ncpu = os.cpu_count() or 1
    return {"requests": len(lat), "errors": errors, "crashes": crashes[0], "wall": wall, "rps": len(lat) / wall,
            "lat": lat, "per_class": per_class, "stuck": sum(t.is_alive() for t in threads),
            "driver_cpu": (d1 - d0) / wall, "searcher_cpu": (s_cpu1 - s_cpu0) / wall,
            "machine_busy": (m1[0] - m0[0]) / (m1[1] - m0[1]) * ncpu if m1[1] > m0[1] else None}


def start_searchers(groups: list[list[str]], nodes: list[int] | None = None, extra: list[dict] | None = None) -> list:
    """One searcher per group, one CPU each, group i pinned to node ``nodes[i]`` (default: node i,
    by the custom resource ``node<i>`` the cluster's nodes carry) and given the keyword
    arguments ``extra[i]`` (e.g. `ShardSearcher`'s ``copy_to`` and ``source``)."""
    import ray

    from codesearch.runtime.shard_searcher import ShardSearcher

    nodes = nodes if nodes is not None else list(range(len(groups)))
    actors = [ray.remote(ShardSearcher).options(num_cpus=1, resources={f"node{nodes[i]}": 0.01})
              .remote(g, origin=i, **(extra[i] if extra else {}))
              for i, g in enumerate(groups)]
    ray.get([a.ping.remote() for a in actors])
    return actors


def node_of(actors) -> list[str]:
    import ray

    return ray.get([a.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()) for a in actors])


def warm(pool, queries: list[be.QueryCase], matches: int, rounds: int = 2) -> None:
    from codesearch.search.options import SearchOptions

    for _ in range(rounds):
        for q in queries:
            pool.search(q.cs_query, SearchOptions(matches=matches, context_lines=0, is_regex=q.is_regex,
                                                  case_sensitive=q.case_sensitive))


def _options(q: be.QueryCase, matches: int):
    from codesearch.search.options import SearchOptions

    return SearchOptions(matches=matches, context_lines=0, is_regex=q.is_regex, case_sensitive=q.case_sensitive)


def cost_of(paths: list[str], queries: list[be.QueryCase], matches: int, rounds: int) -> float:
    """Seconds one round of `queries` costs a searcher owning `paths` (in this process, after a warm-up)."""
    from codesearch.runtime.shard_searcher import ShardSearcher

    s = ShardSearcher(paths)
    try:
        for q in queries:
            s.search(q.cs_query, _options(q, matches), time.time() + 60)
        t0 = time.perf_counter()
        for _ in range(rounds):
            for q in queries:
                s.search(q.cs_query, _options(q, matches), time.time() + 60)
        return (time.perf_counter() - t0) / rounds
    finally:
        for sh in s.shards:
            sh.close()


def shard_costs(shards: list[str], queries: list[be.QueryCase], matches: int, rounds: int) -> dict[str, float]:
    """Seconds one round of `queries` costs on each shard alone."""
    return {path: cost_of([path], queries, matches, rounds) for path in shards}


def balance_by_cost(costs: dict[str, float], n: int) -> list[list[str]]:
    """Greedy (largest first) split of the shards over `n` searchers by measured cost."""
    groups: list[list[str]] = [[] for _ in range(n)]
    load = [0.0] * n
    for path in sorted(costs, key=lambda p: (-costs[p], p)):
        i = load.index(min(load))
        groups[i].append(path)
        load[i] += costs[path]
    return groups


def _raw_worker(paths: list[str], mix: str, matches: int, seconds: float, out) -> None:
    """A searcher without Ray: run the mix in a loop over `paths` for `seconds`."""
    from codesearch.runtime.shard_searcher import ShardSearcher

    queries = MIXES[mix]
    s = ShardSearcher(paths)
    for q in queries:
        s.search(q.cs_query, _options(q, matches), time.time() + 60)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        q = queries[n % len(queries)]
        s.search(q.cs_query, _options(q, matches), time.time() + 60)
        n += 1
    out.put(n / (time.perf_counter() - t0))


def raw_ceiling(groups: list[list[str]], mix: str, matches: int, seconds: float, copies: bool = False) -> float:
    """Searches per second of `len(groups)` plain processes (no Ray, no driver), one per group,
    running at the same time: a request needs every group, so the slowest process sets the rate
    (with `copies`, each request needs one of them: the rates add up). This is what the split
    and the machine's cores allow before any Ray or driver cost."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_raw_worker, args=(g, mix, matches, seconds, q)) for g in groups]
    for p in procs:
        p.start()
    rates = [q.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return sum(rates) if copies else min(rates)


def fmt(x: float | None) -> str:
    return be.fmt_ms(x)


# ----------------------------------------------------------------------------- main


CONFIGS = [("1 node", 1, "all"), ("2 nodes, size-balanced", 2, "size"), ("2 nodes, cost-balanced", 2, "cost"),
           ("2 nodes, 2 copies", 2, "copies")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: a generated ~24 MB corpus, 5 s per measurement")
    ap.add_argument("--index-dir", default=str(be.WORK / "index"))
    ap.add_argument("--clients", type=int, default=8, help="client threads in the driver (default 8)")
    ap.add_argument("--seconds", type=float, default=20.0, help="timed load per measurement (default 20)")
    ap.add_argument("--raw-seconds", type=float, default=10.0, help="per no-Ray ceiling measurement (default 10)")
    ap.add_argument("--matches", type=int, default=100)
    ap.add_argument("--mix", choices=[*MIXES, "both"], default="both")
    ap.add_argument("--shutdown-timeout", type=float, default=60.0)
    args = ap.parse_args()
    if args.quick:
        args.seconds = min(args.seconds, 5.0)
        args.raw_seconds = min(args.raw_seconds, 3.0)
    mixes = list(MIXES) if args.mix == "both" else [args.mix]

    print("## Machine\n")
    print("\n".join(be.machine_info()))
    ncores = os.cpu_count() or 1
    print(f"- cores: {len(os.sched_getaffinity(0))} usable of {ncores} (lscpu: 1 thread per core); both simulated "
          f"nodes, Ray's processes and the driver's {args.clients} client threads share them")
    print()
    index_dir = ensure_index(args)
    from codesearch.index.manifest import current_shards
    from codesearch.runtime.published import balance
    from codesearch.search.engine import Searcher

    shards = current_shards(str(index_dir))
    size = sum(os.path.getsize(s) for s in shards)
    print(f"Shards: {len(shards)} ({size / 1e6:.0f} MB)")

    # ---- calibration in this process: the engine per query, each shard's cost per round of each mix
    engine_p50: dict[str, float] = {}
    with_searcher = Searcher(str(index_dir))
    try:
        for mix in mixes:
            for q in MIXES[mix]:
                engine_p50[q.cls] = statistics.median(be.time_runs(lambda: be.cs_search(with_searcher, q, args.matches),
                                                                   3 if args.quick else 7))
    finally:
        with_searcher.close()
    costs = {mix: shard_costs(shards, MIXES[mix], args.matches, 2 if args.quick else 4) for mix in mixes}

    def groups_for(how: str, mix: str) -> list[list[str]]:
        if how == "all":
            return [shards]
        if how == "copies":
            return [shards, shards]
        if how == "size":
            return balance(shards, 2)
        return balance_by_cost(costs[mix], 2)

    def split_ms(groups: list[list[str]], mix: str) -> list[float]:
        """Measured cost of one request of the mix (average) for a searcher owning each group, ms."""
        return [1000 * cost_of(g, MIXES[mix], args.matches, 2 if args.quick else 4) / len(MIXES[mix]) for g in groups]

    splits = {(label, mix): split_ms(groups_for(how, mix)[:1 if how == "copies" else None], mix)
              for label, _n, how in CONFIGS for mix in mixes}

    # ---- the no-Ray ceiling: plain processes over the same splits, before Ray starts
    ceiling: dict[tuple[str, str], float] = {}
    for label, _nodes, how in CONFIGS:
        for mix in mixes:
            ceiling[(label, mix)] = raw_ceiling(groups_for(how, mix), mix, args.matches, args.raw_seconds,
                                                copies=how == "copies")
            print(f"  no-Ray ceiling, {label}, {mix}: {ceiling[(label, mix)]:.1f} req/s", file=sys.stderr, flush=True)
    sys.stdout.flush()

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.cluster_utils import Cluster

    from codesearch.runtime.searchers import SearcherPool

    results: dict[tuple[str, str], dict] = {}
    cluster = None
    t_start = time.perf_counter()
    try:
        t0 = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                                "resources": {"node0": 1}})
        ray.init(address=cluster.address, log_to_driver=False)
        print(f"Cluster: head node up in {time.perf_counter() - t0:.1f} s", flush=True)
        nodes_up = 1
        for label, nodes, how in CONFIGS:
            if nodes > nodes_up:
                t0 = time.perf_counter()
                cluster.add_node(num_cpus=1, resources={"node1": 1})
                cluster.wait_for_nodes()
                nodes_up = nodes
                print(f"Cluster: worker node added in {time.perf_counter() - t0:.1f} s", flush=True)
            for mix in mixes:
                groups = groups_for(how, mix)
                actors = start_searchers(groups)
                pool = SearcherPool(actors, copies=len(actors) if how == "copies" else 1)
                try:
                    placed = len(set(node_of(actors)))
                    warm(pool, MIXES[mix], args.matches)
                    la = os.getloadavg()[0]
                    r = run_load(pool, MIXES[mix], args.clients, args.seconds, args.matches)
                finally:
                    pool.close()
                r.update(load=la, placed=placed, split=splits[(label, mix)])
                results[(label, mix)] = r
                print(f"  {label}, {mix}: {r['requests']} requests, {r['rps']:.1f} req/s, p50 "
                      f"{fmt(statistics.median(r['lat']) if r['lat'] else None)} ms, errors {len(r['errors'])}",
                      file=sys.stderr, flush=True)
    finally:
        be.exit_after(args.shutdown_timeout)  # bounded shutdown: ends the process if Ray hangs
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        print(f"Ray part: {time.perf_counter() - t_start:.0f} s", file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- tables
    print()
    print(f"## Scale-out: {args.clients} client threads in the driver calling `SearcherPool.search`, "
          f"matches={args.matches}, {args.seconds:g} s per measurement; times in ms\n")
    print("CPU columns: cores' worth of CPU used during the window (1.00 = one core busy) by the driver process "
          "(client threads, planning, Ray calls, merging), by the searcher processes, and by the whole machine "
          f"(/proc/stat; {ncores}.00 = every core busy).\n")
    print("| searchers | mix | nodes used | requests | req/s | p50 | p95 | driver CPU | searchers CPU | machine busy | "
          "errors | load avg before |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mix in mixes:
        for label, _n, _h in CONFIGS:
            r = results[(label, mix)]
            lat = r["lat"]
            busy = "–" if r["machine_busy"] is None else f"{r['machine_busy']:.2f}"
            print(f"| {label} | {mix} | {r['placed']} | {r['requests']} | {r['rps']:.1f} | "
                  f"{fmt(statistics.median(lat) if lat else None)} | {fmt(be.percentile(lat, 95) if lat else None)} | "
                  f"{r['driver_cpu']:.2f} | {r['searcher_cpu']:.2f} | {busy} | {len(r['errors']) + r['crashes']} | "
                  f"{r['load']:.2f} |")
    print()
    print("Throughput against 1 node, and the ceiling without Ray: the same shard splits searched by plain "
          "processes (one per searcher, running together, no driver, no Ray; the slowest sets the rate). "
          "Split = engine time of one request of the mix (average) on each searcher's shards, measured in-process "
          "before the run.\n")
    print("| searchers | mix | split, ms per request | req/s | × 1 node | no-Ray ceiling req/s | ceiling × | "
          "CPU per request, ms: driver / searchers / machine |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    ratios = {}
    for mix in mixes:
        base = results[(CONFIGS[0][0], mix)]["rps"]
        cbase = ceiling[(CONFIGS[0][0], mix)]
        for label, _n, _h in CONFIGS:
            r = results[(label, mix)]
            x = r["rps"] / base if base else float("nan")
            ratios[(label, mix)] = x
            rps = r["rps"] or float("nan")
            per = " / ".join(f"{1000 * r[k] / rps:.1f}" for k in ("driver_cpu", "searcher_cpu", "machine_busy"))
            split = " + ".join(f"{v:.1f}" for v in r["split"]) + (" on either copy" if label.endswith("copies") else "")
            print(f"| {label} | {mix} | {split} | {r['rps']:.1f} | {x:.2f}× | "
                  f"{ceiling[(label, mix)]:.1f} | {ceiling[(label, mix)] / cbase:.2f}× | {per} |")
    print()
    for mix in mixes:
        x, xc, xr = (ratios[(CONFIGS[i][0], mix)] for i in (1, 2, 3))
        print(f"**{mix}**: 2 nodes / 1 node = **{x:.2f}×** partitioned with the shards balanced by size (as "
              f"`SearcherPool` does), **{xc:.2f}×** balanced by measured cost, **{xr:.2f}×** with 2 copies "
              f"(target ≥ {TARGET}×: {'met' if max(x, xc, xr) >= TARGET else 'missed'}).")
        busy1 = results[(CONFIGS[0][0], mix)]["machine_busy"]
        if busy1:
            bound = ncores / busy1
            print(f"  The machine's bound: the 1-node run already keeps {busy1:.2f} of its {ncores} cores busy "
                  f"(searcher, driver, Ray), so a 2-node run on it can reach only about {ncores}/{busy1:.2f} = "
                  f"**{bound:.2f}×**; 2 copies reach {100 * xr / bound:.0f}% of that, the best partitioned split "
                  f"{100 * max(x, xc) / bound:.0f}%.")
    print()
    print("Per query class, p50 in ms (engine alone = one in-process `Searcher`, no load):\n")
    print("| class | engine alone | " + " | ".join(label for label, _n, _h in CONFIGS) + " |")
    print("|---|---:|" + "---:|" * len(CONFIGS))
    for mix in mixes:
        for q in MIXES[mix]:
            cells = []
            for label, _n, _h in CONFIGS:
                lat = results[(label, mix)]["per_class"][q.cls]
                cells.append(fmt(statistics.median(lat) if lat else None))
            print(f"| {q.cls} | {fmt(engine_p50.get(q.cls))} | " + " | ".join(cells) + " |")
    print()
    print(f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    bad = False
    for (label, mix), r in results.items():
        if r["errors"] or r["crashes"] or r["stuck"] or r["placed"] != (1 if label == CONFIGS[0][0] else 2):
            bad = True
            print(f"\nnote: {label}, {mix}: {len(r['errors'])} errors, {r['crashes']} searcher crashes, "
                  f"{r['stuck']} stuck threads, searchers on {r['placed']} node(s); first errors: {r['errors'][:3]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
