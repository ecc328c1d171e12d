"""Diffs between two commits or trees: `diff` / `diff_objects` run ``git diff`` and parse its
unified output with a `DiffParser`; `render_unified` writes the parsed files back in git's
format (the ``get_diff`` tool's text); `count_files` counts the files of a diff that was cut.

Why parse git's text rather than ask for a machine format: the unified diff is the only output
that carries hunks, rename detection and binary markers together. It runs with
``--no-ext-diff --no-textconv``, explicit prefixes, context and submodule format and
``core.quotePath=false``, so neither the repository's config nor its attributes can run a
program or change the format parsed here. The output is read as a stream under caps (files,
bytes), so a huge diff is cut off instead of being loaded whole. A cut diff must still be
described truthfully: the file being read at the cut is marked `FileDiff.cut` and gets its real
line counts from ``git diff --numstat`` of that one file (work git has just done for the text),
and `count_files` gives the number of files of the whole diff from ``git diff --name-only``
(a comparison of trees, no file contents read beyond rename detection).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from codesearch.errors import InvalidArgument
from codesearch.git.objects import resolve_commit
from codesearch.git.paths import check_scope, scope_spec, show
from codesearch.git.process import Git, GitFailed

__all__ = ["DiffParser", "FileDiff", "Hunk", "count_files", "diff", "diff_objects", "render_unified", "unquote"]

#: ``git diff --numstat`` of the file a diff was cut in may take this long (else its counts stay unknown)
NUMSTAT_TIMEOUT_S = 10.0


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
    #: the diff was cut while this file was read: `hunks` are only the ones read whole before
    #: the cut (maybe none), so they do not show the whole change
    cut: bool = False
    #: (lines added, lines removed) of the whole file when known apart from `hunks` (a cut
    #: file's, from ``git diff --numstat``); None: count the hunks
    counts: tuple[int, int] | None = None


_HUNK = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)", re.DOTALL)
_C_ESCAPES = {
    ord("a"): 7,
    ord("b"): 8,
    ord("t"): 9,
    ord("n"): 10,
    ord("v"): 11,
    ord("f"): 12,
    ord("r"): 13,
    ord('"'): 34,
    ord("\\"): 92,
}


def unquote(s: bytes) -> tuple[bytes, bytes]:
    """A C-quoted string at the start of `s` ("a\\tb" as git writes unusual paths) and the rest."""
    out, i = bytearray(), 1
    while i < len(s):
        c = s[i]
        if c == 34:  # closing quote
            return bytes(out), s[i + 1 :]
        if c == 92 and i + 1 < len(s):
            nxt = s[i + 1]
            if 48 <= nxt <= 55 and i + 3 < len(s):
                out.append(int(s[i + 1 : i + 4], 8) & 0xFF)
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
        return unquote(s)[0]
    return s[:-1] if s.endswith(b"\t") else s


def _header_paths(rest: bytes) -> tuple[bytes, bytes]:
    """The a/ and b/ paths (prefixes kept) of 'diff --git <a> <b>'."""
    if rest.startswith(b'"'):
        a, tail = unquote(rest)
        tail = tail.lstrip(b" ")
        return a, (unquote(tail)[0] if tail.startswith(b'"') else tail)
    if rest.endswith(b'"'):
        i = rest.find(b' "')
        return rest[:i], unquote(rest[i + 1 :])[0]
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half : half + 1] == b" " and rest[2:half] == rest[half + 3 :]:
        return rest[:half], rest[half + 1 :]
    i = rest.find(b" b/")
    return (rest[:i], rest[i + 1 :]) if i >= 0 else (rest, rest)


def _strip_prefix(p: bytes | None, prefix: bytes) -> bytes | None:
    if p is None or p == b"/dev/null":
        return None
    return p.removeprefix(prefix)


class _FileState:
    """One file of the diff while its header and hunks are read."""

    def __init__(self, header: bytes):
        a, b = _header_paths(header)
        self.a, self.b = _strip_prefix(a, b"a/"), _strip_prefix(b, b"b/")
        self.minus: bytes | None = None
        self.plus: bytes | None = None
        self.rename_from: bytes | None = None
        self.rename_to: bytes | None = None
        self.status = "modified"
        self.binary = False
        self.cut = False
        self.hunks: list[Hunk] = []

    def header_line(self, line: bytes) -> None:
        """Take one extended header line (``new file mode``, ``rename from``, ``--- a/x`` …)."""
        if line.startswith(b"new file mode"):
            self.status = "added"
        elif line.startswith(b"deleted file mode"):
            self.status = "deleted"
        elif line.startswith((b"rename from ", b"copy from ")):
            self.rename_from = _path_arg(line.split(b" ", 2)[2])
            self.status = "renamed" if line.startswith(b"rename") else "added"
        elif line.startswith((b"rename to ", b"copy to ")):
            self.rename_to = _path_arg(line.split(b" ", 2)[2])
            if line.startswith(b"copy"):
                self.plus = self.rename_to
        elif line.startswith(b"--- "):
            self.minus = _strip_prefix(_path_arg(line[4:]), b"a/")
        elif line.startswith(b"+++ "):
            self.plus = _strip_prefix(_path_arg(line[4:]), b"b/")
        elif line.startswith(b"Binary files ") or line == b"GIT binary patch":
            self.binary = True

    def result(self) -> FileDiff:
        if self.status == "renamed":
            old, new = self.rename_from or self.a, self.rename_to or self.b
        elif self.status == "added":
            old, new = None, self.plus or self.b
        elif self.status == "deleted":
            old, new = self.minus or self.a, None
        else:
            old = new = self.plus or self.minus or self.b or self.a
        return FileDiff(
            old_path=None if old is None else show(old),
            new_path=None if new is None else show(new),
            status=self.status,
            binary=self.binary,
            hunks=self.hunks,
            cut=self.cut,
        )


class DiffParser:
    """Git's unified diff (``--src-prefix=a/ --dst-prefix=b/``), one line at a time, into
    `FileDiff`s, under two caps: at most `max_files` files, at most `max_bytes` of diff text.

    `feed` takes each line (without its newline) and says whether to go on; `room` is how many
    bytes the next line may have before it passes the byte cap. Once a cap is reached,
    `truncated` is True: the files read whole are kept, and the file being read when the byte
    cap was hit keeps the hunks completed before it (possibly none) and is marked `FileDiff.cut`
    (unless the cut fell exactly before the next file's header). `finish` returns the files.
    A hunk's lines are counted against its header, so a line that only looks like a header
    (``diff --git`` inside a hunk) is read as content.
    """

    def __init__(self, *, max_files: int = 300, max_bytes: int = 1_000_000):
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.files: list[FileDiff] = []
        self.truncated = False
        self._file: _FileState | None = None
        self._hunk: Hunk | None = None
        self._left_old = self._left_new = 0  # lines of the current hunk still to come, per side
        self._used = 0

    def room(self) -> int:
        return self.max_bytes - self._used + 1

    def _in_hunk(self) -> bool:
        return self._hunk is not None and (self._left_old > 0 or self._left_new > 0)

    def feed(self, line: bytes, cut: bool = False) -> bool:
        """Take one line of the diff (`cut`: longer than `room`, cut there); False to stop."""
        self._used += len(line) + 1
        if cut or self._used > self.max_bytes:
            self.truncated = True
            if self._file is not None:
                in_hunk = self._in_hunk()
                if in_hunk:
                    self._file.hunks.pop()  # the hunk being read is incomplete: leave it out
                # (else it ended whole; a header line cut shorter than its "diff --git " is not
                # recognised, so the file is then said to be cut: never the other way round)
                self._file.cut = in_hunk or not line.startswith(b"diff --git ")
            return False
        if self._in_hunk() and self._hunk_line(line):
            return True
        if line.startswith(b"\\") and self._hunk is not None:
            self._hunk.lines.append(show(line))
        elif line.startswith(b"diff --git "):
            self._close_file()
            if len(self.files) >= self.max_files:
                self.truncated = True
                return False
            self._file, self._hunk = _FileState(line[len(b"diff --git ") :]), None
        elif self._file is not None:
            self._file_line(line)
        return True

    def _hunk_line(self, line: bytes) -> bool:
        """Take a line of the current hunk; False when it cannot be one (git never writes that:
        the hunk ends and the line is read as a header)."""
        tag = line[:1]
        if tag == b" " and self._left_old > 0 and self._left_new > 0:
            self._left_old, self._left_new = self._left_old - 1, self._left_new - 1
        elif tag == b"-" and self._left_old > 0:
            self._left_old -= 1
        elif tag == b"+" and self._left_new > 0:
            self._left_new -= 1
        elif tag != b"\\":
            self._left_old = self._left_new = 0
            return False
        assert self._hunk is not None
        self._hunk.lines.append(show(line))
        return True

    def _file_line(self, line: bytes) -> None:
        assert self._file is not None
        m = _HUNK.fullmatch(line)
        if m:
            o, on, n, nn, text = m.groups()
            self._hunk = Hunk(int(o), 1 if on is None else int(on), int(n), 1 if nn is None else int(nn), show(text))
            self._left_old, self._left_new = self._hunk.old_lines, self._hunk.new_lines
            self._file.hunks.append(self._hunk)
        elif self._hunk is None:  # (stray text after a hunk is not produced by git: skipped)
            self._file.header_line(line)

    def _close_file(self) -> None:
        if self._file is not None:
            self.files.append(self._file.result())
            self._file = None

    def finish(self) -> list[FileDiff]:
        """The files read (the one being read included)."""
        self._close_file()
        return self.files


def diff(
    git_dir: str, base: str, head: str, *, path: str | None = None, max_files: int = 300, max_bytes: int = 1_000_000
) -> tuple[list[FileDiff], bool]:
    """What changed from `base` to `head` (``git diff <base> <head>``: the two trees, not the
    merge base), with rename detection, parsed from git's unified diff. `path` keeps the changes
    to that file or below that directory (``git diff <base> <head> -- <path>``: a file renamed
    across its boundary shows as added or deleted; `check_scope`).

    Returns (files, truncated): see `DiffParser` for the caps. InvalidGitRef for a bad or
    unknown ref.
    """
    scope = check_scope(path)
    old, new = resolve_commit(git_dir, base), resolve_commit(git_dir, head)
    return diff_objects(git_dir, old, new, scope=scope, max_files=max_files, max_bytes=max_bytes)


def diff_objects(
    git_dir: str, old: str, new: str, *, scope: str = "", max_files: int = 300, max_bytes: int = 1_000_000
) -> tuple[list[FileDiff], bool]:
    """`diff` between two object names already resolved by the caller (full shas of commits or
    trees, never a caller's text): the same parsing and caps. `scope` is a `check_scope` path.
    Used for a commit's own changes, where the old side of a root commit is the empty tree."""
    for name, value in (("max_files", max_files), ("max_bytes", max_bytes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgument(f"{name} must be a whole number of at least 1 (got {value!r})")
    args = [
        "-c",
        "core.quotePath=false",
        "-c",
        "diff.suppressBlankEmpty=false",
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--find-renames",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        "--unified=3",
        "--no-relative",
        "--submodule=short",
        "--end-of-options",
        old,
        new,
        "--",
        *scope_spec(scope),
    ]
    parser = DiffParser(max_files=max_files, max_bytes=max_bytes)
    with Git.at(git_dir).stream(args) as p:
        while True:
            got = p.out.until(b"\n", parser.room(), skip_rest=False)
            if got is None or not parser.feed(*got):
                break
        files = parser.finish()
        rc = p.finish(stop=parser.truncated)
        if not parser.truncated and rc != 0:
            raise p.failed()
    if files and files[-1].cut:
        _count_cut_file(git_dir, old, new, files[-1])
    return files, parser.truncated


def _common_args() -> list[str]:
    """The options `diff_objects` also gives git, so that the counts are of the same diff."""
    return ["--no-color", "--no-ext-diff", "--no-textconv", "--find-renames", "--no-relative"]


def _count_cut_file(git_dir: str, old: str, new: str, f: FileDiff) -> None:
    """Set `f.counts` (or `f.binary`) from ``git diff --numstat`` of that file alone (both its
    paths, so a rename is still one file), within `NUMSTAT_TIMEOUT_S`; on failure they stay
    unknown (the page then counts the hunks it has)."""
    paths = [p for p in dict.fromkeys((f.old_path, f.new_path)) if p is not None]
    args = ["diff", "--numstat", "-z", *_common_args(), "--end-of-options", old, new, "--"]
    args += [f":(literal){p}" for p in paths]
    try:
        res = Git.at(git_dir, timeout_s=NUMSTAT_TIMEOUT_S).run(args, check=True)
    except GitFailed:
        return
    tokens, i, counts = res.stdout.split(b"\0"), 0, [0, 0]
    seen = False
    while i < len(tokens):  # "<added>\t<removed>\t<path>", or "…\t" then the two paths of a rename
        parts = tokens[i].split(b"\t", 2)
        if len(parts) != 3:
            break  # (the empty string after the last NUL)
        if parts[0] == b"-":
            f.binary = True
            return
        if not (parts[0].isdigit() and parts[1].isdigit()):
            return
        counts[0], counts[1], seen = counts[0] + int(parts[0]), counts[1] + int(parts[1]), True
        i += 3 if parts[2] == b"" else 1
    if seen:
        f.counts = (counts[0], counts[1])


def count_files(git_dir: str, old: str, new: str, *, scope: str = "") -> int:
    """How many files the diff from `old` to `new` (resolved object names, as for
    `diff_objects`) changes under `scope`: for a diff `diff_objects` cut, the count of the
    whole. ``git diff --name-only -z`` (a rename is one file, as in the diff), counted as it
    streams by."""
    args = ["-c", "core.quotePath=false", "diff", "--name-only", "-z", *_common_args(), "--end-of-options", old, new]
    count = 0
    with Git.at(git_dir).stream([*args, "--", *scope_spec(scope)]) as p:
        while True:
            chunk = p.out.chunk()
            if not chunk:
                break
            count += chunk.count(b"\0")
        if p.finish() != 0:
            raise p.failed()
    return count


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
        a = f.old_path if f.old_path is not None else f.new_path
        b = f.new_path if f.new_path is not None else f.old_path
        out.append(f"diff --git {_quote_path('a/' + (a or ''))} {_quote_path('b/' + (b or ''))}")
        if f.status == "renamed":
            out += [f"rename from {_quote_path(f.old_path or '')}", f"rename to {_quote_path(f.new_path or '')}"]
        if f.binary:
            out.append(f"Binary files {_side('a/', f.old_path)} and {_side('b/', f.new_path)} differ")
            continue
        if f.hunks or f.status in ("added", "deleted"):  # an empty file added or deleted: no hunks
            out += [f"--- {_side('a/', f.old_path)}", f"+++ {_side('b/', f.new_path)}"]
        for h in f.hunks:
            out.append(
                f"@@ -{_range(h.old_start, h.old_lines)} +{_range(h.new_start, h.new_lines)} @@"
                + (f" {h.header}" if h.header else "")
            )
            out += h.lines
    return "\n".join(out) + ("\n" if out else "")
