"""Shard searchers: Ray actors that each own a balanced set of shards and search them locally.

A search is one hop from the caller: every searcher plans the query itself (plans hold
compiled regexes, which do not travel between processes), evaluates its shards, ranks, caps
and presents its files (`codesearch.search.engine.partial_result`), and returns plain data.
The caller merges (`merge_partials`). Posting lists and bitmaps never leave a searcher.

`ShardSearcher` is a plain class (testable without Ray); `SearcherPool` creates the actors,
balances shards over them by size, fans a search out and merges. A searcher that fails or does
not answer in time is counted in `stats.crashes`; the others' answers are returned, never a
hang.
"""

from __future__ import annotations

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

    def set_shards(self, shard_paths: list[str], version: int | None = None) -> int:
        """Own `shard_paths` as list `version` (after an index change). Shards already open are
        kept; a search that started before finishes on the list it started with (unlinked files
        stay readable while mapped)."""
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


def publish_deployment(key: str, *, data_dir: str, searchers: int) -> None:
    """Record where the service of searcher pool `key` keeps its data and how many searchers it
    has, in Ray's KV, so a notebook attached to the cluster finds them (`codesearch.Client.ray`)."""
    import json

    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(f"codesearch:deployment:{key}".encode(),
                                 json.dumps({"data_dir": data_dir, "searchers": searchers}).encode(), overwrite=True)


def published_deployment(key: str) -> dict | None:
    """What `publish_deployment` recorded for `key` (``{"data_dir", "searchers"}``), or None."""
    import json

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

    def __init__(self, actors: list, version_key: str | None = None):
        self.actors = actors
        #: Names this pool's published index version (pools are told apart by their name prefix).
        self.version_key = version_key or uuid.uuid4().hex

    @classmethod
    def create(cls, index_dir: str, searchers: int = 2, *, name_prefix: str | None = None,
               actor_options: dict | None = None, keep_empty: bool = False) -> "SearcherPool":
        """Start searcher actors over the shards of `index_dir` (named when `name_prefix` is given,
        so that every Serve replica can `attach` to the same searchers). Searchers that would
        own no shard are not started, unless `keep_empty` (an index that will grow: `refresh`
        spreads shards over the existing actors only)."""
        import ray

        groups = balance(shard_files(index_dir) if os.path.isdir(index_dir) else [], searchers)
        if not keep_empty:
            groups = [g for g in groups if g] or [[]]
        actors = []
        for i, g in enumerate(groups):
            opts = {"num_cpus": 0, **(actor_options or {})}
            if name_prefix:
                opts["name"] = f"{name_prefix}-{i}"
                opts["namespace"] = NAMESPACE
            actors.append(ray.remote(ShardSearcher).options(**opts).remote(g, origin=i))
        ray.get([a.ping.remote() for a in actors])
        return cls(actors, version_key=name_prefix)

    @classmethod
    def attach(cls, name_prefix: str, count: int) -> "SearcherPool":
        """The named searchers started by `create` (from another process, e.g. a Serve replica)."""
        import ray

        return cls([ray.get_actor(f"{name_prefix}-{i}", namespace=NAMESPACE) for i in range(count)],
                   version_key=name_prefix)

    def refresh(self, index_dir: str) -> None:
        """Re-balance the index's current shards over the existing searchers and send each its
        list (after a re-index or garbage collection). Each searcher swaps its list at once;
        a search already running on a searcher finishes on its old list."""
        import ray

        groups = balance(shard_files(index_dir), len(self.actors))
        version = time.time_ns()
        ray.get([a.set_shards.remote(g, version) for a, g in zip(self.actors, groups)])
        publish_version(self.version_key, version)  # only now: every searcher holds the new lists

    def search(self, query: str, options: SearchOptions) -> dict:
        """Fan out to every searcher, merge what arrives before the deadline."""
        import ray

        started = time.perf_counter_ns()
        t0 = time.perf_counter_ns()
        make_plan(query, options)  # parse errors and unknown contexts fail here, before any fan-out
        plan_ns = time.perf_counter_ns() - t0
        deadline_wall = time.time() + options.timeout_s
        version = published_version(self.version_key)
        refs = [a.search.remote(query, options, deadline_wall, version) for a in self.actors]
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=options.timeout_s + 5)
        partials, crashes = [], len(pending)
        for ref in ready:
            try:
                partials.append(ray.get(ref))
            except CodesearchError:
                raise
            except Exception as e:  # a searcher died mid-search: count it, keep the others
                log.error("searcher failed: %s", type(e).__name__)
                crashes += 1
        for ref in pending:
            ray.cancel(ref, force=True)
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
        parts = ray.get([a.explain.remote(query, options, version) for a in self.actors], timeout=options.timeout_s + 5)
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
