"""Permission syncing against local code-host APIs (issue 14, part 2).

The fakes (`tests.fakehosts`) serve GitHub's and GitLab's documented permission endpoints on
127.0.0.1; connections are listed by the real adapters, grants are written by the real
`PermissionSyncer`, and what each user may see is read through the real `PermissionPolicy`.
Cases, both ways (repo-driven: a repository's collaborators with the connection's token;
user-driven: a linked account's own token lists what it reads):

* access granted by the host appears after a sync, for exactly the users the host names;
* access the host takes away disappears after the next sync;
* a 401/403 revokes at once; a 5xx keeps the last known access until it is too old, then denies;
* anonymous visitors and users without a linked account see public repositories only.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from codesearch import permissions
from codesearch.config import load_config
from codesearch.hosts import adapters  # noqa: F401  (registers the adapters)
from codesearch.hosts.adapters import adapter_for
from codesearch.hosts.http import HostHttp
from codesearch.hosts.keys import host_key
from codesearch.permission_sync.runner import PermissionSyncer
from codesearch.store import Store
from tests.fakehosts.github import FakeGitHub
from tests.fakehosts.gitlab import FakeGitLab

HOUR_MS = 3600000


class Clock:
    def __init__(self):
        self.now = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)

    def __call__(self):
        return self.now

    def advance(self, **kw):
        self.now += timedelta(**kw)


def _http():
    return HostHttp(retries=0, max_total_wait_s=0.1)


class World:
    """A store, a config of one enforcing connection on `fake`, the syncer and the rule."""

    def __init__(self, tmp_path, fake, kind: str, conn: dict, monkeypatch):
        monkeypatch.setenv("PERM_TEST_TOKEN", fake.token)
        self.clock = Clock()
        self.store = Store.open(tmp_path / "data", clock=self.clock)
        doc = {"connections": {"c": {**conn, "token": {"env": "PERM_TEST_TOKEN"}}},
               "settings": {"repoDrivenPermissionSyncIntervalMs": HOUR_MS, "userDrivenPermissionSyncIntervalMs": HOUR_MS}}
        self.config = load_config(json.dumps(doc).encode(), environ={"PERMISSION_SYNC_ENABLED": "true",
                                                                     "PERM_TEST_TOKEN": fake.token})
        c = self.config.connections["c"]
        self.host = host_key(c.code_host_type, c.url)
        self.store.upsert_connection("c", c.type, c.raw)
        with _http() as http:
            listing = adapter_for(c.type)("c", c.raw, fake.token, http)
        self.ids = self.store.upsert_repos("c", listing.repos).ids
        permissions.write_settings(self.store, permissions.settings_from_config(self.config))
        self.syncer = PermissionSyncer(self.store, self.config, http_factory=_http, clock=self.clock)
        self.policy = permissions.PermissionPolicy(lambda: self.store, ttl_s=0, clock=self.clock)
        self.kind = kind

    def user(self, login: str, subject: int | None, token: str | None = None):
        row = self.store.create_user(f"{login}@example.com", login)
        if subject is not None:
            acc = self.store.link_account(row.id, provider=self.host, provider_type=self.kind, host=self.host,
                                          subject=str(subject), login=login, access_token=token)
            row.account_id = acc.id
        return row

    def sees(self, user) -> set[str]:
        ident = self.policy.identity(user)
        allowed = permissions.visible_repos(ident)
        names = {rid: name for name, rid in self.ids.items()}
        return {names[r] for r in allowed if r in names}

    def sync(self, advance_h: float = 1.01):
        self.clock.advance(hours=advance_h)
        return self.syncer.run_due()


@pytest.fixture
def github(tmp_path, monkeypatch):
    with FakeGitHub(token="ghp_admin", token_user="admin") as fake:
        fake.add_org("acme", members=("admin",))
        fake.add_repo("acme", "public")
        fake.add_repo("acme", "secret", private=True, collaborators=("bob",))
        fake.add_repo("acme", "vault", private=True, collaborators=("dave",))
        fake.add_user("bob")
        fake.add_token("dave", "ghp_dave")
        world = World(tmp_path, fake, "github", {"type": "github", "url": fake.base_url, "orgs": ["acme"]}, monkeypatch)
        yield fake, world
        world.store.close()


def _name(fake, full: str) -> str:
    from urllib.parse import urlsplit

    return f"{urlsplit(fake.base_url).netloc}/{full}"


def test_github_repo_driven_grants_follow_the_collaborators(github):
    fake, w = github
    pub, secret, vault = (_name(fake, f"acme/{n}") for n in ("public", "secret", "vault"))
    bob = w.user("bob", fake.user_id("bob"))
    carol = w.user("carol", None)
    assert w.sees(bob) == {pub}  # nothing synced yet: private repositories are denied
    summary = w.sync()
    # bob's account has no token of its own: its user-driven sync fails (and grants nothing)
    assert summary == {"repos": 2, "accounts": 1, "failed": 1}
    assert w.sees(bob) == {pub, secret}
    assert w.sees(carol) == {pub} and w.sees(None) == {pub}
    fake.repos[1]["collaborators"].discard("bob")  # the host takes bob's access away
    w.sync()
    assert w.sees(bob) == {pub}


def test_github_user_driven_grants_follow_the_account_token(github):
    fake, w = github
    pub, vault = _name(fake, "acme/public"), _name(fake, "acme/vault")
    dave = w.user("dave", fake.user_id("dave"), token="ghp_dave")
    fake.fail(500, times=100, path="/repos/")  # repo-driven syncing cannot help: only dave's own token
    w.sync()
    assert w.sees(dave) == {pub, vault}
    assert w.store.get_linked_account(dave.account_id).permission_error is None
    del fake.tokens["ghp_dave"]  # dave revoked the app on the host: 401 revokes at once
    w.store.request_account_permission_sync(dave.account_id)
    w.sync(advance_h=0)
    assert w.sees(dave) == {pub}
    assert "401" in w.store.get_linked_account(dave.account_id).permission_error


def test_a_host_error_keeps_the_last_known_access_until_it_is_stale(github):
    fake, w = github
    pub, secret = _name(fake, "acme/public"), _name(fake, "acme/secret")
    bob = w.user("bob", fake.user_id("bob"))
    w.sync()
    assert w.sees(bob) == {pub, secret}
    fake.fail(502, times=1000, path="/repos/")
    w.sync()  # 1 h later: failed, the grant from 1 h ago still counts
    assert w.sees(bob) == {pub, secret}
    assert w.store.repo_permission_syncs()[w.ids[secret]].error
    w.clock.advance(hours=1.1)  # now older than twice the interval: denies
    assert w.sees(bob) == {pub}


def test_an_auth_failure_of_the_connection_token_revokes_at_once(github):
    fake, w = github
    pub, secret = _name(fake, "acme/public"), _name(fake, "acme/secret")
    bob = w.user("bob", fake.user_id("bob"))
    w.sync()
    assert w.sees(bob) == {pub, secret}
    fake.fail(401, times=1000, path="/repos/")
    w.sync()
    assert w.sees(bob) == {pub}


def test_enforce_permissions_for_public_repos_needs_an_account_on_the_host(tmp_path, monkeypatch):
    with FakeGitHub(token="ghp_admin", token_user="admin") as fake:
        fake.add_org("acme", members=("admin",))
        fake.add_repo("acme", "public")
        w = World(tmp_path, fake, "github", {"type": "github", "url": fake.base_url, "orgs": ["acme"],
                                             "enforcePermissionsForPublicRepos": True}, monkeypatch)
        linked = w.user("erin", 4242)
        unlinked = w.user("frank", None)
        assert w.sees(linked) == {_name(fake, "acme/public")}
        assert w.sees(unlinked) == set() and w.sees(None) == set()
        w.store.close()


def test_gitlab_both_ways(tmp_path, monkeypatch):
    with FakeGitLab(token="glpat-admin", token_user="admin") as fake:
        fake.add_group("grp", members=("admin",))
        fake.add_project("grp/open", visibility="public")
        fake.add_project("grp/closed", visibility="private", members=("gina",))
        fake.add_project("grp/other", visibility="private", members=("hank",))
        fake.add_user("gina")
        fake.add_token("hank", "glpat-hank")
        w = World(tmp_path, fake, "gitlab", {"type": "gitlab", "url": fake.base_url, "groups": ["grp"]}, monkeypatch)
        from urllib.parse import urlsplit

        host = urlsplit(fake.base_url).netloc
        gina = w.user("gina", fake.user_id("gina"))
        hank = w.user("hank", fake.user_id("hank"), token="glpat-hank")
        ivan = w.user("ivan", None)
        w.sync()
        assert w.sees(gina) == {f"{host}/grp/open", f"{host}/grp/closed"}
        assert w.sees(hank) == {f"{host}/grp/open", f"{host}/grp/other"}
        assert w.sees(ivan) == {f"{host}/grp/open"}
        sources = {s for s in ("repo", "user") if w.store.repo_grant_subjects(w.ids[f"{host}/grp/other"], s)}
        assert sources == {"repo", "user"}
        fake.projects[1]["members"].discard("gina")
        w.sync()
        assert w.sees(gina) == {f"{host}/grp/open"}
        w.store.close()


def test_the_scheduler_publishes_the_rule_and_syncs(tmp_path, monkeypatch):
    """`Scheduler.apply_config` writes the rule's input; a tick starts the due syncs."""
    from codesearch.runtime.scheduler import Scheduler

    with FakeGitHub(token="ghp_admin", token_user="admin") as fake:
        fake.add_org("acme", members=("admin",))
        fake.add_repo("acme", "secret", private=True, collaborators=("bob",))
        fake.add_user("bob")
        monkeypatch.setenv("PERMISSION_SYNC_ENABLED", "true")
        monkeypatch.setenv("PERM_TEST_TOKEN", fake.token)
        cfg = tmp_path / "config.json"
        cfg.write_text(json.dumps({"connections": {"c": {"type": "github", "url": fake.base_url, "orgs": ["acme"],
                                                         "token": {"env": "PERM_TEST_TOKEN"}}}}))
        sched = Scheduler(str(cfg), str(tmp_path / "data"))
        try:
            stored = sched.store.service_setting(permissions.SETTINGS_KEY)
            assert stored["enabled"] and stored["connections"]["c"]["enforce"]
            with _http() as http:
                listing = adapter_for("github")("c", sched.config.connections["c"].raw, fake.token, http)
            ids = sched.store.upsert_repos("c", listing.repos).ids
            sched.tick()
            sched.permission_syncer.join(30)
            (rid,) = ids.values()
            host = host_key("github", fake.base_url)
            assert set(sched.store.repo_grant_subjects(rid)) == {(host, str(fake.user_id("bob"))),
                                                                 (host, str(fake.user_id("admin")))}
        finally:
            sched.close()


def test_an_expired_account_token_is_refreshed_once_and_a_refused_refresh_revokes(tmp_path, monkeypatch):
    """GitLab's OAuth tokens live two hours: the user-driven sync refreshes them with the stored
    refresh token at the identity provider's token endpoint (the same GitLab), then asks again."""
    with FakeGitLab(token="glpat-admin", token_user="admin") as fake:
        fake.add_group("grp", members=("admin",))
        fake.add_project("grp/other", visibility="private", members=("hank",))
        fake.add_user("hank")
        fake.oauth_client("gl-app", "gl-secret")
        fake.refresh_tokens["rt-hank-0"] = "hank"
        monkeypatch.setenv("GL_APP_ID", "gl-app")
        monkeypatch.setenv("GL_APP_SECRET", "gl-secret")
        w = World(tmp_path, fake, "gitlab", {"type": "gitlab", "url": fake.base_url, "groups": ["grp"]}, monkeypatch)
        doc = dict(w.config.raw)
        doc["identityProviders"] = [{"provider": "gitlab", "purpose": "account_linking", "baseUrl": fake.base_url,
                                     "clientId": {"env": "GL_APP_ID"}, "clientSecret": {"env": "GL_APP_SECRET"}}]
        w.syncer.config = load_config(json.dumps(doc).encode(), environ={
            "PERMISSION_SYNC_ENABLED": "true", "PERM_TEST_TOKEN": fake.token, "GL_APP_ID": "gl-app",
            "GL_APP_SECRET": "gl-secret"})
        provider_id = w.syncer.config.identity_providers[0].id
        hank = w.store.create_user("hank@example.com", "hank")
        acc = w.store.link_account(hank.id, provider=provider_id, provider_type="gitlab", host=w.host,
                                   subject=str(fake.user_id("hank")), login="hank", access_token="glpat-expired",
                                   refresh_token="rt-hank-0", token_expires_at=w.clock.now - timedelta(minutes=5))
        from urllib.parse import urlsplit

        other = f"{urlsplit(fake.base_url).netloc}/grp/other"
        fake.fail(500, times=1000, path="/projects/")  # repo-driven cannot help: only hank's own token
        w.sync()
        assert fake.refreshes == 1
        assert w.sees(hank) == {other}
        tokens = w.store.account_tokens(acc.id)
        assert tokens.access_token == "glpat-r1-hank" and tokens.refresh_token == "rt-1-hank"
        # a token the host refuses although it has not expired yet: refreshed once, then asked again
        del fake.tokens["glpat-r1-hank"]
        w.sync()
        assert fake.refreshes == 2 and w.sees(hank) == {other}
        # the provider refuses the refresh (the user revoked the app): no token, access revoked
        del fake.tokens["glpat-r2-hank"]
        fake.refresh_tokens.clear()
        w.sync()
        assert w.sees(hank) == set()
        assert "sign in again" in w.store.get_linked_account(acc.id).permission_error
        w.store.close()


def test_importing_the_permission_fetchers_first_leaves_every_connection_type_known():
    """Permission syncing imports two adapter modules; a process that did so before listing any
    connection must still know every connection type (a scheduler did not, for `git`)."""
    import subprocess
    import sys

    code = ("import codesearch.permission_sync.fetch\n"
            "from codesearch.hosts.adapters import adapter_for\n"
            "for kind in ('git', 'github', 'gitlab', 'gitea', 'gerrit', 'bitbucket', 'azuredevops'):\n"
            "    adapter_for(kind)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
