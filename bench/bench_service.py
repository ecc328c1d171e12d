#!/usr/bin/env python3
"""End-to-end benchmark of the codesearch service: `POST /api/search` on Ray Serve (issue 4).

Usage:
    python bench/corpus.py                          # once: the corpus in bench/.corpus/
    python bench/bench_service.py --reuse-index     # reuse bench/.work/index (built by bench_engine.py)
    python bench/bench_service.py                   # (re)build the index first
    python bench/bench_service.py --quick           # smoke run: numpy only, fewer requests

One run, one process (see bench/README.md):
  * builds the index of the corpus (or reuses it with --reuse-index);
  * starts a local Ray instance (RAY_AUTH_MODE=disabled), 2 shard searchers (`SearcherPool`) and
    the Serve application (`search_application`: 1 replica, max_ongoing_requests 64, anonymous
    access on, data dir bench/.work/service) on 127.0.0.1;
  * for 1, 8 and 32 concurrent clients (threads, one httpx.Client each): a bounded load of
    `POST /api/search` with matches=100 over the query mix of bench_engine.py (round robin),
    recording per-request latency, failures (non-200, transport errors) and throughput;
  * the same mix through `SearcherPool.search` from the driver (Ray fan-out, no HTTP), through
    `Searcher.search` in this process (the engine alone) and through `rg ... | head -n 100`;
  * prints a markdown table and the overhead = HTTP p50 at 1 client − engine p50;
  * shuts down Serve and Ray (with a watchdog so that the run is bounded in time).
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench_engine
sys.path.insert(0, str(HERE.parent))  # codesearch

import bench_engine as be  # noqa: E402  (query list, machine info, rg runner, percentile)

LEVELS = [1, 8, 32]
PREFIX = "bench-svc-searcher"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def body_for(q: be.QueryCase, matches: int = 100) -> dict:
    return {"query": q.cs_query, "matches": matches, "contextLines": 0,
            "isRegexEnabled": q.is_regex, "isCaseSensitivityEnabled": q.case_sensitive,
            "source": "bench_service"}


def fmt(x: float | None) -> str:
    return be.fmt_ms(x)


def pct(samples: list[float], p: float) -> float | None:
    return be.percentile(samples, p) if samples else None


def p50(samples: list[float]) -> float | None:
    return statistics.median(samples) if samples else None


# ----------------------------------------------------------------------------- load


def run_level(url: str, clients: int, requests: int, max_seconds: float, queries: list[be.QueryCase],
              timeout: float) -> dict:
    """`requests` POSTs (or fewer when `max_seconds` runs out) by `clients` threads, queries round robin."""
    import httpx

    lock = threading.Lock()
    counter = [0]
    lat: list[float] = []
    per_class: dict[str, list[float]] = {q.cls: [] for q in queries}
    failures: list[str] = []
    barrier = threading.Barrier(clients + 1)
    deadline = [0.0]

    def worker():
        with httpx.Client(base_url=url, timeout=timeout) as c:
            # one untimed request per client: opens its connection
            try:
                c.post("/api/search", json=body_for(queries[-1]))
            except Exception:  # noqa: BLE001 - counted in the timed part if it persists
                pass
            barrier.wait()
            while True:
                with lock:
                    i = counter[0]
                    if i >= requests or time.perf_counter() > deadline[0]:
                        return
                    counter[0] += 1
                q = queries[i % len(queries)]
                t0 = time.perf_counter()
                err = None
                try:
                    r = c.post("/api/search", json=body_for(q))
                    if r.status_code != 200:
                        err = f"HTTP {r.status_code}: {r.text[:120]}"
                except Exception as e:  # noqa: BLE001
                    err = f"{type(e).__name__}: {e}"
                dt = time.perf_counter() - t0
                with lock:
                    if err is None:
                        lat.append(dt)
                        per_class[q.cls].append(dt)
                    else:
                        failures.append(err)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + max_seconds + 3600  # set for real once everyone is connected
    barrier.wait()
    t0 = time.perf_counter()
    deadline[0] = t0 + max_seconds
    for t in threads:
        t.join(timeout=max_seconds + timeout + 10)
    wall = time.perf_counter() - t0
    done = len(lat) + len(failures)
    return {"clients": clients, "requests": done, "ok": len(lat), "failures": failures, "wall": wall,
            "rps": done / wall if wall > 0 else 0.0, "lat": lat, "per_class": per_class,
            "stuck": sum(t.is_alive() for t in threads)}


def check_results(url: str, searcher, queries: list[be.QueryCase]) -> tuple[list[str], list[str]]:
    """The HTTP response of each query has the engine's match count, and its files (repository,
    fileName) when the search is exhaustive. Under the cap of 100 the fan-out may keep another
    subset of files than the single in-process Searcher: listed apart (second list), not an error."""
    import httpx

    out, info = [], []
    with httpx.Client(base_url=url, timeout=60) as c:
        for q in queries:
            r = c.post("/api/search", json=body_for(q))
            if r.status_code != 200:
                out.append(f"{q.cls}: HTTP {r.status_code} {r.text[:200]}")
                continue
            h = r.json()
            e = be.cs_search(searcher, q, 100)
            hf = [(f["repository"], f["fileName"]["text"]) for f in h.get("files", [])]
            ef = [(f["repository"], f["fileName"]["text"]) for f in e.get("files", [])]
            hm, em = h.get("stats", {}).get("actualMatchCount"), e.get("stats", {}).get("actualMatchCount")
            if hm != em or (e.get("isSearchExhaustive") and sorted(hf) != sorted(ef)):
                out.append(f"{q.cls}: HTTP {hm} matches in {len(hf)} files, engine {em} in {len(ef)} files"
                           f" (same file set: {set(hf) == set(ef)})")
            elif sorted(hf) != sorted(ef):
                info.append(f"{q.cls} ({len(hf)} vs {len(ef)} files)")
    return out, info


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"smoke run: {be.QUICK_PROJECT} only, fewer requests")
    ap.add_argument("--projects", nargs="*", help="project directory name prefixes (default: all)")
    ap.add_argument("--index-dir", default=str(be.WORK / "index"))
    ap.add_argument("--reuse-index", action="store_true", help="do not rebuild when the index directory exists")
    ap.add_argument("--requests", type=int, default=None,
                    help="timed requests per concurrency level (default: 15, 40, 80 rounds of the "
                         "7-query mix = 105, 280, 560 requests at 1, 8, 32 clients; --quick 35, 70, 140)")
    ap.add_argument("--max-seconds", type=float, default=60.0, help="cap on each level's timed load (default 60)")
    ap.add_argument("--runs", type=int, default=15, help="timed runs per query for engine, fan-out and rg (default 15)")
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--max-ongoing", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=60.0, help="per-request client timeout, s")
    ap.add_argument("--shutdown-timeout", type=float, default=60.0)
    args = ap.parse_args()
    if args.quick:
        args.projects = args.projects or [be.QUICK_PROJECT]
        args.runs = min(args.runs, 5)
        args.max_seconds = min(args.max_seconds, 20.0)
        if args.index_dir == str(be.WORK / "index"):
            args.index_dir = str(be.WORK / "index-quick")
    n_q = len(be.QUERIES)

    def n_requests(level: int) -> int:
        if args.requests:
            return args.requests
        per = {1: 15, 8: 40, 32: 80} if not args.quick else {1: 5, 8: 10, 32: 20}
        return per[level] * n_q  # whole rounds of the query mix

    if not be.CORPUS.is_dir():
        print(f"no corpus at {be.CORPUS}: run python bench/corpus.py first", file=sys.stderr)
        return 2
    if shutil.which("rg") is None:
        print("rg (ripgrep) not found on PATH", file=sys.stderr)
        return 2
    projects = sorted(p for p in be.CORPUS.iterdir() if p.is_dir() and not p.name.endswith(".partial"))
    if args.projects:
        projects = [p for p in projects if any(p.name.lower().startswith(x.lower()) for x in args.projects)]
    if not projects:
        print("no project directory selected", file=sys.stderr)
        return 2

    print("## Machine\n")
    print("\n".join(be.machine_info()))
    print(f"- projects: {', '.join(p.name for p in projects)}")
    print()
    sys.stdout.flush()

    from codesearch.index.builder import IndexSettings
    from codesearch.index.paths import index_paths
    from codesearch.search.engine import Searcher
    from codesearch.search.options import SearchOptions

    index_dir = Path(args.index_dir)
    if args.reuse_index and index_dir.is_dir() and any(index_dir.iterdir()):
        print(f"Index: reused {index_dir}")
    else:
        if index_dir.exists():
            shutil.rmtree(index_dir)
        index_dir.mkdir(parents=True)
        t0 = time.perf_counter()
        stats = index_paths([str(p) for p in projects], str(index_dir), IndexSettings())
        print(f"Index: built {index_dir} in {time.perf_counter() - t0:.1f} s ({len(stats.shards)} shards)")
    print()
    sys.stdout.flush()

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    data_dir = be.WORK / "service"
    data_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    notes: list[str] = []
    pool = None
    searcher = None
    n_searchers = 0
    t_start = time.perf_counter()
    try:
        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
        pool = SearcherPool.create(str(index_dir), args.searchers, name_prefix=PREFIX)
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(search_application(PREFIX, len(pool.actors), replicas=1, max_ongoing_requests=args.max_ongoing,
                                     data_dir=str(data_dir), anonymous_access=True),
                  name="codesearch-bench", route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        n_searchers = len(pool.actors)
        print(f"Service: Ray + {len(pool.actors)} searchers + Serve (1 replica, max_ongoing_requests "
              f"{args.max_ongoing}) at {url}, up in {time.perf_counter() - t0:.1f} s")
        sys.stdout.flush()

        searcher = Searcher(str(index_dir))
        mismatches, capped_diff = check_results(url, searcher, be.QUERIES)
        notes += ["HTTP result differs from the engine: " + m for m in mismatches]
        if capped_diff:
            notes.append("same match count (100, capped) but another subset of files than the single in-process "
                         "Searcher (expected with the fan-out under a cap): " + ", ".join(capped_diff))
        if not mismatches:
            print("Check: every class has the engine's match count over HTTP (and its files when exhaustive)")

        # ---- HTTP load
        for level in LEVELS:
            la = os.getloadavg()
            r = run_level(url, level, n_requests(level), args.max_seconds, be.QUERIES, args.timeout)
            r["load"] = la
            results[level] = r
            print(f"  level {level}: {r['requests']} requests, {len(r['failures'])} failures, "
                  f"{r['rps']:.1f} req/s, p50 {fmt(p50(r['lat']))} ms (load before {la[0]:.2f})",
                  file=sys.stderr, flush=True)
            if r["stuck"]:
                notes.append(f"{level} clients: {r['stuck']} client threads still busy at the end")

        # ---- the same mix without HTTP: fan-out from the driver, engine in-process, rg | head
        fan: list[float] = []
        eng: list[float] = []
        rgc: list[float] = []
        per_q: dict[str, dict[str, float | None]] = {}
        rg_run = be.make_rg_runner([p.name for p in projects] if args.projects else None)
        rg_run(be.QueryCase("warm", "zzqqxxwarmup", False, True), be.CORPUS, "full")
        for q in be.QUERIES:
            opts = SearchOptions(matches=100, context_lines=0, is_regex=q.is_regex, case_sensitive=q.case_sensitive)
            f = be.time_runs(lambda: pool.search(q.cs_query, opts), args.runs)
            e = be.time_runs(lambda: be.cs_search(searcher, q, 100), args.runs)
            g = be.time_runs(lambda: rg_run(q, be.CORPUS, "capped"), args.runs)
            fan += f
            eng += e
            rgc += g
            per_q[q.cls] = {"fan": p50(f), "eng": p50(e), "rg": p50(g),
                            "http1": p50(results[1]["per_class"][q.cls])}
    finally:
        be.exit_after(args.shutdown_timeout)  # bounded shutdown: ends the process if Serve or Ray hang
        t0 = time.perf_counter()
        if searcher is not None:
            searcher.close()
        try:
            serve.shutdown()
        except Exception as e:  # noqa: BLE001
            print(f"serve.shutdown: {type(e).__name__}: {e}", file=sys.stderr)
        if pool is not None:
            try:
                pool.close()
            except Exception as e:  # noqa: BLE001
                print(f"pool.close: {type(e).__name__}: {e}", file=sys.stderr)
        ray.shutdown()
        shutdown_s = time.perf_counter() - t0
        print(f"Shutdown: {shutdown_s:.1f} s; whole service part {time.perf_counter() - t_start:.0f} s",
              file=sys.stderr, flush=True)

    # ---------------------------------------------------------------- tables
    print()
    print(f"## Service: `POST /api/search`, matches=100, query mix of bench_engine.py "
          f"({n_q} classes, round robin); times in ms\n")
    print("| path | clients | requests | failures | req/s | p50 | p95 | load avg (1 min) before |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for level in LEVELS:
        r = results[level]
        print(f"| HTTP (Serve → {n_searchers} searchers) | {level} | {r['requests']} | {len(r['failures'])} | {r['rps']:.1f} | "
              f"{fmt(p50(r['lat']))} | {fmt(pct(r['lat'], 95))} | {r['load'][0]:.2f} |")
    print(f"| fan-out alone (`SearcherPool.search` from the driver) | 1 | {len(fan)} | – | "
          f"{len(fan) / sum(fan):.1f} | {fmt(p50(fan))} | {fmt(pct(fan, 95))} | |")
    print(f"| engine alone (`Searcher.search` in-process) | 1 | {len(eng)} | – | {len(eng) / sum(eng):.1f} | "
          f"{fmt(p50(eng))} | {fmt(pct(eng, 95))} | |")
    print(f"| `rg … \\| head -n 100` | 1 | {len(rgc)} | – | {len(rgc) / sum(rgc):.1f} | {fmt(p50(rgc))} | "
          f"{fmt(pct(rgc, 95))} | |")
    print()
    h1 = p50(results[1]["lat"])
    ov = (h1 - p50(eng)) if h1 is not None else None
    ovf = (h1 - p50(fan)) if h1 is not None else None
    print(f"**Overhead at 1 client** (HTTP p50 − engine p50 over the mix): **{fmt(ov)} ms** "
          f"(target ≤ 15 ms; of which Ray fan-out {fmt(p50(fan) - p50(eng))} ms, HTTP + Serve {fmt(ovf)} ms). "
          f"Failures at 32 clients: **{len(results[32]['failures'])}** (target 0).")
    print()
    print("Per query class, p50 in ms:\n")
    print("| class | HTTP, 1 client | fan-out | engine | rg \\| head -n 100 | HTTP − engine |")
    print("|---|---:|---:|---:|---:|---:|")
    for q in be.QUERIES:
        d = per_q[q.cls]
        diff = d["http1"] - d["eng"] if d["http1"] is not None and d["eng"] is not None else None
        print(f"| {q.cls} | {fmt(d['http1'])} | {fmt(d['fan'])} | {fmt(d['eng'])} | {fmt(d['rg'])} | {fmt(diff)} |")
    print()
    print(f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}. Client threads, the Serve "
          f"proxy and replica, the searchers and Ray share the machine's {os.cpu_count()} cores; the engine, "
          f"fan-out and rg rows were measured after the HTTP load ({args.runs} runs per class after 1 warm-up).")
    for level in LEVELS:
        fs = results[level]["failures"]
        if fs:
            kinds: dict[str, int] = {}
            for f in fs:
                kinds[f[:80]] = kinds.get(f[:80], 0) + 1
            notes.append(f"{level} clients: failures {kinds}")
    for n in notes:
        print(f"\nnote: {n}")
    return 0 if not results[32]["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
