"""The Ray Serve application: a FastAPI ingress built inside each replica.

`search_application(...)` returns a bound Serve application whose replicas attach to the named
shard searchers started by `SearcherPool.create(..., name_prefix=...)`. Replicas and
`max_ongoing_requests` are configurable (ENGINEERING.md §3: Serve's default of 5 ongoing
requests collapses under 32 clients; 64 is the default here).
"""

from __future__ import annotations

from ray import serve

from codesearch.runtime.searchers import SearcherPool
from codesearch.search.options import DEFAULT_PUBLIC_URL
from codesearch.service.api import build_app


def _builder(name_prefix: str, searchers: int, public_url: str, contexts: dict | None):
    def build():
        pool: dict[str, SearcherPool] = {}

        def get_searcher() -> SearcherPool:
            if "pool" not in pool:
                pool["pool"] = SearcherPool.attach(name_prefix, searchers)
            return pool["pool"]

        return build_app(get_searcher, public_url=public_url, contexts=contexts)

    return build


def search_application(name_prefix: str, searchers: int, *, replicas: int = 1, max_ongoing_requests: int = 64,
                       public_url: str = DEFAULT_PUBLIC_URL, contexts: dict | None = None):
    """A bound Serve application serving the HTTP API over the named searchers."""

    @serve.deployment(name="codesearch-api", num_replicas=replicas, max_ongoing_requests=max_ongoing_requests,
                      ray_actor_options={"num_cpus": 0})
    @serve.ingress(_builder(name_prefix, searchers, public_url, contexts))
    class CodesearchAPI:
        pass

    return CodesearchAPI.bind()
