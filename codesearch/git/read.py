"""Read-only access to a repository's git objects at any branch, tag or commit.

Used by ``GET /api/source`` and by the agent tools (read_file, list_tree, list_commits,
list_branches, glob, get_diff, and grep at refs the index does not hold). It works the same on
the bare mirrors under ``<data dir>/repos`` and on local repositories indexed in place
(`git_dir_of`), and never looks at a working tree: everything is read from commits.

Why git plumbing in subprocesses rather than GitPython objects: one ``git`` process per call
(or one long-lived ``cat-file --batch`` for a tree walk) whose output is parsed as a stream, so
a huge tree, log or diff is cut off at a cap instead of being loaded whole; git's own rev
parsing, rename detection and grep engine; and arguments that cannot be read as options.

Safety rules (refs, paths, patterns and dates come from untrusted callers):

* refs pass `check_ref` (no leading ``-``, no ``:``, NUL or whitespace, at most 1024
  characters) and are turned into a full commit sha by `resolve_commit`
  (``rev-parse --verify --end-of-options <ref>^{commit}``) before any other command sees them;
  later commands get the sha, never the caller's text;
* paths pass `check_path` / `check_dir` (relative, no ``..``/``.``/empty segments, no NUL or
  newline) and reach git only as ``<sha>:<path>`` object names or as ``:(literal)`` /
  ``:(glob)`` pathspecs after ``--``; patterns go behind ``-e`` or ``--grep=``;
* every call is ``git -c safe.directory=<dir> --git-dir <dir> …`` with `_git_env` (no
  inherited ``GIT_*`` variables, no prompts, no system config, C locale), never a shell, with
  a `GIT_TIMEOUT_S` time limit; diff runs with ``--no-ext-diff --no-textconv``, explicit
  prefixes, context and submodule format, so neither the repository's config nor its
  attributes can run a program or change the output format we parse;
* errors are `CodesearchError`s whose message names the offending value; a failure that is not
  the caller's fault (a damaged clone, a timeout) is a plain `CodesearchError` (HTTP 500, its
  message is logged, not shown). No message carries a stack trace, an environment value or a
  server path: the git directory is "the repository" (the caller knows which one it asked for).

Paths are bytes in git; they are shown decoded as UTF-8 with invalid bytes replaced (U+FFFD).
"""

from __future__ import annotations

import calendar
import os
import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from codesearch.errors import CodesearchError, FileNotFound, InvalidArgument, InvalidGitRef
from codesearch.globs import glob_to_regex

__all__ = [
    "GIT_TIMEOUT_S", "Branch", "Commit", "FileDiff", "GrepHit", "Hunk", "TreeEntry", "check_dir", "check_path",
    "check_ref", "check_scope", "diff", "diff_objects", "git_dir_of", "grep", "head_branch", "is_binary", "list_branches",
    "list_commits", "list_files", "list_tree", "parse_when", "read_blob", "render_unified", "resolve_commit",
]

GIT_TIMEOUT_S = 30.0
_BINARY_SNIFF = 8000
#: grep: a matching line is cut at this many characters
GREP_MAX_LINE_CHARS = 2000
#: list_commits: the largest page
MAX_PER_PAGE = 100


# ---------------------------------------------------------------------- validation


def check_path(path: str) -> str:
    """`path` when it is a plain relative path inside a repository, else FileNotFound."""
    bad = not path or path.startswith("/") or any(c in path for c in ("\0", "\n", "\r"))
    if not bad:
        bad = any(seg in ("", ".", "..") for seg in path.split("/"))
    if bad:
        raise FileNotFound(f"file {path!r} not found: give a path relative to the repository root")
    return path


def check_dir(path: str | None) -> str:
    """A directory path for listing: '' for the root (given as None, '', '/' or '.'), else
    `path` without one trailing '/', checked like `check_path` (FileNotFound otherwise)."""
    if path is None or path in ("", "/", "."):
        return ""
    clean = path.removesuffix("/")
    try:
        return check_path(clean)
    except FileNotFound:
        raise FileNotFound(f"directory {path!r} not found: give a path relative to the repository root "
                           "('' for the root)") from None


def check_scope(path: str | None) -> str:
    """A path that narrows a history or a diff to one file or directory: '' for the whole
    repository (None, '', '/' or '.'), else `path` without a leading or trailing '/', checked
    like `check_path` (FileNotFound otherwise). It need not exist at any ref: a path deleted
    long ago still has a history."""
    if path is None or path in ("", "/", "."):
        return ""
    clean = path.removeprefix("/").removesuffix("/")
    try:
        return check_path(clean)
    except FileNotFound:
        raise FileNotFound(f"path {path!r} not found: give a file or directory relative to the repository root") from None


def _scope_spec(scope: str) -> list[str]:
    """The pathspec after ``--`` for a `check_scope` path: literal, so no glob magic."""
    return [f":(literal){scope}"] if scope else []


def check_ref(ref: str) -> str:
    """`ref` when git could only read it as a revision (not an option, not ``rev:path``), else
    InvalidGitRef."""
    if (not ref or ref.startswith("-") or len(ref) > 1024
            or any(c in ref for c in ("\0", ":", "\n", "\r", " ", "\t"))):
        raise InvalidGitRef(f"invalid git ref {ref!r}")
    return ref


# ---------------------------------------------------------------------- running git


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", LC_ALL="C")
    return env


def git_dir_of(path: str) -> str:
    """The git directory of a repository: ``path/.git`` for a repository with a working tree,
    else `path` itself (a bare repository, such as a mirror)."""
    dot_git = os.path.join(path, ".git")
    return dot_git if os.path.isdir(dot_git) else path


def _cmd(git_dir: str, args: list[str]) -> list[str]:
    return ["git", "-c", f"safe.directory={git_dir}", "--git-dir", git_dir, *args]


def _git(git_dir: str, args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(_cmd(git_dir, args), input=stdin, capture_output=True, timeout=GIT_TIMEOUT_S,
                              env=_git_env(), check=False)
    except subprocess.TimeoutExpired:
        raise CodesearchError(f"git timed out after {GIT_TIMEOUT_S:g}s reading the repository") from None


def _first_line(stderr: bytes) -> str:
    for line in stderr.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("fatal: ").removeprefix("error: ")
    return "no message"


def _failed(git_dir: str, what: str, stderr: bytes) -> CodesearchError:
    return CodesearchError(f"git {what} failed: {_first_line(stderr).replace(git_dir, 'the repository')}")


class _Proc:
    """A git process whose stdout is read as a stream (see `_Reader`), killed when the caller
    stops early or after GIT_TIMEOUT_S. stderr goes to a temporary file (no pipe deadlock)."""

    def __init__(self, git_dir: str, args: list[str], *, stdin: bool = False):
        self.git_dir = git_dir
        self.err = tempfile.TemporaryFile()
        self.timed_out = False
        try:
            self.proc = subprocess.Popen(_cmd(git_dir, args), stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=self.err, env=_git_env())
        except BaseException:
            self.err.close()
            raise
        self.timer = threading.Timer(GIT_TIMEOUT_S, self._timeout)
        self.timer.daemon = True
        self.timer.start()
        self.out = _Reader(self.proc.stdout)

    def _timeout(self) -> None:
        self.timed_out = True
        self.proc.kill()

    def stderr(self) -> bytes:
        self.err.seek(0)
        return self.err.read(64 * 1024)

    def finish(self, *, stop: bool = False) -> int:
        """Wait for git (killing it first when `stop`); its exit status. A timeout raises."""
        try:
            if stop and self.proc.poll() is None:
                self.proc.kill()
            for f in (self.proc.stdin, self.proc.stdout):
                if f is not None:
                    try:
                        f.close()
                    except OSError:
                        pass
            rc = self.proc.wait()
        finally:
            self.timer.cancel()
        if self.timed_out:
            raise CodesearchError(f"git timed out after {GIT_TIMEOUT_S:g}s reading the repository")
        return rc

    def __enter__(self) -> _Proc:
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.proc.returncode is None:
                self.finish(stop=True)
        finally:
            self.err.close()


class _Reader:
    """Incremental reads from a pipe: `until` returns the bytes up to a separator, at most
    `limit` of them, without ever holding more than one chunk beyond that in memory."""

    def __init__(self, f):
        self.f = f
        self.buf = b""
        self.pos = 0
        self.eof = False

    def _fill(self) -> None:
        chunk = self.f.read1(65536)
        if chunk:
            self.buf = self.buf[self.pos:] + chunk
        else:
            self.buf, self.eof = self.buf[self.pos:], True
        self.pos = 0

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
                    out += self.buf[self.pos:self.pos + room]
                    self.pos += room
                    if not skip_rest:
                        return bytes(out), True
                    self._skip(sep)
                    return bytes(out), True
                out += self.buf[self.pos:end]
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
        """The next `n` bytes (fewer only at the end of the stream)."""
        out = bytearray()
        while len(out) < n:
            if self.pos >= len(self.buf):
                if self.eof:
                    break
                self._fill()
                continue
            take = min(n - len(out), len(self.buf) - self.pos)
            out += self.buf[self.pos:self.pos + take]
            self.pos += take
        return bytes(out)


def _show(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _enc(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------- refs and blobs


def resolve_commit(git_dir: str, ref: str) -> str:
    """The full sha of the commit `ref` names (``ref^{commit}``: a tag is peeled).

    InvalidGitRef when `ref` is malformed or names no commit; a plain CodesearchError when
    `git_dir` is not a git repository (a server-side problem).
    """
    check_ref(ref)
    res = _git(git_dir, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"])
    commit = res.stdout.decode("ascii", "replace").strip()
    if b"not a git repository" in res.stderr:
        raise CodesearchError("the repository's clone is not a git repository")  # 500: damaged, not the caller's fault
    if res.returncode != 0 or not commit:
        raise InvalidGitRef(f"git ref {ref!r} not found in the repository")
    return commit


def read_blob(git_dir: str, ref: str, path: str) -> tuple[bytes, str]:
    """The bytes of `path` at `ref` in the repository at `git_dir`, and the commit read.

    InvalidGitRef when `ref` names no commit; FileNotFound when there is no file at `path`.
    """
    check_ref(ref)
    check_path(path)
    commit = resolve_commit(git_dir, ref)
    res = _git(git_dir, ["cat-file", "--batch"], stdin=f"{commit}:{path}\n".encode("utf-8", "surrogateescape"))
    out = res.stdout
    header, _, rest = out.partition(b"\n")
    parts = header.split()
    if res.returncode != 0 or len(parts) != 3 or parts[1] != b"blob":
        raise FileNotFound(f"file {path!r} not found at {ref!r}")
    size = int(parts[2])
    return rest[:size], commit


def is_binary(data: bytes) -> bool:
    """git's own test: a NUL byte in the first 8000 bytes."""
    return b"\0" in data[:_BINARY_SNIFF]


# ---------------------------------------------------------------------- trees


@dataclass(frozen=True)
class TreeEntry:
    path: str  # relative to the repository root, no trailing slash
    name: str  # the last segment of path
    is_dir: bool
    depth: int  # 1 = directly below the listed directory


class _Batch:
    """One ``git cat-file --batch`` process answering object requests one at a time."""

    def __init__(self, git_dir: str):
        self.p = _Proc(git_dir, ["cat-file", "--batch"], stdin=True)

    def get(self, name: bytes) -> tuple[str, bytes, int] | None:
        """(type, content, hash length in bytes) of the object `name`, or None when missing."""
        try:
            self.p.proc.stdin.write(name + b"\n")
            self.p.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._dead()
        got = self.p.out.until(b"\n", 4096 + len(name))
        if got is None:
            self._dead()
        header = got[0]
        if header.endswith((b" missing", b" ambiguous")):
            return None
        parts = header.split(b" ")
        if len(parts) != 3 or not parts[2].isdigit():
            self._dead()
        size = int(parts[2])
        data = self.p.out.exactly(size + 1)
        if len(data) != size + 1:
            self._dead()
        return parts[1].decode("ascii", "replace"), data[:size], len(parts[0]) // 2

    def _dead(self):
        self.p.finish(stop=True)  # raises on a timeout
        raise _failed(self.p.git_dir, "cat-file", self.p.stderr())

    def __enter__(self) -> _Batch:
        return self

    def __exit__(self, *exc) -> None:
        self.p.__exit__(*exc)


_TREE_MODE = b"40000"
_SUBMODULE_MODE = b"160000"


def _tree_entries(data: bytes, hash_len: int) -> list[tuple[bytes, bytes, bytes]]:
    """(mode, name, object id hex) of each entry of a raw tree object."""
    out, i, n = [], 0, len(data)
    while i < n:
        sp = data.index(b" ", i)
        nul = data.index(b"\0", sp)
        out.append((data[i:sp], data[sp + 1:nul], data[nul + 1:nul + 1 + hash_len].hex().encode()))
        i = nul + 1 + hash_len
    return out


def _not_a_dir(path: str, ref: str, kind: str | None) -> FileNotFound:
    if kind == "blob":
        return FileNotFound(f"{path!r} is a file, not a directory, at {ref!r}: use read_file to read it")
    return FileNotFound(f"directory {path!r} not found at {ref!r}")


def list_tree(git_dir: str, ref: str, path: str = "", *, depth: int = 1, include_files: bool = True,
              include_dirs: bool = True, max_entries: int = 1000) -> tuple[list[TreeEntry], bool]:
    """The entries below directory `path` ('' = the root) at `ref`, at most `depth` levels deep.

    Order: a pre-order walk where, in each directory, subdirectories come first and then files,
    each group sorted by name (byte order); a directory's entries follow it. `include_files` /
    `include_dirs` choose what is returned (directories are walked either way). Submodules are
    listed as directories without children (their commits are not in this repository);
    symlinks as files. Returns (entries, truncated): truncated when more than `max_entries`
    entries would be listed; the walk stops there.

    The walk reads tree objects on demand through one ``git cat-file --batch`` process, so
    listing the top of a huge repository reads only the trees it shows.
    FileNotFound when `path` does not exist at `ref`, or is a file.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InvalidArgument(f"depth must be a whole number of at least 1 (got {depth!r})")
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
        raise InvalidArgument(f"max_entries must be a whole number of at least 1 (got {max_entries!r})")
    under = check_dir(path)
    commit = resolve_commit(git_dir, ref)
    out: list[TreeEntry] = []
    if not include_files and not include_dirs:  # nothing to list: only check the path
        kind = _object_type(git_dir, f"{commit}:{under}") if under else "tree"
        if kind != "tree":
            raise _not_a_dir(under, ref, kind)
        return out, False
    with _Batch(git_dir) as batch:
        root = batch.get(_enc(f"{commit}:{under}") if under else f"{commit}^{{tree}}".encode())
        if root is None or root[0] != "tree":
            raise _not_a_dir(under, ref, root[0] if root else None)
        hash_len = root[2]
        prefix = under + "/" if under else ""
        # a stack of (level, directory path prefix, pending entries of that directory)
        stack = [(1, prefix, _ordered(_tree_entries(root[1], hash_len)))]
        while stack:
            level, base, pending = stack[-1]
            if not pending:
                stack.pop()
                continue
            mode, name, oid = pending.pop()
            shown = _show(name)
            is_dir = mode in (_TREE_MODE, _SUBMODULE_MODE)
            if (include_dirs if is_dir else include_files):
                if len(out) >= max_entries:
                    return out, True
                out.append(TreeEntry(base + shown, shown, is_dir, level))
            if mode == _TREE_MODE and level < depth:
                sub = batch.get(oid)
                if sub is None or sub[0] != "tree":
                    raise CodesearchError(f"tree {base + shown!r} is missing from the repository")
                stack.append((level + 1, base + shown + "/", _ordered(_tree_entries(sub[1], hash_len))))
        batch.p.finish()
    return out, False


def _ordered(entries: list[tuple[bytes, bytes, bytes]]) -> list[tuple[bytes, bytes, bytes]]:
    """Directories (and submodules) by name, then the rest by name; reversed, to pop from the end."""
    dirs = sorted((e for e in entries if e[0] in (_TREE_MODE, _SUBMODULE_MODE)), key=lambda e: e[1])
    files = sorted((e for e in entries if e[0] not in (_TREE_MODE, _SUBMODULE_MODE)), key=lambda e: e[1])
    return (dirs + files)[::-1]


def _object_type(git_dir: str, name: str) -> str | None:
    res = _git(git_dir, ["cat-file", "--batch-check"], stdin=_enc(name) + b"\n")
    parts = res.stdout.split(b"\n", 1)[0].split(b" ")
    if res.returncode != 0 or len(parts) != 3 or parts[2] == b"missing" or not parts[2].isdigit():
        return None
    return parts[1].decode("ascii", "replace")


def list_files(git_dir: str, ref: str, path: str = "") -> list[str]:
    """Every file (blob: regular files and symlinks, not submodules) below directory `path`
    ('' = the root) at `ref`, as paths from the repository root, sorted.

    FileNotFound when `path` does not exist at `ref`, or is a file.
    """
    under = check_dir(path)
    commit = resolve_commit(git_dir, ref)
    tree = f"{commit}:{under}" if under else f"{commit}^{{tree}}"
    res = _git(git_dir, ["ls-tree", "-r", "-z", "--end-of-options", tree])
    if res.returncode != 0:
        kind = _object_type(git_dir, tree)
        if kind in (None, "blob"):
            raise _not_a_dir(under, ref, kind)
        raise _failed(git_dir, "ls-tree", res.stderr)
    prefix = under + "/" if under else ""
    out = []
    for rec in res.stdout.split(b"\0"):
        meta, tab, name = rec.partition(b"\t")
        if tab and meta.split(b" ")[1:2] == [b"blob"]:
            out.append(prefix + _show(name))
    out.sort()
    return out


# ---------------------------------------------------------------------- dates


_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "seconds"),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), "minutes"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "hours"),
    **dict.fromkeys(("d", "day", "days"), "days"),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), "weeks"),
    **dict.fromkeys(("mo", "mon", "mos", "month", "months"), "months"),
    **dict.fromkeys(("y", "yr", "yrs", "year", "years"), "years"),
}
_RELATIVE = re.compile(r"(?:(\d{1,9})\s*|(an?)\s+)([a-z]+)(?:\s+ago)?")
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
_WHEN_EXAMPLES = ("use an ISO 8601 date or time such as '2024-01-31' or '2024-01-31T10:00:00Z', "
                  "or a relative one such as '7 days ago', '2 weeks', '3mo', 'yesterday'")


def _minus_months(t: datetime, n: int) -> datetime:
    y, m = divmod(t.year * 12 + (t.month - 1) - n, 12)
    day = min(t.day, calendar.monthrange(y, m + 1)[1]) if 1 <= y <= 9999 else t.day
    return t.replace(year=y, month=m + 1, day=day)


def parse_when(text: str, now: datetime | None = None) -> datetime:
    """A point in time (aware, UTC) from an ISO 8601 or relative description.

    Accepted (case-insensitive, surrounding spaces ignored):

    * ISO 8601 dates and times: ``2024-01-31`` (midnight UTC), ``2024-01-31T10:00:00Z``,
      ``2024-01-31 10:00``, ``2024-01-31T10:00:00+02:00``; a time without an offset is UTC;
    * ``now``; ``today`` and ``yesterday``: midnight UTC at the start of that day;
    * ``N <unit> [ago]``, also ``a``/``an`` for 1 (``an hour ago``) and without a space
      (``30d``), always in the past. Units: ``s``/``sec``/``second``, ``min``/``minute``,
      ``h``/``hr``/``hour``, ``d``/``day``, ``w``/``wk``/``week``, ``mo``/``month``,
      ``y``/``yr``/``year`` (plurals too). Months and years are calendar months and years
      (Mar 31 minus 1 month is Feb 28/29). A bare ``m`` is refused as ambiguous (``min`` or ``mo``).

    `now` (default: the current time; naive means UTC) anchors the relative forms.
    InvalidArgument, with examples of valid values, for anything else.
    """
    raw = text if isinstance(text, str) else ""
    s = raw.strip().lower()
    now = now or datetime.now(UTC)
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    if not s:
        raise InvalidArgument(f"empty date: {_WHEN_EXAMPLES}")
    if s == "now":
        return now
    if s in ("today", "yesterday"):
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return day - timedelta(days=1) if s == "yesterday" else day
    if s[0].isdigit() and not _RELATIVE.fullmatch(s):
        try:
            t = datetime.fromisoformat(raw.strip().upper())
        except ValueError:
            pass
        else:
            return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    m = _RELATIVE.fullmatch(s)
    if m:
        n = int(m.group(1)) if m.group(1) else 1
        unit = _UNITS.get(m.group(3))
        if m.group(3) == "m":
            raise InvalidArgument(f"ambiguous date {raw!r}: write 'min' for minutes or 'mo' for months "
                                  f"(e.g. '{n}min', '{n}mo')")
        if unit:
            try:
                if unit == "months":
                    return _minus_months(now, n)
                if unit == "years":
                    return _minus_months(now, 12 * n)
                return now - timedelta(**{unit: n})
            except (OverflowError, ValueError):
                raise InvalidArgument(f"date {raw!r} is too far in the past") from None
    raise InvalidArgument(f"cannot read {raw!r} as a date: {_WHEN_EXAMPLES}")


def _git_date(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S +0000")


# ---------------------------------------------------------------------- commits


@dataclass(frozen=True)
class Commit:
    hash: str
    date: str  # committer date, ISO 8601 with offset (git's %cI)
    message: str  # the subject: the first paragraph of the message, on one line (git's %s)
    body: str  # the rest of the message, stripped
    refs: list[str] = field(default_factory=list)  # branches then tags pointing at it, short names ('main', 'v1.0')
    author_name: str = ""
    author_email: str = ""
    author_date: str = ""  # ISO 8601 with offset (git's %aI)
    #: every ref pointing at it as ``git log`` shows them (%D, short names): "HEAD -> main, tag: v1.0"
    decoration: str = ""


_LOG_FIELDS = ("%H", "%cI", "%an", "%ae", "%D", "%s", "%b", "%aI")
_LOG_FORMAT = "%x00".join(_LOG_FIELDS) + "%x00"
_SHORT_PREFIXES = ("refs/heads/", "refs/tags/", "refs/remotes/")


def _short_decoration(text: str) -> str:
    """``%D`` under ``--decorate=full`` in the short form ``--decorate=short`` prints
    ("HEAD -> refs/heads/main, tag: refs/tags/v1.0" → "HEAD -> main, tag: v1.0")."""
    out = []
    for item in text.split(", ") if text.strip() else ():
        lead = next((p for p in ("HEAD -> ", "tag: ") if item.startswith(p)), "")
        name = item[len(lead):]
        for prefix in _SHORT_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        out.append(lead + name)
    return ", ".join(out)


def _decorations(text: str) -> list[str]:
    """Branch and tag short names from ``%D`` under ``--decorate=full`` ("HEAD -> refs/heads/main,
    tag: refs/tags/v1.0, refs/remotes/origin/main"): ['main', 'v1.0'], branches then tags,
    each sorted. HEAD, remote-tracking and other refs (refs/pull/…, refs/notes/…) are left out;
    tags are not marked (a branch and a tag of the same name appear twice)."""
    heads, tags = set(), set()
    for item in text.split(", "):
        item = item.strip().removeprefix("HEAD -> ").removeprefix("tag: ")
        if item.startswith("refs/heads/"):
            heads.add(item[len("refs/heads/"):])
        elif item.startswith("refs/tags/"):
            tags.add(item[len("refs/tags/"):])
    return sorted(heads) + sorted(tags)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GIT_DATE_END = datetime(2099, 12, 31, 23, 59, 59, tzinfo=UTC)  # git's date arithmetic covers 1970-2099


def _filter_args(query, since, until, author) -> list[str] | None:
    """The git log / rev-list options for the filters; None when no commit can match (`until`
    before 1970)."""
    args = ["--regexp-ignore-case", "--fixed-strings"]  # apply to --grep and --author alike
    for name, value in (("query", query), ("author", author)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgument(f"{name} must be a string")
        if value and "\0" in value:
            raise InvalidArgument(f"{name} must not contain a NUL character")
    if query:
        args.append(f"--grep={query}")
    if author:
        args.append(f"--author={author}")
    empty = False
    if since:
        t = parse_when(since)
        if t > _EPOCH:  # (an earlier date: every commit is after it)
            args.append(f"--since={_git_date(min(t, _GIT_DATE_END))}")
    if until:
        t = parse_when(until)
        if _DATE_ONLY.fullmatch(until.strip()):  # a whole day: up to its last second
            t += timedelta(days=1, seconds=-1)
        empty = t < _EPOCH
        if t < _GIT_DATE_END:  # (a later date: every commit is before it)
            args.append(f"--until={_git_date(max(t, _EPOCH))}")
    return None if empty else args


def list_commits(git_dir: str, ref: str, *, query: str | None = None, since: str | None = None,
                 until: str | None = None, author: str | None = None, path: str | None = None, page: int = 1,
                 per_page: int = 50) -> tuple[list[Commit], int]:
    """One page of the commits reachable from `ref`, newest first (git log order), and how many
    commits match the filters in all.

    `query`: a case-insensitive substring of the message (not a regex). `author`: a
    case-insensitive substring of the author's ``Name <email>``. `since` / `until`: dates as
    `parse_when` reads them, on the committer date, both inclusive; a bare date for `until`
    (``2024-01-31``) includes that whole day. `path`: only commits that changed that file or
    something below that directory (``git log -- <path>``, history simplified as git does by
    default; `check_scope`). Merge commits are included.
    InvalidArgument for a bad date or page (page >= 1, 1 <= per_page <= 100).
    """
    for name, value, low, high in (("page", page, 1, None), ("per_page", per_page, 1, MAX_PER_PAGE)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            rng = f"from {low} to {high}" if high else f"of at least {low}"
            raise InvalidArgument(f"{name} must be a whole number {rng} (got {value!r})")
    filters = _filter_args(query, since, until, author)
    scope = _scope_spec(check_scope(path))
    commit = resolve_commit(git_dir, ref)
    if filters is None:
        return [], 0
    res = _git(git_dir, ["rev-list", "--count", *filters, "--end-of-options", commit, "--", *scope])
    if res.returncode != 0:
        raise _failed(git_dir, "rev-list", res.stderr)
    total = int(res.stdout.strip() or 0)
    skip = (page - 1) * per_page
    if skip >= total:
        return [], total
    res = _git(git_dir, ["-c", "log.showSignature=false", "log", "--no-color", "--no-mailmap", "--decorate=full",
                         "--encoding=UTF-8", f"--format={_LOG_FORMAT}", f"--skip={skip}", f"--max-count={per_page}",
                         *filters, "--end-of-options", commit, "--", *scope])
    if res.returncode != 0:
        raise _failed(git_dir, "log", res.stderr)
    fields = res.stdout.split(b"\0")
    n = len(_LOG_FIELDS)
    out = []
    for i in range(0, len(fields) - n + 1, n):
        h, date, name, email, refs, subject, body, author_date = (_show(f) for f in fields[i:i + n])
        out.append(Commit(hash=h.strip(), date=date, message=subject, body=body.strip(), refs=_decorations(refs),
                          author_name=name, author_email=email, author_date=author_date,
                          decoration=_short_decoration(refs)))
    return out, total


# ---------------------------------------------------------------------- branches


@dataclass(frozen=True)
class Branch:
    name: str  # without refs/heads/
    commit: str  # full sha of its head
    committed_at: str  # committer date of its head, ISO 8601 (git's iso-strict)


def list_branches(git_dir: str) -> list[Branch]:
    """Every branch (``refs/heads/*``), newest head commit first, then by name
    (``git for-each-ref --sort=-committerdate``)."""
    # the last --sort is the primary key: newest first, ties by name
    res = _git(git_dir, ["for-each-ref", "--sort=refname", "--sort=-committerdate",
                         "--format=%(refname)%00%(objectname)%00%(committerdate:iso-strict)", "refs/heads/"])
    if res.returncode != 0:
        raise _failed(git_dir, "for-each-ref", res.stderr)
    out = []
    for line in res.stdout.split(b"\n"):
        parts = line.split(b"\0")
        if len(parts) != 3 or not parts[0].startswith(b"refs/heads/"):
            continue
        out.append(Branch(_show(parts[0][len(b"refs/heads/"):]), _show(parts[1]), _show(parts[2])))
    return out


def head_branch(git_dir: str) -> str | None:
    """The branch HEAD points to (short name), None when HEAD is detached or dangling."""
    res = _git(git_dir, ["symbolic-ref", "--quiet", "HEAD"])
    ref = _show(res.stdout).strip()
    return ref[len("refs/heads/"):] if res.returncode == 0 and ref.startswith("refs/heads/") else None


# ---------------------------------------------------------------------- diffs


@dataclass
class Hunk:
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    header: str  # the text after the second @@ (the function context), may be ''
    lines: list[str] = field(default_factory=list)  # each starts with ' ', '+', '-' or '\\'


@dataclass
class FileDiff:
    old_path: str | None  # None when added
    new_path: str | None  # None when deleted
    status: str  # 'added' | 'deleted' | 'modified' | 'renamed'
    binary: bool = False
    hunks: list[Hunk] = field(default_factory=list)


_HUNK = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)", re.DOTALL)
_C_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12, ord("r"): 13,
              ord('"'): 34, ord("\\"): 92}


def _unquote(s: bytes) -> tuple[bytes, bytes]:
    """A C-quoted string at the start of `s` ("a\\tb" as git writes unusual paths) and the rest."""
    out, i = bytearray(), 1
    while i < len(s):
        c = s[i]
        if c == 34:  # closing quote
            return bytes(out), s[i + 1:]
        if c == 92 and i + 1 < len(s):
            nxt = s[i + 1]
            if 48 <= nxt <= 55 and i + 3 < len(s):
                out.append(int(s[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_C_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out), b""


def _path_arg(s: bytes) -> bytes:
    """A path as written after '--- ', '+++ ', 'rename from ' (quoted or not, maybe a tab after)."""
    if s.startswith(b'"'):
        return _unquote(s)[0]
    return s[:-1] if s.endswith(b"\t") else s


def _header_paths(rest: bytes) -> tuple[bytes, bytes]:
    """The a/ and b/ paths (prefixes kept) of 'diff --git <a> <b>'."""
    if rest.startswith(b'"'):
        a, tail = _unquote(rest)
        tail = tail.lstrip(b" ")
        return a, (_unquote(tail)[0] if tail.startswith(b'"') else tail)
    if rest.endswith(b'"'):
        i = rest.find(b' "')
        return rest[:i], _unquote(rest[i + 1:])[0]
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half:half + 1] == b" " and rest[2:half] == rest[half + 3:]:
        return rest[:half], rest[half + 1:]
    i = rest.find(b" b/")
    return (rest[:i], rest[i + 1:]) if i >= 0 else (rest, rest)


def _strip_prefix(p: bytes | None, prefix: bytes) -> bytes | None:
    if p is None or p == b"/dev/null":
        return None
    return p.removeprefix(prefix)


class _FileState:
    def __init__(self, header: bytes):
        a, b = _header_paths(header)
        self.a, self.b = _strip_prefix(a, b"a/"), _strip_prefix(b, b"b/")
        self.minus = self.plus = None
        self.rename_from = self.rename_to = None
        self.status = "modified"
        self.binary = False
        self.hunks: list[Hunk] = []

    def result(self) -> FileDiff:
        if self.status == "renamed":
            old, new = self.rename_from or self.a, self.rename_to or self.b
        elif self.status == "added":
            old, new = None, self.plus or self.b
        elif self.status == "deleted":
            old, new = self.minus or self.a, None
        else:
            old = new = self.plus or self.minus or self.b or self.a
        return FileDiff(old_path=None if old is None else _show(old), new_path=None if new is None else _show(new),
                        status=self.status, binary=self.binary, hunks=self.hunks)


def diff(git_dir: str, base: str, head: str, *, path: str | None = None, max_files: int = 300,
         max_bytes: int = 1_000_000) -> tuple[list[FileDiff], bool]:
    """What changed from `base` to `head` (``git diff <base> <head>``: the two trees, not the
    merge base), with rename detection, parsed from git's unified diff. `path` keeps the changes
    to that file or below that directory (``git diff <base> <head> -- <path>``: a file renamed
    across its boundary shows as added or deleted; `check_scope`).

    Returns (files, truncated). Git's output is read as a stream and reading stops at the first
    file beyond `max_files`, or once more than `max_bytes` of diff text have been read: then
    truncated is True, the files read whole are returned, and the file being read when the byte
    cap was hit is returned with the hunks completed before it (possibly none).
    InvalidGitRef for a bad or unknown ref.
    """
    scope = check_scope(path)
    old, new = resolve_commit(git_dir, base), resolve_commit(git_dir, head)
    return diff_objects(git_dir, old, new, scope=scope, max_files=max_files, max_bytes=max_bytes)


def diff_objects(git_dir: str, old: str, new: str, *, scope: str = "", max_files: int = 300,
                 max_bytes: int = 1_000_000) -> tuple[list[FileDiff], bool]:
    """`diff` between two object names already resolved by the caller (full shas of commits or
    trees, never a caller's text): the same parsing and caps. `scope` is a `check_scope` path.
    Used for a commit's own changes, where the old side of a root commit is the empty tree."""
    for name, value in (("max_files", max_files), ("max_bytes", max_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{name} must be a whole number of at least 1 (got {value!r})")
    scope = _scope_spec(scope)
    args = ["-c", "core.quotePath=false", "-c", "diff.suppressBlankEmpty=false", "diff", "--no-color",
            "--no-ext-diff", "--no-textconv", "--find-renames", "--src-prefix=a/", "--dst-prefix=b/", "--unified=3",
            "--no-relative", "--submodule=short", "--end-of-options", old, new, "--", *scope]
    files: list[FileDiff] = []
    cur: _FileState | None = None
    hunk: Hunk | None = None
    left_old = left_new = 0
    used = 0
    truncated = False
    with _Proc(git_dir, args) as p:
        while True:
            got = p.out.until(b"\n", max_bytes - used + 1, skip_rest=False)
            if got is None:
                break
            line, cut = got
            used += len(line) + 1
            if cut or used > max_bytes:
                truncated = True
                if cur is not None and hunk is not None and (left_old > 0 or left_new > 0):
                    cur.hunks.pop()  # the hunk being read is incomplete: leave it out
                break
            if hunk is not None and (left_old > 0 or left_new > 0):
                tag = line[:1]
                if tag == b" " and left_old > 0 and left_new > 0:
                    left_old, left_new = left_old - 1, left_new - 1
                elif tag == b"-" and left_old > 0:
                    left_old -= 1
                elif tag == b"+" and left_new > 0:
                    left_new -= 1
                elif tag != b"\\":
                    tag = None
                if tag is not None:
                    hunk.lines.append(_show(line))
                    continue
                left_old = left_new = 0  # not a line of this hunk (git never writes that): read it as a header
            if line.startswith(b"\\") and hunk is not None:
                hunk.lines.append(_show(line))
                continue
            if line.startswith(b"diff --git "):
                if cur is not None:
                    files.append(cur.result())
                    cur = None
                if len(files) >= max_files:
                    truncated = True
                    break
                cur, hunk = _FileState(line[len(b"diff --git "):]), None
                continue
            if cur is None:
                continue
            m = _HUNK.fullmatch(line)
            if m:
                o, on, n, nn, text = m.groups()
                hunk = Hunk(int(o), 1 if on is None else int(on), int(n), 1 if nn is None else int(nn), _show(text))
                left_old, left_new = hunk.old_lines, hunk.new_lines
                cur.hunks.append(hunk)
            elif hunk is not None:
                continue  # stray text after a hunk (not produced by git)
            elif line.startswith(b"new file mode"):
                cur.status = "added"
            elif line.startswith(b"deleted file mode"):
                cur.status = "deleted"
            elif line.startswith((b"rename from ", b"copy from ")):
                cur.rename_from = _path_arg(line.split(b" ", 2)[2])
                cur.status = "renamed" if line.startswith(b"rename") else "added"
            elif line.startswith((b"rename to ", b"copy to ")):
                cur.rename_to = _path_arg(line.split(b" ", 2)[2])
                if line.startswith(b"copy"):
                    cur.plus = cur.rename_to
            elif line.startswith(b"--- "):
                cur.minus = _strip_prefix(_path_arg(line[4:]), b"a/")
            elif line.startswith(b"+++ "):
                cur.plus = _strip_prefix(_path_arg(line[4:]), b"b/")
            elif line.startswith(b"Binary files ") or line == b"GIT binary patch":
                cur.binary = True
        if cur is not None:
            files.append(cur.result())
        rc = p.finish(stop=truncated)
        if not truncated and rc != 0:
            raise _failed(git_dir, "diff", p.stderr())
    return files, truncated


def _quote_path(p: str) -> str:
    if not any(c in p for c in '"\\') and all(ord(c) >= 32 and ord(c) != 127 for c in p):
        return p
    out = []
    for c in p:
        if c in '"\\':
            out.append("\\" + c)
        elif c in "\a\b\t\n\v\f\r":
            out.append("\\" + "abtnvfr"["\a\b\t\n\v\f\r".index(c)])
        elif ord(c) < 32 or ord(c) == 127:
            out.append(f"\\{ord(c):03o}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _side(prefix: str, p: str | None) -> str:
    return "/dev/null" if p is None else _quote_path(prefix + p)


def _range(start: int, count: int) -> str:
    return str(start) if count == 1 else f"{start},{count}"


def render_unified(diffs: list[FileDiff]) -> str:
    """`diffs` as a unified diff in git's format: per file ``diff --git a/<old> b/<new>``,
    ``rename from``/``rename to`` for renames, ``Binary files a/x and b/x differ`` for binary
    files, else ``--- a/<old>`` / ``+++ b/<new>`` (``/dev/null`` for an added or deleted file;
    left out for a file with no hunks, e.g. a pure rename) and the hunks,
    ``@@ -a,b +c,d @@ <header>`` (like git, a ``,1`` count is left out) with their lines.
    Paths with ``"``, ``\\`` or control characters are C-quoted, as git does.

    Modes, ``index`` and ``similarity`` lines are not kept, so not shown: apart from those, the
    text is what ``git diff`` prints."""
    out: list[str] = []
    for f in diffs:
        a, b = f.old_path if f.old_path is not None else f.new_path, f.new_path if f.new_path is not None else f.old_path
        out.append(f"diff --git {_quote_path('a/' + (a or ''))} {_quote_path('b/' + (b or ''))}")
        if f.status == "renamed":
            out += [f"rename from {_quote_path(f.old_path or '')}", f"rename to {_quote_path(f.new_path or '')}"]
        if f.binary:
            out.append(f"Binary files {_side('a/', f.old_path)} and {_side('b/', f.new_path)} differ")
            continue
        if f.hunks or f.status in ("added", "deleted"):  # an empty file added or deleted: no hunks
            out += [f"--- {_side('a/', f.old_path)}", f"+++ {_side('b/', f.new_path)}"]
        for h in f.hunks:
            out.append(f"@@ -{_range(h.old_start, h.old_lines)} +{_range(h.new_start, h.new_lines)} @@"
                       + (f" {h.header}" if h.header else ""))
            out += h.lines
    return "\n".join(out) + ("\n" if out else "")


# ---------------------------------------------------------------------- grep


@dataclass(frozen=True)
class GrepHit:
    path: str  # from the repository root
    line: int  # 1-based
    text: str  # the line (without its line end), cut at GREP_MAX_LINE_CHARS characters


_pcre_missing = False


def _braces(glob: str, limit: int = 64) -> list[str] | None:
    """`glob` with ``{a,b}`` alternatives expanded (None when there would be more than `limit`)."""
    start = glob.find("{")
    if start < 0:
        return [glob]
    depth, parts, last = 0, [], start + 1
    for i in range(start, len(glob)):
        c = glob[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                parts.append(glob[last:i])
                out: list[str] = []
                for alt in parts:
                    for rest in _braces(alt + glob[i + 1:], limit) or [None]:
                        if rest is None or len(out) >= limit:
                            return None
                        out.append(glob[:start] + rest)
                return out
        elif c == "," and depth == 1:
            parts.append(glob[last:i])
            last = i + 1
    return [glob]  # an unclosed brace is literal


def _wild_escape(s: str) -> str:
    return re.sub(r"([*?\[\\])", r"\\\1", s)


def _include_pathspecs(include: str, under: str) -> list[str] | None:
    """``:(glob)`` pathspecs selecting at least the files `include` matches (so git reads only
    those), or None when git's wildmatch and our glob syntax could disagree (``\\``, ``**``
    inside a segment) or braces expand too far: then the path scope alone narrows the search."""
    if "\\" in include:
        return None
    alts = _braces(include)
    if alts is None:
        return None
    base = _wild_escape(under) + "/" if under else ""
    specs = []
    for g in alts:
        g = g.lstrip("/")
        if not g or any("**" in seg and seg != "**" for seg in g.split("/")):
            return None
        if "[" in g and not re.search(r"\[!?\^?.[^\]]*\]", g):  # an unclosed [ is literal for us, not for git
            return None
        specs.append(":(glob)" + base + ("" if "/" in g else "**/") + g)
    return specs


def _include_regex(include: str, under: str) -> re.Pattern:
    """The paths `include` selects below `under`: codesearch glob syntax (`codesearch.globs`);
    a glob without '/' matches file names at any depth, one with '/' the path below `under`."""
    glob = include.lstrip("/")
    prefix = re.escape(under + "/") if under else ""
    if "/" not in glob.strip("/"):
        prefix += "(?:.*/)?"
    return re.compile(prefix + glob_to_regex(glob))


def _grep_error(pattern: str, stderr: bytes) -> InvalidArgument | None:
    msg = _first_line(stderr)
    m = re.match(r"-e option, '.*': (.*)$", msg, re.DOTALL)
    if m:
        return InvalidArgument(f"invalid regular expression {pattern!r}: {m.group(1)}")
    return None


def grep(git_dir: str, ref: str, pattern: str, *, path: str = "", include: str | None = None, max_files: int = 100,
         case_sensitive: bool = True, max_hits: int = 10_000) -> tuple[list[GrepHit], bool]:
    """Lines matching the regular expression `pattern` in the text files at `ref` (``git grep``;
    for refs the index does not hold).

    Syntax: Perl-compatible (``git grep -P``: ``\\d``, ``\\b``, ``(?:…)``, lazy quantifiers),
    or POSIX extended (``-E``) when git was built without PCRE. Matching is per line on bytes
    (C locale), so ``.`` matches one byte and ignoring case works on ASCII letters only.
    Binary files are skipped. `path` limits the search to a directory; `include` is a glob over
    file paths in `codesearch.globs` syntax (``*.py`` = file names at any depth; with a ``/``
    it matches the path below `path`, e.g. ``src/**/*.{ts,tsx}``).

    Returns (hits in path order, then line order; truncated): truncated when files beyond the
    first `max_files` with a match exist, or more than `max_hits` lines matched (git is stopped
    there). InvalidArgument for an empty or multi-line pattern or one that does not compile.
    """
    global _pcre_missing
    if not isinstance(pattern, str) or not pattern:
        raise InvalidArgument("pattern is empty: give a regular expression to search for")
    if any(c in pattern for c in "\0\n\r"):
        raise InvalidArgument("pattern must be one line (no newline or NUL characters)")
    for name, value in (("max_files", max_files), ("max_hits", max_hits)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{name} must be a whole number of at least 1 (got {value!r})")
    under = check_dir(path)
    if include is not None and (not include.strip("/") or any(c in include for c in "\0\n\r")):
        raise InvalidArgument(f"include {include!r} is not a usable glob: give one such as *.py or src/**/*.ts")
    commit = resolve_commit(git_dir, ref)
    if under:
        kind = _object_type(git_dir, f"{commit}:{under}")
        if kind != "tree":
            raise _not_a_dir(under, ref, kind)
    keep = _include_regex(include, under) if include else None
    specs = (_include_pathspecs(include, under) if include else None) or ([f":(literal){under}"] if under else [])
    while True:
        flavour = "-E" if _pcre_missing else "-P"
        args = ["grep", "--no-color", "-n", "-I", "-z", "--full-name", "--no-textconv", flavour,
                *([] if case_sensitive else ["-i"]), "-e", pattern, commit, "--", *specs]
        hits, truncated, retry = _run_grep(git_dir, args, commit, pattern, keep, max_files, max_hits)
        if not retry:
            return hits, truncated
        _pcre_missing = True


def _run_grep(git_dir, args, commit, pattern, keep, max_files, max_hits):
    hits: list[GrepHit] = []
    files = 0
    last = None
    truncated = False
    prefix = commit.encode() + b":"
    with _Proc(git_dir, args) as p:
        while True:
            got = p.out.until(b"\0", 1 << 16)
            if got is None:
                break
            raw_path = got[0]
            num = p.out.until(b"\0", 32)
            text = p.out.until(b"\n", GREP_MAX_LINE_CHARS * 4)
            if num is None or text is None:
                break
            name = _show(raw_path.removeprefix(prefix))
            if keep is not None and not keep.match(name):
                continue
            if name != last:
                if files >= max_files:
                    truncated = True
                    break
                files, last = files + 1, name
            if len(hits) >= max_hits:
                truncated = True
                break
            try:
                line_no = int(num[0])
            except ValueError:
                continue
            hits.append(GrepHit(name, line_no, _show(text[0].removesuffix(b"\r"))[:GREP_MAX_LINE_CHARS]))
        rc = p.finish(stop=truncated)
        if truncated or rc in (0, 1):
            return hits, truncated, False
        err = p.stderr()
    if "-P" in args and b"USE_LIBPCRE" in err:  # git built without PCRE: use -E
        return [], False, True
    bad = _grep_error(pattern, err)
    if bad is not None:
        raise bad
    raise _failed(git_dir, "grep", err)
