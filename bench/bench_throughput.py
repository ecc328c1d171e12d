#!/usr/bin/env python3
"""Throughput of `codesearch serve` under an everyday mix of searches (issue 25).

Usage:
    python bench/bench_throughput.py                       # 800 repositories, 1 4 16 64 clients
    python bench/bench_throughput.py --reuse               # keep the served index of an earlier run
    python bench/bench_throughput.py --clients 1 16 --seconds 10 --n 100

Issue 25 measured 32-38 requests/s at every client count from 1 to 64 on 800 repositories of the
1 GB corpus, CPU-bound (the two searchers took ~90 % of both cores); the target is three times
that. One run:

  1. the 1 GB corpus of bench/corpus.py cut into ``--n`` git repositories (bench_scale.py's cut,
     cached under bench/.work/scale/repos-N) and served by ``codesearch serve`` as a process of
     its own (its own Ray instance, ``--searchers`` searchers, ``--replicas`` API replicas, data
     directory bench/.work/scale/data-N: indexed on the first run, re-used with --reuse);
  2. after ``--settle`` seconds, for each client count: ``--warmup`` seconds not counted, then
     ``--seconds`` of a closed loop where every client (a thread with its own keep-alive
     ``httpx.Client``) sends ``POST /api/search`` as the web page does (no case sensitivity,
     matches=100), taking the 8 queries of MIX in turn from its own starting point;
  3. per client count: requests/s, p50/p95/p99 latency, errors (non-200 and transport errors),
     and the CPU each kind of process spent per request (utime+stime from /proc over the
     service's process tree: searchers, API replicas, the Serve proxy, the rest of Ray, and this
     client process), so that what keeps the rate where it is shows;
  4. stops the service with SIGTERM to its PID (SIGKILL to its process group after
     --stop-timeout).

A benchmark, not a test: it asserts only that the service answered.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_engine as be  # noqa: E402  (machine info, percentile, formatting)
import bench_scale as bs  # noqa: E402  (the corpus cut into repositories, the service as a process)
import corpus  # noqa: E402
from codesearch import defaults  # noqa: E402
from gitrepos import corpus_files  # noqa: E402

#: The everyday mix (issue 25: identifiers, a phrase, a regex, a file filter, `sym:`, no match),
#: each a query of the 1 GB corpus: (label, query, isRegexEnabled).
MIX = [
    ("rare identifier", "ErrAbortHandler", False),
    ("common identifier", "static_cast", False),
    ("identifier", "read_csv", False),
    ("phrase", '"if err != nil {"', False),
    ("regex", r"grpc_\w+_create", True),
    ("file filter", r"Py_INCREF file:\.h$", False),
    ("symbol", "sym:NewReader", False),
    ("no match", "get_subchannel_refcount_lock", False),
]
TICK = os.sysconf("SC_CLK_TCK")


def body(query: str, regex: bool) -> dict:
    return {"query": query, "matches": 100, "contextLines": 1, "isRegexEnabled": regex,
            "source": "bench_throughput"}


def role_of(title: str) -> str:
    if title.startswith("ray::ShardSearcher"):
        return "searchers"
    if title.startswith("ray::ServeReplica:codesearch"):
        return "API replicas"
    if title.startswith("ray::ProxyActor"):
        return "Serve proxy"
    return "rest of Ray and the service"


def cpu_by_role(root_pid: int) -> dict[str, float]:
    """CPU seconds (user + system) spent so far by each kind of process of the service's tree."""
    out: dict[str, float] = {}
    for pid in bs.process_tree(root_pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        secs = (int(fields[11]) + int(fields[12])) / TICK
        role = role_of(bs.cmdline(pid))
        out[role] = out.get(role, 0.0) + secs
    return out


def own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class Level:
    clients: int
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    per_query: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # role -> CPU seconds during the timed part

    @property
    def done(self) -> int:
        return len(self.latencies)

    @property
    def rps(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0


def run_level(base: str, clients: int, warmup_s: float, seconds: float, root_pid: int) -> Level:
    """`clients` threads in a closed loop; the first `warmup_s` seconds are not counted."""
    import httpx

    level = Level(clients)
    lock = threading.Lock()
    state = {"counting": False, "stop": False}

    def client(k: int) -> None:
        with httpx.Client(base_url=base, timeout=120) as http:
            i = k
            while not state["stop"]:
                label, query, regex = MIX[i % len(MIX)]
                i += 1
                t0 = time.perf_counter()
                try:
                    r = http.post("/api/search", json=body(query, regex))
                    ok = r.status_code == 200
                    err = None if ok else f"{label}: HTTP {r.status_code} {r.text[:120]}"
                except httpx.TransportError as e:
                    err = f"{label}: {type(e).__name__} {e}"
                dt = time.perf_counter() - t0
                with lock:
                    if not state["counting"]:
                        continue
                    if err:
                        level.errors.append(err)
                    else:
                        level.latencies.append(dt)
                        level.per_query.setdefault(label, []).append(dt)

    threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    time.sleep(warmup_s)
    with lock:
        cpu0, own0, t0 = cpu_by_role(root_pid), own_cpu(), time.perf_counter()
        state["counting"] = True
    time.sleep(seconds)
    with lock:
        state["counting"] = False
        level.seconds = time.perf_counter() - t0
        cpu1, own1 = cpu_by_role(root_pid), own_cpu()
    state["stop"] = True
    for t in threads:
        t.join(timeout=130)
    level.cpu = {role: cpu1.get(role, 0.0) - cpu0.get(role, 0.0) for role in cpu1}
    level.cpu["this client process"] = own1 - own0
    return level


def report(levels: list[Level], args, n_repos: int, shards: int, index_bytes: int, load0: str, load1: str) -> None:
    print(f"\n## Throughput, {n_repos} repositories ({shards} shards, {index_bytes / 1e6:.0f} MB), "
          f"{args.searchers or defaults.SEARCHERS} partition(s) × {args.searcher_copies or defaults.SEARCHER_COPIES} "
          f"cop(ies), {args.replicas} API replica(s)\n")
    for line in be.machine_info():
        print(line)
    print(f"- load average before / after: {load0} / {load1}")
    print(f"- mix: {', '.join(f'`{q}`' for _, q, _ in MIX)} (web page's options: any case, matches=100, "
          f"contextLines=1); {args.warmup:.0f} s of warm-up then {args.seconds:.0f} s timed per level\n")
    roles = ["searchers", "API replicas", "Serve proxy", "rest of Ray and the service", "this client process"]
    print("| clients | requests/s | p50 ms | p95 ms | p99 ms | errors | "
          + " | ".join(f"CPU ms/req: {r}" for r in roles) + " | CPU ms/req: all |")
    print("|---:|---:|---:|---:|---:|---:|" + "---:|" * (len(roles) + 1))
    for lv in levels:
        ts = sorted(lv.latencies)
        pct = (lambda p: f"{be.percentile(ts, p) * 1000:.1f}") if ts else (lambda p: "-")
        per = [lv.cpu.get(r, 0.0) * 1000 / max(lv.done, 1) for r in roles]
        print(f"| {lv.clients} | {lv.rps:.1f} | {pct(50)} | {pct(95)} | {pct(99)} | {len(lv.errors)} | "
              + " | ".join(f"{x:.1f}" for x in per) + f" | {sum(per):.1f} |")
    print("\nPer query, p50 ms at each client count:\n")
    print("| query | " + " | ".join(f"{lv.clients} clients" for lv in levels) + " |")
    print("|---|" + "---:|" * len(levels))
    for label, query, _ in MIX:
        cells = []
        for lv in levels:
            ts = lv.per_query.get(label)
            cells.append(f"{statistics.median(ts) * 1000:.1f}" if ts else "-")
        print(f"| {label} (`{query}`) | " + " | ".join(cells) + " |")
    for lv in levels:
        for e in lv.errors[:5]:
            print(f"\nerror at {lv.clients} clients: {e}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=800, help="repositories (default 800)")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--seconds", type=float, default=20, help="timed seconds per client count (20)")
    ap.add_argument("--warmup", type=float, default=5, help="seconds not counted before each (5)")
    ap.add_argument("--searchers", type=int, help="partitions (default: codesearch serve's)")
    ap.add_argument("--searcher-copies", type=int, help="copies of every partition (default: codesearch serve's)")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--reuse", action="store_true", help="serve the index of an earlier run as it is")
    ap.add_argument("--settle", type=float, default=20, help="seconds after the service serves (20)")
    ap.add_argument("--index-timeout", type=float, default=1800)
    ap.add_argument("--stop-timeout", type=float, default=120)
    args = ap.parse_args()

    files = corpus_files(corpus.ensure(corpus.selected(None, False)))
    bs.SCALE.mkdir(parents=True, exist_ok=True)
    repos_root, _ = bs.ensure_repos(files, args.n)
    data_dir = bs.SCALE / f"data-{args.n}"
    config = bs.SCALE / f"config-{args.n}.json"
    bs.write_config(repos_root, config)
    reuse = args.reuse and (data_dir / "index").is_dir()
    if not reuse and data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    be.exit_after(args.index_timeout + 600 + len(args.clients) * (args.seconds + args.warmup + 180))
    service = bs.Service(config, data_dir, args.searchers, args.index_timeout, replicas=args.replicas,
                         copies=args.searcher_copies)
    levels: list[Level] = []
    try:
        bs.say(f"codesearch serve on {args.n} repositories ({'re-using' if reuse else 'fresh'} {data_dir})")
        service.wait_serving(args.index_timeout + 300)
        # The API answers during the first sync; measure once every repository is indexed.
        # (`wait_serving` reads the log's progress lines and stops the run if the service died.)
        while not reuse and service.build_seconds()[0] is None:
            service.wait_serving(60)
            time.sleep(2)
        shards = bs.index_shards(data_dir / "index")
        index_bytes = sum(os.path.getsize(p) for p in shards if os.path.exists(p))
        bs.say(f"serving: {len(shards)} shards, {index_bytes / 1e6:.0f} MB; settling {args.settle:.0f} s")
        time.sleep(args.settle)
        load0 = bs.load()
        for c in args.clients:
            bs.say(f"{c} clients ...")
            lv = run_level(service.base, c, args.warmup, args.seconds, service.proc.pid)
            bs.say(f"  {lv.rps:.1f} requests/s, {len(lv.errors)} errors")
            levels.append(lv)
        load1 = bs.load()
    finally:
        code, secs = service.stop(args.stop_timeout)
        bs.say(f"stopped: exit {code} after {secs:.1f} s")
    report(levels, args, args.n, len(shards), index_bytes, load0, load1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
