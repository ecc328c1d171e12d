#!/usr/bin/env python3
"""What the periodic re-index costs when nothing changed (issue 25, item 5).

Usage:
    python bench/bench_reindex.py                   # up to 400 repositories, up to 300 MB
    python bench/bench_reindex.py --repos 2000 --mb 1000
    python bench/bench_reindex.py --split --repos 5000   # every package folder its own repository

The repositories are real third-party code that this machine already has: each package directory
of the project's virtual environment (numpy, ray, pydantic, …) becomes one git repository (one
commit) under ``bench/.work/reindex/``, until `--repos` repositories or `--mb` megabytes; with
``--split``, every folder of those packages is a repository of its own (its own files only), which
gives thousands of small repositories. They are
registered in a state store as local repositories and indexed by the service's own index jobs
(`RepoIndexer` over the store, as the runtime's indexers run them; a mirror fetch, which a remote
repository adds, is not part of this measure). Then every repository is queued again, as
``reindexIntervalMs`` does, twice: once as codesearch does now (an unchanged repository is
compared, not rebuilt: `builder.build_key`) and once with that comparison switched off (every
repository rebuilt, as before issue 25). Prints wall time, CPU (this process and its git and
ctags children) and shard files written for each pass.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

WORK = os.path.join(HERE, ".work", "reindex")


def cpu_seconds() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def tree_bytes(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def _folders(site: str, split: bool):
    """(name, source folder, copy it whole?) of each repository to make: a package each, or with
    `split` every folder of the packages on its own (its files only): many small repositories."""
    for entry in sorted(os.listdir(site)):
        full = os.path.join(site, entry)
        if not os.path.isdir(full) or entry.startswith(("_", ".")) or entry.endswith((".dist-info", ".egg-info")):
            continue
        if not split:
            yield entry, full, True
            continue
        for root, dirs, _files in os.walk(full):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            yield os.path.relpath(root, site).replace(os.sep, "."), root, False


def make_repos(max_repos: int, max_mb: int, split: bool = False) -> list[tuple[str, str]]:
    """(name, path) of git repositories made from the virtual environment's packages."""
    site = sysconfig.get_paths()["purelib"]
    src_dir = os.path.join(WORK, "src")
    shutil.rmtree(src_dir, ignore_errors=True)
    os.makedirs(src_dir)
    made, budget = [], max_mb << 20
    for entry, full, whole in _folders(site, split):
        if whole:
            size = tree_bytes(full)
        else:
            files = [
                f for f in os.listdir(full) if os.path.isfile(os.path.join(full, f)) and not f.endswith((".so", ".pyc"))
            ]
            size = sum(os.path.getsize(os.path.join(full, f)) for f in files)
        if size == 0 or size > budget:
            continue
        dest = os.path.join(src_dir, entry)
        if whole:
            shutil.copytree(full, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
        else:
            os.makedirs(dest)
            for f in files:
                shutil.copy2(os.path.join(full, f), os.path.join(dest, f))
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "b",
            "GIT_AUTHOR_EMAIL": "b@example.com",
            "GIT_COMMITTER_NAME": "b",
            "GIT_COMMITTER_EMAIL": "b@example.com",
        }
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "import"]):
            subprocess.run(["git", "-C", dest, *args], check=True, capture_output=True, env=env)
        made.append((f"bench.local/{entry}", dest))
        budget -= size
        if len(made) >= max_repos or budget <= 0:
            break
    return made


def run_pass(store, data: str, ids: list[int]) -> dict:
    from codesearch.index import manifest
    from codesearch.runtime.workers import RepoIndexer, RuntimeOptions

    index_dir = os.path.join(data, "index")
    before = set(os.listdir(index_dir)) if os.path.isdir(index_dir) else set()
    for repo_id in ids:
        store.enqueue_index_job(repo_id)
    indexer = RepoIndexer(data, "bench-reindex", RuntimeOptions(heartbeat_s=1.0))
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    try:
        while indexer.run_once():
            pass
    finally:
        indexer.close()
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    after = set(os.listdir(index_dir))
    written = {f for f in after - before if f.endswith(".shard")}
    m = manifest.read_manifest(index_dir) or {}
    return {"wall": wall, "cpu": cpu, "written": len(written), "generation": m.get("generation")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", type=int, default=400)
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--split", action="store_true", help="every package folder its own repository (many small ones)")
    args = ap.parse_args()

    from codesearch.index import builder
    from codesearch.store import Store

    repos = make_repos(args.repos, args.mb, args.split)
    total_mb = sum(tree_bytes(p) for _, p in repos) / 1e6
    data = os.path.join(WORK, "data")
    shutil.rmtree(data, ignore_errors=True)
    store = Store.open(data)
    store.upsert_connection("bench", "git", {"type": "git", "url": "file://" + os.path.join(WORK, "src")})
    listed = [
        dict(
            name=name,
            code_host_type="genericGitHost",
            clone_url="file://" + path,
            local_path=path,
            default_branch="main",
        )
        for name, path in repos
    ]
    ids = list(store.upsert_repos("bench", listed).ids.values())

    print(f"{len(ids)} repositories, {total_mb:.0f} MB of real code; load average {os.getloadavg()[0]:.2f}")
    rows = [("first index", run_pass(store, data, ids)), ("re-index, nothing changed", run_pass(store, data, ids))]
    real_key = builder.build_key
    builder.build_key = lambda source, settings: None  # the behaviour before: every repository rebuilt
    try:
        rows.append(("re-index, comparison off (before)", run_pass(store, data, ids)))
    finally:
        builder.build_key = real_key
    print()
    print("| pass | wall s | CPU s | CPU ms / repository | shard files written |")
    print("|---|---:|---:|---:|---:|")
    for label, r in rows:
        per_repo = 1000 * r["cpu"] / max(1, len(ids))
        print(f"| {label} | {r['wall']:.1f} | {r['cpu']:.1f} | {per_repo:.1f} | {r['written']} |")
    now, before = rows[1][1], rows[2][1]
    print()
    print(
        f"unchanged re-index: {before['cpu'] / max(now['cpu'], 1e-9):.0f}x less CPU than rebuilding; "
        f"projected for 5,000 unchanged repositories: {5000 * now['cpu'] / max(1, len(ids)):.1f} s of CPU"
    )


if __name__ == "__main__":
    main()
