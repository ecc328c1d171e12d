"""Shard searchers: Ray actors that each own a balanced set of shards and search them locally.

A search is one hop from the caller: every searcher plans the query itself (plans hold
compiled regexes, which do not travel between processes), evaluates its shards, ranks, caps
and presents its files (`codesearch.search.engine.partial_result`), and returns plain data.
The caller merges (`merge_partials`). Posting lists and bitmaps never leave a searcher.

`ShardSearcher` is a plain class (testable without Ray); `SearcherPool` creates the actors,
balances shards over them by size, fans a search out and merges. A searcher that fails or does
not answer in time is counted in `stats.crashes`; the others' answers are returned, never a
hang.

Partitions and copies. A pool is ``copies × partitions`` actors: actor ``i`` holds partition
``i % partitions`` of the shards. Partitioning divides the work of one search (an expensive,
exhaustive query; an index bigger than one node's memory); copies divide the requests (each
search goes to one copy, round robin), which is what raises the throughput of cheap, capped
queries, and a copy stands in for a twin that died (`search` retries that partition once on
another copy). The layout is recorded in Ray's KV under the pool's name so `attach` finds it.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
import uuid

from codesearch.errors import CodesearchError, IndexFormatError
from codesearch.index.manifest import current_shards
from codesearch.index.shard import Shard
from codesearch.runtime import NAMESPACE
from codesearch.search.engine import PartialResult, make_plan, merge_partials, partial_result, search_shards
from codesearch.search.options import SearchOptions

log = logging.getLogger(__name__)


class ShardSearcher:
    """Owns some shard files (memory-mapped) and answers searches over them.

    Shard lists are versioned: `set_shards(paths, version)` adds a list next to the previous
    ones (the last `KEEP_VERSIONS` are kept) and `search(..., version=v)` uses list `v`. The
    pool publishes a version only after every searcher holds it, so one search sees the same
    generation of the index on every searcher, even while a refresh is under way.
    """

    KEEP_VERSIONS = 3

    def __init__(self, shard_paths: list[str], origin: int = 0):
        self.origin = origin
        self.errors: list[str] = []
        self.sets: dict[int, list[Shard]] = {0: self._open(shard_paths, {})}
        self.current = 0

    @property
    def shards(self) -> list[Shard]:
        return self.sets[self.current]

    def _open(self, paths: list[str], reuse: dict[str, Shard]) -> list[Shard]:
        out, errors = [], []
        for path in paths:
            if path in reuse:
                out.append(reuse[path])
                continue
            try:
                out.append(Shard(path))
            except (IndexFormatError, OSError) as e:
                log.error("%s", e)
                errors.append(str(e))
        self.errors = errors
        return out

    def search(self, query: str, options: SearchOptions, deadline_wall: float, version: int | None = None) -> PartialResult:
        """Search the owned shards of `version` (default: the newest); `deadline_wall` is a
        `time.time()` instant (clocks of other processes and nodes agree on wall time, not on
        `time.monotonic()`)."""
        deadline = time.monotonic() + max(0.0, deadline_wall - time.time())
        plan = make_plan(query, options)
        shards = self.sets.get(version, self.shards) if version is not None else self.shards
        return partial_result(search_shards(shards, plan, options, deadline), options, self.origin)

    def explain(self, query: str, options: SearchOptions, version: int | None = None) -> dict:
        """`codesearch.search.explain.explain` over the owned shards of `version`."""
        from codesearch.search.explain import explain

        shards = self.sets.get(version, self.shards) if version is not None else self.shards
        out = explain(make_plan(query, options), shards)
        out["searcher"] = self.origin
        return out

    def set_shards(self, shard_paths: list[str], version: int | None = None, origin: int | None = None) -> int:
        """Own `shard_paths` as list `version` (after an index change), as partition `origin`
        when given. Shards already open are kept; a search that started before finishes on the
        list it started with (unlinked files stay readable while mapped)."""
        if origin is not None:
            self.origin = origin
        version = version if version is not None else self.current + 1
        reuse = {s.path: s for shards in self.sets.values() for s in shards}
        self.sets[version] = self._open(shard_paths, reuse)
        self.current = max(self.current, version)
        for old in sorted(self.sets)[: -self.KEEP_VERSIONS]:
            del self.sets[old]
        return len(self.sets[version])

    def shard_count(self) -> int:
        return len(self.shards)

    def ping(self) -> bool:
        return True


def publish_version(key: str, version: int) -> None:
    """Make `version` the shard-list version every search of the pool `key` uses (Ray's
    cluster-wide KV store, so every Serve replica sees it)."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(f"codesearch:index-version:{key}".encode(), str(version).encode(), overwrite=True)


def published_version(key: str | None) -> int | None:
    """The version searches of pool `key` use now, or None before its first refresh."""
    if not key:
        return None
    from ray.experimental import internal_kv

    value = internal_kv._internal_kv_get(f"codesearch:index-version:{key}".encode())
    return int(value) if value else None


def _layout_key(prefix: str) -> bytes:
    return f"codesearch:searcher-layout:{prefix}".encode()


def publish_layout(prefix: str, *, partitions: int, copies: int) -> None:
    """Record how the named searchers of `prefix` are laid out (see the module docstring)."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(_layout_key(prefix), json.dumps({"partitions": partitions, "copies": copies}).encode(),
                                 overwrite=True)


def published_copies(prefix: str, count: int) -> int:
    """How many copies the `count` named searchers of `prefix` form (1 unless recorded so)."""
    from ray.experimental import internal_kv

    value = internal_kv._internal_kv_get(_layout_key(prefix))
    copies = int(json.loads(value).get("copies", 1)) if value else 1
    return copies if copies >= 1 and count % copies == 0 else 1


def publish_deployment(key: str, *, data_dir: str, searchers: int) -> None:
    """Record where the service of searcher pool `key` keeps its data and how many searchers it
    has, in Ray's KV, so a notebook attached to the cluster finds them (`codesearch.Client.ray`)."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(f"codesearch:deployment:{key}".encode(),
                                 json.dumps({"data_dir": data_dir, "searchers": searchers}).encode(), overwrite=True)


def published_deployment(key: str) -> dict | None:
    """What `publish_deployment` recorded for `key` (``{"data_dir", "searchers"}``), or None."""
    from ray.experimental import internal_kv

    value = internal_kv._internal_kv_get(f"codesearch:deployment:{key}".encode())
    return json.loads(value) if value else None


def balance(paths: list[str], n: int) -> list[list[str]]:
    """Split shard files over `n` searchers so their total sizes are even (largest first)."""
    groups: list[list[str]] = [[] for _ in range(max(n, 1))]
    sizes = [0] * len(groups)
    for p in sorted(paths, key=lambda p: (-os.path.getsize(p), p)):
        i = sizes.index(min(sizes))
        groups[i].append(p)
        sizes[i] += os.path.getsize(p)
    return groups


def shard_files(index_dir: str) -> list[str]:
    """The shards the index consists of now (per its manifest)."""
    return current_shards(index_dir)


class SearcherPool:
    """Ray actors over the shards of an index directory, and the fan-out/merge of a search."""

    def __init__(self, actors: list, version_key: str | None = None, copies: int = 1):
        if copies < 1 or len(actors) % copies:
            raise ValueError(f"{len(actors)} searchers cannot form {copies} equal copies")
        self.actors = actors
        self.copies = copies
        self.partitions = len(actors) // copies
        #: Names this pool's published index version (pools are told apart by their name prefix).
        self.version_key = version_key or uuid.uuid4().hex
        self._turn = itertools.count()

    @classmethod
    def create(cls, index_dir: str, searchers: int = 2, *, copies: int = 1, name_prefix: str | None = None,
               actor_options: dict | None = None, keep_empty: bool = False) -> "SearcherPool":
        """Start ``copies × searchers`` actors over the shards of `index_dir`: `searchers`
        partitions, each held by `copies` actors (spread over the nodes unless `actor_options`
        says otherwise). Named when `name_prefix` is given, so that every Serve replica can
        `attach` to the same searchers. Partitions that would own no shard are not started,
        unless `keep_empty` (an index that will grow: `refresh` spreads shards over the existing
        actors only)."""
        import ray

        if copies < 1 or searchers < 1:
            raise ValueError(f"need at least one searcher and one copy, not {searchers} × {copies}")
        groups = balance(shard_files(index_dir) if os.path.isdir(index_dir) else [], searchers)
        if not keep_empty:
            groups = [g for g in groups if g] or [[]]
        base = {"num_cpus": 0, **({"scheduling_strategy": "SPREAD"} if copies > 1 else {}), **(actor_options or {})}
        actors = []
        for i in range(copies * len(groups)):
            opts = dict(base)
            if name_prefix:
                opts["name"] = f"{name_prefix}-{i}"
                opts["namespace"] = NAMESPACE
            p = i % len(groups)
            actors.append(ray.remote(ShardSearcher).options(**opts).remote(groups[p], origin=p))
        ray.get([a.ping.remote() for a in actors])
        if name_prefix:
            publish_layout(name_prefix, partitions=len(groups), copies=copies)
        return cls(actors, version_key=name_prefix, copies=copies)

    @classmethod
    def attach(cls, name_prefix: str, count: int) -> "SearcherPool":
        """The `count` named searchers started by `create` (from another process, e.g. a Serve
        replica), in the layout `create` recorded."""
        import ray

        return cls([ray.get_actor(f"{name_prefix}-{i}", namespace=NAMESPACE) for i in range(count)],
                   version_key=name_prefix, copies=published_copies(name_prefix, count))

    def copy(self, turn: int | None = None) -> list:
        """The actors of one copy (one per partition): the next one round robin, or copy `turn`."""
        c = (next(self._turn) if turn is None else turn) % self.copies
        return self.actors[c * self.partitions:(c + 1) * self.partitions]

    def refresh(self, index_dir: str) -> None:
        """Re-balance the index's current shards over the partitions and send every searcher its
        partition's list (after a re-index or garbage collection). Each searcher swaps its list
        at once; a search already running on a searcher finishes on its old list."""
        import ray

        groups = balance(shard_files(index_dir), self.partitions)
        version = time.time_ns()
        ray.get([a.set_shards.remote(groups[i % self.partitions], version, i % self.partitions)
                 for i, a in enumerate(self.actors)])
        publish_version(self.version_key, version)  # only now: every searcher holds the new lists

    def search(self, query: str, options: SearchOptions) -> dict:
        """Fan out to the searchers of one copy, merge what arrives before the deadline."""
        import ray

        started = time.perf_counter_ns()
        t0 = time.perf_counter_ns()
        make_plan(query, options)  # parse errors and unknown contexts fail here, before any fan-out
        plan_ns = time.perf_counter_ns() - t0
        deadline_wall = time.time() + options.timeout_s
        version = published_version(self.version_key)
        turn = next(self._turn)
        partials, timed_out = [], 0
        todo = list(enumerate(self.copy(turn)))  # (partition, actor)
        for attempt in range(min(2, self.copies)):  # a partition whose searcher died: once more on another copy
            refs = {a.search.remote(query, options, deadline_wall, version): p for p, a in todo}
            ready, pending = ray.wait(list(refs), num_returns=len(refs), timeout=max(0.0, deadline_wall - time.time()) + 5)
            failed = []
            for ref in ready:
                try:
                    partials.append(ray.get(ref))
                except CodesearchError:
                    raise
                except Exception as e:  # a searcher died mid-search: count it, keep the others
                    log.error("searcher failed: %s", type(e).__name__)
                    failed.append(refs[ref])
            for ref in pending:
                ray.cancel(ref, force=True)
            timed_out += len(pending)
            if not failed or attempt + 1 >= min(2, self.copies) or time.time() >= deadline_wall:
                break
            twin = self.copy(turn + 1)
            todo = [(p, twin[p]) for p in failed]
        crashes = timed_out + len(failed)
        resp = merge_partials(partials, options, started, plan_ns)
        resp["stats"]["crashes"] += crashes
        if crashes:
            resp["isSearchExhaustive"] = False
        return resp

    def explain(self, query: str, options: SearchOptions) -> dict:
        """Every searcher's explanation of `query`, combined (shards listed per searcher)."""
        import ray

        make_plan(query, options)
        version = published_version(self.version_key)
        parts = ray.get([a.explain.remote(query, options, version) for a in self.copy()], timeout=options.timeout_s + 5)
        out = {k: parts[0][k] for k in ("query", "plan", "defaultBranchOnly")}
        out["shards"] = [{**s, "searcher": p["searcher"]} for p in parts for s in p["shards"]]
        out["documents"] = sum(p["documents"] for p in parts)
        out["candidates"] = sum(p["candidates"] for p in parts)
        return out

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)
        self.actors = []
