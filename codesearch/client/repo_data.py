"""Where the client's local back ends find repositories and read their git data.

- `StoreData`: a service data directory (its state database and git mirrors); every read goes
  through `codesearch.app.git_reads` as the caller, like the HTTP routes and the MCP tools.
- `IndexData`: a bare index directory (``codesearch index``), which has no state database and no
  callers: repositories come from the shards, and git data from the repositories' own git when
  their name is their path (local repositories indexed in place).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

from codesearch.client.results import Commit, FileContent, Repo, TreeEntry
from codesearch.errors import CodesearchError, RepositoryNotFound
from codesearch.search.options import SearchOptions

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.git.commits import Commit as GitCommit
    from codesearch.index.sources import RepoInfo
    from codesearch.permissions import Identity
    from codesearch.search.engine import Searcher

#: A ``POST /api/search`` (or ``/api/explain``) response body.
Response = dict[str, Any]


class RepoData(Protocol):
    """Where a back end that reads git data itself finds repositories (`StoreData`, `IndexData`)."""

    def repos(self, query: str | None, page: int, per_page: int, sort: str, direction: str) -> list[Repo]: ...

    def read_file(self, repo: str, path: str, ref: str | None) -> FileContent: ...

    def tree(self, repo: str, path: str, ref: str | None, depth: int, max_entries: int) -> list[TreeEntry]: ...

    def commits(
        self,
        repo: str,
        ref: str | None,
        query: str | None,
        since: str | None,
        until: str | None,
        author: str | None,
        page: int,
        per_page: int,
    ) -> list[Commit]: ...

    def close(self) -> None: ...


def _no_search(query: str, options: SearchOptions) -> Response:
    raise CodesearchError("a data directory's repositories are read here; searches go to the back end")


class StoreData:
    """Repos, files, trees and commits of a service data directory (its store and mirrors).

    With `as_service` the service's permission rule applies (`codesearch.permissions`): the
    caller is the owner of `api_key`, or anonymous without one. Without it (a data directory of
    one's own, `Client.local`) every repository is visible."""

    def __init__(
        self,
        data_dir: str,
        *,
        as_service: bool = False,
        api_key: str | None = None,
        instance: str = "",
        database: str = "",
    ):
        from codesearch import permissions
        from codesearch.store import Store

        self.data_dir = os.path.abspath(data_dir)
        self.store = Store.open(self.data_dir)
        self.identity = permissions.UNRESTRICTED
        if as_service:
            try:
                self.identity = self._service_identity(api_key, instance, database)
            except BaseException:
                self.store.close()
                raise

    def _service_identity(self, api_key: str | None, instance: str, database: str) -> Identity:
        """The caller, bound to the service's permission rule, once sure this is the service's
        state database: the one it published (`instance`, when it did), holding the rule's
        settings it publishes at start. A database without them (a fresh folder, another
        ``DATABASE_URL``) would show every repository: refused instead."""
        from codesearch import permissions
        from codesearch.errors import NotAuthenticated
        from codesearch.store.settings import INSTANCE_KEY

        found = (self.store.service_setting(INSTANCE_KEY) or {}).get("id")
        if instance and found != instance:
            raise CodesearchError(
                f"{self.store.database} under {self.data_dir} is not the service's state database "
                f"({database or 'another database'}): set DATABASE_URL as the service does, or use "
                "Client.http(url, api_key)"
            )
        if self.store.service_setting(permissions.SETTINGS_KEY) is None:
            raise CodesearchError(
                f"{self.store.database} under {self.data_dir} holds no permission settings of a running "
                "service (is it the service's state database, and has the service started?), so the "
                "service's permissions cannot be applied: use the service's data directory and DATABASE_URL, "
                "or Client.http(url, api_key)"
            )
        user = None
        if api_key:
            user = self.store.verify_api_key(api_key)
            if user is None:
                raise NotAuthenticated("the API key is not valid (unknown or revoked)")
        return permissions.PermissionPolicy(lambda: self.store).identity(user)

    def visible(self) -> frozenset[int] | None:
        from codesearch.permissions import visible_repos

        return visible_repos(self.identity)

    def _tc(self) -> ToolContext:
        """A tool context for the repository lookups of the tools (`repo`, `git_dir`, `default_ref`):
        searches go to the back end, never through it."""
        from codesearch.app.context import ToolContext

        return ToolContext(store=self.store, search_fn=_no_search, data_dir=self.data_dir, identity=self.identity)

    def repos(self, query: str | None, page: int, per_page: int, sort: str, direction: str) -> list[Repo]:
        from codesearch.tools.repos import iso

        allowed = self.visible()
        if allowed is None:
            rows, _total = self.store.list_repos(
                page=page, per_page=per_page, sort=sort, direction=direction, query=query or None
            )
        else:  # page through what the caller may see
            everything, _total = self.store.list_repos(
                page=1, per_page=1_000_000, sort=sort, direction=direction, query=query or None
            )
            seen = [r for r in everything if r.id in allowed]
            rows = seen[(page - 1) * per_page : page * per_page]
        return [
            Repo(r.name, r.display_name or "", r.code_host_type, r.web_url or "", r.default_branch, iso(r.indexed_at))
            for r in rows
        ]

    def read_file(self, repo: str, path: str, ref: str | None) -> FileContent:
        """The file as the caller reads it through every front door (`app.git_reads.read_file`)."""
        from codesearch.app import git_reads

        f = git_reads.read_file(self._tc(), repo, path, ref)
        return _file_content(repo, path, f.ref, f.data)

    def tree(self, repo: str, path: str, ref: str | None, depth: int, max_entries: int) -> list[TreeEntry]:
        from codesearch.app import git_reads

        listing = git_reads.list_tree(self._tc(), repo, path, ref, depth=depth, max_entries=max_entries)
        return [TreeEntry(e.path, e.is_dir, e.depth) for e in listing.entries]

    def commits(
        self,
        repo: str,
        ref: str | None,
        query: str | None,
        since: str | None,
        until: str | None,
        author: str | None,
        page: int,
        per_page: int,
    ) -> list[Commit]:
        from codesearch.app import git_reads

        found, _total = git_reads.list_commits(
            self._tc(), repo, ref, query=query, since=since, until=until, author=author, page=page, per_page=per_page
        )
        return [_commit(c) for c in found]

    def close(self) -> None:
        self.store.close()


class IndexData:
    """Repos of a bare index directory; git data from local repositories named by their path."""

    def __init__(self, searcher: Searcher):
        self.searcher = searcher

    def _infos(self) -> dict[str, RepoInfo]:
        seen: dict[str, RepoInfo] = {}
        for s in self.searcher.shards:
            for r in s.repos:
                seen.setdefault(r.name, r)
        return seen

    def repos(self, query: str | None, page: int, per_page: int, sort: str, direction: str) -> list[Repo]:
        rows = sorted(
            (r for n, r in self._infos().items() if not query or query.lower() in n.lower()),
            key=lambda r: r.name,
            reverse=direction == "desc",
        )
        rows = rows[(page - 1) * per_page : page * per_page]
        return [
            Repo(r.name, r.display_name, r.code_host_type, r.web_url, r.branches[0] if r.branches else None)
            for r in rows
        ]

    def locate(self, repo: str) -> tuple[str, str]:
        from codesearch.git.paths import git_dir_of

        info = self._infos().get(repo)
        if info is None:
            raise RepositoryNotFound(f"repository {repo!r} not found in the index (Client.repos() lists them)")
        path = "/" + repo
        if not os.path.isdir(path):
            raise RepositoryNotFound(
                f"repository {repo!r}: its git data is not on this machine (only local "
                "repositories indexed in place can be read from a bare index directory)"
            )
        head = (info.branches or ["HEAD"])[0]
        return git_dir_of(path), head.removeprefix("refs/heads/")

    def read_file(self, repo: str, path: str, ref: str | None) -> FileContent:
        from codesearch.git.objects import read_blob

        git_dir, default = self.locate(repo)
        use_ref = ref or default
        blob, _commit = read_blob(git_dir, use_ref, path)
        return _file_content(repo, path, use_ref, blob)

    def tree(self, repo: str, path: str, ref: str | None, depth: int, max_entries: int) -> list[TreeEntry]:
        from codesearch.git.paths import check_dir
        from codesearch.git.trees import list_tree

        git_dir, default = self.locate(repo)
        entries, _truncated = list_tree(git_dir, ref or default, check_dir(path), depth=depth, max_entries=max_entries)
        return [TreeEntry(e.path, e.is_dir, e.depth) for e in entries]

    def commits(
        self,
        repo: str,
        ref: str | None,
        query: str | None,
        since: str | None,
        until: str | None,
        author: str | None,
        page: int,
        per_page: int,
    ) -> list[Commit]:
        from codesearch.git.commits import list_commits

        git_dir, default = self.locate(repo)
        found, _total = list_commits(
            git_dir, ref or default, query=query, since=since, until=until, author=author, page=page, per_page=per_page
        )
        return [_commit(c) for c in found]

    def close(self) -> None:
        pass


def _file_content(repo: str, path: str, ref: str, blob: bytes) -> FileContent:
    from codesearch.git.objects import is_binary
    from codesearch.index.language import detect

    if is_binary(blob):
        raise CodesearchError(f"{path} is a binary file ({len(blob)} bytes)")
    return FileContent(repo, path, ref, blob.decode("utf-8", "replace"), detect(path, blob))


def _commit(c: GitCommit) -> Commit:
    return Commit(c.hash, c.date, c.message, c.author_name, c.author_email, c.body, tuple(c.refs))
