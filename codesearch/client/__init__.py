"""`codesearch.Client`: search and read code from Python and notebooks, with one API over three
back ends (`codesearch.client.backends`): the engine in-process over an index directory, a
running service over HTTP, or the shard searchers of a Ray cluster this process is attached to.

    cs = Client.local("~/.codesearch/index")            # in-process, no Ray
    cs = Client.http("http://cs:3000", api_key="cs_…")  # a running service
    ray.init(address="ray://head:10001"); cs = Client.ray()   # the cluster's searchers, no HTTP

    res = cs.search("retry lang:go", matches=500)       # SearchResult: iterate Matches, .to_pandas()
    cs.explain("retry lang:go")                         # plan, trigrams, candidates per shard, cost
    cs.read_file("github.com/acme/api", "main.go")
    cs.tree("github.com/acme/api", depth=2); cs.commits("github.com/acme/api", since="30 days ago")

Errors are the engine's exceptions (`codesearch.errors`) whatever the back end: a bad query is a
`QueryError`, an unknown repo `RepositoryNotFound`, a bad key `NotAuthenticated`.
"""

from __future__ import annotations

from collections.abc import Iterator

from codesearch.client import backends
from codesearch.client.results import (  # noqa: F401  (the public result types)
    Commit,
    Explanation,
    FileContent,
    FileResult,
    Match,
    Repo,
    RepoList,
    SearchResult,
    TreeEntry,
)
from codesearch.search.options import SearchOptions

__all__ = [
    "Client",
    "Commit",
    "Explanation",
    "FileContent",
    "FileResult",
    "Match",
    "Repo",
    "RepoList",
    "SearchResult",
    "TreeEntry",
]


class Client:
    """See the module docstring. Build one with `local`, `http` or `ray`."""

    def __init__(self, backend: backends.Backend):
        self.backend = backend

    @classmethod
    def local(cls, path: str) -> Client:
        """The engine in this process over `path`: an index directory (``codesearch index --out``)
        or a service data directory (``codesearch serve --data-dir``)."""
        import os

        return cls(backends.LocalBackend(os.path.expanduser(path)))

    @classmethod
    def http(cls, url: str, api_key: str | None = None, *, timeout_s: float = 60.0) -> Client:
        """A running service (``http://host:3000``); `api_key` unless it allows anonymous access."""
        return cls(backends.HttpBackend(url, api_key, timeout_s=timeout_s))

    @classmethod
    def ray(
        cls, name_prefix: str = "codesearch-searcher", *, data_dir: str | None = None, api_key: str | None = None
    ) -> Client:
        """The searchers of the codesearch service on the Ray cluster this process is attached to.
        The service's permissions apply as over HTTP: the caller is the owner of `api_key`, else
        anonymous (public repositories only while permission syncing is on)."""
        return cls(backends.RayBackend(name_prefix, data_dir, api_key=api_key))

    # ------------------------------------------------------------------ search

    def search(
        self,
        query: str,
        *,
        regex: bool = False,
        case_sensitive: bool = False,
        matches: int = 100,
        context_lines: int = 0,
        whole: bool = False,
        stream: bool = False,
        timeout_s: float = 30.0,
    ) -> SearchResult | Iterator[SearchResult]:
        """Search (the query language of the service). With `stream`, an iterator of partial
        results as searchers answer (together, at most `matches` match ranges)."""
        options = SearchOptions(
            matches=matches,
            context_lines=context_lines,
            whole=whole,
            is_regex=regex,
            case_sensitive=case_sensitive,
            timeout_s=timeout_s,
        )
        if stream:
            return (SearchResult(r, query) for r in self.backend.stream(query, options))
        return SearchResult(self.backend.search(query, options), query)

    def explain(self, query: str, *, regex: bool = False, case_sensitive: bool = False) -> Explanation:
        """How the query is planned and what it costs, per shard, without running it."""
        options = SearchOptions(is_regex=regex, case_sensitive=case_sensitive)
        return Explanation(self.backend.explain(query, options))

    # ------------------------------------------------------------------ repos and git data

    def repos(
        self,
        query: str | None = None,
        *,
        page: int = 1,
        per_page: int = 100,
        sort: str = "name",
        direction: str = "asc",
    ) -> RepoList:
        """Indexed repositories (name filter `query`, case-insensitive)."""
        return RepoList(self.backend.repos(query, page, per_page, sort, direction))

    def read_file(self, repo: str, path: str, ref: str | None = None) -> FileContent:
        """A file at `ref` (default: the repo's default branch): any branch, tag or commit."""
        return self.backend.read_file(repo, path, ref)

    def tree(
        self, repo: str, path: str = "", *, ref: str | None = None, depth: int = 1, max_entries: int = 1000
    ) -> list[TreeEntry]:
        """Files and directories below `path`, directories first at each level."""
        return self.backend.tree(repo, path, ref, depth, max_entries)

    def commits(
        self,
        repo: str,
        *,
        ref: str | None = None,
        query: str | None = None,
        since: str | None = None,
        until: str | None = None,
        author: str | None = None,
        page: int = 1,
        per_page: int = 50,
    ) -> list[Commit]:
        """Commits newest first; `since`/`until` take ISO 8601 or ``30 days ago``."""
        return self.backend.commits(repo, ref, query, since, until, author, page, per_page)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self.backend.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
