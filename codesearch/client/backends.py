"""The three back ends of `codesearch.Client`, one interface:

- `LocalBackend`: the engine in this process over an index directory (no Ray, no server). Given
  a service data directory (``<data>/index`` plus its state database and git mirrors), repos,
  files, trees and commits come from there; given a bare index directory (``codesearch index``),
  repos come from the shards and files from the repositories' own git when their name is their
  path (local repos), else from the indexed content.
- `HttpBackend`: a running service by URL with an API key (``POST /api/search``,
  ``/api/stream_search``, ``/api/explain``, ``GET /api/repos``, ``/api/source``, ``/api/tree``,
  ``/api/commits``); error bodies become the engine's exceptions (`error_from_payload`).
- `RayBackend`: the shard searchers of a service on the Ray cluster this process is attached to
  (``ray.init(address=...)``), called directly, no HTTP; repos and git data from the service's data
  directory, found in the runtime's registry (`published_deployment`), which must be reachable from here
  (shared storage, or the head node).

Every back end answers searches with the ``POST /api/search`` dict; `Client` wraps it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from codesearch.client.results import Commit, FileContent, Repo, TreeEntry
from codesearch.errors import CodesearchError, RepositoryNotFound, error_from_payload
from codesearch.search.options import SearchOptions

if TYPE_CHECKING:
    import httpx

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


class Backend(Protocol):
    """What `codesearch.Client` asks of a back end (`LocalBackend`, `HttpBackend`, `RayBackend`)."""

    def search(self, query: str, options: SearchOptions) -> Response: ...

    def stream(self, query: str, options: SearchOptions) -> Iterator[Response]: ...

    def explain(self, query: str, options: SearchOptions) -> Response: ...

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


# ---------------------------------------------------------------------- repo data


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


class GitDataMixin:
    """repos / read_file / tree / commits of a back end that reads the data itself (`_data()`)."""

    def _data(self) -> RepoData:
        raise NotImplementedError

    def repos(self, query: str | None, page: int, per_page: int, sort: str, direction: str) -> list[Repo]:
        return self._data().repos(query, page, per_page, sort, direction)

    def read_file(self, repo: str, path: str, ref: str | None) -> FileContent:
        return self._data().read_file(repo, path, ref)

    def tree(self, repo: str, path: str, ref: str | None, depth: int, max_entries: int) -> list[TreeEntry]:
        return self._data().tree(repo, path, ref, depth, max_entries)

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
        return self._data().commits(repo, ref, query, since, until, author, page, per_page)


# ---------------------------------------------------------------------- back ends


class LocalBackend(GitDataMixin):
    def __init__(self, path: str):
        from codesearch.search.engine import Searcher

        path = os.path.abspath(path)
        self.data: StoreData | IndexData
        if os.path.isdir(os.path.join(path, "index")):  # a service data directory
            self.searcher = Searcher(os.path.join(path, "index"))
            self.data = StoreData(path)
        else:
            self.searcher = Searcher(path)
            self.data = IndexData(self.searcher)

    def _data(self) -> RepoData:
        return self.data

    def search(self, query: str, options: SearchOptions) -> Response:
        self.searcher.reload()
        return self.searcher.search(query, options=options)

    def stream(self, query: str, options: SearchOptions) -> Iterator[Response]:
        yield self.search(query, options)

    def explain(self, query: str, options: SearchOptions) -> Response:
        from codesearch.search.engine import make_plan
        from codesearch.search.explain import explain
        from codesearch.search.visibility import visible_shards

        self.searcher.reload()
        return explain(make_plan(query, options), visible_shards(list(self.searcher.shards), options.visible_repos))

    def close(self) -> None:
        self.data.close()
        self.searcher.close()


class RayBackend(GitDataMixin):
    def __init__(
        self,
        name_prefix: str = "codesearch-searcher",
        data_dir: str | None = None,
        searchers: int | None = None,
        api_key: str | None = None,
    ):
        import ray

        from codesearch.runtime import registry
        from codesearch.runtime.searchers import SearcherPool, published_deployment

        if not ray.is_initialized():
            raise CodesearchError("not attached to a Ray cluster: call ray.init(address=...) first")
        found = published_deployment(name_prefix) or {}
        searchers = searchers or found.get("searchers")
        if not searchers:
            raise CodesearchError(
                f"no codesearch service with searchers {name_prefix!r} on this Ray cluster "
                "(is `codesearch serve` running on it?)"
            )
        data_dir = data_dir or found.get("data_dir")
        reachable_dir: str | None = data_dir if data_dir and os.path.isdir(data_dir) else None
        if reachable_dir is None and (api_key or registry.get_permissions_enabled(name_prefix) is not False):
            # without the state database neither the key nor the rule can be checked: searching
            # anyway would show every repository, so refuse unless the service said it has no rule
            raise CodesearchError(
                f"the service's data directory {data_dir!r} is not reachable from this machine, so "
                "its permissions cannot be applied: pass data_dir= (shared storage) or use "
                "Client.http(url, api_key)"
            )
        self.pool = SearcherPool.attach(name_prefix, int(searchers))
        self.data = (
            StoreData(
                reachable_dir,
                as_service=True,
                api_key=api_key,
                instance=found.get("instance") or "",
                database=found.get("database") or "",
            )
            if reachable_dir is not None
            else None
        )
        self.data_dir = data_dir

    def _options(self, options: SearchOptions) -> SearchOptions:
        """`options` restricted to what the caller may see (the service's rule)."""
        import dataclasses

        allowed = self.data.visible() if self.data is not None else None
        return options if allowed is None else dataclasses.replace(options, visible_repos=allowed)

    def _filter(self, response: Response) -> Response:
        from codesearch.permissions import filter_search_response

        return response if self.data is None else filter_search_response(self.data.identity, response)

    def _data(self) -> RepoData:
        if self.data is None:
            raise CodesearchError(
                f"the service's data directory {self.data_dir!r} is not reachable from this "
                "machine: pass data_dir= (shared storage) to read repos, files and history"
            )
        return self.data

    def search(self, query: str, options: SearchOptions) -> Response:
        return self._filter(self.pool.search(query, self._options(options)))

    def stream(self, query: str, options: SearchOptions) -> Iterator[Response]:
        """One response per searcher as it answers (the match budget holds across them)."""
        import time

        from codesearch.app.search import StreamMerger

        options = self._options(options)
        merger = StreamMerger(options, time.perf_counter_ns())
        for partial in self.pool.fan_out(query, options).partials():
            chunk = self._filter(merger.chunk(partial))
            yield {
                "files": chunk["files"],
                "stats": chunk["stats"],
                "repositoryInfo": chunk["repositoryInfo"],
                "isSearchExhaustive": not merger.truncated,
            }

    def explain(self, query: str, options: SearchOptions) -> Response:
        return self.pool.explain(query, self._options(options))

    def close(self) -> None:
        if self.data is not None:
            self.data.close()


class HttpBackend:
    def __init__(
        self, url: str, api_key: str | None = None, *, timeout_s: float = 60.0, http: httpx.Client | None = None
    ):
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.url = url.rstrip("/")
        self.http = http or httpx.Client(base_url=self.url, headers=headers, timeout=timeout_s)

    def _check(self, r: httpx.Response) -> Any:
        """The JSON body of `r`, or its error body raised as the engine's exception."""
        if r.status_code >= 400:
            try:
                payload = r.json()
            except ValueError:
                payload = {
                    "statusCode": r.status_code,
                    "errorCode": "UNEXPECTED_ERROR",
                    "message": f"{self.url} answered {r.status_code}",
                }
            raise error_from_payload(payload)
        return r.json()

    @staticmethod
    def _body(query: str, options: SearchOptions) -> Response:
        return {
            "query": query,
            "matches": options.matches,
            "contextLines": options.context_lines,
            "whole": options.whole,
            "isRegexEnabled": options.is_regex,
            "isCaseSensitivityEnabled": options.case_sensitive,
            "source": "codesearch-python-client",
        }

    def search(self, query: str, options: SearchOptions) -> Response:
        got: Response = self._check(self.http.post("/api/search", json=self._body(query, options)))
        return got

    def stream(self, query: str, options: SearchOptions) -> Iterator[Response]:
        with self.http.stream("POST", "/api/stream_search", json=self._body(query, options)) as r:
            if r.status_code >= 400:
                r.read()
                self._check(r)
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[len("data: ") :]
                if data == "[DONE]":
                    return
                event = json.loads(data)
                if event.get("type") == "chunk":
                    yield {
                        "files": event["files"],
                        "stats": event["stats"],
                        "repositoryInfo": event["repositoryInfo"],
                        "isSearchExhaustive": True,
                    }
                elif event.get("type") == "error":
                    raise error_from_payload(event["error"])

    def explain(self, query: str, options: SearchOptions) -> Response:
        got: Response = self._check(
            self.http.post(
                "/api/explain",
                json={
                    "query": query,
                    "isRegexEnabled": options.is_regex,
                    "isCaseSensitivityEnabled": options.case_sensitive,
                },
            )
        )
        return got

    def repos(self, query: str | None, page: int, per_page: int, sort: str, direction: str) -> list[Repo]:
        params: dict[str, str | int] = {"page": page, "perPage": per_page, "sort": sort, "direction": direction}
        if query:
            params["query"] = query
        return [
            Repo(
                r["repoName"],
                r.get("repoDisplayName", ""),
                r.get("codeHostType", ""),
                r.get("externalWebUrl", ""),
                r.get("defaultBranch"),
                r.get("indexedAt"),
            )
            for r in self._check(self.http.get("/api/repos", params=params))
        ]

    def read_file(self, repo: str, path: str, ref: str | None) -> FileContent:
        params = {"repo": repo, "path": path, **({"ref": ref} if ref else {})}
        got = self._check(self.http.get("/api/source", params=params))
        if got.get("isBinary"):
            raise CodesearchError(f"{path} is a binary file ({got.get('size')} bytes)")
        return FileContent(repo, path, got.get("ref") or ref or "", got["source"], got.get("language", ""))

    def tree(self, repo: str, path: str, ref: str | None, depth: int, max_entries: int) -> list[TreeEntry]:
        params: dict[str, str | int] = {
            "repo": repo,
            "path": path or "",
            "depth": depth,
            "maxEntries": max_entries,
            **({"ref": ref} if ref else {}),
        }
        got = self._check(self.http.get("/api/tree", params=params))
        return [TreeEntry(e["path"], e["type"] == "tree", e["depth"]) for e in got["entries"]]

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
        fields: dict[str, str | int | None] = {
            "repo": repo,
            "ref": ref,
            "query": query,
            "since": since,
            "until": until,
            "author": author,
            "page": page,
            "perPage": per_page,
        }
        params = {k: v for k, v in fields.items() if v is not None}
        got = self._check(self.http.get("/api/commits", params=params))
        return [
            Commit(
                c["hash"],
                c["date"],
                c["message"],
                c["authorName"],
                c["authorEmail"],
                c.get("body", ""),
                tuple(c.get("refs") or ()),
            )
            for c in got["commits"]
        ]

    def close(self) -> None:
        self.http.close()
