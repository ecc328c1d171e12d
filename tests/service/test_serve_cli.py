"""`codesearch serve` as a user runs it: a real process, its own Ray instance, the offline demo,
real HTTP on 127.0.0.1, keys from the CLI, and a clean stop on SIGTERM, also under load: every
request the service took before the signal is answered in full, later ones are refused cleanly
(a JSON 503 or a refused connection), and the stop is bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port
from tests.corpus import make_local_repo

#: Seconds a request may take to reach the service through Serve's proxy under the load test's
#: load (requests sent that close before SIGTERM may arrive after the drain began).
ARRIVAL_S = 0.5

#: What the load clients search: the demo's urllib package (`python-urllib`) holds it.
LOAD_QUERY = {"query": "def (url|split)", "isRegexEnabled": True, "matches": 200}


#: The progress line `codesearch serve` prints when every connection synced and every repository is indexed.
FIRST_SYNC_DONE = re.compile(r"first sync: (\d+)/\1 connections synced, (\d+)/\2 repositories indexed")

#: Config settings for a service that needs no parallel jobs: one syncer and one indexer (the
#: default is two of each on two cores: each a Ray worker process more to start on a busy machine).
ONE_WORKER_EACH = {"maxConnectionSyncJobConcurrency": 1, "maxRepoIndexingJobConcurrency": 1}

#: Seconds between two looks at a service that is coming up.
POLL_S = 0.2


def _cli(*args, env) -> str:
    out = subprocess.run([sys.executable, "-m", "codesearch.cli", *args], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


class Served:
    """`codesearch serve --port <free>` on the offline demo in `tmp_path` (``DATA_DIR``), as a
    process of its own (its own session, so a stray Ray process cannot outlive the test)."""

    def __init__(self, tmp_path: Path, dashboard: bool = False, port: int | None = None, searchers: int | None = None,
                 **env_extra: str):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, "RAY_AUTH_MODE": "disabled", "DATA_DIR": str(tmp_path), **env_extra}
        for name in ("FORCE_ENABLE_ANONYMOUS_ACCESS", "RAY_ADDRESS"):
            if name not in env_extra:
                self.env.pop(name, None)
        self.log_path = tmp_path / "serve.log"
        self._log = open(self.log_path, "w")
        argv = [sys.executable, "-m", "codesearch.cli", "serve", "--port", str(self.port)]
        if not dashboard:  # the default; the tests leave it out where they do not look at it (CPU on 2 cores)
            argv.append("--no-dashboard")
        if searchers is not None:  # the default is 2; tests that do not look at partitions start fewer actors
            argv += ["--searchers", str(searchers)]
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_healthy(self, timeout_s: float = 180, indexed: bool = True) -> None:
        """Until ``/api/health`` answers and, with `indexed`, the first sync is done (HTTP comes
        up before it: the log's progress says when every repository is indexed)."""
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.proc.poll() is None, self.log()[-3000:]
            try:
                if httpx.get(f"{self.base}/api/health", timeout=2).status_code == 200 and (
                        not indexed or FIRST_SYNC_DONE.search(self.log())):
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, self.log()[-3000:]
            time.sleep(POLL_S)

    def stop(self, timeout_s: float = 90) -> int:
        """SIGTERM, then the exit code (SIGKILL to the whole session if it does not stop in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise
        finally:
            self._log.close()


#: A small repository for the tests that look at starting and stopping, not at the demo: what
#: `LOAD_QUERY` finds, indexed in a moment.
URLS_PY = """def urlsplit(url):
    scheme, _, rest = url.partition("://")
    return scheme, rest.split("/", 1)


def urljoin(base, url):
    return base.rstrip("/") + "/" + url.lstrip("/")


def split_query(query):
    return dict(part.split("=", 1) for part in query.split("&") if "=" in part)
"""


@pytest.fixture(scope="module")
def small_config(tmp_path_factory) -> Path:
    """A config of one local git repository (`URLS_PY`), one syncer and one indexer."""
    root = tmp_path_factory.mktemp("small")
    make_local_repo(str(root / "repos" / "urls"), {"urls.py": URLS_PY})
    config = root / "config.json"
    config.write_text(json.dumps({"settings": ONE_WORKER_EACH,
                                  "connections": {"local": {"type": "git", "url": f"file://{root / 'repos'}/*"}}}))
    return config


@dataclass
class Demo:
    """`codesearch serve` on the offline demo with Ray's dashboard, anonymous access off and a
    20 s drain bound, and an API key of its first user."""

    served: Served
    key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@pytest.fixture(scope="module")
def _demo_slot():
    slot: dict[str, Demo] = {}
    yield slot
    if slot and slot["demo"].served.proc.poll() is None:
        slot["demo"].served.stop()


@pytest.fixture
def demo(_demo_slot, tmp_path_factory) -> Demo:
    """The demo service, started once for the tests of this module that look at it while it runs
    (a start costs tens of seconds of CPU); the test that stops it leaves the next one to start
    another."""
    if "demo" not in _demo_slot or _demo_slot["demo"].served.proc.poll() is not None:
        served = Served(tmp_path_factory.mktemp("demo"), dashboard=True, CODESEARCH_DRAIN_TIMEOUT_S="20")
        try:
            served.wait_healthy()
            _cli("users", "create", "admin@example.com", env=served.env)
            key = _cli("keys", "create", "--user", "admin@example.com", env=served.env).strip()
        except BaseException:  # a start that failed is stopped here: nobody else holds it to stop
            served.stop()
            raise
        _demo_slot["demo"] = Demo(served, key)
    return _demo_slot["demo"]


def test_serve_demo_end_to_end(demo):
    """The demo answers searches with a key from the CLI (and refuses them without one), lists
    its repositories, and its Ray dashboard and Serve's process settings are as `serve_settings`
    says. (Its stop is `test_sigterm_under_load_loses_no_request`'s.)"""
    served, base = demo.served, demo.served.base
    body = {"query": "sym:^urlsplit$", "matches": 10}
    assert httpx.post(f"{base}/api/search", json=body, timeout=30).status_code == 401
    r = httpx.post(f"{base}/api/search", json=body, headers=demo.auth, timeout=30)
    assert r.status_code == 200, r.text
    files = {(f["repository"].rsplit("/", 1)[-1], f["fileName"]["text"]) for f in r.json()["files"]}
    assert ("python-urllib", "parse.py") in files
    repos = httpx.get(f"{base}/api/repos", headers={"X-Sourcebot-Api-Key": demo.key}, timeout=30)
    assert repos.status_code == 200 and int(repos.headers["X-Total-Count"]) >= 2
    log_text = served.log()
    assert "serving at" in log_text and "offline demo" in log_text
    dashboard = re.search(r"ray dashboard: (http://\S+)", log_text)  # on by default
    assert dashboard, log_text[-3000:]
    assert httpx.get(f"{dashboard.group(1)}/api/version", timeout=30).status_code == 200
    _check_serve_settings(served.proc.pid)


def _session_processes(session: int) -> dict[str, int]:
    """Title → PID of the processes of `session` (a `codesearch serve` and its own Ray)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3]) == session:
                found[Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")] = int(pid)
        except (OSError, ValueError, IndexError):
            continue
    return found


def _check_serve_settings(session: int) -> None:
    """`serve_settings` reached Serve's processes: the proxy and the replica have their
    environment, and neither wrote an access log line for the requests the test sent."""
    from codesearch.serving import serve_settings

    procs = _session_processes(session)
    proxy = next(pid for title, pid in procs.items() if title.startswith("ray::ProxyActor"))
    replica = next(pid for title, pid in procs.items() if title.startswith("ray::ServeReplica"))
    for pid, wanted in ((proxy, serve_settings.PROXY_ENV), (replica, serve_settings.REPLICA_ENV)):
        environ = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item)
        assert {k: environ.get(k) for k in wanted} == wanted, pid
    logs = {os.readlink(f"/proc/{pid}/fd/{fd}") for pid in (proxy, replica) for fd in os.listdir(f"/proc/{pid}/fd")
            if "/logs/serve/" in os.readlink(f"/proc/{pid}/fd/{fd}")}
    assert len(logs) >= 2, logs  # the proxy's and the replica's
    access_line = re.compile(r" -- (GET|POST) \S+ \d{3} [\d.]+ms")  # Serve: "-- POST / 200 12.3ms"
    for path in logs:
        assert not access_line.search(Path(path).read_text(errors="replace")), path


# --- stopping under load ------------------------------------------------------------------------

@dataclass
class Outcome:
    """One request of a load client: when it was sent and ended (monotonic) and how it ended:
    ``ok`` (200, whole JSON body with results), ``refused`` (connection refused), ``unavailable``
    (503 in our JSON error shape) or ``broken`` (anything else, with `detail`)."""

    sent: float
    done: float
    kind: str
    detail: str = ""


def _classify(send) -> tuple[str, str]:
    try:
        r = send()
    except httpx.ConnectError as e:
        return "refused", repr(e)
    except httpx.HTTPError as e:  # reset, cut body, timeout: a request lost
        return "broken", repr(e)
    try:
        body = r.json()
    except ValueError:
        return "broken", f"{r.status_code} not JSON: {r.text[:200]!r}"
    if r.status_code == 200 and body.get("files") and "stats" in body:
        return "ok", ""
    if (r.status_code == 503 and body.get("statusCode") == 503 and body.get("errorCode") == "SERVICE_UNAVAILABLE"
            and body.get("message") and r.headers.get("retry-after")):
        return "unavailable", ""
    return "broken", f"{r.status_code} {r.text[:200]!r}"


def _load_client(base: str, outcomes: list[Outcome], stop: threading.Event, headers: dict[str, str], *,
                 fresh_connections: bool = False) -> None:
    """Search until told to stop or refused (a client honours a 503 or a refused connection by going
    away: it would come back after Retry-After, to another instance)."""
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        while not stop.is_set():
            sent = time.monotonic()
            if fresh_connections:
                kind, detail = _classify(lambda: httpx.post(f"{base}/api/search", json=LOAD_QUERY, headers=headers,
                                                            timeout=60))
            else:
                kind, detail = _classify(lambda: client.post("/api/search", json=LOAD_QUERY))
            outcomes.append(Outcome(sent, time.monotonic(), kind, detail))
            if kind in ("refused", "unavailable", "broken"):
                return
            if fresh_connections:
                time.sleep(0.05)


def test_sigterm_under_load_loses_no_request(demo):
    """8 clients search without pause; SIGTERM arrives mid-load. Requests sent before the signal
    are all answered 200 in full; later ones are answered or cleanly refused; the process exits 0
    within the drain bound, its one HTTP replica drained."""
    drain_s = 20.0  # the demo's CODESEARCH_DRAIN_TIMEOUT_S
    served = demo.served
    outcomes: list[Outcome] = []
    late: list[Outcome] = []
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        warm = httpx.post(f"{served.base}/api/search", json=LOAD_QUERY, headers=demo.auth, timeout=60)
        assert warm.status_code == 200 and warm.json()["files"], warm.text
        threads = [threading.Thread(target=_load_client, args=(served.base, outcomes, stop, demo.auth), daemon=True)
                   for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(4)  # steady load
        signalled = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        # a client that arrives after the signal, on new connections each time
        newcomer = threading.Thread(target=_load_client, args=(served.base, late, stop, demo.auth),
                                    kwargs={"fresh_connections": True}, daemon=True)
        newcomer.start()
        threads.append(newcomer)
        code = served.proc.wait(timeout=drain_s + 60)
        exited = time.monotonic()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=70)
        if served.proc.poll() is None:
            os.killpg(served.proc.pid, signal.SIGKILL)
    log = served.log()
    assert code == 0, log[-3000:]
    assert exited - signalled < drain_s + 45, f"stopped after {exited - signalled:.1f}s"

    everything = outcomes + late
    before = [o for o in everything if o.sent < signalled]
    after = [o for o in everything if o.sent >= signalled]
    in_flight = [o for o in before if o.done > signalled]
    assert len(before) > 50, f"too little load before the signal: {len(before)}"
    assert in_flight, "no request was running when the signal arrived: the test proved nothing"
    # A request sent in the last moment before the signal may reach the service after the drain
    # began (Serve's proxy queues it on this busy 2-core machine): then a clean refusal is right.
    # Every request sent earlier than that must have been answered in full.
    taken = [o for o in before if o.sent < signalled - ARRIVAL_S]
    lost = [o for o in taken if o.kind != "ok"]
    edge = [o for o in before if o.sent >= signalled - ARRIVAL_S and o.kind not in ("ok", "refused", "unavailable")]
    assert not edge, f"requests sent just before SIGTERM neither answered nor cleanly refused: {edge[:5]}"
    assert not lost, f"{len(lost)} of {len(taken)} requests taken before SIGTERM were not answered: {lost[:5]}"
    broken = [o for o in after if o.kind == "broken"]
    assert not broken, f"requests after SIGTERM neither answered nor cleanly refused: {broken[:5]}"
    assert late and late[-1].kind in ("refused", "unavailable"), late[-3:]
    assert "shutting down" in log and "draining: drained 1 replica" in log, log[-3000:]


def test_a_bad_drain_timeout_is_refused_before_anything_starts(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    def refused(value: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "codesearch.cli", "serve", "--port", str(free_port())],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "DATA_DIR": str(tmp_path), "CODESEARCH_DRAIN_TIMEOUT_S": value})

    values = ("abc", "-1", "nan", "inf")
    with ThreadPoolExecutor(2) as pool:  # independent processes, two at a time (each imports Ray: CPU)
        outs = list(pool.map(refused, values))
    for value, out in zip(values, outs):
        assert out.returncode == 2, (value, out.stdout, out.stderr)
        assert f"CODESEARCH_DRAIN_TIMEOUT_S={value!r}" in out.stderr and "seconds" in out.stderr, out.stderr
        assert "ray" not in out.stdout.lower(), out.stdout


def test_joined_to_a_cluster_it_removes_only_its_own_application(serve_url, tmp_path, small_config):
    """With ``RAY_ADDRESS`` (here: the test session's Ray, whose Serve already runs another
    application), a stop drains and deletes the ``codesearch`` application and nothing else."""
    import uuid

    import ray
    from ray import serve

    @serve.deployment(ray_actor_options={"num_cpus": 0})
    class Bystander:
        async def __call__(self, request) -> str:
            return "still here"

    bystander = f"bystander-{uuid.uuid4().hex[:8]}"
    serve.run(Bystander.bind(), name=bystander, route_prefix=f"/{bystander}")
    cluster_port = int(serve_url.rsplit(":", 1)[1])
    served = Served(tmp_path, port=cluster_port, searchers=1, FORCE_ENABLE_ANONYMOUS_ACCESS="true",
                    CONFIG_PATH=str(small_config), RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    from codesearch.serving.stop import wait_gone

    def runtime_actors() -> set[str]:
        return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["name"].startswith("codesearch-")}

    before = runtime_actors()
    try:
        served.wait_healthy()
        r = httpx.post(f"{serve_url}/api/search", json=LOAD_QUERY, timeout=60)
        assert r.status_code == 200 and r.json()["files"], r.text
        assert {"codesearch", bystander} <= set(serve.status().applications)
        ours = runtime_actors() - before
        assert {"codesearch-scheduler", "codesearch-searcher-0", "codesearch-compactor"} <= ours, ours
        code = served.stop(timeout_s=90)
        assert code == 0, served.log()[-3000:]
        applications = serve.status().applications
        assert "codesearch" not in applications and bystander in applications, list(applications)
        still = httpx.get(f"{serve_url}/{bystander}", timeout=30)
        assert (still.status_code, still.text) == (200, "still here")
        assert "draining: drained 1 replica" in served.log(), served.log()[-3000:]
        # the runtime actors went with the application (its runtime replica owned them)
        assert wait_gone(sorted(ours), timeout_s=30), ours
    finally:
        if served.proc.poll() is None:
            os.killpg(served.proc.pid, signal.SIGKILL)
        serve.delete(bystander)



def test_without_ray_address_it_starts_its_own_ray_beside_another_and_its_drain_is_bounded(serve_url, tmp_path,
                                                                                           small_config):
    """Without ``RAY_ADDRESS``, `codesearch serve` starts a Ray instance of its own even when
    another one on the machine is the one ``ray.init()`` would join (the cluster a ``ray start``
    recorded in ``<RAY_TMPDIR>/ray/ray_current_cluster``; here: the test session's, whose Serve
    runs another application): it must not serve through that one's proxy, nor shut its Serve
    down when it stops.

    Its stop is the drain bound's case (one service for both: a start costs tens of seconds): a
    request that never ends (its body is held back) is waited for CODESEARCH_DRAIN_TIMEOUT_S, no
    longer: then the service stops anyway, cutting it, and exits 0."""
    import shutil
    import tempfile
    import uuid

    import ray
    from ray import serve

    from tests.service.test_service_drain import Held

    @serve.deployment(ray_actor_options={"num_cpus": 0})
    class Bystander:
        async def __call__(self, request) -> str:
            return "still here"

    drain_s = 3.0
    bystander = f"bystander-{uuid.uuid4().hex[:8]}"
    serve.run(Bystander.bind(), name=bystander, route_prefix=f"/{bystander}")
    ray_tmp = Path(tempfile.mkdtemp(prefix="cs-ray-", dir="/tmp"))  # short: Ray's socket paths have a limit
    (ray_tmp / "ray").mkdir()
    (ray_tmp / "ray" / "ray_current_cluster").write_text(ray.get_runtime_context().gcs_address)
    served = Served(tmp_path, searchers=1, FORCE_ENABLE_ANONYMOUS_ACCESS="true", CONFIG_PATH=str(small_config),
                    RAY_TMPDIR=str(ray_tmp), CODESEARCH_DRAIN_TIMEOUT_S=str(drain_s))
    held = None
    try:
        served.wait_healthy()
        r = httpx.post(f"{served.base}/api/search", json=LOAD_QUERY, timeout=60)
        assert r.status_code == 200 and r.json()["files"], r.text
        assert "codesearch" not in serve.status().applications
        held = Held(served.base)
        time.sleep(1.5)  # the held request reaches the replica
        signalled = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        code = served.proc.wait(timeout=drain_s + 60)
        stopped = time.monotonic() - signalled
        log = served.log()
        assert code == 0, log[-3000:]
        assert f"not drained after {drain_s:.0f}." in log and "1 request still running" in log, log[-3000:]
        assert drain_s <= stopped < drain_s + 45, f"stopped after {stopped:.1f}s"
        held.finish()
        assert held.response is None and isinstance(held.error, httpx.TransportError), (held.response, held.error)
        assert "Connecting to existing Ray cluster" not in log, log[-3000:]
        still = httpx.get(f"{serve_url}/{bystander}", timeout=30)
        assert (still.status_code, still.text) == (200, "still here")
    finally:
        if held is not None:
            held.release.set()
        if served.proc.poll() is None:
            os.killpg(served.proc.pid, signal.SIGKILL)
        served.stop()  # (closes its log)
        serve.delete(bystander)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_a_busy_port_is_a_clear_error_before_anything_starts(tmp_path):
    """Serve's proxy would share a port another program listens on (SO_REUSEPORT) and split its
    traffic; `codesearch serve` refuses at once instead, before Ray or any sync starts."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # as a Serve proxy binds
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "DATA_DIR": str(tmp_path)}
    env.pop("RAY_ADDRESS", None)
    try:
        out = subprocess.run([sys.executable, "-m", "codesearch.cli", "serve", "--port", str(port)],
                             capture_output=True, text=True, env=env, timeout=60)
    finally:
        holder.close()
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert f"port {port} is in use" in text and "--port" in text and "Traceback" not in text
    assert "ray:" not in text  # Ray never started


def test_version_from_the_command_and_python_m():
    for cmd in (["codesearch", "--version"], ["-m", "codesearch", "--version"]):
        argv = [sys.executable, "-m", "codesearch.cli", "--version"] if cmd[0] == "codesearch" else [sys.executable, *cmd]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and re.fullmatch(r"codesearch \S+ \(codesearch-ray\)\n", out.stdout), out


def test_a_dead_cluster_address_is_a_clear_error_at_once(tmp_path):
    """RAY_ADDRESS naming a cluster that is gone: a message that says so, exit code 2, instead
    of ray.init retrying the GCS for minutes in silence."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    dead = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "DATA_DIR": str(tmp_path), "RAY_ADDRESS": f"127.0.0.1:{dead}"}
    out = subprocess.run([sys.executable, "-m", "codesearch.cli", "serve", "--port", str(free_port())],
                         capture_output=True, text=True, env=env, timeout=60)
    text = out.stdout + out.stderr
    assert out.returncode == 2, text
    assert f"cannot join the Ray cluster (RAY_ADDRESS=127.0.0.1:{dead})" in text and "nothing answers" in text
    assert "Traceback" not in text


def test_cluster_addresses_that_cannot_be_joined_are_named():
    from codesearch.serving import launcher

    assert launcher.cluster_unreachable("local") is None and launcher.cluster_unreachable("ray://h:10001") is None
    assert "not host:port" in launcher.cluster_unreachable("nonsense")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    try:
        assert launcher.cluster_unreachable(f"127.0.0.1:{listener.getsockname()[1]}") is None
    finally:
        listener.close()


def test_joined_to_a_cluster_it_refuses_what_would_collide(serve_url, tmp_path):
    """Joined to a cluster (``RAY_ADDRESS``), `codesearch serve` refuses at once, with exit code 2
    and a message saying what to do, a cluster whose Serve listens on another port (Serve has one
    HTTP address per cluster: ``--port`` would be ignored), and one that already runs an
    application named ``codesearch``; the cluster's applications are left as they were."""
    import ray
    from ray import serve

    address = ray.get_runtime_context().gcs_address
    cluster_port = int(serve_url.rsplit(":", 1)[1])
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "DATA_DIR": str(tmp_path), "RAY_ADDRESS": address}

    def serve_cli(port: int) -> tuple[int, str]:
        out = subprocess.run([sys.executable, "-m", "codesearch.cli", "serve", "--port", str(port), "--no-dashboard"],
                             capture_output=True, text=True, env=env, timeout=120)
        return out.returncode, out.stdout + out.stderr

    before = set(serve.status().applications)
    code, text = serve_cli(free_port())
    assert code == 2 and f"listens on port {cluster_port}" in text and f"--port {cluster_port}" in text, text
    assert "Traceback" not in text and set(serve.status().applications) == before

    @serve.deployment(ray_actor_options={"num_cpus": 0})
    class Squatter:
        async def __call__(self, request) -> str:
            return "not codesearch"

    serve.run(Squatter.bind(), name="codesearch", route_prefix="/squatter")
    try:
        code, text = serve_cli(cluster_port)
        assert code == 2 and "already runs a Serve application named 'codesearch'" in text, text
        assert httpx.get(f"{serve_url}/squatter", timeout=30).text == "not codesearch"
    finally:
        serve.delete("codesearch")


def test_a_runtime_that_cannot_start_is_a_clear_error_not_a_traceback(tmp_path, small_config):
    """The runtime replica fails in its constructor (here: the data directory's ``index`` is a
    file): `codesearch serve` says which deployment failed and why, in one line, and exits 1.
    (Serve gives up on the deployment after its first failed replica here, not the third: the
    same failure, sooner.)"""
    data = tmp_path / ".codesearch"
    data.mkdir(mode=0o700)
    (data / "index").write_text("not a directory")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "DATA_DIR": str(tmp_path), "CONFIG_PATH": str(small_config),
           "RAY_SERVE_MAX_PER_REPLICA_RETRY_COUNT": "1"}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-m", "codesearch.cli", "serve", "--port", str(free_port()), "--no-dashboard",
                          "--searchers", "1"],
                         capture_output=True, text=True, env=env, timeout=300, start_new_session=True)
    text = out.stdout + out.stderr
    assert out.returncode == 1, text[-3000:]
    line = next(line for line in text.splitlines() if line.startswith("cannot serve:"))
    assert "codesearch-runtime" in line and "FileExistsError" in line and str(data / "index") in line, line
    assert "Traceback" not in text
