"""What a searcher pool publishes in the cluster-wide `registry`, and the shard lists it balances.

A pool records its layout (partitions × copies), the shard files of every partition per index
version, the version searches use now, and where its service keeps its data, so that another
process (a Serve replica, a notebook, a searcher Ray restarted) finds them. `VersionWatch` keeps
the published index version at hand without a registry read per search. `shard_files` and
`balance` turn an index directory into the partitions' lists.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Sequence

import ray

from codesearch.index.manifest import current_index
from codesearch.runtime import registry
from codesearch.runtime.registry import ShardSpec

log = logging.getLogger(__name__)

#: How many shard-list versions a searcher keeps (and the registry records): a search that names
#: a version published a moment ago still finds it (see `VersionWatch`).
KEEP_VERSIONS = 3


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
    searcher holds it, and searchers keep their last `KEEP_VERSIONS` (3) lists, so
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


def _watch_version(ref: weakref.ref[VersionWatch], poll_s: float, stop: threading.Event) -> None:
    """The thread of a `VersionWatch` (holding it only weakly, so that an unused pool can go).
    It also ends when the process has left Ray (``ray.shutdown``): a registry call then would
    make Ray start a new local instance from this thread (its auto-init), at a test process's
    exit for one."""
    while not stop.wait(poll_s):
        watch = ref()
        if watch is None or not ray.is_initialized():
            return
        try:
            watch.refresh()
        except Exception as e:  # noqa: BLE001 - the registry is briefly unreachable: keep the last version
            log.debug("index version of %s not read: %s", watch.key, e)
        del watch


def publish_shard_lists(key: str, version: int, partitions: list[list[ShardSpec]]) -> None:
    """Record the shard files of every partition for `version` of pool `key` (the newest
    `KEEP_VERSIONS` are kept), before any searcher is told: a searcher that Ray
    restarts loads its lists from here, and the pool counts the shards of a searcher that does
    not answer."""
    lists = published_shard_lists(key)
    lists[version] = partitions
    keep = sorted(lists)[-KEEP_VERSIONS:]
    registry.put_shard_lists(key, {v: lists[v] for v in keep})


def published_shard_lists(key: str) -> dict[int, list[list[ShardSpec]]]:
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


def balance(specs: Sequence[ShardSpec], n: int) -> list[list[ShardSpec]]:
    """Split shards (`shard_files` specs) over `n` searchers so their total sizes are even
    (largest first)."""
    groups: list[list[ShardSpec]] = [[] for _ in range(max(n, 1))]
    sizes = [0] * len(groups)
    size = {shard_spec(s)[0]: _size(shard_spec(s)[0]) for s in specs}
    for spec in sorted(specs, key=lambda s: (-size[shard_spec(s)[0]], shard_spec(s)[0])):
        i = sizes.index(min(sizes))
        groups[i].append(spec)
        sizes[i] += size[shard_spec(spec)[0]]
    return groups


def _size(path: str) -> int:
    """A shard file's size; 0 for one that is gone (the searcher that gets it refuses it and says
    so in its answers, `codesearch.search.engine.Refusals`; the scheduler has it rebuilt)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def shard_files(index_dir: str) -> list[ShardSpec]:
    """The shards the index consists of now (per its manifest), as plain data that travels
    between processes and through the registry: a shard's path, or ``[path, [dead repo ids]]`` for a
    shard with tombstoned repositories."""
    return [entry.path if not entry.dead else [entry.path, sorted(entry.dead)] for entry in current_index(index_dir)]


def shard_spec(spec: ShardSpec) -> tuple[str, frozenset[int]]:
    """A `shard_files` spec as (path, tombstoned repository ids)."""
    if isinstance(spec, str):
        return spec, frozenset()
    path, dead = spec
    return path, frozenset(dead)
