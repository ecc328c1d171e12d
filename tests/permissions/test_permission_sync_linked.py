"""Permission syncing for accounts linked through the Gitea, Bitbucket Cloud and Bitbucket Server
identity providers, end to end: sign-in or linking through the web app, then the real
`PermissionSyncer` and the real `PermissionPolicy`, table-driven over the three kinds.

One address per host. A linked account's host key comes from the provider's address and a
connection's from its url; they must be equal for the syncer to sync the account and for the rule
to match repo-driven readers to it. So each host is one fake serving both its REST API and its
authorization server (`tests.fakehosts.oauth.FakeGiteaSSO`, `FakeBitbucketCloudSSO`,
`FakeBitbucketServerSSO`: the REST fakes of `tests.fakehosts.gitea` / `.bitbucket` with the kind's
OAuth endpoints and user endpoints mixed in). A token the authorization server issues is the host's
token of the user who consented, so the REST API answers it as that user, as a real host does. The
config is the one an administrator writes: a connection (for Bitbucket Cloud its url is the API
address ``<fake>/2.0``) and a provider whose ``baseUrl`` is the fake (for Bitbucket Cloud the API
address defaults to ``<baseUrl>/2.0``: the same key as the connection's).

The app (`build_app`, a real `Store`) is served on 127.0.0.1; httpx is the browser. On every host
``acme`` holds ``public``, ``secret`` (private; dave may read it) and ``vault`` (private; erin's).
dave and frank (no access) sign in with the provider; ann, the owner, signs in with her password and
links her account on the host, which is erin's. Then:

1. user-driven only (repo-driven calls fail with 500): each user sees what their own token reads;
2. the access tokens expire (two hours): they are refreshed at the provider's token endpoint
   (Bitbucket Cloud: client credentials in HTTP Basic) and both syncs grant;
3. the host revokes dave's tokens: his user-driven grants go, and the repo-driven ones (the host
   names his uuid / id, the subject of his linked account) still show him ``secret``;
4. the host takes dave's access away: ``secret`` disappears for him.
Anonymous visitors, frank and a user without a linked account see ``public`` only throughout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from codesearch import permissions
from codesearch.config import load_config
from codesearch.hosts import adapters  # noqa: F401  (registers the adapters)
from codesearch.hosts.adapters import adapter_for
from codesearch.permission_sync.runner import PermissionSyncer
from codesearch.serving.api import build_app
from codesearch.store import Store
from codesearch.accounts import hash_password
from tests.asgiserver import bound_socket, serving
from tests.fakehosts.bitbucket import CloudRepo, ServerProject, ServerRepo
from tests.fakehosts.oauth import (
    FakeBitbucketCloudSSO,
    FakeBitbucketServerSSO,
    FakeGiteaSSO,
)
from tests.permissions.test_permission_sync import _http

CLIENT_ID, CLIENT_SECRET = "e2e-client", "e2e-client-secret-value"
ANN_PASSWORD = "ann-password-123"
HOUR_MS = 3600000


class Clock:
    """Starts now: the tokens the sign-in stores expire in real time (two hours from now)."""

    def __init__(self):
        self.now = datetime.now(timezone.utc)

    def __call__(self):
        return self.now

    def advance(self, **kw):
        self.now += timedelta(**kw)


class _Searcher:
    def search(self, *a, **k):
        raise AssertionError("no search in these tests")


@dataclass
class Host:
    provider: dict  # the identityProviders entry (without credentials)
    conn: dict  # the connection (without token)
    token: str  # the connection's
    fake: object
    subject: Callable[[str], str]  # a login's id on the host, as its permission APIs name readers
    revoke: Callable[[str, str], None]  # (repository, login): the host takes the login's access away
    repo_path: str  # path prefix of the repo-driven calls (for `fail`)


@contextmanager
def gitea(tmp_path):
    with FakeGiteaSSO("gitea-admin", "admin", client_id=CLIENT_ID, client_secret=CLIENT_SECRET) as fake:
        fake.add_org("acme", members=("admin",))
        fake.add_repo("acme", "public")
        fake.add_repo("acme", "secret", private=True, collaborators=("dave",))
        fake.add_repo("acme", "vault", private=True, collaborators=("erin",))
        fake.add_user("frank")

        def revoke(repo, login):
            next(r for r in fake.repos if r["name"] == repo)["collaborators"].discard(login)

        yield Host({"provider": "gitea", "baseUrl": fake.base_url}, {"type": "gitea", "url": fake.base_url,
                                                                     "orgs": ["acme"]},
                   fake.token, fake, lambda login: str(fake.user_id(login)), revoke, "/repos/")


@contextmanager
def bitbucket_cloud(tmp_path):
    repos = [CloudRepo("acme", "public", "PRJ"), CloudRepo("acme", "secret", "PRJ", private=True, users={"dave": "read"}),
             CloudRepo("acme", "vault", "PRJ", private=True, users={"erin": "write"})]
    with FakeBitbucketCloudSSO(str(tmp_path / "bbc"), repos, tokens={"bbc-admin": "admin"}, admins={"admin"},
                               client_id=CLIENT_ID, client_secret=CLIENT_SECRET) as fake:
        fake.user_json("frank")

        def revoke(repo, login):
            del fake.repos[("acme", repo)].users[login]

        # Sourcebot's fields plus baseUrl (the OAuth endpoints' address); the API, and so the host
        # key, is <baseUrl>/2.0: the connection's url
        yield Host({"provider": "bitbucket-cloud", "baseUrl": fake.base_url},
                   {"type": "bitbucket", "url": fake.url, "workspaces": ["acme"]}, "bbc-admin", fake,
                   fake.user_uuid, revoke, "/2.0/repositories/")


@contextmanager
def bitbucket_server(tmp_path):
    repos = [ServerRepo("CORE", "public", public=True), ServerRepo("CORE", "secret", users={"dave": "REPO_READ"}),
             ServerRepo("CORE", "vault", users={"erin": "REPO_WRITE"})]
    with FakeBitbucketServerSSO(str(tmp_path / "bbs"), [ServerProject("CORE", readers={"admin"})], repos,
                                tokens={"bbs-admin": "admin"}, admins={"admin"},
                                client_id=CLIENT_ID, client_secret=CLIENT_SECRET) as fake:
        fake.user_json("frank")

        def revoke(repo, login):
            del fake.repos[("CORE", repo)].users[login]

        yield Host({"provider": "bitbucket-server", "baseUrl": fake.base_url},
                   {"type": "bitbucket", "deploymentType": "server", "url": fake.url, "projects": ["CORE"]},
                   "bbs-admin", fake, lambda login: str(fake.user_id(login)), revoke, "/rest/api/1.0/projects/")


HOSTS = {"gitea": gitea, "bitbucket-cloud": bitbucket_cloud, "bitbucket-server": bitbucket_server}


class World:
    """The config (connection and provider), the store, the app on a socket, the syncer and the rule."""

    def __init__(self, tmp_path, host: Host, monkeypatch):
        self.host_fake = host
        env = {"PERMISSION_SYNC_ENABLED": "true", "CONN_TOKEN": host.token, "IDP_ID": CLIENT_ID,
               "IDP_SECRET": CLIENT_SECRET}
        for k, v in env.items():  # the syncer reads the connection token and, to refresh, the client's
            monkeypatch.setenv(k, v)
        doc = {"settings": {"repoDrivenPermissionSyncIntervalMs": HOUR_MS, "userDrivenPermissionSyncIntervalMs": HOUR_MS},
               "connections": {"c": {**host.conn, "token": {"env": "CONN_TOKEN"}}},
               "identityProviders": [{**host.provider, "purpose": "sso", "clientId": {"env": "IDP_ID"},
                                      "clientSecret": {"env": "IDP_SECRET"}}]}
        self.config = load_config(json.dumps(doc), environ=env)
        assert self.config.warnings == []
        self.pid = self.config.identity_providers[0].id
        c = self.config.connections["c"]
        self.settings = permissions.settings_from_config(self.config)
        self.key = self.settings.connections["c"].host
        self.clock = Clock()
        self.store = Store.open(str(tmp_path / "data"), clock=self.clock)
        self.store.upsert_connection("c", c.type, c.raw)
        with _http() as http:
            listing = adapter_for(c.type)("c", c.raw, host.token, http)
        self.ids = {name.rsplit("/", 1)[1]: rid for name, rid in self.store.upsert_repos("c", listing.repos).ids.items()}
        assert set(self.ids) == {"public", "secret", "vault"}
        permissions.write_settings(self.store, self.settings)
        self.syncer = PermissionSyncer(self.store, self.config, http_factory=_http, clock=self.clock)
        self.policy = permissions.PermissionPolicy(lambda: self.store, ttl_s=0, clock=self.clock)
        sock = bound_socket()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = build_app(lambda: _Searcher(), get_store=lambda: self.store, anonymous_access=False,
                        public_url=self.url, environ=env, identity_providers=self.config.identity_providers)
        self._serving = serving(app, sock=sock)
        self._serving.__enter__()

    def close(self):
        self._serving.__exit__(None, None, None)
        self.store.close()

    def browser(self) -> httpx.Client:
        return httpx.Client(follow_redirects=True, timeout=20)

    def sign_in_with_provider(self, login: str):
        """`login` consents at the host: a browser presses "Sign in with …" and follows the redirects."""
        self.host_fake.fake.user = {"login": login}
        with self.browser() as b:
            page = b.get(self.url + "/login")
            assert f'data-provider="{self.pid}"' in page.text
            r = b.post(f"{self.url}/login/sso/{self.pid}", data={"csrf_token": _csrf(page), "next": "/settings/keys"})
            assert r.status_code == 200 and str(r.url) == self.url + "/settings/keys", r.text[:1000]
        return self.store.find_user_by_email(f"{login}@example.com")

    def link_as(self, email: str, password: str, login: str):
        """A user signs in with a password and links `login`'s account on the host."""
        self.host_fake.fake.user = {"login": login}
        with self.browser() as b:
            page = b.get(self.url + "/login")
            r = b.post(self.url + "/login", data={"csrf_token": _csrf(page), "email": email, "password": password,
                                                  "next": "/settings/account"})
            assert r.status_code == 200 and str(r.url) == self.url + "/settings/account", r.text[:1000]
            r = b.post(f"{self.url}/settings/account/link/{self.pid}", data={"csrf_token": _csrf(r)})
            assert r.status_code == 200 and "account is linked" in r.text, r.text[:1000]

    def account(self, user):
        (acct,) = [a for a in self.store.list_linked_accounts(user_id=user.id) if a.provider == self.pid]
        return acct

    def sees(self, user) -> set[str]:
        names = {rid: name for name, rid in self.ids.items()}
        return {names[r] for r in permissions.visible_repos(self.policy.identity(user)) if r in names}

    def grants(self, repo: str, source: str) -> set[tuple[str, str]]:
        return set(self.store.repo_grant_subjects(self.ids[repo], source))

    def sync(self, hours: float = 1.01):
        self.clock.advance(hours=hours)
        return self.syncer.run_due()


def _csrf(page: httpx.Response) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


@pytest.fixture(params=list(HOSTS))
def world(request, tmp_path, monkeypatch):
    with HOSTS[request.param](tmp_path) as host:
        w = World(tmp_path, host, monkeypatch)
        try:
            yield host, w
        finally:
            w.close()


def test_linked_accounts_get_what_the_host_lets_them_read(world):
    h, w = world
    fake = h.fake
    ann = w.store.create_user("ann@example.com", "Ann", password_hash=hash_password(ANN_PASSWORD))
    assert ann.role == "OWNER"
    dave = w.sign_in_with_provider("dave")  # signs up with the provider
    frank = w.sign_in_with_provider("frank")
    w.link_as("ann@example.com", ANN_PASSWORD, "erin")  # ann links her account on the host: erin's
    ivan = w.store.create_user("ivan@example.com", "Ivan")  # no linked account
    dave_acct, ann_acct = w.account(dave), w.account(ann)
    # the linked accounts are on the connection's host, named as its permission APIs name readers
    assert (dave_acct.host, dave_acct.subject) == (w.key, h.subject("dave"))
    assert (ann_acct.host, ann_acct.subject) == (w.key, h.subject("erin"))
    assert w.account(frank).host == w.key
    assert {a.id for a in w.syncer.due_accounts()} == {a.id for a in w.store.list_linked_accounts(with_host=True)}
    everyone = (dave, ann, frank, ivan, None)
    assert [w.sees(u) for u in everyone] == [{"public"}] * 5  # nothing synced yet

    # 1. user-driven only: each account's own token, the one the sign-in stored
    fake.fail(500, times=1000, path=h.repo_path)
    summary = w.sync()
    assert summary == {"repos": 2, "accounts": 3, "failed": 2}  # the two private repositories' syncs fail
    assert w.sees(dave) == {"public", "secret"} and w.sees(ann) == {"public", "vault"}
    assert w.sees(frank) == w.sees(ivan) == w.sees(None) == {"public"}
    assert w.grants("secret", "user") == {(w.key, h.subject("dave"))} and w.grants("secret", "repo") == set()
    assert w.grants("vault", "user") == {(w.key, h.subject("erin"))}
    assert w.store.get_linked_account(dave_acct.id).permission_error is None

    # 2. two hours later the tokens have expired: refreshed at the provider, then both syncs grant
    fake.reset()
    old = w.store.account_tokens(dave_acct.id).access_token
    summary = w.sync()
    assert summary == {"repos": 2, "accounts": 3, "failed": 0}
    refreshes = [e for e in fake.exchanges if e.get("refresh")]
    assert len(refreshes) == 3 and all(e["client_ok"] and e["code_ok"] for e in refreshes)
    assert w.store.account_tokens(dave_acct.id).access_token not in (None, old)
    assert w.grants("secret", "user") == {(w.key, h.subject("dave"))}
    assert (w.key, h.subject("dave")) in w.grants("secret", "repo")
    assert (w.key, h.subject("erin")) in w.grants("vault", "repo")
    assert w.sees(dave) == {"public", "secret"} and w.sees(ann) == {"public", "vault"}
    assert w.sees(frank) == w.sees(ivan) == w.sees(None) == {"public"}

    # 3. the host revokes dave's tokens (he removed the app): no user-driven grants, but the host
    # still names him a reader of secret, and that is his linked account
    for t in [t for t, login in fake.tokens.items() if login == "dave"]:
        del fake.tokens[t]
    fake.refresh_tokens = {k: v for k, v in fake.refresh_tokens.items() if v["user"]["login"] != "dave"}
    w.sync()
    assert "sign in again" in w.store.get_linked_account(dave_acct.id).permission_error
    assert w.grants("secret", "user") == set() and (w.key, h.subject("dave")) in w.grants("secret", "repo")
    assert w.sees(dave) == {"public", "secret"}

    # 4. the host takes dave's access away: gone after the next sync; ann keeps hers
    h.revoke("secret", "dave")
    w.sync()
    assert w.sees(dave) == {"public"} and w.sees(ann) == {"public", "vault"}
    assert w.sees(frank) == w.sees(ivan) == w.sees(None) == {"public"}
