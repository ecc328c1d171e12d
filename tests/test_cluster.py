"""Runs unchanged on a multi-node Ray cluster: searchers on two nodes answer like the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_two_node_cluster_search(indexed_corpus):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-m", "tests.cluster_check", indexed_corpus["index"], "foo or handler"],
                         capture_output=True, text=True, env=env, timeout=240, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"nodes": 2, "alive_nodes": 2, "equal": True, "files": result["files"], "crashes": 0}
    assert result["files"] > 0
