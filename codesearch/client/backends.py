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

from codesearch.client.repo_data import IndexData, RepoData, Response, StoreData
from codesearch.client.results import Commit, FileContent, Repo, TreeEntry
from codesearch.errors import CodesearchError, error_from_payload
from codesearch.search.options import SearchOptions

if TYPE_CHECKING:
    import httpx


class Backend(RepoData, Protocol):
    """What `codesearch.Client` asks of a back end (`LocalBackend`, `HttpBackend`, `RayBackend`): the
    searches, and the repositories and their git data as a `RepoData` answers them."""

    def search(self, query: str, options: SearchOptions) -> Response: ...

    def stream(self, query: str, options: SearchOptions) -> Iterator[Response]: ...

    def explain(self, query: str, options: SearchOptions) -> Response: ...


# ---------------------------------------------------------------------- repo data


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
        #: (kept so that a batch, `codesearch.data`, can attach to the same searchers in its read tasks)
        self.name_prefix = name_prefix
        self.api_key = api_key
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
        #: (kept so that a batch, `codesearch.data`, can open the same service in its read tasks)
        self.api_key = api_key
        self.timeout_s = timeout_s
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
                _ref_names(c.get("refs") or ""),
            )
            for c in got
        ]

    def close(self) -> None:
        self.http.close()


def _ref_names(decoration: str) -> tuple[str, ...]:
    """Branch and tag names from the ``refs`` of ``GET /api/commits`` (``"HEAD -> main, tag: v1.0"``)."""
    names = (item.strip().removeprefix("HEAD -> ").removeprefix("tag: ") for item in decoration.split(","))
    return tuple(n for n in names if n and n != "HEAD")
