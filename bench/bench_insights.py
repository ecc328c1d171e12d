#!/usr/bin/env python3
"""Insights over history against a shell loop of ``git grep -c`` at each commit (issue 27).

Usage:
    python bench/bench_insights.py --repos-dir DIR                 # 10 queries × 20 repositories × 24 months
    python bench/bench_insights.py --repos-dir DIR --repos 5 --months 6 --no-ray   # a quick look

``DIR`` holds git repositories with history (bare mirrors, ``git clone --mirror URL``, or work
trees; a folder whose ``repo`` subfolder is one counts too), one per entry; the first `--repos`
by name that have a commit before the first point are used. The run in bench/RESULTS.md used 20
public Python projects' full histories (GitPython, requests, flask, click, jinja, werkzeug,
itsdangerous, markupsafe, attrs, httpx, starlette, tqdm, packaging, urllib3, pluggy, six, yarl,
multidict, jsonschema, pip-tools).

What is measured, the same 10 queries (`QUERIES`: literals, regexes, a ``lang:`` and a ``file:``
filter, a case-sensitive one) at 24 monthly points of each repository's default branch:

* **the shell loop**: for each repository and point, ``git rev-list -1 --before`` names the
  commit, then one ``git grep -c`` per query at that commit (`PEER_ARGS`: the closest flags:
  ``-i``, ``-F``/``-P``, ``--all-match``, a ``*.py`` pathspec), its counts summed with awk: one
  bash script run as one process, then the same scripts two at a time (``xargs -P 2``);
* **the insights engine in one process** (`count_repository`, repository after repository);
* **`run_insights` on Ray** with 2 CPUs (one task per repository; ``ray.init`` is not counted),
  twice: with cold workers (Ray starts them and they import codesearch), then warm.

Every run is timed once, wall clock; the ratios are of runs in this same invocation. The
machine's load average is printed: other work on it shows in every number.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from codesearch.insights.engine import RepoTarget, count_repository  # noqa: E402
from codesearch.insights.spec import points  # noqa: E402

#: (label, query as POST /api/search takes it, git grep arguments doing the closest thing)
QUERIES: list[tuple[str, dict, list[str]]] = [
    ("import os", {"query": "import os"}, ["-i", "-F", "-e", "import os"]),
    ("TODO", {"query": "TODO"}, ["-i", "-F", "-e", "TODO"]),
    (r"def\stest_\w+ (regex)", {"query": r"def\stest_\w+", "isRegexEnabled": True},
     ["-i", "-P", "-e", r"def\stest_\w+"]),
    ("typing", {"query": "typing"}, ["-i", "-F", "-e", "typing"]),
    ("lang:python async def", {"query": "lang:python async def"},
     ["-i", "-F", "--all-match", "-e", "async", "-e", "def", "--", "*.py"]),
    ("deprecated", {"query": "deprecated"}, ["-i", "-F", "-e", "deprecated"]),
    (r"raise\s\w+Error (regex)", {"query": r"raise\s\w+Error", "isRegexEnabled": True},
     ["-i", "-P", "-e", r"raise\s\w+Error"]),
    ("self", {"query": "self"}, ["-i", "-F", "-e", "self"]),
    (r"file:\.py$ print(", {"query": r"file:\.py$ print("}, ["-i", "-F", "-e", "print(", "--", "*.py"]),
    ("Optional[ (case)", {"query": "Optional[", "isCaseSensitivityEnabled": True}, ["-F", "-e", "Optional["]),
]


def git_dir_of(path: str) -> str | None:
    for candidate in (os.path.join(path, "repo"), os.path.join(path, ".git"), path):
        if os.path.isfile(os.path.join(candidate, "HEAD")) and os.path.isdir(os.path.join(candidate, "objects")):
            return candidate
    return None


def pick_repos(folder: str, count: int, first: str) -> list[tuple[str, str]]:
    """(name, git dir) of the first `count` repositories of `folder` by name with a commit before `first`."""
    out = []
    for entry in sorted(os.listdir(folder)):
        git_dir = git_dir_of(os.path.join(folder, entry))
        if git_dir is None:
            continue
        old = subprocess.run(["git", "--git-dir", git_dir, "rev-list", "-1", f"--before={first}", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
        if old:
            out.append((entry, git_dir))
        if len(out) == count:
            break
    return out


def peer_script(git_dir: str, dates: list[str]) -> str:
    """The shell loop over one repository: a commit per point, a ``git grep -c`` per query."""
    lines = ["set -u", f"g={shlex.quote(git_dir)}", "total=0"]
    for d in dates:
        lines.append(f"c=$(git --git-dir=\"$g\" rev-list -1 --before={shlex.quote(d)} HEAD)")
        lines.append('if [ -n "$c" ]; then')
        for _, _, args in QUERIES:
            pathspec = args[args.index("--") + 1:] if "--" in args else []
            flags = args[: args.index("--")] if "--" in args else args
            grep = f'git --git-dir="$g" grep -c -I {shlex.join(flags)} "$c" -- {shlex.join(pathspec)}'
            lines.append(f"  n=$({grep} | awk -F: '{{s+=$NF}} END {{print s+0}}'); total=$((total + n))")
        lines.append("fi")
    lines.append('echo "$total"')
    return "\n".join(lines) + "\n"


def run_peer(scripts: list[str], parallel: int) -> tuple[float, int]:
    t = time.perf_counter()
    if parallel == 1:
        total = 0
        for s in scripts:
            total += int(subprocess.run(["bash", s], capture_output=True, text=True, check=True).stdout.strip() or 0)
        return time.perf_counter() - t, total
    out = subprocess.run(["xargs", "-P", str(parallel), "-n", "1", "bash"], input="\n".join(scripts),
                         capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t, sum(int(x) for x in out.split())


def run_engine(repos: list[tuple[str, str]], dates) -> tuple[float, int]:
    queries = [q for _, q, _ in QUERIES]
    t = time.perf_counter()
    total = 0
    for name, git_dir in repos:
        total += sum(r.match_count for r in count_repository(RepoTarget(name, git_dir), queries, dates))
    return time.perf_counter() - t, total


def run_ray(repos: list[tuple[str, str]], since: str, until: str) -> list[tuple[float, int]]:
    """Two runs: the first starts Ray's worker processes (and imports codesearch in them), the
    second finds them warm, as a notebook's second question does."""
    import ray

    from codesearch.insights.dataset import run_insights

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        out = []
        for _ in range(2):
            t = time.perf_counter()
            ds = run_insights([q for _, q, _ in QUERIES], dict(repos), since, until, "month")
            frame = ds.to_pandas()
            out.append((time.perf_counter() - t, int(frame["match_count"].sum())))
        return out
    finally:
        ray.shutdown()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos-dir", required=True, help="a folder of git repositories with history")
    ap.add_argument("--repos", type=int, default=20)
    ap.add_argument("--since", default="2023-09-01")
    ap.add_argument("--months", type=int, default=24)
    ap.add_argument("--no-ray", action="store_true", help="leave out the Ray run")
    args = ap.parse_args()
    dates = points(args.since, "2100-01-01", "month")[: args.months]
    since, until = dates[0].date().isoformat(), dates[-1].date().isoformat()
    repos = pick_repos(args.repos_dir, args.repos, since)
    calls = len(repos) * len(dates) * len(QUERIES)
    print(f"{len(QUERIES)} queries × {len(repos)} repositories × {len(dates)} monthly points ({since} … {until}): "
          f"{calls:,} (query, repository, point) counts")
    print("repositories:", ", ".join(n for n, _ in repos))
    print(f"load average at start: {load()}")
    work = tempfile.mkdtemp(prefix="bench-insights-")
    git_dates = [f"{d:%Y-%m-%d %H:%M:%S} +0000" for d in dates]
    scripts = []
    for name, git_dir in repos:
        path = os.path.join(work, f"{name}.sh")
        with open(path, "w") as f:
            f.write(peer_script(git_dir, git_dates))
        scripts.append(path)

    results = []
    secs, lines = run_peer(scripts, 1)
    results.append(("shell loop of `git grep -c` (sequential)", secs, f"{lines:,} matching lines"))
    secs, matches = run_engine(repos, dates)
    results.append(("insights engine, one process (`count_repository`)", secs, f"{matches:,} matches"))
    if not args.no_ray:
        for (secs, ray_matches), when in zip(run_ray(repos, since, until), ("cold", "warm"), strict=True):
            label = f"`run_insights` on Ray, 2 CPUs, one task per repository ({when} workers)"
            results.append((label, secs, f"{ray_matches:,} matches"))
            assert ray_matches == matches, (ray_matches, matches)
    secs, lines2 = run_peer(scripts, 2)
    results.append(("shell loop of `git grep -c`, 2 repositories at a time", secs, f"{lines2:,} matching lines"))
    base = results[0][1]
    print(f"\nload average at the end: {load()}\n")
    print("| run | wall s | shell loop ÷ run | counted |")
    print("|---|---:|---:|---|")
    for label, secs, what in results:
        print(f"| {label} | {secs:.1f} | {base / secs:.1f}× | {what} |")


if __name__ == "__main__":
    main()
