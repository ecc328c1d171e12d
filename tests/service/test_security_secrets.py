"""The secrets handed to `codesearch serve` reach the processes that use them, and none of them is
written to Ray's logs (nor shown by Ray's dashboard) in clear text.

`codesearch serve` runs once, as a real process joined to a Ray cluster of the test's own
(``ray start --head`` with its dashboard, in a temporary directory of its own: its session and
logs are this test's alone). The cluster is started without the secrets, as a cluster's other
nodes are: they reach the replicas and actors only as codesearch hands them over, not because
Ray's processes inherited them. The config has two GitHub connections on a local fake GitHub
whose repositories are private (real bare repositories behind git smart HTTP). Every secret has a
random value of its own and is proved to work through real HTTP before the logs are searched:

=================================================  ==========================  ==========================================
secret                                             handed as                   proved to reach the service by
=================================================  ==========================  ==========================================
``SOURCEBOT_ENCRYPTION_KEY`` (the server secret)   environment                 an API key the CLI made with it is accepted
                                                                               (no ``.secret`` file is ever made)
``CODESEARCH_WEBHOOK_SECRET_SEALED_OWN``           environment                 a push signed with it is accepted (202)
``CODESEARCH_WEBHOOK_SECRET``                      environment                 a push to the other connection, signed with
                                                                               it, is accepted (202)
the GitHub token                                   config ``environmentOverrides``  the private repositories are synced
                                                                               and indexed (the host refuses any other)
``DATABASE_URL``                                   environment                 the CLI's user and key, made in that
                                                                               database, are the service's
=================================================  ==========================  ==========================================

Where they must not appear: any file under the cluster's temporary directory (every log of the
session: the runtime env agent's, the raylet's, the GCS's, Serve's controller, proxy and
replicas', the dashboard's, the workers' and the drivers'), the output of `codesearch serve`
itself, and what Ray's dashboard answers about the actors, tasks, workers and Serve applications
(their ``runtime_env`` included); searched once while the service runs and again after it
stopped (what is written at shutdown). Before codesearch handed them over as constructor
arguments (`codesearch.sealed_env`), every one of them was in ``runtime_env_agent.log`` and in
the dashboard's actors, tasks and Serve applications.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.fakehosts.github import FakeGitHub
from tests.githttp import GitHttpServer
from tests.service.test_serve_cli import ONE_WORKER_EACH, Served, _cli
from tests.service.test_serve_deploy import OwnCluster, files_holding
from tests.service.test_webhooks_serve import _payload, _signed

#: Connection names: one with a webhook secret of its own, one taking the shared one.
OWN, SHARED = "sealed-own", "sealed-any"
#: The variable the config's token reference names, set by its `environmentOverrides`.
TOKEN_VAR = "SEALED_GH_TOKEN"


def _random(label: str) -> str:
    """A value found nowhere else: a label to tell which leaked, and 128 random bits."""
    return f"{label}{secrets.token_hex(16)}"


@dataclass
class Sealed:
    served: Served
    cluster: OwnCluster
    gh: FakeGitHub
    data: Path
    key: str
    #: name -> value of every secret handed to the service
    secrets: dict[str, str]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


@pytest.fixture(scope="module")
def sealed(tmp_path_factory):
    root = tmp_path_factory.mktemp("sealed")
    database = root / f"db{secrets.token_hex(8)}"
    database.mkdir()
    values = {
        "SOURCEBOT_ENCRYPTION_KEY": _random("serverkey"),
        "CODESEARCH_WEBHOOK_SECRET": _random("sharedhook"),
        "CODESEARCH_WEBHOOK_SECRET_SEALED_OWN": _random("ownhook"),
        TOKEN_VAR: "ghp_" + secrets.token_hex(18),
        "DATABASE_URL": f"sqlite:///{database}/state{secrets.token_hex(8)}.db",
    }
    git_root = root / "git"
    git_root.mkdir()
    with GitHttpServer(str(git_root), users={("x-access-token", values[TOKEN_VAR])}) as git_srv, \
            FakeGitHub(values[TOKEN_VAR], "alice", git=git_srv) as gh:
        gh.add_org("acme", members=("alice",))
        gh.add_repo("acme", "widgets", private=True)
        gh.add_repo("acme", "gadgets", private=True)
        token = {"env": TOKEN_VAR}
        config = {
            "settings": ONE_WORKER_EACH,
            "environmentOverrides": {TOKEN_VAR: {"type": "string", "value": values[TOKEN_VAR]}},
            "connections": {
                OWN: {"type": "github", "url": gh.base_url, "token": token, "repos": ["acme/widgets"]},
                SHARED: {"type": "github", "url": gh.base_url, "token": token, "repos": ["acme/gadgets"]},
            },
        }
        config_path = root / "config.json"
        config_path.write_text(json.dumps(config, indent=2))
        data = root / "data"
        data.mkdir()
        env = {name: value for name, value in values.items() if name != TOKEN_VAR}  # the token: only in the config
        # the cluster's processes have none of the secrets (as the other nodes of a real cluster)
        cluster = OwnCluster({k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", *values)}
                             | {"RAY_AUTH_MODE": "disabled"})
        served = None
        try:
            cluster.wait_ready()
            served = Served(data, searchers=1, CONFIG_PATH=str(config_path), RAY_ADDRESS=cluster.address,
                            CODESEARCH_FIRST_SYNC_TIMEOUT_S="120", **env)
            served.wait_healthy(timeout_s=240)
            _cli("users", "create", "admin@example.com", env=served.env)
            key = _cli("keys", "create", "--user", "admin@example.com", env=served.env).strip()
            yield Sealed(served, cluster, gh, data, key, values)
        finally:
            if served is not None and served.proc.poll() is None:
                served.stop()
            cluster.stop()


def _leaks(sealed: Sealed) -> list[str]:
    """``<file>: <secret name>`` for every file under the Ray cluster's directory (and the
    output of `codesearch serve`) that holds a secret's value."""
    return files_holding(Path(sealed.cluster.temp_dir), sealed.secrets, also=[sealed.served.log_path])


def test_every_secret_reaches_the_processes_that_use_it(sealed):
    served = sealed.served
    base = served.base
    # the server secret: the CLI's key is accepted (and no process made a .secret of its own)
    assert httpx.get(f"{base}/api/repos", timeout=30).status_code == 401
    r = httpx.get(f"{base}/api/repos", headers=sealed.auth, timeout=30)
    assert r.status_code == 200, r.text
    assert not (sealed.data / ".secret").exists()
    # the token of environmentOverrides: the private repositories were synced and indexed
    assert sorted(repo["repoName"].split("/", 1)[1] for repo in r.json()) == ["acme/gadgets", "acme/widgets"], r.text
    r = httpx.post(f"{base}/api/search", json={"query": "acme", "matches": 10}, headers=sealed.auth, timeout=30)
    assert r.status_code == 200 and len(r.json()["files"]) == 2, r.text
    # the webhook secrets, each for its connection
    cases = [  # connection, repository, secret it is signed with, status
        (OWN, "acme/widgets", sealed.secrets["CODESEARCH_WEBHOOK_SECRET_SEALED_OWN"], 202),
        (SHARED, "acme/gadgets", sealed.secrets["CODESEARCH_WEBHOOK_SECRET"], 202),
        (OWN, "acme/widgets", sealed.secrets["CODESEARCH_WEBHOOK_SECRET"], 401),  # its own secret wins
        (SHARED, "acme/gadgets", "not-the-secret", 401),
    ]
    for connection, repo, secret, status in cases:
        body = _payload(sealed.gh, repo, "0" * 40, "1" * 40)
        r = httpx.post(f"{base}/api/webhooks/{connection}", content=body, headers=_signed(body, secret), timeout=30)
        assert r.status_code == status, (connection, secret[:10], r.text)


def test_no_secret_in_rays_logs(sealed):
    leaks = _leaks(sealed)
    assert leaks == [], "\n".join(leaks)


#: What Ray's dashboard tells about the service's processes (their ``runtime_env`` among it).
DASHBOARD_VIEWS = ("/api/v0/actors?detail=1&limit=10000", "/api/v0/tasks?detail=1&limit=10000",
                   "/api/v0/workers?detail=1&limit=10000", "/api/serve/applications/", "/api/jobs/")


def test_no_secret_shown_by_rays_dashboard_nor_serves_cli(sealed):
    shown = []
    for path in DASHBOARD_VIEWS:
        r = httpx.get(f"{sealed.cluster.dashboard}{path}", timeout=60)
        assert r.status_code == 200, (path, r.text[:300])
        shown += [f"{path}: {name}" for name, value in sealed.secrets.items() if value in r.text]
    for command in ("status", "config"):
        out = sealed.cluster.serve(command)
        assert out.returncode == 0, out.stdout + out.stderr
        shown += [f"serve {command}: {name}" for name, value in sealed.secrets.items() if value in out.stdout + out.stderr]
    assert shown == [], "\n".join(shown)


def test_no_secret_in_rays_logs_after_the_service_stopped(sealed):
    code = sealed.served.stop()
    assert code == 0, sealed.served.log()[-3000:]
    leaks = _leaks(sealed)
    assert leaks == [], "\n".join(leaks)


def test_a_sealed_env_never_shows_its_values():
    """What a log line, an error or a traceback would print of the forwarded environment, or of
    the spec that carries it, names the variables only."""
    from codesearch.sealed_env import SealedEnv  # here: the HTTP tests above also run on code without it
    from codesearch.serving.bootstrap import ServiceSpec

    values = {"SOURCEBOT_ENCRYPTION_KEY": "s3cr3t-key", "DATABASE_URL": "postgresql://cs:s3cr3t-pw@db/cs"}
    env = SealedEnv.of(values)
    spec = ServiceSpec(config_path="/c.json", data_dir="/d", database_url=values["DATABASE_URL"], env=env)
    cases = [  # what is printed, what it must say
        (repr(env), "SealedEnv(2 variables: DATABASE_URL, SOURCEBOT_ENCRYPTION_KEY)"),
        (str(env), "SealedEnv(2 variables: DATABASE_URL, SOURCEBOT_ENCRYPTION_KEY)"),
        (f"{env!s} {env!r}", "SealedEnv(2 variables: DATABASE_URL, SOURCEBOT_ENCRYPTION_KEY)"),
        (repr(SealedEnv.of({"AUTH_URL": "https://s3cr3t"})), "SealedEnv(1 variable: AUTH_URL)"),
        (repr(SealedEnv()), "SealedEnv(no variables)"),
        (repr(spec), "env=SealedEnv(2 variables: DATABASE_URL, SOURCEBOT_ENCRYPTION_KEY)"),
        (str(RuntimeError(spec)), "env=SealedEnv(2 variables"),
    ]
    for printed, says in cases:
        assert says in printed and "s3cr3t" not in printed, printed
    # where it is applied: over what the node set; and it crosses a process boundary whole
    environ = {"DATABASE_URL": "sqlite:////node/own.db", "HOME": "/root"}
    env.apply(environ)
    assert environ == {**values, "HOME": "/root"}
    assert pickle.loads(pickle.dumps(env)) == env and len(env) == 2 and not SealedEnv()
