"""Searchers on a node without the data directory: a 2-node Ray cluster on this machine
(`ray.cluster_utils.Cluster`, in a process of its own: `tests.clusterrun`) whose node 0
syncs and indexes into one data directory while the searchers on node 1 keep their shards in
another, fetched through Ray and verified by checksum (`codesearch.runtime.shard_copy`). They
answer exactly like the engine over the builder's index, never open a file of the builder's
directory, and pick up the new shards of a re-index. The shard source dies (SIGKILL) while they
fetch the shards of another re-index: Ray restarts it and retries their calls, and they serve
those shards within `WHOLE_WITHIN_S`, with nothing refused."""

from __future__ import annotations

from tests.clusterrun import two_node_checks

#: Seconds from the shard source's death to searches that find the new shard (issue 30's bound).
WHOLE_WITHIN_S = 30.0


def test_searchers_on_another_node_fetch_the_shards_they_serve(indexed_corpus, tmp_path_factory):
    copies = dict(two_node_checks(tmp_path_factory, indexed_corpus["index"])["copies"])
    death = copies.pop("source_death")
    assert death == {"restarted": True, "files": 1, "crashes": 0, "errors": [],
                     "whole_after_s": death["whole_after_s"]}, death
    assert death["whole_after_s"] < WHOLE_WITHIN_S, death
    print(f"FAULT shard source | fetch of a re-index's shard | {death['whole_after_s']} | searchers on the other node |"
          f" restarted: {death['restarted']}")
    assert copies == {"searcher_nodes": True, "files": 3, "later_files": 1, "held_far": True, "held_builder": False,
                      "new_shards": True, "copies": copies["copies"], "crashes": 0}, copies
    assert copies["copies"] >= 1
