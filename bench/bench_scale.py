#!/usr/bin/env python3
"""Scale benchmark (issue 12): the same corpus as N git repositories behind `codesearch serve`.

Usage:
    python bench/bench_scale.py                        # N = 10 100 1000 3000 (hours: see bench/README.md)
    python bench/bench_scale.py --n 10 100 1000        # the N to measure
    python bench/bench_scale.py --n 1000 --reuse       # keep the served index of an earlier run (no build)
    python bench/bench_scale.py --quick                # smoke run: numpy only, N = 10 50, 5 runs
    python bench/bench_scale.py --repos /work/corpus-large/repos --data /work/bench10g/serve
                                                       # a directory of repositories as it is (the 10 GB
                                                       #   corpus of bench/corpus_large.py): N = its size

For each N, one run:
  1. cuts the corpus of bench/corpus.py (its projects' directory trees, in order) into N
     repositories of about equal size, each a real git repository with one commit, under
     bench/.work/scale/repos-N/ (cached: a rerun on the same corpus re-uses them);
  2. writes a config whose one connection is ``{"type": "git", "url": "file:///…/repos-N/*"}``
     (the same settings for every N) and starts ``codesearch serve`` on it as a process of its
     own on a free port of 127.0.0.1 (its own Ray instance, 2 searchers, data directory
     bench/.work/scale/data-N, wiped first unless --reuse);
  3. waits (bounded by --index-timeout) until the first sync and index are done and the API
     answers, and takes the index build time from the progress lines the service prints;
  4. after --settle seconds (so that Ray's own start-up work is done), sends ``POST /api/search``
     (1 client, matches=100, contextLines=0) for the 7 query classes of bench_engine.py, round
     robin, one warm-up round then --runs rounds: p50/p95 per class;
  5. reads, after the queries, the anonymous memory (RssAnon, /proc/<pid>/status) of each
     searcher actor's process and of the API replica's, found in the service's process tree by
     their Ray process titles; the index a searcher serves is the size of the shard files it
     has mapped (/proc/<pid>/maps);
  6. stops the service with SIGTERM to its PID (bounded by --stop-timeout, then SIGKILL to its
     own process group).

Then one table: per N the shard count, index size, build time, memory and p50/p95 per class,
and issue 12's targets with ✓/✗. A benchmark, not a test: it prints, it asserts nothing but
that the service answered.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # bench_engine, bench_service, corpus

import bench_engine as be  # noqa: E402  (query classes, machine info, percentile, formatting)
import corpus  # noqa: E402  (the pinned projects and their directories)
from bench_service import body_for, free_port  # noqa: E402
from gitrepos import GIT_ENV, CorpusFile, corpus_files  # noqa: E402  (listing and committing, shared with corpus_large)

SCALE = be.WORK / "scale"
DEFAULT_N = [10, 100, 1000, 3000]
QUICK_N = [10, 50]
#: issue 12: the classes whose p50 must stay flat as N grows, and the bounds.
FLAT_CLASSES = ("no-match literal", "rare literal", "regex with literals")
P50_MAX_MS = 15.0
P50_MAX_RATIO = 1.3
P50_TARGET_MIN_N = 1000
SEARCHER_MEM_FRACTION = 0.25
SEARCHER_MEM_EXTRA = 150e6
REPLICA_MEM_MAX = 300e6
#: The config's settings, the same for every N: nothing is re-indexed or re-synced while we
#: measure (the defaults would re-index every repository an hour after it was indexed).
SETTINGS = {"reindexIntervalMs": 7 * 86_400_000, "resyncConnectionIntervalMs": 7 * 86_400_000}

def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ----------------------------------------------------------------------------- the repositories


def cut(files: list[CorpusFile], n: int) -> list[list[CorpusFile]]:
    """`n` runs of consecutive files of about equal total size, none empty: run k ends where
    the running total reaches k+1 n-ths of the corpus (a file goes to the run its middle falls
    in), keeping one file for each run still to come."""
    if n > len(files):
        raise SystemExit(f"cannot cut {len(files)} files into {n} non-empty repositories")
    total = sum(f.size for f in files)
    groups: list[list[CorpusFile]] = []
    i = cum = 0
    for k in range(n):
        target = total * (k + 1) / n
        group = [files[i]]
        cum += files[i].size
        i += 1
        last = len(files) - (n - k - 1)  # files i.. last-1 may go here
        while i < last and (k == n - 1 or cum + files[i].size / 2 <= target):
            group.append(files[i])
            cum += files[i].size
            i += 1
        groups.append(group)
    assert i == len(files)
    return groups


def fingerprint(files: list[CorpusFile], n: int) -> str:
    return json.dumps({"n": n, "files": len(files), "bytes": sum(f.size for f in files),
                       "projects": sorted({f.rel.split("/", 1)[0] for f in files})})


def make_repo(path: Path, group: list[CorpusFile]) -> None:
    """A git repository at `path` with the group's files (hard links to the corpus when the file
    system allows, else copies) in one commit. ``-f``: files that a project's own .gitignore
    names are committed too, so every repository holds exactly its share of the corpus."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    for f in group:
        dst = path / f.rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        src = corpus.CORPUS / f.rel
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)
    env = {**os.environ, **GIT_ENV}
    git = ["git", "-C", str(path), "-c", "core.autocrlf=false", "-c", "core.safecrlf=false"]
    subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True, env=env)
    subprocess.run(git + ["add", "-A", "-f", "."], check=True, env=env)
    subprocess.run(git + ["commit", "-q", "--no-verify", "-m", f"{len(group)} files of the benchmark corpus"],
                   check=True, env=env)
    listed = subprocess.run(git + ["ls-files", "-z"], check=True, env=env, capture_output=True).stdout.count(b"\0")
    if listed != len(group):
        raise SystemExit(f"{path}: committed {listed} files, expected {len(group)}")


def ensure_repos(files: list[CorpusFile], n: int) -> tuple[Path, float | None]:
    """bench/.work/scale/repos-N, made unless a complete one of the same corpus is there.
    Returns the directory and the seconds spent making it (None when re-used)."""
    root = SCALE / f"repos-{n}"
    marker = SCALE / f"repos-{n}.done"
    fp = fingerprint(files, n)
    if root.is_dir() and marker.exists() and marker.read_text() == fp:
        return root, None
    say(f"[N={n}] making {n} git repositories in {root} ...")
    marker.unlink(missing_ok=True)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    groups = cut(files, n)
    width = len(str(n - 1))
    with ThreadPoolExecutor(max_workers=2) as pool:  # git processes; the machine has 2 cores
        list(pool.map(lambda kg: make_repo(root / f"r{kg[0]:0{width}d}", kg[1]), enumerate(groups)))
    marker.write_text(fp)
    return root, time.perf_counter() - t0


# ----------------------------------------------------------------------------- the service


def code_path() -> str:
    """PYTHONPATH for the service: the codesearch of the tree this script is in (inherited by
    Ray's processes, so the searchers and replicas run it too), ahead of whatever the venv has
    installed. A copy of the tree at a given commit then measures that commit."""
    return os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


def write_config(repos_root: Path, path: Path) -> None:
    config = {"$schema": "https://raw.githubusercontent.com/sourcebot-dev/sourcebot/main/schemas/v3/index.json",
              "settings": SETTINGS,
              "connections": {"bench": {"type": "git", "url": f"file://{repos_root}/*"}}}
    path.write_text(json.dumps(config, indent=2) + "\n")


class Service:
    """`codesearch serve` as a process of its own (own session), its output in a log file whose
    lines are stamped with the time they were first seen."""

    def __init__(self, config: Path, data_dir: Path, searchers: int | None, index_timeout: float, replicas: int = 1,
                 copies: int | None = None):
        """`searchers` and `copies`: ``--searchers`` and ``--searcher-copies`` (None: the service's defaults)."""
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "FORCE_ENABLE_ANONYMOUS_ACCESS": "true",
               "CODESEARCH_FIRST_SYNC_TIMEOUT_S": str(int(index_timeout)), "PYTHONPATH": code_path()}
        for name in ("RAY_ADDRESS", "CONFIG_PATH", "DATA_CACHE_DIR"):
            env.pop(name, None)
        self._log = open(self.log_path, "w")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "codesearch.cli", "serve", "--config", str(config), "--port", str(self.port),
             "--data-dir", str(data_dir), "--replicas", str(replicas),
             *(["--searchers", str(searchers)] if searchers else []),
             *(["--searcher-copies", str(copies)] if copies else [])],
            cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.lines: list[tuple[float, str]] = []  # (seconds since start, line)
        self._read = 0

    def poll_log(self) -> None:
        with open(self.log_path, "rb") as f:
            f.seek(self._read)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        self._read += end
        now = time.monotonic() - self.started
        for line in chunk[:end].decode("utf-8", "replace").splitlines():
            self.lines.append((now, line))

    def tail(self, n: int = 40) -> str:
        self.poll_log()
        return "\n".join(line for _, line in self.lines[-n:])

    def wait_serving(self, timeout_s: float) -> None:
        """Until /api/health answers 200 (`codesearch serve` deploys the API after the first sync
        and index); the log is read meanwhile so that progress lines get their times."""
        import httpx

        deadline = time.monotonic() + timeout_s
        last_progress = ""
        while True:
            self.poll_log()
            progress = [line for _, line in self.lines if line.startswith("first sync:")]
            if progress and progress[-1] != last_progress:
                last_progress = progress[-1]
                say(f"  {last_progress}")
            if self.proc.poll() is not None:
                raise SystemExit(f"codesearch serve exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(f"{self.base}/api/health", timeout=2).status_code == 200:
                    self.poll_log()
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"codesearch serve not serving after {timeout_s:.0f}s:\n{self.tail()}")
            time.sleep(0.5)

    def build_seconds(self) -> tuple[float | None, float | None]:
        """(sync + index, index alone) from the progress lines: from the process start, and from
        the first line where the connection had synced, to the line with every repository indexed."""
        synced = indexed = None
        for t, line in self.lines:
            if not line.startswith("first sync:"):
                continue
            words = line.split()
            conns, repos = words[2], words[5]
            if synced is None and conns.split("/")[0] == conns.split("/")[1]:
                synced = t
            if indexed is None and synced is not None and repos.split("/")[0] == repos.split("/")[1] != "0":
                indexed = t
        if indexed is None:
            return None, None
        return indexed, indexed - synced

    def stop(self, timeout_s: float) -> tuple[int | None, float]:
        """SIGTERM to the service's PID (it drains and stops its Ray instance); SIGKILL to its own
        process group if it has not exited after `timeout_s`. Returns (exit code, seconds)."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            say(f"  codesearch serve still running {timeout_s:.0f}s after SIGTERM: SIGKILL to its process group")
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
            code = None
        self._log.close()
        return code, time.monotonic() - t0


# ----------------------------------------------------------------------------- processes and memory


def process_tree(root_pid: int) -> list[int]:
    """`root_pid` and every process descending from it (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def status_kb(pid: int, field_name: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def mapped_bytes(pid: int, under: Path) -> int:
    """Total size of the distinct files under `under` that the process has mapped (the shard
    files a searcher serves: shards are memory-mapped)."""
    prefix = str(under.resolve()) + "/"  # /proc shows resolved paths
    paths = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith(prefix):
                    paths.add(parts[5].rstrip("\n").removesuffix(" (deleted)"))
    except OSError:
        return 0
    return sum(os.path.getsize(p) for p in paths if os.path.exists(p))


@dataclass
class Proc:
    role: str
    pid: int
    title: str
    rss_anon: int  # bytes
    serves: int = 0  # index bytes mapped (searchers)


def service_processes(service: Service) -> list[Proc]:
    """The searcher actors' and the API replica's processes: Ray titles its worker processes
    ``ray::<ActorClass>`` (searchers: ``ray::ShardSearcher``; Serve replicas:
    ``ray::ServeReplica:<app>:<deployment>``)."""
    out = []
    index_dir = service.data_dir / "index"
    for pid in process_tree(service.proc.pid):
        title = cmdline(pid)
        if title.startswith("ray::ShardSearcher"):
            role = "searcher"
        elif title.startswith("ray::ServeReplica:codesearch"):
            role = "API replica"
        else:
            continue
        anon = status_kb(pid, "RssAnon")
        if anon is None:
            continue
        out.append(Proc(role, pid, title.split()[0], anon * 1024,
                        mapped_bytes(pid, index_dir) if role == "searcher" else 0))
    return sorted(out, key=lambda p: (p.role, p.pid))


def index_shards(index_dir: Path) -> list[str]:
    """The shard files of the served index (its manifest), else every file in the directory."""
    try:
        from codesearch.index.manifest import current_shards

        return current_shards(str(index_dir))
    except Exception:  # noqa: BLE001 - the index format is changing under issue 12: count files
        return [str(p) for p in index_dir.iterdir() if p.is_file() and not p.name.startswith(".")]


# ----------------------------------------------------------------------------- queries


@dataclass
class Measured:
    n: int
    repos_seconds: float | None = None
    build_total: float | None = None
    build_index: float | None = None
    shards: int = 0
    index_bytes: int = 0
    repos_served: int | None = None
    procs: list[Proc] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=dict)
    answers: dict[str, tuple] = field(default_factory=dict)  # class -> (matches, files, exhaustive)
    stats: dict[str, dict] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    load_before: str = ""
    load_after: str = ""
    stop: str = ""
    #: searches sent while the first sync ran: (seconds since start, HTTP status, latency s, files)
    during_sync: list[tuple[float, int, float, int]] = field(default_factory=list)


def probe_during_sync(service: Service, m: Measured, timeout_s: float, every_s: float = 5.0) -> None:
    """While the first sync runs (the service answers from the repositories indexed so far), send
    the rare literal every `every_s` seconds and record what the service answered, until the
    progress lines say every repository is indexed."""
    import httpx

    q = be.QUERIES[0]
    t_start = time.monotonic()
    last = ""
    while service.build_seconds()[0] is None:
        if time.monotonic() - t_start > timeout_s:
            raise SystemExit(f"first sync not done after {timeout_s:.0f}s:\n{service.tail()}")
        if service.proc.poll() is not None:
            raise SystemExit(f"codesearch serve exited with {service.proc.returncode}:\n{service.tail()}")
        t0 = time.perf_counter()
        try:
            r = httpx.post(f"{service.base}/api/search", json=body_for(q), timeout=60)
            files = len(r.json().get("files", [])) if r.status_code == 200 else 0
            m.during_sync.append((time.monotonic() - t_start, r.status_code, time.perf_counter() - t0, files))
        except httpx.TransportError as e:
            m.during_sync.append((time.monotonic() - t_start, 0, time.perf_counter() - t0, 0))
            say(f"  search during the first sync failed: {e}")
        service.poll_log()
        progress = [line for _, line in service.lines if line.startswith("first sync:")]
        if progress and progress[-1] != last:
            last = progress[-1]
            say(f"  {last}")
        time.sleep(every_s)


def measure_queries(base: str, runs: int, m: Measured) -> None:
    import httpx

    with httpx.Client(base_url=base, timeout=120) as client:
        for rnd in range(runs + 1):  # round 0: warm-up
            for q in be.QUERIES:
                t0 = time.perf_counter()
                r = client.post("/api/search", json=body_for(q))
                dt = time.perf_counter() - t0
                if r.status_code != 200:
                    m.failures.append(f"{q.cls}: {r.status_code} {r.text[:200]}")
                    continue
                if rnd == 0:
                    body = r.json()
                    files = sorted(f["fileName"]["text"] for f in body["files"])
                    m.answers[q.cls] = (body["stats"].get("actualMatchCount"), len(files),
                                        body.get("isSearchExhaustive"), files)
                    m.stats[q.cls] = body["stats"]
                    continue
                m.times.setdefault(q.cls, []).append(dt)
        r = client.get("/api/repos", params={"perPage": 1})
        if r.status_code == 200 and "X-Total-Count" in r.headers:
            m.repos_served = int(r.headers["X-Total-Count"])


def run_one(n: int, files: list[CorpusFile], args) -> Measured:
    m = Measured(n)
    if args.repos:  # a directory of repositories as it is
        repos_root, m.repos_seconds = Path(args.repos).resolve(), None
    else:
        repos_root, m.repos_seconds = ensure_repos(files, n)
    data_dir = Path(args.data) if args.data else SCALE / f"data-{n}"
    config = data_dir.parent / f"config-{n}.json" if args.data else SCALE / f"config-{n}.json"
    write_config(repos_root, config)
    reuse = args.reuse and (data_dir / "index").is_dir()
    if not reuse and data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    m.load_before = load()
    say(f"[N={n}] codesearch serve ({'re-using' if reuse else 'fresh'} {data_dir}), load {m.load_before}")
    service = Service(config, data_dir, args.searchers, args.index_timeout)
    try:
        service.wait_serving(args.index_timeout + 300)
        if not reuse:
            probe_during_sync(service, m, args.index_timeout)
            m.build_total, m.build_index = service.build_seconds()
        failed = [line for _, line in service.lines if line.startswith("first sync:") and "failed" in line]
        if failed:
            m.failures.append(failed[-1])
        shards = index_shards(data_dir / "index")
        m.shards = len(shards)
        m.index_bytes = sum(os.path.getsize(p) for p in shards if os.path.exists(p))
        if args.settle > 0:  # a service that just started shares the cores with Ray's own start-up work
            say(f"[N={n}] settling {args.settle:.0f} s before the queries")
            time.sleep(args.settle)
        say(f"[N={n}] serving on {service.base}: {m.shards} shards, {m.index_bytes / 1e6:.0f} MB; "
            f"{args.runs} rounds of {len(be.QUERIES)} queries")
        measure_queries(service.base, args.runs, m)
        m.procs = service_processes(service)
        m.load_after = load()
    finally:
        code, secs = service.stop(args.stop_timeout)
        m.stop = f"exit {code} after {secs:.1f} s"
        say(f"[N={n}] stopped: {m.stop}")
    return m


# ----------------------------------------------------------------------------- report


def p50(ts: list[float]) -> float:
    return statistics.median(ts)


def mb(x: float | None) -> str:
    return "–" if x is None else f"{x / 1e6:.0f}"


def secs(x: float | None) -> str:
    return "reused" if x is None else f"{x:.0f}"


def report(results: list[Measured], args, machine: list[str], corpus_bytes: int, corpus_count: int,
           projects: list[str]) -> int:
    print("## Machine\n")
    print("\n".join(machine))
    print(f"\nCorpus: {len(projects)} projects ({', '.join(projects)}), {corpus_bytes / 1e6:.1f} MB in "
          f"{corpus_count} files, cut into N git repositories of about equal size. `codesearch serve` with "
          f"{args.searchers} searchers, 1 API replica, settings {json.dumps(SETTINGS)}; `POST /api/search`, "
          f"1 client, matches=100, contextLines=0; {args.runs} rounds of the {len(be.QUERIES)} classes after one "
          f"warm-up round; times in ms.\n")

    print("### Per N\n")
    print("| N | repos served | shards | index MB | repos made (s) | sync + index (s) | index (s) | "
          "searchers: RssAnon MB / index served MB | API replica RssAnon MB | load avg before → after | stop |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|")
    for m in results:
        searchers = ", ".join(f"{mb(p.rss_anon)} / {mb(p.serves)}" for p in m.procs if p.role == "searcher") or "–"
        replicas = ", ".join(mb(p.rss_anon) for p in m.procs if p.role == "API replica") or "–"
        print(f"| {m.n} | {m.repos_served if m.repos_served is not None else '?'} | {m.shards} | {mb(m.index_bytes)} | "
              f"{secs(m.repos_seconds)} | {secs(m.build_total)} | {secs(m.build_index)} | {searchers} | {replicas} | "
              f"{m.load_before} → {m.load_after} | {m.stop} |")
    print()

    for m in results:
        if m.during_sync:
            ok = [d for d in m.during_sync if d[1] == 200]
            lat = sorted(d[2] for d in ok)
            print(f"During the first sync at N={m.n}: {len(ok)} of {len(m.during_sync)} searches answered 200 "
                  f"(p50 {p50(lat) * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms); files found rose from "
                  f"{m.during_sync[0][3]} to {m.during_sync[-1][3]} as repositories were indexed.\n"
                  if lat else f"During the first sync at N={m.n}: no search answered ({len(m.during_sync)} sent).\n")
    print("### p50 / p95 per query class (ms)\n")
    print("| class | query | " + " | ".join(f"N={m.n}" for m in results) + " |")
    print("|---|---|" + "---:|" * len(results))
    for q in be.QUERIES:
        cells = []
        for m in results:
            ts = m.times.get(q.cls)
            cells.append(f"{be.fmt_ms(p50(ts))} / {be.fmt_ms(be.percentile(ts, 95))}" if ts else "failed")
        qtext = q.cs_query + ("" if q.case_sensitive else " (-i)") + (" (regex)" if q.is_regex else "")
        print(f"| {q.cls} | `{qtext}` | " + " | ".join(cells) + " |")
    print()

    print("### Answers (warm-up request; the same files must come back whatever N)\n")
    print("| class | " + " | ".join(f"N={m.n}: matches / files / exhaustive" for m in results) + " | same |")
    print("|---|" + "---|" * len(results) + "---|")
    for q in be.QUERIES:
        cells, exhaustive_sets = [], []
        for m in results:
            a = m.answers.get(q.cls)
            cells.append(f"{a[0]} / {a[1]} / {a[2]}" if a else "–")
            if a and a[2]:
                exhaustive_sets.append((a[0], tuple(a[3])))
        same = "–" if len(exhaustive_sets) < 2 else ("✓" if len(set(exhaustive_sets)) == 1 else "✗")
        print(f"| {q.cls} | " + " | ".join(cells) + f" | {same} |")
    print("\n(`same`: the match count and the set of file names (project directory + path, the same whatever "
          "repository holds the file) are equal at every N where the answer is exhaustive.)\n")

    stat_keys = ("ngramMatches", "filesConsidered", "filesLoaded", "contentBytesLoaded", "shardsScanned",
                 "shardsSkippedFilter")
    print("### Engine stats of the warm-up request (`stats` of the answer)\n")
    print("| class | N | " + " | ".join(stat_keys) + " |")
    print("|---|---:|" + "---:|" * len(stat_keys))
    for q in be.QUERIES:
        for m in results:
            st = m.stats.get(q.cls, {})
            print(f"| {q.cls} | {m.n} | " + " | ".join(str(st.get(k, "–")) for k in stat_keys) + " |")
    print()

    failures = [(m.n, f) for m in results for f in m.failures]
    for n, f in failures:
        print(f"FAILED at N={n}: {f}")

    print("### Targets of issue 12\n")
    print("| target | result | |\n|---|---|---|")
    base = next((m for m in results if m.n == 10), None)
    for m in results:
        if m.n < P50_TARGET_MIN_N:
            continue
        for cls in FLAT_CLASSES:
            ts = m.times.get(cls)
            if not ts:
                print(f"| {cls} p50 at N={m.n} ≤ {P50_MAX_MS:g} ms | failed | ✗ |")
                continue
            v = p50(ts) * 1000
            print(f"| {cls} p50 at N={m.n} ≤ {P50_MAX_MS:g} ms | {v:.1f} ms | {'✓' if v <= P50_MAX_MS else '✗'} |")
            if base and base.times.get(cls):
                b = p50(base.times[cls]) * 1000
                r = v / b
                print(f"| {cls} p50 at N={m.n} ≤ {P50_MAX_RATIO:g}× N=10 ({b:.1f} ms) | {r:.2f}× | "
                      f"{'✓' if r <= P50_MAX_RATIO else '✗'} |")
    for m in results:
        for p in m.procs:
            if p.role == "searcher":
                bound = SEARCHER_MEM_FRACTION * p.serves + SEARCHER_MEM_EXTRA
                print(f"| searcher {p.pid} at N={m.n}: RssAnon ≤ 25% of its index ({mb(p.serves)} MB) + 150 MB "
                      f"= {mb(bound)} MB | {mb(p.rss_anon)} MB | {'✓' if p.rss_anon <= bound else '✗'} |")
            else:
                print(f"| API replica {p.pid} at N={m.n}: RssAnon ≤ 300 MB | {mb(p.rss_anon)} MB | "
                      f"{'✓' if p.rss_anon <= REPLICA_MEM_MAX else '✗'} |")
        if not m.procs:
            print(f"| memory at N={m.n} | no searcher or replica process found | ✗ |")
    print(f"\nload average at the end: {load()}")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", help=f"numbers of repositories (default {' '.join(map(str, DEFAULT_N))}; "
                                                      f"--quick: {' '.join(map(str, QUICK_N))})")
    ap.add_argument("--runs", type=int, default=20, help="timed rounds of the query classes (default 20; --quick 5)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep bench/.work/scale/data-N from an earlier run (no build, build time not measured)")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: the corpus of `corpus.py --quick` ({', '.join(corpus.QUICK_PROJECTS)})")
    ap.add_argument("--searchers", type=int, default=2, help="codesearch serve --searchers (default 2)")
    ap.add_argument("--settle", type=float, default=30,
                    help="seconds to wait between the service answering and the first query (default 30)")
    ap.add_argument("--index-timeout", type=float, default=3600,
                    help="seconds the first sync and index may take per N (default 3600)")
    ap.add_argument("--stop-timeout", type=float, default=120, help="seconds after SIGTERM before SIGKILL (default 120)")
    ap.add_argument("--repos", help="serve this directory of git repositories as it is (N = its entries) instead of "
                                    "cutting bench/corpus.py's corpus")
    ap.add_argument("--data", help="the service's data directory (default bench/.work/scale/data-N)")
    args = ap.parse_args()
    if args.repos:
        args.n = [sum(1 for p in Path(args.repos).iterdir() if p.is_dir())]
    ns = args.n or (QUICK_N if args.quick else DEFAULT_N)
    if args.quick:
        args.runs = min(args.runs, 5)
    if shutil.which("git") is None:
        print("git not found on PATH", file=sys.stderr)
        return 2
    machine = be.machine_info()  # its load average is the one at the start
    projects = corpus.selected(None, args.quick)
    project_dirs = corpus.ensure(projects)
    files = corpus_files(project_dirs)
    SCALE.mkdir(parents=True, exist_ok=True)
    say(f"corpus: {len(project_dirs)} projects, {sum(f.size for f in files) / 1e6:.1f} MB, {len(files)} files; "
        f"load {load()}")
    results = []
    for n in ns:
        m = run_one(n, files, args)
        results.append(m)
        say(f"[N={n}] done: {m.shards} shards, {mb(m.index_bytes)} MB, build {secs(m.build_index)} s; p50 ms: "
            + ", ".join(f"{cls} {p50(ts) * 1000:.1f}" for cls, ts in m.times.items())
            + "; RssAnon MB: " + ", ".join(f"{p.role} {mb(p.rss_anon)}" for p in m.procs))
    return report(results, args, machine, sum(f.size for f in files), len(files), [p.name for p in project_dirs])


if __name__ == "__main__":
    sys.exit(main())
