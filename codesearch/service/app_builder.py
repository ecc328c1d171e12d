"""The application builder for ``serve deploy`` (and ``serve run``) on a Ray cluster.

``serve_config.yaml`` names it: ``import_path: codesearch.service.app_builder:app``. Serve calls
``app(args)`` with the config's ``args`` and deploys the application it returns (its one
deployment is ``codesearch-api``, so the config's ``deployments: [{name: codesearch-api, ...}]``
overrides ``num_replicas``, ``max_ongoing_requests``, ``ray_actor_options``).

What ``app(args)`` starts, unless it is already running (a second ``serve deploy`` re-uses it):

* the **scheduler** (``<prefix>-scheduler``; `start_scheduler`: start-up cleanup and crash
  recovery, then the config watch, syncs, re-indexes and garbage collection);
* the **connection syncers and repository indexers** (``<prefix>-sync-<i>``,
  ``<prefix>-index-<i>``; `start_workers`, counts from the config's concurrency settings capped at
  the builder node's cores, or ``syncers``/``indexers``);
* the **compactor** (``<prefix>-compactor``; `start_compactor`: merges small and tombstoned
  shards into compound ones in the background);
* the **shard searchers** (``<prefix>-searcher-<i>``, ``searchers`` of them;
  `SearcherPool.create`), told to the scheduler (``set_searchers``), which reloads them after every
  index change, and published in Ray's KV (`publish_deployment`) for notebooks
  (``codesearch.Client.ray()``).

All of them are **detached named actors** (``lifetime="detached"``): they outlive the process
that ran ``app()`` (with ``serve deploy`` a short-lived build task of the Serve controller) and
keep running until they are killed. They live in the Ray namespace ``codesearch``
(`codesearch.runtime.NAMESPACE`), where the Serve replicas, `codesearch serve` and notebooks look
them up by name; `codesearch serve` names its searchers the same way, so do not run both on one
cluster with the same prefix. Where they run: anywhere Ray places them (they reserve no CPU), or where
``runtime_resources`` / ``searcher_resources`` (custom resources, e.g.
``{"codesearch_data": 0.01}``) put them; the data directory must be readable there at the same
path (shared storage such as NFS, see the README's "Deploying on a Ray cluster"). The Serve
replicas run wherever Serve puts them (``ray_actor_options`` in the config to pin them).

A record of the runtime (names, namespace, data directory) is kept in Ray's KV under
``codesearch:runtime:<prefix>``.

Arguments (``args`` of the Serve config; all optional):

==========================  =====================================================================
``config``                  the config file (path on the nodes), default ``CONFIG_PATH`` or the
                            offline demo of `codesearch.service.demo`
``data_dir``                the data directory, default ``DATA_CACHE_DIR``, ``$DATA_DIR/.codesearch``
                            or ``~/.codesearch``
``searchers``               shard searchers: partitions of the index (2)
``searcher_copies``         copies of every partition, each search going to one copy (1)
``replicas``                Serve replicas (1; the config's ``num_replicas`` wins)
``max_ongoing_requests``    per replica (1000; the config's value wins)
``public_url``              the URL links point to, default ``AUTH_URL`` or http://localhost:3000
``anonymous_access``        true/false; default ``FORCE_ENABLE_ANONYMOUS_ACCESS`` or the config's
                            ``enablePublicAccess``
``database_url``            the state database, default ``DATABASE_URL`` or SQLite in the data dir
``prefix``                  actor name prefix (``codesearch``: the launcher's names; searchers
                            ``codesearch-searcher-<i>`` like `launcher.SEARCHER_PREFIX`)
``syncers``, ``indexers``   worker counts (default from the config's concurrency settings)
``runtime_resources``       custom resources for the scheduler and workers, e.g.
                            ``{"codesearch_data": 0.01}``
``searcher_resources``      custom resources for the searchers, e.g. ``{"codesearch_searcher": 1}``
``searcher_cpus``           CPUs each searcher reserves (0)
``first_sync_timeout_s``    wait up to this long for the first sync and index before returning (0)
==========================  =====================================================================

How to stop it: `shutdown_runtime` drains the HTTP application (``--app``) first (new requests
are refused with a JSON 503, running ones finish: `codesearch.service.drain`, at most
``--drain-timeout`` seconds, 30 by default), deletes it, then stops the runtime actors, which are
detached::

    python -m codesearch.service.app_builder shutdown --address auto [--prefix codesearch] [--app codesearch]

or, without codesearch installed, with Ray alone (kills every actor of the ``codesearch``
namespace whose name starts with the prefix; a job a worker was running is taken back by the
next scheduler's start-up recovery)::

    import ray
    ray.init(address="auto")
    for a in ray.util.list_named_actors(all_namespaces=True):
        if a["namespace"] == "codesearch" and a["name"].startswith("codesearch-"):
            ray.kill(ray.get_actor(a["name"], namespace="codesearch"), no_restart=True)

``serve shutdown`` or ``serve.delete(app_name)`` alone do not drain: ``serve shutdown`` kills the
proxies at once (requests being answered are cut), ``serve.delete`` lets the replicas finish but
answers newcomers with Serve's plain-text 404; and both leave the runtime actors running.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "codesearch"
APP_NAME = "codesearch"
_RECORD_KEY = "codesearch:runtime:{}"


def names(prefix: str = DEFAULT_PREFIX) -> dict:
    """The actor names of the runtime `prefix`: scheduler name, searcher prefix, worker prefix.
    With the default prefix the searchers are named like `codesearch serve`'s
    (`launcher.SEARCHER_PREFIX`)."""
    return {"scheduler": f"{prefix}-scheduler", "searchers": f"{prefix}-searcher", "workers": prefix,
            "compactor": f"{prefix}-compactor"}


def _get_actor(name: str, namespace: str | None = None):
    import ray

    from codesearch.runtime import NAMESPACE

    try:
        return ray.get_actor(name, namespace=namespace or NAMESPACE)
    except ValueError:
        return None


def _kv_get(key: str) -> dict | None:
    from ray.experimental import internal_kv

    value = internal_kv._internal_kv_get(key.encode())
    return json.loads(value) if value else None


def _kv_put(key: str, value: dict) -> None:
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(key.encode(), json.dumps(value).encode(), overwrite=True)


def _kv_del(key: str) -> None:
    from ray.experimental import internal_kv

    internal_kv._internal_kv_del(key.encode())


def runtime_record(prefix: str = DEFAULT_PREFIX) -> dict | None:
    """What `app` recorded about the runtime `prefix` (names, namespace, data dir), or None."""
    return _kv_get(_RECORD_KEY.format(prefix))


def _as_bool(v) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def _actor_options(resources: dict | None, env_vars: dict[str, str], **extra) -> dict:
    opts = {"lifetime": "detached", **extra}
    if resources:
        opts["resources"] = {k: float(v) for k, v in resources.items()}
    if env_vars:
        opts["runtime_env"] = {"env_vars": dict(env_vars)}
    return opts


def start_or_attach_runtime(config_path: str, data_dir: str, *, searchers: int = 2, searcher_copies: int = 1, prefix: str = DEFAULT_PREFIX,
                            syncers: int | None = None, indexers: int | None = None,
                            runtime_resources: dict | None = None, searcher_resources: dict | None = None,
                            searcher_cpus: float = 0, env_vars: dict[str, str] | None = None,
                            settings=None, options=None) -> dict:
    """Start the detached scheduler, workers and searchers of `prefix`, or re-use those already
    running (a scheduler named ``<prefix>-scheduler`` exists: its workers and searchers are looked
    up by name, missing ones started, searchers beyond `searchers` stopped). Returns the record
    (also stored in Ray's KV)."""
    import ray

    from codesearch.runtime import NAMESPACE
    from codesearch.runtime.compactor import start_compactor
    from codesearch.runtime.scheduler import start_scheduler
    from codesearch.runtime.searchers import SearcherPool, publish_deployment
    from codesearch.runtime.workers import RuntimeOptions, start_workers, worker_counts

    if settings is None:
        from codesearch.config import load_config

        settings = load_config(config_path).settings
    options = options or RuntimeOptions()
    env_vars = env_vars or {}
    n = names(prefix)
    record = runtime_record(prefix)
    runtime_opts = _actor_options(runtime_resources, env_vars)

    scheduler = _get_actor(n["scheduler"])
    reused = scheduler is not None
    if reused:
        if record and os.path.abspath(record["data_dir"]) != os.path.abspath(data_dir):
            raise RuntimeError(f"the codesearch runtime {prefix!r} already runs over {record['data_dir']}, "
                               f"not {data_dir}: stop it first (shutdown_runtime) or choose another prefix")
    else:
        scheduler = start_scheduler(config_path, data_dir, options, name=n["scheduler"], actor_options=runtime_opts)

    n_sync, n_index = worker_counts(settings)
    n_sync = int(syncers) if syncers is not None else n_sync
    n_index = int(indexers) if indexers is not None else n_index
    if reused and record:  # keep the worker set the runtime was started with
        worker_names = list(record["workers"])
    else:
        worker_names = [f"{n['workers']}-sync-{i}" for i in range(n_sync)] + \
                       [f"{n['workers']}-index-{i}" for i in range(n_index)]
    for name in worker_names:
        if _get_actor(name) is None:
            kind = "sync" if "-sync-" in name else "index"
            start_workers(data_dir, settings, options, syncers=int(kind == "sync"), indexers=int(kind == "index"),
                          name_prefix=n["workers"], actor_options={**runtime_opts, "name": name, "namespace": NAMESPACE})
    if _get_actor(n["compactor"]) is None:
        start_compactor(data_dir, name=n["compactor"], actor_options=runtime_opts)

    searcher_opts = _actor_options(searcher_resources, {}, get_if_exists=True, num_cpus=searcher_cpus)
    index_dir = os.path.join(data_dir, "index")
    pool = SearcherPool.create(index_dir, searchers, copies=searcher_copies, name_prefix=n["searchers"], keep_empty=True,
                               actor_options=searcher_opts)
    if os.path.isdir(index_dir):  # re-used searchers may hold another layout's lists: re-balance now
        pool.refresh(index_dir)
    ray.get(scheduler.set_searchers.remote(n["searchers"], len(pool.actors)))  # and after every index change
    i = len(pool.actors)
    while (extra := _get_actor(f"{n['searchers']}-{i}")) is not None:  # a redeploy with fewer searchers
        ray.kill(extra, no_restart=True)
        i += 1
    publish_deployment(n["searchers"], data_dir=os.path.abspath(data_dir), searchers=len(pool.actors))
    record = {"prefix": prefix, "namespace": NAMESPACE, "scheduler": n["scheduler"], "workers": worker_names,
              "searcher_prefix": n["searchers"], "searchers": len(pool.actors), "data_dir": os.path.abspath(data_dir),
              "config": os.path.abspath(config_path), "reused": reused}
    _kv_put(_RECORD_KEY.format(prefix), record)
    return record


def app(args: dict | None = None):
    """The Serve application builder (see the module docstring for `args`): starts or re-uses the
    runtime, returns the bound ``codesearch-api`` application."""
    from codesearch.config import apply_environment_overrides, load_config
    from codesearch.search.options import DEFAULT_PUBLIC_URL
    from codesearch.service.auth import anonymous_access_enabled
    from codesearch.service.deployment import MAX_ONGOING_REQUESTS, search_application
    from codesearch.service.launcher import default_data_dir

    args = dict(args or {})
    data_dir = os.path.abspath(os.path.expanduser(str(args.get("data_dir") or default_data_dir())))
    os.makedirs(data_dir, exist_ok=True)
    config_path = args.get("config") or os.environ.get("CONFIG_PATH")
    if not config_path:
        from codesearch.service.demo import demo_config

        config_path = demo_config(data_dir)
        log.warning("no config given: serving the offline demo (%s)", config_path)
    config_path = os.path.abspath(os.path.expanduser(str(config_path)))
    config = load_config(config_path)
    for w in config.warnings:
        log.warning("config warning: %s", w)
    # environmentOverrides: set for this process and handed to the runtime actors (which may run
    # on other nodes, in other processes, with another environment).
    environ = dict(os.environ)
    overridden = apply_environment_overrides(config, environ)
    env_vars = {k: environ[k] for k in overridden}
    database_url = args.get("database_url") or (environ.get("DATABASE_URL") or "").strip() or None
    if database_url:
        env_vars["DATABASE_URL"] = database_url
    anonymous = _as_bool(args.get("anonymous_access"))
    if anonymous is None:
        anonymous = anonymous_access_enabled(environ, config.settings.enable_public_access)

    record = start_or_attach_runtime(
        config_path, data_dir, searchers=int(args.get("searchers", 2)),
        searcher_copies=int(args.get("searcher_copies", 1)), prefix=str(args.get("prefix") or DEFAULT_PREFIX),
        syncers=args.get("syncers"), indexers=args.get("indexers"), runtime_resources=args.get("runtime_resources"),
        searcher_resources=args.get("searcher_resources"), searcher_cpus=float(args.get("searcher_cpus", 0)),
        env_vars=env_vars, settings=config.settings)
    log.info("codesearch runtime %s: %s", "re-used" if record["reused"] else "started", record)

    wait_s = float(args.get("first_sync_timeout_s") or 0)
    if wait_s > 0:
        from codesearch.service.launcher import wait_first_sync
        from codesearch.store import Store

        store = Store.open(data_dir, database_url=database_url)
        try:
            wait_first_sync(store, timeout_s=wait_s, say=log.info)
        finally:
            store.close()

    public_url = args.get("public_url") or environ.get("AUTH_URL") or DEFAULT_PUBLIC_URL
    return search_application(record["searcher_prefix"], record["searchers"], replicas=int(args.get("replicas", 1)),
                              max_ongoing_requests=int(args.get("max_ongoing_requests", MAX_ONGOING_REQUESTS)), public_url=public_url,
                              data_dir=data_dir, database_url=database_url, anonymous_access=anonymous)


def _runtime_actors(prefix: str, namespace: str | None) -> list[tuple[str, str]]:
    """(name, namespace) of the live actors of runtime `prefix`: named actors matching its name
    patterns in `namespace` (default: the namespace its record names, else ``codesearch``)."""
    import ray

    from codesearch.runtime import NAMESPACE

    namespace = namespace or (runtime_record(prefix) or {}).get("namespace") or NAMESPACE
    pattern = re.compile(rf"^{re.escape(prefix)}-(scheduler|compactor|searcher-\d+|sync-\d+|index-\d+)$")
    return sorted({(a["name"], a["namespace"]) for a in ray.util.list_named_actors(all_namespaces=True)
                   if pattern.match(a["name"]) and a["namespace"] == namespace})


def shutdown_runtime(prefix: str = DEFAULT_PREFIX, *, namespace: str | None = None, app_name: str | None = None,
                     timeout_s: float = 15.0, drain_timeout_s: float = 30.0) -> list[str]:
    """Stop what `app` started for `prefix`: the Serve application `app_name` (when given: drained
    for at most `drain_timeout_s`, then deleted), the scheduler (asked to stop its loop, then
    killed), the workers (asked to finish their job, then killed) and the searchers; removes the KV
    records. Bounded by about 2×`timeout_s` after the drain. Returns the names of the actors killed.
    Needs a Ray connection (``ray.init(address="auto")``)."""
    import ray

    from codesearch.runtime.workers import stop_workers

    if app_name:
        from ray import serve

        from codesearch.service import drain

        try:
            drained = True
            if drain.running_replicas(app_name):
                result = drain.drain(app_name, drain_timeout_s)
                log.info("%s: %s", app_name, result.describe())
                drained = result.drained
            serve.delete(app_name, _blocking=drained)  # not drained: what is left is over the bound
        except Exception as e:  # noqa: BLE001 - no such app, Serve not running: go on with the actors
            log.warning("stopping the Serve application %s: %s", app_name, e)
        finally:
            try:
                drain.clear(app_name)
            except Exception as e:  # noqa: BLE001
                log.debug("drain.clear(%s): %s", app_name, e)
    n = names(prefix)
    handles = [(name, h) for name, ns in _runtime_actors(prefix, namespace) if (h := _get_actor(name, ns)) is not None]
    schedulers = [h for name, h in handles if name == n["scheduler"]]
    for h in schedulers:  # stop its loop first: no refresh or job is started while the rest stops
        try:
            ray.get(h.shutdown.remote(), timeout=timeout_s)
        except Exception as e:  # noqa: BLE001 - dead or stuck: killed below
            log.warning("scheduler shutdown: %s", type(e).__name__)
    workers = [h for name, h in handles if re.search(r"-(sync-\d+|index-\d+|compactor)$", name)]
    if workers:
        stop_workers(workers, timeout_s=timeout_s)  # asks each to finish its job, then kills it
    for name, h in handles:
        try:
            ray.kill(h, no_restart=True)
        except Exception as e:  # noqa: BLE001 - already gone
            log.debug("kill %s: %s", name, e)
    for key in (_RECORD_KEY.format(prefix), f"codesearch:deployment:{n['searchers']}",
                f"codesearch:index-version:{n['searchers']}", f"codesearch:searcher-layout:{n['searchers']}"):
        _kv_del(key)
    return [name for name, _ in handles]


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
    """``python -m codesearch.service.app_builder shutdown [--address auto] [--prefix P] [--app NAME]``,
    ``... status``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m codesearch.service.app_builder")
    ap.add_argument("command", choices=["shutdown", "status"])
    ap.add_argument("--address", default=os.environ.get("RAY_ADDRESS") or "auto")
    ap.add_argument("--prefix", default=DEFAULT_PREFIX)
    ap.add_argument("--app", default=None, help="also drain and delete this Serve application (e.g. codesearch)")
    ap.add_argument("--drain-timeout", type=float, default=30.0, metavar="SECONDS",
                    help="how long the application's running requests may take to finish (30)")
    a = ap.parse_args(argv)
    if not 0 <= a.drain_timeout < float("inf"):
        ap.error(f"--drain-timeout must be a number of seconds, 0 or more, not {a.drain_timeout:g}")
    import ray

    ray.init(address=a.address, log_to_driver=False)
    try:
        if a.command == "status":
            print(json.dumps({"record": runtime_record(a.prefix), "actors": _runtime_actors(a.prefix, None)}, indent=2))
            return 0
        killed = shutdown_runtime(a.prefix, app_name=a.app, drain_timeout_s=a.drain_timeout)
        print(f"stopped {len(killed)} actor(s): {', '.join(killed) or '-'}")
        return 0
    finally:
        ray.shutdown()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
