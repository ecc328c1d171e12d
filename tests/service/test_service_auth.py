"""Authentication and the permission hooks (codesearch.service.auth), in process: no Ray, no Serve.

The same rules over real HTTP on Serve are in test_service_api.py; here are the cases that need
another environment or a restricted `visible_repos`, which a running service cannot switch.
"""

from __future__ import annotations

import warnings

import pytest

from codesearch import permissions
from codesearch.service import auth
from codesearch.serving.api import build_app
from codesearch.service.auth import UNRESTRICTED, Authenticator, Identity, NotAuthenticated
from codesearch.store import Store
from tests.conftest import LOCAL

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


@pytest.fixture()
def store(tmp_path):
    s = Store.open(tmp_path / "data")
    s.upsert_connection("c", "github", {"type": "github"})
    s.upsert_repos("c", [dict(name=f"github.com/o/{n}", code_host_type="github", clone_url=f"https://github.com/o/{n}.git")
                         for n in ("a", "b", "c")])
    yield s
    s.close()


@pytest.mark.parametrize("environ,public,want", [
    ({}, False, False),
    ({"FORCE_ENABLE_ANONYMOUS_ACCESS": "true"}, False, True),
    ({"FORCE_ENABLE_ANONYMOUS_ACCESS": " TRUE "}, False, True),
    ({"FORCE_ENABLE_ANONYMOUS_ACCESS": "false"}, False, False),
    ({"FORCE_ENABLE_ANONYMOUS_ACCESS": "1"}, False, False),
    ({"FORCE_ENABLE_ANONYMOUS_ACCESS": ""}, True, True),  # the deprecated settings.enablePublicAccess
])
def test_anonymous_access_switch(environ, public, want):
    assert auth.anonymous_access_enabled(environ, public) is want


def test_keys_from_headers():
    assert auth.keys_from_headers({"authorization": "Bearer k1", "x-sourcebot-api-key": "k2"}) == ["k1", "k2"]
    assert auth.keys_from_headers({"authorization": "Bearer k1", "x-sourcebot-api-key": "k1"}) == ["k1"]
    assert auth.keys_from_headers({"authorization": "Basic k1"}) == []
    assert auth.keys_from_headers({"authorization": "k1"}) == []
    assert auth.keys_from_headers({"x-sourcebot-api-key": "x" * 300}) == []
    assert auth.keys_from_headers({}) == []


def test_authenticator(store):
    owner = store.create_user("o@example.com")
    kid, key = store.create_api_key(owner.id, "k")
    closed = Authenticator(lambda: store, anonymous=False)
    open_ = Authenticator(lambda: store, anonymous=True)
    ident = closed.identify({"authorization": f"Bearer {key}"})
    assert ident.user_id == owner.id and ident.role == "OWNER" and not ident.anonymous
    assert ident.via == closed.identify_mcp({"x-sourcebot-api-key": key}).via == "apikey"  # what usage counts
    assert closed.identify({"x-sourcebot-api-key": key}).user_id == owner.id
    for headers in ({}, {"authorization": "Bearer cs_nope"}, {"x-sourcebot-api-key": "nope"}):
        with pytest.raises(NotAuthenticated):
            closed.identify(headers)
        assert open_.identify(headers) is UNRESTRICTED
    store.revoke_api_key(owner.id, kid)
    with pytest.raises(NotAuthenticated):
        closed.identify({"authorization": f"Bearer {key}"})
    assert open_.identify({"authorization": f"Bearer {key}"}).anonymous
    # no state database: no key can be checked
    with pytest.raises(NotAuthenticated):
        Authenticator(lambda: None, anonymous=False).identify({"authorization": f"Bearer {key}"})


@pytest.mark.parametrize("kwargs,status", [
    ({"environ": {}}, 401),
    ({"environ": {"FORCE_ENABLE_ANONYMOUS_ACCESS": "true"}}, 200),
    ({"environ": {}, "enable_public_access": True}, 200),
    ({"environ": {"FORCE_ENABLE_ANONYMOUS_ACCESS": "true"}, "anonymous_access": False}, 401),
])
def test_build_app_reads_the_switch_when_built(store, kwargs, status):
    client = TestClient(build_app(lambda: None, get_store=lambda: store, **kwargs), base_url=LOCAL)
    assert client.get("/api/repos").status_code == status
    assert client.get("/api/health").status_code == 200


def test_every_repo_access_goes_through_visible_repos(store, monkeypatch, tmp_path):
    b = store.find_repo("github.com/o/b")
    monkeypatch.setattr(permissions, "visible_repos", lambda identity: frozenset({b.id}))
    store.enqueue_index_job(store.find_repo("github.com/o/a").id)
    store.enqueue_index_job(b.id)
    client = TestClient(build_app(lambda: None, get_store=lambda: store, data_dir=str(tmp_path / "data"),
                                  anonymous_access=True), base_url=LOCAL)
    r = client.get("/api/repos")
    assert [x["repoName"] for x in r.json()] == ["github.com/o/b"] and r.headers["x-total-count"] == "1"
    assert [x["repoId"] for x in client.get("/api/repos/status").json()] == [b.id]
    assert client.get("/api/connections/status").json()["connections"][0]["repoCount"] == 1
    conn = store.connections_for_repo(b.id)
    assert [c["name"] for c in client.get("/api/connections").json()] == conn
    assert [j["repoId"] for j in client.get("/api/jobs").json()] == [b.id]
    r = client.get("/api/source", params={"repo": "github.com/o/a", "path": "x"})
    assert r.status_code == 404 and r.json()["errorCode"] == "REPOSITORY_NOT_FOUND"
    assert auth.can_see(UNRESTRICTED, b) and not auth.can_see(UNRESTRICTED, store.find_repo("github.com/o/a"))


def test_filter_search_response(monkeypatch):
    def file(repo_id, n):
        return {"repositoryId": repo_id, "fileName": {"text": "f", "matchRanges": []},
                "chunks": [{"matchRanges": [{}] * n}]}

    resp = {"files": [file(1, 2), file(2, 3)], "repositoryInfo": [{"id": 1}, {"id": 2}],
            "stats": {"actualMatchCount": 5, "totalMatchCount": 9, "fileCount": 2}, "isSearchExhaustive": False}
    assert auth.filter_search_response(UNRESTRICTED, resp) is resp  # today: everything is visible
    monkeypatch.setattr(permissions, "visible_repos", lambda identity: frozenset({2}))
    out = auth.filter_search_response(Identity(None), resp)
    assert [f["repositoryId"] for f in out["files"]] == [2] and out["repositoryInfo"] == [{"id": 2}]
    assert out["stats"] == {"actualMatchCount": 3, "totalMatchCount": 4, "fileCount": 1}
