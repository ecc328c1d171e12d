"""Searchers on a node without the data directory: a 2-node Ray cluster on this machine
(`ray.cluster_utils.Cluster`, in a process of its own: `tests.clusterrun`) whose node 0
syncs and indexes into one data directory while the searchers on node 1 keep their shards in
another, fetched through Ray and verified by checksum (`codesearch.runtime.shard_copy`). They
answer exactly like the engine over the builder's index, never open a file of the builder's
directory, and pick up the new shards of a re-index."""

from __future__ import annotations

from tests.clusterrun import two_node_checks


def test_searchers_on_another_node_fetch_the_shards_they_serve(indexed_corpus, tmp_path_factory):
    copies = two_node_checks(tmp_path_factory, indexed_corpus["index"])["copies"]
    assert copies == {"searcher_nodes": True, "files": 3, "later_files": 1, "held_far": True, "held_builder": False,
                      "new_shards": True, "copies": copies["copies"], "crashes": 0}, copies
    assert copies["copies"] >= 1
