#!/usr/bin/env python3
"""Git reads before and after GitPython (issue 26, item 5): codesearch's old hand-written
``git cat-file --batch`` reader against `codesearch.git.objects` (GitPython's persistent cat-file
processes, started and bounded by `codesearch.git.process`), measured in one run, interleaved
old, new, old, new … so both see the same load.

Usage:
    nice -n 10 .venv/bin/python bench/bench_git_reads.py
    nice -n 10 .venv/bin/python bench/bench_git_reads.py --runs 7 --history-repo PATH/TO/A/CLONE.git

What is timed (wall and CPU seconds, this process and its git children; medians of `--runs`):

(a) every blob of HEAD's tree, read through one batch per repository: ~20 repositories of the
    large corpus (`bench/corpus_large.py`: bare repositories of Debian source packages, real
    third-party code) of 5-20 MB each, ~200 MB in all, and one big one (`--big`);
(b) an index build of the ~20 (``index_paths``, one process so that the reader patched in is the
    one used, no ctags, no compaction): the old reader patched into `codesearch.index.sources`;
(c) single reads as the API and the pages make them: resolve a ref, read a file, look an object
    up, list a tree two levels deep, a page of a file's commits, a blame; on the big repository
    and on `--history-repo` (a repository with a long history, e.g. a clone of GitPython's own:
    the corpus's repositories have one commit each). The old functions are patched into
    `codesearch.git.trees` / `history` / `commits` for the old runs.

THE BASELINE (`Old*`, `old_*` below) is the code of codesearch/git/objects.py before GitPython
(commit 47792ed), copied here unchanged but for two marked lines (names may come as text, as the
new `trees.list_tree` passes them), with the stream reader's ``exactly`` that went with it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import NoReturn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from codesearch.errors import CodesearchError, FileNotFound, InvalidGitRef  # noqa: E402
from codesearch.git import commits, history, objects, trees  # noqa: E402
from codesearch.git.paths import check_path, check_ref, encode, parse_ref  # noqa: E402
from codesearch.git.process import Git  # noqa: E402

# ---------------------------------------------------------------------- THE BASELINE (old code)

RESOLVE_TIMEOUT_S = 5.0
_SHA = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")


class OldReader:
    """process.Reader as it was (``until`` and ``exactly``)."""

    def __init__(self, f):
        self.f = f
        self.buf = b""
        self.pos = 0
        self.eof = False

    def _fill(self) -> None:
        chunk = self.f.read1(65536)
        if chunk:
            self.buf = self.buf[self.pos :] + chunk
        else:
            self.buf, self.eof = self.buf[self.pos :], True
        self.pos = 0

    def until(self, sep: bytes, limit: int, *, skip_rest: bool = True):
        out = bytearray()
        got = False
        while True:
            i = self.buf.find(sep, self.pos)
            end = i if i >= 0 else len(self.buf)
            if end > self.pos:
                got = True
                room = limit - len(out)
                if end - self.pos > room:
                    out += self.buf[self.pos : self.pos + room]
                    self.pos += room
                    if skip_rest:
                        self._skip(sep)
                    return bytes(out), True
                out += self.buf[self.pos : end]
            if i >= 0:
                self.pos = i + 1
                return bytes(out), False
            self.pos = len(self.buf)
            if self.eof:
                return (bytes(out), False) if got else None
            self._fill()

    def _skip(self, sep: bytes) -> None:
        while True:
            i = self.buf.find(sep, self.pos)
            if i >= 0:
                self.pos = i + 1
                return
            self.pos = len(self.buf)
            if self.eof:
                return
            self._fill()

    def exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            if self.pos >= len(self.buf):
                if self.eof:
                    break
                self._fill()
                continue
            take = min(n - len(out), len(self.buf) - self.pos)
            out += self.buf[self.pos : self.pos + take]
            self.pos += take
        return bytes(out)


def old_resolve_commit(git_dir: str, ref: str) -> str:
    spec = parse_ref(ref)
    names = [f"{name}{spec.suffix}^{{commit}}" for name in spec.candidates()]
    res = Git.at(git_dir, timeout_s=RESOLVE_TIMEOUT_S).run(
        ["cat-file", "--batch-check=%(objectname)"], stdin="".join(n + "\n" for n in names).encode("utf-8")
    )
    if "not a git repository" in res.stderr:
        raise CodesearchError("the repository's clone is not a git repository")
    for line in res.stdout.split(b"\n") if res.returncode == 0 else []:
        if _SHA.fullmatch(line):
            return line.decode("ascii")
    if "is ambiguous" in res.stderr:
        raise InvalidGitRef(f"git ref {ref!r} is ambiguous in the repository: give more hex digits or a full name")
    raise InvalidGitRef(f"git ref {ref!r} not found in the repository")


def old_read_blob(git_dir: str, ref: str, path: str) -> tuple[bytes, str]:
    check_ref(ref)
    check_path(path)
    commit = old_resolve_commit(git_dir, ref)
    res = Git.at(git_dir).run(["cat-file", "--batch"], stdin=encode(f"{commit}:{path}") + b"\n")
    header, _, rest = res.stdout.partition(b"\n")
    parts = header.split()
    if res.returncode != 0 or len(parts) != 3 or parts[1] != b"blob":
        raise FileNotFound(f"file {path!r} not found at {ref!r}")
    return rest[: int(parts[2])], commit


def old_object_info(git_dir: str, name: str) -> tuple[str, int] | None:
    res = Git.at(git_dir).run(["cat-file", "--batch-check"], stdin=encode(name) + b"\n")
    parts = res.stdout.split(b"\n", 1)[0].split(b" ")
    if res.returncode != 0 or len(parts) != 3 or not parts[2].isdigit():
        return None
    return parts[1].decode("ascii", "replace"), int(parts[2])


class OldObjectBatch:
    def __init__(self, git_dir: str, *, timeout_s: float | None = None):
        self.stream = Git.at(git_dir, timeout_s=timeout_s).stream(["cat-file", "--batch"], stdin=True)
        self.out = OldReader(self.stream.proc.stdout)  # (was self.stream.out, the same reader)

    def get(self, name):
        if isinstance(name, str):  # MARKED: the new trees.list_tree passes names as text
            name = encode(name)
        if not self.stream.write(name + b"\n"):
            self._dead()
        got = self.out.until(b"\n", 4096 + len(name))
        if got is None:
            self._dead()
        header = got[0]
        if header.endswith((b" missing", b" ambiguous")):
            return None
        parts = header.split(b" ")
        if len(parts) != 3 or not parts[2].isdigit():
            self._dead()
        size = int(parts[2])
        data = self.out.exactly(size + 1)
        if len(data) != size + 1:
            self._dead()
        return parts[1].decode("ascii", "replace"), data[:size], len(parts[0]) // 2

    def blob(self, sha: str) -> bytes:
        got = self.get(sha.encode("ascii"))
        if got is None or got[0] != "blob":
            raise CodesearchError(f"blob {sha} is missing from the repository")
        return got[1]

    def _dead(self) -> NoReturn:
        self.stream.finish(stop=True)
        raise self.stream.failed()

    def close(self) -> None:
        self.stream.__exit__(None, None, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.__exit__(*exc)


# ---------------------------------------------------------------------- the two sides

#: (module, name, old value) patched in for the old runs; the new values are the modules' own
OLD = [
    (trees, "ObjectBatch", OldObjectBatch),
    (trees, "object_info", old_object_info),
    (trees, "resolve_commit", old_resolve_commit),
    (history, "object_info", old_object_info),
    (history, "resolve_commit", old_resolve_commit),
    (commits, "resolve_commit", old_resolve_commit),
]
NEW = [(module, name, getattr(module, name)) for module, name, _ in OLD]


def use(side: str) -> None:
    """Patch the old functions in (or put the new ones back), and the index build's reader."""
    from codesearch.index import sources

    for module, name, value in OLD if side == "old" else NEW:
        setattr(module, name, value)
    sources.ObjectBatch = OldObjectBatch if side == "old" else objects.ObjectBatch


def batch_class(side: str):
    return OldObjectBatch if side == "old" else objects.ObjectBatch


def read_blob(side: str):
    return old_read_blob if side == "old" else objects.read_blob


# ---------------------------------------------------------------------- measuring


def cpu_seconds() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    c0, t0 = cpu_seconds(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, cpu_seconds() - c0


def interleaved(runs: int, work: Callable[[str], object]) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) of `runs` runs of `work(side)` per side, run old, new, new, old, … (ABBA
    pairs, so neither side always goes first), after one warm-up of each."""
    for side in ("old", "new"):
        use(side)
        work(side)
    got: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
    for i in range(runs):
        for side in ("old", "new") if i % 2 == 0 else ("new", "old"):
            use(side)
            got[side].append(timed(lambda side=side: work(side)))
    use("new")
    return {s: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for s, v in got.items()}


# ---------------------------------------------------------------------- the repositories


def pick(repos_dir: str, count: int, mb: float, big: str) -> tuple[list[dict], dict]:
    """`count` repositories of about `mb` MB in all (evenly spread over those of 5-20 MB), and `big`."""
    manifest = os.path.join(os.path.dirname(repos_dir.rstrip("/")), "manifest.json")
    with open(manifest) as f:
        repos = json.load(f)["repos"]
    target = mb * 1e6 / count
    band = sorted((r for r in repos if 0.5 * target <= r["bytes"] <= 2 * target), key=lambda r: r["name"])
    step = max(1, len(band) // count)
    chosen = band[::step][:count]
    (big_repo,) = [r for r in repos if r["name"] == big]
    return chosen, big_repo


def head_blobs(git_dir: str) -> list[str]:
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", "-z", "HEAD"], capture_output=True, check=True
    ).stdout
    return [meta.split()[2].decode() for meta, _, _ in (r.partition(b"\t") for r in out.split(b"\0") if r)
            if meta.split()[1] == b"blob"]


def read_all(side: str, listing: list[tuple[str, list[str]]]) -> int:
    total = 0
    for git_dir, shas in listing:
        batch = batch_class(side)(git_dir, timeout_s=float("inf"))
        try:
            for sha in shas:
                total += len(batch.blob(sha))
        finally:
            batch.close()
    return total


def build(side: str, paths: list[str]) -> None:
    from codesearch.index.builder import IndexSettings
    from codesearch.index.paths import index_paths

    settings = IndexSettings()
    settings.ctags = False
    out = tempfile.mkdtemp(prefix="bench-git-reads-")
    try:
        index_paths(paths, out, settings, compact=False, jobs=1)
    finally:
        shutil.rmtree(out)


def single_reads(git_dir: str, files: list[str], times: int) -> list[tuple[str, Callable[[str], object]]]:
    """The single reads of (c) on `git_dir`: each repeated `times` times per file."""

    def each(fn):
        def work(side):
            for _ in range(times):
                for path in files:
                    fn(side, path)

        return work

    return [
        ("resolve a ref (HEAD)", each(lambda side, p: trees.resolve_commit(git_dir, "HEAD"))),
        ("read a file at HEAD (read_blob)", each(lambda side, p: read_blob(side)(git_dir, "HEAD", p))),
        ("look an object up (object_info)", each(lambda side, p: trees.object_info(git_dir, f"HEAD:{p}"))),
        ("list the tree, 2 levels (list_tree)", each(lambda side, p: trees.list_tree(git_dir, "HEAD", depth=2))),
        ("a page of a file's commits (list_commits)",
         each(lambda side, p: commits.list_commits(git_dir, "HEAD", path=p, per_page=50))),
        ("blame", each(lambda side, p: history.blame(git_dir, "HEAD", p))),
    ]


def some_files(git_dir: str, n: int) -> list[str]:
    """`n` text files of 2-50 KB at HEAD, spread over the tree (the same every run)."""
    out = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "-l", "-z", "HEAD"],
                         capture_output=True, check=True).stdout
    cands = []
    for rec in out.split(b"\0"):
        meta, _, path = rec.partition(b"\t")
        parts = meta.split()
        sized = len(parts) == 4 and parts[1] == b"blob" and parts[3].isdigit() and 2000 <= int(parts[3]) <= 50_000
        if sized and path.endswith((b".py", b".c", b".go", b".rs", b".js", b".md", b".txt", b".h", b".java")):
            cands.append(path.decode("utf-8", "replace"))
    cands.sort()
    step = max(1, len(cands) // n)
    return cands[::step][:n]


# ---------------------------------------------------------------------- main


def row(what: str, got: dict[str, tuple[float, float]], unit: float = 1.0, fmt: str = "{:.3f}") -> str:
    (ow, oc), (nw, nc) = got["old"], got["new"]
    return (f"| {what} | {fmt.format(ow * unit)} | {fmt.format(nw * unit)} | {nw / ow:.2f}× | "
            f"{fmt.format(oc * unit)} | {fmt.format(nc * unit)} | {nc / oc:.2f}× |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", default="/work/corpus-large/repos", help="bench/corpus_large.py's repositories")
    ap.add_argument("--count", type=int, default=20, help="repositories for (a) and (b)")
    ap.add_argument("--mb", type=float, default=200, help="their size in all, about")
    ap.add_argument("--big", default="ansible-10.6.0", help="the big repository of (a) and (c)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--history-repo", help="a git directory with a long history for (c)")
    ap.add_argument("--parts", default="abc", help="which of (a), (b), (c) to run, e.g. 'a' or 'bc'")
    args = ap.parse_args()

    import git as gitpython

    chosen, big = pick(args.repos, args.count, args.mb, args.big)
    listing = [(r["path"], head_blobs(r["path"])) for r in chosen]
    big_listing = [(big["path"], head_blobs(big["path"]))]
    mb = sum(r["bytes"] for r in chosen) / 1e6
    git_version = subprocess.run(["git", "version"], capture_output=True, text=True).stdout.split()[-1]
    print(f"GitPython {gitpython.__version__}, git {git_version}; "
          f"{args.runs} runs a side, interleaved; load average {os.getloadavg()[0]:.2f}")
    print(f"(a)/(b): {len(chosen)} repositories, {mb:.1f} MB, {sum(len(s) for _, s in listing):,} blobs: "
          + ", ".join(r["name"] for r in chosen))
    print(f"big: {big['name']}, {big['bytes'] / 1e6:.1f} MB, {len(big_listing[0][1]):,} blobs\n")

    head = ("| what | old wall | new wall | new ÷ old | old CPU | new CPU | new ÷ old |\n"
            "|---|---:|---:|---:|---:|---:|---:|")
    if "a" in args.parts:
        print("(a) every blob at HEAD through one batch per repository, seconds\n")
        print(head)
        print(row(f"{len(chosen)} repositories, {mb:.0f} MB", interleaved(args.runs, lambda s: read_all(s, listing))))
        print(row(f"{big['name']}, {big['bytes'] / 1e6:.0f} MB",
                  interleaved(args.runs, lambda s: read_all(s, big_listing))), flush=True)

    if "b" in args.parts:
        print("\n(b) index build of the same repositories (one process, no ctags), seconds\n")
        print(head)
        paths = [r["path"] for r in chosen]
        print(row(f"{len(chosen)} repositories, {mb:.0f} MB", interleaved(args.runs, lambda s: build(s, paths))),
              flush=True)

    if "c" not in args.parts:
        return
    print("\n(c) single reads, milliseconds per call (each call a fresh batch, as the API makes them)\n")
    print(head)
    targets = [(big["name"], big["path"])]
    if args.history_repo:
        n = subprocess.run(["git", "--git-dir", args.history_repo, "rev-list", "--count", "HEAD", "--"],
                           capture_output=True, text=True, check=True).stdout.strip()
        targets.append((f"{os.path.basename(os.path.dirname(args.history_repo.rstrip('/')))} ({n} commits)",
                        args.history_repo))
    for label, git_dir in targets:
        files = some_files(git_dir, 5)
        for what, work in single_reads(git_dir, files, times=4):
            per_call = 1000 / (4 * len(files))
            print(row(f"{label}: {what}", interleaved(args.runs, work), unit=per_call, fmt="{:.2f}"), flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
