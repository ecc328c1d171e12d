"""Reading a repository's git data as a caller, written once for every front door: a file
(``GET /api/source``, the ``read_file`` tool, the code browser's file page), a directory tree
(``GET /api/tree``, ``list_tree``, the browser's tree page), a page of commits (``GET /api/commits``,
``list_commits``, the browser's history page), a blame (``GET /api/blame``, the browser's blame
view), one commit's changes (``GET /api/commit``, the browser's commit page) and the diff between
two refs (``GET /api/diff``, ``get_diff``, the browser's compare page).

A read goes the same way from every front door: the ref and the path are checked first
(`codesearch.git.paths`: no option injection, no path outside the repository), then the repository
is looked up as the caller (`ToolContext.repo`: a repository the caller may not see is answered
exactly like a missing one), its git directory is reached through `ToolContext.git_dir` (which
counts the work against the caller's git slots), and git is asked at the ref the caller named, or
the repository's default branch. The transports only parse their input, call one of these and
shape the answer (JSON, text for an agent, HTML); they hold no git logic of their own.

Every function takes the repository by name (looked up as the caller) or as the `Repo` row a
front door already looked up through the same `ToolContext` (checked again: a row the caller may
not see is refused like a missing repository).
"""

from __future__ import annotations

from dataclasses import dataclass

from codesearch.app.context import ToolContext
from codesearch.git import history
from codesearch.git.commits import Author, Commit
from codesearch.git.commits import list_authors as git_list_authors
from codesearch.git.commits import list_commits as git_list_commits
from codesearch.git.diff import FileDiff, count_files, diff_objects
from codesearch.git.objects import ObjectBatch, is_binary, read_blob, resolve_commit
from codesearch.git.paths import check_dir, check_path, check_ref, check_scope
from codesearch.git.refs import Branch, head_branch
from codesearch.git.refs import list_branches as git_list_branches
from codesearch.git.trees import TreeEntry
from codesearch.git.trees import list_tree as git_list_tree
from codesearch.index.attributes import ATTRIBUTES_FILE, MAX_FILE_BYTES, NONE, Attributes, Linguist
from codesearch.index.language import detect
from codesearch.store.models import Repo

#: a diff is cut after this many files or bytes of diff text unless the front door asks otherwise
MAX_DIFF_FILES = 300
MAX_DIFF_BYTES = 1_000_000


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
    #: the file's `.gitattributes` linguist overrides at that commit (docs/indexing.md#linguist-overrides)
    linguist: Linguist = NONE

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
        """The language the index gives the file: a `linguist-language` override, else detected."""
        return self.linguist.language or detect(self.path, self.data)


@dataclass(frozen=True)
class TreeAtRef:
    """The entries below one directory of one repository at one ref (`git.trees.list_tree`'s order)."""

    repo: Repo
    #: the directory listed, '' for the root
    path: str
    ref: str
    entries: list[TreeEntry]
    #: the listing stopped at its `max_entries`
    truncated: bool


@dataclass(frozen=True)
class BlameAtRef:
    """Who last changed each line of one file at one ref."""

    repo: Repo
    path: str
    ref: str
    blame: history.Blame


@dataclass(frozen=True)
class CommitChanges:
    """One commit and what it changed against its first parent (`git.history.commit_changes`)."""

    repo: Repo
    detail: history.CommitDetail
    files: list[FileDiff]
    #: the diff was cut at its file or byte cap; `total_files` still counts the whole change
    truncated: bool
    total_files: int


@dataclass(frozen=True)
class Diff:
    """What changed between two refs (``git diff base head``), both resolved to commits."""

    repo: Repo
    base: str
    head: str
    base_commit: str
    head_commit: str
    #: the directory or file the diff is limited to, '' for the whole tree
    scope: str
    files: list[FileDiff]
    truncated: bool
    total_files: int


def repo_row(tc: ToolContext, repo: str | Repo) -> Repo:
    """The repository as `tc`'s caller may read it: looked up by name, or a row checked again."""
    if isinstance(repo, Repo):
        if not tc.may_see(repo):
            return tc.repo(repo.name)  # refused exactly like an unknown name
        return repo
    return tc.repo(repo)


def read_file(tc: ToolContext, repo: str | Repo, path: str, ref: str | None = None) -> FileAtRef:
    """`path` of `repo` at `ref` (default: the repository's default branch) as `tc`'s caller may read it.

    `InvalidGitRef` for a malformed ref or one naming nothing, `FileNotFound` for a bad path or
    nothing (or a directory) there, `RepositoryNotFound` for a repository that does not exist, is
    not visible to the caller or has no clone yet."""
    if ref is not None:
        check_ref(ref)
    check_path(path)
    row = repo_row(tc, repo)
    use_ref = ref or tc.default_ref(row)
    git_dir = tc.git_dir(row)
    data, commit = read_blob(git_dir, use_ref, path)
    return FileAtRef(row, path, use_ref, commit, data, linguist_at(git_dir, commit, path))


def linguist_at(git_dir: str, commit: str, path: str) -> Linguist:
    """The linguist overrides of `path` at `commit`: the ``.gitattributes`` files of its directory
    and the ones above it (the only ones whose rules can reach it), each read only when under
    the indexer's size bound."""
    parts = path.split("/")[:-1]
    attrs = Attributes()
    with ObjectBatch(git_dir) as batch:
        for depth in range(len(parts) + 1):
            where = "".join(p + "/" for p in parts[:depth]) + ATTRIBUTES_FILE
            head = batch.header(f"{commit}:{where}")
            if head is None or head[1] != "blob" or head[2] > MAX_FILE_BYTES:
                continue
            got = batch.get(head[0])
            if got is not None:
                attrs.add_file(where, got[1])
    return attrs.of(path) if attrs else NONE


def list_tree(
    tc: ToolContext,
    repo: str | Repo,
    path: str | None = None,
    ref: str | None = None,
    *,
    depth: int = 1,
    max_entries: int = 1000,
    include_files: bool = True,
    include_dirs: bool = True,
) -> TreeAtRef:
    """The entries below directory `path` ('' or None: the root) of `repo` at `ref` (default
    branch), `depth` levels deep, at most `max_entries` of them. `FileNotFound` when `path` is
    not a directory there."""
    row = repo_row(tc, repo)
    under = check_dir(path)
    use_ref = check_ref(ref) if ref is not None else tc.default_ref(row)
    entries, truncated = git_list_tree(
        tc.git_dir(row),
        use_ref,
        under,
        depth=depth,
        max_entries=max_entries,
        include_files=include_files,
        include_dirs=include_dirs,
    )
    return TreeAtRef(row, under, use_ref, entries, truncated)


def resolve(tc: ToolContext, repo: str | Repo, ref: str) -> str:
    """The full sha of the commit `ref` names (a tag peeled). `InvalidGitRef` when it names none."""
    row = repo_row(tc, repo)
    return resolve_commit(tc.git_dir(row), check_ref(ref))


def branches(tc: ToolContext, repo: str | Repo) -> list[Branch]:
    """The repository's branches, newest commit first."""
    row = repo_row(tc, repo)
    return git_list_branches(tc.git_dir(row))


def default_branch(tc: ToolContext, repo: str | Repo) -> str | None:
    """The short name of the default branch: the one the repository's row names, else git's HEAD."""
    row = repo_row(tc, repo)
    return (row.default_branch or "").removeprefix("refs/heads/") or head_branch(tc.git_dir(row))


def tags(tc: ToolContext, repo: str | Repo, *, limit: int = 500) -> tuple[list[history.Tag], bool]:
    """The repository's tags, newest first, at most `limit`, and whether there were more."""
    row = repo_row(tc, repo)
    return history.list_tags(tc.git_dir(row), limit=limit)


def path_kind(tc: ToolContext, repo: str | Repo, ref: str, path: str) -> str | None:
    """ "blob" or "tree" for what `path` is at `ref` (the root is a tree), None for nothing there
    (or a submodule)."""
    row = repo_row(tc, repo)
    kind = history.path_kind(tc.git_dir(row), check_ref(ref), path)
    return kind if kind in ("blob", "tree") else None


def blame(tc: ToolContext, repo: str | Repo, path: str, ref: str | None = None) -> BlameAtRef:
    """The blame of `path` at `ref` (default branch): `history.blame`'s ranges and commits, at most
    `history.MAX_BLAME_LINES` lines. `InvalidArgument` for a file too large to blame."""
    row = repo_row(tc, repo)
    check_path(path)
    use_ref = check_ref(ref) if ref is not None else tc.default_ref(row)
    return BlameAtRef(row, path, use_ref, history.blame(tc.git_dir(row), use_ref, path))


def commit_changes(
    tc: ToolContext,
    repo: str | Repo,
    ref: str,
    *,
    path: str | None = None,
    max_files: int = MAX_DIFF_FILES,
    max_bytes: int = MAX_DIFF_BYTES,
) -> CommitChanges:
    """The commit `ref` names and its changes (under `path` when given), cut at the caps."""
    row = repo_row(tc, repo)
    detail, files, truncated, total = history.commit_changes(
        tc.git_dir(row), check_ref(ref), path=path, max_files=max_files, max_bytes=max_bytes
    )
    return CommitChanges(row, detail, files, truncated, total)


def diff(
    tc: ToolContext,
    repo: str | Repo,
    base: str,
    head: str,
    *,
    path: str | None = None,
    max_files: int = MAX_DIFF_FILES,
    max_bytes: int = MAX_DIFF_BYTES,
) -> Diff:
    """The diff from `base` to `head` (under `path` when given), cut at the caps; when it was cut,
    `total_files` is counted by git over the whole change."""
    row = repo_row(tc, repo)
    check_ref(base)
    check_ref(head)
    scope = check_scope(path)
    git_dir = tc.git_dir(row)
    old, new = resolve_commit(git_dir, base), resolve_commit(git_dir, head)
    files, truncated = diff_objects(git_dir, old, new, scope=scope, max_files=max_files, max_bytes=max_bytes)
    total = count_files(git_dir, old, new, scope=scope) if truncated else len(files)
    return Diff(row, base, head, old, new, scope, files, truncated, total)


def commits_between(
    tc: ToolContext, repo: str | Repo, base: str, head: str, *, limit: int = 100
) -> tuple[list[history.CommitDetail], int]:
    """The commits in `head` but not in `base` (``git log base..head``), newest first, at most
    `limit`, and how many there are in all."""
    row = repo_row(tc, repo)
    return history.commits_between(tc.git_dir(row), check_ref(base), check_ref(head), limit=limit)


def list_commits(
    tc: ToolContext,
    repo: str | Repo,
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
    row = repo_row(tc, repo)
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


def list_commit_authors(
    tc: ToolContext,
    repo: str | Repo,
    ref: str | None = None,
    *,
    path: str | None = None,
    page: int = 1,
    per_page: int = 50,
) -> tuple[list[Author], int]:
    """One page of the authors of `repo`'s commits at `ref` (default branch) that changed `path`,
    most commits first, and how many there are (`codesearch.git.commits.list_authors`)."""
    if ref is not None:
        check_ref(ref)
    row = repo_row(tc, repo)
    git_dir, at = tc.git_dir(row), ref or tc.default_ref(row)
    return git_list_authors(git_dir, at, path=path or None, page=page, per_page=per_page)
