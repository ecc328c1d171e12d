"""Searchers on a node without the data directory: a 2-node Ray cluster on this machine
(`ray.cluster_utils.Cluster`, in a process of its own, `tests/cluster_check.py`) whose node 0
syncs and indexes into one data directory while the searchers on node 1 keep their shards in
another, fetched through Ray and verified by checksum (`codesearch.runtime.shard_copy`). They
answer exactly like the engine over the builder's index, never open a file of the builder's
directory, and pick up the new shards of a re-index."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.corpus import make_local_repo


def test_searchers_on_another_node_fetch_the_shards_they_serve(indexed_corpus, tmp_path):
    local = tmp_path / "local"
    make_local_repo(str(local / "alpha"), {"a.py": "def foo():\n    return handler()\n"})
    make_local_repo(str(local / "beta"), {"b.go": "func handler() {}\n", "c.txt": "foo foo\n"})
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"connections": {"local": {"type": "git", "url": f"file://{local}/*"}}}))
    far = tmp_path / "node1-data"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-m", "tests.cluster_check", indexed_corpus["index"], "foo or handler",
                          str(config), str(tmp_path / "node0-data"), str(far), str(local / "beta")],
                         capture_output=True, text=True, env=env, timeout=400,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr[-3000:]
    copies = json.loads(out.stdout.strip().splitlines()[-1])["copies"]
    assert copies == {"searcher_nodes": True, "files": 3, "later_files": 1, "held_far": True, "held_builder": False,
                      "new_shards": True, "copies": copies["copies"], "crashes": 0}, copies
    assert copies["copies"] >= 1
