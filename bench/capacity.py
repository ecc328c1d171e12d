#!/usr/bin/env python3
"""A capacity model of the searchers, fitted to measurements and checked against them (issue 25).

Usage:
    python bench/capacity.py                              # the 1 GB corpus's index served ×1 and ×2 (built if missing)
    python bench/capacity.py --quick                      # smoke run: a generated ~24 MB corpus (~1-2 minutes)
    python bench/capacity.py --index 10g=DIR --scales 1   # another index, e.g. the 10 GB corpus's
    python bench/capacity.py --from-json FILE [FILE...]   # fit and print again from runs' saved measurements

What it measures, on a simulated Ray cluster of ``--nodes`` (4) nodes on this machine
(`ray.cluster_utils.Cluster`; each node has 2 logical CPUs and a custom resource ``node<i>``):

* sizes: each ``--index`` served ``--scales`` times (×2 = its shard files twice, hard links under
  other names: the same bytes searched twice, as a second gigabyte of the same kind of code
  would be);
* partitions: ``--partitions`` (1 2 4 8) searchers (`ShardSearcher` actors, the shards balanced
  by size as `SearcherPool.create` does), partition i on node ``i % nodes``. Node 0 holds the
  index (the builder's data directory); the other nodes have data directories of their own and
  get their shards copied through Ray (`codesearch.runtime.shard_copy`: a `ShardSource` actor on
  node 0, verified copies), timed;
* for every size × partitions × query class (the 7 classes of bench_engine.py and a full scan, a
  regex with no usable trigram), one query at a time from the driver:
    - **work per partition**: ``--direct-runs`` searches sent to every partition without the
      pool's early stop: each searcher process's CPU seconds per search (`time.process_time`
      read through Ray before and after) and its `stats` (shards, files and bytes verified);
    - **latency**: ``--runs`` searches through `SearcherPool.search` (fan-out, early stop at the
      match budget, merge: what the service does), wall time p50 and p99 (nearest rank), the
      driver's CPU per search, and the cores the rest of the machine used meanwhile (other work
      on it shows in every wall time); before each class the run waits (at most
      ``--load-wait`` s) for the machine to use less than ``--max-busy`` cores;
* memory after the queries: each searcher's RssAnon and the shard bytes it maps; each raylet's RSS.

Then it fits, per query class, by least squares on relative error (numpy, coefficients ≥ 0;
bench/capacity_model.py):

    work_p   = w0 + w_shard * shards_p + w_file * files_p + w_byte * bytes_p   (CPU s of partition p)
    merge    = d0 + fan * partitions                                          (CPU s of the driver)
    latency  = wait + merge + scale * the partitions' work on this machine's cores (shared; early stop)
               + crowd * that time * max(0, partitions / cores - 1)
             = wait + merge + scale * slowest partition on real nodes

prints every measured point beside the model and its error, the constants, and predicts p50/p99
per class and memory per node for ``--target-gb`` (100) of corpus in ``--target-repos``
(100,000) repositories on ``--target-nodes`` (20) nodes of ``--node-cores`` (2) cores and
``--node-gib`` (24) GiB, and the nodes an operator needs for a few sizes and latency targets.
The method and its limits: docs/capacity.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import pickle
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench_engine, bench_scaleout, bench_scale
sys.path.insert(0, str(HERE.parent))  # codesearch

import bench_engine as be  # noqa: E402  (query classes, machine info, percentile, corpus paths)
import bench_scaleout as so  # noqa: E402  (generated corpus, pinned searchers, per-actor CPU)
from bench_scale import process_tree, status_kb  # noqa: E402  (/proc readers)
from capacity_model import (  # noqa: E402  (fitting and predicting)
    GB,
    GiB,
    apply,
    best_of_repeats,
    corpus_facts,
    fit_models,
    memory_model,
    node_memory,
    nodes_needed,
    predict,
)

WORK = be.WORK / "capacity"
#: No trigram to plan with (upper-case, digit and lower-case runs): every document is verified.
FULL_SCAN = be.QueryCase("full scan (no usable trigram)", r"[A-Z]{4}\d{6}[a-z]{4}", True, True)
CLASSES = [*be.QUERIES, FULL_SCAN]
ENGINE_CLASSES = [q.cls for q in be.QUERIES]
#: The classes whose work stays in the hundreds of ms at any size (each verifies what it takes to
#: fill its match budget: candidates that hold every trigram in some case, few of them matching):
#: the "usual" classes are the others.
HEAVY = ("case-insensitive regex", "any-case regex, weak trigrams, \\s gaps")
SOURCE_NAME = "capacity-shard-source"

#: issue 25's done-when: every measured point within this of the model
MAX_ERROR = 0.25
#: Of a node's RAM, what the index (in the page cache), its searcher and Ray may take: the rest is
#: for the operating system and everything else on the node.
RAM_USABLE = 0.85


def heavy_names() -> str:
    """`HEAVY` for a sentence: "the A and the B"."""
    return " and the ".join(HEAVY)


# ----------------------------------------------------------------------------- the indexes


def build_index(projects: list[Path], out: Path, shard_mb: int | None = None) -> None:
    """Index `projects` (one repository each) into `out` with this tree's builder, on every core."""
    from codesearch.index.builder import IndexSettings
    from codesearch.index.paths import index_paths

    settings = IndexSettings(shard_max_bytes=shard_mb << 20, ctags=False) if shard_mb else IndexSettings()
    t0 = time.perf_counter()
    stats = index_paths([str(p) for p in projects], str(out), settings, compact=True, jobs=os.cpu_count() or 1)
    print(f"Index: {len(projects)} projects ({stats.input_bytes / 1e6:.0f} MB) indexed into {out} in "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def default_index(quick: bool) -> Path:
    """The index measured when no ``--index`` is given, built with this tree's code if missing."""
    if quick:
        out = WORK / "quick" / "index"
        if not any(out.glob("*.shard")):
            shutil.rmtree(WORK / "quick", ignore_errors=True)
            build_index(so.generate_corpus(WORK / "quick" / "corpus"), out, shard_mb=2)
        return out
    out = WORK / "index-1g"
    if not any(out.glob("*.shard")):
        if not be.CORPUS.is_dir():
            raise SystemExit(f"no index at {out} and no corpus at {be.CORPUS}: run python bench/corpus.py, or --quick")
        build_index(sorted(p for p in be.CORPUS.iterdir() if p.is_dir() and not p.name.endswith(".partial")), out)
    return out


def index_facts(shards: list[str]) -> dict:
    """What shards hold: bytes on disk, corpus bytes (their documents' sizes), files, repositories."""
    from codesearch.index.shard import Shard

    docs = corpus = 0
    repos: set[str] = set()
    for path in shards:
        s = Shard(path)
        try:
            docs += int(s.doc_size.size)
            corpus += int(s.doc_size.sum())
            repos.update(r.name for r in s.live_repos)
        finally:
            s.close()
    return {"shards": len(shards), "index_bytes": sum(os.path.getsize(p) for p in shards), "corpus_bytes": corpus,
            "docs": docs, "repos": len(repos)}


def scaled(index_dir: Path, name: str, k: int) -> tuple[Path, list[str]]:
    """The index `index_dir` served `k` times: for k > 1, a directory of hard links ``x<j>-<shard>``."""
    from codesearch.index.manifest import current_shards

    shards = current_shards(str(index_dir))
    if not shards:
        raise SystemExit(f"{index_dir}: no shards (not an index directory?)")
    if k == 1:
        return index_dir, shards
    out = WORK / f"{name}-x{k}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    paths = []
    for j in range(k):
        for s in shards:
            dst = out / f"x{j}-{os.path.basename(s)}"
            os.link(s, dst)
            paths.append(str(dst))
    return out, paths


# ----------------------------------------------------------------------------- memory of processes


def mapped_shard_bytes(pid: int, dirs: list[str]) -> int:
    """Bytes of the distinct shard files under `dirs` that process `pid` has mapped."""
    prefixes = tuple(os.path.realpath(d) + "/" for d in dirs)
    files = set()
    with contextlib.suppress(OSError), open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6:
                path = parts[5].rstrip("\n").removesuffix(" (deleted)")
                if path.startswith(prefixes) and path.endswith(".shard"):
                    files.add(path)
    return sum(os.path.getsize(p) for p in files if os.path.exists(p))


def searcher_memory(actors, dirs: list[str]) -> list[dict]:
    import ray

    pids = ray.get([a.__ray_call__.remote(lambda _self: os.getpid()) for a in actors], timeout=60)
    return [{"pid": pid, "anon": (status_kb(pid, "RssAnon") or 0) * 1024, "mapped": mapped_shard_bytes(pid, dirs)}
            for pid in pids]


def raylet_rss() -> list[int]:
    """Resident memory of each raylet (one per node) of this process's cluster."""
    out = []
    for pid in process_tree(os.getpid()):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                out.append((status_kb(pid, "VmRSS") or 0) * 1024)
    return out


# ----------------------------------------------------------------------------- measuring


def options(q: be.QueryCase, matches: int):
    """The search options of a class: as the benchmarks send them, with a deadline far enough
    (300 s) that a full scan of the biggest index measured is timed, not cut short."""
    import dataclasses

    return dataclasses.replace(so._options(q, matches), timeout_s=300.0)


def busy_cores(seconds: float = 3.0) -> float:
    """Cores' worth of CPU the whole machine used over the next `seconds` (/proc/stat)."""
    b0, t0 = so.cpu_times()
    time.sleep(seconds)
    b1, t1 = so.cpu_times()
    return (b1 - b0) / (t1 - t0) * (os.cpu_count() or 1) if t1 > t0 else 0.0


def wait_for_quiet(max_busy: float, limit_s: float) -> float:
    """Wait (at most `limit_s`) until the machine, this run's idle cluster included, uses less
    than `max_busy` cores over 3 s; returns the last reading."""
    t0 = time.monotonic()
    busy = busy_cores() if limit_s > 0 else 0.0
    while busy >= max_busy and time.monotonic() - t0 < limit_s:
        busy = busy_cores()
    return busy


def measure_class(pool, actors, q: be.QueryCase, args) -> dict:
    """One query class on one configuration, one query at a time (see the module docstring)."""
    import ray

    scan = q is FULL_SCAN
    runs, direct_runs = (args.scan_runs, args.scan_runs) if scan else (args.runs, args.direct_runs)
    opts = options(q, args.matches)
    before = wait_for_quiet(args.max_busy, args.load_wait)
    load = os.getloadavg()[0]
    for _ in range(1 if scan else 2):
        pool.search(q.cs_query, opts)
    # the work of each partition: all its shards (no early stop), CPU of its process, asked as the
    # pool asks (`search_wire`: the request and the answer pickled once, as bytes; through `search`
    # Ray pickles the arguments and the answer itself, ~0.3-0.5 ms more per search)
    c0 = so.actor_cpus(actors)
    parts = []
    for _ in range(direct_runs):
        wire = pickle.dumps((q.cs_query, opts, time.time() + opts.timeout_s, None, None), pickle.HIGHEST_PROTOCOL)
        answers = ray.get([a.search_wire.remote(wire) for a in actors], timeout=opts.timeout_s + 60)
        parts = [pickle.loads(answer) for answer in answers]
    c1 = so.actor_cpus(actors)
    direct = [(b - a) / direct_runs for a, b in zip(c0, c1, strict=True)]
    # latency through the pool, and the CPU each process spent
    lat = []
    merged: dict = {}
    c0, d0, m0, w0 = so.actor_cpus(actors), time.process_time(), so.cpu_times(), time.perf_counter()
    for _ in range(runs):
        t0 = time.perf_counter()
        merged = pool.search(q.cs_query, opts)
        lat.append(time.perf_counter() - t0)
    d1, c1, m1, w1 = time.process_time(), so.actor_cpus(actors), so.cpu_times(), time.perf_counter()
    pool_cpu = [(b - a) / runs for a, b in zip(c0, c1, strict=True)]
    ours = ((d1 - d0) + runs * sum(pool_cpu)) / (w1 - w0)
    busy = (m1[0] - m0[0]) / (m1[1] - m0[1]) * (os.cpu_count() or 1) if m1[1] > m0[1] else ours
    st = merged.get("stats", {})
    return {
        "lat": lat, "load": load, "busy_before": before, "driver_cpu": (d1 - d0) / runs, "pool_cpu": pool_cpu,
        "direct_cpu": direct,
        "others": max(0.0, busy - ours),  # cores' worth of CPU the rest of the machine used meanwhile
        "parts": [{"shards": p.stats.shardsScanned, "files": p.stats.filesLoaded, "bytes": p.stats.contentBytesLoaded,
                   "candidates": p.stats.ngramMatches, "matches": p.total_matches, "truncated": p.truncated}
                  for p in parts],
        "answer": {"files": st.get("fileCount"), "matches": st.get("totalMatchCount"),
                   "skipped": st.get("shardsSkipped"), "crashes": st.get("crashes")},
    }


def measure_config(size: dict, partitions: int, args) -> dict:
    """Start `partitions` searchers over the shards of `size`, measure every class, stop them."""
    from codesearch.runtime.published import balance
    from codesearch.runtime.searchers import SearcherPool

    groups = balance(size["paths"], partitions)
    nodes = [i % args.nodes for i in range(partitions)]
    copy_dirs = [WORK / "nodes" / f"node{n}" / f"p{i}" for i, n in enumerate(nodes)]
    extra = [{"copy_to": str(d), "source": size["source"]} if n and args.copy else {}
             for n, d in zip(nodes, copy_dirs, strict=True)]
    shutil.rmtree(WORK / "nodes", ignore_errors=True)
    t0 = time.perf_counter()
    actors = so.start_searchers(groups, nodes, extra)
    out = {"size": size["label"], "partitions": partitions, "nodes": nodes, "start_s": time.perf_counter() - t0,
           "copied_bytes": sum(os.path.getsize(p) for g, n in zip(groups, nodes, strict=True) if n and args.copy
                               for p in g),
           "part_shards": [len(g) for g in groups], "part_bytes": [sum(os.path.getsize(p) for p in g) for g in groups],
           "classes": {}}
    pool = SearcherPool(actors)
    try:
        out["distinct_nodes"] = len(set(so.node_of(actors)))
        # A searcher that has just started keeps working in the background for a moment (Ray's
        # threads, first calls), which its CPU counter would add to the first class measured.
        time.sleep(args.settle)
        so.actor_cpus(actors)
        for q in be.QUERIES:
            pool.search(q.cs_query, options(q, args.matches))
        for q in CLASSES:
            if q is FULL_SCAN and not args.scan_runs:
                continue
            m = out["classes"][q.cls] = measure_class(pool, actors, q, args)
            print(f"  {size['label']}, {partitions} partitions, {q.cls}: p50 {1000 * statistics.median(m['lat']):.1f} "
                  f"ms (load {m['load']:.1f}, others {m['others']:.2f} cores)", file=sys.stderr, flush=True)
        out["memory"] = searcher_memory(actors, [size["dir"], *map(str, copy_dirs)])
        out["raylets"] = raylet_rss()
    finally:
        pool.close()
    return out


def measure(args, out: Path) -> dict:
    """Every configuration; the measurements so far are saved to `out` after each one (a run
    stopped halfway keeps them)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray.cluster_utils import Cluster

    from codesearch.runtime import NAMESPACE
    from codesearch.runtime.shard_copy import ShardSource

    sizes = []
    for spec in args.index or [f"{'quick' if args.quick else '1g'}={default_index(args.quick)}"]:
        name, _, path = spec.partition("=")
        if not name or not path:
            raise SystemExit(f"--index {spec}: expected NAME=DIR")
        base = index_facts(scaled(Path(path), name, 1)[1])
        for k in args.scales:
            d, paths = scaled(Path(path), name, k)
            sizes.append({"label": f"{name}×{k}" if k > 1 else name, "dir": str(d), "paths": paths, "scale": k,
                          **{key: v * k for key, v in base.items()}})
    data: dict = {"machine": be.machine_info(), "date": time.strftime("%Y-%m-%d %H:%M"),
                  "args": {k: v for k, v in vars(args).items() if k not in ("from_json", "with_json")},
                  "sizes": [{k: v for k, v in s.items() if k != "paths"} for s in sizes], "configs": []}
    cluster = None
    try:
        t0 = time.perf_counter()
        node = {"num_cpus": 2, "object_store_memory": 256 << 20}
        cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False,
                                                                "resources": {"node0": 1}})
        for i in range(1, args.nodes):
            cluster.add_node(**node, resources={f"node{i}": 1})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        data["cluster_start_s"] = time.perf_counter() - t0
        print(f"Cluster: {args.nodes} nodes up in {data['cluster_start_s']:.0f} s", file=sys.stderr, flush=True)
        for size in sizes:
            size["source"] = f"{SOURCE_NAME}-{size['label']}"
            source = ray.remote(ShardSource).options(name=size["source"], namespace=NAMESPACE, num_cpus=0,
                                                     resources={"node0": 0.01}).remote(size["dir"])
            ray.get(source.ping.remote(), timeout=60)
            for repeat in range(args.repeat):
                for p in args.partitions:
                    data["configs"].append({"repeat": repeat, **measure_config(size, p, args)})
                    out.write_text(json.dumps(data, indent=1))
            ray.kill(source)
    finally:
        be.exit_after(args.shutdown_timeout)  # bounded shutdown: ends the process if Ray hangs
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(WORK / "nodes", ignore_errors=True)
    return data


def budgets(matches: int) -> dict[str, int | None]:
    """Per class, the match budget at which the pool stops asking the other partitions (its early
    stop), or None for a query that names an identifier (its definitions rank first, so every
    partition answers: `Fanout`)."""
    from codesearch.search.engine import make_plan
    from codesearch.search.evaluate import searches_identifiers

    return {q.cls: None if searches_identifiers(make_plan(q.cs_query, so._options(q, matches))) else matches
            for q in CLASSES}


def combine(runs: list[dict]) -> dict:
    """The measurements of several runs as one (the first run's machine and settings; a size
    measured in several runs keeps, per point, the lowest p50: see `best_of_repeats`)."""
    sizes = {}
    for r in runs:
        for s in r["sizes"]:
            sizes.setdefault(s["label"], s)
    return {**runs[0], "date": ", ".join(dict.fromkeys(r.get("date", "?") for r in runs)),
            "sizes": list(sizes.values()), "configs": [c for r in runs for c in r["configs"]]}


# ----------------------------------------------------------------------------- printing


def ms(x: float | None) -> str:
    return be.fmt_ms(x)


def err(model: float, measured: float) -> float:
    return model / measured - 1 if measured else math.inf


def print_report(data: dict, models: dict, mem: dict, args) -> bool:
    """All the tables; returns True when every measured point is within MAX_ERROR of the model."""
    facts = corpus_facts(data)
    print("## Machine and setup\n")
    print("\n".join(data["machine"]))
    print(f"- measured {data.get('date', '?')}; {data['args']['nodes']} simulated nodes (Ray `Cluster`, 2 logical CPUs "
          f"each) sharing this machine's cores; cluster up in {data.get('cluster_start_s', 0):.0f} s; "
          f"{data['args']['runs']} searches per point through the pool, {data['args']['direct_runs']} per partition "
          f"for its work ({data['args']['scan_runs']} each for the full scan)"
          + (f"; before each class, a wait (at most {data['args']['load_wait']:.0f} s) for the machine to use less "
             f"than {data['args'].get('max_busy', 0.6)} cores" if data["args"].get("load_wait") else ""))
    print()
    print("| size | corpus MB | index MB | shards | files | repositories |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in data["sizes"]:
        print(f"| {s['label']} | {s['corpus_bytes'] / 1e6:.0f} | {s['index_bytes'] / 1e6:.0f} | {s['shards']} | "
              f"{s['docs']} | {s['repos']} |")
    print()
    print("Shards copied through Ray to the nodes without the index: seconds from starting the searchers to all of "
          "them answering, their copies fetched and verified (the first copies of a run also wait for the source to "
          "hash its shards once; `--no-copy`: every node reads the index directory):\n")
    print("| size | partitions | nodes used | shards per partition | copied MB | start + copy s | MB/s |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for c in data["configs"]:
        mbs = c["copied_bytes"] / 1e6
        rate = f"{mbs / c['start_s']:.0f}" if mbs else "–"
        print(f"| {c['size']} | {c['partitions']} | {c.get('distinct_nodes', '?')} | "
              f"{', '.join(map(str, c['part_shards']))} | {mbs:.0f} | "
              f"{c['start_s']:.1f} | {rate} |")
    print()

    print("## The model, per query class\n")
    print("work per partition (CPU s) = w0 + w_shard × shards + w_file × files verified + w_byte × bytes verified; "
          "merge (CPU s of the process that fans out and merges) = d0 + fan × partitions; latency here = wait + merge "
          f"+ scale × answered + crowd × answered × max(0, partitions / {args.cores:g} − 1), answered = the time the "
          f"partitions' work takes on the machine's {args.cores:g} cores (shared, with the pool's early stop at the "
          "match budget); on real nodes = wait + merge + scale × slowest partition = hop + fan × partitions + "
          "scale × slowest partition; p99 = tail × p50.\n")
    print("| class | w0 ms | w_shard ms | w_file µs | w_byte ns/B | work: worst error | d0 ms | fan ms/partition | "
          "merge: worst error | hop ms | scale | crowd | tail p99/p50 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cls, m in models.items():
        w, d = m["work"], m["driver"]
        worst = max(m["rows"], key=lambda r: abs(err(r["model"], r["cpu"])))
        worst_d = max(m["points"], key=lambda p: abs(err(p["driver_model"], p["driver_cpu"])))
        print(f"| {cls} | {1e3 * w['one']:.2f} | {1e3 * w['shards']:.3f} | {1e6 * w['files']:.2f} | "
              f"{1e9 * w['bytes']:.2f} | {100 * err(worst['model'], worst['cpu']):+.0f}% ({worst['size']}, "
              f"P={worst['P']}) | {1e3 * d['one']:.2f} | {1e3 * d['partitions']:.2f} | "
              f"{100 * err(worst_d['driver_model'], worst_d['driver_cpu']):+.0f}% (P={worst_d['P']}) | "
              f"{1e3 * m['latency']['one']:.2f} | {m['scale']:.2f} | {m['crowd']:.2f} | {m['tail']:.2f} |")
    print()
    every = [p for m in models.values() for p in m["points"]]
    calm = [p for p in every if p["quiet"]]
    print("hop = wait + d0, wait = what wall time adds to the CPU (wake-ups, the trips between the processes); "
          "scale = how much of a partition's work measured alone (searches in a row, no early stop) it spends in a "
          "search through the pool; crowd = what more partitions than cores add here (real nodes, one partition "
          "each, have no such term); tail = the class's median measured p99/p50. Each fitted per class on its "
          "points.\n")

    print("## Measured points against the model\n")
    print("p50 latency through `SearcherPool.search`, measured / model, ms (error); ✗ = more than "
          f"{100 * MAX_ERROR:.0f}% off; * = measured while the rest of the machine used more than {args.quiet:g} "
          "cores.\n")
    classes = list(models)
    keys = [(c["size"], c["partitions"]) for c in data["configs"]]

    def point(cls, size, P):
        return next((p for p in models[cls]["points"] if p["size"] == size and p["P"] == P), None)

    def table(cell) -> None:
        """One row per (size, partitions), one column per class; `cell` writes a measured point."""
        print("| size | partitions | " + " | ".join(classes) + " |")
        print("|---|---:|" + "---:|" * len(classes))
        for size, P in keys:
            cells = [("–" if (p := point(cls, size, P)) is None else cell(p)) for cls in classes]
            print(f"| {size} | {P} | " + " | ".join(cells) + " |")
        print()

    def p50_cell(p) -> str:
        e = err(p["model"], p["p50"])
        mark = " ✗" if abs(e) > MAX_ERROR else ""
        return f"{ms(p['p50'])}{'' if p['quiet'] else '*'} / {ms(p['model'])} ({100 * e:+.0f}%{mark})"

    table(p50_cell)
    ok = all(abs(err(p["model"], p["p50"])) <= MAX_ERROR for p in every)
    within = [p for p in every if abs(err(p["model"], p["p50"])) <= MAX_ERROR]
    print(f"p50 within {100 * MAX_ERROR:.0f}% of the model: {len(within)} of {len(every)} points "
          f"({sum(p['quiet'] for p in within)} of the {len(calm)} quiet ones); the rest of the machine used "
          f"{min(p['others'] for p in every):.2f}-{max(p['others'] for p in every):.2f} cores during the points "
          f"(median {statistics.median(p['others'] for p in every):.2f}).\n")
    runs = data["args"]["runs"]
    print(f"p99 (nearest rank: of {runs} runs, the slowest), measured / model (tail × model p50), ms:\n")
    table(lambda p: f"{ms(p['p99'])}{'' if p['quiet'] else '*'} / {ms(p['model99'])} "
                    f"({100 * err(p['model99'], p['p99']):+.0f}%)")
    n_rows = sum(len(m["rows"]) for m in models.values())
    n_in = sum(abs(err(r["model"], r["cpu"])) <= MAX_ERROR for m in models.values() for r in m["rows"])
    print(f"Work per partition (CPU per search of each partition, measured without the pool's early stop): {n_in} of "
          f"{n_rows} partition points within {100 * MAX_ERROR:.0f}% of the model; worst per class: "
          + ", ".join(f"{cls} {100 * max(abs(err(r['model'], r['cpu'])) for r in m['rows']):.0f}%"
                      for cls, m in models.items()) + ".\n")
    worst_mem = max(abs(err(mem["base"] + mem["per_byte"] * r["mapped"], r["anon"])) for r in mem["rows"])
    print(f"Searcher memory: RssAnon = {mem['base'] / 2**20:.0f} MiB + {mem['per_byte'] * 1e3:.1f} MB per GB of "
          f"shards mapped (worst error {100 * worst_mem:.0f}% over {len(mem['rows'])} searchers); raylet RSS "
          f"{mem['raylet_min'] / 2**20:.0f}-{mem['raylet_max'] / 2**20:.0f} MiB (its object store's pages included).\n")

    # ---- the prediction
    target = predict(models, facts, args.target_gb, args.target_nodes)
    memory = node_memory(mem, target["index_per_node"])
    print(f"## Prediction: {args.target_gb:g} GB of code in {args.target_repos:,} repositories on {args.target_nodes} "
          f"nodes ({args.node_cores} cores, {args.node_gib:g} GiB)\n")
    print(f"One partition per node: {target['index_per_node'] / GB:.2f} GB of index each (index = "
          f"{facts['index_per_corpus']:.2f} × corpus, as measured), {target['shards_per_node']} shards of "
          f"{facts['shard_bytes'] / 1e6:.0f} MB, {args.target_repos / args.target_nodes:,.0f} repositories. Shards "
          "hold many repositories (the compactor packs small ones), so their number follows bytes, not repositories; "
          "no term of the model counts repositories (measured: up to "
          f"{max(s['repos'] for s in data['sizes']):,} repositories in one partition).\n")
    print("| class | files verified per partition | MB verified per partition | work per partition ms | p50 ms | "
          "p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for cls, p in target["classes"].items():
        print(f"| {cls} | {p['files']:.0f} | {p['bytes'] / 1e6:.1f} | {ms(p['work'])} | {ms(p['p50'])} | "
              f"{ms(p['p99'])} |")
    print()
    print(f"Memory per node: searcher RssAnon {memory['anon'] / GiB:.2f} GiB + raylet {memory['raylet'] / GiB:.2f} GiB "
          f"+ page cache for its index {memory['page_cache'] / GiB:.2f} GiB = **{memory['total'] / GiB:.1f} GiB** "
          f"(of {args.node_gib:g}).\n")
    usual = [c for c in ENGINE_CLASSES if c in target["classes"] and c not in HEAVY]
    if usual:
        work = statistics.mean(target["classes"][c]["work"] for c in usual)
        merge = statistics.mean(apply(models[c]["driver"], {"one": 1.0, "partitions": args.target_nodes})
                                for c in usual)
        print(f"Throughput, the {len(usual)} usual classes (all but the {heavy_names()}) in equal parts: a search "
              "costs each node "
              f"{ms(work)} ms of CPU, so one copy of the {args.target_nodes} nodes answers at most "
              f"{args.node_cores / work:.0f} searches/s ({args.node_cores} cores a node; `--searcher-copies` "
              f"multiplies it), and the process that merges spends {ms(merge)} ms of CPU on each: "
              f"{1 / merge:.0f} searches/s per core of API replicas.\n")

    # ---- the operator's table
    heavy = heavy_names()
    selective = [c for c in ENGINE_CLASSES if c in models and c not in HEAVY]
    sizes = [10, 50, 100, 250, 500, 1000]
    ram = args.node_gib * GiB * RAM_USABLE
    print(f"## Nodes needed ({args.node_cores} cores, {args.node_gib:g} GiB each; one partition per node)\n")
    print(f"The fewest nodes whose predicted latency meets the target, for every one of the {len(selective)} classes "
          f"other than the {heavy} (the usual searches; each of these costs what it verifies to fill its match "
          "budget, about the same at any size: see the table after this one), and for a full scan (the default search "
          f"timeout is 30 s). By memory: the fewest nodes whose index, searcher and raylet fit in {RAM_USABLE:.0%} of "
          "a node's RAM. '–' = no number of nodes does (the fan-out cost grows with the nodes).\n")
    targets = [(selective, "p50", 0.05), (selective, "p50", 0.1), (selective, "p99", 0.1), (selective, "p99", 0.25),
               ([FULL_SCAN.cls], "p50", 10.0), ([FULL_SCAN.cls], "p50", 30.0)]

    def label(cs, which, t):
        name = "usual" if cs is selective else "full scan"
        return f"{name} {which} ≤ {f'{1000 * t:.0f} ms' if t < 1 else f'{t:g} s'}"

    print("| corpus GB | by memory | " + " | ".join(label(*x) for x in targets) + " |")
    print("|---:|---:|" + "---:|" * len(targets))
    for gb in sizes:
        cells = []
        by_memory = 0
        for cs, which, t in targets:
            n, by_memory = nodes_needed(models, facts, mem, gb, t, which, [c for c in cs if c in models], ram)
            cells.append(str(n) if n else "–")
        print(f"| {gb} | {by_memory} | " + " | ".join(cells) + " |")
    print()
    counts = [5, 10, 20, 40, 80, 160]
    print(f"p50 / p99 per class, ms, for {args.target_gb:g} GB on N nodes (where the fan-out cost and the "
          "partition's work balance):\n")
    print("| class | " + " | ".join(f"N = {n}" for n in counts) + " |")
    print("|---|" + "---:|" * len(counts))
    preds = {n: predict(models, facts, args.target_gb, n)["classes"] for n in counts}
    for cls in models:
        print(f"| {cls} | " + " | ".join(f"{ms(preds[n][cls]['p50'])} / {ms(preds[n][cls]['p99'])}" for n in counts)
              + " |")
    print()
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: a generated ~24 MB corpus, few runs")
    ap.add_argument("--index", action="append", metavar="NAME=DIR",
                    help="an index directory to measure (repeatable; default: the 1 GB corpus's, built if missing)")
    ap.add_argument("--scales", type=int, nargs="+", default=[1, 2], help="serve each index this many times (1 2)")
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--runs", type=int, default=50, help="searches through the pool per point (p50, p99)")
    ap.add_argument("--direct-runs", type=int, default=8, help="searches per partition for its work")
    ap.add_argument("--scan-runs", type=int, default=3, help="both, for the full scan (0: leave it out)")
    ap.add_argument("--matches", type=int, default=100)
    ap.add_argument("--cores", type=float, default=float(len(os.sched_getaffinity(0))),
                    help="cores the simulated nodes share (default: this machine's)")
    ap.add_argument("--max-busy", type=float, default=0.6,
                    help="before each class, wait for the machine to use less than this many cores over 3 s")
    ap.add_argument("--load-wait", type=float, default=120.0, help="... for at most this many seconds per class")
    ap.add_argument("--target-gb", type=float, default=100.0)
    ap.add_argument("--target-repos", type=int, default=100_000)
    ap.add_argument("--target-nodes", type=int, default=20)
    ap.add_argument("--node-cores", type=int, default=2)
    ap.add_argument("--node-gib", type=float, default=24.0)
    ap.add_argument("--no-copy", dest="copy", action="store_false",
                    help="searchers on every node read the index directory itself (shared storage) instead of "
                         "copies fetched through Ray: for an index the page cache cannot hold twice")
    ap.add_argument("--quiet", type=float, default=0.5,
                    help="a point is quiet (fitted, counted) when the rest of the machine used at most this many cores")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds between starting searchers and measuring")
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure every configuration this many times, at different moments; keep the lowest p50 "
                         "of each point (other work on the machine only ever adds to a wall time)")
    ap.add_argument("--from-json", nargs="+", metavar="FILE",
                    help="measure nothing: fit and print from the measurements earlier runs saved (fitted together)")
    ap.add_argument("--with-json", nargs="+", default=[], metavar="FILE",
                    help="fit this run's measurements together with those earlier runs saved")
    ap.add_argument("--shutdown-timeout", type=float, default=60.0)
    args = ap.parse_args()
    if args.quick:
        args.runs, args.direct_runs, args.scan_runs = min(args.runs, 10), min(args.direct_runs, 3), 1
        args.partitions = [p for p in args.partitions if p <= 4]
        args.load_wait, args.settle = 0.0, 1.0
    runs = [json.loads(Path(f).read_text()) for f in [*(args.from_json or []), *args.with_json]]
    if not args.from_json:
        WORK.mkdir(parents=True, exist_ok=True)
        out = WORK / f"points-{time.strftime('%Y%m%d-%H%M%S')}.json"
        data = measure(args, out)
        print(f"Measurements saved to {out}", file=sys.stderr)
        runs.insert(0, data)
    args.cores = runs[0]["args"].get("cores", args.cores)
    data = best_of_repeats(combine(runs))
    models = fit_models(data, args.cores, [q.cls for q in CLASSES], args.quiet, budgets(args.matches))
    ok = print_report(data, models, memory_model(data), args)
    print(f"Every measured p50 within {100 * MAX_ERROR:.0f}% of the model: {'yes' if ok else 'no'}.")
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
