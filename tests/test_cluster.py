"""Runs unchanged on a multi-node Ray cluster: searchers on two nodes answer like the engine, and
the scheduler and workers on different nodes sync and index real git repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.corpus import make_local_repo
from tests.githttp import GitHttpServer, make_bare_repo


def test_two_node_cluster(indexed_corpus, tmp_path):
    local = tmp_path / "local"
    make_local_repo(str(local / "alpha"), {"a.py": "def foo():\n    return handler()\n"})
    make_local_repo(str(local / "beta"), {"b.go": "func handler() {}\n", "c.txt": "foo foo\n"})
    make_bare_repo(str(tmp_path / "git"), "acme/remote.git", {"r.py": "foo = 'handler'\n"})
    server = GitHttpServer(str(tmp_path / "git")).start()
    try:
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"connections": {
            "local": {"type": "git", "url": f"file://{local}/*"},
            "remote": {"type": "git", "url": server.url("acme/remote.git")}}}))
        env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
        env.pop("RAY_ADDRESS", None)
        out = subprocess.run([sys.executable, "-m", "tests.cluster_check", indexed_corpus["index"], "foo or handler",
                              str(config), str(tmp_path / "data")],
                             capture_output=True, text=True, env=env, timeout=300,
                             cwd=os.path.dirname(os.path.dirname(__file__)))
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    search = result["search"]
    assert search == {"nodes": 2, "alive_nodes": 2, "equal": True, "files": search["files"], "crashes": 0}
    assert search["files"] > 0
    assert result["runtime"] == {"repos": 3, "indexed": 3, "nodes": 2, "workers_elsewhere": True, "equal": True,
                                 "files": 4}
