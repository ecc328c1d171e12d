"""The small state the processes of a running codesearch share, in one typed registry.

Serve replicas, searchers, the scheduler, the drainer and notebooks on any node need a few facts
about each other: where a searcher pool's data lives and how it is laid out, which index version
its searches name, which shard files each partition holds, whether an application is draining.
They are kept by one named actor, ``codesearch-registry`` in the Ray namespace ``codesearch``
(`RegistryActor`), behind the typed functions below; nothing else in codesearch names a key.

=============================  =====================================  ==========================
record                         key                                    written by
=============================  =====================================  ==========================
`Deployment`                   ``deployment:<searcher prefix>``       the runtime (`bootstrap`)
`Layout`                       ``layout:<searcher prefix>``           `SearcherPool.create`
index version (int)            ``index-version:<pool>``               `SearcherPool.assign`
shard lists {version: parts}   ``shard-lists:<pool>``                 `SearcherPool.assign`
searchers of a scheduler       ``scheduler:<actor id>``               `SchedulerActor.set_searchers`
permission rule on (bool)      ``permissions:<searcher prefix>``      `SchedulerActor` (config)
the runtime {owner, actors}    ``runtime:<prefix>``                   the runtime (`bootstrap`)
orphan watch (`orphans.Watch`) ``watch:<prefix>``                     the runtime (`ensure`)
drain flag {until}             ``drain:<app>``                        `drain.drain`
drain report {inFlight}        ``drain-report:<app>:<replica>``       `drain.DrainGate`
=============================  =====================================  ==========================

Lifetime. The registry is created by the first process that writes to it (`put` creates it; reads
never do): in a service, the runtime replica, which starts it detached like every other actor of the
runtime (they outlive a replica that dies; its successor adopts them,
`codesearch.serving.adoption`), ends it when the application stops, and records in it which replica
owns the runtime and its actors' names (`put_runtime`); the registry ends that runtime itself once
no replica of the application's runtime deployment is left (`codesearch.runtime.orphans`), whoever
made the registry (a notebook's or a test's, which a service then uses as it is, included). Readers that
find no registry get nothing (no pool, not draining). Ray restarts it if its process dies. A
service's registry keeps its records in a snapshot file of the data directory too
(``registry.json``, `RegistryActor`) and reads them back when restarted, so nothing it held is lost
with its process; one made without a snapshot (a notebook's, a test's) restarts empty (pools publish
again at their next index change, and searchers catch up with what is published when a search names
a version they lack).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, overload

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from codesearch.runtime.handles import Method
    from codesearch.runtime.orphans import Watch

log = logging.getLogger(__name__)

#: A shard as the index's `shard_files` names it (plain data, for Ray and the registry's lists of
#: published shards, `codesearch.runtime.published`): its path, or ``[path, [dead repository ids]]``.
ShardSpec = str | list[Any]

REGISTRY_NAME = "codesearch-registry"
#: Seconds a registry call may take before the caller gives up (the registry is in trouble).
CALL_TIMEOUT_S = 30.0


#: Records a registry does not keep in its snapshot: each replica writes its own again within a
#: second (`drain.DrainGate`), and they change too often to be worth a file write each.
PASSING = ("drain-report:",)


class RegistryActor:
    """A dict of JSON-able values, safe for concurrent calls (a threaded actor). `owner` names
    who made it: ``runtime:<prefix>:<id>`` for a service's runtime (`ensure`), "" otherwise.

    `snapshot`: a file (in the service's data directory) that holds every record but the
    `PASSING` ones, rewritten (to a temporary file, then renamed) after each change. When its
    process dies, Ray runs this constructor again with the same arguments: the registry reads the
    snapshot back, so layouts, deployments, index versions, shard lists and a drain flag
    outlive it. Only a snapshot written by the same `owner` is read: a new runtime (another
    owner tag) starts empty, never from the records of the one it replaced."""

    def __init__(self, owner: str = "", snapshot: str = "", watch: Watch | None = None):
        self._owner = owner
        self._snapshot = snapshot
        self._values: dict[str, object] = _read_snapshot(snapshot, owner) if snapshot else {}
        self._lock = threading.Lock()
        self._watching: set[str] = set()
        if self._values:
            log.warning("registry %s restarted: %d records read back from %s", owner, len(self._values), snapshot)
        armed = [cast("Watch", v) for k, v in self._values.items() if k.startswith(WATCH_PREFIX)]
        for w in [*([watch] if watch else []), *armed]:
            self.watch(w)

    def watch(self, w: Watch) -> None:
        """Apply the orphan rule to the runtime `w` names (`codesearch.runtime.orphans`): once no
        replica ``w["replicas"]*`` has existed for ``w["orphan_s"]``, end the actors of its runtime
        record (if that record is still the one of owner ``w["owner"]``) and forget its records.
        Kept in the snapshot, so a registry Ray restarts watches again."""
        with self._lock:
            if w["owner"] in self._watching:
                return
            self._watching.add(w["owner"])
            self._values[WATCH_PREFIX + w["prefix"]] = dict(w)
            self._save()
        threading.Thread(target=self._watch, args=(w,), name="registry-watch", daemon=True).start()

    def _watch(self, w: Watch) -> None:
        from codesearch.runtime import orphans

        if not orphans.watch_owner(w["replicas"], w["orphan_s"]):
            return
        with self._lock:
            self._watching.discard(w["owner"])
            runtime = self._values.get(runtime_key(w["prefix"]))
            if not isinstance(runtime, dict) or runtime.get("owner") != w["owner"]:
                if self._values.get(WATCH_PREFIX + w["prefix"]) == dict(w):
                    del self._values[WATCH_PREFIX + w["prefix"]]
                    self._save()
                return  # stopped as it should be, or replaced by a newer runtime: not this watch's to end
            names = [str(n) for n in runtime.get("actors") or []]
            pool = str((runtime.get("record") or {}).get("searcher_prefix") or "")
            for key in [runtime_key(w["prefix"]), WATCH_PREFIX + w["prefix"], *pool_keys(pool)]:
                self._values.pop(key, None)
            self._save()
        log.warning(
            "registry: no replica %s* for %gs; ending runtime %s: %s", w["replicas"], w["orphan_s"], w["owner"], names
        )
        orphans.end_actors(names)
        if self._owner == w["owner"]:  # the runtime's own registry goes with it
            self.discard_snapshot()
            import ray

            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)

    def owner(self) -> str:
        return self._owner

    def put(self, key: str, value: object) -> None:
        with self._lock:
            changed = self._values.get(key) != value
            self._values[key] = value
            if changed and not key.startswith(PASSING):
                self._save()

    def get(self, key: str) -> object:
        with self._lock:
            return self._values.get(key)

    def delete(self, *keys: str) -> None:
        with self._lock:
            found = [k for k in keys if k in self._values]
            for key in found:
                del self._values[key]
            if any(not k.startswith(PASSING) for k in found):
                self._save()

    def delete_prefix(self, prefix: str) -> None:
        with self._lock:
            found = [k for k in self._values if k.startswith(prefix)]
            for key in found:
                del self._values[key]
            if any(not k.startswith(PASSING) for k in found):
                self._save()

    def discard_snapshot(self) -> None:
        """Remove the snapshot (the runtime that owns this registry is stopping: nothing to restore)."""
        if self._snapshot:
            with self._lock, contextlib.suppress(FileNotFoundError):
                os.unlink(self._snapshot)

    def _save(self) -> None:
        """Rewrite the snapshot (called with the lock held). Not fsynced: it must survive the
        registry's process, not the machine (a machine that restarts starts a new runtime)."""
        if not self._snapshot:
            return
        keep = {k: v for k, v in self._values.items() if not k.startswith(PASSING)}
        tmp = f"{self._snapshot}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"owner": self._owner, "values": keep}, f)
            os.replace(tmp, self._snapshot)
        except OSError as e:  # a full or read-only disk: the registry serves from memory still
            log.error("registry snapshot %s not written: %s", self._snapshot, e)

    def items(self, prefix: str) -> dict[str, object]:
        with self._lock:
            return {k: v for k, v in self._values.items() if k.startswith(prefix)}

    def ping(self) -> bool:
        return True


#: The key prefixes of the runtime record (`put_runtime`) and of its orphan watch (`RegistryActor.watch`).
RUNTIME_PREFIX = "runtime:"
WATCH_PREFIX = "watch:"
#: The records of a searcher pool (`forget_pool`).
POOL_RECORDS = ("deployment", "layout", "index-version", "shard-lists", "permissions")


def runtime_key(prefix: str) -> str:
    """The key of the record of runtime `prefix` (`put_runtime`)."""
    return RUNTIME_PREFIX + prefix


def pool_keys(pool: str) -> list[str]:
    """The keys of the records of searcher pool `pool` (none for "")."""
    return [f"{record}:{pool}" for record in POOL_RECORDS] if pool else []


def _read_snapshot(path: str, owner: str) -> dict[str, object]:
    """The records of the snapshot at `path` if `owner` wrote it, else none (see `RegistryActor`)."""
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:  # torn or unreadable: start empty, as before snapshots
        log.error("registry snapshot %s not read: %s", path, e)
        return {}
    if not isinstance(saved, dict) or saved.get("owner") != owner or not isinstance(saved.get("values"), dict):
        return {}
    return dict(saved["values"])


if TYPE_CHECKING:

    class RegistryHandle(ActorHandle[RegistryActor]):
        """A handle to the `RegistryActor` (`codesearch.runtime.handles`): the methods called by
        name (`_call`) are not listed."""

        owner: Method[str]
        ping: Method[bool]
        discard_snapshot: Method[None]
        watch: Method[None]


_handle: RegistryHandle | None = None
_handle_lock = threading.Lock()


@overload
def _registry(
    create: Literal[True], owner: str = "", snapshot: str = "", watch: Watch | None = None
) -> RegistryHandle: ...
@overload
def _registry(
    create: bool, owner: str = "", snapshot: str = "", watch: Watch | None = None
) -> RegistryHandle | None: ...
def _registry(create: bool, owner: str = "", snapshot: str = "", watch: Watch | None = None) -> RegistryHandle | None:
    """The registry actor (created when `create` and there is none), or None. With a
    `snapshot`, it is placed on this node if it can be (softly: where the snapshot file is, so
    that a restart finds it). With `watch` (see `ensure`), it is detached and watches its owner."""
    global _handle
    import ray

    from codesearch.runtime import NAMESPACE

    if _handle is not None:
        return _handle
    with _handle_lock:
        if _handle is None:
            try:
                _handle = cast("RegistryHandle", ray.get_actor(REGISTRY_NAME, namespace=NAMESPACE))
            except ValueError:
                if not create:
                    return None
                placement: dict[str, Any] = {"lifetime": "detached"} if watch else {}
                if snapshot:
                    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                    node = ray.get_runtime_context().get_node_id()
                    placement["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
                _handle = cast(
                    "RegistryHandle",
                    ray.remote(RegistryActor)
                    .options(
                        name=REGISTRY_NAME,
                        namespace=NAMESPACE,
                        get_if_exists=True,
                        num_cpus=0,
                        max_restarts=-1,
                        max_task_retries=-1,
                        max_concurrency=16,
                        **placement,
                    )
                    .remote(owner, snapshot, watch),
                )
        return _handle


def _call(method: str, *args: object, create: bool = False) -> Any:
    """What the registry's `method` answers for `args` (None when there is no registry and not
    `create`): a JSON-able value, of the shape the typed function that wrote it put (each reader
    below says it). A registry that died is looked up (or created) once more."""
    import ray

    global _handle
    for attempt in (0, 1):
        handle = _registry(create)
        if handle is None:
            return None
        try:
            return ray.get(getattr(handle, method).remote(*args), timeout=CALL_TIMEOUT_S)
        except ray.exceptions.RayActorError:
            _handle = None  # gone for good (its owner ended): look it up (or create it) again
            if attempt:
                raise
    return None


def ensure(owner: str, timeout_s: float = 60.0, snapshot: str = "", watch: Watch | None = None) -> None:
    """Create the registry now, owned by the calling process and tagged `owner` (what the
    runtime replica does first, so that the registry goes with the application), keeping its
    records in the file `snapshot` too (see `RegistryActor`). With `watch` (a service's runtime:
    `orphans.Watch`), it is detached instead, like the runtime's other actors, and ends the runtime
    once no replica that may own it is left (`codesearch.runtime.orphans`). A registry of
    another runtime (``runtime:`` tag: the replica this one replaces, still stopping) is waited
    for until it is gone, at most `timeout_s`, so that nothing is written into one about to end;
    one made by any other process is used as it is."""
    import ray

    deadline = time.monotonic() + timeout_s
    while True:
        forget_handle()
        handle = _registry(create=False)
        if handle is None:
            break
        try:
            tag = ray.get(handle.owner.remote(), timeout=CALL_TIMEOUT_S)
        except ray.exceptions.RayActorError:
            tag = "(ending)"  # being killed now: look again
        if not tag.startswith(("runtime:", "(ending)")) or tag == owner:
            if watch is not None:  # another process's registry (a notebook's): it applies the rule all the same
                ray.get(handle.watch.remote(watch), timeout=CALL_TIMEOUT_S)
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the registry of another codesearch runtime ({tag}) is still running")
        time.sleep(0.2)
    if snapshot:  # a snapshot of an earlier runtime (one that ended without `release`) is not ours
        with contextlib.suppress(FileNotFoundError):
            os.unlink(snapshot)
    handle = _registry(create=True, owner=owner, snapshot=snapshot, watch=watch)
    ray.get(handle.ping.remote(), timeout=CALL_TIMEOUT_S)


def registry_owner() -> str | None:
    """The `owner` tag of the registry (None: there is none)."""
    import ray

    forget_handle()
    handle = _registry(create=False)
    if handle is None:
        return None
    try:
        return str(ray.get(handle.owner.remote(), timeout=CALL_TIMEOUT_S))
    except ray.exceptions.RayActorError:
        forget_handle()
        return None


def kill_registry() -> None:
    """End the registry whoever made it, and its snapshot (a runtime clearing what an earlier one
    of its own deployment left half started)."""
    import ray

    handle = _registry(create=False)
    if handle is not None:
        with contextlib.suppress(Exception):  # already gone
            ray.get(handle.discard_snapshot.remote(), timeout=CALL_TIMEOUT_S)
        with contextlib.suppress(Exception):
            ray.kill(handle, no_restart=True)
    forget_handle()


def release(owner: str) -> None:
    """End the registry if it is the one `ensure(owner)` made (a runtime stopping)."""
    import ray

    handle = _registry(create=False)
    if handle is None:
        return
    try:
        if ray.get(handle.owner.remote(), timeout=CALL_TIMEOUT_S) == owner:
            ray.get(handle.discard_snapshot.remote(), timeout=CALL_TIMEOUT_S)
            ray.kill(handle, no_restart=True)
    except Exception as e:  # noqa: BLE001 - already gone
        log.debug("registry not released: %s", e)
    forget_handle()


def forget_handle() -> None:
    """Drop this process's handle (the registry was replaced: a new Ray session, a test)."""
    global _handle
    _handle = None


# ------------------------------------------------------------------------------ typed records


@dataclass(frozen=True)
class Deployment:
    """Where the service of a searcher pool keeps its data, and how many searchers it has."""

    data_dir: str
    searchers: int
    #: the state database's `Store.instance_id` ("" when unknown): a notebook checks it opened that one
    instance: str = ""
    #: the state database, as `describe_database` writes it (no password), for error messages
    database: str = ""


@dataclass(frozen=True)
class Layout:
    """How the named searchers of a pool form partitions × copies."""

    partitions: int
    copies: int


def put_runtime(prefix: str, record: dict[str, Any]) -> None:
    """Record the runtime `prefix`: ``{"owner": <its owner tag>, "replica": <its Serve replica's
    actor name>, "actors": [<names>], "record": {...}}`` (`codesearch.serving.adoption`)."""
    _call("put", runtime_key(prefix), record, create=True)


def get_runtime(prefix: str) -> dict[str, Any] | None:
    raw = _call("get", runtime_key(prefix))
    return dict(raw) if isinstance(raw, dict) else None


def forget_runtime(prefix: str) -> None:
    """Remove the record of runtime `prefix` and its orphan watch (it stopped as it should)."""
    _call("delete", runtime_key(prefix), WATCH_PREFIX + prefix)


def put_deployment(pool: str, record: Deployment) -> None:
    _call("put", f"deployment:{pool}", asdict(record), create=True)


def get_deployment(pool: str) -> Deployment | None:
    raw = _call("get", f"deployment:{pool}")
    return (
        Deployment(
            str(raw["data_dir"]), int(raw["searchers"]), str(raw.get("instance") or ""), str(raw.get("database") or "")
        )
        if raw
        else None
    )


def put_layout(pool: str, record: Layout) -> None:
    _call("put", f"layout:{pool}", asdict(record), create=True)


def get_layout(pool: str) -> Layout | None:
    raw = _call("get", f"layout:{pool}")
    return Layout(int(raw["partitions"]), int(raw["copies"])) if raw else None


def put_index_version(pool: str, version: int) -> None:
    _call("put", f"index-version:{pool}", int(version), create=True)


def get_index_version(pool: str) -> int | None:
    raw = _call("get", f"index-version:{pool}")
    return int(raw) if raw is not None else None


def put_shard_lists(pool: str, lists: dict[int, list[list[ShardSpec]]]) -> None:
    _call("put", f"shard-lists:{pool}", {str(v): parts for v, parts in lists.items()}, create=True)


def get_shard_lists(pool: str) -> dict[int, list[list[ShardSpec]]]:
    raw = _call("get", f"shard-lists:{pool}") or {}
    return {int(v): parts for v, parts in raw.items()}


def forget_pool(pool: str) -> None:
    """Remove everything recorded for the searcher pool `pool`."""
    _call("delete", *pool_keys(pool))


def put_permissions_enabled(pool: str, enabled: bool | None) -> None:
    """Record whether the service of `pool` applies the permission rule (None: forget it)."""
    if enabled is None:
        _call("delete", f"permissions:{pool}")
    else:
        _call("put", f"permissions:{pool}", bool(enabled), create=True)


def get_permissions_enabled(pool: str) -> bool | None:
    """Whether the service of searcher pool `pool` applies the permission rule (None: not said)."""
    raw = _call("get", f"permissions:{pool}")
    return None if raw is None else bool(raw)


def put_scheduler_searchers(actor_id: str, prefix: str, count: int) -> None:
    _call("put", f"scheduler:{actor_id}", [prefix, int(count)], create=True)


def get_scheduler_searchers(actor_id: str) -> tuple[str, int] | None:
    raw = _call("get", f"scheduler:{actor_id}")
    return (str(raw[0]), int(raw[1])) if raw else None


def forget_scheduler(actor_id: str) -> None:
    _call("delete", f"scheduler:{actor_id}")


def put_drain_flag(app: str, until: float) -> None:
    _call("put", f"drain:{app}", {"until": float(until)}, create=True)


def get_drain_flag(app: str) -> dict[str, float] | None:
    flag: dict[str, float] | None = _call("get", f"drain:{app}")
    return flag


def put_drain_report(app: str, replica: str, in_flight: int) -> None:
    _call("put", f"drain-report:{app}:{replica}", {"inFlight": int(in_flight)}, create=True)


def drain_reports(app: str) -> list[dict[str, int]]:
    reports: dict[str, dict[str, int]] = _call("items", f"drain-report:{app}:") or {}
    return list(reports.values())


def clear_drain(app: str) -> None:
    """Lower the drain flag of `app` and drop its replicas' reports."""
    _call("delete", f"drain:{app}")
    _call("delete_prefix", f"drain-report:{app}:")


def clear_drain_reports(app: str) -> None:
    _call("delete_prefix", f"drain-report:{app}:")
