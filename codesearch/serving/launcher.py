"""`codesearch serve`: start Ray (or join `RAY_ADDRESS`), sync and index, serve HTTP, stop cleanly.

Steps, printed as they happen:
1. the service's spec, made as ``serve deploy``'s is (`codesearch.serving.spec.spec_from`): the
   data directory (``--data-dir``, else ``DATA_CACHE_DIR``, ``$DATA_DIR/.codesearch`` or
   ``~/.codesearch``; made private, 0700), the config (``--config``, ``CONFIG_PATH``, else the
   embedded offline demo of `demo.py`) and the environment (a bad variable is refused before
   anything starts);
2. a local Ray instance (its port checked first: a busy one is an error before anything starts),
   or the cluster ``RAY_ADDRESS`` names (checked to answer; refused when it already runs a
   ``codesearch`` application, or Serve there listens on another port than ``--port``);
3. the Serve application of `codesearch.serving.bootstrap`, the same one ``serve deploy``
   deploys: the runtime (scheduler with its start-up cleanup and crash recovery, syncers,
   indexers, compactor, shard searchers) and the HTTP API on ``--host:--port`` (default
   127.0.0.1:3000). HTTP is up at once: searches answer from what is indexed so far, the home page
   shows the sync. A restart on the same data directory re-uses its mirrors and shards;
4. the progress of the first sync, a line per repository as it is indexed (one line rewritten in
   place on a terminal), until every connection synced once and every repository is indexed or
   failed (or ``CODESEARCH_FIRST_SYNC_TIMEOUT_S``, default 600 s, passed: indexing goes on);
5. it runs in the foreground until Ctrl-C or SIGTERM, then stops without losing a request
   (`codesearch.serving.stop`, the same stop as ``python -m codesearch.serving.app_builder
   shutdown``): it drains the application (new requests are refused with a JSON 503 and
   ``Retry-After``; those already taken finish, for at most ``CODESEARCH_DRAIN_TIMEOUT_S``,
   default 30 s; a second Ctrl-C or SIGTERM stops waiting), then removes it (its runtime replica
   stops the scheduler and the workers, then ends every runtime actor), then stops the Ray
   instance it started.

With a Ray instance of its own, `codesearch serve` removes the application by shutting Serve
down (its proxy stops listening: connections are refused); joined to a cluster (``RAY_ADDRESS``)
it deletes only its own application, ``codesearch``, and leaves Serve and every other
application running (the cluster's proxies then answer its routes as unknown ones, with Serve's
plain-text 404: point a load balancer's health check at ``/api/health``, which answers 503 from
the moment the drain begins).

Send SIGTERM to this process only (systemd: ``KillMode=mixed``; a container's stop signal reaches
it as PID 1): sent to the whole process group it also reaches Ray's own processes, the HTTP proxy
among them, which do not wait for requests. Ctrl-C in a terminal is fine: Ray's processes block
SIGINT.

The searchers are reloaded by the scheduler after every index change (`SearcherPool.refresh`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from codesearch import defaults
from codesearch.progress_line import ProgressLine
from codesearch.serving.bootstrap import names
from codesearch.serving.serve_settings import APP_NAME

if TYPE_CHECKING:
    from codesearch.runtime.scheduler import SchedulerHandle
    from codesearch.serving.bootstrap import ServiceSpec
    from codesearch.serving.spec import ServiceArgs
    from codesearch.store import Store

#: The searchers' names (``<prefix>-<i>``), the same as ``serve deploy``'s default.
SEARCHER_PREFIX = names()["searchers"]


def default_data_dir() -> str:
    from codesearch import environment

    return environment.data_dir()


def _say(msg: str) -> None:
    print(msg, flush=True)


def wait_first_sync(
    store: Store,
    *,
    timeout_s: float = 600.0,
    stop: threading.Event | None = None,
    say: Callable[[str], None] = _say,
    repo_lines: ProgressLine | None = None,
    searchable: Callable[[], object] | None = None,
) -> bool:
    """Print the progress of the first sync and index until every connection synced once and
    every repo is indexed or failed (or `timeout_s` passed, or `stop` was set): a summary line
    when it changes, and each repository as it is done (`repo_lines`). `searchable` is called
    before the last line (every repository indexed) is printed: it waits until the searchers
    have what was indexed (`searchers_caught_up`), so that a search sent on that line finds it."""
    import time

    from codesearch.runtime.scheduler import first_sync_state
    from codesearch.statuses import IndexStatus, SyncStatus

    # on a terminal, one line rewritten in place (``indexed [3/40] github.com/acme/api``)
    repo_lines = repo_lines or ProgressLine(sys.stdout, plain=None if say is _say else say)
    deadline = time.monotonic() + timeout_s
    last = None
    reported: set[str] = set()
    done_repos: set[int] = set()
    try:
        while True:
            st = first_sync_state(store)
            line = (
                f"first sync: {st['connections'] - len(st['pending_connections'])}/{st['connections']} "
                "connections synced, "
                f"{st['indexed']}/{st['repos']} repositories indexed"
                + (f", {st['failed']} failed" if st["failed"] else "")
            )
            if line != last:
                repo_lines.end()
                if st["done"] and searchable is not None:
                    searchable()
                say(line)
                last = line
            for repo in st["finished"]:
                if repo.id not in done_repos:
                    done_repos.add(repo.id)
                    verb = "indexed" if repo.index_status == IndexStatus.INDEXED else "FAILED "
                    repo_lines.show(f"  {verb} [{len(done_repos)}/{st['repos']}] {repo.name}")
            for conn in st["connection_rows"]:
                if conn.name in reported or conn.synced_at is None and conn.sync_status != SyncStatus.FAILED:
                    continue
                reported.add(conn.name)
                repo_lines.end()
                if conn.sync_error:
                    say(f"  [{conn.name}] failed: {conn.sync_error}")
                for w in conn.sync_warnings or []:
                    say(f"  [{conn.name}] warning: {w}")
            if st["done"]:
                return True
            if time.monotonic() > deadline:
                repo_lines.end()
                say(f"first sync not finished after {timeout_s:g}s; indexing goes on")
                return False
            if stop is not None and stop.wait(0.5):
                return False
            if stop is None:
                time.sleep(0.5)
    finally:
        repo_lines.end()


#: Seconds the first sync's last line waits at most for the searchers to load what was indexed.
SEARCHABLE_WAIT_S = 30.0


def searchers_caught_up(scheduler: str, timeout_s: float = SEARCHABLE_WAIT_S) -> bool:
    """Wait until the searchers hold what the store says is indexed (at most `timeout_s`);
    whether they do. A repository is recorded indexed once its shards are in the index, and the
    scheduler gives the searchers the index's new shard lists at its next tick: this asks it to
    do so now (`SchedulerActor.catch_up`). `scheduler`: its actor's name (``names()["scheduler"]``)."""
    import ray

    from codesearch.serving.bootstrap import get_actor

    found = get_actor(scheduler)
    if found is None:
        return False
    try:
        ray.get(cast("SchedulerHandle", found).catch_up.remote(), timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - a scheduler restarting: the line is printed anyway
        _say(f"warning: the searchers may not have the last index yet: {reason(e)}")
        return False
    return True


#: Where `ray start` records the address of the cluster it started (what RAY_ADDRESS=auto reads).
RAY_CURRENT_CLUSTER = os.path.join(os.environ.get("RAY_TMPDIR") or "/tmp", "ray", "ray_current_cluster")


def cluster_unreachable(address: str, timeout_s: float = 5.0) -> str | None:
    """Why the Ray cluster `address` (``host:port`` of its GCS, or ``auto``) cannot be joined,
    or None when its GCS accepts a connection (or the address is one we do not check: a Ray
    Client ``ray://`` address, ``local``)."""
    import socket

    if address == "local" or address.startswith("ray://"):
        return None
    if address == "auto":
        try:
            with open(RAY_CURRENT_CLUSTER) as f:
                address = f.read().strip()
        except OSError:
            return (
                f"no Ray cluster is recorded on this machine ({RAY_CURRENT_CLUSTER} is missing): start one with "
                "`ray start --head`, or unset RAY_ADDRESS to run on a Ray instance of codesearch's own"
            )
    host, _, port_text = address.rpartition(":")
    if not host or not port_text.isdigit():
        return f"{address!r} is not host:port"
    try:
        with socket.create_connection((host.strip("[]"), int(port_text)), timeout=timeout_s):
            return None
    except OSError as e:
        return (
            f"nothing answers at {address} ({e.strerror or type(e).__name__}): the cluster is down or the "
            "address is wrong (`ray status` on its head says)"
        )


def port_in_use(host: str, port: int) -> str | None:
    """Why nothing new can listen on `host`:`port` ("the port is in use by another program"),
    or None when it is free. Binding without SO_REUSEPORT fails while any socket listens there,
    even one of a Serve proxy that would let ours share the port."""
    import errno
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        return f"the host {host!r} does not resolve ({e.strerror})"
    family, _type, _proto, _name, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a closed socket's TIME_WAIT is no obstacle
        try:
            sock.bind(addr)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return f"port {port} is in use by another program (another codesearch serve?)"
            return f"cannot listen there ({e.strerror})"
    return None


#: Times `start_serve` tries to bring Serve up (its proxy may die while a busy machine starts it).
SERVE_START_ATTEMPTS = 3


def reason(e: BaseException) -> str:
    """The line of a Ray or Serve error that says what went wrong (their messages carry the
    remote traceback; the last non-empty line is the error itself)."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


def deployment_failure(app_name: str) -> str | None:
    """What Serve says of the deployments of `app_name` that failed (a replica constructor's
    error: its last line), or None."""
    from ray import serve

    try:
        app = serve.status().applications.get(app_name)
    except Exception:  # noqa: BLE001 - Serve is gone too
        return None
    found = []
    for name, d in app.deployments.items() if app else ():
        lines = [line.strip() for line in (d.message or "").splitlines() if line.strip()]
        if lines and getattr(d.status, "value", d.status) != "HEALTHY":
            found.append(f"{name}: {lines[-1]}")
    return "; ".join(found) or None


def ray_logs_dir() -> str:
    """Where this machine's Ray instance writes its logs (Serve's under ``serve/``)."""
    return os.path.join(os.environ.get("RAY_TMPDIR") or "/tmp", "ray", "session_latest", "logs")


def start_serve(
    host: str,
    port: int,
    logging_config: dict[str, Any],
    *,
    owns_cluster: bool = True,
    attempts: int = SERVE_START_ATTEMPTS,
    say: Callable[[str], None] = _say,
) -> str | None:
    """Start Serve's controller and proxy on `host`:`port`, trying again when they die while
    coming up (on a busy machine the proxy may not be ready in time and is killed; with a Ray
    instance of our own, `owns_cluster`, what is left of them is shut down first: on a shared
    cluster, Serve and its other applications are never touched); why it failed after
    `attempts`, or None."""
    import time

    from ray import serve

    for attempt in range(1, attempts + 1):
        try:
            serve.start(http_options={"host": host, "port": port}, logging_config=logging_config)
            return None
        except Exception as e:  # noqa: BLE001 - ActorDiedError of the proxy or controller, a timeout
            why = reason(e)
            if attempt == attempts:
                return f"Serve did not start after {attempts} attempts ({why})"
            say(f"serve: not ready ({why}); trying again")
            if owns_cluster:
                with contextlib.suppress(Exception):  # nothing to stop
                    serve.shutdown()  # type: ignore[no-untyped-call]  # Ray leaves it unannotated
            time.sleep(2.0 * attempt)
    return None


def serve_conflict(host: str, port: int, app_name: str) -> str | None:
    """Why `codesearch serve` cannot deploy on the cluster it joined, or None: the cluster
    already runs an application named `app_name`, or its Serve listens on another address
    (Serve has one HTTP address per cluster; ``--host``/``--port`` would be ignored)."""
    from ray import serve

    try:
        status = serve.status()
    except Exception:  # noqa: BLE001 - Serve does not run there yet: we start it
        return None
    if app_name in status.applications:
        return (
            f"the cluster already runs a Serve application named {app_name!r} (another codesearch?): "
            "stop it first (`python -m codesearch.serving.app_builder shutdown`)"
        )
    try:
        from ray.serve.context import _get_global_client

        client = _get_global_client()
        if client is None:  # no controller: Serve is not running
            return None
        options = client.http_config
    except Exception:  # noqa: BLE001 - no controller: Serve is not running
        return None
    if options is not None and int(options.port) != int(port):
        return (
            f"Serve on this cluster listens on port {options.port}, not {port} (one HTTP address per "
            f"cluster): run with --port {options.port}"
        )
    return None


def hosts_warning(host: str, environ: Mapping[str, str]) -> str | None:
    """What to tell the operator who listens on every address (``--host 0.0.0.0``) without naming
    the host names clients use: the service answers only loopback names and the public URL's
    (`codesearch.service.middleware.allowed_hosts`; for a named ``--host`` that is ``http://HOST:PORT``),
    so those clients would get 421."""
    from codesearch.service.middleware.allowed_hosts import ALLOWED_HOSTS

    if host not in ("0.0.0.0", "::", "") or environ.get("AUTH_URL") or environ.get(ALLOWED_HOSTS):
        return None
    return (
        f"listening on every address ({host or '*'}), but neither AUTH_URL nor {ALLOWED_HOSTS} is set: only "
        f"requests for localhost, 127.0.0.1 or [::1] are answered, any other host name or address gets 421 "
        f"Misdirected Request. Set AUTH_URL to the public base URL, or {ALLOWED_HOSTS} to the names clients use "
        f"(comma-separated)"
    )


def listening_url(host: str, port: int) -> str:
    """Where `codesearch serve` answers on `host`:`port`, as a browser names it: its public URL
    unless ``AUTH_URL`` or the arguments name another (`spec.spec_from`)."""
    return f"http://{'localhost' if host in ('127.0.0.1', '0.0.0.0') else host}:{port}"


def service_spec(
    args: ServiceArgs, *, host: str, port: int, environ: Mapping[str, str], say: Callable[[str], None] = _say
) -> ServiceSpec:
    """The spec `run` serves: `spec.spec_from`, as for ``serve deploy``, with where this process
    listens as the public URL unless ``AUTH_URL`` names another."""
    from codesearch.serving.spec import spec_from

    return spec_from(args, environ, default_public_url=listening_url(host, port), say=say)


def run(
    args: ServiceArgs,
    *,
    port: int = defaults.PORT,
    host: str = defaults.HOST,
    stop: threading.Event | None = None,
    dashboard: bool = True,
) -> int:
    """Run the service of `args` on `host`:`port` until `stop` is set or a signal arrives (see
    the module docstring). The Ray instance it starts has Ray's dashboard (`dashboard`; a cluster
    it joins has its own).

    The spec comes from `spec.spec_from` (`service_spec`), as ``serve deploy``'s does; what stays
    here is what only this front door has: where it listens, Ray, the first sync's progress, the
    signals. The spec's environment (the config's ``environmentOverrides`` among it) is then
    applied to this process, as every replica and runtime actor applies it to theirs: the Ray
    instance started here inherits it (Serve's proxy among its processes), and so do this
    process's own reads (the state database it watches the first sync in,
    ``CODESEARCH_FIRST_SYNC_TIMEOUT_S``, the host names it warns of)."""
    import ray
    from ray import serve

    from codesearch.serving import drain, serve_settings
    from codesearch.serving.bootstrap import application
    from codesearch.serving.stop import stop as stop_service
    from codesearch.store import Store

    spec = service_spec(args, host=host, port=port, environ=os.environ)
    spec.env.apply()
    unreachable = hosts_warning(host, os.environ)
    if unreachable:
        _say(f"warning: {unreachable}")

    started_ray = not ray.is_initialized()
    address = os.environ.get("RAY_ADDRESS")
    if started_ray and address:
        dead = cluster_unreachable(address)
        if dead:  # ray.init would retry the GCS for minutes in silence
            _say(f"cannot join the Ray cluster (RAY_ADDRESS={address}): {dead}")
            return 2
        _say(f"ray: joining the cluster at {address}")
    if started_ray and not address:
        busy = port_in_use(host, port)
        if busy:  # Serve's proxy would share the port silently and split the traffic with its owner
            _say(f"cannot serve on http://{host}:{port}: {busy}; choose another --port, or stop what listens there")
            return 2
    if started_ray:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        if not address:  # our own Ray: its Serve proxies answer a dead replica's requests in JSON
            # and take the cheap path to the replicas (`serve_settings`)
            from codesearch.serving.proxy_errors import install_for_own_ray

            install_for_own_ray()
        # "local": a new instance, never one that `ray.init()` would find by itself (the cluster
        # a `ray start` on this machine recorded), whose Serve we would otherwise take over.
        context = ray.init(address=address or "local", include_dashboard=dashboard and not address, log_to_driver=False)
        _say(f"ray: {'joined ' + address if address else 'started a local instance'}")
        if dashboard and not address and getattr(context, "dashboard_url", None):
            _say(f"ray dashboard: http://{context.dashboard_url}")
    owns_cluster = started_ray and not address
    if not owns_cluster:
        conflict = serve_conflict(host, port, APP_NAME)
        if conflict:
            _say(f"cannot serve codesearch on this cluster: {conflict}")
            if started_ray:
                ray.shutdown()
            return 2
    stop = stop or threading.Event()
    abort = threading.Event()  # a second signal: stop waiting for running requests

    def on_signal(*_: object) -> None:
        (abort if stop.is_set() else stop).set()

    previous = (
        {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        if threading.current_thread() is threading.main_thread()
        else {}
    )
    for s in previous:
        signal.signal(s, on_signal)
    deploying = deployed = False
    try:
        drain.clear(APP_NAME)  # a flag left by a drain that died would refuse every request
        deploying = True
        _say("starting the runtime and the HTTP API")
        failed = start_serve(host, port, serve_settings.logging_config(), owns_cluster=owns_cluster)
        if failed is None:
            try:
                serve.run(application(spec), name=APP_NAME, route_prefix="/")
            except Exception as e:  # noqa: BLE001 - a replica that cannot start: say why, no traceback
                failed = f"the application did not start: {deployment_failure(APP_NAME) or reason(e)}"
        if failed:
            _say(f"cannot serve: {failed} (Ray's logs: {ray_logs_dir()})")
            return 1
        deployed = True
        _say(f"codesearch is serving at http://{host}:{port} (Ctrl-C to stop)")
        store = Store.open(spec.data_dir)
        try:
            wait_first_sync(
                store,
                timeout_s=float(os.environ.get("CODESEARCH_FIRST_SYNC_TIMEOUT_S") or 600),
                stop=stop,
                searchable=lambda: searchers_caught_up(spec.names()["scheduler"]),
            )
        finally:
            store.close()
        while not stop.wait(0.5):
            pass
        _say("shutting down")
        return 0
    finally:
        if deploying:
            stop_service(
                APP_NAME,
                spec.prefix,
                spec.drain_timeout_s,
                owns_cluster=owns_cluster,
                deployed=deployed,
                abort=abort,
                say=_say,
            )
        if started_ray:
            ray.shutdown()
        for s, h in previous.items():
            signal.signal(s, h)


if __name__ == "__main__":  # pragma: no cover
    from codesearch.serving.spec import ServiceArgs

    sys.exit(run(ServiceArgs()))
