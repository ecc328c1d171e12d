"""One run of `tests.cluster_check` for the whole test session: the 2-node Ray cluster it starts
serves both the runtime check (tests/runtime/test_cluster.py) and the shard copies check
(tests/runtime/test_shards_without_shared_disk.py), each over repositories and a data directory of its
own. Starting such a cluster (two raylets, their workers) costs more than either check."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.corpus import make_local_repo
from tests.githttp import GitHttpServer, make_bare_repo

QUERY = "foo or handler"
#: The repositories both checks index (the copies check changes beta's).
LOCAL_REPOS = {"alpha": {"a.py": "def foo():\n    return handler()\n"},
               "beta": {"b.go": "func handler() {}\n", "c.txt": "foo foo\n"}}

_RUNS: dict[str, subprocess.CompletedProcess] = {}


def _local_config(root, extra: dict | None = None) -> str:
    local = root / "local"
    for name, files in LOCAL_REPOS.items():
        make_local_repo(str(local / name), files)
    config = root / "config.json"
    config.write_text(json.dumps({"connections": {"local": {"type": "git", "url": f"file://{local}/*"}, **(extra or {})}}))
    return str(config)


def two_node_checks(tmp_path_factory, index_dir: str) -> dict:
    """The JSON line `tests.cluster_check` printed (run once per session; a failed run fails every
    test that asks, with its stderr)."""
    if "run" not in _RUNS:
        runtime, copies = tmp_path_factory.mktemp("cluster-runtime"), tmp_path_factory.mktemp("cluster-copies")
        make_bare_repo(str(runtime / "git"), "acme/remote.git", {"r.py": "foo = 'handler'\n"})
        server = GitHttpServer(str(runtime / "git")).start()
        try:
            checks = {"runtime": {"config": _local_config(runtime, {"remote": {"type": "git",
                                                                               "url": server.url("acme/remote.git")}}),
                                  "data": str(runtime / "data")},
                      "copies": {"config": _local_config(copies), "data": str(copies / "node0-data"),
                                 "far": str(copies / "node1-data"), "changed_repo": str(copies / "local" / "beta")}}
            env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
            env.pop("RAY_ADDRESS", None)
            _RUNS["run"] = subprocess.run([sys.executable, "-m", "tests.cluster_check", index_dir, QUERY, json.dumps(checks)],
                                          capture_output=True, text=True, env=env, timeout=600,
                                          cwd=os.path.dirname(os.path.dirname(__file__)))
        finally:
            server.stop()
    out = _RUNS["run"]
    assert out.returncode == 0, out.stderr[-3000:]
    # the last JSON line (Ray may print a warning of its own after it, e.g. about a retried call)
    return json.loads(next(line for line in reversed(out.stdout.splitlines()) if line.startswith("{")))
