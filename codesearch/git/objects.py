"""A repository's objects: refs resolved to commits, blobs read, objects looked up by name.

`resolve_commit` is the gate every read goes through: it turns a caller's ref (read by
`paths.parse_ref`'s grammar) into a full commit sha, and later commands only ever see that sha.
`ObjectBatch` keeps one ``git cat-file --batch`` process answering object requests one at a
time, for walks that read many objects (a tree listing, an index build) without one process
per object and without loading what they do not ask for.
"""

from __future__ import annotations

import re
from typing import NoReturn

from codesearch.errors import CodesearchError, FileNotFound, InvalidGitRef
from codesearch.git.paths import check_path, check_ref, encode, parse_ref
from codesearch.git.process import Git

__all__ = [
    "BINARY_SNIFF",
    "RESOLVE_TIMEOUT_S",
    "ObjectBatch",
    "is_binary",
    "object_info",
    "read_blob",
    "resolve_commit",
]

#: git's binary test looks at this many leading bytes
BINARY_SNIFF = 8000
#: resolving a ref takes git milliseconds (the grammar bounds the walk); past this, it is a failure
RESOLVE_TIMEOUT_S = 5.0

_SHA = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")


def resolve_commit(git_dir: str, ref: str) -> str:
    """The full sha of the commit `ref` names (``ref^{commit}``: a tag is peeled).

    `ref` must pass `paths.parse_ref`; then git is asked only about the names `RefSpec.candidates`
    lists (``refs/tags/<name>``, ``refs/heads/<name>``, the hex object name, ``HEAD``), each
    with the ref's own bounded ``~N`` / ``^N`` steps, in one ``git cat-file --batch-check``
    under `RESOLVE_TIMEOUT_S`: the first that names a commit wins. Those names reach git on its
    standard input, one a line, never as an argument, and what comes back must be a full sha.

    MalformedGitRef (an InvalidGitRef) for a ref outside the grammar, InvalidGitRef when it
    names no commit; a plain CodesearchError when `git_dir` is not a git repository (a
    server-side problem).
    """
    spec = parse_ref(ref)
    names = [f"{name}{spec.suffix}^{{commit}}" for name in spec.candidates()]
    res = Git.at(git_dir, timeout_s=RESOLVE_TIMEOUT_S).run(
        ["cat-file", "--batch-check=%(objectname)"], stdin="".join(n + "\n" for n in names).encode("utf-8")
    )
    if "not a git repository" in res.stderr:
        raise CodesearchError("the repository's clone is not a git repository")  # 500: damaged, not the caller's fault
    for line in res.stdout.split(b"\n") if res.returncode == 0 else []:
        if _SHA.fullmatch(line):
            return line.decode("ascii")
    if "is ambiguous" in res.stderr:
        raise InvalidGitRef(f"git ref {ref!r} is ambiguous in the repository: give more hex digits or a full name")
    raise InvalidGitRef(f"git ref {ref!r} not found in the repository")


def read_blob(git_dir: str, ref: str, path: str) -> tuple[bytes, str]:
    """The bytes of `path` at `ref` in the repository at `git_dir`, and the commit read.

    InvalidGitRef when `ref` names no commit; FileNotFound when there is no file at `path`.
    """
    check_ref(ref)
    check_path(path)
    commit = resolve_commit(git_dir, ref)
    res = Git.at(git_dir).run(["cat-file", "--batch"], stdin=encode(f"{commit}:{path}") + b"\n")
    header, _, rest = res.stdout.partition(b"\n")
    parts = header.split()
    if res.returncode != 0 or len(parts) != 3 or parts[1] != b"blob":
        raise FileNotFound(f"file {path!r} not found at {ref!r}")
    return rest[: int(parts[2])], commit


def is_binary(data: bytes) -> bool:
    """git's own test: a NUL byte in the first 8000 bytes."""
    return b"\0" in data[:BINARY_SNIFF]


def object_info(git_dir: str, name: str) -> tuple[str, int] | None:
    """(type, size) of the object `name` (a sha, ``<sha>:<path>``, ``<sha>^{tree}``), None when
    there is none."""
    res = Git.at(git_dir).run(["cat-file", "--batch-check"], stdin=encode(name) + b"\n")
    parts = res.stdout.split(b"\n", 1)[0].split(b" ")
    if res.returncode != 0 or len(parts) != 3 or not parts[2].isdigit():
        return None
    return parts[1].decode("ascii", "replace"), int(parts[2])


class ObjectBatch:
    """One ``git cat-file --batch`` process answering object requests one at a time (see the
    module docstring). A failing or timed-out process is a `process.GitFailed`; `timeout_s`
    bounds the process's whole life (see `process.Git`)."""

    def __init__(self, git_dir: str, *, timeout_s: float | None = None):
        self.stream = Git.at(git_dir, timeout_s=timeout_s).stream(["cat-file", "--batch"], stdin=True)

    def get(self, name: bytes) -> tuple[str, bytes, int] | None:
        """(type, content, hash length in bytes) of the object `name`, or None when missing."""
        if not self.stream.write(name + b"\n"):
            self._dead()
        got = self.stream.out.until(b"\n", 4096 + len(name))
        if got is None:
            self._dead()
        header = got[0]
        if header.endswith((b" missing", b" ambiguous")):
            return None
        parts = header.split(b" ")
        if len(parts) != 3 or not parts[2].isdigit():
            self._dead()
        size = int(parts[2])
        data = self.stream.out.exactly(size + 1)
        if len(data) != size + 1:
            self._dead()
        return parts[1].decode("ascii", "replace"), data[:size], len(parts[0]) // 2

    def blob(self, sha: str) -> bytes:
        """The content of the blob `sha` (hex); a CodesearchError when there is no such blob."""
        got = self.get(sha.encode("ascii"))
        if got is None or got[0] != "blob":
            raise CodesearchError(f"blob {sha} is missing from the repository")
        return got[1]

    def _dead(self) -> NoReturn:
        self.stream.finish(stop=True)  # raises on a timeout
        raise self.stream.failed()

    def close(self) -> None:
        """Stop the process (at the end of the work: git exits once its stdin closes)."""
        self.stream.__exit__(None, None, None)

    def __enter__(self) -> ObjectBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.__exit__(*exc)
