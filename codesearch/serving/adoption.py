"""A runtime that outlives its replica: the runtime replica's successor adopts its actors.

The ``codesearch-runtime`` replica (`bootstrap.RuntimeOwner`) starts the runtime's actors
(scheduler, syncers, indexers, compactor, shard source, searchers, registry) **detached**: they
do not end with the replica's process. So a replica that dies (``kill -9``, the OOM killer) costs
only the replica: the searches go on over the same searchers, and the replica Serve starts
instead finds the runtime and adopts it (`claim`) rather than starting a new one.

What a replica adopts, and what it does not:

* Only a runtime of **its own deployment**: the runtime record's owner tag
  (``runtime:<prefix>:<application>:<deployment token>``, `owner_tag`) names the application
  and a token drawn when the application was built (`bootstrap.runtime_deployment`), which every
  replica of that deployment gets as an argument. Another application, or an earlier deployment
  of this one, never matches.
* Only once the replica that owned it is gone: the registry records which replica that is
  (`registry.put_runtime`, keyed by the runtime's prefix: the registry may be shared with a
  notebook's searchers, or have been made by one). While it still runs (a redeploy: it is
  stopping, and stops the runtime), the newcomer waits, then starts a runtime of its own.
* Only a whole one: every actor it records answers. A runtime left half started (its replica
  died while starting it), or an earlier deployment's of this application, is ended and a new
  one started.

Nothing is leaked: the replica's stop (`RuntimeOwner.stop`: ``codesearch serve`` stopping,
``serve delete``, ``serve shutdown``, a redeploy) ends the actors as before, and when the
application is removed while no runtime replica is there to do it, the registry notices that no
replica of the application's runtime deployment has existed for `orphans.ORPHAN_S` and ends
the actors the runtime recorded, and only those (`codesearch.runtime.orphans`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from codesearch.serving.serve_settings import RUNTIME_DEPLOYMENT

log = logging.getLogger(__name__)

#: Seconds each adopted actor may take to answer (one that Ray is restarting answers once up).
PING_S = 30.0


def owner_tag(prefix: str, app: str, token: str) -> str:
    """The registry's owner tag of the runtime `prefix` of application `app`, deployment `token`."""
    return f"runtime:{prefix}:{app}:{token}"


def replicas_prefix(app: str) -> str:
    """The name prefix of the runtime replicas of `app` (Serve's ``SERVE_REPLICA::<app>#<deployment>#<id>``)."""
    return f"SERVE_REPLICA::{app}#{RUNTIME_DEPLOYMENT}#"


def replica_name() -> str:
    """The actor name of the calling replica ("" outside an actor)."""
    import ray

    return str(ray.get_runtime_context().get_actor_name() or "")


def _alive(name: str) -> bool:
    import ray

    from codesearch.runtime.orphans import SERVE_NAMESPACE

    return any(a["name"] == name and a["namespace"] == SERVE_NAMESPACE for a in ray.util.list_named_actors(True))


def claim(
    prefix: str, app: str, token: str, leftovers: Callable[[], list[str]], timeout_s: float
) -> dict[str, Any] | None:
    """The runtime of deployment `token` of `app`, adopted by the calling replica (the dict
    `bootstrap.start_runtime_actors` returns), or None: start one (what is left of a runtime of
    this application that cannot be adopted is ended first; `leftovers` lists the names of the
    live actors of the runtime `prefix`). Waits at most `timeout_s` for a replica that still owns
    the runtime to go."""
    from codesearch.runtime import orphans, registry

    mine = owner_tag(prefix, app, token)
    ours = owner_tag(prefix, app, "")
    me = replica_name()
    deadline = time.monotonic() + timeout_s
    while True:
        runtime = registry.get_runtime(prefix) or {}
        tag = str(runtime.get("owner") or "")
        if not tag.startswith(ours):
            return None  # none, or another application's: as it is (`registry.ensure` waits for its end)
        owner = str(runtime.get("replica") or "")
        if owner and owner != me and _alive(owner):  # a redeploy: the old replica is stopping its runtime
            if time.monotonic() > deadline:
                return None  # `registry.ensure` says whose it is
            time.sleep(0.5)
            continue
        adopted = _adopt(prefix, runtime, me) if tag == mine else None
        if adopted is not None:
            return adopted
        names = leftovers()
        log.warning("runtime %s: ending what an earlier replica left (%s, %s)", prefix, tag, names)
        orphans.end_actors(names)
        registry.forget_runtime(prefix)
        if registry.registry_owner() == tag:  # its own registry goes with it; another process's stays
            registry.kill_registry()
        return None


def _adopt(prefix: str, runtime: dict[str, Any], me: str) -> dict[str, Any] | None:
    """`runtime` (`registry.get_runtime`) taken over by replica `me` if every actor of it answers."""
    import ray

    from codesearch.runtime import NAMESPACE, registry
    from codesearch.runtime.searchers import SearcherPool

    record: dict[str, Any] = dict(runtime.get("record") or {})
    names = [str(n) for n in runtime.get("actors") or []]
    try:
        handles = {name: ray.get_actor(name, namespace=NAMESPACE) for name in names}
        ray.get([h.ping.remote() for h in handles.values()], timeout=PING_S)
        workers = [handles[n] for n in record["workers"]] + [handles[record["compactor"]]]
        if record.get("shard_source"):
            workers.append(handles[record["shard_source"]])
        pool = SearcherPool.attach(record["searcher_prefix"], int(record["searchers"]))
        scheduler = handles[record["scheduler"]]
    except Exception as e:  # noqa: BLE001 - an actor is missing or does not answer: not adoptable
        log.warning("runtime not adopted: %s: %s", type(e).__name__, e)
        return None
    registry.put_runtime(prefix, {**runtime, "replica": me})
    tag = str(runtime["owner"])
    log.warning("runtime %s adopted by %s (its replica died): %s", record.get("prefix"), me, names)
    return {"scheduler": scheduler, "workers": workers, "searchers": pool, "record": record, "registry": tag}
