#!/usr/bin/env python3
"""What the HTTP path costs around a search (issues 12, 25): `codesearch serve` as a real process.

Usage:
    python bench/bench_http_path.py                       # the offline demo, this tree's code
    python bench/bench_http_path.py --against HEAD~3      # and, interleaved, the code of another commit
    python bench/bench_http_path.py --config C --data-dir D   # a data directory indexed already
    python bench/bench_http_path.py --venv-repos 600 --against 500fec6   # issue 25's 600 repositories

``--venv-repos N`` serves N git repositories cut from the virtual environment's packages (real
third-party code: site-packages' source files in path order, up to --venv-mb MB, each under
1 MiB, cut into N runs of about equal size as bench_scale.py cuts its corpus), made and indexed
once under bench/.work/http-path/venv-N-MB/ (a ``codesearch serve`` of this tree indexes them and
is stopped); every service then serves a copy of that data directory.

One run:
  1. per service (this tree, and with --against a copy of that commit's tree made with
     ``git archive`` under bench/.work/http-path/): a data directory (the offline demo in
     bench/.work/http-path/data-<label>, created and indexed on the first run, re-used after; or
     --data-dir), an OWNER and an API key made with the tree's own CLI, then ``codesearch serve``
     started as a process of its own (its own Ray instance, --searchers searchers, anonymous access
     on, a free port of 127.0.0.1, ``PYTHONPATH`` = that tree, so Ray's processes run it too);
  2. one client (one ``httpx.Client``, keep-alive, connected before the clock starts) sends, round
     after round, ``GET /api/health``, a no-match literal (as it is, and asking for the hints of
     an empty result, ``withHints: true``: code older than that field computes them either way),
     a rare literal and a symbol search (``POST /api/search``, matches=100, contextLines=0), each
     without credentials and with ``Authorization: Bearer <key>``, to every service in turn: the
     services are measured in the same moments, so load that other work puts on the machine
     falls on all of them alike;
  3. prints per service and request the client's p50/p95, the searchers' own time
     (``stats.duration``: planning, the fan-out to the searchers and the merge) and the difference
     (the p50 of latency − stats.duration per request): what HTTP, Serve and the API cost; with
     --against, a second table: each request's p50 and CPU before (that commit) and now; then
     the engine alone of each tree (in a process of its own, no Ray) over the same index: CPU
     per query, so that what the searchers save shows apart from the noise of the HTTP path;
  4. stops every service with SIGTERM to its PID (SIGKILL to its process group after
     --stop-timeout).

A benchmark, not a test: it asserts only that every answer was a 200.
"""
from __future__ import annotations

import argparse
import io
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work" / "http-path"
USER = "bench-http-path@example.com"

#: (label, query) of the demo: a literal no file has, and one that one file of Python's
#: urllib has 7 times (the demo's repositories are in every Python installation).
DEMO_QUERIES = {"no-match literal": "zq_no_such_identifier_anywhere_q", "rare literal": "getproxies_environment"}
#: A symbol search: in the demo, a function of Python's urllib; in the virtual environment's
#: packages (--venv-repos), a method of pydantic-core defined once and named in a few hundred files.
DEMO_SYMBOL = "sym:getproxies_environment"
VENV_SYMBOL = "sym:validate_python"


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(samples: list[float], p: float) -> float:
    s = sorted(samples)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


# ----------------------------------------------------------------------------- the code to run


def tree_at(rev: str) -> tuple[Path, str]:
    """A copy of the package at commit `rev` (``git archive``, nothing in the checkout changes),
    made once per commit. Returns (directory for PYTHONPATH, short hash)."""
    sha = subprocess.run(["git", "rev-parse", "--short=10", f"{rev}^{{commit}}"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    out = WORK / f"tree-{sha}"
    if not (out / "codesearch" / "__init__.py").exists():
        archive = subprocess.run(["git", "archive", "--format=tar", sha, "codesearch"], cwd=ROOT, capture_output=True,
                                 check=True).stdout
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    if (ROOT / "setup.py").exists() and not list((out / "codesearch" / "index").glob("_kernels*.so")):
        # the tree's own compiled kernels (built from its kernels.c), as `make install` builds them
        for name in ("setup.py", "pyproject.toml"):
            (out / name).write_bytes(subprocess.run(["git", "show", f"{sha}:{name}"], cwd=ROOT,
                                                    capture_output=True, check=True).stdout)
        subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=out, check=True,
                       capture_output=True)
    return out, sha


def linked_copy(src: Path, dst: Path) -> None:
    """A copy of data directory `src` whose shard files are hard links, not copies: a 10 GB index
    has no room for a second copy. Safe because a shard file is never written in place (a new one
    is written under a temporary name and renamed; the manifest too), so neither service can
    change the other's files; everything else (the database, the manifest) is copied."""
    shutil.rmtree(dst, ignore_errors=True)

    def copy(a: str, b: str) -> None:
        if a.endswith(".shard"):
            os.link(a, b)
        else:
            shutil.copy2(a, b)

    shutil.copytree(src, dst, symlinks=True, copy_function=copy)


def run_cli(tree: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-m", "codesearch.cli", *args], cwd=tree, env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"codesearch {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def api_key(tree: Path, data_dir: Path) -> str:
    """A fresh API key of the bench's OWNER in `data_dir` (the user is created once)."""
    if USER not in run_cli(tree, "users", "list", "--data-dir", str(data_dir)):
        run_cli(tree, "users", "create", USER, "--data-dir", str(data_dir))
    return run_cli(tree, "keys", "create", "--user", USER, "--name", "bench_http_path",
                   "--data-dir", str(data_dir)).strip().splitlines()[-1]


# ----------------------------------------------------------------------------- the venv corpus

#: Files of the virtual environment's packages that are not source (compiled code, caches).
VENV_SKIP = (".so", ".pyc", ".pyd", ".dll", ".dylib", ".a", ".o", ".whl")
#: Larger files are left out (data, bundles: the index would not hold their content anyway).
VENV_MAX_FILE = 1 << 20


def venv_files(mb: int) -> tuple[Path, list]:
    """The source files of the virtual environment's packages (site-packages, real third-party
    code), in sorted path order, up to `mb` megabytes: (site-packages, [`bench_scale.CorpusFile`])."""
    import sysconfig

    from bench_scale import CorpusFile

    site = Path(sysconfig.get_paths()["purelib"])
    out, budget = [], mb << 20
    for dirpath, dirnames, filenames in os.walk(site):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.endswith(".dist-info"))
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            if fn.endswith(VENV_SKIP) or os.path.islink(full) or not os.path.isfile(full):
                continue
            size = os.path.getsize(full)
            if size > VENV_MAX_FILE:
                continue
            if size > budget:
                return site, out
            out.append(CorpusFile(os.path.relpath(full, site), size))
            budget -= size
    return site, out


def venv_corpus(n: int, mb: int) -> tuple[Path, Path]:
    """`n` git repositories cut from `mb` MB of the virtual environment's packages (runs of
    neighbouring files of about equal size, `bench_scale.cut`), made once under
    bench/.work/http-path/venv-N-MB/, and a config whose one connection serves them all.
    Returns (config, the directory of the repositories)."""
    from bench_scale import GIT_ENV, cut, write_config

    root = WORK / f"venv-{n}-{mb}"
    repos, config, marker = root / "repos", root / "config.json", root / "repos.done"
    if not marker.exists():
        site, files = venv_files(mb)
        say(f"making {n} git repositories of {sum(f.size for f in files) / 1e6:.0f} MB ({len(files)} files of "
            f"{site}) in {repos} ...")
        shutil.rmtree(repos, ignore_errors=True)
        width = len(str(n - 1))
        env = {**os.environ, **GIT_ENV}
        for k, group in enumerate(cut(files, n)):
            dest = repos / f"r{k:0{width}d}"
            for f in group:
                (dest / f.rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(site / f.rel, dest / f.rel)
            git = ["git", "-C", str(dest), "-c", "core.autocrlf=false", "-c", "core.safecrlf=false"]
            subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True, env=env)
            subprocess.run(git + ["add", "-A", "-f", "."], check=True, env=env)
            subprocess.run(git + ["commit", "-q", "--no-verify", "-m", "packages"], check=True, env=env)
        marker.write_text(f"{n} {mb}\n")
    write_config(repos, config)
    return config, repos


def index_once(tree: Path, config: Path, data_dir: Path, searchers: int, timeout_s: float) -> None:
    """Index `data_dir` from `config` once (a `codesearch serve` of `tree`, stopped once its
    progress line says every repository is indexed), so that the services measured
    start from copies of one index instead of each building its own."""
    marker = data_dir.with_name(data_dir.name + ".indexed")
    if marker.exists():
        return
    shutil.rmtree(data_dir, ignore_errors=True)
    s = Service("index-once", tree, data_dir, config, searchers,
                env={"CODESEARCH_FIRST_SYNC_TIMEOUT_S": str(int(timeout_s))})
    say(f"indexing {data_dir} (log {s.log_path}) ...")
    t0 = time.monotonic()
    try:
        s.start()
        s.wait_serving(timeout_s)
        while not re.search(r"first sync: (\d+)/\1 connections synced, ([1-9]\d*)/\2 repositories indexed",
                            s.log_path.read_text(errors="replace")):
            if s.proc.poll() is not None or time.monotonic() - t0 > timeout_s:
                raise SystemExit(f"{data_dir} not indexed:\n{s.tail()}")
            time.sleep(1)
    finally:
        s.stop(60)
    say(f"indexed in {time.monotonic() - t0:.0f}s")
    marker.write_text("indexed\n")


# ----------------------------------------------------------------------------- a service


@dataclass
class Service:
    """`codesearch serve` of one tree, as a process of its own (own session)."""

    label: str
    tree: Path
    data_dir: Path
    config: Path | None
    searchers: int
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    key: str = ""
    ray_tmp: Path | None = None
    env: dict = field(default_factory=dict)  # more environment variables for the service

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return WORK / f"serve-{''.join(c if c.isalnum() or c in '-_.' else '-' for c in self.label)}.log"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.key = api_key(self.tree, self.data_dir)
        # Ray's files in a directory of this service's own (short: Ray's socket paths are
        # limited): older code's `ray.init()` would join a cluster another `ray start` recorded.
        self.ray_tmp = Path(tempfile.mkdtemp(prefix="csb-", dir="/tmp"))
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "FORCE_ENABLE_ANONYMOUS_ACCESS": "true",
               "PYTHONPATH": str(self.tree), "RAY_TMPDIR": str(self.ray_tmp), **self.env}
        for name in ("RAY_ADDRESS", "CONFIG_PATH", "DATA_CACHE_DIR"):
            env.pop(name, None)
        cmd = [sys.executable, "-m", "codesearch.cli", "serve", "--port", str(self.port), "--data-dir",
               str(self.data_dir), "--searchers", str(self.searchers)]
        if self.config:
            cmd += ["--config", str(self.config)]
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.tree, stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)

    def wait_serving(self, timeout_s: float) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.label}: codesearch serve exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(f"{self.base}/api/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.label}: not serving after {timeout_s:.0f}s:\n{self.tail()}")
            time.sleep(0.5)

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self, timeout_s: float) -> None:
        """SIGTERM to the service's PID (it drains and stops its own Ray instance); SIGKILL to its
        process group when it has not exited after `timeout_s`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                say(f"{self.label}: still running {timeout_s:.0f}s after SIGTERM: SIGKILL to its process group")
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        if self.ray_tmp is not None:
            shutil.rmtree(self.ray_tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- the requests


@dataclass
class Case:
    request: str  # "health" or a query label
    query: str | None
    with_key: bool
    extra: dict = field(default_factory=dict)  # more fields of the search body
    latency: dict = field(default_factory=dict)  # service label -> [seconds]
    duration: dict = field(default_factory=dict)  # service label -> [seconds of stats.duration]
    cpu: dict = field(default_factory=dict)  # service label -> {process role: CPU seconds per request}


# ----------------------------------------------------------------------------- CPU time

#: Process roles, by the start of a process's title (Ray names its workers after their actor).
ROLES = [("ray::ProxyActor", "proxy"), ("ray::ServeReplica", "replica"), ("ray::ShardSearcher", "searchers")]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def role_of(title: str) -> str:
    for prefix, role in ROLES:
        if title.startswith(prefix):
            return role
    return "rest" if title else "?"


def cpu_by_role(session: int) -> dict[str, float]:
    """CPU seconds (user + system) so far of the processes of `session` (a service and the Ray
    instance it started, which stays in its session), summed per role (`ROLES`, else "rest")."""
    out: dict[str, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[3]) != session:  # field 6 of /proc/<pid>/stat: the session id
                continue
            title = Path(entry.path, "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        role = role_of(title)
        out[role] = out.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return out


def send(client, service: Service, case: Case) -> tuple[float, float | None]:
    headers = {"Authorization": f"Bearer {service.key}"} if case.with_key else {}
    t0 = time.perf_counter()
    if case.query is None:
        r = client.get(f"{service.base}/api/health", headers=headers)
    else:
        r = client.post(f"{service.base}/api/search", headers=headers,
                        json={"query": case.query, "matches": 100, "contextLines": 0, **case.extra})
    elapsed = time.perf_counter() - t0
    if r.status_code != 200:
        raise SystemExit(f"{service.label}: {case.request} answered {r.status_code}: {r.text[:300]}")
    return elapsed, (r.json()["stats"]["duration"] / 1e9 if case.query is not None else None)


def idle_cpu(services: list[Service], seconds: float = 5.0) -> dict[str, dict[str, float]]:
    """CPU seconds per second each service's processes use with no request (timers, metrics,
    the scheduler's ticks): subtracted from what the requests cost."""
    before = {s.label: cpu_by_role(s.proc.pid) for s in services}
    time.sleep(seconds)
    return {s.label: {role: (used - before[s.label].get(role, 0.0)) / seconds
                      for role, used in cpu_by_role(s.proc.pid).items()} for s in services}


def measure(services: list[Service], cases: list[Case], rounds: int, warmup: int) -> None:
    """Per case: `warmup` + `rounds` rounds of one request to every service in turn; the
    latencies, `stats.duration` and the CPU time the services' processes used for the case's
    requests (less what they use idle)."""
    import httpx

    idle = idle_cpu(services)
    with httpx.Client(timeout=60) as client:
        for case in cases:
            for _ in range(warmup):
                for s in services:
                    send(client, s, case)
            before = {s.label: cpu_by_role(s.proc.pid) for s in services}
            t0 = time.monotonic()
            for _ in range(rounds):
                for s in services:
                    elapsed, duration = send(client, s, case)
                    case.latency.setdefault(s.label, []).append(elapsed)
                    if duration is not None:
                        case.duration.setdefault(s.label, []).append(duration)
            seconds = time.monotonic() - t0
            for s in services:
                after = cpu_by_role(s.proc.pid)
                case.cpu[s.label] = {role: max(0.0, used - before[s.label].get(role, 0.0)
                                               - idle[s.label].get(role, 0.0) * seconds) / rounds
                                     for role, used in after.items()}


def ms(x: float | None) -> str:
    return "–" if x is None else f"{x * 1000:.1f}"


def report(services: list[Service], cases: list[Case], rounds: int) -> None:
    roles = [role for _, role in ROLES] + ["rest"]
    print(f"\n{rounds} requests per row, 1 client, the services interleaved; times in ms; p95 = nearest rank;"
          " CPU = CPU time of the service's processes per request, less their idle use\n")
    print("| service | request | credentials | p50 | p95 | searchers p50 (stats.duration) | p50 of latency − duration "
          "| CPU | " + " | ".join(f"CPU {r}" for r in roles) + " |")
    print("|---|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(roles))
    for case in cases:
        for s in services:
            lat = case.latency[s.label]
            dur = case.duration.get(s.label)
            diff = statistics.median(a - b for a, b in zip(lat, dur, strict=True)) if dur else None
            cpu = case.cpu.get(s.label, {})
            rest = sum(v for r, v in cpu.items() if r not in roles[:-1])
            print(f"| {s.label} | {case.request} | {'API key' if case.with_key else 'none'} | "
                  f"{ms(statistics.median(lat))} | {ms(percentile(lat, 95))} | "
                  f"{ms(statistics.median(dur) if dur else None)} | {ms(diff)} | {ms(sum(cpu.values()))} | "
                  + " | ".join(ms(cpu.get(r, 0.0)) for r in roles[:-1]) + f" | {ms(rest)} |")


#: The engine alone, in one process of a tree (``PYTHONPATH`` = that tree): CPU ms per query over
#: an index directory, median of 5 runs of 20 searches, after one search of each query.
ENGINE_SCRIPT = """
import json, statistics, sys, time
from codesearch.search.engine import Searcher
s = Searcher(sys.argv[1])
queries = json.loads(sys.argv[2])
for q in queries:
    s.search(q)
out = {}
for q in queries:
    runs = []
    for _ in range(5):
        t = time.process_time()
        for _ in range(20):
            s.search(q, matches=100)
        runs.append((time.process_time() - t) / 20)
    out[q] = statistics.median(runs)
print(json.dumps(out))
"""


def engine_times(tree: Path, index_dir: Path, queries: list[str]) -> dict[str, float]:
    """CPU seconds per query of the engine of `tree` in a process of its own (`ENGINE_SCRIPT`)."""
    import json

    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", ENGINE_SCRIPT, str(index_dir), json.dumps(queries)], cwd=tree,
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the engine of {tree} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report_engine(services: list[Service], index_dir: Path, queries: list[str]) -> None:
    """The engine alone (no Ray, no HTTP) of each service's tree over the same index."""
    times = {s.label: engine_times(s.tree, index_dir, queries) for s in services}
    print(f"\nThe engine alone, in one process (`Searcher` over {index_dir}): CPU ms per query, median of 5 × 20\n")
    print("| query | " + " | ".join(s.label for s in services) + " |")
    print("|---|" + "---:|" * len(services))
    for q in queries:
        print(f"| `{q}` | " + " | ".join(ms(times[s.label][q]) for s in services) + " |")


def compare(now: Service, before: Service, cases: list[Case]) -> None:
    """The searches of `before` (an older commit) and `now` side by side: p50 and CPU per request."""
    print(f"\nbefore = {before.label}, now = {now.label}; p50 in ms (ratio now/before); CPU ms per request\n")
    print("| request | credentials | p50 before | p50 now | now/before | CPU before | CPU now |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for case in cases:
        if case.query is None:
            continue
        b, n = statistics.median(case.latency[before.label]), statistics.median(case.latency[now.label])
        cb, cn = sum(case.cpu.get(before.label, {}).values()), sum(case.cpu.get(now.label, {}).values())
        print(f"| {case.request} | {'API key' if case.with_key else 'none'} | {ms(b)} | {ms(n)} | {n / b:.2f} | "
              f"{ms(cb)} | {ms(cn)} |")


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?")
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", metavar="REV", help="also serve the code of this commit, measured interleaved")
    ap.add_argument("--config", type=Path, help="config of --data-dir (default: the offline demo)")
    ap.add_argument("--data-dir", type=Path,
                    help="an indexed data directory to serve, not in use by another service (default: the demo's "
                         "under bench/.work/http-path); with --against, each service gets a copy")
    ap.add_argument("--link-shards", action="store_true",
                    help="with --against and --data-dir: the second service's copy (next to --data-dir) has its "
                         "shard files hard-linked, not copied (an index too big to copy twice)")
    ap.add_argument("--venv-repos", type=int, metavar="N",
                    help="serve N git repositories cut from the virtual environment's packages (made and indexed "
                         "once under bench/.work/http-path/venv-N-MB) instead of the demo")
    ap.add_argument("--venv-mb", type=int, default=300, help="megabytes of packages for --venv-repos (300)")
    ap.add_argument("--no-match", default=DEMO_QUERIES["no-match literal"], help="the no-match literal")
    ap.add_argument("--rare", default=DEMO_QUERIES["rare literal"], help="the rare literal")
    ap.add_argument("--sym", help=f"the symbol search (default {DEMO_SYMBOL!r}, with --venv-repos {VENV_SYMBOL!r})")
    ap.add_argument("--rounds", type=int, default=200, help="requests per service and row (200)")
    ap.add_argument("--warmup", type=int, default=20, help="rounds not counted (20)")
    ap.add_argument("--searchers", type=int, default=2)
    ap.add_argument("--start-timeout", type=float, default=900, help="seconds for a service to start serving")
    ap.add_argument("--stop-timeout", type=float, default=60)
    a = ap.parse_args(argv)
    if (a.config is None) != (a.data_dir is None):
        ap.error("--config and --data-dir go together")
    if a.venv_repos is not None and a.data_dir is not None:
        ap.error("--venv-repos makes its own data directory: no --config / --data-dir with it")
    if a.rounds < 1 or a.warmup < 0:
        ap.error("--rounds must be at least 1 and --warmup at least 0")

    WORK.mkdir(parents=True, exist_ok=True)
    here = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "codesearch"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    trees = [(f"tree ({here}{'+changes' if dirty else ''})", ROOT)]
    if a.against:
        tree, sha = tree_at(a.against)
        trees.append((f"{a.against} ({sha})", tree))
    if a.venv_repos is not None:
        a.config, _ = venv_corpus(a.venv_repos, a.venv_mb)
        a.data_dir = WORK / f"venv-{a.venv_repos}-{a.venv_mb}" / "data"
        index_once(ROOT, a.config, a.data_dir, a.searchers, a.start_timeout)
    services = []
    for i, (label, tree) in enumerate(trees):
        if a.data_dir is None:
            data_dir = WORK / f"data-{i}"
        elif i == 0:
            data_dir = a.data_dir
        else:  # a second service may not share the first one's state: a copy of it
            data_dir = a.data_dir.with_name(a.data_dir.name + f"-copy-{i}") if a.link_shards else WORK / f"data-copy-{i}"
            if a.link_shards:
                linked_copy(a.data_dir, data_dir)
            else:
                shutil.rmtree(data_dir, ignore_errors=True)
                shutil.copytree(a.data_dir, data_dir, symlinks=True)
        services.append(Service(label, tree, data_dir, a.config, a.searchers))

    say(f"machine: {machine()}; load average {load()}")
    try:
        for s in services:
            say(f"starting {s.label} on {s.base} (data {s.data_dir}, log {s.log_path})")
            s.start()
        for s in services:
            s.wait_serving(a.start_timeout)
            say(f"{s.label}: serving")
        sym = a.sym or (VENV_SYMBOL if a.venv_repos is not None else DEMO_SYMBOL)
        searches = [("no-match literal", a.no_match, {}), ("no-match literal, withHints", a.no_match,
                     {"withHints": True}), ("rare literal", a.rare, {}),
                    ("rare literal, case-sensitive", a.rare, {"isCaseSensitivityEnabled": True}), ("symbol", sym, {})]
        cases = [Case("health", None, k) for k in (False, True)] + \
                [Case(label, q, k, extra) for label, q, extra in searches for k in (False, True)]
        t0 = time.monotonic()
        measure(services, cases, a.rounds, a.warmup)
        say(f"measured in {time.monotonic() - t0:.0f}s; load average {load()}")
    finally:
        for s in services:
            s.stop(a.stop_timeout)
    print(f"machine: {machine()}; {a.searchers} searchers; load average after: {load()}")
    report(services, cases, a.rounds)
    if len(services) > 1:
        compare(services[0], services[1], cases)
    report_engine(services, services[0].data_dir / "index", list(dict.fromkeys([a.no_match, a.rare, sym])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
