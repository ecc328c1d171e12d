"""One bootstrap for `codesearch serve` and for ``serve run`` / ``serve deploy``: a Serve
application that owns the whole runtime.

The application (``codesearch`` by default) has two deployments:

* ``codesearch-runtime``: one replica, no CPU. Its constructor starts the runtime actors
  (`start_runtime_actors`: the scheduler, the connection syncers, the repository indexers, the
  compactor, the shard source and the shard searchers, and the registry) as named **detached**
  actors, so that they outlive the replica's process: a replica that dies (``kill -9``, the OOM
  killer) costs only itself, and the replica Serve starts instead adopts the runtime it finds
  (`codesearch.serving.adoption`: only one of its own deployment, once its old replica is gone).
  Whatever removes the application removes the runtime as well: ``serve shutdown``, ``serve
  delete``, `codesearch serve` stopping, a redeploy that replaces the replica. Serve calls the
  replica's ``__del__``, which lets the scheduler finish its tick and every worker its job, then
  ends every actor (`RuntimeOwner.stop`), within ``RUNTIME_SHUTDOWN_S``; and an application
  removed while its runtime replica was down is noticed by the registry, which ends the runtime
  (`codesearch.runtime.orphans`).
* ``codesearch-api``: the HTTP API, web pages and MCP over the searchers
  (`deployment.search_application`), ``replicas`` of them.

HTTP is up as soon as both deployments are: nothing waits for the first sync. Searches answer
from what is indexed so far (their stats say how many repositories are still waiting,
`codesearch.app.search`), and the home page shows the sync live. A request that arrives before the
searchers exist is answered 503 with ``Retry-After`` (`SearchersStarting`).

Names: every actor is ``<prefix>-<role>`` in the Ray namespace ``codesearch``
(`codesearch.runtime.NAMESPACE`): ``-scheduler``, ``-sync-<i>``, ``-index-<i>``, ``-compactor``,
``-searcher-<i>``. Notebooks find the searchers by those names (`codesearch.Client.ray`). Two
applications with the same prefix on one cluster would fight over the names: a runtime that
finds its names taken waits for them to go (``NAMES_FREE_S``: the replica it replaces is still
stopping) and then fails with a message naming the prefix.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codesearch import defaults
from codesearch.sealed_env import SealedEnv
from codesearch.serving.serve_settings import RUNTIME_DEPLOYMENT

if TYPE_CHECKING:
    from ray.actor import ActorHandle
    from ray.serve import Application

    from codesearch.config.models import IdentityProvider
    from codesearch.runtime.orphans import Watch
    from codesearch.runtime.workers import RuntimeOptions

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "codesearch"
#: Seconds the runtime replica's stop may take (the scheduler's tick, the workers' jobs).
RUNTIME_SHUTDOWN_S = 60.0
#: Seconds a new runtime waits for the actor names of the one it replaces to be released.
NAMES_FREE_S = 60.0
#: The file in the data directory where the runtime's registry keeps its records, so that they
#: outlive the registry's process (`codesearch.runtime.registry.RegistryActor`).
SNAPSHOT = "registry.json"


@dataclass(frozen=True)
class ServiceSpec:
    """Everything the application needs, decided in the process that builds it (the launcher,
    or Serve's build task for ``serve deploy``): the replicas and actors it starts may run on
    other nodes, with another environment. Both front doors make it with `spec.spec_from`."""

    config_path: str
    data_dir: str
    prefix: str = DEFAULT_PREFIX
    searchers: int = defaults.SEARCHERS
    searcher_copies: int = defaults.SEARCHER_COPIES
    replicas: int = defaults.REPLICAS
    max_ongoing_requests: int | None = None
    public_url: str | None = None
    anonymous_access: bool | None = None
    #: may hold a password: never in the repr
    database_url: str | None = field(default=None, repr=False)
    syncers: int | None = None
    indexers: int | None = None
    runtime_resources: dict[str, float] | None = None
    searcher_resources: dict[str, float] | None = None
    searcher_cpus: float = 0.0
    #: where searchers keep copies of their shards on their own node (``<dir>/<prefix>-searcher-<i>``),
    #: fetched through Ray from a shard source beside the indexers: for searchers on nodes that
    #: do not share the data directory (`codesearch.runtime.shard_copy`). None: read the data directory.
    searcher_data_dir: str | None = None
    #: environment of the replicas and runtime actors (`forwarded_environment`), handed to their
    #: constructors, never in a ``runtime_env`` (`codesearch.sealed_env`)
    env: SealedEnv = SealedEnv()
    #: seconds the requests running at a stop may take (None: `deployment.DRAIN_TIMEOUT_S`)
    drain_timeout_s: float | None = None
    #: the cap on a search's ``matches`` (None: ``DEFAULT_MAX_MATCH_COUNT`` of the building process)
    max_matches: int | None = None

    def names(self) -> dict[str, str]:
        return names(self.prefix)


#: Environment variables handed from the process that builds the application to its replicas and
#: actors (which may run on nodes with another environment): webhook secrets, the server secret,
#: log level, ... (`forwarded_environment`). They travel as a constructor argument, a `SealedEnv`,
#: never in a ``runtime_env``, which Ray logs and shows in clear text (`codesearch.sealed_env`).
FORWARDED_PREFIXES = ("CODESEARCH_", "SOURCEBOT_")


def forwarded_environment(environ: Mapping[str, str], overridden: Iterable[str] = ()) -> dict[str, str]:
    """The variables of `environ` the service's processes must see as the builder sees them:
    those named ``CODESEARCH_*`` and ``SOURCEBOT_*`` (webhook secrets, ``SOURCEBOT_ENCRYPTION_KEY``,
    ``SOURCEBOT_LOG_LEVEL``, the ``CODESEARCH_OAUTH_*`` lifetimes), ``DATABASE_URL``, ``AUTH_URL`` (the
    OAuth issuer, which must be the same in every replica), ``AUTH_SECRET`` (the sign-in secret: a
    session made by one replica must be valid at every other), and the config's
    ``environmentOverrides`` (`overridden`)."""
    keep = {k: v for k, v in environ.items() if k.startswith(FORWARDED_PREFIXES)}
    keep.update({k: environ[k] for k in overridden if k in environ})
    for name in ("DATABASE_URL", "AUTH_URL", "AUTH_SECRET"):
        if (environ.get(name) or "").strip():
            keep[name] = environ[name].strip()
    return keep


def names(prefix: str = DEFAULT_PREFIX) -> dict[str, str]:
    """The actor names of the runtime `prefix`: scheduler, compactor, and the prefixes of the
    searchers and workers."""
    return {
        "scheduler": f"{prefix}-scheduler",
        "searchers": f"{prefix}-searcher",
        "workers": prefix,
        "compactor": f"{prefix}-compactor",
        "shard_source": f"{prefix}-shard-source",
    }


def get_actor(name: str, namespace: str | None = None) -> ActorHandle[Any] | None:
    """The named actor `name` of `namespace` (default ``codesearch``), or None."""
    import ray

    from codesearch.runtime import NAMESPACE

    try:
        return ray.get_actor(name, namespace=namespace or NAMESPACE)
    except ValueError:
        return None


def runtime_actors(prefix: str, namespace: str | None = None) -> list[tuple[str, str]]:
    """(name, namespace) of the live actors of the runtime `prefix`: the named actors of
    `namespace` (default ``codesearch``) with one of its names (`names`)."""
    import ray

    from codesearch.runtime import NAMESPACE

    namespace = namespace or NAMESPACE
    pattern = re.compile(rf"^{re.escape(prefix)}-(scheduler|compactor|shard-source|searcher-\d+|sync-\d+|index-\d+)$")
    return sorted(
        {
            (a["name"], a["namespace"])
            for a in ray.util.list_named_actors(all_namespaces=True)
            if pattern.match(a["name"]) and a["namespace"] == namespace
        }
    )


def _wait_names_free(spec: ServiceSpec, timeout_s: float) -> None:
    """Wait until no actor of the runtime `spec.prefix` is left (the one this replaces is stopping)."""
    deadline = time.monotonic() + timeout_s
    while runtime_actors(spec.prefix):
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"a codesearch runtime named {spec.prefix!r} already runs on this cluster (another application, or a "
                f"`codesearch serve` joined to it): stop it first, or give this one another prefix"
            )
        time.sleep(0.5)


def start_runtime_actors(
    spec: ServiceSpec, options: RuntimeOptions | None = None, *, owner: str = "", watch: str = ""
) -> dict[str, Any]:
    """Start the runtime of `spec` as named actors owned by the calling process (they end with
    it): the scheduler (start-up cleanup and crash recovery first), the workers, the compactor,
    the searchers (told to the scheduler, which reloads them after every index change, and
    published for notebooks). Returns ``{"scheduler", "workers", "searchers", "record"}``.

    With `watch` (the runtime replica: `adoption.replicas_prefix`), they are detached instead and
    the registry, tagged `owner` (`adoption.owner_tag`), records them for the replica that may
    adopt them (`codesearch.serving.adoption`) and ends them once no such replica is left."""
    import ray

    from codesearch.config import load_config
    from codesearch.runtime import NAMESPACE, orphans, registry
    from codesearch.runtime.compactor import start_compactor
    from codesearch.runtime.scheduler import start_scheduler
    from codesearch.runtime.searchers import SearcherPool, publish_deployment
    from codesearch.runtime.workers import RuntimeOptions, start_workers, worker_counts
    from codesearch.serving.adoption import replica_name

    options = options or RuntimeOptions()
    settings = load_config(spec.config_path).settings
    n = spec.names()
    n_sync, n_index = worker_counts(settings)
    n_sync = n_sync if spec.syncers is None else int(spec.syncers)
    n_index = n_index if spec.indexers is None else int(spec.indexers)
    worker_names = [f"{n['workers']}-sync-{i}" for i in range(n_sync)] + [
        f"{n['workers']}-index-{i}" for i in range(n_index)
    ]
    searcher_names = [f"{n['searchers']}-{i}" for i in range(spec.searchers * spec.searcher_copies)]
    source_names = [n["shard_source"]] if spec.searcher_data_dir else []
    actors = [n["scheduler"], *worker_names, n["compactor"], *source_names, *searcher_names]
    owner = owner or f"runtime:{spec.prefix}:{uuid.uuid4().hex[:8]}"
    watching: Watch | None = None
    if watch:
        watching = {"prefix": spec.prefix, "owner": owner, "replicas": watch, "orphan_s": orphans.orphan_s()}
    # first, owned by this process (or detached): it goes with the application; its records outlive its process
    registry.ensure(owner, timeout_s=NAMES_FREE_S, snapshot=_snapshot_path(spec.data_dir), watch=watching)
    # the names first: what a replica dying while it starts them leaves is found (its successor, the orphan rule)
    runtime = {"owner": owner, "replica": replica_name() if watch else "", "actors": actors}
    registry.put_runtime(spec.prefix, {**runtime, "record": {}})
    opts: dict[str, Any] = {"lifetime": "detached"} if watch else {}
    if spec.runtime_resources:
        opts["resources"] = {k: float(v) for k, v in spec.runtime_resources.items()}

    scheduler = start_scheduler(
        spec.config_path, spec.data_dir, options, name=n["scheduler"], actor_options=opts, env=spec.env
    )
    # the rest after the scheduler's start-up cleanup (the workers take jobs as they start), all
    # together: each actor is a process to start (~1 s on two cores), and one after another they
    # cost a `codesearch serve` start ~5 s; the workers and the compactor answer once the searchers do
    workers: list[Any] = start_workers(  # actor handles
        spec.data_dir,
        settings,
        options,
        syncers=n_sync,
        indexers=n_index,
        name_prefix=n["workers"],
        actor_options=opts,
        env=spec.env,
        names=worker_names,
        wait=False,
    )
    workers.append(start_compactor(spec.data_dir, name=n["compactor"], actor_options=opts, env=spec.env, wait=False))

    index_dir = os.path.join(spec.data_dir, "index")
    fetch: dict[str, str] = {}
    if spec.searcher_data_dir:  # searchers without the data directory get the shards through Ray
        from codesearch.runtime.shard_copy import start_shard_source

        os.makedirs(index_dir, exist_ok=True)
        workers.append(start_shard_source(index_dir, n["shard_source"], opts))
        fetch = {"copy_to": spec.searcher_data_dir, "source": n["shard_source"]}
    searcher_opts: dict[str, Any] = {"num_cpus": spec.searcher_cpus, **({"lifetime": "detached"} if watch else {})}
    if spec.searcher_resources:
        searcher_opts["resources"] = {k: float(v) for k, v in spec.searcher_resources.items()}
    pool = SearcherPool.create(
        index_dir,
        spec.searchers,
        copies=spec.searcher_copies,
        name_prefix=n["searchers"],
        keep_empty=True,
        actor_options=searcher_opts,
        **fetch,
    )
    ray.get([w.ping.remote() for w in workers])
    ray.get(scheduler.set_searchers.remote(n["searchers"], len(pool.actors)))
    instance, database = ray.get(scheduler.database_identity.remote())
    publish_deployment(
        n["searchers"],
        data_dir=os.path.abspath(spec.data_dir),
        searchers=len(pool.actors),
        instance=instance,
        database=database,
    )
    record = {
        "prefix": spec.prefix,
        "namespace": NAMESPACE,
        "scheduler": n["scheduler"],
        "workers": worker_names,
        "compactor": n["compactor"],
        "searcher_prefix": n["searchers"],
        "searchers": len(pool.actors),
        "data_dir": os.path.abspath(spec.data_dir),
        "config": spec.config_path,
        **({"shard_source": n["shard_source"]} if fetch else {}),
    }
    registry.put_runtime(spec.prefix, {**runtime, "record": record})
    return {"scheduler": scheduler, "workers": workers, "searchers": pool, "record": record, "registry": owner}


def _snapshot_path(data_dir: str) -> str:
    """Where the registry keeps its records (`SNAPSHOT` in the data directory); "" (none) when
    the data directory cannot be made on this node."""
    try:
        os.makedirs(data_dir, exist_ok=True)
    except OSError as e:
        log.warning("the registry keeps its records in memory only: %s", e)
        return ""
    return os.path.join(os.path.abspath(data_dir), SNAPSHOT)


def stop_runtime_actors(
    runtime: dict[str, Any], timeout_s: float = 15.0, before_searchers: Callable[[], object] | None = None
) -> None:
    """Stop what `start_runtime_actors` started: the scheduler's loop first (no refresh or job is
    started while the rest stops), then the workers (each finishes its job), then (after
    `before_searchers`: the wait for the requests still running) the searchers."""
    import ray

    from codesearch.runtime.workers import stop_workers

    scheduler = runtime.get("scheduler")
    if scheduler is not None:
        try:
            ray.get(scheduler.shutdown.remote(), timeout=timeout_s)
        except Exception as e:  # noqa: BLE001 - dead or stuck: killed below
            log.warning("scheduler shutdown: %s", type(e).__name__)
        ray.kill(scheduler, no_restart=True)
    if runtime.get("workers"):
        stop_workers(runtime["workers"], timeout_s=timeout_s)
    if before_searchers is not None:
        try:
            before_searchers()
        except Exception as e:  # noqa: BLE001 - stop anyway
            log.warning("before stopping the searchers: %s", e)
    if runtime.get("searchers") is not None:
        from codesearch.runtime.searchers import forget_pool

        runtime["searchers"].close()
        try:
            forget_pool(runtime["record"]["searcher_prefix"])
        except Exception as e:  # noqa: BLE001 - the registry is gone already
            log.debug("pool not forgotten: %s", e)
        for actor in runtime["searchers"].actors:
            with contextlib.suppress(Exception):  # already gone
                ray.kill(actor, no_restart=True)
    if runtime.get("registry"):  # last: the others read it until they stop
        from codesearch.runtime import registry

        with contextlib.suppress(Exception):  # the registry is gone already
            registry.forget_runtime(runtime["record"]["prefix"])  # in a registry that stays (another process's)
        registry.release(runtime["registry"])


class RuntimeOwner:
    """The body of the ``codesearch-runtime`` deployment (see the module docstring)."""

    def __init__(self, spec: ServiceSpec, token: str = "") -> None:
        from codesearch import environment

        spec.env.apply()  # first: everything below reads the environment
        environment.configure_logging()
        self.spec = spec
        self._app = _serve_app_name()
        self._runtime = _start_or_adopt(spec, self._app, token)
        log.info("codesearch runtime %s running: %s", spec.prefix, self._runtime["record"])

    def record(self) -> dict[str, Any]:
        """Names, namespace, data directory of the runtime (for tools and tests)."""
        return dict(self._runtime["record"])

    def stop(self) -> None:
        runtime: dict[str, Any] | None = getattr(self, "_runtime", None)
        self._runtime = {}  # {} also when __init__ failed
        if runtime:
            stop_runtime_actors(runtime, before_searchers=self._wait_for_requests)
            log.info("codesearch runtime %s stopped", self.spec.prefix)

    def _wait_for_requests(self) -> None:
        """When the application is being deleted (``serve delete``), its HTTP replicas finish
        their requests with the searchers: wait for them (`drain.wait_while_deleted`), within
        this replica's own graceful shutdown time."""
        app = getattr(self, "_app", "")
        if app:
            from codesearch.serving.deployment import DRAIN_TIMEOUT_S
            from codesearch.serving.drain import wait_while_deleted

            drain_s = DRAIN_TIMEOUT_S if self.spec.drain_timeout_s is None else self.spec.drain_timeout_s
            wait_while_deleted(app, min(drain_s + 5.0, RUNTIME_SHUTDOWN_S - 20.0))

    def __del__(self) -> None:
        self.stop()


def _start_or_adopt(spec: ServiceSpec, app: str, token: str) -> dict[str, Any]:
    """The runtime of the replica of deployment `token` of Serve application `app`: the one its
    predecessor left if it can adopt it (`adoption.claim`), else a new one, detached. Outside
    Serve (no `app` or `token`): a new one owned by the calling process."""
    from codesearch.serving import adoption

    if not app or not token:
        _wait_names_free(spec, NAMES_FREE_S)
        return start_runtime_actors(spec)
    adopted = adoption.claim(
        spec.prefix, app, token, lambda: [name for name, _ in runtime_actors(spec.prefix)], NAMES_FREE_S
    )
    if adopted is not None:
        return adopted
    _wait_names_free(spec, NAMES_FREE_S)
    return start_runtime_actors(
        spec, owner=adoption.owner_tag(spec.prefix, app, token), watch=adoption.replicas_prefix(app)
    )


def _serve_app_name() -> str:
    """The Serve application of the calling replica ("" outside one)."""
    try:
        from ray import serve

        return str(serve.get_replica_context().app_name or "")
    except Exception:  # noqa: BLE001 - not in a Serve replica (a test, a driver)
        return ""


def runtime_deployment(spec: ServiceSpec) -> Application:
    """The bound ``codesearch-runtime`` deployment of `spec`."""
    from ray import serve

    from codesearch.serving import serve_settings

    # the runtime_env holds Serve's switches only, never a secret: Ray logs it (`spec.env` carries the rest)
    actor_options: dict[str, Any] = {"num_cpus": 0, "runtime_env": {"env_vars": serve_settings.replica_env()}}
    if spec.runtime_resources:
        actor_options["resources"] = {k: float(v) for k, v in spec.runtime_resources.items()}
    # the decorator applied to the class (not the class as its first argument): the form Ray's types describe
    deployment = serve.deployment(
        name=RUNTIME_DEPLOYMENT,
        num_replicas=1,
        max_ongoing_requests=8,
        graceful_shutdown_timeout_s=RUNTIME_SHUTDOWN_S,
        graceful_shutdown_wait_loop_s=0.5,
        health_check_period_s=serve_settings.HEALTH_CHECK_PERIOD_S,
        logging_config=serve_settings.logging_config(),
        ray_actor_options=actor_options,
    )(RuntimeOwner)
    # the token names this deployment: a replica adopts only a runtime started by one of its own (`adoption`)
    return deployment.bind(spec, uuid.uuid4().hex[:12])


def application(spec: ServiceSpec) -> Application:
    """The bound application: the runtime, and the API over its searchers."""
    from codesearch.serving.deployment import DRAIN_TIMEOUT_S, MAX_ONGOING_REQUESTS, search_application

    return search_application(
        spec.names()["searchers"],
        spec.searchers * spec.searcher_copies,
        replicas=spec.replicas,
        max_ongoing_requests=spec.max_ongoing_requests or MAX_ONGOING_REQUESTS,
        public_url=spec.public_url or os.environ.get("AUTH_URL") or _default_public_url(),
        data_dir=spec.data_dir,
        database_url=spec.database_url,
        anonymous_access=spec.anonymous_access,
        drain_timeout_s=DRAIN_TIMEOUT_S if spec.drain_timeout_s is None else spec.drain_timeout_s,
        max_matches=spec.max_matches,
        env=spec.env,
        runtime=runtime_deployment(spec),
        identity_providers=_identity_providers(spec.config_path),
    )


def _identity_providers(config_path: str) -> list[IdentityProvider]:
    """The config's `identityProviders` for the API replicas (none when the file cannot be read:
    the runtime reports that)."""
    from codesearch.config import load_config
    from codesearch.errors import ConfigError

    try:
        return load_config(config_path).identity_providers
    except ConfigError:
        return []


def _default_public_url() -> str:
    from codesearch.search.options import DEFAULT_PUBLIC_URL

    return DEFAULT_PUBLIC_URL
