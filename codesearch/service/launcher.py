"""`codesearch serve`: start Ray (or join `RAY_ADDRESS`), sync and index, serve HTTP, stop cleanly.

Steps, printed as they happen:
1. the data directory (``--data-dir``, ``DATA_DIR``, else ``~/.codesearch``) and the config
   (``--config``, ``CONFIG_PATH``, else the embedded offline demo of `demo.py`);
2. a local Ray instance unless ``RAY_ADDRESS`` names a cluster;
3. the state store; each connection recorded, listed, mirrored and indexed (the first sync;
   repositories already indexed by an earlier run are indexed again from their mirrors, which
   fetch only what changed);
4. the shard searchers and the Serve application on ``--host:--port`` (default 127.0.0.1:3000);
5. it runs in the foreground; Ctrl-C or SIGTERM shuts down Serve, the searchers and the Ray
   instance it started.

Periodic resync, reindex and the config-file watch belong to the scheduler (not yet here).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

SEARCHER_PREFIX = "codesearch-searcher"


def default_data_dir() -> str:
    return os.environ.get("DATA_DIR") or os.path.join(os.path.expanduser("~"), ".codesearch")


def _say(msg: str) -> None:
    print(msg, flush=True)


def initial_sync(config, data_dir: str, store, say=_say) -> str:
    """Record, list, mirror and index every connection; returns the index directory."""
    from codesearch.git.mirror import MirrorStore
    from codesearch.index.builder import IndexSettings
    from codesearch.sync import sync_connection

    index_dir = os.path.join(data_dir, "index")
    mirrors = MirrorStore(os.path.join(data_dir, "repos"))
    settings = IndexSettings(max_file_size=int(config.settings.max_file_size),
                             max_trigram_count=int(config.settings.max_trigram_count))
    for name, conn in config.connections.items():
        store.upsert_connection(name, conn.raw["type"], conn.raw)

        def on_listed(listing, name=name):
            store.upsert_repos(name, listing.repos)
            return {r.name: store.find_repo(r.name).id for r in listing.repos}

        def progress(repo, done, total, name=name):
            say(f"  [{name}] {done}/{total} {repo}")

        say(f"syncing connection {name!r} ({conn.raw['type']})")
        try:
            report = sync_connection(name, conn.raw, mirrors=mirrors, index_dir=index_dir, index_settings=settings,
                                     on_listed=on_listed, progress=progress)
        except Exception as e:  # one connection's failure must not stop the others
            say(f"  [{name}] failed: {e}")
            continue
        for w in report.warnings:
            say(f"  [{name}] warning: {w}")
        for repo, reason in report.failed.items():
            say(f"  [{name}] {repo}: failed: {reason}")
        for repo in report.indexed:
            found = store.find_repo(repo)
            if found is not None:
                store.update_repo_index_status(found.id, "INDEXED")
        say(f"  [{name}] {len(report.indexed)} of {len(report.repos)} repositories indexed")
    os.makedirs(index_dir, exist_ok=True)
    return index_dir


def run(config_path: str | None, *, port: int = 3000, host: str = "127.0.0.1", data_dir: str | None = None,
        searchers: int = 2, replicas: int = 1, max_ongoing_requests: int = 64, stop: threading.Event | None = None) -> int:
    """Run the service until `stop` is set or a signal arrives (see the module docstring)."""
    import ray
    from ray import serve

    from codesearch.config import apply_environment_overrides, load_config
    from codesearch.runtime.searchers import SearcherPool
    from codesearch.service.deployment import search_application
    from codesearch.service.demo import demo_config
    from codesearch.store import Store

    data_dir = os.path.abspath(data_dir or default_data_dir())
    os.makedirs(data_dir, exist_ok=True)
    config_path = config_path or os.environ.get("CONFIG_PATH")
    if not config_path:
        config_path = demo_config(data_dir)
        _say(f"no config given: serving the offline demo ({config_path})")
    config = load_config(config_path)
    apply_environment_overrides(config)
    for w in config.warnings:
        _say(f"config warning: {w}")
    public_url = os.environ.get("AUTH_URL") or f"http://{'localhost' if host in ('127.0.0.1', '0.0.0.0') else host}:{port}"

    started_ray = not ray.is_initialized()
    if started_ray:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        address = os.environ.get("RAY_ADDRESS")
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False)
        _say(f"ray: {'joined ' + address if address else 'started a local instance'}")
    stop = stop or threading.Event()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if threading.current_thread() is threading.main_thread() else {}
    for s in previous:
        signal.signal(s, lambda *_: stop.set())
    pool = None
    try:
        store = Store.open(data_dir)
        index_dir = initial_sync(config, data_dir, store)
        store.close()
        pool = SearcherPool.create(index_dir, searchers, name_prefix=SEARCHER_PREFIX)
        serve.start(http_options={"host": host, "port": port})
        serve.run(search_application(SEARCHER_PREFIX, len(pool.actors), replicas=replicas,
                                     max_ongoing_requests=max_ongoing_requests, public_url=public_url,
                                     data_dir=data_dir),
                  name="codesearch", route_prefix="/")
        _say(f"codesearch is serving at http://{host}:{port} (Ctrl-C to stop)")
        while not stop.wait(0.5):
            pass
        _say("shutting down")
        return 0
    finally:
        try:
            serve.shutdown()
        except Exception:
            pass
        if pool is not None:
            pool.close()
        if started_ray:
            ray.shutdown()
        for s, h in previous.items():
            signal.signal(s, h)


def main_serve(args) -> int:
    return run(args.config, port=args.port, host=args.host, data_dir=args.data_dir, searchers=args.searchers,
               replicas=args.replicas)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run(None))
