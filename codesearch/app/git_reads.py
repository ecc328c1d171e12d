"""Reading a repository's git data as a caller, written once for every front door: a file
(``GET /api/source``, the ``read_file`` tool) and a page of commits (``GET /api/commits``, the
``list_commits`` tool).

A read goes the same way from every front door: the ref and the path are checked first
(`codesearch.git.paths`: no option injection, no path outside the repository), then the repository
is looked up as the caller (`ToolContext.repo`: a repository the caller may not see is answered
exactly like a missing one), its git directory is reached through `ToolContext.git_dir` (which
counts the work against the caller's git slots), and git is asked at the ref the caller named, or
the repository's default branch.
"""

from __future__ import annotations

from dataclasses import dataclass

from codesearch.app.context import ToolContext
from codesearch.git.commits import Commit
from codesearch.git.commits import list_commits as git_list_commits
from codesearch.git.objects import is_binary, read_blob
from codesearch.git.paths import check_path, check_ref
from codesearch.index.language import detect
from codesearch.store.models import Repo


@dataclass(frozen=True)
class FileAtRef:
    """One file of one repository at one ref, as git stores it."""

    repo: Repo
    path: str
    #: the ref the file was read at: the caller's, or the repository's default branch
    ref: str
    #: the commit the ref named when it was read
    commit: str
    data: bytes

    @property
    def is_binary(self) -> bool:
        """git's own test: a NUL byte among the first 8000 bytes."""
        return is_binary(self.data)

    @property
    def text(self) -> str:
        """The file decoded as UTF-8, invalid bytes replaced."""
        return self.data.decode("utf-8", "replace")

    @property
    def language(self) -> str:
        return detect(self.path, self.data)


def read_file(tc: ToolContext, repo: str, path: str, ref: str | None = None) -> FileAtRef:
    """`path` of `repo` at `ref` (default: the repository's default branch) as `tc`'s caller may read it.

    `InvalidGitRef` for a malformed ref or one naming nothing, `FileNotFound` for a bad path or
    nothing (or a directory) there, `RepositoryNotFound` for a repository that does not exist, is
    not visible to the caller or has no clone yet."""
    if ref is not None:
        check_ref(ref)
    check_path(path)
    row = tc.repo(repo)
    use_ref = ref or tc.default_ref(row)
    data, commit = read_blob(tc.git_dir(row), use_ref, path)
    return FileAtRef(row, path, use_ref, commit, data)


def list_commits(
    tc: ToolContext,
    repo: str,
    ref: str | None = None,
    *,
    query: str | None = None,
    since: str | None = None,
    until: str | None = None,
    author: str | None = None,
    path: str | None = None,
    page: int = 1,
    per_page: int = 50,
) -> tuple[list[Commit], int]:
    """One page of `repo`'s commits at `ref` (default branch), newest first, and how many match in
    all: messages holding `query`, authors matching `author`, dates within `since`/`until`, commits
    that changed `path` (a file, or anything below a directory). Empty filters are no filters."""
    if ref is not None:
        check_ref(ref)
    row = tc.repo(repo)
    return git_list_commits(
        tc.git_dir(row),
        ref or tc.default_ref(row),
        query=query or None,
        since=since or None,
        until=until or None,
        author=author or None,
        path=path or None,
        page=page,
        per_page=per_page,
    )
