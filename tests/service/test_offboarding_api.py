"""Offboarding and scoped access tokens over HTTP (docs/http-api.md#members, #scoped-access-tokens).

Two API applications over one data directory, each with its own `Store` (as two replicas open
their own), served over real HTTP on 127.0.0.1. Removing a member through one must end every
credential of theirs on both within 5 seconds; the ``/api/ee/...`` routes answer with
Sourcebot's shapes and codes; a scoped token sees only its repositories, only where repositories
are read, until it expires or is revoked.
"""

from __future__ import annotations

import contextlib
import time

import httpx
import pytest

from codesearch.serving.api import build_app
from codesearch.store import Store
from tests.asgiserver import serving

ENV = {"SOURCEBOT_ENCRYPTION_KEY": "offboarding-test-secret-0123456789abcdef"}
REPOS = ["github.com/acme/alpha", "github.com/acme/beta", "github.com/acme/gamma"]
USER_KEYS = {"id", "name", "email", "role", "suspendedAt", "createdAt", "updatedAt", "lastActivityAt"}


class _Searcher:
    def search(self, *a, **k):
        raise AssertionError("no search here")


def _oauth_token(store: Store, user_id: int) -> str:
    client, _ = store.create_oauth_client("test client", ["http://127.0.0.1:1/cb"], {}, with_secret=False)
    code = store.create_oauth_code(client_id=client.id, user_id=user_id, redirect_uri="http://127.0.0.1:1/cb",
                                   code_challenge="x", scope="mcp", resource=None, ttl_seconds=60)
    return store.redeem_oauth_code(code, client_id=client.id, check=lambda _c: None, access_ttl=600,
                                   refresh_ttl=None).tokens.access_token


def _mcp(base: str, token: str, method: str = "initialize", params: dict | None = None) -> httpx.Response:
    params = params if params is not None else {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return httpx.post(base + "/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      timeout=30, headers={"Accept": "application/json, text/event-stream",
                                           "Authorization": f"Bearer {token}"})


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("offboarding"))
    stores = [Store.open(data_dir, environ=ENV) for _ in range(2)]
    store = stores[0]
    owner = store.create_user("owner@example.com", "Owner")
    _, owner_key = store.create_api_key(owner.id, "admin")
    store.upsert_connection("acme", "github", {"type": "github", "orgs": ["acme"]})
    ids = store.upsert_repos("acme", [dict(name=n, code_host_type="github", clone_url=f"https://{n}.git")
                                      for n in REPOS]).ids
    with contextlib.ExitStack() as stack:
        bases = [stack.enter_context(serving(build_app(lambda: _Searcher(), get_store=lambda s=s: s,
                                                       anonymous_access=False, environ={}), lifespan="on"))
                 for s in stores]
        yield {"store": store, "bases": bases, "owner": owner, "owner_key": owner_key, "ids": ids}
    for s in stores:
        s.close()


def _as(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


def _member(world, email: str):
    store = world["store"]
    user = store.create_user(email)
    return user, store.create_api_key(user.id, "laptop")[1]


# ----------------------------------------------------------------------------- removal, two replicas

@pytest.mark.slow  # 8 credential probes before and after, on a loaded 2-core machine: about 5 s
def test_removing_a_member_ends_their_sessions_keys_and_tokens_on_both_replicas_within_5_s(world):
    store, (a, b) = world["store"], world["bases"]
    user, key = _member(world, "leaver@example.com")
    cookie = store.create_web_session(user.id, ttl_seconds=600)[0]
    oauth = _oauth_token(store, user.id)
    minted = httpx.post(a + "/api/ee/scoped_access_token", headers=_as(key),
                        json={"repoIds": [world["ids"][REPOS[0]]]})
    assert minted.status_code == 201, minted.text
    scoped = minted.json()["token"]
    probes = {  # credential: a request that needs it
        "API key": lambda base: httpx.get(base + "/api/repos", headers=_as(key)),
        "web session": lambda base: httpx.get(base + "/api/repos", cookies={"codesearch_session": cookie}),
        "OAuth access token": lambda base: _mcp(base, oauth),
        "scoped access token": lambda base: httpx.get(base + "/api/repos", headers=_as(scoped)),
    }
    for base in (a, b):
        for kind, probe in probes.items():
            assert probe(base).status_code == 200, (kind, base)

    started = time.monotonic()
    gone = httpx.delete(a + "/api/ee/user", params={"userId": str(user.id)}, headers=_as(world["owner_key"]))
    assert gone.status_code == 200 and gone.json() == {"success": True, "message": "User deleted successfully"}
    alive = {(kind, base) for kind in probes for base in (a, b)}
    while alive and time.monotonic() - started < 5.0:
        alive = {(kind, base) for kind, base in alive if probes[kind](base).status_code != 401}
    assert not alive, f"still accepted 5 s after the removal: {sorted(alive)}"
    assert httpx.get(b + "/api/ee/user", params={"userId": str(user.id)},
                     headers=_as(world["owner_key"])).status_code == 404
    deadline = time.monotonic() + 5  # the audit log is written by a background thread
    while not world["store"].list_audit_events(action="member.remove")[1]:
        assert time.monotonic() < deadline, "the removal was not audited"
        time.sleep(0.05)
    assert world["store"].list_audit_events(action="member.remove")[0][0].target == "leaver@example.com"


# ----------------------------------------------------------------------------- /api/ee/users and /user

def test_owners_list_and_read_members_in_sourcebots_shape(world):
    a = world["bases"][0]
    user, _ = _member(world, "reader@example.com")
    listed = httpx.get(a + "/api/ee/users", headers=_as(world["owner_key"]))
    assert listed.status_code == 200
    by_email = {u["email"]: u for u in listed.json()}
    assert set(by_email["reader@example.com"]) == USER_KEYS
    assert by_email["owner@example.com"]["role"] == "OWNER"
    assert by_email["owner@example.com"]["lastActivityAt"] is not None  # the owner's key was used
    one = httpx.get(a + "/api/ee/user", params={"userId": str(user.id)}, headers=_as(world["owner_key"])).json()
    assert one == by_email["reader@example.com"] and one["id"] == str(user.id) and one["suspendedAt"] is None
    actions = [e.action for e in world["store"].list_audit_events(per_page=50)[0]] if _flushed(world) else []
    assert {"user.list", "user.read"} <= set(actions)


def _flushed(world) -> bool:
    """Wait (bounded) until the audit events of this module's requests are stored."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if world["store"].list_audit_events(action="user.read")[1]:
            return True
        time.sleep(0.05)
    return False


MEMBER_API_CASES = [
    # (case, method, params, who, status, errorCode)
    ("a member may not list", "GET", "/api/ee/users", {}, "member", 403, "INSUFFICIENT_PERMISSIONS"),
    ("a member may not read", "GET", "/api/ee/user", {"userId": "1"}, "member", 403, "INSUFFICIENT_PERMISSIONS"),
    ("a member may not remove", "DELETE", "/api/ee/user", {"userId": "1"}, "member", 403,
     "INSUFFICIENT_PERMISSIONS"),
    ("no credential", "GET", "/api/ee/users", {}, None, 401, "NOT_AUTHENTICATED"),
    ("userId missing (read)", "GET", "/api/ee/user", {}, "owner", 400, "MISSING_REQUIRED_QUERY_PARAMETER"),
    ("userId missing (remove)", "DELETE", "/api/ee/user", {}, "owner", 400, "MISSING_REQUIRED_QUERY_PARAMETER"),
    ("unknown user (read)", "GET", "/api/ee/user", {"userId": "999999"}, "owner", 404, "NOT_FOUND"),
    ("unknown user (remove)", "DELETE", "/api/ee/user", {"userId": "999999"}, "owner", 404, "NOT_FOUND"),
    ("not an id", "GET", "/api/ee/user", {"userId": "cm0abc"}, "owner", 404, "NOT_FOUND"),
    ("the last owner", "DELETE", "/api/ee/user", {"userId": "1"}, "owner", 403, "LAST_OWNER_CANNOT_BE_REMOVED"),
]


@pytest.mark.parametrize("case,method,path,params,who,status,code", MEMBER_API_CASES,
                         ids=[c[0] for c in MEMBER_API_CASES])
def test_member_api_refusals(world, case, method, path, params, who, status, code):
    _, member_key = _member(world, f"m-{abs(hash(case))}@example.com")
    headers = {"owner": _as(world["owner_key"]), "member": _as(member_key), None: {}}[who]
    r = httpx.request(method, world["bases"][1] + path, params=params, headers=headers)
    assert (r.status_code, r.json()["errorCode"]) == (status, code), r.text
    assert r.json()["statusCode"] == status and r.json()["message"]
    assert world["store"].get_user(1).email == "owner@example.com"  # never removed


# ----------------------------------------------------------------------------- scoped access tokens

def test_a_scoped_token_sees_only_its_repositories_until_revoked(world):
    a, b = world["bases"]
    ids = world["ids"]
    _, key = _member(world, "ci@example.com")
    r = httpx.post(a + "/api/ee/scoped_access_token", headers=_as(key),
                   json={"repoIds": [ids[REPOS[1]], ids[REPOS[0]], ids[REPOS[1]]]})
    assert r.status_code == 201
    body = r.json()
    assert set(body) == {"id", "token", "createdAt", "expiresAt", "repoIds"}
    assert body["token"].startswith("sbst_") and body["repoIds"] == [ids[REPOS[1]], ids[REPOS[0]]]
    lifetime = _parse(body["expiresAt"]) - _parse(body["createdAt"])
    assert lifetime == 3600
    token = body["token"]
    seen = httpx.get(b + "/api/repos", headers=_as(token))
    assert sorted(x["repoName"] for x in seen.json()) == sorted(REPOS[:2])
    tools = _mcp(b, token, "tools/call", {"name": "list_repos", "arguments": {}})
    assert tools.status_code == 200 and REPOS[0] in tools.text and REPOS[2] not in tools.text
    # only repository reads take it: owner routes, chats, insights, minting more do not
    for method, path in [("GET", "/api/ee/users"), ("GET", "/api/insights"), ("GET", "/api/audit"),
                         ("POST", "/api/ee/scoped_access_token")]:
        refused = httpx.request(method, b + path, headers=_as(token), json={"repoIds": [1]})
        assert refused.status_code == 401 and "repository reads" in refused.json()["message"], path
    # someone else cannot revoke it; its maker can, once
    _, other = _member(world, "other@example.com")
    not_theirs = httpx.delete(a + f"/api/ee/scoped_access_token/{body['id']}", headers=_as(other))
    assert (not_theirs.status_code, not_theirs.json()["errorCode"]) == (404, "SCOPED_ACCESS_TOKEN_NOT_FOUND")
    revoked = httpx.delete(a + f"/api/ee/scoped_access_token/{body['id']}", headers=_as(key))
    assert revoked.status_code == 204 and revoked.content == b""
    assert httpx.get(b + "/api/repos", headers=_as(token)).status_code == 401
    again = httpx.delete(a + f"/api/ee/scoped_access_token/{body['id']}", headers=_as(key))
    assert again.status_code == 404


def _parse(s: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def test_an_owners_scoped_token_is_not_an_owner(world):
    a = world["bases"][0]
    r = httpx.post(a + "/api/ee/scoped_access_token", headers=_as(world["owner_key"]),
                   json={"repoIds": [world["ids"][REPOS[2]]]})
    token = r.json()["token"]
    assert httpx.get(a + "/api/repos", headers=_as(token)).status_code == 200
    assert httpx.get(a + "/api/ee/users", headers=_as(token)).status_code == 401
    assert httpx.get(a + "/api/permission_sync", headers=_as(token)).status_code == 401


def test_an_expired_scoped_token_is_refused(world):
    store, a = world["store"], world["bases"][0]
    token, value = store.create_scoped_access_token(world["owner"].id, [world["ids"][REPOS[0]]], ttl_seconds=0.2)
    assert store.verify_scoped_access_token(value) is not None
    deadline = time.monotonic() + 5
    while httpx.get(a + "/api/repos", headers=_as(value)).status_code != 401:
        assert time.monotonic() < deadline, "the token outlived its expiry"
        time.sleep(0.05)
    # asking for longer than an hour gives an hour
    long, _ = store.create_scoped_access_token(world["owner"].id, [world["ids"][REPOS[0]]], ttl_seconds=86400)
    assert (long.expires_at - long.created_at).total_seconds() == 3600


SCOPED_CASES = [
    # (case, body, how, status, errorCode)
    ("with a web session", {"repoIds": ["R0"]}, "session", 403, "INSUFFICIENT_PERMISSIONS"),
    ("an unknown repository", {"repoIds": ["R0", 999999]}, "key", 400, "INVALID_REPOSITORY_SCOPE"),
    ("a negative id", {"repoIds": [-1]}, "key", 400, "INVALID_REPOSITORY_SCOPE"),
    ("no repositories", {"repoIds": []}, "key", 400, "INVALID_REQUEST_BODY"),
    ("ids as strings", {"repoIds": ["1"]}, "key", 400, "INVALID_REQUEST_BODY"),
    ("an extra property", {"repoIds": ["R0"], "expiresIn": 60}, "key", 400, "INVALID_REQUEST_BODY"),
    ("no body field", {}, "key", 400, "INVALID_REQUEST_BODY"),
    ("too many ids", {"repoIds": list(range(1, 1002))}, "key", 400, "INVALID_REQUEST_BODY"),
]


@pytest.mark.parametrize("case,body,how,status,code", SCOPED_CASES, ids=[c[0] for c in SCOPED_CASES])
def test_scoped_token_refusals(world, case, body, how, status, code):
    store, a = world["store"], world["bases"][0]
    user, key = _member(world, f"s-{abs(hash(case))}@example.com")
    if "repoIds" in body:
        body = {**body, "repoIds": [world["ids"][REPOS[0]] if i == "R0" else i for i in body["repoIds"]]}
    if how == "session":
        cookie, session = store.create_web_session(user.id, ttl_seconds=600)
        r = httpx.post(a + "/api/ee/scoped_access_token", json=body, cookies={"codesearch_session": cookie},
                       headers={"X-CSRF-Token": session.csrf_token})
    else:
        r = httpx.post(a + "/api/ee/scoped_access_token", json=body, headers=_as(key))
    assert (r.status_code, r.json()["errorCode"]) == (status, code), r.text
    assert r.json()["message"]


# ----------------------------------------------------------------------------- a scoped token's reads

@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """Two indexed repositories with mirrors, both holding "needle", behind one app."""
    import os

    from codesearch.git.mirror import MirrorStore
    from codesearch.index.builder import index_source
    from codesearch.index.sources import GitSource, RepoInfo
    from codesearch.search.engine import Searcher
    from codesearch.store import INDEXED
    from tests.conftest import test_settings as index_settings
    from tests.githttp import make_bare_repo

    base = tmp_path_factory.mktemp("scoped")
    data_dir, index_dir = str(base / "data"), str(base / "index")
    store = Store.open(data_dir, environ=ENV)
    owner = store.create_user("owner@example.com")
    key = store.create_api_key(owner.id, "ci")[1]
    names = ["git.example.com/acme/alpha", "git.example.com/acme/beta"]
    store.upsert_connection("acme", "git", {"type": "git", "url": "https://git.example.com/acme"})
    ids = store.upsert_repos("acme", [dict(name=n, code_host_type="genericGitHost", clone_url=f"https://{n}.git",
                                           default_branch="main") for n in names]).ids
    mirrors = MirrorStore(os.path.join(data_dir, "repos"))
    for n in names:
        bare = make_bare_repo(mirrors.root, str(ids[n]), {"src/needle.txt": f"a needle in {n}\n"})
        index_source(GitSource(bare, repo=RepoInfo(name=n, id=ids[n]), branch_globs=["main"]), index_dir,
                     index_settings())
        store.update_repo_index_status(ids[n], INDEXED)
    searcher = Searcher(index_dir)
    app = build_app(lambda: searcher, get_store=lambda: store, data_dir=data_dir, anonymous_access=False, environ={})
    with serving(app, lifespan="on") as base_url:
        token = httpx.post(base_url + "/api/ee/scoped_access_token", headers=_as(key),
                           json={"repoIds": [ids[names[0]]]}).json()["token"]
        yield {"url": base_url, "key": key, "token": token, "names": names}
    searcher.close()
    store.close()


def _reads(world, credential: str) -> dict:
    """What each repository read shows `credential` of the two repositories."""
    url, (alpha, beta) = world["url"], world["names"]
    h = _as(credential)
    search = httpx.post(url + "/api/search", headers=h, json={"query": "needle", "matches": 10}).json()
    stream = httpx.post(url + "/api/stream_search", headers=h, json={"query": "needle", "matches": 10}).text
    return {
        "search": sorted({f["repository"] for f in search["files"]}),
        "stream_search": sorted(n for n in (alpha, beta) if n in stream),
        "source": sorted(n for n in (alpha, beta) if httpx.get(url + "/api/source", headers=h, params={
            "repo": n, "path": "src/needle.txt"}).status_code == 200),
        "tree": sorted(n for n in (alpha, beta) if httpx.post(url + "/api/tree", headers=h, json={
            "repoName": n, "revisionName": "main", "paths": [""]}).status_code == 200),
        "commits": sorted(n for n in (alpha, beta) if httpx.get(url + "/api/commits", headers=h, params={
            "repo": n}).status_code == 200),
    }


@pytest.mark.slow  # over 1 s of the fast lane: `make test` runs it (tests/conftest.py, SLOW_MODULES)
def test_every_repository_read_of_a_scoped_token_sees_only_its_repositories(indexed):
    alpha, beta = indexed["names"]
    assert _reads(indexed, indexed["key"]) == {k: [alpha, beta] for k in
                                               ("search", "stream_search", "source", "tree", "commits")}
    assert _reads(indexed, indexed["token"]) == {k: [alpha] for k in
                                                 ("search", "stream_search", "source", "tree", "commits")}
