"""Push webhooks (`codesearch.service.routes.webhooks`) over real HTTP on 127.0.0.1.

The API app (uvicorn, anonymous access off: no API key is sent) with a real store holding one
connection of each host type that sends webhooks. Push payloads are built here in each host's
documented shape and signed as that host signs; a verified push queues a forced index job of
exactly the pushed repository, anything else is refused with the error shape of
docs/http-api.md#errors and queues nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import httpx
import pytest

from codesearch.serving.api import build_app
from codesearch.service.routes.webhooks import secret_for
from codesearch.store import Store
from tests.asgiserver import serving
from tests.conftest import LOCAL

SECRET = "s3cr3t-for-tests"
GITLAB_SECRET = "gitlab-only-secret"

REPOS = {  # connection → (type, repository names)
    "gh": ("github", ["github.com/acme/api", "github.com/acme/web"]),
    "gt": ("gitea", ["gitea.example.com/ops/deploy"]),
    "gl": ("gitlab", ["gitlab.example.com/group/sub/tool"]),
    "bb": ("bitbucket", ["bitbucket.org/team/app"]),
    "plain": ("git", ["git.example.com/x/y"]),
}


def _hmac(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _github(repo="acme/api", secret=SECRET, event="push"):
    body = json.dumps({"ref": "refs/heads/main", "after": "0" * 40,
                       "repository": {"full_name": repo, "html_url": f"https://github.com/{repo}",
                                      "clone_url": f"https://github.com/{repo}.git"}}).encode()
    return body, {"X-GitHub-Event": event, "X-Hub-Signature-256": "sha256=" + _hmac(secret, body),
                  "Content-Type": "application/json"}


def _gitea(secret=SECRET):
    body = json.dumps({"ref": "refs/heads/main", "repository": {
        "full_name": "ops/deploy", "html_url": "https://gitea.example.com/ops/deploy"}}).encode()
    return body, {"X-Gitea-Event": "push", "X-Gitea-Signature": _hmac(secret, body), "Content-Type": "application/json"}


def _gitlab(token=GITLAB_SECRET):
    body = json.dumps({"object_kind": "push", "ref": "refs/heads/main", "project": {
        "path_with_namespace": "group/sub/tool", "web_url": "https://gitlab.example.com/group/sub/tool",
        "git_http_url": "https://gitlab.example.com/group/sub/tool.git"}}).encode()
    return body, {"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": token, "Content-Type": "application/json"}


def _bitbucket(secret=SECRET):
    body = json.dumps({"push": {"changes": []}, "repository": {
        "full_name": "team/app", "links": {"html": {"href": "https://bitbucket.org/team/app"}}}}).encode()
    return body, {"X-Event-Key": "repo:push", "X-Hub-Signature": "sha256=" + _hmac(secret, body),
                  "Content-Type": "application/json"}


@pytest.fixture()
def service(tmp_path):
    store = Store.open(tmp_path / "data")
    for conn, (kind, names) in REPOS.items():
        store.upsert_connection(conn, kind, {"type": kind})
        store.upsert_repos(conn, [dict(name=n, code_host_type=kind, clone_url=f"https://{n}.git", web_url=f"https://{n}")
                                  for n in names])
    environ = {"CODESEARCH_WEBHOOK_SECRET": SECRET, "CODESEARCH_WEBHOOK_SECRET_GL": GITLAB_SECRET}
    app = build_app(lambda: None, get_store=lambda: store, anonymous_access=False, environ=environ)
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        yield client, store
    store.close()


def _pending(store) -> set[str]:
    return {store.get_repo(j.repo_id).name for j in store.list_jobs(kind="index", state="PENDING")}


@pytest.mark.parametrize("conn, signed, repo", [
    ("gh", _github(), "github.com/acme/api"),
    ("gt", _gitea(), "gitea.example.com/ops/deploy"),
    ("gl", _gitlab(), "gitlab.example.com/group/sub/tool"),
    ("bb", _bitbucket(), "bitbucket.org/team/app"),
])
def test_a_signed_push_queues_an_index_job_of_that_repository_only(service, conn, signed, repo):
    client, store = service
    body, headers = signed
    r = client.post(f"/api/webhooks/{conn}", content=body, headers=headers)
    assert r.status_code == 202, r.text
    assert [q["repository"] for q in r.json()["queued"]] == [repo]
    assert _pending(store) == {repo}


@pytest.mark.parametrize("conn, signed, status, code", [
    ("gh", _github(secret="wrong"), 401, "INVALID_WEBHOOK_SIGNATURE"),
    ("gh", (_github()[0], {"X-GitHub-Event": "push"}), 401, "INVALID_WEBHOOK_SIGNATURE"),  # unsigned
    ("gh", (_github()[0].replace(b"acme/api", b"acme/web"), _github()[1]), 401, "INVALID_WEBHOOK_SIGNATURE"),  # body changed
    ("gt", _gitea(secret="wrong"), 401, "INVALID_WEBHOOK_SIGNATURE"),
    ("gl", _gitlab(token=SECRET), 401, "INVALID_WEBHOOK_SIGNATURE"),  # gl has a secret of its own
    ("bb", (_bitbucket()[0], {**_bitbucket()[1], "X-Hub-Signature": "sha1=" + "0" * 40}), 401, "INVALID_WEBHOOK_SIGNATURE"),
    ("nope", _github(), 404, "CONNECTION_NOT_FOUND"),
    ("plain", _github(), 400, "WEBHOOK_NOT_SUPPORTED"),
])
def test_anything_not_signed_by_the_connections_secret_is_refused(service, conn, signed, status, code):
    client, store = service
    body, headers = signed
    r = client.post(f"/api/webhooks/{conn}", content=body, headers=headers)
    assert (r.status_code, r.json()["errorCode"]) == (status, code), r.text
    assert r.json()["statusCode"] == status and r.json()["message"]
    assert _pending(store) == set()


def test_pings_other_events_and_unknown_repositories_queue_nothing(service):
    client, store = service
    for body, headers in (_github(event="ping"), _github(event="issues"), _github(repo="acme/elsewhere")):
        r = client.post("/api/webhooks/gh", content=body, headers=headers)
        assert r.status_code == 200 and r.json()["queued"] == [], r.text
    body = b"not json"
    r = client.post("/api/webhooks/gh", content=body,
                    headers={"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + _hmac(SECRET, body)})
    assert (r.status_code, r.json()["errorCode"]) == (400, "INVALID_REQUEST_BODY")
    assert _pending(store) == set()


def test_without_a_secret_webhooks_are_off(tmp_path):
    store = Store.open(tmp_path / "data")
    store.upsert_connection("gh", "github", {"type": "github"})
    from fastapi.testclient import TestClient

    client = TestClient(build_app(lambda: None, get_store=lambda: store, anonymous_access=False, environ={}),
                        base_url=LOCAL)
    body, headers = _github()
    r = client.post("/api/webhooks/gh", content=body, headers=headers)
    assert (r.status_code, r.json()["errorCode"]) == (403, "WEBHOOK_NOT_ENABLED")
    assert "CODESEARCH_WEBHOOK_SECRET" in r.json()["message"]
    store.close()


@pytest.mark.parametrize("name, environ, want", [
    ("gh", {"CODESEARCH_WEBHOOK_SECRET": "all"}, "all"),
    ("gh", {"CODESEARCH_WEBHOOK_SECRET": "all", "CODESEARCH_WEBHOOK_SECRET_GH": "own"}, "own"),
    ("my-gitlab.prod", {"CODESEARCH_WEBHOOK_SECRET_MY_GITLAB_PROD": "own"}, "own"),
    ("gh", {}, None),
    ("gh", {"CODESEARCH_WEBHOOK_SECRET": ""}, None),
])
def test_secret_names(name, environ, want):
    assert secret_for(name, environ) == want
