"""Source trees as git repositories with one commit, for the benchmarks (stdlib only).

bench/bench_scale.py cuts the corpus into N work-tree repositories with ``git add``/``commit``;
bench/corpus_large.py writes thousands of bare repositories, some of gigabytes, with
``git fast-import``: one process that streams every file into a single pack (no loose
objects, no work tree, no index file), which is several times faster than ``git add`` and
needs no second copy of the files. Both list files the same way and commit with the same
author, committer and dates, so that the same files give the same commit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_AUTHOR_DATE": "2024-11-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2024-11-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}
#: GIT_ENV's identity and date as ``git fast-import`` takes them (raw date format).
_IDENT = b"bench <bench@example.com> 1730419200 +0000"


@dataclass
class CorpusFile:
    rel: str  # path below the directory the listing was made from, "/"-separated
    size: int


def tree_files(root: Path, under: str = "") -> list[CorpusFile]:
    """Every regular file below `root` (no links, nothing in a ``.git`` folder: git refuses such
    paths), in sorted path order, its path below `root` prefixed with `under`."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d.lower() != ".git")
        rel_dir = os.path.relpath(dirpath, root)
        prefix = under if rel_dir == "." else f"{under}{rel_dir.replace(os.sep, '/')}/"
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            if fn.lower() == ".git" or os.path.islink(full) or not os.path.isfile(full):
                continue
            out.append(CorpusFile(prefix + fn, os.path.getsize(full)))
    return out


def corpus_files(project_dirs: list[Path]) -> list[CorpusFile]:
    """Every regular file of the projects, project by project, in sorted path order (so that a
    run of consecutive files is a run of neighbouring directories, as real repositories are);
    paths start with the project's directory name."""
    return [f for proj in project_dirs for f in tree_files(proj, proj.name + "/")]


def quote_path(path: str) -> bytes:
    """`path` as a C-style quoted string, which ``git fast-import`` reads whatever the name holds
    (spaces, quotes, newlines, bytes that are not UTF-8: the file system's bytes are kept)."""
    out = bytearray(b'"')
    for b in os.fsencode(path):
        if b in (0x22, 0x5C):  # " and \
            out += b"\\" + bytes([b])
        elif b == 0x0A:
            out += b"\\n"
        elif b < 0x20 or b == 0x7F:
            out += b"\\%03o" % b
        else:
            out.append(b)
    out += b'"'
    return bytes(out)


def fast_import(repo: Path, base: Path, files: Iterable[CorpusFile], message: str, compression: int = 1) -> int:
    """A bare repository at `repo` (replaced if there) whose branch ``main`` (its HEAD) has one
    commit holding `files`, read from `base` / file.rel. zlib level `compression` (1: fast,
    the pack is still about a quarter of the source). Returns the number of files committed,
    checked against the commit's tree."""
    if repo.exists():
        shutil.rmtree(repo)
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo)], check=True, env=env)
    level = str(compression)
    cmd = [
        "git",
        "-C",
        str(repo),
        "-c",
        f"core.compression={level}",
        "-c",
        f"pack.compression={level}",
        "fast-import",
        "--quiet",
        "--done",
        "--date-format=raw",
    ]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, env=env)
    assert proc.stdin is not None
    count = 0
    try:
        w = proc.stdin
        msg = message.encode()
        w.write(b"commit refs/heads/main\nauthor %s\ncommitter %s\ndata %d\n%s\n" % (_IDENT, _IDENT, len(msg), msg))
        for f in files:
            with open(base / f.rel, "rb") as src:
                data = src.read()
            w.write(b"M 100644 inline %s\ndata %d\n" % (quote_path(f.rel), len(data)))
            w.write(data)
            w.write(b"\n")
            count += 1
        w.write(b"\ndone\n")
        w.close()
    except BrokenPipeError:
        pass  # fast-import stopped: its exit status says why
    if proc.wait() != 0:
        raise SystemExit(f"{repo}: git fast-import failed (exit {proc.returncode})")
    listed = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "-r", "-z", "--name-only", "main"], check=True, env=env, capture_output=True
    ).stdout.count(b"\0")
    if listed != count:
        raise SystemExit(f"{repo}: committed {listed} files, expected {count}")
    return count
