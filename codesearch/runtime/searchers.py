"""The searcher pool: Ray actors over the shards of an index directory, and the fan-out of a search.

`SearcherPool` creates the searchers (`codesearch.runtime.shard_searcher.ShardSearcher` actors),
balances shards over them by size (`published.balance`), and sends a search to them
(`codesearch.runtime.fanout.Fanout`: the answers as they arrive; the caller merges). A searcher
that fails or does not answer in time is counted in `stats.crashes`; the others' answers are
returned, never a hang.

Partitions and copies. A pool is ``copies × partitions`` actors: actor ``i`` holds partition
``i % partitions`` of the shards. Partitioning divides the work of one search (an expensive,
exhaustive query; an index bigger than one node's memory); copies divide the requests (each
search goes to one copy, round robin), which is what raises the throughput of cheap, capped
queries, and a copy stands in for a twin that died (`Fanout` retries that partition once on
another copy). The layout is recorded in the `registry` under the pool's name so `attach` finds
it (`codesearch.runtime.published`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
import uuid
from typing import TYPE_CHECKING, Any

from codesearch.runtime import NAMESPACE, registry
from codesearch.runtime.fanout import Fanout, request_kwargs
from codesearch.runtime.published import (
    VersionWatch,
    balance,
    publish_layout,
    publish_shard_lists,
    publish_version,
    published_copies,
    published_shard_lists,
    shard_files,
)
from codesearch.runtime.registry import ShardSpec
from codesearch.runtime.search_link import Links
from codesearch.runtime.shard_searcher import SEARCH_CONCURRENCY, ShardSearcher
from codesearch.search.engine import INLINE_PLAN_CHARS, check_query, make_plan, merge_partials, names_identifier
from codesearch.search.options import SearchOptions

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from codesearch.query import ast
    from codesearch.search.protocol import PartialStream, Streamer

log = logging.getLogger(__name__)


class SearcherPool:
    """Ray actors over the shards of an index directory, and the fan-out/merge of a search.

    Searchers are supervised by Ray (``max_restarts=-1``): a searcher that dies is restarted and
    loads its partition of the published index version by itself (see `ShardSearcher`); while it
    is down, its partition is answered by a twin copy when there is one, else counted in
    ``stats.crashes`` (and its shards in ``shardsSkipped``) and the answer is not exhaustive.
    """

    def __init__(self, actors: list[ActorHandle[Any]], version_key: str | None = None, copies: int = 1):
        if copies < 1 or len(actors) % copies:
            raise ValueError(f"{len(actors)} searchers cannot form {copies} equal copies")
        self.actors = actors
        self.copies = copies
        self.partitions = len(actors) // copies
        self._shard_lists: dict[int, list[list[ShardSpec]]] = {}  # version → its published shard lists
        #: Names this pool's published index version (pools are told apart by their name prefix).
        self.version_key = version_key or uuid.uuid4().hex
        #: The index version its searches name (no registry read per search).
        self.version_watch = VersionWatch(self.version_key)
        self._turn = itertools.count()
        #: Set by `attach`: the names to look the actors up again by (`reattach`).
        self._names: tuple[str, int] | None = None
        self._stale = False
        self._reattached_at = float("-inf")
        #: The searchers' local links, for searches started on an event loop (`start`).
        self.links = Links()

    @classmethod
    def create(
        cls,
        index_dir: str,
        searchers: int = 2,
        *,
        copies: int = 1,
        name_prefix: str | None = None,
        actor_options: dict[str, Any] | None = None,
        keep_empty: bool = False,
        copy_to: str | None = None,
        source: str | None = None,
    ) -> SearcherPool:
        """Start ``copies × searchers`` actors over the shards of `index_dir`: `searchers`
        partitions, each held by `copies` actors (spread over the nodes unless `actor_options`
        says otherwise). Named when `name_prefix` is given, so that every Serve replica can
        `attach` to the same searchers. Partitions that would own no shard are not started,
        unless `keep_empty` (an index that will grow: `refresh` spreads shards over the existing
        actors only). The initial lists are published as the pool's first index version (so
        re-used named actors get them too, and a restarted searcher finds them).

        `copy_to` and `source`: searchers on nodes without the data directory keep verified
        copies of their shards in ``<copy_to>/<name prefix>-<i>`` (a directory of their node),
        fetched through Ray from the `shard_copy.ShardSource` actor named `source`."""
        import ray

        if copies < 1 or searchers < 1:
            raise ValueError(f"need at least one searcher and one copy, not {searchers} × {copies}")
        groups = balance(shard_files(index_dir) if os.path.isdir(index_dir) else [], searchers)
        if not keep_empty:
            groups = [g for g in groups if g] or [[]]
        key = name_prefix or uuid.uuid4().hex
        base = {
            "num_cpus": 0,
            "max_restarts": -1,
            "max_task_retries": 0,
            "max_concurrency": SEARCH_CONCURRENCY,
            **({"scheduling_strategy": "SPREAD"} if copies > 1 else {}),
            **(actor_options or {}),
        }
        actors: list[ActorHandle[Any]] = []
        for i in range(copies * len(groups)):
            opts = dict(base)
            if name_prefix:
                opts["name"] = f"{name_prefix}-{i}"
                opts["namespace"] = NAMESPACE
            p = i % len(groups)
            fetch = {"copy_to": os.path.join(copy_to, f"{key}-{i}"), "source": source} if copy_to else {}
            actor = ray.remote(ShardSearcher).options(**opts).remote(groups[p], origin=p, pool_key=key, **fetch)
            actors.append(actor)  # type: ignore[arg-type]  # Ray's stubs: a handle "or the class", it is a handle
        ray.get([a.ping.remote() for a in actors])
        if name_prefix:
            publish_layout(name_prefix, partitions=len(groups), copies=copies)
        pool = cls(actors, version_key=key, copies=copies)
        pool.assign(groups)
        return pool

    @classmethod
    def attach(cls, name_prefix: str, count: int) -> SearcherPool:
        """The `count` named searchers started by `create` (from another process, e.g. a Serve
        replica), in the layout `create` recorded."""
        import ray

        pool = cls(
            [ray.get_actor(f"{name_prefix}-{i}", namespace=NAMESPACE) for i in range(count)],
            version_key=name_prefix,
            copies=published_copies(name_prefix, count),
        )
        pool._names = (name_prefix, count)
        pool.version_watch.refresh()  # here, where a registry read may wait, not in the first search
        return pool

    #: Seconds between two look-ups of the actors of an attached pool whose searchers died.
    REATTACH_EVERY_S = 1.0

    def current_version(self) -> int | None:
        """The index version searches name now (`published.VersionWatch`: no registry read per search)."""
        return self.version_watch.get()

    def next_turn(self) -> int:
        """The round-robin turn of a new search: which copy it starts on."""
        return next(self._turn)

    def searcher_died(self) -> None:
        """A searcher of this pool is gone for good (its owner, the runtime, ended: a redeploy,
        a restart): an attached pool looks its actors up by name again before the next search."""
        if self._names is not None:
            self._stale = True

    def reattach(self) -> None:
        """Look the named actors up again (the runtime that replaced the old one started new
        ones under the same names), at most every `REATTACH_EVERY_S`; on failure the old handles
        stay and the next search tries again."""
        import ray

        if not self._stale or self._names is None or time.monotonic() - self._reattached_at < self.REATTACH_EVERY_S:
            return
        self._reattached_at = time.monotonic()
        prefix, count = self._names
        try:
            actors = [ray.get_actor(f"{prefix}-{i}", namespace=NAMESPACE) for i in range(count)]
        except ValueError:  # not started yet
            return
        copies = published_copies(prefix, count)
        self.actors, self.copies, self.partitions = actors, copies, count // copies
        self._shard_lists = {}
        self._stale = False
        log.info("searchers %s looked up again (%d, %d copies)", prefix, count, copies)

    def copy(self, turn: int | None = None) -> list[ActorHandle[Any]]:
        """The actors of one copy (one per partition): the next one round robin, or copy `turn`."""
        if self._stale:
            self.reattach()
        c = (next(self._turn) if turn is None else turn) % self.copies
        return self.actors[c * self.partitions : (c + 1) * self.partitions]

    def refresh(self, index_dir: str) -> None:
        """Re-balance the index's current shards over the partitions and send every searcher its
        partition's list (after a re-index or garbage collection). Each searcher swaps its list
        at once; a search already running on a searcher finishes on its old list."""
        self.assign(balance(shard_files(index_dir), self.partitions))

    def assign(self, groups: list[list[ShardSpec]]) -> int:
        """Give partition ``i`` the shard files ``groups[i]`` as a new index version: recorded
        first (for restarts), then sent to every searcher, then published for searches.
        Returns the version."""
        import ray

        version = time.time_ns()
        publish_shard_lists(self.version_key, version, groups)
        ray.get(
            [
                a.set_shards.remote(groups[i % self.partitions], version, i % self.partitions)
                for i, a in enumerate(self.actors)
            ]
        )
        publish_version(self.version_key, version)  # only now: every searcher holds the new lists
        self.version_watch.set(version)
        return version

    def shard_count(self, partition: int, version: int | None) -> int:
        """How many shards `partition` holds in `version` (0 when unknown). A version's lists
        never change once published, so they are read from the registry once per version."""
        cache = self._shard_lists
        parts: list[list[ShardSpec]] | None
        if version is not None and version in cache:
            parts = cache[version]
        else:
            lists = published_shard_lists(self.version_key)
            parts = lists.get(version) if version is not None else (lists[max(lists)] if lists else None)
            if version is not None and parts is not None:
                cache.clear()  # only the newest version is asked about, as a rule
                cache[version] = parts
        return len(parts[partition]) if parts and partition < len(parts) else 0

    def fan_out(self, query: str, options: SearchOptions, request_id: str | None = None) -> Fanout:
        """Send `query` to the searchers of one copy (round robin); read the answers from the
        returned `Fanout`. The query is checked here first (`check_query`: parsed, not planned;
        each searcher plans it), so that a parse error or an unknown context fails at once,
        before any searcher is asked. Nothing here waits for I/O (the
        index version comes from `version_watch`; sending a Ray task does not wait), so an
        event loop may call it. `request_id` (default: the current request's,
        `request_ids.current`) is sent to the searchers for their logs."""
        return self._fanout(check_query(query, options), query, options, request_id)

    def _fanout(
        self, tree: ast.Node, query: str, options: SearchOptions, request_id: str | None, links: bool = False
    ) -> Fanout:
        return Fanout(
            self,
            query,
            options,
            stop_when_full=not names_identifier(tree),
            request_id=request_id,
            links=self.links if links else None,
        )

    def search(self, query: str, options: SearchOptions, request_id: str | None = None) -> dict[str, Any]:
        """Fan out to the searchers of one copy, merge what arrives before the deadline: the
        protocol's collect (`codesearch.search.protocol.collect`) for a blocking caller (a worker
        thread), reading the answers with `Fanout.partials`."""
        started = time.perf_counter_ns()
        fan = self.fan_out(query, options, request_id)
        plan_ns = time.perf_counter_ns() - started
        partials = list(fan.partials())
        return merge_partials(partials, options, started, plan_ns, missed=fan.missed)

    async def start(self, query: str, options: SearchOptions, request_id: str | None = None) -> Fanout:
        """`fan_out` for an event loop (`codesearch.search.protocol.Streamer`), which sends the
        search to the searchers on this node over their local links (`search_link`). A query of
        up to `INLINE_PLAN_CHARS` characters is checked on the loop (typically tens of
        microseconds: less than a trip to a thread costs); a longer one in a thread, so that the
        loop can answer other requests meanwhile."""
        if len(query) <= INLINE_PLAN_CHARS:
            tree = check_query(query, options)
        else:
            tree = await asyncio.to_thread(check_query, query, options)
        return self._fanout(tree, query, options, request_id, links=True)

    def explain(self, query: str, options: SearchOptions, request_id: str | None = None) -> dict[str, Any]:
        """Every searcher's explanation of `query`, combined (shards listed per searcher)."""
        import ray

        make_plan(query, options)
        version = self.version_watch.get()
        extra = request_kwargs(request_id)
        parts: list[dict[str, Any]] = ray.get(
            [a.explain.remote(query, options, version, **extra) for a in self.copy()], timeout=options.timeout_s + 5
        )
        out = {k: parts[0][k] for k in ("query", "plan", "defaultBranchOnly")}
        out["shards"] = [{**s, "searcher": p["searcher"]} for p in parts for s in p["shards"]]
        out["documents"] = sum(p["documents"] for p in parts)
        out["candidates"] = sum(p["candidates"] for p in parts)
        out["candidateBytes"] = sum(p["candidateBytes"] for p in parts)
        return out

    def close(self) -> None:
        import ray

        self.version_watch.close()
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []


def publish_deployment(key: str, *, data_dir: str, searchers: int, instance: str = "", database: str = "") -> None:
    """Record where the service of searcher pool `key` keeps its data and how many searchers it
    has, in the `registry`, so a notebook attached to the cluster finds them (`codesearch.Client.ray`);
    `instance` and `database` name its state database (`Store.instance_id`, `Store.database`)."""
    registry.put_deployment(key, registry.Deployment(data_dir, searchers, instance, database))


def published_deployment(key: str) -> dict[str, Any] | None:
    """What `publish_deployment` recorded for `key` (``{"data_dir", "searchers", "instance",
    "database"}``), or None."""
    record = registry.get_deployment(key)
    return (
        {
            "data_dir": record.data_dir,
            "searchers": record.searchers,
            "instance": record.instance,
            "database": record.database,
        }
        if record
        else None
    )


def forget_pool(key: str) -> None:
    """Remove what the named pool `key` published (its deployment, layout, index version and
    shard lists): it is gone, and a notebook must not find it any more."""
    registry.forget_pool(key)


if TYPE_CHECKING:  # mypy holds the pool to the searcher protocol (the engine: `search.protocol`)

    def _pool_is_a_streamer(pool: SearcherPool, fanout: Fanout) -> tuple[Streamer, PartialStream]:
        return pool, fanout
