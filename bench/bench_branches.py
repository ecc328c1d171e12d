#!/usr/bin/env python3
"""What more than 64 branches per repository cost (issue 29, item 12): index size and query time.

Usage:
    python bench/bench_branches.py                      # 64, 256 and 1,000 branches
    python bench/bench_branches.py --branches 64,1000 --files 1000 --runs 9

One git repository per branch count, under ``bench/.work/branches/``: `--files` Python files of
the project's virtual environment (real code, the same files every time) on ``main``, and
``N - 1`` branches ``b/0001`` … off it, each changing `--changed` of those files (a line appended
that names the branch: ``marker_<i>``), written by one ``git fast-import``. Each is indexed with
``CODESEARCH_MAX_INDEXED_REVISIONS`` = N (`IndexSettings.max_revisions`, ctags off, one process),
so its shard's branch masks are ceil(N / 64) words a document. Prints per N: documents, the
mask width, the index's size and the masks' share of it, the build time, and the median time
(`--runs` runs, in-process `Searcher`, after one warm-up) of four queries: a common word on the
default branch, the same word on every branch (``rev:*``), one branch's marker
(``rev:b/0007 marker_7``), and every branch's marker on every branch (``rev:* marker_``: every
changed document, each result's branches read from its mask).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from codesearch.index.builder import IndexSettings  # noqa: E402
from codesearch.index.manifest import current_shards  # noqa: E402
from codesearch.index.paths import index_paths  # noqa: E402
from codesearch.index.shard import Shard  # noqa: E402
from codesearch.search.engine import Searcher  # noqa: E402

WORK = os.path.join(HERE, ".work", "branches")

QUERIES = [
    ("word, default branch", "return", 100),
    ("word, rev:*", "rev:* return", 100),
    ("one branch's marker", "rev:b/0007 marker_7", 1000),
    ("every marker, rev:*", "rev:* marker_", 100_000),
]


def source_files(count: int) -> list[tuple[str, bytes]]:
    """The first `count` Python files (1 to 50 KB) of the virtual environment, in path order."""
    site = sysconfig.get_paths()["purelib"]
    out: list[tuple[str, bytes]] = []
    for root, dirs, files in os.walk(site):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            if name.endswith(".py") and 1000 <= os.path.getsize(full) <= 50_000:
                with open(full, "rb") as f:
                    data = f.read()
                if b"\0" not in data:
                    out.append((os.path.relpath(full, site), data))
                    if len(out) == count:
                        return out
    return out


def make_repo(path: str, branches: int, files: list[tuple[str, bytes]], changed: int) -> None:
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "-b", "main", path], check=True)
    out = []
    for k, (_, data) in enumerate(files, 1):
        out.append(b"blob\nmark :%d\ndata %d\n%s\n" % (k, len(data), data))
    main = len(files) + 1
    out.append(b"commit refs/heads/main\nmark :%d\ncommitter B <b@example.com> 1700000000 +0000\ndata 4\nmain\n" % main)
    out.extend(b"M 100644 :%d %s\n" % (k, name.encode()) for k, (name, _) in enumerate(files, 1))
    out.append(b"\n")
    for i in range(1, branches):
        out.append(
            b"commit refs/heads/b/%04d\ncommitter B <b@example.com> %d +0000\ndata 6\nbranch\nfrom :%d\n"
            % (i, 1_700_000_000 + i, main)
        )
        for j in range(changed):
            name, data = files[(i * 7 + j * 13) % len(files)]
            new = data + b"\n# marker_%d\n" % i
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(new), new))
        out.append(b"\n")
    subprocess.run(["git", "-C", path, "fast-import", "--quiet"], input=b"".join(out), check=True)


def measure(branches: int, files: list[tuple[str, bytes]], changed: int, runs: int) -> dict[str, object]:
    repo = os.path.join(WORK, f"repo-{branches}")
    index = os.path.join(WORK, f"index-{branches}")
    make_repo(repo, branches, files, changed)
    shutil.rmtree(index, ignore_errors=True)
    t0 = time.perf_counter()
    stats = index_paths([repo], index, IndexSettings(ctags=False, max_revisions=branches), branches=["b/*"])
    build_s = time.perf_counter() - t0
    shards = current_shards(index)
    docs = words = mask_bytes = size = 0
    revisions = 0
    for p in shards:
        s = Shard(p)
        docs += s.doc_count
        words = max(words, s.branch_words)
        mask_bytes += s.doc_branches.nbytes
        revisions = max(revisions, len(s.repos[0].branches))
        size += os.path.getsize(p)
        s.close()
    assert revisions == branches, (revisions, branches, stats.warnings)
    searcher = Searcher(index)
    times: dict[str, float] = {}
    files_found: dict[str, int] = {}
    try:
        for label, query, matches in QUERIES:
            searcher.search(query, matches=matches)  # warm-up: posting lists, paths
            samples = []
            for _ in range(runs):
                t = time.perf_counter()
                resp = searcher.search(query, matches=matches)
                samples.append(time.perf_counter() - t)
            times[label] = statistics.median(samples) * 1000
            files_found[label] = len(resp["files"])
    finally:
        searcher.close()
    return {
        "branches": branches,
        "words": words,
        "docs": docs,
        "size": size,
        "mask_bytes": mask_bytes,
        "build_s": build_s,
        "times": times,
        "files": files_found,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--branches", default="64,256,1000", help="branch counts, comma-separated")
    ap.add_argument("--files", type=int, default=2000, help="files on main")
    ap.add_argument("--changed", type=int, default=3, help="files each branch changes")
    ap.add_argument("--runs", type=int, default=7, help="timed runs per query")
    args = ap.parse_args()
    os.makedirs(WORK, exist_ok=True)
    files = source_files(args.files)
    print(f"{len(files)} files, {sum(len(d) for _, d in files) / 1e6:.1f} MB on main; load {os.getloadavg()[0]:.1f}")
    rows = [measure(int(n), files, args.changed, args.runs) for n in args.branches.split(",")]
    labels = [label for label, _, _ in QUERIES]
    print()
    head = "| branches | mask words | documents | index MB | masks KB (share) | build s | "
    print(head + " | ".join(f"{x} ms" for x in labels) + " |")
    print("|---:|---:|---:|---:|---:|---:|" + "---:|" * len(labels))
    for r in rows:
        t = r["times"]
        print(
            f"| {r['branches']:,} | {r['words']} | {r['docs']:,} | {r['size'] / 1e6:.2f} | "
            f"{r['mask_bytes'] / 1e3:,.1f} ({100 * r['mask_bytes'] / r['size']:.2f} %) | {r['build_s']:.1f} | "
            + " | ".join(f"{t[x]:.2f}" for x in labels)
            + " |"
        )
    print()
    print("files per query: " + "; ".join(f"{r['branches']}: {r['files']}" for r in rows))
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
