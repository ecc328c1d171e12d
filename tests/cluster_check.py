"""Run in a process of its own by `tests.clusterrun` (for tests/runtime/test_cluster.py and
tests/runtime/test_shards_without_shared_disk.py): a 2-node Ray cluster on this machine
(`ray.cluster_utils.Cluster`), started once for all its checks. Prints one JSON line:

- ``search``: one shard searcher on each node; a search through them equals the in-process engine;
- ``runtime`` (when asked for): the scheduler on node 0 and the sync/index workers on node 1 sync
  and index the config's repositories into the data directory, and searchers on both nodes,
  refreshed by the scheduler, find what the engine finds in the resulting index;
- ``copies`` (when asked for): the scheduler, the workers and the shard source on node 0 build the
  index in one data directory; searchers on node 1 use only their own directory, get the shards
  through Ray (`codesearch.runtime.shard_copy`), answer like the engine, and after a re-index of
  a changed repository serve its new shards; then the shard source is killed (SIGKILL) while the
  searchers fetch the shards of another re-index, and they serve those shards all the same.

    python -m tests.cluster_check INDEX_DIR QUERY '{"runtime": {"config": ..., "data": ...},
        "copies": {"config": ..., "data": ..., "far": ..., "changed_repo": ...}}'
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

from codesearch.index.manifest import current_shards  # noqa: E402
from codesearch.runtime.published import balance  # noqa: E402
from codesearch.runtime.searchers import SearcherPool  # noqa: E402
from codesearch.runtime.shard_searcher import ShardSearcher  # noqa: E402
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


def _node(actor) -> str:
    return ray.get(actor.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()))


def copies_check(config_path: str, data_dir: str, far_dir: str, query: str, changed_repo: str) -> dict:
    import subprocess
    import time

    from codesearch.config import load_config
    from codesearch.runtime.scheduler import first_sync_state, start_scheduler
    from codesearch.runtime.published import published_shard_lists
    from codesearch.runtime.shard_copy import start_shard_source
    from codesearch.runtime.workers import RuntimeOptions, start_workers, stop_workers
    from codesearch.store import Store

    options = RuntimeOptions(poll_s=0.1, heartbeat_s=0.5)
    settings = load_config(config_path).settings
    here = {"resources": {"node0": 0.01}}
    index_dir = os.path.join(data_dir, "index")
    os.makedirs(index_dir, exist_ok=True)
    scheduler = start_scheduler(config_path, data_dir, options, actor_options=here)
    workers = start_workers(data_dir, settings, options, syncers=1, indexers=1, name_prefix="copies", actor_options=here)
    source = start_shard_source(index_dir, "copies-shard-source", here)
    pool = SearcherPool.create(index_dir, 2, name_prefix="copies-searcher", keep_empty=True, copy_to=far_dir,
                               source="copies-shard-source", actor_options={"resources": {"node1": 0.01}})
    ray.get(scheduler.set_searchers.remote("copies-searcher", 2))
    store = Store.open(data_dir)
    options_s = SearchOptions(matches=10**6)

    def settled(q: str, deadline_s: float = 120) -> tuple[dict, dict]:
        deadline = time.monotonic() + deadline_s
        while True:
            want = Searcher(index_dir).search(q, options=options_s)
            got = pool.search(q, options_s)
            if want["files"] and _spans(got) == _spans(want):
                return got, want
            assert time.monotonic() < deadline, f"searchers on node 1 never matched the index for {q!r}: {got['stats']}"
            time.sleep(0.3)

    def held() -> list[str]:
        return sorted({p for a in pool.actors for p in ray.get(a.held.remote())})

    try:
        deadline = time.monotonic() + 120
        while not (state := first_sync_state(store))["done"] or not state["repos"]:
            assert time.monotonic() < deadline, f"first sync not done: {state}"
            time.sleep(0.2)
        got, _ = settled(query)
        first = held()
        # a new commit, re-indexed on node 0: node 1's searchers fetch the new shards, drop the old
        with open(os.path.join(changed_repo, "late.py"), "w") as f:
            f.write("def kinkajou_after_reindex():\n    pass\n")
        for args in (["add", "late.py"], ["commit", "-q", "-m", "late"]):
            subprocess.run(["git", *args], cwd=changed_repo, check=True, capture_output=True)
        repo = next(r for c in store.list_connections() for r in store.repos_for_connection(c.name)
                    if os.path.basename(r.name) == os.path.basename(changed_repo))
        store.enqueue_index_job(repo.id, force=True)
        later, _ = settled("kinkajou_after_reindex")
        time.sleep(1.0)  # the pool's older versions age out as the scheduler refreshes
        second = held()
        copies = sorted(os.path.relpath(os.path.join(d, n), far_dir) for d, _, names in os.walk(far_dir) for n in names
                        if n.endswith(".shard"))
        death = _source_death(source, store, repo, changed_repo, published_shard_lists, settled, pool)
        return {"searcher_nodes": sorted({_node(a) for a in pool.actors}) != [_node(source)] and
                all(_node(a) != _node(source) for a in pool.actors),
                "files": len(got["files"]), "later_files": len(later["files"]),
                "held_far": all(p.startswith(far_dir + os.sep) for p in first + second),
                "held_builder": any(p.startswith(index_dir) for p in first + second),
                "new_shards": bool(set(second) - set(first)), "copies": len(copies), "crashes": got["stats"]["crashes"],
                "source_death": death}
    finally:
        store.close()
        ray.get(scheduler.shutdown.remote(), timeout=15)
        stop_workers(workers)
        pool.close()


#: Seconds the shard source's threads are held busy (so the searchers' fetch waits in its queue) at most.
HOLD_S = 20.0


def _hold(source_self, pid: int, until: float) -> None:
    """Keep one thread of the shard source busy until `until`, in its first process only (the
    call is retried on the restarted source, where it returns at once)."""
    import time

    while os.getpid() == pid and time.time() < until:
        time.sleep(0.05)


def _source_death(source, store, repo, changed_repo, published_shard_lists, settled, pool) -> dict:
    """Kill the shard source (SIGKILL) while the searchers wait for it to describe the new shard of
    a re-index: every thread of the source is held busy first, so their calls are in its queue
    when it dies. Ray restarts it and retries those calls (`start_shard_source`): the fetch
    completes, and the searchers serve the new shard, with no crash and no refused shard."""
    import signal
    import subprocess
    import time

    pid = ray.get(source.__ray_call__.remote(lambda self: os.getpid()))
    before = set(published_shard_lists("copies-searcher"))
    busy = [source.__ray_call__.remote(_hold, pid, time.time() + HOLD_S) for _ in range(4)]
    with open(os.path.join(changed_repo, "source_death.py"), "w") as f:
        f.write("def tayra_while_the_source_died():\n    pass\n")
    for args in (["add", "source_death.py"], ["commit", "-q", "-m", "source death"]):
        subprocess.run(["git", *args], cwd=changed_repo, check=True, capture_output=True)
    store.enqueue_index_job(repo.id, force=True)
    deadline = time.monotonic() + HOLD_S - 5
    while not set(published_shard_lists("copies-searcher")) - before:  # the searchers are sent the new lists
        assert time.monotonic() < deadline, "the re-index was not published while the source was held"
        time.sleep(0.1)
    time.sleep(1.0)  # their describe calls reach the source's queue (it stays held for seconds more)
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    got, _ = settled("tayra_while_the_source_died", 60)
    ray.wait(busy, num_returns=len(busy), timeout=30)
    errors = sorted({e for a in pool.actors for e in ray.get(a.__ray_call__.remote(lambda self: self.errors))})
    return {"restarted": ray.get(source.__ray_call__.remote(lambda self: os.getpid())) != pid,
            "files": len(got["files"]), "crashes": got["stats"]["crashes"], "errors": errors,
            "whole_after_s": round(time.monotonic() - killed, 1)}


def main(index_dir: str, query: str, checks: str = "{}") -> None:
    asked = json.loads(checks)
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
        if "runtime" in asked:
            a = asked["runtime"]
            out["runtime"] = runtime_check(a["config"], a["data"], query)
        if "copies" in asked:
            a = asked["copies"]
            out["copies"] = copies_check(a["config"], a["data"], a["far"], query, a["changed_repo"])
        print(json.dumps(out))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
