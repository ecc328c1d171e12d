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
another copy). The layout is recorded in the `registry` under the pool's name so `attach` finds it.

Observability: a searcher records its query time, candidates, verified bytes and shards
(`codesearch.runtime.metrics`); the pool sends each search the id of the HTTP request it serves
(`request_ids`), which the searcher names when it logs a slow or failed search.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import pickle
import threading
import time
import uuid
import weakref
from typing import NamedTuple

from codesearch.errors import CodesearchError, IndexFormatError
from codesearch.index.manifest import current_index
from codesearch.index.shard import Shard
from codesearch.runtime import NAMESPACE, metrics, registry, request_ids
from codesearch.search.engine import (
    PartialResult,
    check_query,
    make_plan,
    merge_partials,
    names_identifier,
    partial_result,
    search_shards,
)
from codesearch.search.options import FLUSH_MAX_SIZE, FLUSH_TIMER, SearchOptions, Stats
from codesearch.search.visibility import visible_shards

log = logging.getLogger(__name__)


#: Searches one searcher runs at once (threads of the actor). A search holds the GIL only in
#: short stretches (RE2, the regex fallback and numpy release it), so a slow query takes its
#: share of the CPU instead of making every other query wait for it.
SEARCH_CONCURRENCY = 8
#: A searcher logs a search that took longer than this (seconds), with its request id.
SLOW_SEARCH_S = 2.0


class ShardSearcher:
    """Owns some shard files (memory-mapped) and answers searches over them.

    Shard lists are versioned: `set_shards(paths, version)` adds a list next to the previous
    ones (the last `KEEP_VERSIONS` are kept) and `search(..., version=v)` uses list `v`. The
    pool publishes a version only after every searcher holds it, so one search sees the same
    generation of the index on every searcher, even while a refresh is under way.

    Searches run concurrently (the actor is threaded, `SEARCH_CONCURRENCY`); shards keep no
    per-query state. A searcher of a named pool (`pool_key`) that Ray restarts after a crash
    starts from the shard lists the pool published (`publish_shard_lists`), not from the
    arguments it was first created with, so it serves its partition of the current index at once.
    """

    KEEP_VERSIONS = 3

    def __init__(
        self,
        shard_paths: list[str],
        origin: int = 0,
        pool_key: str | None = None,
        copy_to: str | None = None,
        source: str | None = None,
    ):
        self.origin = origin
        self.errors: list[str] = []
        self.sets: dict[int, list[Shard]] = {}
        #: Without the builder's data directory: verified copies fetched from the named
        #: `shard_copy.ShardSource` (see `SearcherPool.create`).
        self.copies = _copies(copy_to, source) if copy_to else None
        published = published_shard_lists(pool_key) if pool_key else {}
        for version, partitions in sorted(published.items()):
            self.set_shards(partitions[origin] if origin < len(partitions) else [], version)
        if not self.sets:
            self.sets[0] = self._open(shard_paths, {})
            self.current = 0
            self._report_shards()

    @property
    def shards(self) -> list[Shard]:
        return self.sets[self.current]

    def _open(self, specs: list, reuse: dict[str, Shard]) -> list[Shard]:
        """Open the shards of `specs` (see `shard_files`), re-using those open already."""
        out, errors = [], []
        for spec in specs:
            path, dead = _spec(spec)
            try:
                if self.copies is not None:  # a copy open and verified already needs no word from the source
                    path = self.copies.verified(path) or self.copies.local(path)
                if path in reuse:
                    out.append(reuse[path].with_dead(dead))
                    continue
                out.append(Shard(path).with_dead(dead))
            except (IndexFormatError, OSError) as e:
                log.error("%s", e)
                errors.append(str(e))
            except Exception as e:  # noqa: BLE001 - the shard source is unreachable (a Ray error): serve the rest
                log.error("searcher %d: shard %s not fetched: %s", self.origin, os.path.basename(path), e)
                errors.append(
                    f"{os.path.basename(path)}: not fetched from where the index is built ({type(e).__name__})"
                )
        self.errors = errors
        return out

    def held(self) -> list[str]:
        """The files of the shards this searcher holds (every kept version)."""
        return sorted({s.path for shards in self.sets.values() for s in shards})

    def _shards_of(self, version: int | None) -> list[Shard]:
        return self.sets.get(version, self.shards) if version is not None else self.shards

    def search(
        self,
        query: str,
        options: SearchOptions,
        deadline_wall: float,
        version: int | None = None,
        request_id: str | None = None,
    ) -> PartialResult:
        """Search the owned shards of `version` (default: the newest); `deadline_wall` is a
        `time.time()` instant (clocks of other processes and nodes agree on wall time, not on
        `time.monotonic()`). Stops early when the caller cancels the task (`ray.cancel`).
        `request_id` names the HTTP request the search is for in this searcher's logs (a slow
        search, an error); the search's time and work are recorded in `metrics`."""
        started = time.perf_counter()
        try:
            deadline = time.monotonic() + max(0.0, deadline_wall - time.time())
            plan = make_plan(query, options)
            out = partial_result(
                search_shards(self._shards_of(version), plan, options, deadline, _cancel_check()), options, self.origin
            )
        except Exception as e:
            self._log_failure("search", query, request_id, e)
            raise
        seconds = time.perf_counter() - started
        metrics.searcher_query(self.origin, seconds, out.stats)
        if seconds > SLOW_SEARCH_S:
            log.warning(
                "searcher %d: slow search (%.2fs, request %s): %.200r", self.origin, seconds, request_id or "-", query
            )
        return out

    def search_wire(self, request: bytes) -> bytes:
        """`search` as the pool asks for it (`Fanout`): its arguments ``(query, options,
        deadline_wall, version, request_id)`` and its `PartialResult` pickled, one bytes object
        each way. Ray ships bytes as they are, where it pickles every argument and the answer on
        its own, at a cost that showed (0.3-0.5 ms of a search with two searchers, on 2 cores);
        the request is pickled once for every searcher of the search."""
        query, options, deadline_wall, version, request_id = pickle.loads(request)
        return pickle.dumps(self.search(query, options, deadline_wall, version, request_id), pickle.HIGHEST_PROTOCOL)

    def explain(
        self, query: str, options: SearchOptions, version: int | None = None, request_id: str | None = None
    ) -> dict:
        """`codesearch.search.explain.explain` over the owned shards of `version`."""
        from codesearch.search.explain import explain

        try:
            out = explain(make_plan(query, options), visible_shards(self._shards_of(version), options.visible_repos))
        except Exception as e:
            self._log_failure("explain", query, request_id, e)
            raise
        out["searcher"] = self.origin
        return out

    def _log_failure(self, what: str, query: str, request_id: str | None, e: Exception) -> None:
        """A query the caller got wrong is its error to read (a warning here); anything else is ours."""
        if isinstance(e, CodesearchError):
            log.warning("searcher %d: %s failed (request %s): %s", self.origin, what, request_id or "-", e)
        else:
            log.error(
                "searcher %d: %s of %.200r failed (request %s)", self.origin, what, query, request_id or "-", exc_info=e
            )

    def set_shards(self, shard_paths: list[str], version: int | None = None, origin: int | None = None) -> int:
        """Own `shard_paths` as list `version` (after an index change), as partition `origin`
        when given. Shards already open are kept; a search that started before finishes on the
        list it started with (unlinked files stay readable while mapped)."""
        if origin is not None:
            self.origin = origin
        current = getattr(self, "current", None)
        version = version if version is not None else (current or 0) + 1
        reuse = {s.path: s for shards in self.sets.values() for s in shards}
        self.sets[version] = self._open(shard_paths, reuse)
        self.current = version if current is None else max(current, version)
        for old in sorted(self.sets)[: -self.KEEP_VERSIONS]:
            del self.sets[old]
        if self.copies is not None:  # the copies no kept list names any more
            self.copies.prune(set(self.held()))
        self._report_shards()
        return len(self.sets[version])

    def _report_shards(self) -> None:
        """The shard count and bytes of the newest list, as gauges (`metrics`)."""
        nbytes = 0
        for shard in self.shards:
            with contextlib.suppress(OSError):  # deleted since it was mapped: it still serves, its size is unknown
                nbytes += os.path.getsize(shard.path)
        metrics.searcher_shards(self.origin, len(self.shards), nbytes)

    def shard_count(self) -> int:
        return len(self.shards)

    def ping(self) -> bool:
        return True


def _copies(copy_to: str, source: str | None):
    """The `ShardCopies` of a searcher that keeps its shards in `copy_to`, fetched from the named
    shard source actor (looked up when first needed: it may start after the searcher)."""
    from codesearch.runtime.shard_copy import ShardCopies

    if not source:
        raise ValueError("a searcher that copies its shards needs the name of their source")

    def lookup():
        import ray

        return ray.get_actor(source, namespace=NAMESPACE)

    return ShardCopies(copy_to, lookup)


def _cancel_check():
    """A function telling whether the running Ray task was cancelled (None outside Ray)."""
    try:
        import ray

        if not ray.is_initialized():
            return None
        ctx = ray.get_runtime_context()
        ctx.is_canceled()  # raises outside a task (a driver, a test calling the class directly)
    except Exception:  # noqa: BLE001 - no task context: nothing can cancel us
        return None
    return ctx.is_canceled


def publish_version(key: str, version: int) -> None:
    """Make `version` the shard-list version every search of the pool `key` uses (in the
    cluster-wide `registry`, so every Serve replica sees it)."""
    registry.put_index_version(key, version)


def published_version(key: str | None) -> int | None:
    """The version searches of pool `key` use now, or None before its first refresh."""
    if not key:
        return None
    return registry.get_index_version(key)


#: Seconds between two reads of a pool's published index version by the process searching
#: through it (see `VersionWatch`).
VERSION_POLL_S = 0.2


class VersionWatch:
    """The index version the searches of pool `key` name, as this process knows it: read from
    the registry by a daemon thread every `poll_s` seconds, so that a search never waits for a registry
    read (a round trip to an actor, a millisecond or more on a busy node, on every request).

    Why a version up to `poll_s` old is still right: a pool publishes a version only after every
    searcher holds it, and searchers keep their last `ShardSearcher.KEEP_VERSIONS` (3) lists, so
    the version a search names is held by every searcher unless three newer ones were published
    within `poll_s` (the scheduler publishes at most one per tick, 1 s by default); after such a
    burst each searcher answers from its newest list. A version this process publishes itself
    (`SearcherPool.assign`) is used at once. The thread starts with the first `get` and ends with
    `close` or when the watch is garbage.
    """

    def __init__(self, key: str, poll_s: float = VERSION_POLL_S):
        self.key = key
        self.poll_s = poll_s
        self._value: int | None = None
        self._known = False
        self._generation = 0  # bumped by `set`: a read that started before it is dropped
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def get(self) -> int | None:
        """The version to search (read from the KV here only if it never was)."""
        if self._thread is None:
            self._start()
        return self._value

    def _start(self) -> None:
        if not self._known:
            self.refresh()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_watch_version,
                    args=(weakref.ref(self), self.poll_s, self._stop),
                    name=f"codesearch-version-{self.key}",
                    daemon=True,
                )
                self._thread.start()

    def set(self, version: int | None) -> None:
        """Use `version` from now on (this process just published it)."""
        with self._lock:
            self._generation += 1
            self._value, self._known = version, True

    def refresh(self) -> None:
        """Read the published version once (what the thread does every `poll_s`)."""
        generation = self._generation
        self._store(published_version(self.key), generation)

    def _store(self, version: int | None, generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._value, self._known = version, True

    def close(self) -> None:
        self._stop.set()


def _watch_version(ref, poll_s: float, stop: threading.Event) -> None:
    """The thread of a `VersionWatch` (holding it only weakly, so that an unused pool can go)."""
    while not stop.wait(poll_s):
        watch = ref()
        if watch is None:
            return
        try:
            watch.refresh()
        except Exception as e:  # noqa: BLE001 - the registry is briefly unreachable: keep the last version
            log.debug("index version of %s not read: %s", watch.key, e)
        del watch


def publish_shard_lists(key: str, version: int, partitions: list[list[str]]) -> None:
    """Record the shard files of every partition for `version` of pool `key` (the newest
    `ShardSearcher.KEEP_VERSIONS` are kept), before any searcher is told: a searcher that Ray
    restarts loads its lists from here, and the pool counts the shards of a searcher that does
    not answer."""
    lists = published_shard_lists(key)
    lists[version] = partitions
    keep = sorted(lists)[-ShardSearcher.KEEP_VERSIONS :]
    registry.put_shard_lists(key, {v: lists[v] for v in keep})


def published_shard_lists(key: str) -> dict[int, list[list[str]]]:
    """What `publish_shard_lists` recorded for pool `key`: version → shard files per partition."""
    return registry.get_shard_lists(key)


def publish_layout(prefix: str, *, partitions: int, copies: int) -> None:
    """Record how the named searchers of `prefix` are laid out (see the module docstring)."""
    registry.put_layout(prefix, registry.Layout(partitions, copies))


def published_copies(prefix: str, count: int) -> int:
    """How many copies the `count` named searchers of `prefix` form (1 unless recorded so)."""
    layout = registry.get_layout(prefix)
    copies = layout.copies if layout else 1
    return copies if copies >= 1 and count % copies == 0 else 1


def publish_deployment(key: str, *, data_dir: str, searchers: int, instance: str = "", database: str = "") -> None:
    """Record where the service of searcher pool `key` keeps its data and how many searchers it
    has, in the `registry`, so a notebook attached to the cluster finds them (`codesearch.Client.ray`);
    `instance` and `database` name its state database (`Store.instance_id`, `Store.database`)."""
    registry.put_deployment(key, registry.Deployment(data_dir, searchers, instance, database))


def published_deployment(key: str) -> dict | None:
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


def balance(specs: list, n: int) -> list[list]:
    """Split shards (`shard_files` specs) over `n` searchers so their total sizes are even
    (largest first)."""
    groups: list[list] = [[] for _ in range(max(n, 1))]
    sizes = [0] * len(groups)
    size = {_spec(s)[0]: os.path.getsize(_spec(s)[0]) for s in specs}
    for spec in sorted(specs, key=lambda s: (-size[_spec(s)[0]], _spec(s)[0])):
        i = sizes.index(min(sizes))
        groups[i].append(spec)
        sizes[i] += size[_spec(spec)[0]]
    return groups


def shard_files(index_dir: str) -> list:
    """The shards the index consists of now (per its manifest), as plain data that travels
    between processes and through the registry: a shard's path, or ``[path, [dead repo ids]]`` for a
    shard with tombstoned repositories."""
    return [entry.path if not entry.dead else [entry.path, sorted(entry.dead)] for entry in current_index(index_dir)]


def _spec(spec) -> tuple[str, frozenset[int]]:
    if isinstance(spec, str):
        return spec, frozenset()
    path, dead = spec
    return path, frozenset(dead)


#: Seconds past a search's deadline that a searcher's answer is still awaited (it stops at the
#: deadline by itself; this covers the trip back).
GRACE_S = 2.0
#: Queries up to this long are planned on the event loop by `SearcherPool.search_async`
#: (a plan of 200 characters takes at most a few milliseconds even for an alternation of
#: literals, typical queries a few tens of microseconds).
INLINE_PLAN_CHARS = 200


class SearcherPool:
    """Ray actors over the shards of an index directory, and the fan-out/merge of a search.

    Searchers are supervised by Ray (``max_restarts=-1``): a searcher that dies is restarted and
    loads its partition of the published index version by itself (see `ShardSearcher`); while it
    is down, its partition is answered by a twin copy when there is one, else counted in
    ``stats.crashes`` (and its shards in ``shardsSkipped``) and the answer is not exhaustive.
    """

    def __init__(self, actors: list, version_key: str | None = None, copies: int = 1):
        if copies < 1 or len(actors) % copies:
            raise ValueError(f"{len(actors)} searchers cannot form {copies} equal copies")
        self.actors = actors
        self.copies = copies
        self.partitions = len(actors) // copies
        self._shard_lists: dict = {}  # version → its published shard lists (`shard_count`)
        #: Names this pool's published index version (pools are told apart by their name prefix).
        self.version_key = version_key or uuid.uuid4().hex
        #: The index version its searches name (no registry read per search).
        self.version_watch = VersionWatch(self.version_key)
        self._turn = itertools.count()
        #: Set by `attach`: the names to look the actors up again by (`reattach`).
        self._names: tuple[str, int] | None = None
        self._stale = False
        self._reattached_at = float("-inf")

    @classmethod
    def create(
        cls,
        index_dir: str,
        searchers: int = 2,
        *,
        copies: int = 1,
        name_prefix: str | None = None,
        actor_options: dict | None = None,
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
        actors = []
        for i in range(copies * len(groups)):
            opts = dict(base)
            if name_prefix:
                opts["name"] = f"{name_prefix}-{i}"
                opts["namespace"] = NAMESPACE
            p = i % len(groups)
            fetch = {"copy_to": os.path.join(copy_to, f"{key}-{i}"), "source": source} if copy_to else {}
            actors.append(ray.remote(ShardSearcher).options(**opts).remote(groups[p], origin=p, pool_key=key, **fetch))
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

    def copy(self, turn: int | None = None) -> list:
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

    def assign(self, groups: list[list[str]]) -> int:
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
        tree = check_query(query, options)
        return Fanout(self, query, options, stop_when_full=not names_identifier(tree), request_id=request_id)

    def search(self, query: str, options: SearchOptions, request_id: str | None = None) -> dict:
        """Fan out to the searchers of one copy, merge what arrives before the deadline."""
        started = time.perf_counter_ns()
        fan = self.fan_out(query, options, request_id)
        plan_ns = time.perf_counter_ns() - started
        partials = list(fan.partials())
        return merge_partials(partials, options, started, plan_ns, missed=fan.missed)

    async def fan_out_async(self, query: str, options: SearchOptions, request_id: str | None = None) -> Fanout:
        """`fan_out` for an event loop. A query of up to `INLINE_PLAN_CHARS` characters is
        planned on the loop (typically tens of microseconds: less than a trip to a thread
        costs); a longer one, whose regexes may take milliseconds to compile, in a thread, so
        that the loop can answer other requests meanwhile."""
        if len(query) <= INLINE_PLAN_CHARS:
            return self.fan_out(query, options, request_id)
        import asyncio

        return await asyncio.to_thread(self.fan_out, query, options, request_id)

    async def search_async(self, query: str, options: SearchOptions, request_id: str | None = None) -> dict:
        """`search` for an event loop (`fan_out_async`, the answers awaited)."""
        started = time.perf_counter_ns()
        fan = await self.fan_out_async(query, options, request_id)
        plan_ns = time.perf_counter_ns() - started
        partials = [p async for p in fan.partials_async()]
        return merge_partials(partials, options, started, plan_ns, missed=fan.missed)

    def explain(self, query: str, options: SearchOptions, request_id: str | None = None) -> dict:
        """Every searcher's explanation of `query`, combined (shards listed per searcher)."""
        import ray

        make_plan(query, options)
        version = self.version_watch.get()
        extra = _request_kwargs(request_id)
        parts = ray.get(
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


class _Asked(NamedTuple):
    """A searcher's task of a `Fanout`: its partition, which attempt, whether through `search_wire`."""

    partition: int
    attempt: int
    wire: bool


def _request_kwargs(request_id: str | None) -> dict:
    """The keyword arguments that send a request id to a searcher: `request_id`, else the current
    request's; none at all outside a request (so a searcher of an older signature still answers)."""
    request_id = request_id or request_ids.current()
    return {"request_id": request_id} if request_id else {}


class Fanout:
    """One search sent to the searchers of one copy: their answers as they arrive.

    A searcher that fails (it died, or its process did) is asked again once on another copy
    when the pool has copies. A partition that gives no answer, in the end or before the
    deadline (plus `GRACE_S`), is recorded in `missed`: one crash and its shards as
    ``shardsSkipped``; the search then is not exhaustive. Searchers stop at the deadline by
    themselves; those still running when the caller gives up are cancelled (Ray sets a flag
    they check), never killed: an actor task cannot be force-cancelled, and the searcher is
    busy with other searches too.
    """

    def __init__(
        self,
        pool: SearcherPool,
        query: str,
        options: SearchOptions,
        stop_when_full: bool = False,
        request_id: str | None = None,
    ):
        self.pool = pool
        self.query = query
        self.options = options
        self.stop_when_full = stop_when_full
        self._extra = _request_kwargs(request_id)
        self.found = 0  # matches in the answers received so far
        self.deadline_wall = time.time() + options.timeout_s
        self.give_up = time.monotonic() + options.timeout_s + GRACE_S
        self.version = pool.version_watch.get()  # one index generation on every searcher
        self.turn = next(pool._turn)
        self.missed = Stats()
        self.pending: dict = {}  # ObjectRef → _Asked
        self._wire: bytes | None = None  # the request as `ShardSearcher.search_wire` takes it
        for p, actor in enumerate(pool.copy(self.turn)):
            self._ask(p, actor, 0)

    def _ask(self, partition: int, actor, attempt: int) -> None:
        wire = getattr(actor, "search_wire", None)  # (a searcher of an older release lacks it)
        if wire is not None:
            if self._wire is None:
                request = (self.query, self.options, self.deadline_wall, self.version, self._extra.get("request_id"))
                self._wire = pickle.dumps(request, pickle.HIGHEST_PROTOCOL)
            ref = wire.remote(self._wire)
        else:
            ref = actor.search.remote(self.query, self.options, self.deadline_wall, self.version, **self._extra)
        self.pending[ref] = _Asked(partition, attempt, wire is not None)

    def _miss(self, partition: int) -> None:
        self.missed.crashes += 1
        self.missed.shardsSkipped += self.pool.shard_count(partition, self.version)

    def settle(self, ref, answer=None) -> PartialResult | None:
        """The answer of a finished `ref` (`answer()` when given: the value of its future, which
        holds it already), or None when its searcher failed (then retried on a twin, or recorded
        as missed). A query error (`CodesearchError`) is raised."""
        import ray

        partition, attempt, wire = self.pending.pop(ref)
        try:
            got = answer() if answer is not None else ray.get(ref)
            return pickle.loads(got) if wire else got
        except CodesearchError:
            raise
        except Exception as e:  # noqa: BLE001 - the searcher died mid-search
            log.error("searcher of partition %d failed: %s", partition, type(e).__name__)
            if isinstance(e, ray.exceptions.ActorDiedError):
                self.pool.searcher_died()
        if attempt + 1 < min(2, self.pool.copies) and time.time() < self.deadline_wall:
            self._ask(partition, self.pool.copy(self.turn + attempt + 1)[partition], attempt + 1)
        else:
            self._miss(partition)
        return None

    def abandon(self) -> None:
        """Stop waiting: what has not answered is missed, and its tasks are cancelled."""
        if self.pending:
            self.missed.flushReason = FLUSH_TIMER
        for asked in list(self.pending.values()):
            self._miss(asked.partition)
        self._cancel_pending()

    def _cancel_pending(self) -> None:
        import ray

        for ref in list(self.pending):
            with contextlib.suppress(Exception):  # already finished or gone
                ray.cancel(ref)
        self.pending.clear()

    def _arrived(self, partial: PartialResult) -> None:
        """Count an answer's matches; once the answers hold more than the match budget, stop
        the searchers still at work (as Zoekt stops at its total match count): their shards
        are skipped (``shardsSkipped``, flush reason "max size"), not crashed, and the answer,
        capped anyway, is not exhaustive. Without this a capped query costs as much as its
        slowest partition, which may have to verify every candidate it holds to find its own
        `matches` (a weak-trigram regex: 170 ms instead of 60 ms over 1 GB). Not for a query
        that names an identifier: its definitions rank first, and the partition holding them
        may be the slow one."""
        self.found += partial.total_matches
        if self.stop_when_full and self.pending and self.found > self.options.matches:
            self.missed.flushReason = FLUSH_MAX_SIZE
            for asked in self.pending.values():
                self.missed.shardsSkipped += self.pool.shard_count(asked.partition, self.version)
            self._cancel_pending()

    def partials(self):
        """Yield each searcher's `PartialResult` as it arrives (blocking)."""
        import ray

        try:
            while self.pending:
                ready, _ = ray.wait(
                    list(self.pending), num_returns=1, timeout=max(0.0, self.give_up - time.monotonic())
                )
                if not ready:
                    break
                partial = self.settle(ready[0])
                if partial is not None:
                    self._arrived(partial)
                    yield partial
        finally:
            self.abandon()

    async def partials_async(self):
        """`partials` for an event loop."""
        import asyncio

        waiting: dict = {}  # asyncio future → ObjectRef
        try:
            while self.pending:
                for ref in self.pending:
                    if ref not in waiting.values():
                        waiting[asyncio.ensure_future(asyncio.wrap_future(ref.future()))] = ref
                done, _ = await asyncio.wait(
                    list(waiting),
                    timeout=max(0.0, self.give_up - time.monotonic()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not done:
                    break
                for fut in done:
                    ref = waiting.pop(fut)
                    if ref not in self.pending:  # cancelled: the answers already in were enough
                        continue
                    partial = self.settle(ref, fut.result)
                    if partial is not None:
                        self._arrived(partial)
                        yield partial
        finally:
            for fut in waiting:
                fut.cancel()
            self.abandon()
