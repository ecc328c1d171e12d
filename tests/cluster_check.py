"""Run by tests/test_cluster.py in its own process: a 2-node Ray cluster on this machine
(`ray.cluster_utils.Cluster`). Prints one JSON line with two checks:

- ``search``: one shard searcher on each node; a search through them equals the in-process engine;
- ``runtime`` (when a config file is given): the scheduler on node 0 and the sync/index workers
  on node 1 sync and index the config's repositories into the data directory, and searchers on
  both nodes, refreshed by the scheduler, find what the engine finds in the resulting index.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from codesearch.index.manifest import current_shards  # noqa: E402
from codesearch.runtime.searchers import SearcherPool, ShardSearcher, balance  # noqa: E402
from codesearch.search.engine import Searcher  # noqa: E402
from codesearch.search.options import SearchOptions  # noqa: E402


def _spans(r):
    return sorted((f["repository"], f["fileName"]["text"], c["contentStart"]["byteOffset"], len(c["matchRanges"]))
                  for f in r["files"] for c in f["chunks"])


def runtime_check(config_path: str, data_dir: str, query: str) -> dict:
    import time

    from codesearch.config import load_config
    from codesearch.runtime.scheduler import first_sync_state, start_scheduler
    from codesearch.runtime.workers import RuntimeOptions, start_workers, stop_workers
    from codesearch.store import Store

    options = RuntimeOptions(poll_s=0.1, heartbeat_s=0.5)
    settings = load_config(config_path).settings
    scheduler = start_scheduler(config_path, data_dir, options, actor_options={"resources": {"node0": 0.01}})
    workers = start_workers(data_dir, settings, options, syncers=1, indexers=1, name_prefix="cluster",
                            actor_options={"resources": {"node1": 0.01}})
    index_dir = os.path.join(data_dir, "index")
    os.makedirs(index_dir, exist_ok=True)
    pool = SearcherPool.create(index_dir, 2, name_prefix="cluster-searcher", keep_empty=True,
                               actor_options={"resources": {"node0": 0.01}})
    # the second searcher on the other node (create() places them all alike)
    pool2 = SearcherPool.create(index_dir, 1, name_prefix="cluster-searcher-b", keep_empty=True,
                                actor_options={"resources": {"node1": 0.01}})
    both = SearcherPool([pool.actors[0], pool2.actors[0]], version_key="cluster-both")
    store = Store.open(data_dir)
    try:
        deadline = time.monotonic() + 120
        while not (state := first_sync_state(store))["done"] or not state["repos"]:
            assert time.monotonic() < deadline, f"first sync not done: {state}"
            time.sleep(0.2)
        both.refresh(index_dir)
        options_s = SearchOptions(matches=10**6)
        got = both.search(query, options_s)
        want = Searcher(index_dir).search(query, options=options_s)
        where = ray.get([a.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
                         for a in [scheduler, *workers, *both.actors]])
        return {"repos": state["repos"], "indexed": state["indexed"], "nodes": len(set(where)),
                "workers_elsewhere": where[0] not in where[1:1 + len(workers)],
                "equal": _spans(got) == _spans(want), "files": len(got["files"])}
    finally:
        store.close()
        ray.get(scheduler.shutdown.remote(), timeout=15)
        stop_workers(workers)
        pool.close()
        pool2.close()


def main(index_dir: str, query: str, config_path: str | None = None, data_dir: str | None = None) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False, "resources": {"node0": 1}})
    cluster.add_node(num_cpus=1, resources={"node1": 1})
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        cluster.wait_for_nodes()
        # One searcher pinned to each node by a custom resource (SPREAD is only best effort).
        groups = balance(current_shards(index_dir), 2)
        actors = [ray.remote(ShardSearcher).options(num_cpus=0, resources={f"node{i}": 0.01}).remote(g, origin=i)
                  for i, g in enumerate(groups)]
        pool = SearcherPool(actors)
        nodes = ray.get([a.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()) for a in pool.actors])
        options = SearchOptions(matches=10**6)
        got = pool.search(query, options)
        want = Searcher(index_dir).search(query, options=options)
        out = {"search": {"nodes": len(set(nodes)), "alive_nodes": len([n for n in ray.nodes() if n["Alive"]]),
                          "equal": _spans(got) == _spans(want), "files": len(got["files"]),
                          "crashes": got["stats"]["crashes"]}}
        pool.close()
        if config_path:
            out["runtime"] = runtime_check(config_path, data_dir, query)
        print(json.dumps(out))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
