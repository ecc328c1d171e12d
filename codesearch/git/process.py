"""The one place codesearch runs git: every git process of the service, the indexer and the
mirrors starts here, with one environment, one time limit and one way of reporting failures.

Why one runner: git reads configuration, credentials and options from many places (inherited
``GIT_*`` variables, the user's and the system's config files, credential helpers, a terminal
it can prompt on). A process that depends on the account the service runs under behaves
differently from one machine to the next, can hang on a prompt, or prints a token into an
error message. Each rule below is applied to every git process, so no caller can forget one.

* **Environment** (`environment`): inherited ``GIT_*`` variables are dropped except the
  transport set-up an operator may rely on (`KEEP_ENV`: ssh command, CA files, proxy); no
  system or user config file is read (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``);
  no prompt (``GIT_TERMINAL_PROMPT=0``, a failing ``GIT_ASKPASS``/``SSH_ASKPASS``, no
  credential helper); C locale, so messages are git's English ones that callers match. Extra
  configuration (`PROTECTIVE_CONFIG` and a caller's, such as an ``Authorization`` header) goes
  through ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n``: never on the
  command line, where ``ps`` would show it.
* **Time limit**: every call has one (`GIT_TIMEOUT_S` unless the caller gives another, and
  never past the caller's `deadline`; only the indexer's object reader, which lives as long as
  a build, leaves it to the index job's own time limit). git runs in its own session, so on a timeout the whole
  process group (``git-remote-https``, ``index-pack`` …) is killed, and no process has a
  terminal to prompt on. Streaming readers (`Stream`) are killed by one watchdog thread.
* **Errors**: a failure is a `GitFailed` (a `codesearch.errors.GitError`: HTTP 500, not the
  caller's fault) whose message is ``git <command> failed: <git's first line>`` or ``git timed
  out after …``. Everything git wrote is passed through the runner's `Scrubber` first: secrets
  become ``***``, credentials in URLs and ``Authorization`` headers are removed, and private
  folders are written in public terms (a repository's git directory is "the repository").
* **Slots**: in a process that serves callers, each git process run for a caller takes one of
  the caller's few slots first (`codesearch.git.slots`), so no caller's reads can take the
  whole node.
* **Repository commands** (``Git(git_dir=…)``) run as ``git -c safe.directory=<dir> --git-dir
  <dir> …``: never a shell, never a working tree, never the current directory's repository.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from codesearch.errors import GitFailed
from codesearch.git import slots
from codesearch.redaction import Scrubber

__all__ = [
    "GIT_TIMEOUT_S",
    "KEEP_ENV",
    "PROTECTIVE_CONFIG",
    "Git",
    "GitFailed",
    "Reader",
    "Result",
    "Scrubber",
    "Stream",
    "environment",
    "first_line",
]

#: the time limit of one git call unless its caller gives another
GIT_TIMEOUT_S = 30.0
#: stderr kept from a streaming process (the rest is not read)
_MAX_STDERR = 64 * 1024

#: Inherited GIT_* variables that survive (transport set-up an operator may rely on); every other
#: GIT_* variable (GIT_DIR, GIT_CONFIG_*, GIT_TRACE_CURL, GIT_ASKPASS …) is dropped.
KEEP_ENV = (
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_NO_VERIFY",
    "GIT_PROXY_COMMAND",
    "GIT_PROXY_SSL_CAINFO",
    "GIT_HTTP_USER_AGENT",
    "GIT_EXEC_PATH",
)

#: Configuration every git process gets: no credential helper or askpass program, no background
#: gc, no local or ext:: transports, credentials in a URL refused, no inherited extra header.
PROTECTIVE_CONFIG: tuple[tuple[str, str], ...] = (
    ("credential.helper", ""),
    ("credential.interactive", "false"),
    ("core.askPass", ""),
    ("gc.autoDetach", "false"),
    ("maintenance.autoDetach", "false"),
    ("protocol.file.allow", "never"),
    ("protocol.ext.allow", "never"),
    ("transfer.credentialsInUrl", "die"),
    ("http.extraHeader", ""),
)


def environment(config: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    """The environment of a git process: this process's, with the rules of the module docstring,
    and `PROTECTIVE_CONFIG` then `config` as ``GIT_CONFIG_*`` entries."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in KEEP_ENV}
    failing = shutil.which("false") or "/bin/false"
    entries = (*PROTECTIVE_CONFIG, *config)
    env.update(
        {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": failing,
            "SSH_ASKPASS": failing,
            "GCM_INTERACTIVE": "never",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "LC_ALL": "C",
            "LANGUAGE": "C",
            "GIT_CONFIG_COUNT": str(len(entries)),
        }
    )
    for i, (key, value) in enumerate(entries):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def first_line(stderr: str) -> str:
    """The first non-empty line of git's stderr without its ``fatal:``/``error:`` label."""
    for line in stderr.splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("fatal: ").removeprefix("error: ")
    return "no message"


def _subcommand(args: list[str]) -> str:
    """The git subcommand of `args` (after any ``-c key=value`` and ``--git-dir <dir>``)."""
    i = 0
    while i < len(args) and args[i] in ("-c", "--git-dir", "-C"):
        i += 2
    return args[i] if i < len(args) else "git"


@dataclass(frozen=True)
class Result:
    """A finished git call: its exit status, stdout (bytes) and stderr (scrubbed text)."""

    returncode: int
    stdout: bytes
    stderr: str


@dataclass(frozen=True)
class Git:
    """How to run git for one caller (see the module docstring).

    `git_dir`: the repository every command runs on (None for ``clone`` and other commands that
    name their own); `cwd`: the folder git starts in (a work tree, for the few commands that
    write one); `config`: extra ``GIT_CONFIG_*`` entries; `scrubber`: applied to git's
    output before it reaches a message (a `git_dir` is always written "the repository" unless
    the scrubber names it otherwise); `timeout_s`: the time limit of each call (None:
    `GIT_TIMEOUT_S` as it is when the call starts; ``math.inf`` for a process that lives as long
    as a piece of work bounded elsewhere, such as the indexer's object reader, bounded by its
    job's time limit); `deadline`: a ``time.monotonic()`` value no call may run past (for a job
    of several commands)."""

    git_dir: str | None = None
    cwd: str | None = None
    config: tuple[tuple[str, str], ...] = ()
    scrubber: Scrubber = field(default_factory=Scrubber)
    timeout_s: float | None = None
    deadline: float | None = None

    @classmethod
    def at(cls, git_dir: str, *, timeout_s: float | None = None) -> Git:
        """The runner of read-only commands on the repository at `git_dir`."""
        return cls(git_dir=git_dir, scrubber=Scrubber.hiding({git_dir: "the repository"}), timeout_s=timeout_s)

    def argv(self, args: list[str]) -> list[str]:
        if self.git_dir is None:
            return ["git", *args]
        return ["git", "-c", f"safe.directory={self.git_dir}", "--git-dir", self.git_dir, *args]

    def env(self) -> dict[str, str]:
        return environment(self.config)

    def limit(self) -> float:
        """Seconds the next call may take; a `GitFailed` (timed out) when the deadline has passed."""
        limit = GIT_TIMEOUT_S if self.timeout_s is None else self.timeout_s
        if self.deadline is not None:
            limit = min(limit, self.deadline - time.monotonic())
            if limit <= 0:
                raise self.timed_out("git", 0)
        return limit

    def timed_out(self, command: str, limit: float) -> GitFailed:
        where = " reading the repository" if self.git_dir is not None else ""
        return GitFailed(f"git timed out after {limit:g}s{where}", command=command, timed_out=True)

    def failed(self, args: list[str], returncode: int | None, stderr: str) -> GitFailed:
        """The `GitFailed` of `args` having failed with (scrubbed) `stderr`."""
        command = _subcommand(args)
        return GitFailed(
            f"git {command} failed: {first_line(stderr)}", command=command, returncode=returncode, stderr=stderr
        )

    def run(self, args: list[str], *, stdin: bytes | None = None, check: bool = False) -> Result:
        """Run git with `args` to completion. With `check`, a non-zero exit is a `GitFailed`;
        a timeout always is."""
        limit = self.limit()
        with slots.hold():
            proc = subprocess.Popen(
                self.argv(args),
                env=self.env(),
                start_new_session=True,
                cwd=self.cwd,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            try:
                out, err = proc.communicate(stdin, timeout=None if math.isinf(limit) else limit)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise self.timed_out(_subcommand(args), limit) from None
            except BaseException:
                _kill_group(proc)
                raise
        result = Result(proc.returncode, out, self.scrubber(err.decode("utf-8", "replace")))
        if check and result.returncode != 0:
            raise self.failed(args, result.returncode, result.stderr)
        return result

    def text(self, args: list[str], *, stdin: str | None = None, check: bool = True) -> str:
        """`run`, with text in and out (UTF-8, invalid bytes replaced)."""
        res = self.run(args, stdin=None if stdin is None else stdin.encode(), check=check)
        return res.stdout.decode("utf-8", "replace")

    def stream(self, args: list[str], *, stdin: bool = False, bufsize: int = -1) -> Stream:
        """Start git with `args`, its stdout to be read as a stream (see `Stream`)."""
        return Stream(self, args, stdin=stdin, bufsize=bufsize)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill git and its helpers (started in their own session), and reap git."""
    _signal_group(proc)
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
        proc.communicate(timeout=5)


class _Watchdog:
    """One daemon thread that kills each `Stream` whose time limit passes (`at`, `cancel`).

    A `threading.Timer` per stream costs a thread start per git process: a fraction of a
    millisecond on an idle machine, more on a busy one, where the new thread waits to be
    scheduled; that was a tenth of a one-object read (`objects.resolve_commit`). Callbacks run
    on this thread and must be quick (a kill).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []  # (due, id), cancelled ids left until they come up
        self._due: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        """In a forked child: no thread, no entries, a lock nobody holds."""
        self._cond = threading.Condition()
        self._heap, self._due, self._thread = [], {}, None

    def at(self, when: float, fn: Callable[[], None]) -> int:
        """Run `fn` at `when` (``time.monotonic()``) unless cancelled first; an id for `cancel`."""
        with self._cond:
            n = next(self._ids)
            self._due[n] = fn
            heapq.heappush(self._heap, (when, n))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="git-watchdog", daemon=True)
                self._thread.start()
            elif self._heap[0][1] == n:  # the thread sleeps until a later entry: wake it
                self._cond.notify()
        return n

    def cancel(self, n: int | None) -> None:
        if n is not None:
            with self._cond:
                self._due.pop(n, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][1] not in self._due:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                when, n = self._heap[0]
                left = when - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                fn = self._due.pop(n)
                self._cond.release()
                try:
                    fn()
                finally:
                    self._cond.acquire()


_WATCHDOG = _Watchdog()


class Stream:
    """A git process whose stdout is read as a stream (`out`, a `Reader`), killed when the caller
    stops early (`finish(stop=True)`) or when its time limit passes (`_Watchdog`). stderr goes to
    a temporary file (no pipe deadlock). Use as a context manager: leaving it stops git.
    `bufsize`: of the pipes' Python buffers (`subprocess.Popen`'s; -1, the default, is 8 KiB)."""

    def __init__(self, git: Git, args: list[str], *, stdin: bool = False, bufsize: int = -1):
        self.git = git
        self.args = args
        self.limit = git.limit()
        self.timed_out = False
        # the caller's git slot (`slots`), held until the process has been waited for (`finish`)
        self._slot: contextlib.AbstractContextManager[None] | None = slots.hold()
        self._slot.__enter__()
        self.err = tempfile.TemporaryFile()  # noqa: SIM115 -- lives as long as the Stream, closed by __exit__
        try:
            self.proc = subprocess.Popen(
                git.argv(args),
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self.err,
                bufsize=bufsize,
                env=git.env(),
                start_new_session=True,
                cwd=git.cwd,
            )
        except BaseException:
            self.err.close()
            self._give_back_slot()
            raise
        self._watch = None if math.isinf(self.limit) else _WATCHDOG.at(time.monotonic() + self.limit, self._timeout)
        assert self.proc.stdout is not None
        self.out = Reader(self.proc.stdout)

    def _timeout(self) -> None:
        self.timed_out = True
        _signal_group(self.proc)

    def write(self, data: bytes) -> bool:
        """Send `data` to git's stdin; False when git no longer reads it."""
        if self.proc.stdin is None:
            return False
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        return True

    def stderr(self) -> str:
        """What git wrote to stderr (its first 64 KiB), scrubbed."""
        self.err.seek(0)
        return self.git.scrubber(self.err.read(_MAX_STDERR).decode("utf-8", "replace"))

    def failed(self) -> GitFailed:
        """The `GitFailed` of this process, from its exit status and stderr."""
        return self.git.failed(self.args, self.proc.returncode, self.stderr())

    def finish(self, *, stop: bool = False) -> int:
        """Wait for git (killing it first when `stop`); its exit status. A timeout raises."""
        try:
            if stop and self.proc.poll() is None:
                _signal_group(self.proc)
            for f in (self.proc.stdin, self.proc.stdout):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()
            rc = self.proc.wait()
        finally:
            _WATCHDOG.cancel(self._watch)
            self._give_back_slot()
        if self.timed_out:
            raise self.git.timed_out(_subcommand(self.args), self.limit)
        return rc

    def _give_back_slot(self) -> None:
        slot, self._slot = self._slot, None
        if slot is not None:
            slot.__exit__(None, None, None)

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.proc.returncode is None:
                self.finish(stop=True)
        finally:
            self.err.close()
            self._give_back_slot()


def _signal_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL to git's process group (its session: git and the helpers it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class Reader:
    """Incremental reads from a pipe: `until` returns the bytes up to a separator, at most
    `limit` of them, without ever holding more than one chunk beyond that in memory."""

    def __init__(self, f: IO[bytes]):  # a pipe: a BufferedReader, whose read1 returns what is there
        self.f = f
        self.buf = b""
        self.pos = 0
        self.eof = False

    def _fill(self) -> None:
        chunk = self.f.read1(65536)  # type: ignore[attr-defined]
        if chunk:
            self.buf = self.buf[self.pos :] + chunk
        else:
            self.buf, self.eof = self.buf[self.pos :], True
        self.pos = 0

    def chunk(self) -> bytes:
        """The next bytes available (what is buffered, else one read); b'' at the end."""
        if self.pos >= len(self.buf) and not self.eof:
            self._fill()
        out, self.pos = self.buf[self.pos :], len(self.buf)
        return out

    def take(self, n: int) -> bytes:
        """The next `n` bytes (fewer at the end of the stream): what is buffered, then the rest in
        one read from the pipe (a blob of a megabyte is not gathered 64 KiB at a time)."""
        out = self.buf[self.pos : self.pos + n]
        self.pos += len(out)
        if len(out) < n and not self.eof:
            more = self.f.read(n - len(out))
            if len(more) < n - len(out):
                self.eof = True
            out += more
        return out

    def until(self, sep: bytes, limit: int, *, skip_rest: bool = True) -> tuple[bytes, bool] | None:
        """(data, cut): the bytes before the next `sep` (which is consumed); when there are more
        than `limit`, the first `limit` and cut=True, the rest skipped up to `sep` when
        `skip_rest` (else left unread). At the end of the stream: what is left, or None."""
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
