"""The application builder for ``serve run`` and ``serve deploy`` on a Ray cluster.

``serve_config.yaml`` names it: ``import_path: codesearch.serving.app_builder:app``. Serve calls
``app(args)`` with the config's ``args`` and deploys the application it returns: the same one
`codesearch serve` runs (`codesearch.serving.bootstrap`), with two deployments,
``codesearch-runtime`` (one replica that starts and owns the scheduler, the workers, the
compactor and the shard searchers) and ``codesearch-api`` (the HTTP API; the config's
``deployments: [{name: codesearch-api, ...}]`` overrides ``num_replicas``,
``max_ongoing_requests``, ``ray_actor_options``).

``app(args)`` itself starts nothing: it reads the config and the environment of the process that
builds the application (with ``serve deploy``, a build task of the Serve controller) and returns
the bound application. The runtime actors belong to the ``codesearch-runtime`` replica: ``serve
shutdown``, ``serve delete <app>`` or a redeploy remove them with it, after the scheduler finished
its tick and the workers their jobs. The runtime actors need the data directory at the same path
on the nodes where they run (shared storage such as NFS, see docs/cluster.md), or
``runtime_resources`` (custom resources, e.g. ``{"codesearch_data": 0.01}``) to pin the runtime
to the node that has it; searchers elsewhere then take ``searcher_data_dir``.

Arguments (``args`` of the Serve config; all optional):

==========================  =====================================================================
``config``                  the config file (path on the nodes), default ``CONFIG_PATH`` or the
                            offline demo of `codesearch.serving.demo`
``data_dir``                the data directory, default ``DATA_CACHE_DIR``, ``$DATA_DIR/.codesearch``
                            or ``~/.codesearch``
``searchers``               shard searchers: partitions of the index (2)
``searcher_copies``         copies of every partition, each search going to one copy (1)
``replicas``                Serve replicas of the API (1; the config's ``num_replicas`` wins)
``max_ongoing_requests``    per API replica (1000; the config's value wins)
``public_url``              the URL links point to, default ``AUTH_URL`` or http://localhost:3000
``anonymous_access``        true/false; default ``FORCE_ENABLE_ANONYMOUS_ACCESS`` or the config's
                            ``enablePublicAccess``
``database_url``            the state database, default ``DATABASE_URL`` or SQLite in the data dir
``prefix``                  actor name prefix (``codesearch``, as `codesearch serve`; two
                            applications on one cluster need two prefixes)
``syncers``, ``indexers``   worker counts (default from the config's concurrency settings)
``runtime_resources``       custom resources for the runtime replica, the scheduler and workers
``searcher_resources``      custom resources for the searchers, e.g. ``{"codesearch_searcher": 1}``
``searcher_cpus``           CPUs each searcher reserves (0)
``searcher_data_dir``       a directory on the searchers' nodes where they keep copies of their
                            shards, fetched through Ray from the node that builds the index: for
                            searchers on nodes without the data directory (default: none, the
                            searchers read the data directory)
==========================  =====================================================================

Unknown arguments are refused with a message naming them (a typo would otherwise be ignored).

Secrets: the builder hands what it forwards from its own environment (`bootstrap.forwarded_environment`:
the server secret, the webhook secrets, ``DATABASE_URL``, the config's ``environmentOverrides``,
...) to the replicas and runtime actors as a constructor argument (`codesearch.sealed_env`), never
in a ``runtime_env``. The config's own ``runtime_env`` and ``args`` are the operator's: Ray logs a
runtime env in clear text (``runtime_env_agent.log`` on every node) and ``serve config`` and the
dashboard show both, so secrets belong in the nodes' environment (before ``ray start``), where the
build task reads them, not there.

How to stop it without cutting a request: `shutdown_runtime` drains the application first (new
requests are refused with a JSON 503, running ones finish: `codesearch.serving.drain`, at most
``--drain-timeout`` seconds, 30 by default), then deletes it::

    python -m codesearch.serving.app_builder shutdown --address auto [--app codesearch]

``serve shutdown`` and ``serve delete`` also remove everything, runtime actors included, but do
not drain: ``serve shutdown`` closes the proxies at once (requests being answered are cut),
``serve delete`` answers newcomers with Serve's plain-text 404 while the replicas finish.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from typing import TYPE_CHECKING, Any

from codesearch import defaults
from codesearch.plurals import plural
from codesearch.sealed_env import SealedEnv
from codesearch.serving.bootstrap import (
    DEFAULT_PREFIX,
    ServiceSpec,
    forwarded_environment,
    get_actor,
    names,
    runtime_actors,
)
from codesearch.serving.serve_settings import APP_NAME

if TYPE_CHECKING:
    from ray.serve import Application

log = logging.getLogger(__name__)

__all__ = ["APP_NAME", "DEFAULT_PREFIX", "app", "names", "runtime_record", "shutdown_runtime", "spec_from_args"]

_ARGS = {
    "config",
    "data_dir",
    "searchers",
    "searcher_copies",
    "replicas",
    "max_ongoing_requests",
    "public_url",
    "anonymous_access",
    "database_url",
    "prefix",
    "syncers",
    "indexers",
    "runtime_resources",
    "searcher_resources",
    "searcher_cpus",
    "searcher_data_dir",
}
#: Arguments earlier versions took that mean nothing now (a warning, not an error).
_RETIRED = {"first_sync_timeout_s": "HTTP comes up at once; the home page shows the first sync"}


def _as_bool(v: object) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def spec_from_args(args: dict[str, Any] | None) -> ServiceSpec:
    """The `ServiceSpec` of a Serve config's ``args`` (see the module docstring), with the
    environment of this process: the config's ``environmentOverrides`` and ``DATABASE_URL`` are
    handed to the runtime actors, which may run elsewhere with another environment."""
    from codesearch.config import apply_environment_overrides, load_config
    from codesearch.errors import ConfigError
    from codesearch.service.auth import anonymous_access_enabled
    from codesearch.serving.launcher import default_data_dir

    args = dict(args or {})
    for key in sorted(set(args) & set(_RETIRED)):
        log.warning("serve config args: %s is ignored: %s", key, _RETIRED[key])
        args.pop(key)
    unknown = sorted(set(args) - _ARGS)
    if unknown:
        raise ConfigError(
            "serve config args", [f"{key}: unknown argument (known: {', '.join(sorted(_ARGS))})" for key in unknown]
        )
    data_dir = os.path.abspath(os.path.expanduser(str(args.get("data_dir") or default_data_dir())))
    os.makedirs(data_dir, exist_ok=True)
    config_path = args.get("config") or os.environ.get("CONFIG_PATH")
    if not config_path:
        from codesearch.serving.demo import demo_config

        config_path = demo_config(data_dir)
        log.warning("no config given: serving the offline demo (%s)", config_path)
    config_path = os.path.abspath(os.path.expanduser(str(config_path)))
    config = load_config(config_path)
    for w in config.warnings:
        log.warning("config warning: %s", w)
    environ = dict(os.environ)
    overridden = apply_environment_overrides(config, environ)
    database_url = args.get("database_url") or (environ.get("DATABASE_URL") or "").strip() or None
    if database_url:
        environ["DATABASE_URL"] = database_url
    env = SealedEnv.of(forwarded_environment(environ, overridden))
    anonymous = _as_bool(args.get("anonymous_access"))
    if anonymous is None:
        anonymous = anonymous_access_enabled(environ, config.settings.enable_public_access)
    return ServiceSpec(
        config_path=config_path,
        data_dir=data_dir,
        prefix=str(args.get("prefix") or DEFAULT_PREFIX),
        searchers=int(args.get("searchers", defaults.SEARCHERS)),
        searcher_copies=int(args.get("searcher_copies", defaults.SEARCHER_COPIES)),
        replicas=int(args.get("replicas", defaults.REPLICAS)),
        max_ongoing_requests=int(args["max_ongoing_requests"]) if args.get("max_ongoing_requests") else None,
        public_url=args.get("public_url") or environ.get("AUTH_URL") or None,
        anonymous_access=anonymous,
        database_url=database_url,
        syncers=args.get("syncers"),
        indexers=args.get("indexers"),
        runtime_resources=args.get("runtime_resources"),
        searcher_resources=args.get("searcher_resources"),
        searcher_cpus=float(args.get("searcher_cpus", 0)),
        env=env,
        searcher_data_dir=str(args["searcher_data_dir"]) if args.get("searcher_data_dir") else None,
    )


def app(args: dict[str, Any] | None = None) -> Application:
    """The Serve application builder (see the module docstring for `args`)."""
    from codesearch.serving.bootstrap import application

    return application(spec_from_args(args))


def runtime_record(prefix: str = DEFAULT_PREFIX) -> dict[str, Any] | None:
    """What runs of the runtime `prefix` now: its live actors, and the data directory and
    searcher count its searchers published (`publish_deployment`); None when nothing runs."""
    from codesearch.runtime.searchers import published_deployment

    actors = [name for name, _ in runtime_actors(prefix, None)]
    if not actors:
        return None
    n = names(prefix)
    published = published_deployment(n["searchers"]) or {}
    return {
        "prefix": prefix,
        "actors": actors,
        "scheduler": n["scheduler"] if n["scheduler"] in actors else None,
        "workers": [a for a in actors if re.search(r"-(sync|index)-\d+$", a)],
        "searchers": published.get("searchers"),
        "data_dir": published.get("data_dir"),
    }


def shutdown_runtime(
    prefix: str = DEFAULT_PREFIX,
    *,
    namespace: str | None = None,
    app_name: str | None = None,
    timeout_s: float = 15.0,
    drain_timeout_s: float = 30.0,
) -> list[str]:
    """Stop the application `app_name` (when given) without cutting a request: drain it (for at
    most `drain_timeout_s`), then delete it, which stops its runtime replica and with it the
    runtime actors. Then kill what is left of runtime `prefix` (actors of an application that
    was deleted without waiting, or detached ones of codesearch before 0.13), waiting at most
    `timeout_s` for them to go. Returns the names of the actors that were running. Needs a Ray
    connection (``ray.init(address="auto")``)."""
    import ray

    before = [name for name, _ in runtime_actors(prefix, namespace)]
    if app_name:
        from codesearch.serving import drain
        from codesearch.serving.launcher import stop_serving

        try:
            running = bool(drain.running_replicas(app_name))
        except Exception as e:  # noqa: BLE001 - Serve not running: nothing to drain, go on with the actors
            log.warning("stopping the Serve application %s: %s", app_name, e)
            running = False
        # the one way codesearch stops an application: drain, then delete (a cluster is never ours here)
        stop_serving(app_name, drain_first=running, owns_cluster=False, timeout_s=drain_timeout_s, say=log.info)
    if not wait_gone(before, namespace, timeout_s=timeout_s if app_name else 0):
        for name, ns in runtime_actors(prefix, namespace):
            handle = get_actor(name, ns)
            if handle is not None:
                try:
                    ray.kill(handle, no_restart=True)
                except Exception as e:  # noqa: BLE001 - already gone
                    log.debug("kill %s: %s", name, e)
    from codesearch.runtime.searchers import forget_pool

    forget_pool(names(prefix)["searchers"])
    return before


def wait_gone(names_: list[str], namespace: str | None = None, timeout_s: float = 30.0) -> bool:
    """Wait until none of the named actors can be looked up any more (a kill is asynchronous)."""
    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}
        if not alive.intersection(names_):
            return True
        time.sleep(0.2)
    return False


def main(argv: list[str] | None = None) -> int:
    """``python -m codesearch.serving.app_builder shutdown [--address auto] [--prefix P] [--app NAME]``
    (drain and delete the application, then make sure no actor of its runtime is left), ``... status``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m codesearch.serving.app_builder")
    ap.add_argument("command", choices=["shutdown", "status"])
    ap.add_argument("--address", default=os.environ.get("RAY_ADDRESS") or "auto")
    ap.add_argument("--prefix", default=DEFAULT_PREFIX)
    ap.add_argument("--app", default=APP_NAME, help=f"the Serve application to drain and delete ({APP_NAME})")
    ap.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long the application's running requests may take to finish (30)",
    )
    a = ap.parse_args(argv)
    if not 0 <= a.drain_timeout < float("inf"):
        ap.error(f"--drain-timeout must be a number of seconds, 0 or more, not {a.drain_timeout:g}")
    import ray

    ray.init(address=a.address, log_to_driver=False)
    try:
        if a.command == "status":
            print(json.dumps({"runtime": runtime_record(a.prefix)}, indent=2))
            return 0
        killed = shutdown_runtime(a.prefix, app_name=a.app, drain_timeout_s=a.drain_timeout)
        print(f"stopped {plural(len(killed), 'actor')}: {', '.join(killed) or '-'}")
        return 0
    finally:
        ray.shutdown()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
