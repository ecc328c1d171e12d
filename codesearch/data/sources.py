"""Where a batch searches: an index directory, a running service's searchers over Ray, or a service
by URL. Each source is a small picklable description; its `open` runs inside a read task and
returns the `Runner` that answers that task's queries, a part at a time.

- `IndexSource`: the read task opens the index's shards itself (`Searcher`, without the CRC pass:
  the structure is still checked) and answers a part with `Searcher.files_many`, which shares
  the shards' work between the part's queries; their files become rows straight into the block's
  columns (`rows.Block`). No permissions: whoever reads the directory owns it.
  On a cluster whose nodes do not share a disk, `node_paths` names each node's own copy of the
  index, so a read task opens the copy of the node it runs on (`IndexSource.per_node`).
- `RaySource`: the task attaches to the searchers of a service on this Ray cluster
  (`Client.ray`'s back end) and sends them the part's queries a few at a time; the service's
  permissions apply to the owner of `api_key` (anonymous without), as for `Client.ray`.
- `HttpSource`: the task sends ``POST /api/search`` requests, a few at a time, with `api_key`; the
  service applies its permissions. For a notebook off the cluster.

What a source answers for a query is what ``Client.search`` answers for it through the same back
end, so the rows equal ``Client.search``'s (`codesearch.data.rows`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from codesearch.data import rows
from codesearch.data.queries import QuerySpec
from codesearch.errors import CodesearchError, InvalidArgument, InvalidRequestBody, QueryError, SearchContextNotFound
from codesearch.search.document import FileMatch
from codesearch.search.options import SearchOptions

if TYPE_CHECKING:
    from codesearch.client import Client


@dataclass(frozen=True)
class Found:
    """One query's files over an index (`Searcher.files_many`), ranked and capped: its rows once
    they are added to the block's columns (`rows.Block.add_files`)."""

    files: list[FileMatch]


#: What one query of a part gets: its rows (as dicts read from a service's answer, or its files
#: over an index), or the error that is its alone.
Answer = list[dict[str, Any]] | Found | CodesearchError
#: The errors that belong to one query (its text, its options); any other error stops the batch
#: (the service is down, the key is wrong: every query would fail the same way).
QUERY_ERRORS = (QueryError, SearchContextNotFound, InvalidArgument, InvalidRequestBody)
#: A service's searches are bounded: `timeout_s` None (no limit) means its usual 30 s there.
SERVICE_TIMEOUT_S = SearchOptions().timeout_s


class Runner(Protocol):
    """What answers a read task's queries (inside the task): their rows (`codesearch.data.rows`)."""

    def answer(self, specs: Sequence[QuerySpec], per_file: bool) -> list[Answer]: ...

    def close(self) -> None: ...


class Source(Protocol):
    """A picklable description of where to search."""

    @property
    def contexts_known(self) -> bool:
        """Whether ``context:`` names can be checked before the batch runs (False: the service's)."""
        ...

    @property
    def task_cpus(self) -> float:
        """CPUs a read task reserves: a whole one when it searches, a fraction when it waits on a service."""
        ...

    def open(self) -> Runner: ...


@dataclass(frozen=True)
class IndexSource:
    """An index directory (``codesearch index --out``), or a service data directory (its ``index``)."""

    path: str
    #: Check every shard's CRCs when a task opens it (reads the whole index once per task).
    verify: bool = False
    #: (Ray node id, path of that node's copy of the index) pairs: a read task on one of these
    #: nodes opens its node's copy, on any other node `path`. A tuple, so the source stays
    #: hashable and picklable as it is.
    node_paths: tuple[tuple[str, str], ...] = ()
    contexts_known: ClassVar[bool] = True
    task_cpus: ClassVar[float] = 1.0

    @classmethod
    def per_node(cls, paths: Mapping[str, str], default: str, verify: bool = False) -> IndexSource:
        """An index of which each node keeps its own copy: `paths` maps Ray node ids to the copy's
        directory on that node (nodes without a data directory in common), `default` is the
        directory on every other node."""
        for node, path in paths.items():
            if not node or not path:
                raise InvalidArgument(f"per-node index copies: node {node!r} → path {path!r}: both must be non-empty")
        return cls(default, verify, tuple(sorted(paths.items())))

    def local_path(self) -> str:
        """The directory this process opens: its node's copy when `node_paths` names its node."""
        if not self.node_paths:
            return self.path
        import ray

        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
        return dict(self.node_paths).get(node or "", self.path)

    def open(self) -> Runner:
        return _IndexRunner(self.local_path(), self.verify)


@dataclass(frozen=True)
class HttpSource:
    """A running service by URL, as the owner of `api_key`."""

    url: str
    api_key: str | None = None
    timeout_s: float = 60.0
    #: Requests a read task keeps in flight.
    in_flight: int = 4
    contexts_known: ClassVar[bool] = False
    task_cpus: ClassVar[float] = 0.25

    def open(self) -> Runner:
        from codesearch.client.backends import HttpBackend

        backend = HttpBackend(self.url, self.api_key, timeout_s=self.timeout_s)
        return _ServiceRunner(backend.search, backend.close, self.in_flight)


@dataclass(frozen=True)
class RaySource:
    """The searchers of a service on the Ray cluster this process is attached to, as the owner of
    `api_key`."""

    name_prefix: str = "codesearch-searcher"
    data_dir: str | None = None
    api_key: str | None = None
    in_flight: int = 4
    contexts_known: ClassVar[bool] = True
    task_cpus: ClassVar[float] = 0.25

    def open(self) -> Runner:
        from codesearch.client.backends import RayBackend

        backend = RayBackend(self.name_prefix, self.data_dir, api_key=self.api_key)
        return _ServiceRunner(backend.search, backend.close, self.in_flight)


def source_of(source: str | os.PathLike[str] | Client | Source, api_key: str | None = None) -> Source:
    """What `codesearch.data.search` was given as a `Source`: an ``http(s)://`` URL, a directory
    (an index, or a service data directory), a `codesearch.Client`, or a source already."""
    from codesearch.client import Client
    from codesearch.client.backends import HttpBackend, LocalBackend, RayBackend

    if isinstance(source, (IndexSource, HttpSource, RaySource)):
        return source
    if isinstance(source, Client):
        backend = source.backend
        if isinstance(backend, LocalBackend):
            return IndexSource(backend.searcher.index_dir)
        if isinstance(backend, HttpBackend):
            return HttpSource(backend.url, api_key or backend.api_key, backend.timeout_s)
        if isinstance(backend, RayBackend):
            return RaySource(backend.name_prefix, backend.data_dir, api_key or backend.api_key)
        raise InvalidArgument(f"a batch cannot search through a {type(backend).__name__}")
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if text.startswith(("http://", "https://")):
            return HttpSource(text.rstrip("/"), api_key)
        path = os.path.abspath(os.path.expanduser(text))
        if os.path.isdir(os.path.join(path, "index")):
            path = os.path.join(path, "index")
        if not os.path.isdir(path):
            raise InvalidArgument(f"{text}: no such index directory (and not an http:// or https:// URL)")
        return IndexSource(path)
    raise InvalidArgument(
        "source is an index directory, a service URL, a codesearch.Client or a codesearch.data source, "
        f"not {type(source).__name__}"
    )


class _IndexRunner:
    def __init__(self, path: str, verify: bool):
        from codesearch.search.engine import Searcher

        self.searcher = Searcher(path, verify=verify)

    def answer(self, specs: Sequence[QuerySpec], per_file: bool) -> list[Answer]:
        found = self.searcher.files_many([(s.query, s.options) for s in specs])
        return [f if isinstance(f, CodesearchError) else Found(f) for f in found]

    def close(self) -> None:
        self.searcher.close()


class _ServiceRunner:
    """Queries sent one by one to a service's back end, `in_flight` at a time."""

    def __init__(
        self, search: Callable[[str, SearchOptions], dict[str, Any]], close: Callable[[], None], in_flight: int
    ):
        self.search = search
        self._close = close
        self.pool = ThreadPoolExecutor(max(1, in_flight), thread_name_prefix="codesearch-batch")

    def _one(self, spec: QuerySpec, per_file: bool) -> Answer:
        options = spec.options
        if math.isinf(options.timeout_s):
            options = replace(options, timeout_s=SERVICE_TIMEOUT_S)
        try:
            return rows.rows_of(spec, self.search(spec.query, options), per_file)
        except QUERY_ERRORS as e:
            return e

    def answer(self, specs: Sequence[QuerySpec], per_file: bool) -> list[Answer]:
        return list(self.pool.map(lambda spec: self._one(spec, per_file), specs))

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        self._close()
