"""A repository's objects: refs resolved to commits, blobs read, objects looked up by name.

`resolve_commit` is the gate every read goes through: it turns a caller's ref (read by
`paths.parse_ref`'s grammar) into a full commit sha, and later commands only ever see that sha.

Objects are read by an `ObjectBatch`: persistent ``git cat-file --batch`` / ``--batch-check``
processes answering one request after another, for walks that read many objects (a tree
listing, an index build) without one process per object and without loading what they do not
ask for. The request and answer protocol (a name a line; a ``<sha> <type> <size>`` header, the
content and a newline; ``missing`` / ``ambiguous`` answers) is GitPython's (`git.cmd.Git`'s
`get_object_header` and `get_object_data`), a well-kept library that owns it, instead of a
reader of our own. What GitPython leaves to its caller, `ObjectBatch` adds, so that these
processes keep `process`'s policy like every other git process of codesearch:

* **How git starts**: GitPython would start it with this process's whole environment
  (inherited ``GIT_*`` variables included, which can move the object store or turn tracing on),
  in no session of its own, its stderr a pipe nobody reads. `_CatFile` overrides the method that
  starts a persistent process, so git starts as a `process.Stream`: the sealed environment,
  ``--git-dir``, its own session, stderr to a file, one of the caller's git slots (`slots`).
* **A time limit**: GitPython's persistent processes have none. A batch's `timeout_s` runs from
  its creation; `process`'s watchdog kills git at that deadline, and every request after it fails
  as timed out (`GitFailed`). A hung git cannot hold a search.
* **A dead process**: GitPython keeps the process it started and answers every later request
  from it with an error. When a process that has answered before gives no answer at all (it
  died or was killed since), the request goes once more to a new process; a process that never
  answered, or dies within an answer, fails the request with git's own (scrubbed) message, and
  the next request starts a new one.
* **Errors**: a name git does not find (or GitPython cannot send: not UTF-8, a line feed) is
  ``None``; everything else is a `GitFailed`, from git's scrubbed stderr. GitPython's own
  exception texts (they name folders) never reach a caller.
* **SHA-256**: GitPython's header parser takes only 40-hex object names; `_CatFile` takes 64.
* **Speed**: git's stdout gets a 64 KiB buffer (one read for most objects) and GitPython's
  process handle plain attributes (`_Process`); ``bench/bench_git_reads.py`` compares these reads
  with the hand-written reader they replaced.

(Importing GitPython runs ``git version`` once, outside this policy: no repository, no input.)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from git.cmd import Git as GitCommand  # GitPython

from codesearch.errors import CodesearchError, FileNotFound, InvalidGitRef
from codesearch.git.paths import check_path, check_ref, parse_ref
from codesearch.git.process import Git, GitFailed, Stream

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

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def resolve_commit(git_dir: str, ref: str) -> str:
    """The full sha of the commit `ref` names (``ref^{commit}``: a tag is peeled).

    `ref` must pass `paths.parse_ref`; then git is asked only about the names `RefSpec.candidates`
    lists (``refs/tags/<name>``, ``refs/heads/<name>``, the hex object name, ``HEAD``), each
    with the ref's own bounded ``~N`` / ``^N`` steps, in that order, by one ``git cat-file
    --batch-check`` under `RESOLVE_TIMEOUT_S`: the first that names a commit wins. Those names
    reach git on its standard input, one a line, never as an argument, and what comes back must
    be a full sha.

    MalformedGitRef (an InvalidGitRef) for a ref outside the grammar, InvalidGitRef when it
    names no commit; a plain CodesearchError when `git_dir` is not a git repository (a
    server-side problem).
    """
    spec = parse_ref(ref)
    try:
        with ObjectBatch(git_dir, timeout_s=RESOLVE_TIMEOUT_S) as batch:
            for name in spec.candidates():
                got = batch.header(f"{name}{spec.suffix}^{{commit}}")
                if got is not None and got[1] == "commit" and _SHA.fullmatch(got[0]):
                    return got[0]
            ambiguous = "is ambiguous" in batch.stderr()  # (git answers "missing" and says why on stderr)
    except GitFailed as e:
        if "not a git repository" in e.stderr:  # 500: the clone is damaged, not the caller's fault
            raise CodesearchError("the repository's clone is not a git repository") from None
        raise
    if ambiguous:
        raise InvalidGitRef(f"git ref {ref!r} is ambiguous in the repository: give more hex digits or a full name")
    raise InvalidGitRef(f"git ref {ref!r} not found in the repository")


def read_blob(git_dir: str, ref: str, path: str) -> tuple[bytes, str]:
    """The bytes of `path` at `ref` in the repository at `git_dir`, and the commit read.

    InvalidGitRef when `ref` names no commit; FileNotFound when there is no file at `path` (or
    git cannot read it: a damaged object; a timeout stays a `GitFailed`).
    """
    check_ref(ref)
    check_path(path)
    commit = resolve_commit(git_dir, ref)
    try:
        with ObjectBatch(git_dir) as batch:
            got = batch.get(f"{commit}:{path}")
    except GitFailed as e:
        if e.timed_out:
            raise
        got = None
    if got is None or got[0] != "blob":
        raise FileNotFound(f"file {path!r} not found at {ref!r}")
    return got[1], commit


def is_binary(data: bytes) -> bool:
    """git's own test: a NUL byte in the first 8000 bytes."""
    return b"\0" in data[:BINARY_SNIFF]


def object_info(git_dir: str, name: str) -> tuple[str, int] | None:
    """(type, size) of the object `name` (a sha, ``<sha>:<path>``, ``<sha>^{tree}``), None when
    there is none (or git cannot read it; a timeout is a `GitFailed`)."""
    try:
        with ObjectBatch(git_dir) as batch:
            got = batch.header(name)
    except GitFailed as e:
        if e.timed_out:
            raise
        return None
    return None if got is None else (got[1], got[2])


class _Ended(Exception):
    """git's stdout ended where an answer was due: the process is gone (killed, timed out, failed)."""


def _text(value: str | bytes) -> str:
    """An answer field from GitPython as text (it hands out the bytes it read, typed as str)."""
    return value.decode("ascii", "replace") if isinstance(value, bytes) else value


def _raw(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


#: the Python buffer of git's stdout: an answer of up to 64 KiB (what the pipe holds) in one read
_BUFSIZE = 64 * 1024

_T = TypeVar("_T")


class _Process(GitCommand.AutoInterrupt):
    """GitPython's handle of a persistent process, with git's stdin and stdout as attributes
    (GitPython's reaches them through ``__getattr__``, twice a request: a few µs an object)."""

    __slots__ = ("stdin", "stdout")

    def __init__(self, stream: Stream) -> None:
        super().__init__(stream.proc, stream.args)
        self.stdin = stream.proc.stdin
        self.stdout = stream.proc.stdout


class _CatFile(GitCommand):
    """GitPython's git command for one batch, whose persistent ``cat-file`` processes start as
    `process.Stream`s of `runner` (see the module docstring)."""

    # GitPython's Git looks up every attribute through a hook of its own (a warning for a setting
    # this class never reads, USE_SHELL): eight times a request. Plain lookup instead.
    __getattribute__ = object.__getattribute__

    def __init__(self, runner: Git, limit: float) -> None:
        super().__init__()
        self._runner = runner
        self._limit = limit
        self._streams: dict[str, tuple[Stream, _Process]] = {}
        self._reused = False  # whether the last request went to a process that had answered before

    def _get_persistent_cmd(
        self, attr_name: str, cmd_name: str, *args: object, **kwargs: Any
    ) -> GitCommand.AutoInterrupt:
        """The process GitPython asks for by `attr_name` (``cat_file_all``: ``--batch``,
        ``cat_file_header``: ``--batch-check``), started on the first request."""
        have = self._streams.get(attr_name)
        self._reused = have is not None
        if have is not None:
            return have[1]
        argv = [cmd_name.replace("_", "-"), *self.transform_kwargs(**kwargs), *(str(a) for a in args)]
        with self._bounded():
            stream = self._runner.stream(argv, stdin=True, bufsize=_BUFSIZE)
        process = _Process(stream)
        self._streams[attr_name] = (stream, process)
        return process

    def _parse_object_header(self, header_line: str) -> tuple[str, str, int]:
        if not _raw(header_line).endswith(b"\n"):  # (an answer is a whole line; GitPython would read a bad name)
            raise _Ended
        tokens = header_line.split()
        if len(tokens) == 3 and len(tokens[0]) == 64:  # a SHA-256 repository
            return tokens[0], tokens[1], int(tokens[2])
        return super()._parse_object_header(header_line)

    def ask(self, attr_name: str, request: Callable[[str], _T], name: str) -> _T:
        """`request(name)` (a GitPython call) to the process `attr_name`. When a process that has
        answered before gives no answer now (it died or was killed since), the request goes once
        more to a new one; a process that never answered, or a time-out, is a `GitFailed`."""
        while True:
            try:
                return request(name)
            except (_Ended, OSError) as e:
                again = self._reused
                error = self.failed(attr_name, e)
                if not again or error is e:
                    raise error from None

    def failed(self, attr_name: str, error: Exception) -> Exception:
        """The error of the process `attr_name`, which stopped answering (`error`): stopped,
        reaped, and its `GitFailed` (timed out, or git's exit status and stderr). `error` itself
        when git did not start."""
        if attr_name not in self._streams:
            return error
        stream = self._streams[attr_name][0]
        self.end(attr_name)
        return stream.failed()

    def end(self, attr_name: str) -> None:
        """Stop and reap the process `attr_name`; a `GitFailed` when its time limit killed it."""
        stream, process = self._streams.pop(attr_name)
        process.proc = None  # (GitPython's finalizer has nothing left to do)
        with self._bounded():
            stream.finish(stop=True)

    @contextlib.contextmanager
    def _bounded(self) -> Iterator[None]:
        """A time-out named by the batch's limit (a process started late had less of it left)."""
        try:
            yield
        except GitFailed as e:
            if not e.timed_out:
                raise
            raise self._runner.timed_out(e.command or "cat-file", self._limit) from None

    def stderr(self) -> str:
        return "".join(stream.stderr() for stream, _ in self._streams.values())

    def close(self) -> None:
        for attr_name in list(self._streams):
            self.end(attr_name)


class ObjectBatch:
    """Persistent ``git cat-file`` processes of one repository answering object requests one at a
    time (see the module docstring), started on the first request that needs them. `timeout_s`
    bounds the whole batch (None: `process.GIT_TIMEOUT_S`; ``math.inf`` for the indexer's reader,
    bounded by its job's own limit). Not thread-safe: one batch per thread."""

    def __init__(self, git_dir: str, *, timeout_s: float | None = None):
        runner = Git.at(git_dir, timeout_s=timeout_s)
        limit = runner.limit()
        if not math.isinf(limit):
            runner = dataclasses.replace(runner, deadline=time.monotonic() + limit)
        self._git = _CatFile(runner, limit)

    def get(self, name: str) -> tuple[str, bytes, int] | None:
        """(type, content, hash length in bytes) of the object `name`, or None when missing."""
        try:
            sha, kind, size, data = self._git.ask("cat_file_all", self._git.get_object_data, name)
        except ValueError:
            return None
        if len(data) != size:  # (git died within the content)
            raise self._git.failed("cat_file_all", _Ended())
        return _text(kind), data, len(sha) // 2

    def header(self, name: str) -> tuple[str, str, int] | None:
        """(full sha, type, size) of the object `name`, or None when missing; reads no content."""
        try:
            sha, kind, size = self._git.ask("cat_file_header", self._git.get_object_header, name)
        except ValueError:
            return None
        return _text(sha), _text(kind), size

    def blob(self, sha: str) -> bytes:
        """The content of the blob `sha` (hex); a CodesearchError when there is no such blob."""
        got = self.get(sha)
        if got is None or got[0] != "blob":
            raise CodesearchError(f"blob {sha} is missing from the repository")
        return got[1]

    def stderr(self) -> str:
        """What the live processes wrote to stderr (scrubbed): git's reasons for a ``missing``."""
        return self._git.stderr()

    def close(self) -> None:
        """Stop the processes (at the end of the work); a `GitFailed` when the time limit had
        killed one."""
        self._git.close()

    def __enter__(self) -> ObjectBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
