"""Single sign-on, account linking, approvals and invites, end to end (codesearch.sso,
codesearch.web.pages_sso, codesearch.store.members, the identityProviders config).

The app (`build_app`, a real `Store`) is served over HTTP on 127.0.0.1 (`tests.asgiserver`), its
config loaded from JSON with `load_config`; the identity providers are the fakes of
`tests.fakehosts.oauth` (GitHub-, GitLab-, Gitea-, Bitbucket Cloud-, Bitbucket Server- and OpenID
Connect-style, real RSA-signed ID tokens).
httpx plays the browser: it follows redirects from the app to the provider and back, with its
cookie jar. Nothing of ours is mocked.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time

import httpx
import pytest

from codesearch.config import load_config
from codesearch.errors import ConfigError
from codesearch.hosts.keys import host_key
from codesearch.serving.api import build_app
from codesearch.store import Store
from tests.chromium import launch_chromium
from tests.asgiserver import bound_socket, serving
from tests.audited import audited
from tests.fakehosts.oauth import (
    FakeBitbucketCloudOAuth,
    FakeBitbucketServerOAuth,
    FakeGiteaOAuth,
    FakeGitHubOAuth,
    FakeGitLabOAuth,
    FakeOIDC,
    cloud_uuid,
)

SECRET = "client-secret-value"
CLIENT = "client-id"


class _Searcher:
    def search(self, *a, **k):
        raise AssertionError("no search in these tests")


@pytest.fixture(scope="module")
def fakes():
    servers = {"github": FakeGitHubOAuth(), "gitlab": FakeGitLabOAuth(), "google": FakeOIDC(),
               "okta": FakeOIDC(issuer_path="/oauth2/default"), "keycloak": FakeOIDC(issuer_path="/realms/test"),
               "microsoft-entra-id": FakeOIDC(issuer_path="/tenant-1/v2.0"), "corp": FakeOIDC(issuer_path="/corp"),
               "gitea": FakeGiteaOAuth(), "bitbucket-cloud": FakeBitbucketCloudOAuth(),
               "bitbucket-server": FakeBitbucketServerOAuth()}
    for s in servers.values():
        s.start()
    yield servers
    for s in servers.values():
        s.stop()


def config_doc(f) -> dict:
    """An identityProviders section as a Sourcebot user writes it (plus our `issuer` for Google and `oidc`)."""
    E = lambda name: {"env": name}  # noqa: E731
    return {"identityProviders": [
        {"provider": "github", "purpose": "sso", "clientId": E("GH_ID"), "clientSecret": E("GH_SECRET"),
         "baseUrl": f["github"].base_url},
        {"provider": "gitlab", "purpose": "account_linking", "clientId": E("GL_ID"), "clientSecret": E("GL_SECRET"),
         "baseUrl": f["gitlab"].base_url},
        {"provider": "google", "purpose": "sso", "clientId": E("G_ID"), "clientSecret": E("G_SECRET"),
         "issuer": f["google"].issuer},
        {"provider": "okta", "purpose": "sso", "clientId": E("OKTA_ID"), "clientSecret": E("OKTA_SECRET"),
         "issuer": E("OKTA_ISSUER")},
        {"provider": "keycloak", "purpose": "sso", "clientId": E("KC_ID"), "clientSecret": E("KC_SECRET"),
         "issuer": f["keycloak"].issuer},
        {"provider": "microsoft-entra-id", "purpose": "sso", "clientId": E("MS_ID"), "clientSecret": E("MS_SECRET"),
         "issuer": f["microsoft-entra-id"].issuer},
        {"provider": "oidc", "purpose": "sso", "id": "corp", "displayName": "Corp SSO", "clientId": E("C_ID"),
         "clientSecret": E("C_SECRET"), "issuer": f["corp"].issuer},
        # the code hosts added later: Gitea (ours), Bitbucket Cloud (Sourcebot's fields plus our baseUrl:
        # its API is then <baseUrl>/2.0), Bitbucket Data Center
        {"provider": "gitea", "purpose": "sso", "clientId": E("GT_ID"), "clientSecret": E("GT_SECRET"),
         "baseUrl": f["gitea"].base_url},
        {"provider": "bitbucket-cloud", "purpose": "sso", "clientId": E("BBC_ID"), "clientSecret": E("BBC_SECRET"),
         "baseUrl": f["bitbucket-cloud"].base_url},
        {"provider": "bitbucket-server", "purpose": "sso", "clientId": E("BBS_ID"), "clientSecret": E("BBS_SECRET"),
         "baseUrl": f["bitbucket-server"].base_url},
    ]}


def environ(f, **extra) -> dict:
    env = {"OKTA_ISSUER": f["okta"].issuer}
    for prefix in ("GH", "GL", "G", "OKTA", "KC", "MS", "C", "GT", "BBC", "BBS"):
        env[f"{prefix}_ID"], env[f"{prefix}_SECRET"] = CLIENT, SECRET
    env.update(extra)
    return env


@pytest.fixture
def world(fakes, tmp_path):
    """`world(configure=None, **env)`: a fresh store and app (`configure(doc)` may change the
    config document first); yields a dict with url, store, fakes, client()."""
    started = []

    def make(configure=None, **extra):
        env = environ(fakes, **extra)
        doc = config_doc(fakes)
        if configure is not None:
            configure(doc)
        config = load_config(json.dumps(doc), environ=env)
        store = Store.open(str(tmp_path / f"data{len(started)}"))
        sock = bound_socket()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = build_app(lambda: _Searcher(), get_store=lambda: store, anonymous_access=False, public_url=url,
                        environ=env, identity_providers=config.identity_providers)
        ctx = serving(app, sock=sock)
        ctx.__enter__()
        started.append((ctx, store))
        for fake in fakes.values():
            fake.user, fake.denied = {}, False
            fake.exchanges.clear()
            fake.reset()
            if isinstance(fake, FakeOIDC):
                fake.id_token_overrides, fake.userinfo_overrides, fake.sign_with = {}, {}, None
        return {"url": url, "store": store, "fakes": fakes, "client": lambda: httpx.Client(follow_redirects=True,
                                                                                          timeout=20)}

    yield make
    for ctx, store in started:
        ctx.__exit__(None, None, None)
        store.close()


def csrf_of(page: httpx.Response) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


def sso(client: httpx.Client, url: str, pid: str, *, next: str = "", invite: str = "") -> httpx.Response:
    """Press "Sign in with <pid>" on the sign-in page and follow the redirects to the end."""
    page = client.get(url + "/login")
    return client.post(f"{url}/login/sso/{pid}", data={"csrf_token": csrf_of(page), "next": next, "invite": invite})


def link(client: httpx.Client, url: str, pid: str) -> httpx.Response:
    page = client.get(url + "/settings/account")
    return client.post(f"{url}/settings/account/link/{pid}", data={"csrf_token": csrf_of(page)})


def person(n: int, **kw) -> dict:
    return {"id": 1000 + n, "login": f"user{n}", "name": f"User {n}", "email": f"user{n}@example.com", **kw}


def signed_in_as(client, url) -> str | None:
    page = client.get(url + "/settings/account", follow_redirects=False)
    m = re.search(r"Signed in as <strong>([^<]+)</strong>", page.text)
    return m.group(1) if page.status_code == 200 and m else None


# ----------------------------------------------------------------------------- config

def test_config_types_every_entry_with_stable_ids(fakes):
    config = load_config(json.dumps(config_doc(fakes)), environ=environ(fakes))
    got = [(p.id, p.provider, p.purpose) for p in config.identity_providers]
    assert got == [("github", "github", "sso"), ("gitlab", "gitlab", "integration"), ("google", "google", "sso"),
                   ("okta", "okta", "sso"), ("keycloak", "keycloak", "sso"),
                   ("microsoft-entra-id", "microsoft-entra-id", "sso"), ("corp", "oidc", "sso"),
                   ("gitea", "gitea", "sso"), ("bitbucket-cloud", "bitbucket-cloud", "sso"),
                   ("bitbucket-server", "bitbucket-server", "sso")]
    assert config.warnings == []
    assert "client-secret" not in repr(config.identity_providers)


E = {"env": "X"}
CONFIG_CASES = [
    # (identityProviders, expected problem or None, expected warning fragment or None)
    ([{"provider": "github", "purpose": "sso", "clientId": E}], 'identityProviders[0]: missing required property "clientSecret"', None),
    ([{"provider": "okta", "purpose": "sso", "clientId": E, "clientSecret": E}], 'identityProviders[0]: missing required property "issuer"', None),
    ([{"provider": "google", "purpose": "account_linking", "clientId": E, "clientSecret": E}], 'identityProviders[0].purpose: must be "sso"', None),
    ([{"provider": "github", "purpose": "sso", "clientId": "inline", "clientSecret": E}], "identityProviders[0].clientId: expected a token reference", None),
    ([{"provider": "gitlab", "purpose": "sso", "clientId": E, "clientSecret": E, "baseUrl": "gitlab.local"}], "identityProviders[0].baseUrl: must be an http", None),
    # Sourcebot's map form, keyed by id: its entries are checked as the array's, named by their key
    ({"gh": {"provider": "github", "purpose": "sso", "clientId": E}}, 'identityProviders.gh: missing required property "clientSecret"', None),
    ({"gh": {"provider": "github", "purpose": "sso", "clientId": E, "clientSecret": E, "id": "other"}}, "identityProviders.gh", None),
    ("github", "identityProviders: expected", None),
    ([{"provider": "github", "purpose": "sso", "clientId": E, "clientSecret": E, "id": "a"},
      {"provider": "gitlab", "purpose": "sso", "clientId": E, "clientSecret": E, "id": "a"}], 'identityProviders[1].id: the id "a" is already used', None),
    ([{"provider": "gcp-iap", "purpose": "sso", "audience": E}, {"provider": "gcp-iap", "purpose": "sso", "audience": E}],
     None, "identityProviders[1]: accepted but not used: only one gcp-iap entry is used"),  # tests/web/test_sso_iap.py
    ([{"provider": "bitbucket-server", "purpose": "sso", "clientId": E, "clientSecret": E}], 'identityProviders[0]: missing required property "baseUrl"', None),
    ([{"provider": "bitbucket-cloud", "purpose": "sso", "clientId": E, "clientSecret": E, "apiUrl": "api.bitbucket.org"}], "identityProviders[0].apiUrl: must be an http", None),
    ([{"provider": "gitea", "purpose": "sso", "clientId": E, "clientSecret": E, "issuer": "https://gitea.com"}], 'identityProviders[0].issuer: unknown property "issuer"', None),
    ([{"provider": "idira", "purpose": "sso", "anything": 1}], None, 'provider "idira" is not known'),
    ([{"provider": "github", "purpose": "sso", "clientId": E, "clientSecret": E},
      {"provider": "github", "purpose": "sso", "clientId": E, "clientSecret": E, "baseUrl": "https://ghe.example.com"}],
     None, 'this one is "github-2" by its position'),
]


@pytest.mark.parametrize("section,problem,warning", CONFIG_CASES)
def test_config_checks(section, problem, warning):
    doc = json.dumps({"identityProviders": section})
    if problem:
        with pytest.raises(ConfigError) as e:
            load_config(doc, environ={})
        assert problem in str(e.value)
    else:
        config = load_config(doc, environ={})
        assert any(warning in w for w in config.warnings), config.warnings


# ----------------------------------------------------------------------------- signing in

SIGN_IN_CASES = [
    # provider id, the fake behind it, host key of its linked account (code hosts only)
    ("github", "github", "github"),
    ("google", "google", None),
    ("okta", "okta", None),
    ("keycloak", "keycloak", None),
    ("microsoft-entra-id", "microsoft-entra-id", None),
    ("corp", "corp", None),
]


@pytest.mark.parametrize("pid,fake,host_kind", SIGN_IN_CASES)
def test_sign_in_with_each_kind_first_user_is_owner(world, pid, fake, host_kind):
    w = world()
    f = w["fakes"][fake]
    f.user = person(1)
    with w["client"]() as c:
        page = c.get(w["url"] + "/login")
        assert f'data-provider="{pid}"' in page.text
        r = sso(c, w["url"], pid, next="/settings/keys")
        assert r.status_code == 200 and str(r.url) == w["url"] + "/settings/keys"
        assert signed_in_as(c, w["url"]) == "user1@example.com"
    user = w["store"].find_user_by_email("user1@example.com")
    assert user.role == "OWNER"
    (acct,) = w["store"].list_linked_accounts(user_id=user.id)
    assert (acct.provider, acct.subject) == (pid, "1001")
    assert f.exchanges == [{"client_ok": True, "code_ok": True, "verifier_sent": True, "pkce_verified": True}]
    auth = f.authorizations[-1]
    assert auth["code_challenge_method"] == "S256" and len(auth["state"]) >= 40
    if host_kind:
        assert acct.host == host_key(host_kind, f.base_url)
        assert auth["scope"] == "read:user user:email repo"
        assert w["store"].account_tokens(acct.id).access_token.startswith("at_")
    else:
        assert acct.host is None and auth["scope"] == "openid email profile" and len(auth["nonce"]) >= 40


# The code hosts permission syncing knows besides GitHub and GitLab: the linked account's host must be
# the key of a connection of that kind on the same address (what `permissions.settings_from_config`
# computes from the connection's kind and url), and its subject the id the host's permission APIs
# name readers by (Bitbucket Cloud: the uuid with braces; Bitbucket Server and Gitea: the numeric id).
CODE_HOST_CASES = [
    # provider id, the connection on the fake's address, the subject of person(1), scopes asked
    ("gitea", lambda f: {"type": "gitea", "url": f.base_url}, lambda: "1001", "read:user read:repository"),
    ("bitbucket-cloud", lambda f: {"type": "bitbucket", "url": f.api_url}, lambda: cloud_uuid("user1"),
     "account email repository"),
    ("bitbucket-server", lambda f: {"type": "bitbucket", "deploymentType": "server", "url": f.base_url},
     lambda: "1001", "PUBLIC_REPOS REPO_READ"),
]


def _connection_host(conn: dict) -> str:
    from codesearch import permissions

    config = load_config(json.dumps({"connections": {"c": conn}}), environ={"PERMISSION_SYNC_ENABLED": "true"})
    return permissions.settings_from_config(config).connections["c"].host


@pytest.mark.parametrize("pid,conn,subject,scope", CODE_HOST_CASES, ids=[c[0] for c in CODE_HOST_CASES])
def test_sign_in_with_gitea_and_bitbucket_links_an_account_on_the_host(world, pid, conn, subject, scope):
    w = world()
    f = w["fakes"][pid]
    f.user = person(1)
    with w["client"]() as c:
        assert f'data-provider="{pid}"' in c.get(w["url"] + "/login").text
        r = sso(c, w["url"], pid, next="/settings/keys")
        assert r.status_code == 200 and str(r.url) == w["url"] + "/settings/keys", r.text[:500]
        assert signed_in_as(c, w["url"]) == "user1@example.com"
    user = w["store"].find_user_by_email("user1@example.com")
    assert user.role == "OWNER"
    (acct,) = w["store"].list_linked_accounts(user_id=user.id)
    assert (acct.provider, acct.provider_type, acct.subject, acct.login) == (pid, pid, subject(), "user1")
    assert acct.host == _connection_host(conn(f)) and acct.host.startswith(("gitea:", "bitbucketCloud:",
                                                                            "bitbucketServer:"))
    tokens = w["store"].account_tokens(acct.id)
    assert tokens.access_token in f.issued and tokens.refresh_token.startswith("rt_") and tokens.expires_at
    assert acct.permission_attempted_at is None  # a user-driven sync is asked for: due at once
    assert f.exchanges == [{"client_ok": True, "code_ok": True, "verifier_sent": True, "pkce_verified": True}]
    auth = f.authorizations[-1]
    assert auth["scope"] == scope and auth["code_challenge_method"] == "S256" and "nonce" not in auth
    # only Bitbucket Cloud's confirmed primary address is vouched for
    assert (acct.email == "user1@example.com") is (pid == "bitbucket-cloud")


def test_bitbucket_cloud_wants_basic_client_credentials_and_picks_the_primary_address(world):
    w = world()
    bbc = w["fakes"]["bitbucket-cloud"]
    bbc.user = person(3)
    with w["client"]() as c:
        sso(c, w["url"], "bitbucket-cloud")
    (token_request,) = [r for r in bbc.requests if r[1] == bbc.token_path]
    assert token_request[2].get("Authorization", "").startswith("Basic ")
    assert w["store"].find_user_by_email("other-user3@example.com") is None  # the unconfirmed secondary
    assert w["store"].find_user_by_email("user3@example.com") is not None


@pytest.mark.parametrize("pid", ["gitea", "bitbucket-server"])
def test_unverified_code_host_addresses_never_take_over_an_account(world, pid):
    """Gitea and Bitbucket Server do not vouch for e-mail addresses: an existing user with that
    address is not signed in by them (they sign in another way and link)."""
    w = world()
    owner = w["store"].create_user("user1@example.com", "One")
    w["fakes"][pid].user = person(1)
    with w["client"]() as c:
        r = sso(c, w["url"], pid)
        assert r.status_code == 409 and "does not say the address is verified" in r.text
        assert signed_in_as(c, w["url"]) is None
    assert w["store"].list_linked_accounts(user_id=owner.id) == []


def test_link_gitea_and_bitbucket_accounts_to_a_signed_in_user(world):
    w = world()
    f = w["fakes"]
    f["google"].user = person(1)
    f["gitea"].user = person(1, id=41, login="gitea-one", email="one@gitea.example")
    f["bitbucket-cloud"].user = person(1, login="bbc-one", email="one@bbc.example")
    f["bitbucket-server"].user = person(1, id=7, login="Bbs.One", email="one@bbs.example")
    with w["client"]() as c:
        sso(c, w["url"], "google")
        for pid, name in (("gitea", "Gitea"), ("bitbucket-cloud", "Bitbucket Cloud"),
                          ("bitbucket-server", "Bitbucket Server")):
            r = link(c, w["url"], pid)
            assert r.status_code == 200 and f"Your {name} account is linked" in r.text, r.text[:500]
    uid = w["store"].find_user_by_email("user1@example.com").id
    accounts = {a.provider: a for a in w["store"].list_linked_accounts(user_id=uid)}
    assert set(accounts) == {"google", "gitea", "bitbucket-cloud", "bitbucket-server"}
    assert accounts["gitea"].subject == "41" and accounts["gitea"].host == host_key("gitea", f["gitea"].base_url)
    assert accounts["bitbucket-cloud"].subject == cloud_uuid("bbc-one")
    assert accounts["bitbucket-cloud"].host == host_key("bitbucketCloud", f["bitbucket-cloud"].api_url)
    assert accounts["bitbucket-server"].subject == "7" and accounts["bitbucket-server"].login == "Bbs.One"
    assert accounts["bitbucket-server"].host == host_key("bitbucketServer", f["bitbucket-server"].base_url)
    for pid in ("gitea", "bitbucket-cloud", "bitbucket-server"):
        tokens = w["store"].account_tokens(accounts[pid].id)
        assert tokens.access_token in f[pid].issued and tokens.refresh_token in f[pid].refresh_tokens
        assert accounts[pid].permission_attempted_at is None
    # the user's e-mail is not changed by what a linked host says, and nobody else can link them
    assert w["store"].get_user(uid).email == "user1@example.com"
    f["google"].user = person(2)
    with w["client"]() as c:
        sso(c, w["url"], "google")
        r = link(c, w["url"], "bitbucket-server")  # still Bbs.One at the fake
        assert r.status_code == 409 and "linked to another user" in r.text


def test_bitbucket_server_user_endpoints_failing_are_pages(world):
    w = world()
    bbs = w["fakes"]["bitbucket-server"]
    bbs.user = person(1)
    bbs.fail(500, path="/plugins/servlet/applinks/whoami")
    with w["client"]() as c:
        r = sso(c, w["url"], "bitbucket-server")
        assert r.status_code == 502 and "Bitbucket Server answered 500" in r.text and "Traceback" not in r.text
    bbs.fail(404, path="/rest/api/1.0/users/")
    with w["client"]() as c:
        r = sso(c, w["url"], "bitbucket-server")
        assert r.status_code == 502 and "answered 404" in r.text
        assert signed_in_as(c, w["url"]) is None
    assert w["store"].list_users() == []


def test_code_host_keys_of_the_public_services_match_their_connections():
    E = {"env": "X"}
    doc = {"identityProviders": [
        {"provider": "bitbucket-cloud", "purpose": "sso", "clientId": E, "clientSecret": E},
        {"provider": "bitbucket-cloud", "id": "bbc-web", "purpose": "sso", "clientId": E, "clientSecret": E,
         "baseUrl": "https://bitbucket.org/"},
        {"provider": "bitbucket-server", "purpose": "account_linking", "clientId": E, "clientSecret": E,
         "baseUrl": "https://BB.example.com:443/"},
        {"provider": "gitea", "purpose": "sso", "clientId": E, "clientSecret": E},
        {"provider": "gitea", "id": "corp-gitea", "purpose": "sso", "clientId": E, "clientSecret": E,
         "baseUrl": "https://git.example.com/gitea"}]}
    from codesearch.sso import build_providers

    config = load_config(json.dumps(doc), environ={})
    assert config.warnings == []
    hosts = {pid: p.host for pid, p in build_providers(config.identity_providers, environ={}).items()}
    assert hosts == {"bitbucket-cloud": _connection_host({"type": "bitbucket", "deploymentType": "cloud"}),
                     "bbc-web": _connection_host({"type": "bitbucket", "url": "https://api.bitbucket.org/2.0"}),
                     "bitbucket-server": _connection_host({"type": "bitbucket", "deploymentType": "server",
                                                           "url": "https://bb.example.com"}),
                     "gitea": _connection_host({"type": "gitea"}),
                     "corp-gitea": _connection_host({"type": "gitea", "url": "https://git.example.com/gitea/"})}
    assert hosts["bitbucket-cloud"] == hosts["bbc-web"] == "bitbucketCloud:https://bitbucket.org"


def test_second_user_is_member_and_signing_in_again_finds_the_link(world):
    w = world()
    gh = w["fakes"]["github"]
    for n in (1, 2, 2):
        gh.user = person(n)
        with w["client"]() as c:
            assert sso(c, w["url"], "github").status_code == 200
    users = {u.email: u.role for u in w["store"].list_users()}
    assert users == {"user1@example.com": "OWNER", "user2@example.com": "MEMBER"}
    assert len(w["store"].list_linked_accounts()) == 2


def _existing(w, how: str):
    """Make the account of user1@example.com `how` (after an owner, unless it is the first user)."""
    store, f = w["store"], w["fakes"]
    if how != "the first user: an owner":
        store.create_user("owner@example.com", "Owner")
    if how in ("added by an owner", "the first user: an owner"):
        return store.create_user("user1@example.com", "One")
    if how == "joined with an invite and a password":
        _invite, token = store.create_invite(None)
        return store.sign_up("user1@example.com", "One", password_hash="x", invite_token=token)[0]
    pid = {"signed up with Gitea (unverified)": "gitea", "signed up with Bitbucket Server (unverified)":
           "bitbucket-server", "signed up with Google (verified)": "google",
           "signed up with Gitea, then linked Google (verified) while signed in": "gitea"}[how]
    f[pid].user = person(1, id=501)
    with w["client"]() as c:
        assert sso(c, w["url"], pid).status_code == 200
        if "then linked Google" in how:
            f["google"].user = person(1, id=502)
            assert link(c, w["url"], "google").status_code == 200
    return store.find_user_by_email("user1@example.com")


JOIN_BY_EMAIL_CASES = [
    # how the account of user1@example.com came to be; who then signs in with that address (provider,
    # whether it vouches for the address); "joined" (the identity is linked to that account) or the refusal
    ("added by an owner", "google", True, "joined"),
    ("added by an owner", "microsoft-entra-id", False, "does not say the address is verified"),
    ("added by an owner", "gitea", True, "does not say the address is verified"),  # Gitea never vouches
    ("the first user: an owner", "google", True, "Owner accounts are never joined by e-mail"),
    ("signed up with Gitea (unverified)", "github", True, "nobody ever verified"),  # a pre-claimed address
    ("signed up with Bitbucket Server (unverified)", "google", True, "nobody ever verified"),
    ("joined with an invite and a password", "github", True, "nobody ever verified"),
    ("signed up with Google (verified)", "github", True, "joined"),
    ("signed up with Gitea, then linked Google (verified) while signed in", "github", True, "joined"),
]


@pytest.mark.parametrize("how,pid,verified,answer", JOIN_BY_EMAIL_CASES,
                         ids=[f"{c[0]} / {c[1]}" for c in JOIN_BY_EMAIL_CASES])
def test_who_may_sign_in_to_an_existing_account_by_its_email(world, how, pid, verified, answer):
    """An identity is linked to an account found by e-mail only when its provider verified the
    address, the account's own address is verified, and the account is not an owner's: else
    whoever could claim an address somewhere would get the account (or pre-claim it and wait)."""
    w = world()
    user = _existing(w, how)
    before = {(a.provider, a.subject) for a in w["store"].list_linked_accounts(user_id=user.id)}
    w["fakes"][pid].user = person(1, id=777, verified=verified)
    with w["client"]() as c:
        r = sso(c, w["url"], pid)
        if answer == "joined":
            assert r.status_code == 200 and signed_in_as(c, w["url"]) == "user1@example.com", r.text[:500]
        else:
            assert r.status_code == 409 and answer in r.text and "link" in r.text, r.text[:800]
            assert signed_in_as(c, w["url"]) is None
    after = {(a.provider, a.subject) for a in w["store"].list_linked_accounts(user_id=user.id)}
    assert after == (before | {(pid, "777")} if answer == "joined" else before)
    if answer != "joined":  # refused: nothing stored, no other account made for the identity
        assert w["store"].find_linked_account(pid, "777") is None


def test_an_unverified_address_signs_up_only_while_nobody_has_it(world):
    w = world()
    gitea = w["fakes"]["gitea"]
    gitea.user = person(1)
    with w["client"]() as c:  # free: a new account, whose address is not taken for verified
        assert sso(c, w["url"], "gitea").status_code == 200
    assert w["store"].find_user_by_email("user1@example.com").email_verified is False
    gitea.user = person(1, id=9001)  # another Gitea user claiming the same address
    with w["client"]() as c:
        r = sso(c, w["url"], "gitea")
        assert r.status_code == 409 and "does not say the address is verified" in r.text
    assert len(w["store"].list_users()) == 1


def _github(**kw):
    return person(1, **kw)


PROVIDER_EMAIL_CASES = [
    # provider, the user at the provider, ID token / userinfo changes (OIDC), (address, verified) we get
    ("github", _github(), {}, {}, ("user1@example.com", True)),
    ("github", _github(verified=False), {}, {}, ("user1@example.com", False)),
    # the address and its verification come from one entry of /user/emails: the primary one
    ("github", _github(public_email="user1@example.com",
                       emails=[{"email": "user1@example.com", "primary": False, "verified": True},
                               {"email": "other1@example.com", "primary": True, "verified": False}]),
     {}, {}, ("other1@example.com", False)),
    # /user's public e-mail never counts as verified
    ("github", _github(public_email="user1@example.com", emails=[]), {}, {}, ("user1@example.com", False)),
    ("okta", person(1), {}, {}, ("user1@example.com", True)),
    ("okta", person(1), {"email_verified": None}, {}, ("user1@example.com", True)),  # userinfo vouches, same address
    # the ID token vouches for no address of its own: userinfo's address counts with userinfo's word
    ("okta", person(1), {"email": None, "email_verified": True}, {"email_verified": False}, ("user1@example.com", False)),
    # userinfo vouches for another address than the ID token's
    ("okta", person(1), {"email_verified": None}, {"email": "other1@example.com", "email_verified": True},
     ("user1@example.com", False)),
    ("microsoft-entra-id", person(1, verified=False), {}, {}, ("user1@example.com", False)),
    ("gitea", person(1), {}, {}, ("user1@example.com", False)),
    ("bitbucket-server", person(1), {}, {}, ("user1@example.com", False)),
    ("bitbucket-cloud", person(1), {}, {}, ("user1@example.com", True)),
]


@pytest.mark.parametrize("pid,user,token,userinfo,expected", PROVIDER_EMAIL_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(PROVIDER_EMAIL_CASES)])
def test_which_addresses_count_as_verified(world, pid, user, token, userinfo, expected):
    w = world()
    fake = w["fakes"][pid]
    fake.user = user
    if isinstance(fake, FakeOIDC):
        fake.id_token_overrides, fake.userinfo_overrides = dict(token), dict(userinfo)
    with w["client"]() as c:
        assert sso(c, w["url"], pid).status_code == 200
    email, verified = expected
    account = w["store"].find_user_by_email(email)
    (linked,) = w["store"].list_linked_accounts(user_id=account.id)
    assert linked.email == (email if verified else None)  # a linked account keeps only a vouched-for address
    assert account.email_verified is verified


# ----------------------------------------------------------------------------- linking

def test_link_a_second_identity_then_unlink_but_never_the_last(world):
    w = world()
    gh, gl = w["fakes"]["github"], w["fakes"]["gitlab"]
    gh.user, gl.user = person(1), person(1, id=77)
    with w["client"]() as c:
        sso(c, w["url"], "github")
        assert sso(c, w["url"], "gitlab").status_code == 404  # integration: links only, no sign-in button
        r = link(c, w["url"], "gitlab")
        assert r.status_code == 200 and "Your GitLab account is linked" in r.text
        uid = w["store"].find_user_by_email("user1@example.com").id
        accounts = {a.provider: a for a in w["store"].list_linked_accounts(user_id=uid)}
        assert set(accounts) == {"github", "gitlab"}
        assert accounts["gitlab"].host == host_key("gitlab", gl.base_url)
        assert w["store"].account_tokens(accounts["gitlab"].id).refresh_token.startswith("rt_")
        assert gl.authorizations[-1]["scope"] == "read_user read_api"
        page = c.get(w["url"] + "/settings/account")
        # GitHub is the only way to sign in (GitLab only links, no password): it cannot be unlinked
        r = c.post(f"{w['url']}/settings/account/unlink/{accounts['github'].id}", data={"csrf_token": csrf_of(page)})
        assert r.status_code == 409 and "only way to sign in" in r.text
        r = c.post(f"{w['url']}/settings/account/unlink/{accounts['gitlab'].id}", data={"csrf_token": csrf_of(page)})
        assert r.status_code == 200 and "unlinked" in r.text
        assert [a.provider for a in w["store"].list_linked_accounts(user_id=uid)] == ["github"]


def test_an_identity_linked_to_another_user_is_refused(world):
    w = world()
    gh = w["fakes"]["github"]
    gh.user = person(1)
    with w["client"]() as c:
        sso(c, w["url"], "github")
    gh.user = person(2)
    w["fakes"]["google"].user = person(2)
    with w["client"]() as c:
        sso(c, w["url"], "google")
        gh.user = person(1)  # user 2 tries to link user 1's GitHub account
        r = link(c, w["url"], "github")
        assert r.status_code == 409 and "linked to another user" in r.text
    assert len(w["store"].list_linked_accounts()) == 2


# ----------------------------------------------------------------------------- approval and invites

def test_approval_required_then_approved(world):
    w = world(REQUIRE_APPROVAL_NEW_MEMBERS="true")
    gh = w["fakes"]["github"]
    gh.user = person(1)
    owner = httpx.Client(follow_redirects=True, timeout=20)
    assert sso(owner, w["url"], "github").status_code == 200  # the first user never waits
    gh.user = person(2)
    with w["client"]() as c:
        r = sso(c, w["url"], "github")
        assert r.status_code == 403 and "Waiting for approval" in r.text
        assert signed_in_as(c, w["url"]) is None
        assert sso(c, w["url"], "github").status_code == 403  # still waiting
    page = owner.get(w["url"] + "/settings/members")
    assert "user2@example.com" in page.text
    uid = w["store"].find_user_by_email("user2@example.com").id
    r = owner.post(f"{w['url']}/settings/members/{uid}/approve", data={"csrf_token": csrf_of(page)})
    assert "can sign in now" in r.text
    with w["client"]() as c:
        assert sso(c, w["url"], "github").status_code == 200 and signed_in_as(c, w["url"]) == "user2@example.com"
    gh.user = person(3)
    with w["client"]() as c:
        sso(c, w["url"], "github")
    uid3 = w["store"].find_user_by_email("user3@example.com").id
    owner.post(f"{w['url']}/settings/members/{uid3}/decline", data={"csrf_token": csrf_of(page)})
    assert w["store"].find_user_by_email("user3@example.com") is None
    owner.close()
    for action in ("login.sso", "account.link", "member.request", "member.approve", "member.decline"):
        assert audited(w["store"], action), action


def test_a_deactivated_user_cannot_sign_in_through_a_provider_until_reactivated(world):
    w = world()
    gh = w["fakes"]["github"]
    for n in (1, 2):  # an owner, then the member who is deactivated
        gh.user = person(n)
        with w["client"]() as c:
            assert sso(c, w["url"], "github").status_code == 200
    uid = w["store"].find_user_by_email("user2@example.com").id
    w["store"].set_user_suspended(uid, True)
    with w["client"]() as c:
        r = sso(c, w["url"], "github")
        assert r.status_code == 403 and "Account deactivated" in r.text
        assert signed_in_as(c, w["url"]) is None
    w["store"].set_user_suspended(uid, False)
    with w["client"]() as c:
        assert sso(c, w["url"], "github").status_code == 200 and signed_in_as(c, w["url"]) == "user2@example.com"


def test_invite_accepted_without_approval(world):
    w = world(REQUIRE_APPROVAL_NEW_MEMBERS="true")
    w["fakes"]["github"].user = person(1)
    owner = httpx.Client(follow_redirects=True, timeout=20)
    sso(owner, w["url"], "github")
    page = owner.get(w["url"] + "/settings/members")
    r = owner.post(w["url"] + "/settings/members/invites",
                   data={"csrf_token": csrf_of(page), "email": "user5@example.com", "role": "MEMBER"})
    link_url = re.search(r'id="invite-link"[^>]*value="([^"]+)"', r.text).group(1)
    token = link_url.rsplit("/", 1)[1]
    assert token not in json.dumps([i.id for i in w["store"].list_invites()])  # only its HMAC is kept
    w["fakes"]["okta"].user = person(5)
    with w["client"]() as c:
        page = c.get(link_url)
        assert page.status_code == 200 and 'data-provider="okta"' in page.text
        r = c.post(f"{w['url']}/login/sso/okta", data={"csrf_token": csrf_of(page), "invite": token})
        assert r.status_code == 200 and signed_in_as(c, w["url"]) == "user5@example.com"
    assert not w["store"].is_pending(w["store"].find_user_by_email("user5@example.com").id)
    with w["client"]() as c:  # used up
        assert c.get(link_url).status_code == 404
    # a password sign-up with an invite for anyone, as owner
    page = owner.get(w["url"] + "/settings/members")
    r = owner.post(w["url"] + "/settings/members/invites", data={"csrf_token": csrf_of(page), "role": "OWNER"})
    link_url = re.search(r'id="invite-link"[^>]*value="([^"]+)"', r.text).group(1)
    with w["client"]() as c:
        page = c.get(link_url)
        r = c.post(link_url, data={"csrf_token": csrf_of(page), "email": "six@example.com", "name": "Six",
                                   "password": "six-pass-123", "confirm": "six-pass-123"})
        assert r.status_code == 200 and signed_in_as(c, w["url"]) == "six@example.com"
    assert w["store"].find_user_by_email("six@example.com").role == "OWNER"
    owner.close()


def _invite_for(w, email: str | None, role: str = "MEMBER") -> str:
    """An owner (made here if needed) creates an invite; its token."""
    owner = w["store"].find_user_by_email("owner@example.com") or w["store"].create_user("owner@example.com")
    return w["store"].create_invite(owner.id, email=email, role=role)[1]


EMAIL_INVITE_CASES = [
    # who uses an invite made for user5@example.com: (provider and whether it vouches for the address,
    # or "password"), the address given, the answer: "joined" or the refusal
    (("okta", True), "user5@example.com", "joined"),
    (("github", True), "user5@example.com", "joined"),
    (("gitea", None), "user5@example.com", "does not say that address is verified"),
    (("microsoft-entra-id", False), "user5@example.com", "does not say that address is verified"),
    (("okta", True), "user6@example.com", "for another e-mail address"),
    ("password", "user5@example.com", "joined"),
    ("password", "user6@example.com", "for another e-mail address"),
]


@pytest.mark.parametrize("way,email,answer", EMAIL_INVITE_CASES, ids=[f"{c[0]}-{c[1]}" for c in EMAIL_INVITE_CASES])
def test_an_invite_for_an_email_needs_that_address_verified(world, way, email, answer):
    """An invite for an e-mail: through a provider only with that address, verified; with a
    password through the invite's own form (the address as typed, which then does not count as
    verified). A refusal leaves the invite usable and makes no account."""
    w = world(REQUIRE_APPROVAL_NEW_MEMBERS="true")
    token = _invite_for(w, "user5@example.com")
    with w["client"]() as c:
        page = c.get(f"{w['url']}/invite/{token}")
        if way == "password":
            r = c.post(f"{w['url']}/invite/{token}", data={"csrf_token": csrf_of(page), "email": email, "name": "Five",
                                                           "password": "five-pass-123", "confirm": "five-pass-123"})
        else:
            pid, verified = way
            w["fakes"][pid].user = person(5, email=email, verified=verified)
            r = c.post(f"{w['url']}/login/sso/{pid}", data={"csrf_token": csrf_of(page), "invite": token})
        if answer == "joined":
            assert r.status_code == 200 and signed_in_as(c, w["url"]) == email, r.text[:500]
        else:
            assert r.status_code == 403 and answer in r.text, r.text[:800]
            assert signed_in_as(c, w["url"]) is None
    joined = w["store"].find_user_by_email(email)
    if answer == "joined":
        assert not w["store"].is_pending(joined.id) and w["store"].find_invite(token) is None
        assert joined.email_verified is (way != "password")
    else:
        assert joined is None and w["store"].find_invite(token) is not None


def test_a_sign_up_whose_link_fails_stores_nothing(world, caplog):
    """Making the account and linking the identity it signs up with are one transaction: when the
    link cannot be stored (here the database refuses it), no account without its identity is
    left behind, and the next try signs up as if the first had not happened."""
    w = world()
    w["fakes"]["github"].user = person(1)
    with w["store"].engine.begin() as db:
        # a trigger naming a table that does not exist: the database errs on every new link
        db.exec_driver_sql("CREATE TRIGGER refuse_links BEFORE INSERT ON linked_accounts "
                           "BEGIN DELETE FROM no_such_table; END")
    caplog.set_level(logging.ERROR)
    with w["client"]() as c:
        r = sso(c, w["url"], "github")
        assert r.status_code == 500 and "Something went wrong" in r.text and "Traceback" not in r.text
    assert w["store"].list_users() == [] and w["store"].list_linked_accounts() == []
    with w["store"].engine.begin() as db:
        db.exec_driver_sql("DROP TRIGGER refuse_links")
    with w["client"]() as c:
        assert sso(c, w["url"], "github").status_code == 200 and signed_in_as(c, w["url"]) == "user1@example.com"
    (user,) = w["store"].list_users()
    assert user.role == "OWNER" and [a.subject for a in w["store"].list_linked_accounts(user_id=user.id)] == ["1001"]


def test_simultaneous_sign_ins_of_one_new_identity_land_in_one_account(fakes, tmp_path):
    """Two callbacks of one new identity at once (a double click, two tabs), each in its own
    process's store: one signs up, the other finds the identity linked meanwhile and signs in to
    that same account (never an error page, never a second account)."""
    from codesearch.sso import accounts, build_providers
    from codesearch.sso.providers import ProviderIdentity

    config = load_config(json.dumps(config_doc(fakes)), environ=environ(fakes))
    provider = build_providers(config.identity_providers, environ=environ(fakes))["github"]
    Store.open(str(tmp_path)).close()
    n = 6
    stores = [Store.open(str(tmp_path)) for _ in range(n)]
    start = threading.Barrier(n)
    results: list = [None] * n

    def callback(i):
        who = ProviderIdentity(subject="1001", login="user1", email="user1@example.com", email_verified=True,
                               name="User 1", access_token=f"at_{i}", refresh_token=None, expires_at=None, scope="repo")
        start.wait()
        try:
            results[i] = accounts.sign_in(stores[i], provider, who, require_approval=False).user.id
        except Exception as e:  # noqa: BLE001 - the assertion below shows it
            results[i] = e

    threads = [threading.Thread(target=callback, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        users = stores[0].list_users()
        assert len(users) == 1 and results == [users[0].id] * n, results
        assert len(stores[0].list_linked_accounts()) == 1
    finally:
        for s in stores:
            s.close()


def test_invite_tokens_stay_out_of_logs_messages_and_referers(world, caplog):
    """The token of an invite link is its secret: a failure on the invite page logs the path as
    ``/invite/<redacted>``, error messages do not repeat it, and the page tells the browser to
    send no Referer (it would carry the URL to the next site)."""
    w = world()
    token = _invite_for(w, None)
    with w["client"]() as c:
        page = c.get(f"{w['url']}/invite/{token}")
        assert page.status_code == 200 and page.headers["referrer-policy"] == "no-referrer"
        assert "no-store" in page.headers["cache-control"]
        missing = c.get(f"{w['url']}/invite/{token}/more")  # no such route: the 404 names the path
        assert missing.status_code == 404 and token not in missing.text and "/invite/<redacted>" in missing.text
        caplog.set_level(logging.INFO)
        with w["store"].engine.begin() as db:  # the invites table is gone: the page fails (500)
            db.exec_driver_sql("ALTER TABLE invites RENAME TO invites_away")
        failed = c.get(f"{w['url']}/invite/{token}")
        assert failed.status_code == 500 and token not in failed.text
    server_side = [r for r in caplog.records if r.thread != threading.main_thread().ident]  # not httpx's own
    logged = "\n".join(r.getMessage() for r in server_side)
    assert "/invite/<redacted>" in logged and token not in logged and token[4:20] not in logged


LOGGABLE_PATHS = [
    # a request path, as a log line or an error message writes it
    ("/invite/inv_s3cr3t", "/invite/<redacted>"),
    ("/invite/inv_s3cr3t/more?x=1", "/invite/<redacted>/more?x=1"),
    ("/codesearch/invite/inv_s3cr3t", "/codesearch/invite/<redacted>"),  # under a root path
    ("/api/repos", "/api/repos"),
    ("/invite/", "/invite/"),
    ("/settings/members/invites/abc/revoke", "/settings/members/invites/abc/revoke"),  # an id, not a token
    (None, ""),
]


@pytest.mark.parametrize("path,written", LOGGABLE_PATHS)
def test_loggable_paths_hide_invite_tokens(path, written):
    from codesearch.service.middleware.observability import loggable_path

    assert loggable_path(path) == written


def test_serve_access_logs_name_the_invite_route_not_the_token(world):
    """Serve's access log (SOURCEBOT_LOG_LEVEL=debug) writes the route the request matched, which
    Serve computes with this function from our app's routes."""
    from ray.serve._private.thirdparty.get_asgi_route_name import get_asgi_route_name

    from codesearch.serving.api import build_app

    app = build_app(lambda: _Searcher(), get_store=lambda: None, anonymous_access=False, environ={})
    for path, method in (("/invite/inv_secretsecret", "GET"), ("/invite/inv_secretsecret", "POST")):
        scope = {"type": "http", "path": path, "method": method, "root_path": "", "headers": [], "query_string": b""}
        assert get_asgi_route_name(app, scope) == "/invite/{token}"


# ----------------------------------------------------------------------------- accountLinkingRequired

def _require(*pids):
    """A `world` configure: the entries of `pids` say ``accountLinkingRequired: true``."""
    def configure(doc):
        for e in doc["identityProviders"]:
            if (e.get("id") or e["provider"]) in pids:
                e["accountLinkingRequired"] = True
    return configure


def test_account_linking_required_is_read_without_a_warning(fakes):
    doc = config_doc(fakes)
    _require("gitlab")(doc)
    config = load_config(json.dumps(doc), environ=environ(fakes))
    assert config.warnings == []
    assert [p.id for p in config.identity_providers if p.required] == ["gitlab"]


PAGES_WHILE_UNLINKED = [
    # path, where the browser ends up
    ("/", "/settings/account"),
    ("/settings/keys", "/settings/account"),
    ("/repos", "/settings/account"),
    ("/search?q=main", "/settings/account"),
    ("/settings/account", "/settings/account"),  # the page where they link
]


def test_a_user_who_has_not_linked_a_required_provider_is_sent_to_link_it(world):
    w = world(configure=_require("gitlab"))
    w["fakes"]["google"].user = person(1)
    w["fakes"]["gitlab"].user = person(1, id=88)
    with w["client"]() as c:
        r = sso(c, w["url"], "google", next="/settings/keys")
        assert str(r.url) == w["url"] + "/settings/account" and r.status_code == 200
        assert 'class="notice link-required"' in r.text and 'data-required="gitlab"' in r.text
        assert "link your GitLab account" in r.text
        for path, lands in PAGES_WHILE_UNLINKED:
            page = c.get(w["url"] + path)
            assert page.status_code == 200 and str(page.url) == w["url"] + lands, path
        uid = w["store"].find_user_by_email("user1@example.com").id
        _kid, key = w["store"].create_api_key(uid, "ci")
        for creds in ({"Authorization": f"Bearer {key}"}, {"X-Sourcebot-Api-Key": key}):
            refused = httpx.get(w["url"] + "/api/repos", headers=creds)
            body = refused.json()
            assert refused.status_code == 403 and body["errorCode"] == "INSUFFICIENT_PERMISSIONS"
            assert "GitLab" in body["message"] and "/settings/account" in body["message"]
        assert c.get(w["url"] + "/api/repos").status_code == 403  # the page's own session too
        r = link(c, w["url"], "gitlab")  # linking works from the account page
        assert r.status_code == 200 and "Your GitLab account is linked" in r.text and "link-required" not in r.text
        home = c.get(w["url"] + "/settings/keys")
        assert home.status_code == 200 and str(home.url) == w["url"] + "/settings/keys"
        assert httpx.get(w["url"] + "/api/repos", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_signing_out_and_signing_in_with_the_required_provider_are_never_blocked(world):
    w = world(configure=_require("github"))
    w["fakes"]["google"].user = person(1)
    with w["client"]() as c:
        sso(c, w["url"], "google")
        page = c.get(w["url"] + "/settings/account")
        r = c.post(w["url"] + "/logout", data={"csrf_token": csrf_of(page)})
        assert r.status_code == 200 and "/login" in str(r.url) and signed_in_as(c, w["url"]) is None
    w["fakes"]["github"].user = person(2)
    with w["client"]() as c:  # signing in with the required provider links it by that very sign-in
        r = sso(c, w["url"], "github", next="/settings/keys")
        assert str(r.url) == w["url"] + "/settings/keys" and "link-required" not in r.text


@pytest.mark.browser  # Chromium
def test_the_account_page_banner_in_a_browser(world):
    """In Chromium: a signed-in user who must link GitLab is brought to the account page, sees
    the banner, presses "Link GitLab", and can then open the other pages."""
    from playwright.sync_api import sync_playwright

    w = world(configure=_require("gitlab"))
    w["fakes"]["google"].user = person(1)
    w["fakes"]["gitlab"].user = person(1, id=88)
    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            page.goto(w["url"] + "/login?next=/settings/keys")
            page.click('button[data-provider="google"]')
            page.wait_for_url(w["url"] + "/settings/account")
            banner = page.locator(".link-required")
            assert "link your GitLab account" in banner.inner_text()
            page.goto(w["url"] + "/repos")
            page.wait_for_url(w["url"] + "/settings/account")
            page.click('button[data-provider="gitlab"]')
            page.wait_for_url(w["url"] + "/settings/account?linked=gitlab")
            assert page.locator(".link-required").count() == 0
            page.goto(w["url"] + "/repos")
            assert page.url == w["url"] + "/repos"
        finally:
            browser.close()


# ----------------------------------------------------------------------------- abuse

def _start(c, w, pid: str) -> str:
    """Start a sign-in but stop at the provider's redirect back: the callback URL."""
    page = c.get(w["url"] + "/login")
    r = c.post(f"{w['url']}/login/sso/{pid}", data={"csrf_token": csrf_of(page)}, follow_redirects=False)
    r = c.get(r.headers["location"], follow_redirects=False)
    return r.headers["location"]


def test_forged_reused_and_foreign_state(world):
    w = world()
    w["fakes"]["github"].user = person(1)
    with w["client"]() as c:
        back = _start(c, w, "github")
        forged = re.sub(r"state=[^&]+", "state=forged", back)
        r = c.get(forged)
        assert r.status_code == 400 and "does not belong" in r.text
    with w["client"]() as c:
        back = _start(c, w, "github")
        assert c.get(back).status_code == 200
        c.cookies.clear()
        r = c.get(back)  # a replay without the flow cookie
        assert r.status_code == 400 and "expired or was not started in this browser" in r.text
    with w["client"]() as c:
        back = _start(c, w, "github")
        flow = c.cookies.get("codesearch_sso")
        assert c.get(back).status_code == 200
        c.cookies.set("codesearch_sso", flow)  # a replay with the cookie kept from before
        r = c.get(back)
        assert r.status_code == 400 and "used already" in r.text
    with w["client"]() as victim, w["client"]() as attacker:  # login CSRF: the attacker's answer in the victim's browser
        back = _start(attacker, w, "github")
        victim.get(w["url"] + "/login")
        r = victim.get(back)
        assert r.status_code == 400 and signed_in_as(victim, w["url"]) is None


def test_denied_and_provider_down_are_pages(world):
    w = world()
    gh, corp = w["fakes"]["github"], w["fakes"]["corp"]
    gh.user, gh.denied = person(1), True
    with w["client"]() as c:
        r = sso(c, w["url"], "github")
        assert r.status_code == 403 and "access was denied" in r.text and "Traceback" not in r.text
    gh.denied = False
    gh.fail(500, path="/api/v3/user")
    with w["client"]() as c:
        r = sso(c, w["url"], "github")
        assert r.status_code == 502 and "answered 500" in r.text
    corp.user = person(2)
    corp.fail(503, path="/corp/.well-known/openid-configuration")
    with w["client"]() as c:
        r = sso(c, w["url"], "corp")
        assert r.status_code == 502 and "Corp SSO" in r.text


def _rsa():
    from cryptography.hazmat.primitives.asymmetric import rsa
    from joserfc.jwk import RSAKey

    return RSAKey.import_key(rsa.generate_private_key(public_exponent=65537, key_size=2048))


ID_TOKEN_CASES = [
    # what the provider puts in the ID token, what the page says
    ({"nonce": "not-the-flow-nonce"}, "nonce"),
    ({"nonce": None}, "nonce"),
    ({"aud": "another-client"}, "aud"),
    ({"iss": "https://evil.example.com"}, "iss"),
    ({"exp": int(time.time()) - 3600, "iat": int(time.time()) - 7200}, "exp"),
    ({"sign_with": "another key"}, "no valid signature"),
]


@pytest.mark.parametrize("overrides,says", ID_TOKEN_CASES, ids=[s for _, s in ID_TOKEN_CASES])
def test_bad_id_tokens_are_refused(world, overrides, says):
    w = world()
    kc = w["fakes"]["keycloak"]
    kc.user = person(1)
    overrides = dict(overrides)
    if overrides.pop("sign_with", None):
        kc.sign_with = _rsa()
    kc.id_token_overrides = overrides
    with w["client"]() as c:
        r = sso(c, w["url"], "keycloak")
        assert r.status_code == 403 and says in r.text
        assert signed_in_as(c, w["url"]) is None
    assert w["store"].list_users() == []


OPEN_REDIRECTS = ["https://evil.example.com/", "//evil.example.com/x", "/\\evil.example.com", "http:/evil.example.com",
                  "javascript:alert(1)", "/%0d%0aLocation: https://evil.example.com"]


@pytest.mark.parametrize("next_url", OPEN_REDIRECTS)
def test_next_never_leaves_the_site(world, next_url):
    w = world()
    w["fakes"]["github"].user = person(1)
    with w["client"]() as c:
        r = sso(c, w["url"], "github", next=next_url)
        assert str(r.url).startswith(w["url"] + "/") and r.status_code in (200, 404)  # signed in, on this site
        assert signed_in_as(c, w["url"]) == "user1@example.com"
        assert all(str(h.url).startswith((w["url"], w["fakes"]["github"].base_url)) for h in r.history)


def test_no_secret_in_logs(world, caplog):
    w = world()
    w["fakes"]["github"].user = person(1)
    w["fakes"]["okta"].user = person(1)
    caplog.set_level(logging.DEBUG)
    with w["client"]() as c:
        back = _start(c, w, "github")
        c.get(back)
        c.get(back)  # a replay, refused: logged as such
        sso(c, w["url"], "okta")
    server_side = [r for r in caplog.records if r.thread != threading.main_thread().ident]
    text = "\n".join(r.getMessage() for r in server_side)
    secrets_seen = [SECRET, re.search(r"code=([^&]+)", back).group(1), re.search(r"state=([^&]+)", back).group(1)]
    secrets_seen += list(w["fakes"]["github"].tokens) + list(w["fakes"]["okta"].tokens)
    assert server_side and not [s for s in secrets_seen if s in text]


# ----------------------------------------------------------------------------- the owners' switches

def test_a_provider_the_owners_turned_off_signs_nobody_in(world):
    """Settings → Security turns single sign-on providers off one by one (`security_settings`): the
    button goes, and a sign-in started by hand is refused before the provider is asked."""
    w = world()
    w["store"].put_service_setting("security", {"disabled_providers": ["github"]})  # before the app reads it
    w["fakes"]["github"].user = w["fakes"]["google"].user = person(1)
    with w["client"]() as c:
        page = c.get(w["url"] + "/login")
        assert 'data-provider="github"' not in page.text and 'data-provider="google"' in page.text
        asked = len(w["fakes"]["github"].authorizations)
        r = sso(c, w["url"], "github")
        assert r.status_code == 403 and "turned off" in r.text
        assert len(w["fakes"]["github"].authorizations) == asked  # GitHub was never asked
        r = sso(c, w["url"], "google")
        assert r.status_code == 200 and signed_in_as(c, w["url"]) == "user1@example.com"
