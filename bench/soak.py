#!/usr/bin/env python3
"""A day in an hour (issue 30): mixed traffic against `codesearch serve`, every process sampled.

Usage:
    python bench/soak.py                          # one hour, six projects of the benchmark corpus
    python bench/soak.py --duration 600 --warmup 120 --sample-every 20     # a short run

What it does:
  1. makes six git repositories, one per project of bench/corpus.py (``--projects``; bare, one
     commit each, under bench/.work/soak/repos/, cached) and a seventh, ``pushed``, a small
     working repository this script commits to while the soak runs;
  2. creates an owner (with an API key) and three members in a fresh data directory with the
     `codesearch users` and `codesearch keys` commands, starts a scripted language model on
     127.0.0.1 (tests/fakellm.py: it answers every Ask with one tool call, then a text), writes a
     config with the seven repositories, that model and ``reindexIntervalMs`` = ``--reindex-every``,
     and starts ``codesearch serve`` on it as a process of its own (its own Ray instance);
  3. once it serves, runs ``--clients`` threads of mixed traffic for ``--duration`` seconds, each
     picking at random (weights in MIX): ``POST /api/search``, ``POST /api/stream_search`` read to
     its end, an MCP session (the real SDK client: initialize, list tools, one ``grep``), a member's
     web visit (sign in with the password form, the search page, the repositories page, a file
     page, sign out), and Ask (``POST /api/chat/blocking``; one at a time, the model's script is
     topped up before each); beside them a pusher commits a new file with a unique word to
     ``pushed`` every ``--push-every`` seconds and times how long until a search finds the word;
  4. every ``--sample-every`` seconds reads, for every process of the service's tree, its
     anonymous memory (RssAnon), open file descriptors and threads (/proc), keyed by its Ray
     process title (``ray::ShardSearcher``, ``ray::ServeReplica:...``, the raylet, GCS, ...);
  5. stops the service with SIGTERM and prints: per process kind, the figures just after the
     warm-up (``--warmup`` seconds) and at the end, each the median of ``WINDOW`` samples (a
     process whose memory rises and falls with the pages it builds is judged by its level, not by
     where one sample fell), their peak, the growth between the two (flat = within 10%), the
     least-squares trend after the warm-up in MB per hour, the traffic by kind with its errors and
     p50/p99, and the push-to-searchable times. The samples are kept in bench/.work/soak/samples.json.

A benchmark, not a test: it prints; it exits 1 only when the service did not serve or a process
kind grew by more than 10% after the warm-up (so a script can act on it).
"""
from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import corpus  # noqa: E402  (the pinned projects)
from bench_scale import Service, cmdline, process_tree, say, status_kb  # noqa: E402
from gitrepos import GIT_ENV, fast_import, tree_files  # noqa: E402

WORK = HERE / ".work" / "soak"
DEFAULT_PROJECTS = ["Django", "numpy", "pandas", "typescript", "three", "ruff"]
#: relative weights of the traffic kinds each client picks from
MIX = {"search": 40, "stream": 15, "mcp": 15, "web": 20, "ask": 10}
QUERIES = ["QuerySet", "def __init__", "return", "lang:python import", "/(TODO|FIXME):/", "sym:Series",
           "file:README", "nothing_matches_this_zq9"]
OWNER = ("owner@soak.example", "owner-soak-pass-1")
MEMBERS = [(f"member{i}@soak.example", f"member-soak-pass-{i}") for i in range(1, 4)]
FLAT = 0.10  # growth after the warm-up that still counts as flat
WINDOW = 5  # samples whose median is the level at the start (after the warm-up) and at the end


# ----------------------------------------------------------------------------- set-up


def make_repos(projects: list[str]) -> tuple[Path, Path]:
    """(directory of the six bare repositories, the working repository `pushed`)."""
    by_name = {p.name.lower(): p for p in corpus.PROJECTS}
    wanted = {name.lower() for name in projects}
    unknown = wanted - set(by_name)
    if unknown:
        raise SystemExit(f"--projects: no such project in bench/corpus.py: {', '.join(sorted(unknown))}")
    chosen = [p for p in corpus.PROJECTS if p.name.lower() in wanted]  # corpus.ensure answers in this order
    dirs = corpus.ensure(chosen)
    repos = WORK / "repos"
    repos.mkdir(parents=True, exist_ok=True)
    for project, src in zip(chosen, dirs, strict=True):
        dest = repos / f"{project.name.lower()}.git"
        marker = repos / f"{project.name.lower()}.done"
        if dest.is_dir() and marker.exists():
            continue
        count = fast_import(dest, src, tree_files(src), f"{project.name} {project.version}")
        marker.write_text(str(count))
        say(f"  {dest.name}: {count} files")
    pushed = WORK / "pushed"
    if pushed.exists():
        shutil.rmtree(pushed)
    pushed.mkdir(parents=True)
    git(pushed, "init", "-q", "-b", "main")
    (pushed / "README.md").write_text("A repository the soak commits to.\n")
    git(pushed, "add", "-A")
    git(pushed, "commit", "-q", "-m", "start")
    return repos, pushed


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, env={**GIT_ENV, "PATH": "/usr/bin:/bin"},
                   capture_output=True)


def cli(data_dir: Path, *args: str, stdin: str = "") -> str:
    out = subprocess.run([sys.executable, "-m", "codesearch.cli", *args, "--data-dir", str(data_dir)], input=stdin,
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    if out.returncode != 0:
        raise SystemExit(f"codesearch {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout.strip()


def make_accounts(data_dir: Path) -> str:
    """The owner, three members and the owner's API key (returned)."""
    for email, password in [OWNER, *MEMBERS]:
        cli(data_dir, "users", "create", email, "--password-stdin", stdin=password + "\n")
    return cli(data_dir, "keys", "create", "--user", OWNER[0], "--name", "soak")


def write_config(path: Path, repos: Path, pushed: Path, model_url: str, reindex_s: float) -> None:
    config = {
        "settings": {"reindexIntervalMs": int(reindex_s * 1000), "resyncConnectionIntervalMs": int(reindex_s * 1000)},
        "connections": {
            "projects": {"type": "git", "url": f"file://{repos}/*"},
            "pushed": {"type": "git", "url": f"file://{pushed}"},
        },
        "models": [{"provider": "openai-compatible", "model": "soak-model", "baseUrl": model_url,
                    "token": {"env": "SOAK_MODEL_KEY"}}],
    }
    path.write_text(json.dumps(config, indent=2) + "\n")


# ----------------------------------------------------------------------------- traffic


@dataclass
class Tally:
    """Per traffic kind: latencies of the answered calls, and the failures by what they were."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))

    def ok(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.times[kind].append(seconds)

    def fail(self, kind: str, what: str) -> None:
        with self.lock:
            self.errors[kind][what[:120]] += 1


class Traffic:
    def __init__(self, base: str, key: str, model, tally: Tally, seed: int):
        import httpx

        self.base = base
        self.key = key
        self.model = model
        self.tally = tally
        self.rng = random.Random(seed)
        self.api = httpx.Client(base_url=base, headers={"X-Sourcebot-Api-Key": key}, timeout=60)
        self.ask_lock = threading.Lock()

    def one(self) -> None:
        kind = self.rng.choices(list(MIX), weights=list(MIX.values()))[0]
        t0 = time.perf_counter()
        try:
            getattr(self, kind)()
        except Exception as e:  # noqa: BLE001 - a soak counts every failure, by kind, and goes on
            self.tally.fail(kind, f"{type(e).__name__}: {e}")
            return
        self.tally.ok(kind, time.perf_counter() - t0)

    def _check(self, response, what: str) -> None:
        if response.status_code >= 400:
            raise RuntimeError(f"{what} {response.status_code}")

    def search(self) -> None:
        q = self.rng.choice(QUERIES)
        self._check(self.api.post("/api/search", json={"query": q, "matches": 50}), "search")

    def stream(self) -> None:
        q = self.rng.choice(QUERIES)
        with self.api.stream("POST", "/api/stream_search", json={"query": q, "matches": 50}) as r:
            self._check(r, "stream")
            for _ in r.iter_bytes():
                pass

    def mcp(self) -> None:
        from tests.mcpclient import McpClient

        client = McpClient(self.base + "/api/mcp", headers={"X-Sourcebot-Api-Key": self.key}, timeout_s=60)

        async def go(session, _init):
            await session.list_tools()
            res = await session.call_tool("grep", {"pattern": self.rng.choice(["QuerySet", "ndarray", "Series"])})
            if res.is_error:
                raise RuntimeError("mcp grep answered an error")

        client.run(go)

    def web(self) -> None:
        import httpx

        email, password = self.rng.choice(MEMBERS)
        with httpx.Client(base_url=self.base, timeout=60, follow_redirects=False) as s:
            login = s.get("/login")
            self._check(login, "GET /login")
            token = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
            if token is None:
                raise RuntimeError("no csrf_token on the sign-in page")
            r = s.post("/login", data={"email": email, "password": password, "csrf_token": token.group(1)})
            if r.status_code != 303:
                raise RuntimeError(f"sign-in answered {r.status_code}")
            page = s.get("/search", params={"q": self.rng.choice(QUERIES)})
            self._check(page, "GET /search")
            self._check(s.get("/repos"), "GET /repos")
            link = re.search(r'href="([^"]*/-/blob/[^"]+)"', page.text)
            if link:
                self._check(s.get(link.group(1).replace("&amp;", "&")), "GET file page")
            home = s.get("/")
            token = re.search(r'name="csrf_token" value="([^"]+)"', home.text) or token
            r = s.post("/logout", data={"csrf_token": token.group(1)})
            if r.status_code != 303:
                raise RuntimeError(f"sign-out answered {r.status_code}")

    def ask(self) -> None:
        with self.ask_lock:  # the model's script is a queue: one chat at a time keeps its steps together
            self.model.add([("grep", {"pattern": "QuerySet"})], "It is defined in django/db/models/query.py.")
            r = self.api.post("/api/chat/blocking", json={"query": "Where is QuerySet defined?"})
            self._check(r, "ask")


def pusher(pushed: Path, base: str, key: str, every_s: float, stop: threading.Event, found: list[float],
           missed: list[str]) -> None:
    """Commits a file with a new word every `every_s` seconds; times until a search finds it (the
    service fetches and re-indexes `pushed` on its re-index interval)."""
    import httpx

    n = 0
    while not stop.wait(every_s):
        n += 1
        word = f"soakpush{n}x{random.randrange(10**9)}"
        (pushed / f"push-{n}.txt").write_text(f"{word}\n")
        git(pushed, "add", "-A")
        git(pushed, "commit", "-q", "-m", f"push {n}")
        t0 = time.monotonic()
        last = "no answer yet"
        while not stop.is_set():
            try:
                r = httpx.post(base + "/api/search", json={"query": word, "matches": 10},
                               headers={"X-Sourcebot-Api-Key": key}, timeout=30)
                last = f"HTTP {r.status_code}"
                if r.status_code == 200 and r.json().get("files"):
                    found.append(time.monotonic() - t0)
                    break
            except httpx.HTTPError as e:
                last = type(e).__name__
            if time.monotonic() - t0 > every_s * 3:
                missed.append(f"{word} ({last})")
                break
            stop.wait(2)


# ----------------------------------------------------------------------------- sampling


def kind_of(title: str) -> str | None:
    """A process kind from its command line: Ray titles its workers ``ray::<actor class>``."""
    first = title.split(" ", 1)[0]
    if first.startswith("ray::"):  # Ray retitles a worker with the method it runs: ray::Actor.method
        kind = first.split(".", 1)[0]
        return kind if kind != "ray::IDLE" else None
    for name in ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor.py", "runtime_env/agent"):
        if name in title:
            return name
    if "codesearch.cli serve" in title:
        return "codesearch serve"
    return None


def sample(root_pid: int) -> dict[str, dict[str, int]]:
    """Per process kind: the sums of RssAnon (kB), open fds and threads, and the process count."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"rss_kb": 0, "fds": 0, "threads": 0, "procs": 0})
    for pid in process_tree(root_pid):
        kind = kind_of(cmdline(pid))
        if kind is None:
            continue
        anon, threads = status_kb(pid, "RssAnon"), status_kb(pid, "Threads")
        try:
            fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
        except OSError:
            continue
        row = out[kind]
        row["rss_kb"] += anon or 0
        row["fds"] += fds
        row["threads"] += threads or 0
        row["procs"] += 1
    return dict(out)


# ----------------------------------------------------------------------------- report


def growth(a: int, b: int) -> float:
    return (b - a) / a if a else 0.0


def level(window: list[dict], kind: str) -> dict[str, int] | None:
    """The median of each figure of `kind` over the samples of `window` that have it."""
    rows = [s[kind] for s in window if kind in s]
    if not rows:
        return None
    return {key: int(statistics.median(r[key] for r in rows)) for key in rows[0]}


def trend_mb_per_hour(points: list[tuple[float, int]]) -> float:
    """The least-squares slope of (seconds, RssAnon kB) points, in MB per hour."""
    if len(points) < 2:
        return 0.0
    mt = statistics.fmean(t for t, _ in points)
    mv = statistics.fmean(v for _, v in points)
    var = sum((t - mt) ** 2 for t, _ in points)
    return 0.0 if not var else sum((t - mt) * (v - mv) for t, v in points) / var * 3600 / 1024


def report(samples: list[tuple[float, dict]], warmup: float, tally: Tally, pushes: list[float], missed: list[str],
           duration: float) -> bool:
    after = [(t, s) for t, s in samples if t >= warmup]
    if len(after) < 2:
        print("too few samples after the warm-up for a verdict")
        return False
    window = min(WINDOW, max(1, len(after) // 3))
    first, last = [s for _, s in after[:window]], [s for _, s in after[-window:]]
    print(f"\n## Soak: {duration / 60:.0f} min of mixed traffic, {len(samples)} samples, warm-up {warmup:.0f} s\n")
    print(f"Levels are medians of {window} samples: just after the warm-up, and at the end.\n")
    print("| process kind | procs | RssAnon MB warm → end (peak) | growth | trend MB/h | fds | threads | flat |")
    print("|---|---|---|---|---|---|---|---|")
    flat_all = True
    for kind in sorted(after[-1][1], key=lambda k: -after[-1][1][k]["rss_kb"]):
        a, b = level(first, kind), level(last, kind)
        if a is None or b is None:
            print(f"| {kind} | | (not there all along) | | | | | ? |")
            continue
        peak = max(s.get(kind, {}).get("rss_kb", 0) for _, s in after)
        trend = trend_mb_per_hour([(t, s[kind]["rss_kb"]) for t, s in after if kind in s])
        g = growth(a["rss_kb"], b["rss_kb"])
        gf, gt = growth(a["fds"], b["fds"]), growth(a["threads"], b["threads"])
        # a few MB or a handful of fds on a small process is noise, not a leak
        flat = (g <= FLAT or b["rss_kb"] - a["rss_kb"] < 8 * 1024) and (gf <= FLAT or b["fds"] - a["fds"] <= 4) \
            and (gt <= FLAT or b["threads"] - a["threads"] <= 2)
        flat_all &= flat
        print(f"| {kind} | {a['procs']}→{b['procs']} | {a['rss_kb'] / 1024:.0f} → {b['rss_kb'] / 1024:.0f} "
              f"({peak / 1024:.0f}) | {g:+.1%} | {trend:+.0f} | {a['fds']} → {b['fds']} | {a['threads']} → {b['threads']} "
              f"| {'✓' if flat else '✗'} |")
    print("\n| traffic | answered | failed | p50 ms | p99 ms |\n|---|---|---|---|---|")
    for kind in MIX:
        ts = sorted(tally.times.get(kind, []))
        failed = sum(tally.errors.get(kind, {}).values())
        p50 = statistics.median(ts) * 1000 if ts else 0
        p99 = ts[min(len(ts) - 1, int(len(ts) * 0.99))] * 1000 if ts else 0
        print(f"| {kind} | {len(ts)} | {failed} | {p50:.0f} | {p99:.0f} |")
    for kind, errs in tally.errors.items():
        for what, count in sorted(errs.items(), key=lambda kv: -kv[1])[:5]:
            print(f"  {kind}: {count}× {what}")
    if pushes or missed:
        times = f", median {statistics.median(pushes):.0f} s, max {max(pushes):.0f} s" if pushes else ""
        print(f"\npushes found by search: {len(pushes)}{times}; not found in time: {len(missed)}"
              + (f" (the last: {missed[-1]})" if missed else ""))
    print(f"\nflat after the warm-up (every kind within {FLAT:.0%}): {'✓' if flat_all else '✗'}")
    return flat_all


# ----------------------------------------------------------------------------- main


def main() -> int:
    from tests.fakellm import FakeModelServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=3600, help="seconds of traffic (default 3600)")
    ap.add_argument("--warmup", type=float, default=600, help="seconds before the baseline sample (default 600)")
    ap.add_argument("--sample-every", type=float, default=60, help="seconds between samples (default 60)")
    ap.add_argument("--clients", type=int, default=4, help="traffic threads (default 4)")
    ap.add_argument("--push-every", type=float, default=180, help="seconds between pushes (default 180)")
    ap.add_argument("--reindex-every", type=float, default=120, help="reindexIntervalMs, in seconds (default 120)")
    ap.add_argument("--projects", nargs="+", default=DEFAULT_PROJECTS, help="corpus projects, one repository each")
    ap.add_argument("--index-timeout", type=float, default=1800)
    args = ap.parse_args()

    say(f"soak: making repositories of {', '.join(args.projects)} ...")
    repos, pushed = make_repos(args.projects)
    data_dir = WORK / "data"
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)
    key = make_accounts(data_dir)
    model_key = "sk-soak"
    with FakeModelServer(api_key=model_key) as model:
        config = WORK / "config.json"
        write_config(config, repos, pushed, model.base_url + "/v1", args.reindex_every)
        import os

        os.environ["SOAK_MODEL_KEY"] = model_key  # inherited by `codesearch serve`
        os.environ.pop("FORCE_ENABLE_ANONYMOUS_ACCESS", None)
        service = Service(config, data_dir, 2, args.index_timeout)
        samples: list[tuple[float, dict]] = []
        tally = Tally()
        pushes: list[float] = []
        missed: list[str] = []
        stop = threading.Event()
        try:
            service.wait_serving(args.index_timeout)
            say(f"soak: serving at {service.base}; {args.duration:.0f} s of traffic from {args.clients} clients")
            threads = [threading.Thread(target=pusher, args=(pushed, service.base, key, args.push_every, stop,
                                                             pushes, missed), daemon=True)]
            for i in range(args.clients):
                traffic = Traffic(service.base, key, model, tally, seed=i)

                def loop(t: Traffic = traffic) -> None:
                    while not stop.is_set():
                        t.one()

                threads.append(threading.Thread(target=loop, daemon=True))
            t0 = time.monotonic()
            for t in threads:
                t.start()
            while (elapsed := time.monotonic() - t0) < args.duration:
                samples.append((elapsed, sample(service.proc.pid)))
                answered = sum(len(v) for v in tally.times.values())
                failed = sum(sum(v.values()) for v in tally.errors.values())
                rss = sum(v["rss_kb"] for v in samples[-1][1].values()) / 1024
                say(f"  {elapsed:5.0f} s: {answered} answered, {failed} failed, service RssAnon {rss:.0f} MB")
                stop.wait(min(args.sample_every, max(0.0, args.duration - elapsed)))
            samples.append((time.monotonic() - t0, sample(service.proc.pid)))
            stop.set()
            for t in threads:
                t.join(timeout=90)
        finally:
            stop.set()
            code, secs = service.stop(120)
            say(f"soak: codesearch serve stopped (exit {code}) in {secs:.0f} s")
    (WORK / "samples.json").write_text(json.dumps({"args": vars(args), "samples": samples}, indent=1))
    flat = report(samples, args.warmup, tally, pushes, missed, args.duration)
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
