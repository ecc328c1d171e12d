"""Stopping the service without cutting a request: the one `stop` of both front doors.

``codesearch serve`` calls it on Ctrl-C or SIGTERM (`launcher.run`), and operators run it on a
cluster as ``python -m codesearch.serving.app_builder shutdown`` for an application that
``serve deploy`` deployed. In order:

1. **drain** the application (`codesearch.serving.drain`): new requests are refused with a JSON
   503 and ``Retry-After``, the running ones finish, for at most `timeout_s` (or until `abort`);
2. **remove** it: ``serve.delete`` of that application alone (other applications of the cluster
   keep running), or, for a Ray instance the caller started itself (`owns_cluster`),
   ``serve.shutdown`` (its proxy stops listening: a newcomer's connection is refused);
3. **wait** for the runtime's actors to end: the application's runtime replica
   (`bootstrap.RuntimeOwner`) ends them when it stops, once it stopped the scheduler and let the
   workers finish their jobs. Any still there after `gone_timeout_s` (those of an application
   deleted without waiting, or of one whose runtime replica was down) are killed.

Why the drain comes first: ``serve.shutdown()`` kills Serve's HTTP proxies at once, cutting every
request still being answered, and ``serve.delete()`` removes the route at once, so newcomers get
the proxy's plain-text 404. ``serve shutdown`` and ``serve delete`` on their own remove
everything too, runtime actors included, but with those cuts.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from codesearch.serving.bootstrap import DEFAULT_PREFIX, get_actor, names, runtime_actors
from codesearch.serving.serve_settings import APP_NAME

log = logging.getLogger(__name__)

__all__ = ["GONE_TIMEOUT_S", "stop", "wait_gone"]

#: Seconds `stop` waits for the runtime's actors to end before it kills those left.
GONE_TIMEOUT_S = 15.0


def stop(
    app_name: str = APP_NAME,
    prefix: str = DEFAULT_PREFIX,
    timeout_s: float | None = None,
    *,
    gone_timeout_s: float = GONE_TIMEOUT_S,
    owns_cluster: bool = False,
    deployed: bool | None = None,
    namespace: str | None = None,
    abort: threading.Event | None = None,
    say: Callable[[str], None] = log.info,
) -> list[str]:
    """Stop the Serve application `app_name` and the runtime `prefix` it owns (see the module
    docstring): drain for at most `timeout_s` (None: ``CODESEARCH_DRAIN_TIMEOUT_S`` of this process,
    else 30 s: `spec.drain_timeout_s`), remove, wait at most `gone_timeout_s` for the
    runtime's actors (in `namespace`, default ``codesearch``). `deployed`: whether the application
    was deployed, so there is something to drain (None: ask Serve whether it has running
    replicas). With `owns_cluster`, an application that was not drained in time (or never deployed)
    is left to the caller's ``ray.shutdown()``, which ends everything at once: Serve's own shutdown
    would wait for the requests again, or, after a failed deploy, for its controller's whole
    timeout. `say` reports each step. Returns the names of the runtime's actors that were running.
    Needs a Ray connection."""
    import ray
    from ray import serve

    from codesearch.serving import drain
    from codesearch.serving.spec import drain_timeout_s

    if timeout_s is None:
        timeout_s = drain_timeout_s()
    try:
        before = [name for name, _ in runtime_actors(prefix, namespace)]
    except Exception as e:  # noqa: BLE001 - Ray is going away: stop what can be stopped
        say(f"listing the runtime's actors failed ({type(e).__name__}: {e})")
        before = []
    if deployed is None:
        try:
            deployed = bool(drain.running_replicas(app_name))
        except Exception as e:  # noqa: BLE001 - Serve not running: nothing to drain
            say(f"stopping the Serve application {app_name}: {type(e).__name__}: {e}")
            deployed = False
    drained = True
    if deployed:
        say(
            f"draining: new requests are refused; waiting up to {timeout_s:g}s for the running ones"
            + (" (Ctrl-C again to stop at once)" if abort is not None else "")
        )
        try:
            result = drain.drain(app_name, timeout_s, abort=abort)
            drained = result.drained
            say(f"draining: {result.describe()}")
        except Exception as e:  # noqa: BLE001 - Ray already going away: stop anyway
            drained = False
            say(f"draining failed ({type(e).__name__}: {e}); stopping anyway")
    removed = False
    try:
        if not owns_cluster:
            serve.delete(app_name, _blocking=drained)
            removed = True
        elif drained and deployed:
            serve.shutdown()  # type: ignore[no-untyped-call]  # Ray leaves serve.shutdown unannotated
            removed = True
    except Exception as e:  # noqa: BLE001 - Serve never started, or the app is already gone
        say(f"stopping the Serve application {app_name}: {type(e).__name__}: {e}")
    finally:
        with contextlib.suppress(Exception):  # the Ray instance is already gone
            drain.clear(app_name)
    if owns_cluster and not removed:
        return before  # the caller's ray.shutdown() ends the rest
    if not wait_gone(before, timeout_s=gone_timeout_s):
        for name, ns in runtime_actors(prefix, namespace):
            handle = get_actor(name, ns)
            if handle is not None:
                try:
                    ray.kill(handle, no_restart=True)
                except Exception as e:  # noqa: BLE001 - already gone
                    log.debug("kill %s: %s", name, e)
    from codesearch.runtime.registry import forget_runtime
    from codesearch.runtime.searchers import forget_pool

    with contextlib.suppress(Exception):  # the registry went with the application
        forget_pool(names(prefix)["searchers"])
        forget_runtime(prefix)  # (in a registry that stays: another process made it)
    return before


def wait_gone(names_: list[str], timeout_s: float = 30.0) -> bool:
    """Wait until none of the named actors can be looked up any more (an actor's end, like a
    kill, is asynchronous), at most `timeout_s`; whether they are gone."""
    import ray

    deadline = time.monotonic() + timeout_s
    while True:
        alive = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
        if not alive.intersection(names_):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
