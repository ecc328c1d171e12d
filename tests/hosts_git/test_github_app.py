"""GitHub App authentication against a local GitHub that checks app JWTs and expires its tokens.

The world: one GHES-like fake (tests/fakehosts/github_app.py) with a real git smart-HTTP server
that accepts only valid installation tokens. The app (id 4242) is installed on org `acme` (all
repositories), on org `beta` (one selected repository) and on user `carol`; org `gamma` has no
installation and is read with the connection's personal token. The private key is in the
environment, as a config's ``{"env": ...}`` reference names it.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import time

import pytest
from joserfc.jwk import RSAKey

from codesearch.config import load_config
from codesearch.errors import ConfigError, HostAuthError
from codesearch.git.mirror import MirrorStore
from codesearch.hosts import github_app
from codesearch.hosts.github import list_github
from codesearch.hosts.github_app import APPS_KEY, TOKENS, InstallationTokens, attach_apps
from codesearch.hosts.http import HostHttp
from codesearch.index.builder import IndexSettings
from codesearch.search.engine import Searcher
from codesearch.sync import repo_git_credentials, sync_connection
from tests.fakehosts.github_app import FakeGitHubApp
from tests.githttp import GitHttpServer

APP_ID = "4242"
PAT = "ghp_app0000000000000000000000000000000"
KEY = RSAKey.generate_key(2048)
PEM = KEY.as_pem(private=True).decode()
OTHER_PEM = RSAKey.generate_key(2048).as_pem(private=True).decode()


@pytest.fixture(scope="module")
def gh(tmp_path_factory):
    base = tmp_path_factory.mktemp("ghapp")
    git = GitHttpServer(str(base / "git"), users={("x-access-token", PAT)})
    fake = FakeGitHubApp(APP_ID, KEY.as_pem(private=False), token=PAT, token_user="pat-owner", git=git, page_size=2)
    fake.owned = [git]
    fake.add_org("acme")
    fake.add_org("beta")
    fake.add_org("gamma")
    fake.add_user("carol")
    for name, private in (("api", True), ("web", False), ("infra", True)):
        fake.add_repo("acme", name, private=private)
    fake.add_repo("beta", "granted", private=True)
    fake.add_repo("beta", "withheld", private=True)
    fake.add_repo("gamma", "open", private=False)
    fake.add_repo("gamma", "secret", private=True)  # the personal token's owner is no member: not visible
    fake.add_repo("carol", "notes", private=True)
    fake.install("acme")
    fake.install("beta", repos=("granted",))
    fake.install("carol")
    with fake:
        yield fake


@pytest.fixture(autouse=True)
def fresh(gh, monkeypatch):
    monkeypatch.setenv("GH_APP_KEY", PEM)
    TOKENS.clear()
    gh.reset()
    yield


def conn(gh, **extra) -> dict:
    app = {"type": "github", "id": APP_ID, "privateKey": {"env": "GH_APP_KEY"}, "deploymentHostname": "127.0.0.1"}
    return attach_apps({"type": "github", "url": gh.base_url, **extra}, [app])


def listing(c: dict, token: str | None = None):
    with HostHttp(sleep=lambda s: None) as http:
        return list_github("gh", c, token, http)


def ls_remote(url: str, user: str, password: str) -> subprocess.CompletedProcess:
    cred = base64.b64encode(f"{user}:{password}".encode()).decode()
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "1",
           "GIT_CONFIG_KEY_0": "http.extraHeader", "GIT_CONFIG_VALUE_0": f"Authorization: Basic {cred}"}
    return subprocess.run(["git", "ls-remote", url], env=env, capture_output=True, text=True, timeout=30)


# ----------------------------------------------------------------------------------- listing

H = "127.0.0.1"
LISTINGS = [
    # (connection, personal token, repos listed, warnings)
    ({"orgs": ["acme"]}, None, {"acme/api", "acme/web", "acme/infra"}, []),
    ({"orgs": ["beta"]}, None, {"beta/granted"}, []),  # only what the installation was granted
    ({"users": ["carol"]}, None, {"carol/notes"}, []),  # a user's private repos, through the installation
    ({"repos": ["acme/infra", "beta/granted"]}, None, {"acme/infra", "beta/granted"}, []),
    ({"repos": ["beta/withheld"]}, None, set(), ["repository 'beta/withheld' not found"]),
    ({"orgs": ["gamma"]}, PAT, {"gamma/open"}, ["no GitHub App is installed on 'gamma'.*the connection's token"]),
    ({"orgs": ["gamma"]}, None, {"gamma/open"}, ["no GitHub App is installed on 'gamma'.*public repositories only"]),
    ({"orgs": ["acme"], "repos": ["acme/infra"]}, None, {"acme/api", "acme/web", "acme/infra"}, []),  # one token
    ({"repos": ["gamma/open", "gamma/secret"]}, PAT, {"gamma/open"},
     ["no GitHub App is installed on 'gamma'", "repository 'gamma/secret' not found"]),
    ({"orgs": ["acme", "gamma"], "exclude": {"repos": ["acme/web"]}}, PAT, {"acme/api", "acme/infra", "gamma/open"},
     ["no GitHub App is installed on 'gamma'"]),
]


@pytest.mark.parametrize("extra,token,want,warnings", LISTINGS)
def test_listing_uses_the_installation_of_each_owner(gh, extra, token, want, warnings):
    result = listing(conn(gh, **extra), token)
    assert {r.display_name for r in result.repos} == want
    assert {r.name for r in result.repos} == {f"{H}:{gh.port}/{n}" for n in want}
    assert len(result.warnings) == len(warnings), result.warnings  # one per owner, however often it is named
    for w in warnings:
        assert any(re.search(w, x) for x in result.warnings), result.warnings
    assert all(r.git_user == "x-access-token" for r in result.repos if not r.display_name.startswith("gamma/"))


def test_installation_tokens_are_not_asked_who_they_are(gh):
    issued = gh.tokens_issued()
    listing(conn(gh, orgs=["acme"]))
    paths = [p.split("?")[0] for p in gh.api_paths()]
    assert "/api/v3/user" not in paths  # 403 for an installation token on GitHub
    assert paths.count("/api/v3/installation/repositories") == 2  # 3 repos, pages of 2: the Link was followed
    assert gh.tokens_issued() == issued + 1


def test_the_jwt_is_signed_by_the_app_and_short_lived(gh):
    listing(conn(gh, orgs=["acme"]))
    c = gh.jwt_claims[0]
    assert c["iss"] == APP_ID and c["exp"] - c["iat"] <= 600 and c["iat"] < c["exp"]


@pytest.mark.parametrize("app,error", [
    ({"privateKey": {"env": "OTHER_KEY"}}, "the app's JWT was refused (401)"),  # another app's key
    ({"id": "999"}, "the app's JWT was refused (401)"),  # the key is not app 999's
    ({"privateKey": {"env": "NOT_A_KEY"}}, "privateKey is not an RSA private key in PEM form"),
])
def test_a_wrong_app_fails_the_listing_and_says_why(gh, monkeypatch, app, error):
    monkeypatch.setenv("OTHER_KEY", OTHER_PEM)
    monkeypatch.setenv("NOT_A_KEY", "hello")
    c = {"type": "github", "url": gh.base_url, "orgs": ["acme"],
         APPS_KEY: [{"id": APP_ID, "privateKey": {"env": "GH_APP_KEY"}, "deploymentHostname": H, **app}]}
    with pytest.raises(HostAuthError) as e:
        listing(c)
    assert error in str(e.value)
    assert "BEGIN" not in str(e.value)


def test_a_missing_key_names_the_variable(gh, monkeypatch):
    monkeypatch.delenv("GH_APP_KEY")
    with pytest.raises(ConfigError, match='environment variable "GH_APP_KEY" is not set'):
        listing(conn(gh, orgs=["acme"]))


def test_a_key_on_one_line_with_escaped_newlines_is_read(gh, monkeypatch):
    monkeypatch.setenv("GH_APP_KEY", PEM.replace("\n", "\\n"))
    assert {r.display_name for r in listing(conn(gh, orgs=["beta"])).repos} == {"beta/granted"}


# ----------------------------------------------------------------------------------- tokens

def test_tokens_are_reused_then_refreshed_before_they_expire(gh):
    now = [time.time()]
    issued = gh.tokens_issued()
    cache = InstallationTokens(clock=lambda: now[0])
    apps = conn(gh)[APPS_KEY]
    api = gh.api_url
    with HostHttp() as http:
        first = cache.token_for_owner(api, apps, "acme", http, os.environ)
        now[0] += 50 * 60  # 50 of its 60 minutes: 10 left, more than the 5-minute margin
        assert cache.token_for_owner(api, apps, "acme", http, os.environ) == first
        assert gh.tokens_issued() == issued + 1
        gh.expire_tokens()  # the host says it is over; so does the git server
        assert ls_remote(gh.git.url("acme/api.git"), "x-access-token", first).returncode != 0
        now[0] += 6 * 60  # 4 minutes left by its expires_at: inside the margin, a new one is asked for
        second = cache.token_for_owner(api, apps, "acme", http, os.environ)
    assert second != first and gh.tokens_issued() == issued + 2
    assert ls_remote(gh.git.url("acme/api.git"), "x-access-token", second).returncode == 0
    assert cache.token_for_owner(api, apps, "nobody", HostHttp(), os.environ) is None


def test_each_installation_has_its_own_token(gh):
    c = conn(gh)
    user_a, tok_a = repo_git_credentials("github", c, None, "acme/api")
    user_b, tok_b = repo_git_credentials("github", c, None, "beta/granted")
    assert user_a == user_b == "x-access-token" and tok_a != tok_b
    assert ls_remote(gh.git.url("acme/api.git"), user_a, tok_a).returncode == 0
    # an owner without an installation: the connection's own token, as before
    assert repo_git_credentials("github", c, PAT, "gamma/open") == ("x-access-token", PAT)
    assert repo_git_credentials("github", {"type": "github"}, PAT, "acme/api") == ("x-access-token", PAT)


# ----------------------------------------------------------------------------------- end to end

def test_sync_clones_private_repositories_with_installation_tokens(gh, tmp_path):
    mirrors = MirrorStore(str(tmp_path / "repos"), timeout_s=60)
    index_dir = str(tmp_path / "index")
    report = sync_connection("gh", conn(gh, orgs=["acme", "beta"], users=["carol"]), mirrors=mirrors,
                             index_dir=index_dir, index_settings=IndexSettings())
    assert report.failed == {}
    assert sorted(n.split("/", 1)[1] for n in report.indexed) == [
        "acme/api", "acme/infra", "acme/web", "beta/granted", "carol/notes"]
    git_users = {u for _, _, u in gh.git.requests if u}
    assert git_users == {"x-access-token"}
    resp = Searcher(index_dir).search('"# carol/notes"')
    assert [f["repository"].split("/", 1)[1] for f in resp["files"]] == ["carol/notes"]
    for root, _, files in os.walk(tmp_path / "repos"):  # no token written with the mirrors
        for f in files:
            if f == "config":
                assert "ghs_" not in open(os.path.join(root, f)).read()


# ----------------------------------------------------------------------------------- config

def test_apps_are_attached_to_the_connections_on_their_host():
    apps = [{"type": "github", "id": "1", "privateKey": {"env": "K"}},
            {"type": "github", "id": "2", "privateKey": {"env": "K2"}, "deploymentHostname": "GHE.example.com"}]
    assert attach_apps({"type": "github"}, apps)[APPS_KEY] == [
        {"id": "1", "privateKey": {"env": "K"}, "deploymentHostname": "github.com"}]
    assert [a["id"] for a in attach_apps({"type": "github", "url": "https://ghe.example.com"}, apps)[APPS_KEY]] == ["2"]
    assert APPS_KEY not in attach_apps({"type": "github", "url": "https://other.example.com"}, apps)
    assert APPS_KEY not in attach_apps({"type": "gitlab"}, apps)
    assert attach_apps({"type": "github"}, None) == {"type": "github"}


@pytest.mark.parametrize("doc,warnings", [
    ({"apps": [{"type": "github", "id": "1", "privateKey": {"env": "K"}}],
      "connections": {"gh": {"type": "github", "orgs": ["a"]}}}, []),
    ({"apps": [{"type": "github", "id": "7", "privateKey": {"env": "K"}, "deploymentHostname": "ghe.example.com"}],
      "connections": {"gh": {"type": "github", "orgs": ["a"]}}},
     ["apps[0]: GitHub App 7 is for ghe.example.com, where no github connection is; it is not used"]),
])
def test_config_says_when_an_app_is_for_no_connection(doc, warnings):
    import json

    assert load_config(json.dumps(doc), environ={}).warnings == warnings


def test_module_docstring_states_the_refresh_margin():
    assert github_app.REFRESH_MARGIN_S == 300 and github_app.JWT_LIFETIME_S + github_app.JWT_BACKDATE_S <= 600


def test_cli_sync_reads_the_apps_of_the_config_file(gh, tmp_path, capsys):
    """`codesearch sync` of a Sourcebot config file: the app section reaches the connection."""
    import json

    from codesearch.cli import main

    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "apps": [{"type": "github", "id": APP_ID, "privateKey": {"env": "GH_APP_KEY"}, "deploymentHostname": H}],
        "connections": {"ghe": {"type": "github", "url": gh.base_url, "users": ["carol"]}},
    }))
    assert main(["sync", str(config), "--data-dir", str(tmp_path / "data")]) == 0
    captured = capsys.readouterr()
    assert "ghe: 1 of 1 repositories indexed" in captured.out and "warning" not in captured.err
