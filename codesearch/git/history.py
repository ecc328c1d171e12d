"""A repository's history at any ref: blame of a file, one commit with its changes, the commits
between two refs, and the tags (for the history pages and ``/api/blame``, ``/api/commit``,
``/api/diff``).

Built on the rules of `codesearch.git.paths` and `codesearch.git.process`: refs pass
`check_ref` and are resolved to a full sha by `resolve_commit` before any other command sees
them, paths pass `check_path` / `check_scope` and reach git only after the sha
(``<sha>:<path>``) or after ``--``, every git process has a time limit and its output is read
as a stream with a cap, and failures that are not the caller's fault are `CodesearchError`s
(HTTP 500) naming no server path.

Bounded work:

* `blame` blames at most `MAX_BLAME_LINES` lines (``-L 1,N``; the answer says ``truncated``),
  counts lines by streaming the blob (never loading a huge file to count it) and does not
  blame binary files (git's own test: a NUL in the first 8000 bytes) — it says they are binary;
* `commit_changes` and the compare page go through `diff.diff_objects` (a cap on files and
  on bytes of diff text, ``truncated`` when reached);
* `commits_between` lists at most `limit` commits and counts the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codesearch.errors import CodesearchError, FileNotFound, InvalidArgument
from codesearch.git.commits import Commit, count_commits, log_records
from codesearch.git.dates import iso_from_git
from codesearch.git.diff import FileDiff, count_files, diff_objects, unquote
from codesearch.git.objects import BINARY_SNIFF, object_info, resolve_commit
from codesearch.git.paths import check_path, check_scope, show
from codesearch.git.process import Git

__all__ = [
    "MAX_BLAME_BYTES",
    "MAX_BLAME_LINES",
    "Blame",
    "BlameCommit",
    "BlameRange",
    "CommitDetail",
    "Tag",
    "blame",
    "commit_changes",
    "commit_detail",
    "commits_between",
    "file_stats",
    "list_tags",
    "path_kind",
]

#: blame covers at most this many lines of a file (the file view shows as many)
MAX_BLAME_LINES = 20_000
#: larger files are not blamed at all (git would hold the whole blob in memory at each step)
MAX_BLAME_BYTES = 20_000_000
#: a metadata line of ``git blame --porcelain`` (a summary, a name) is cut at this many bytes
_MAX_FIELD = 64 * 1024


# ---------------------------------------------------------------------- objects


def _file_object(git_dir: str, commit: str, ref: str, path: str) -> tuple[str, int]:
    """(``<commit>:<path>``, its size) when it names a file (a blob), else FileNotFound saying
    what it is."""
    name = f"{commit}:{path}"
    info = object_info(git_dir, name)
    if info is None or info[0] == "commit":  # (a submodule: its files are not in this repository)
        raise FileNotFound(f"file {path!r} not found at {ref!r}")
    if info[0] == "tree":
        raise FileNotFound(f"{path!r} is a directory, not a file, at {ref!r}")
    return name, info[1]


def path_kind(git_dir: str, ref: str, path: str) -> str | None:
    """What `path` is at `ref`: "blob" (a file), "tree" (a directory; the root for ''), "commit"
    (a submodule) or None when nothing is there. InvalidGitRef for a bad ref."""
    commit = resolve_commit(git_dir, ref)
    if not path:
        return "tree"
    info = object_info(git_dir, f"{commit}:{check_path(path)}")
    return info[0] if info else None


def _count_lines(git_dir: str, name: str, limit: int) -> tuple[int, bool]:
    """(lines, binary) of the blob `name`, lines counted as git blame does (a last line without
    a newline counts); the count stops once it passes `limit` (then it is ``limit + 1``)."""
    lines, head, last = 0, b"", b""
    with Git.at(git_dir).stream(["cat-file", "blob", name]) as p:
        while True:
            chunk = p.out.chunk()
            if not chunk:
                break
            if len(head) < BINARY_SNIFF:
                head += chunk[: BINARY_SNIFF - len(head)]
                if b"\0" in head:
                    p.finish(stop=True)
                    return 0, True
            lines += chunk.count(b"\n")
            last = chunk[-1:]
            if lines > limit:
                p.finish(stop=True)
                return limit + 1, False
        if p.finish() != 0:
            raise p.failed()
    return lines + (1 if last and last != b"\n" else 0), False


# ---------------------------------------------------------------------- blame


@dataclass(frozen=True)
class BlameRange:
    hash: str  # the commit that last changed these lines
    path: str  # the file's path in that commit (differs after a rename)
    start_line: int  # 1-based, in the blamed file
    line_count: int
    #: 1-based, where the range's first line is in `hash`'s version of the file (`path`)
    orig_line: int = 0


@dataclass(frozen=True)
class BlameCommit:
    hash: str
    author_name: str
    author_email: str
    date: str  # author date, ISO 8601 with the author's offset (as git's %aI)
    message: str  # the subject
    #: (commit, path) of the step before it in the blame walk; None when it added the lines
    previous: tuple[str, str] | None = None


@dataclass
class Blame:
    commit: str  # the resolved commit the file was blamed at
    ranges: list[BlameRange] = field(default_factory=list)
    commits: dict[str, BlameCommit] = field(default_factory=dict)
    lines: int = 0  # lines of the file (at most MAX_BLAME_LINES + 1 when truncated: "more than")
    truncated: bool = False  # only the first `max_lines` lines were blamed
    binary: bool = False  # a binary file: not blamed


def _porcelain_path(raw: bytes) -> str:
    return show(unquote(raw)[0] if raw.startswith(b'"') else raw)


def blame(git_dir: str, ref: str, path: str, *, max_lines: int = MAX_BLAME_LINES) -> Blame:
    """Who last changed each line of the file `path` at `ref` (``git blame --porcelain``;
    whole-file renames are followed, as git does by default).

    Ranges are contiguous, ordered by line and cover the blamed lines; adjacent groups of one
    commit and path are merged (git splits them when the lines were apart in that commit).
    FileNotFound for a path that is not a file at `ref`, InvalidGitRef for a bad ref,
    InvalidArgument for a file over `MAX_BLAME_BYTES`."""
    if isinstance(max_lines, bool) or not isinstance(max_lines, int) or max_lines < 1:
        raise InvalidArgument(f"max_lines must be a whole number of at least 1 (got {max_lines!r})")
    check_path(path)
    commit = resolve_commit(git_dir, ref)
    name, size = _file_object(git_dir, commit, ref, path)
    if size > MAX_BLAME_BYTES:
        raise InvalidArgument(f"{path!r} is {size:,} bytes: too large to blame (at most {MAX_BLAME_BYTES:,} bytes)")
    lines, binary = _count_lines(git_dir, name, max_lines)
    out = Blame(commit=commit, lines=lines, binary=binary, truncated=lines > max_lines)
    if binary or lines == 0:
        return out
    args = [
        "-c",
        "core.quotePath=false",
        "-c",
        "blame.ignoreRevsFile=",
        "blame",
        "--porcelain",
        "-L",
        f"1,{min(lines, max_lines)}",
        commit,
        "--",
        path,
    ]
    ranges: list[BlameRange] = []
    names: dict[str, str] = {}  # the last filename git gave for each commit
    with Git.at(git_dir).stream(args) as p:
        while True:
            got = p.out.until(b"\n", 256)
            if got is None:
                break
            header = got[0].split(b" ")
            if len(header) not in (3, 4) or not all(x.isdigit() for x in header[1:]):
                p.finish(stop=True)
                raise CodesearchError(f"git blame wrote an unexpected line: {show(got[0])[:80]!r}")
            sha = header[0].decode("ascii", "replace")
            fields: dict[bytes, bytes] = {}
            while True:
                meta = p.out.until(b"\n", _MAX_FIELD)
                if meta is None or meta[0].startswith(b"\t"):
                    break
                key, _, value = meta[0].partition(b" ")
                fields[key] = value
            if b"filename" in fields:
                names[sha] = _porcelain_path(fields[b"filename"])
            if b"author" in fields and sha not in out.commits:
                previous = None
                if b"previous" in fields:
                    prev_sha, _, prev_path = fields[b"previous"].partition(b" ")
                    previous = (prev_sha.decode("ascii", "replace"), _porcelain_path(prev_path))
                out.commits[sha] = BlameCommit(
                    hash=sha,
                    author_name=show(fields[b"author"]),
                    author_email=show(fields.get(b"author-mail", b"")).removeprefix("<").removesuffix(">"),
                    date=iso_from_git(show(fields.get(b"author-time", b"")), show(fields.get(b"author-tz", b"+0000"))),
                    message=show(fields.get(b"summary", b"")),
                    previous=previous,
                )
            if len(header) == 4:
                orig, start, count = int(header[1]), int(header[2]), int(header[3])
                where = names.get(sha, path)
                last = ranges[-1] if ranges else None
                if last and last.hash == sha and last.path == where and last.start_line + last.line_count == start:
                    ranges[-1] = BlameRange(sha, where, last.start_line, last.line_count + count, last.orig_line)
                else:
                    ranges.append(BlameRange(sha, where, start, count, orig))
        if p.finish() != 0:
            raise p.failed()
    out.ranges = ranges
    return out


# ---------------------------------------------------------------------- one commit


@dataclass(frozen=True)
class CommitDetail(Commit):
    parents: list[str] = field(default_factory=list)  # full shas, first parent first
    committer_name: str = ""
    committer_email: str = ""


def _log(git_dir: str, args: list[str]) -> list[CommitDetail]:
    """Commits of ``git log <args>`` (ours: options, then ``--end-of-options`` and shas)."""
    return [
        CommitDetail(**fields, parents=parents.split(), committer_name=cname, committer_email=cemail)
        for fields, (parents, cname, cemail) in log_records(git_dir, args, ("%P", "%cn", "%ce"))
    ]


def commit_detail(git_dir: str, ref: str) -> CommitDetail:
    """The commit `ref` names: its message, author, committer, dates, refs and parents.
    InvalidGitRef when `ref` names no commit."""
    sha = resolve_commit(git_dir, ref)
    got = _log(git_dir, ["--max-count=1", "--end-of-options", sha, "--"])
    if not got:
        raise CodesearchError(f"git log found no commit {sha}")
    return got[0]


def _empty_tree(git_dir: str) -> str:
    """The empty tree's id in this repository's hash (git knows it without storing it)."""
    args = ["hash-object", "-t", "tree", "--stdin"]
    git = Git.at(git_dir)
    res = git.run(args, stdin=b"", check=True)
    oid = res.stdout.decode("ascii", "replace").strip()
    if not oid:
        raise git.failed(args, res.returncode, res.stderr)
    return oid


def commit_changes(
    git_dir: str, ref: str, *, path: str | None = None, max_files: int = 300, max_bytes: int = 1_000_000
) -> tuple[CommitDetail, list[FileDiff], bool, int]:
    """The commit `ref` names and what it changed: the diff from its first parent (a merge is
    shown against the branch it was merged into, as GitHub does; a root commit against the
    empty tree). `path`, the caps, files and truncated are `diff.diff`'s; the last value is how
    many files the whole change has (`diff.count_files` when the diff was cut)."""
    detail = commit_detail(git_dir, ref)
    base = detail.parents[0] if detail.parents else _empty_tree(git_dir)
    scope = check_scope(path)
    files, truncated = diff_objects(git_dir, base, detail.hash, scope=scope, max_files=max_files, max_bytes=max_bytes)
    total = count_files(git_dir, base, detail.hash, scope=scope) if truncated else len(files)
    return detail, files, truncated, total


def commits_between(git_dir: str, base: str, head: str, *, limit: int = 100) -> tuple[list[CommitDetail], int]:
    """The commits reachable from `head` but not from `base` (``git log base..head``), newest
    first, at most `limit` of them, and how many there are in all."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit must be a whole number of at least 1 (got {limit!r})")
    old, new = resolve_commit(git_dir, base), resolve_commit(git_dir, head)
    total = count_commits(git_dir, ["--end-of-options", new, f"^{old}", "--"])
    if total == 0:
        return [], 0
    return _log(git_dir, [f"--max-count={limit}", "--end-of-options", new, f"^{old}", "--"]), total


def file_stats(f: FileDiff) -> tuple[int, int]:
    """(lines added, lines removed) of one file: its whole change's when known (`FileDiff.counts`,
    for a file the diff was cut in), else its hunks'."""
    if f.counts is not None:
        return f.counts
    added = removed = 0
    for h in f.hunks:
        for line in h.lines:
            if line.startswith("+"):
                added += 1
            elif line.startswith("-"):
                removed += 1
    return added, removed


# ---------------------------------------------------------------------- tags


@dataclass(frozen=True)
class Tag:
    name: str  # without refs/tags/
    commit: str  # the commit it names (annotated tags peeled)


def list_tags(git_dir: str, *, limit: int = 500) -> tuple[list[Tag], bool]:
    """Tags naming commits, newest first (by the tag's or the commit's date), at most `limit`;
    (tags, truncated)."""
    fmt = "%00".join(("%(refname)", "%(objectname)", "%(*objectname)", "%(objecttype)", "%(*objecttype)"))
    res = Git.at(git_dir).run(["for-each-ref", "--sort=-creatordate", f"--format={fmt}", "refs/tags/"], check=True)
    out: list[Tag] = []
    for line in res.stdout.split(b"\n"):
        parts = line.split(b"\0")
        if len(parts) != 5 or not parts[0].startswith(b"refs/tags/"):
            continue
        kind, peeled_kind = parts[3], parts[4]
        sha = parts[2] if kind == b"tag" else parts[1]
        if (peeled_kind if kind == b"tag" else kind) != b"commit":
            continue
        if len(out) >= limit:
            return out, True
        out.append(Tag(show(parts[0][len(b"refs/tags/") :]), show(sha)))
    return out, False
