"""Runs unchanged on a multi-node Ray cluster: searchers on two nodes answer like the engine, and
the scheduler and workers on different nodes sync and index real git repositories (a local
``git`` connection and one over git smart HTTP). The cluster runs in a process of its own
(`tests.clusterrun`)."""

from __future__ import annotations

from tests.clusterrun import two_node_checks


def test_two_node_cluster(indexed_corpus, tmp_path_factory):
    result = two_node_checks(tmp_path_factory, indexed_corpus["index"])
    search = result["search"]
    assert search == {"nodes": 2, "alive_nodes": 2, "equal": True, "files": search["files"], "crashes": 0}
    assert search["files"] > 0
    assert result["runtime"] == {"repos": 3, "indexed": 3, "nodes": 2, "workers_elsewhere": True, "equal": True,
                                 "files": 4}
