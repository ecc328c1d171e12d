"""OAuth 2.0 for MCP clients, end to end: the MCP SDK's own OAuth client (`OAuthClientProvider`)
against the running service on 127.0.0.1 (`tests.oauthworld`): discovery from the 401,
registration, consent on the real page as a signed-in user, tokens, MCP tool calls, refresh,
revocation, and the revoked token refused. Also: the metadata documents, and the audit log."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.oauthworld import OWNER, REDIRECT, Browser, mcp_initialize, oauth_app  # noqa: F401  (fixture)
from tests.conftest import LOCAL


class MemoryStorage:
    """The SDK's `TokenStorage`, in memory."""

    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.token_history: list[OAuthToken] = []

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens
        self.token_history.append(tokens)

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


class ConsentingUser:
    """The SDK's redirect and callback handlers: a signed-in user opens the authorization URL,
    reads the consent page, presses Allow; the redirect's query goes back to the SDK."""

    def __init__(self, browser: Browser):
        self.browser = browser
        self.opened: list[str] = []
        self.result: AuthorizationCodeResult | None = None

    async def redirect_handler(self, url: str) -> None:
        self.opened.append(url)
        page, fields = self.browser.consent_form(url)
        assert page.status_code == 200 and "SDK test client" in page.text, page.text[:1000]
        r = self.browser.decide(fields, "allow")
        assert r.status_code == 303 and r.headers["location"].startswith(REDIRECT + "?")
        q = parse_qs(urlsplit(r.headers["location"]).query)
        self.result = AuthorizationCodeResult(code=q["code"][0], state=q["state"][0], iss=q["iss"][0])

    async def callback_handler(self) -> AuthorizationCodeResult:
        return self.result


async def _call(provider, url: str, tool: str, args: dict | None = None):
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool(tool, args or {})


#: API routes an OAuth access token does not open (it is meant for /api/mcp only)
OTHER_ROUTES = [("GET", "/api/repos"), ("POST", "/api/search"), ("POST", "/api/stream_search"),
                ("GET", "/api/source?repo=r&path=a"), ("GET", "/api/audit"), ("GET", "/api/models")]


@pytest.mark.parametrize("auth_method", ["none", "client_secret_post", "client_secret_basic"])
def test_the_sdk_client_signs_in_calls_refreshes_and_is_revoked(oauth_app, auth_method):
    base, store = oauth_app["url"], oauth_app["store"]
    mcp_url = base + "/api/mcp"
    browser = Browser(base)
    browser.sign_in(OWNER)
    user = ConsentingUser(browser)
    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=mcp_url,
        client_metadata=OAuthClientMetadata(client_name="SDK test client", redirect_uris=[REDIRECT],
                                            grant_types=["authorization_code", "refresh_token"],
                                            response_types=["code"], token_endpoint_auth_method=auth_method),
        storage=storage, redirect_handler=user.redirect_handler, callback_handler=user.callback_handler)

    # 1. discovery from the 401, registration, consent, code, tokens, then the call itself
    res = asyncio.run(_call(provider, mcp_url, "list_repos"))
    assert not res.is_error and json.loads(res.content[0].text)["totalCount"] == 0
    assert len(user.opened) == 1
    asked = parse_qs(urlsplit(user.opened[0]).query)
    assert asked["code_challenge_method"] == ["S256"] and asked["resource"] == [mcp_url]
    assert storage.client.client_id.startswith("cso_client_")
    assert (storage.client.client_secret is None) == (auth_method == "none")
    first = storage.tokens
    assert first.access_token.startswith("cso_at_") and first.refresh_token.startswith("cso_rt_")
    assert first.expires_in == 3600 and set(first.scope.split()) == {"mcp", "offline_access"}  # SEP-2207: the SDK adds it

    # 2. the token works as a plain Bearer token at the MCP endpoint, the resource it was issued
    #    for, and nowhere else: the rest of the API answers as if no key was sent
    assert mcp_initialize(base, first.access_token).status_code == 200
    bearer = {"Authorization": f"Bearer {first.access_token}"}
    for method, path in OTHER_ROUTES:
        got = httpx.request(method, base + path, headers=bearer, json={"query": "x"} if method == "POST" else None)
        assert got.status_code == 401, (path, got.status_code, got.text)
        assert "accepted only by the MCP endpoint" in got.json()["message"]

    # 3. refresh: the SDK refreshes an expired token by itself, with rotation
    provider.context.token_expiry_time = time.time() - 1
    res = asyncio.run(_call(provider, mcp_url, "list_repos"))
    assert not res.is_error
    second = storage.tokens
    assert len(user.opened) == 1  # no second consent
    assert second.access_token != first.access_token and second.refresh_token != first.refresh_token
    old = httpx.post(base + "/oauth/token", data={"grant_type": "refresh_token", "refresh_token": first.refresh_token,
                                                  "client_id": storage.client.client_id,
                                                  **({"client_secret": storage.client.client_secret}
                                                     if auth_method == "client_secret_post" else {})},
                     auth=((storage.client.client_id, storage.client.client_secret)
                           if auth_method == "client_secret_basic" else None))
    assert old.status_code == 400 and old.json()["error"] == "invalid_grant"  # reuse: the whole grant is revoked
    assert mcp_initialize(base, second.access_token).status_code == 401

    # 4. sign in again (a new grant), then revoke its refresh token (RFC 7009): every token of it is refused
    storage.tokens = None
    provider.context.clear_tokens()
    res = asyncio.run(_call(provider, mcp_url, "list_repos"))
    assert not res.is_error and len(user.opened) == 2
    third = storage.tokens
    form = {"token": third.refresh_token, "client_id": storage.client.client_id}
    auth = None
    if auth_method == "client_secret_post":
        form["client_secret"] = storage.client.client_secret
    elif auth_method == "client_secret_basic":
        auth = (storage.client.client_id, storage.client.client_secret)
        del form["client_id"]
    r = httpx.post(base + "/oauth/revoke", data=form, auth=auth)
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    refused = mcp_initialize(base, third.access_token)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/api/mcp", error="invalid_token", '
        'error_description="the access token is invalid, expired or revoked"')
    assert all(t["revoked_at"] is not None for t in store.list_oauth_tokens(OWNER["id"])
               if t["client_id"] == storage.client.client_id)
    browser.close()


def test_the_401_names_the_metadata_and_the_metadata_names_the_server(oauth_app):
    base = oauth_app["url"]
    r = mcp_initialize(base, None)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/api/mcp"'
    assert mcp_initialize(base, "cso_at_not-a-token").headers["www-authenticate"].endswith(
        'error="invalid_token", error_description="the access token is invalid, expired or revoked"')
    for path in ("/.well-known/oauth-protected-resource/api/mcp", "/.well-known/oauth-protected-resource"):
        prm = httpx.get(base + path)
        assert prm.status_code == 200 and prm.headers["cache-control"] == "no-store"
        assert prm.json() == {"resource": f"{base}/api/mcp", "authorization_servers": [base], "scopes_supported": ["mcp"],
                              "bearer_methods_supported": ["header"], "resource_name": "codesearch MCP server"}
    asm = httpx.get(base + "/.well-known/oauth-authorization-server").json()
    assert asm["issuer"] == base
    assert {k: asm[k] for k in ("authorization_endpoint", "token_endpoint", "registration_endpoint",
                                "revocation_endpoint")} == {
        "authorization_endpoint": f"{base}/oauth/authorize", "token_endpoint": f"{base}/oauth/token",
        "registration_endpoint": f"{base}/oauth/register", "revocation_endpoint": f"{base}/oauth/revoke"}
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert asm["response_types_supported"] == ["code"]
    assert set(asm["token_endpoint_auth_methods_supported"]) == {"none", "client_secret_post", "client_secret_basic"}


def test_auth_url_is_the_issuer(tmp_path):
    from codesearch.serving.api import build_app
    from tests.asgiserver import serving
    from tests.oauthworld import make_store

    store = make_store(str(tmp_path / "data"))
    app = build_app(lambda: None, get_store=lambda: store, anonymous_access=False,
                    environ={"AUTH_URL": "https://search.example.com/"})
    with serving(app) as url:
        asm = httpx.get(url + "/.well-known/oauth-authorization-server").json()
        assert asm["issuer"] == "https://search.example.com"
        assert asm["token_endpoint"] == "https://search.example.com/oauth/token"
        assert httpx.get(url + "/.well-known/oauth-protected-resource/api/mcp").json()["resource"] == \
            "https://search.example.com/api/mcp"
        assert mcp_initialize(url, None).headers["www-authenticate"] == \
            'Bearer resource_metadata="https://search.example.com/.well-known/oauth-protected-resource/api/mcp"'
    store.close()


def test_oauth_actions_are_audited_without_secrets(oauth_app):
    store = oauth_app["store"]
    oauth_app["app"].state.services.audit.flush()
    events, _ = store.list_audit_events(per_page=500)
    actions = {e.action for e in events}
    assert {"oauth.client.register", "oauth.consent.grant", "oauth.token.issue", "oauth.token.refresh",
            "oauth.token.revoke", "oauth.replay"} <= actions
    text = json.dumps([[e.actor, e.action, e.target, e.details] for e in events])
    assert "cso_at_" not in text and "cso_rt_" not in text and "cso_ac_" not in text and "cso_cs_" not in text
    issued = next(e for e in events if e.action == "oauth.token.issue")
    assert issued.actor == OWNER["email"] and issued.target.startswith("cso_client_")


def test_under_a_path_prefix_every_url_carries_it(tmp_path):
    """Serve mounts the app under a route prefix (``root_path``): the issuer, the metadata's
    URLs, the 401's header and the way back from the sign-in page all carry it."""
    import warnings

    from codesearch.serving.api import build_app
    from tests.oauthworld import NoSearcher, make_store

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    store = make_store(str(tmp_path / "data"))
    c = TestClient(build_app(lambda: NoSearcher(), get_store=lambda: store, anonymous_access=False, environ={}),
                   base_url=LOCAL, root_path="/cs")
    base = LOCAL + "/cs"
    asm = c.get("/cs/.well-known/oauth-authorization-server").json()
    assert (asm["issuer"], asm["authorization_endpoint"]) == (base, base + "/oauth/authorize")
    assert c.get("/cs/.well-known/oauth-protected-resource/api/mcp").json()["resource"] == base + "/api/mcp"
    assert c.post("/cs/api/mcp", json={}).headers["www-authenticate"] == \
        f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/api/mcp"'
    cid = c.post("/cs/oauth/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
                 ).json()["client_id"]
    r = c.get("/cs/oauth/authorize", params={"client_id": cid, "redirect_uri": REDIRECT, "response_type": "code",
                                             "code_challenge": "a" * 43, "code_challenge_method": "S256"},
              follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/cs/login?next=/cs/oauth/authorize%3F")
    store.close()


@pytest.mark.parametrize("name,value,ok", [
    ("CODESEARCH_OAUTH_ACCESS_TOKEN_TTL_SECONDS", "60", True),
    ("CODESEARCH_OAUTH_ACCESS_TOKEN_TTL_SECONDS", "0", False),
    ("CODESEARCH_OAUTH_REFRESH_TOKEN_TTL_SECONDS", "1.5", False),
    ("CODESEARCH_OAUTH_CODE_TTL_SECONDS", "ten", False),
    ("AUTH_URL", "https://search.example.com/", True),
    ("AUTH_URL", "search.example.com", False),
    ("AUTH_URL", "https://search.example.com/#x", False),
])
def test_oauth_environment_variables(name, value, ok):
    from codesearch import environment
    from codesearch.oauth.server import OAuthSettings

    if ok:
        environment.check({name: value})
        settings = OAuthSettings.from_environ({name: value})
        assert settings.access_ttl == (60 if name.endswith("ACCESS_TOKEN_TTL_SECONDS") else 3600)
        assert (settings.refresh_ttl, settings.code_ttl) == (7_776_000, 600)
        assert settings.issuer == ("https://search.example.com" if name == "AUTH_URL" else None)
    else:
        with pytest.raises(environment.InvalidEnvironmentVariable, match=name):
            environment.check({name: value})


def test_the_lifetimes_come_from_the_environment(tmp_path):
    from codesearch.serving.api import build_app
    from tests.asgiserver import serving
    from tests.oauthworld import NoSearcher, Pkce, authorize_url, make_store, token

    store = make_store(str(tmp_path / "data"))
    app = build_app(lambda: NoSearcher(), get_store=lambda: store, anonymous_access=False,
                    environ={"CODESEARCH_OAUTH_ACCESS_TOKEN_TTL_SECONDS": "120",
                             "CODESEARCH_OAUTH_CODE_TTL_SECONDS": "30"})
    with serving(app) as url:
        cid = httpx.post(url + "/oauth/register", json={"redirect_uris": [REDIRECT],
                                                        "token_endpoint_auth_method": "none"}).json()["client_id"]
        b = Browser(url)
        b.sign_in(OWNER)
        pk = Pkce.make()
        code = b.authorize(authorize_url(cid, pk))["code"][0]
        real = store.clock
        store.clock = lambda: real() + timedelta(seconds=31)
        late = token(url, grant_type="authorization_code", code=code, redirect_uri=REDIRECT, client_id=cid,
                     code_verifier=pk.verifier)
        store.clock = real
        assert late.json()["error"] == "invalid_grant"
        pk = Pkce.make()
        code = b.authorize(authorize_url(cid, pk))["code"][0]
        got = token(url, grant_type="authorization_code", code=code, redirect_uri=REDIRECT, client_id=cid,
                    code_verifier=pk.verifier).json()
        assert got["expires_in"] == 120
        b.close()
    store.close()
