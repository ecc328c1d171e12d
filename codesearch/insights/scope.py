"""Which repositories an insight counts in, and where their git objects are.

An insight names its repositories (full names, ``github.com/org/repo``) or gives a ``repo:``
filter (a regular expression over the names, case-insensitive, as the query language's
``repo:`` is). Either is resolved against the state store's repositories, then narrowed to the
ones a caller may see (`visible`: `codesearch.permissions.visible_repos`), so an insight never
counts in a repository its owner could not search.

A repository's git objects are where the service reads them for every caller (the same rule
as `codesearch.app.context.ToolContext.git_dir`): a local repository indexed in place is read
in place, any other from its bare mirror ``<data_dir>/repos/<id>``; one not cloned yet is
left out, and said so (`Scope.missing`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codesearch.errors import InvalidArgument
from codesearch.git.paths import git_dir_of
from codesearch.insights.engine import RepoTarget
from codesearch.query.regex import RegexError, compile_regex

if TYPE_CHECKING:
    from codesearch.store import Store
    from codesearch.store.models import Repo

__all__ = ["Scope", "all_repos", "git_dir_for", "matching", "resolve_scope", "target_of"]


def all_repos(store: Store) -> Iterator[Repo]:
    """Every repository row of the store, by name."""
    page = 1
    while True:
        rows, total = store.list_repos(page=page, per_page=200)
        yield from rows
        if not rows or page * 200 >= total:
            return
        page += 1


def matching(repo_filter: str) -> Callable[[str], bool]:
    """Whether a ``repo:`` filter selects a name; InvalidArgument when it does not compile."""
    try:
        rx = compile_regex(repo_filter, False)
    except RegexError as e:
        raise InvalidArgument(f"repository filter {repo_filter!r}: {e}") from None
    return lambda name: rx.search(name.encode("utf-8"))


def git_dir_for(repo: Repo, data_dir: str | None) -> str | None:
    """Where `repo`'s git objects are (see the module docstring); None when not cloned yet."""
    if repo.local_path and os.path.isdir(repo.local_path):
        return git_dir_of(repo.local_path)
    if data_dir:
        path = os.path.join(data_dir, "repos", str(repo.id))
        if os.path.isdir(path):
            return path
    return None


def target_of(repo: Repo, git_dir: str) -> RepoTarget:
    """The engine's view of a repository row."""
    return RepoTarget(repo.name, git_dir, id=repo.id, archived=repo.archived, fork=repo.fork, public=repo.public)


@dataclass
class Scope:
    """The repositories to count in (`targets`, by name), and those left out because they have
    no clone yet (`missing`, names)."""

    targets: list[RepoTarget] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def resolve_scope(
    store: Store,
    data_dir: str | None,
    *,
    names: Iterable[str] = (),
    repo_filter: str | None = None,
    visible: frozenset[int] | None = None,
    limit: int | None = None,
) -> Scope:
    """The repositories `names` lists (unknown ones are skipped) or, without names,
    `repo_filter` selects (every repository without either), among those `visible` allows (None:
    all), at most `limit` (the first by name)."""
    wanted = set(names)
    selects = matching(repo_filter) if repo_filter and not wanted else None
    scope = Scope()
    for repo in all_repos(store):
        if wanted and repo.name not in wanted or selects is not None and not selects(repo.name):
            continue
        if visible is not None and repo.id not in visible:
            continue
        if limit is not None and len(scope.targets) + len(scope.missing) >= limit:
            break
        git_dir = git_dir_for(repo, data_dir)
        if git_dir is None:
            scope.missing.append(repo.name)
        else:
            scope.targets.append(target_of(repo, git_dir))
    return scope
