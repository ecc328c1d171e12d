"""``serve deploy`` then ``serve shutdown`` with Ray's own CLI, on a Ray cluster of the test's own
(``ray start --head`` with its dashboard, which those commands talk to): the shipped application
builder comes up, answers searches, and ``serve shutdown`` leaves no codesearch actor behind (the
runtime actors belong to the application's runtime replica and end with it).

The cluster runs in a temporary directory of its own and is stopped by the PIDs of the processes
it started (never ``ray stop``, which would stop every Ray instance of the machine, the test
session's among them)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import free_port
from tests.corpus import make_local_repo

#: Not in the fast lane (`make check`): see tests/conftest.py.
pytestmark = pytest.mark.serve

BIN = Path(sys.executable).parent
#: The named actors of the cluster, once `until_none_in` (a namespace) has none left or at once.
LIST_ACTORS = """
import json, time, ray
ray.init(address={address!r}, log_to_driver=False)
def named():
    return [[a["namespace"], a["name"]] for a in ray.util.list_named_actors(all_namespaces=True)]
deadline = time.monotonic() + {timeout_s!r}
while {until_none_in!r} and any(ns == {until_none_in!r} for ns, _ in named()) and time.monotonic() < deadline:
    time.sleep(0.25)
print(json.dumps(named()))
"""


#: A notebook on the cluster (first, the cluster's named actors: one driver for both looks).
NOTEBOOK = """
import json, ray
from codesearch import Client
from codesearch.errors import CodesearchError
ray.init(address={address!r}, log_to_driver=False)
print("actors", json.dumps([[a["namespace"], a["name"]] for a in ray.util.list_named_actors(all_namespaces=True)]))
cs = Client.ray()
print("found", sorted(f.path for f in cs.search("ocelot_probe_41d9").files))
try:
    Client.ray(data_dir={elsewhere!r})
except CodesearchError as e:
    print("refused:", "not the service's" if "is not the service's state database" in str(e) else e)
"""


def _processes_under(temp_dir: str) -> list[int]:
    """PIDs of the processes whose command line names `temp_dir` (the cluster's own)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if temp_dir.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            continue
    return found


def files_holding(root: Path, values: dict[str, str], also: Iterable[Path] = ()) -> list[str]:
    """``<file>: <name>`` for every file under `root` (and in `also`) that holds one of `values`
    (name → value): a Ray session's logs searched for secrets."""
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name == "raylet.out" for p in files), f"no Ray session under {root}"
    found = []
    for path in [*files, *also]:
        try:
            content = path.read_bytes()
        except OSError:  # a file removed meanwhile
            continue
        found += [f"{path}: {name}" for name, value in values.items() if value.encode() in content]
    return found


class OwnCluster:
    """`ray start --head --block` with the dashboard, in `temp_dir`; `stop` ends it by PID."""

    def __init__(self, env: dict):
        self.temp_dir = tempfile.mkdtemp(prefix="csd-", dir="/tmp")  # short: Ray's socket paths have a limit
        self.gcs_port, self.dashboard_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.gcs_port}"
        self.dashboard = f"http://127.0.0.1:{self.dashboard_port}"
        self.env = env
        self.log = open(Path(self.temp_dir) / "ray-start.log", "w")
        self.proc = subprocess.Popen(
            [str(BIN / "ray"), "start", "--head", "--block", f"--port={self.gcs_port}", "--node-ip-address=127.0.0.1",
             "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
             "--num-cpus=2", f"--temp-dir={self.temp_dir}", "--disable-usage-stats"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.proc.poll() is None, (Path(self.temp_dir) / "ray-start.log").read_text()[-3000:]
            try:
                if httpx.get(f"{self.dashboard}/api/version", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the test's Ray cluster did not come up"
            time.sleep(0.25)

    def named_actors(self, until_none_in: str | None = None, timeout_s: float = 60) -> list[tuple[str, str]]:
        """The cluster's named actors (with `until_none_in`: once that namespace has none, or after
        `timeout_s`; one driver polls, as a driver's start costs seconds)."""
        code = LIST_ACTORS.format(address=self.address, until_none_in=until_none_in, timeout_s=timeout_s)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=self.env,
                             timeout=timeout_s + 120)
        assert out.returncode == 0, out.stderr[-3000:]
        return [tuple(a) for a in json.loads(out.stdout.strip().splitlines()[-1])]

    def python(self, code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=self.env, timeout=180)

    def serve(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "serve"), *args, "--address", self.dashboard], capture_output=True, text=True,
                              env=self.env, timeout=300)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while (left := _processes_under(self.temp_dir)) and time.monotonic() < deadline:
            time.sleep(0.25)
        for pid in _processes_under(self.temp_dir):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.log.close()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def test_serve_deploy_then_serve_shutdown_leaves_no_codesearch_actor(tmp_path):
    repos = tmp_path / "repos"
    make_local_repo(str(repos / "gadgets"), {"gadget.py": "def ocelot_probe_41d9():\n    return 'spotted'\n"})
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"connections": {"local": {"type": "git", "url": f"file://{repos}/*"}}}))
    http_port = free_port()
    serve_config = tmp_path / "serve_config.yaml"
    serve_config.write_text(yaml.safe_dump({
        "http_options": {"host": "127.0.0.1", "port": http_port},
        "applications": [{
            "name": "codesearch", "route_prefix": "/", "import_path": "codesearch.serving.app_builder:app",
            "args": {"config": str(config), "data_dir": str(tmp_path / "data"), "searchers": 1,
                     "anonymous_access": True, "syncers": 1, "indexers": 1},
            "deployments": [{"name": "codesearch-api", "num_replicas": 1, "ray_actor_options": {"num_cpus": 0}}]}]}))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "FORCE_ENABLE_ANONYMOUS_ACCESS")}
    env["RAY_AUTH_MODE"] = "disabled"
    # secrets the builder forwards to the replicas and actors (`bootstrap.forwarded_environment`)
    forwarded = {"SOURCEBOT_ENCRYPTION_KEY": "serverkey" + secrets.token_hex(16),
                 "CODESEARCH_WEBHOOK_SECRET": "hook" + secrets.token_hex(16)}
    env.update(forwarded)
    cluster = OwnCluster(env)
    try:
        cluster.wait_ready()
        deployed = cluster.serve("deploy", str(serve_config))
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        deadline = time.monotonic() + 240
        while True:
            try:
                r = httpx.post(f"http://127.0.0.1:{http_port}/api/search", json={"query": "ocelot_probe_41d9", "matches": 10}, timeout=30)
                if r.status_code == 200 and r.json()["files"]:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, cluster.serve("status").stdout
            time.sleep(0.25)
        assert [f["fileName"]["text"] for f in r.json()["files"]] == ["gadget.py"]
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        notebook = cluster.python(NOTEBOOK.format(address=cluster.address, elsewhere=str(elsewhere)))
        assert notebook.returncode == 0, notebook.stderr[-3000:]
        listed = next(line for line in notebook.stdout.splitlines() if line.startswith("actors "))
        ours = [(ns, name) for ns, name in json.loads(listed.split(" ", 1)[1]) if ns == "codesearch"]
        assert {name for _, name in ours} >= {"codesearch-scheduler", "codesearch-compactor", "codesearch-searcher-0",
                                              "codesearch-sync-0", "codesearch-index-0"}, ours
        # a notebook on the cluster finds the searchers and the state database the service published
        # (and refuses a data directory that is not the service's)
        assert notebook.stdout.strip().splitlines()[-2:] == ["found ['gadget.py']", "refused: not the service's"]
        # the forwarded secrets are in no file of the cluster (they travel as constructor arguments,
        # not in a runtime_env, which Ray logs: `codesearch.sealed_env`), and no process lacked the
        # server secret (none made a .secret of its own)
        leaked = files_holding(Path(cluster.temp_dir), forwarded)
        assert leaked == [], "\n".join(leaked)
        assert not (tmp_path / "data" / ".secret").exists()

        stopped = cluster.serve("shutdown", "-y")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        left = [a for a in cluster.named_actors(until_none_in="codesearch", timeout_s=60) if a[0] == "codesearch"]
        assert left == [], left
    finally:
        cluster.stop()
