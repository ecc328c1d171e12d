"""Draining: stop taking requests, finish the ones taken, then stop.

Why this exists. Ray Serve's ``serve.shutdown()`` kills its HTTP proxies on the controller's first
shutdown step, while the replicas behind them are still answering: every request in flight loses
its connection ("Server disconnected without sending a response"). ``serve.delete(app)`` keeps the
proxies and lets the replicas finish (their ``graceful_shutdown_*`` options), but it removes the
application's route at once, so a request that arrives meanwhile gets the proxy's plain-text 404,
not an answer a client can act on. Neither knows which requests our application has taken.

So the application does it itself, in two halves that meet in the cluster's registry
(`codesearch.runtime.registry`):

* **the gate** (`DrainGate`, the outermost ASGI layer of every replica, see `deployment.py`)
  counts the HTTP requests it let in and, every `POLL_S` seconds, reads the application's drain
  flag. While the flag is up it answers every new request at once with
  ``503 {"statusCode": 503, "errorCode": "SERVICE_UNAVAILABLE", "message": …}``, ``Retry-After``
  and ``Connection: close`` (the request was not started, so a retry is always safe), and
  reports its count of requests still running. When the flag goes away it serves again;
* **the drainer** (`drain`, called by `codesearch.serving.stop.stop`: `codesearch serve` on
  SIGTERM/SIGINT, ``python -m codesearch.serving.app_builder shutdown``) raises the flag and
  waits, at most `timeout_s`, until every running replica has reported and none has a request
  left. Only then is the Serve application removed, so the proxy cuts no request, and newcomers
  meet the gate's 503 until the end (with a Ray instance of our own; on a shared cluster, once
  our application is deleted, the cluster's proxies answer its routes as unknown ones).

The flag carries an expiry (wall clock, `timeout_s` plus `FLAG_GRACE_S`): a flag left behind by a
drainer that died cannot keep a later deployment of the same application refusing requests.

What draining cannot cover: a replica process that dies while it answers (killed by the kernel
for memory, a crash, its node lost, a ``ray.kill``). Serve's router retries a request on another
replica only while no replica has accepted it, never one a replica was running, so those
requests fail. They fail in our JSON shape (``500 UNEXPECTED_ERROR``, "retry the request") where
Serve's proxies carry `codesearch.serving.proxy_errors` (a Ray instance `codesearch serve`
starts, and clusters started as ``cluster.yaml`` starts them), else with the plain-text
``Internal Server Error`` of the HTTP server under the proxy. Every way codesearch itself stops
or replaces replicas drains first: `codesearch serve`'s stop and the ``shutdown`` command through
this module (`codesearch.serving.stop`); redeploys, fewer replicas and replicas Serve found unhealthy through Serve's
graceful shutdown (`deployment.py`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codesearch.plurals import plural
from codesearch.runtime import registry
from codesearch.serving.serve_settings import RUNTIME_DEPLOYMENT

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

#: Seconds between two reads of the drain flag in a replica (and between two checks of the drainer).
POLL_S = 0.2
#: What a refused request is told to wait before trying again.
RETRY_AFTER_S = 5
#: How long a drain flag outlives its drainer's bound before replicas ignore it.
FLAG_GRACE_S = 60.0

REFUSAL_MESSAGE = (
    "codesearch is shutting down and did not start this request; retry in a few seconds (another instance may answer)"
)


def _flag_is_up(flag: dict[str, Any] | None, now: float) -> bool:
    if not flag:
        return False
    try:
        return float(flag["until"]) > now
    except (ValueError, KeyError, TypeError):
        return False


# --------------------------------------------------------------------------------- the gate


class DrainGate:
    """ASGI wrapper of one replica's application (see the module docstring). `app_name` is the
    Serve application whose flag it watches; None: the replica's own, looked up when the replica
    starts. The watcher thread starts with the first ASGI call (the replica's lifespan start-up)."""

    def __init__(self, app: ASGIApp, app_name: str | None = None, *, poll_s: float = POLL_S) -> None:
        self.app = app
        self.app_name = app_name
        self.poll_s = poll_s
        self.draining = False
        self.in_flight = 0
        self._replica: str | None = None
        self._watcher: threading.Thread | None = None
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._watcher is None:
            self._start_watcher()
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        # Counted before the flag is read: the watcher raises `draining` before it reads
        # `in_flight`, so a request either is counted in that report or sees the flag and leaves.
        # A refused one leaves the count before its refusal is written: it is not running, and a
        # report taken while a slow client reads its 503 would otherwise hold the drain back.
        self.in_flight += 1
        if self.draining:
            self.in_flight -= 1
            return await _refuse(send)
        try:
            return await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    def _start_watcher(self) -> None:
        with self._lock:
            if self._watcher is not None:
                return
            if self.app_name is None:
                from ray import serve

                context = serve.get_replica_context()
                self.app_name, self._replica = context.app_name, context.replica_tag
            self._replica = self._replica or f"{threading.get_native_id()}-{id(self)}"
            self._watcher = threading.Thread(
                target=self._watch, args=(self.app_name, self._replica), name="codesearch-drain-gate", daemon=True
            )
            self._watcher.start()

    def _watch(self, app_name: str, replica: str) -> None:
        while True:
            try:
                draining = _flag_is_up(registry.get_drain_flag(app_name), time.time())
                if draining != self.draining:
                    log.info("%s: %s", app_name, "draining: new requests are refused" if draining else "serving again")
                self.draining = draining
                if draining:
                    registry.put_drain_report(app_name, replica, self.in_flight)
            except Exception as e:  # noqa: BLE001 - the registry is briefly unreachable: keep the last state
                log.debug("drain flag of %s not read: %s", app_name, e)
            time.sleep(self.poll_s)


async def _refuse(send: Send) -> None:
    body = json.dumps({"statusCode": 503, "errorCode": "SERVICE_UNAVAILABLE", "message": REFUSAL_MESSAGE}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(RETRY_AFTER_S).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# ------------------------------------------------------------------------------ the drainer


@dataclass
class DrainResult:
    """How a drain ended: `drained` (every running replica reported and none has a request
    left), the replicas expected and heard from, the requests still running, the seconds taken."""

    drained: bool
    replicas: int
    reported: int
    in_flight: int
    seconds: float

    def describe(self) -> str:
        if self.drained:
            return f"drained {plural(self.reported, 'replica')} in {self.seconds:.1f}s"
        return (
            f"not drained after {self.seconds:.1f}s: {plural(self.in_flight, 'request')} still running, "
            f"{self.reported}/{plural(self.replicas, 'replica')} reported"
        )


#: Deployments of an application that take no HTTP request and have no gate (the runtime
#: replica of `codesearch.serving.bootstrap`): a drain does not wait for them to report.
UNGATED_DEPLOYMENTS = frozenset({RUNTIME_DEPLOYMENT})


def running_replicas(app_name: str) -> int:
    """The gated (HTTP) replicas of Serve application `app_name` in state RUNNING (0: no such
    application)."""
    from ray import serve

    app = serve.status().applications.get(app_name)
    if app is None:
        return 0
    return sum(
        n
        for name, d in app.deployments.items()
        if name not in UNGATED_DEPLOYMENTS
        for state, n in d.replica_states.items()
        if getattr(state, "value", state) == "RUNNING"
    )


def reports(app_name: str) -> list[dict[str, Any]]:
    """What the replicas of `app_name` reported since its drain began (``{"inFlight": n}`` each)."""
    return registry.drain_reports(app_name)


def flag_is_up(app_name: str) -> bool:
    """Whether the replicas of `app_name` refuse new requests (or will, within `POLL_S`)."""
    return _flag_is_up(registry.get_drain_flag(app_name), time.time())


def drain(app_name: str, timeout_s: float, *, abort: threading.Event | None = None) -> DrainResult:
    """Raise the drain flag of `app_name` and wait until its running replicas have no request
    left, at most `timeout_s` seconds (or until `abort` is set). The flag stays up: remove the
    application next, then `clear` the flag. Needs a Ray connection."""
    started = time.monotonic()
    registry.clear_drain_reports(app_name)  # reports of an earlier drain
    registry.put_drain_flag(app_name, time.time() + timeout_s + FLAG_GRACE_S)
    while True:
        expected = running_replicas(app_name)
        heard = reports(app_name)
        in_flight = sum(int(r.get("inFlight", 0)) for r in heard)
        seconds = time.monotonic() - started
        if len(heard) >= expected and in_flight == 0:
            return DrainResult(True, expected, len(heard), 0, seconds)
        if seconds >= timeout_s or (abort is not None and abort.is_set()):
            return DrainResult(False, expected, len(heard), in_flight, seconds)
        time.sleep(POLL_S)


def clear(app_name: str) -> None:
    """Lower the drain flag of `app_name` and drop its replicas' reports (its replicas, if any
    are left, serve again)."""
    registry.clear_drain(app_name)


def wait_while_deleted(app_name: str, timeout_s: float) -> bool:
    """While Serve deletes application `app_name` (``serve delete``, ``serve.delete``), wait
    until its gated replicas have stopped, at most `timeout_s`: what the runtime replica does
    before it stops the searchers (`bootstrap.RuntimeOwner.stop`), because Serve stops every
    replica of an application at once and the HTTP replicas finish their requests (their graceful
    shutdown) with the searchers the runtime would otherwise take away. Returns at once when the
    application is not being deleted (a redeploy replacing the runtime alone) or Serve cannot be
    asked (its controller is going too: ``serve shutdown``). True when none was left in time."""
    from ray import serve

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            app = serve.status().applications.get(app_name)
        except Exception as e:  # noqa: BLE001 - Serve itself is shutting down: nothing to wait for
            log.info("not waiting for the replicas of %s: %s", app_name, type(e).__name__)
            return False
        if app is None or getattr(app.status, "value", app.status) != "DELETING":
            return app is None
        left = len(_gated_replica_actors(app_name))
        if not left:
            return True
        if time.monotonic() >= deadline:
            log.warning("%s: %s still answering after %.0fs", app_name, plural(left, "replica"), timeout_s)
            return False
        time.sleep(POLL_S)


#: How Serve names a replica's actor (namespace ``serve``): ``SERVE_REPLICA::<app>#<deployment>#<id>``.
REPLICA_ACTOR_PREFIX = "SERVE_REPLICA::"


def _gated_replica_actors(app_name: str) -> list[str]:
    """The live replica actors of `app_name`'s gated deployments. Read from Ray's named actors,
    because while an application is being deleted Serve's status lists none of its deployments,
    though their replicas are still finishing requests."""
    import ray

    ours = f"{REPLICA_ACTOR_PREFIX}{app_name}#"
    return [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "serve"
        and a["name"].startswith(ours)
        and a["name"][len(ours) :].split("#", 1)[0] not in UNGATED_DEPLOYMENTS
    ]
