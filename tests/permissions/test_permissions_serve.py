"""Permission syncing end to end (issue 14): `codesearch serve` as a real process (its own Ray and
Serve) with one GitHub connection and one GitHub identity provider, both a local fake of a GitHub
Enterprise host (`tests.fakehosts.github`: REST API, OAuth app, git smart HTTP), all on 127.0.0.1.

Three repositories: ``acme/public``, ``acme/secret`` (private, collaborator bob) and
``acme/vault`` (private, collaborator carol). ``PERMISSION_SYNC_ENABLED`` comes from the config's
`environmentOverrides`; both sync intervals are two seconds, so the test sees syncs happen.

* anonymous visitors see the public repository only;
* bob signs in with GitHub (single sign-on: authorize, code, PKCE, token) and becomes the first
  user (OWNER); the sign-in asks for a user-driven sync, and bob's session then lists the
  public repository and acme/secret, never acme/vault; a search finds only what he may read;
* carol signs in and sees acme/vault, not acme/secret;
* the host takes bob's access away: after the next syncs, acme/secret is gone from his session.
"""

from __future__ import annotations

import json
import re
import time

import httpx

from tests.conftest import free_port
from tests.fakehosts.github import FakeGitHub
from tests.githttp import GitHttpServer
from tests.service.test_serve_cli import ONE_WORKER_EACH, Served

GH_TOKEN = "ghp_permissions00000000000000000000000000"
APP_ID, APP_SECRET = "Iv1.e2e-app", "e2e-app-secret-value"
DEADLINE_S = 60.0


def _csrf(page: httpx.Response) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


def _sign_in(base: str, gh: FakeGitHub, login: str) -> httpx.Client:
    """A browser-like client that signed in as `login` through the GitHub provider."""
    gh.oauth_login = login
    client = httpx.Client(base_url=base, timeout=30, follow_redirects=True)
    page = client.get("/login")
    assert page.status_code == 200 and "/login/sso/github" in page.text, page.text[:2000]
    done = client.post("/login/sso/github", data={"csrf_token": _csrf(page), "next": "/"})
    assert done.status_code == 200, done.text[:2000]
    assert client.cookies.get("codesearch_session"), "no session after the sign-in"
    return client


def _repos(client: httpx.Client) -> set[str]:
    r = client.get("/api/repos", params={"perPage": 100})
    assert r.status_code == 200, r.text
    return {x["repoName"].split("/", 1)[1] for x in r.json()}


def _wait(what: str, check, served: Served) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        assert served.proc.poll() is None, served.log()[-3000:]
        assert time.monotonic() < deadline, f"{what} within {DEADLINE_S:g}s\n" + served.log()[-3000:]
        time.sleep(0.5)


def test_signed_in_users_see_what_github_lets_them_read(tmp_path):
    git_root = tmp_path / "git"
    git_root.mkdir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with GitHttpServer(str(git_root), users={("x-access-token", GH_TOKEN)}) as git_srv, \
            FakeGitHub(GH_TOKEN, "admin", git=git_srv) as gh:
        gh.add_org("acme", members=("admin",))
        gh.add_repo("acme", "public")
        gh.add_repo("acme", "secret", private=True, collaborators=("bob",))
        gh.add_repo("acme", "vault", private=True, collaborators=("carol",))
        gh.add_user("bob")
        gh.add_user("carol")
        gh.oauth_app(APP_ID, APP_SECRET)
        config = {
            "environmentOverrides": {"PERMISSION_SYNC_ENABLED": {"type": "boolean", "value": True}},
            "settings": {"repoDrivenPermissionSyncIntervalMs": 2000, "userDrivenPermissionSyncIntervalMs": 2000,
                         **ONE_WORKER_EACH},
            "identityProviders": [{"provider": "github", "purpose": "sso", "baseUrl": gh.base_url,
                                   "clientId": {"env": "GH_APP_ID"}, "clientSecret": {"env": "GH_APP_SECRET"}}],
            "connections": {"gh": {"type": "github", "url": gh.base_url, "token": {"env": "GH_TOKEN"},
                                   "orgs": ["acme"]}},
        }
        config_path = tmp_path / "config.json"
        config_path.write_text(json.dumps(config, indent=2))
        data = tmp_path / "data"
        data.mkdir()
        served = Served(data, port=port, searchers=1, FORCE_ENABLE_ANONYMOUS_ACCESS="true", CONFIG_PATH=str(config_path),
                        GH_TOKEN=GH_TOKEN, GH_APP_ID=APP_ID, GH_APP_SECRET=APP_SECRET, AUTH_URL=base)
        try:
            served.wait_healthy(timeout_s=240)
            anonymous = httpx.Client(base_url=base, timeout=30)
            assert _repos(anonymous) == {"acme/public"}
            hits = anonymous.post("/api/search", json={"query": "acme/", "matches": 100}).json()
            assert {f["repository"].split("/", 1)[1] for f in hits["files"]} == {"acme/public"}

            bob = _sign_in(base, gh, "bob")
            _wait("bob sees acme/secret", lambda: _repos(bob) == {"acme/public", "acme/secret"}, served)
            source = bob.get("/api/source", params={"repo": next(r for r in _full(bob) if r.endswith("acme/secret")),
                                                    "path": "README.md"})
            assert source.status_code == 200 and "acme/secret" in source.text
            carol = _sign_in(base, gh, "carol")
            _wait("carol sees acme/vault", lambda: _repos(carol) == {"acme/public", "acme/vault"}, served)
            assert _repos(bob) == {"acme/public", "acme/secret"}

            gh.repos[1]["collaborators"].discard("bob")  # the host takes bob's access away
            _wait("bob loses acme/secret", lambda: _repos(bob) == {"acme/public"}, served)
            assert _repos(carol) == {"acme/public", "acme/vault"}
        finally:
            code = served.stop()
        assert code == 0, served.log()[-3000:]


def _full(client: httpx.Client) -> list[str]:
    return [x["repoName"] for x in client.get("/api/repos", params={"perPage": 100}).json()]
