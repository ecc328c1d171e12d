"""Run by tests/test_cluster.py in its own process: a 2-node Ray cluster on this machine
(`ray.cluster_utils.Cluster`), one shard searcher on each node, and a search through
them compared with the in-process engine. Prints one JSON line."""

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


def main(index_dir: str, query: str) -> None:
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
        spans = lambda r: sorted((f["repository"], f["fileName"]["text"], c["contentStart"]["byteOffset"], len(c["matchRanges"]))
                                 for f in r["files"] for c in f["chunks"])
        print(json.dumps({"nodes": len(set(nodes)), "alive_nodes": len([n for n in ray.nodes() if n["Alive"]]),
                          "equal": spans(got) == spans(want), "files": len(got["files"]), "crashes": got["stats"]["crashes"]}))
        pool.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
