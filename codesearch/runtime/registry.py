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
drain flag {until}             ``drain:<app>``                        `drain.drain`
drain report {inFlight}        ``drain-report:<app>:<replica>``       `drain.DrainGate`
=============================  =====================================  ==========================

Lifetime. The registry is created by the first process that writes to it (`put` creates it;
reads never do): in a service, the runtime replica, which owns it, so it goes with the
application like every other actor of codesearch. Readers that find no registry get nothing
(no pool, not draining). Ray restarts it if its process dies (an empty registry: pools publish
again at their next index change, and a searcher then answers from its newest list).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, overload

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from codesearch.runtime.handles import Method

log = logging.getLogger(__name__)

#: A shard as the index's `shard_files` names it (plain data, for Ray and the registry's lists of
#: published shards, `codesearch.runtime.published`): its path, or ``[path, [dead repository ids]]``.
ShardSpec = str | list[Any]

REGISTRY_NAME = "codesearch-registry"
#: Seconds a registry call may take before the caller gives up (the registry is in trouble).
CALL_TIMEOUT_S = 30.0


class RegistryActor:
    """A dict of JSON-able values, safe for concurrent calls (a threaded actor). `owner` names
    who made it: ``runtime:<prefix>:<id>`` for a service's runtime (`ensure`), "" otherwise."""

    def __init__(self, owner: str = ""):
        self._owner = owner
        self._values: dict[str, object] = {}
        self._lock = threading.Lock()

    def owner(self) -> str:
        return self._owner

    def put(self, key: str, value: object) -> None:
        with self._lock:
            self._values[key] = value

    def get(self, key: str) -> object:
        with self._lock:
            return self._values.get(key)

    def delete(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._values.pop(key, None)

    def delete_prefix(self, prefix: str) -> None:
        with self._lock:
            for key in [k for k in self._values if k.startswith(prefix)]:
                del self._values[key]

    def items(self, prefix: str) -> dict[str, object]:
        with self._lock:
            return {k: v for k, v in self._values.items() if k.startswith(prefix)}

    def ping(self) -> bool:
        return True


if TYPE_CHECKING:

    class RegistryHandle(ActorHandle[RegistryActor]):
        """A handle to the `RegistryActor` (`codesearch.runtime.handles`): the methods called by
        name (`_call`) are not listed."""

        owner: Method[str]
        ping: Method[bool]


_handle: RegistryHandle | None = None
_handle_lock = threading.Lock()


@overload
def _registry(create: Literal[True], owner: str = "") -> RegistryHandle: ...
@overload
def _registry(create: bool, owner: str = "") -> RegistryHandle | None: ...
def _registry(create: bool, owner: str = "") -> RegistryHandle | None:
    """The registry actor (created when `create` and there is none), or None."""
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
                    )
                    .remote(owner),
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


def ensure(owner: str, timeout_s: float = 60.0) -> None:
    """Create the registry now, owned by the calling process and tagged `owner` (what the
    runtime replica does first, so that the registry goes with the application). A registry of
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
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the registry of another codesearch runtime ({tag}) is still running")
        time.sleep(0.2)
    handle = _registry(create=True, owner=owner)
    ray.get(handle.ping.remote(), timeout=CALL_TIMEOUT_S)


def release(owner: str) -> None:
    """End the registry if it is the one `ensure(owner)` made (a runtime stopping)."""
    import ray

    handle = _registry(create=False)
    if handle is None:
        return
    try:
        if ray.get(handle.owner.remote(), timeout=CALL_TIMEOUT_S) == owner:
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
    _call(
        "delete",
        f"deployment:{pool}",
        f"layout:{pool}",
        f"index-version:{pool}",
        f"shard-lists:{pool}",
        f"permissions:{pool}",
    )


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
