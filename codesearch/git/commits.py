"""Commit history at a ref: `list_commits` (a filtered, paged ``git log``), `list_authors` (a
paged ``git shortlog``) and the parsing of ``git log`` records that `history` shares.

Every log runs with ``--no-mailmap``, ``--decorate=full``, signatures off and UTF-8 output, in
a NUL-separated format, so neither the repository's config nor odd messages change what we
parse. Filters are passed as options git cannot misread: the message and author substrings
with ``--fixed-strings`` (never a regex), dates in one exact format (`dates.date_range_args`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from codesearch.errors import InvalidArgument
from codesearch.git.dates import date_range_args
from codesearch.git.objects import resolve_commit
from codesearch.git.paths import check_scope, scope_spec, show
from codesearch.git.process import Git

__all__ = [
    "LOG_FIELDS",
    "MAX_PER_PAGE",
    "Author",
    "Commit",
    "count_commits",
    "decorations",
    "list_authors",
    "list_commits",
    "log_records",
    "short_decoration",
]

#: list_commits: the largest page
MAX_PER_PAGE = 100


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


#: the fields of a `Commit`, in `log_records` order; callers may ask for more after them
LOG_FIELDS = ("%H", "%cI", "%an", "%ae", "%D", "%s", "%b", "%aI")
_SHORT_PREFIXES = ("refs/heads/", "refs/tags/", "refs/remotes/")


def short_decoration(text: str) -> str:
    """``%D`` under ``--decorate=full`` in the short form ``--decorate=short`` prints
    ("HEAD -> refs/heads/main, tag: refs/tags/v1.0" → "HEAD -> main, tag: v1.0")."""
    out = []
    for item in text.split(", ") if text.strip() else ():
        lead = next((p for p in ("HEAD -> ", "tag: ") if item.startswith(p)), "")
        name = item[len(lead) :]
        for prefix in _SHORT_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        out.append(lead + name)
    return ", ".join(out)


def decorations(text: str) -> list[str]:
    """Branch and tag short names from ``%D`` under ``--decorate=full`` ("HEAD -> refs/heads/main,
    tag: refs/tags/v1.0, refs/remotes/origin/main"): ['main', 'v1.0'], branches then tags,
    each sorted. HEAD, remote-tracking and other refs (refs/pull/…, refs/notes/…) are left out;
    tags are not marked (a branch and a tag of the same name appear twice)."""
    heads, tags = set(), set()
    for item in text.split(", "):
        item = item.strip().removeprefix("HEAD -> ").removeprefix("tag: ")
        if item.startswith("refs/heads/"):
            heads.add(item[len("refs/heads/") :])
        elif item.startswith("refs/tags/"):
            tags.add(item[len("refs/tags/") :])
    return sorted(heads) + sorted(tags)


def log_records(git_dir: str, args: list[str], extra: tuple[str, ...] = ()) -> list[tuple[dict[str, Any], list[str]]]:
    """The commits of ``git log <args>`` (ours: options, then ``--end-of-options`` and shas):
    for each, the keyword arguments of a `Commit` and the values of the `extra` format fields."""
    fields = (*LOG_FIELDS, *extra)
    fmt = "%x00".join(fields) + "%x00"
    res = Git.at(git_dir).run(
        [
            "-c",
            "log.showSignature=false",
            "log",
            "--no-color",
            "--no-mailmap",
            "--decorate=full",
            "--encoding=UTF-8",
            f"--format={fmt}",
            *args,
        ],
        check=True,
    )
    values = res.stdout.split(b"\0")
    n = len(fields)
    out = []
    for i in range(0, len(values) - n + 1, n):
        h, date, name, email, refs, subject, body, author_date, *rest = (show(f) for f in values[i : i + n])
        out.append(
            (
                dict(
                    hash=h.strip(),
                    date=date,
                    message=subject,
                    body=body.strip(),
                    refs=decorations(refs),
                    author_name=name,
                    author_email=email,
                    author_date=author_date,
                    decoration=short_decoration(refs),
                ),
                rest,
            )
        )
    return out


def _filter_args(query: str | None, since: str | None, until: str | None, author: str | None) -> list[str] | None:
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
    dates = date_range_args(since, until)
    return None if dates is None else args + dates


def count_commits(git_dir: str, args: list[str]) -> int:
    """How many commits ``git rev-list <args>`` lists."""
    res = Git.at(git_dir).run(["rev-list", "--count", *args], check=True)
    return int(res.stdout.strip() or 0)


def list_commits(
    git_dir: str,
    ref: str,
    *,
    query: str | None = None,
    since: str | None = None,
    until: str | None = None,
    author: str | None = None,
    path: str | None = None,
    page: int = 1,
    per_page: int = 50,
) -> tuple[list[Commit], int]:
    """One page of the commits reachable from `ref`, newest first (git log order), and how many
    commits match the filters in all.

    `query`: a case-insensitive substring of the message (not a regex). `author`: a
    case-insensitive substring of the author's ``Name <email>``. `since` / `until`: dates as
    `dates.parse_when` reads them, on the committer date, both inclusive; a bare date for `until`
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
    scope = scope_spec(check_scope(path))
    commit = resolve_commit(git_dir, ref)
    if filters is None:
        return [], 0
    total = count_commits(git_dir, [*filters, "--end-of-options", commit, "--", *scope])
    skip = (page - 1) * per_page
    if skip >= total:
        return [], total
    records = log_records(
        git_dir, [f"--skip={skip}", f"--max-count={per_page}", *filters, "--end-of-options", commit, "--", *scope]
    )
    return [Commit(**fields) for fields, _ in records], total


@dataclass(frozen=True)
class Author:
    """Someone who committed, with how many commits (``git shortlog -sne``)."""

    name: str
    email: str
    commit_count: int


_SHORTLOG_LINE = re.compile(r"^\s*(\d+)\t(.*?)\s*<([^<>]*)>\s*$")


def list_authors(
    git_dir: str, ref: str, *, path: str | None = None, page: int = 1, per_page: int = 50
) -> tuple[list[Author], int]:
    """One page of the authors of the commits reachable from `ref` (those that changed `path`
    when given), most commits first (``git shortlog -sne``: one entry per name and e-mail, the
    repository's mailmap applied, as Sourcebot lists them), and how many authors there are."""
    for name, value, low, high in (("page", page, 1, None), ("per_page", per_page, 1, MAX_PER_PAGE)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            rng = f"from {low} to {high}" if high else f"of at least {low}"
            raise InvalidArgument(f"{name} must be a whole number {rng} (got {value!r})")
    scope = scope_spec(check_scope(path))
    commit = resolve_commit(git_dir, ref)
    res = Git.at(git_dir).run(["shortlog", "-s", "-n", "-e", "--end-of-options", commit, "--", *scope], check=True)
    every = []
    for line in show(res.stdout).splitlines():
        m = _SHORTLOG_LINE.match(line)
        if m:
            every.append(Author(name=m.group(2), email=m.group(3), commit_count=int(m.group(1))))
    skip = (page - 1) * per_page
    return every[skip : skip + per_page], len(every)
