"""Fixtures and helpers for the OAuth tests: the real app (`build_app`) served over HTTP on
127.0.0.1 by uvicorn in a thread (`tests.asgiserver.serving`, stopped when the module ends),
a store with an OWNER and a MEMBER who sign in through the real ``/login`` form, and a browser
stand-in (`Browser`: httpx with cookies) that drives the consent page as a user would.

    from tests.oauthworld import oauth_app  # noqa: F401  (pytest fixture)
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from codesearch.serving.api import build_app
from codesearch.store import Store
from codesearch.accounts import hash_password
from tests.asgiserver import serving

OWNER = {"email": "owner@example.com", "password": "owner-pass-1"}
MEMBER = {"email": "member@example.com", "password": "member-pass-1"}
REDIRECT = "http://127.0.0.1:33333/callback"  # never contacted: the test reads the Location header
_HIDDEN = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')


@dataclass
class Pkce:
    verifier: str
    challenge: str

    @classmethod
    def make(cls) -> "Pkce":
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        return cls(verifier, challenge)


def make_store(path: str) -> Store:
    store = Store.open(path)
    owner = store.create_user(OWNER["email"], "Owner", password_hash=hash_password(OWNER["password"]))
    member = store.create_user(MEMBER["email"], "Member", password_hash=hash_password(MEMBER["password"]))
    OWNER["id"], MEMBER["id"] = owner.id, member.id
    return store


class NoSearcher:
    """The searcher of an app with no index: every search finds nothing."""

    def search(self, query, options=None):
        return {"files": [], "stats": {}, "repositoryInfo": []}


@pytest.fixture(scope="module")
def oauth_app(tmp_path_factory):
    """``{"url", "store", "app"}``: the service on 127.0.0.1 (anonymous access off)."""
    store = make_store(str(tmp_path_factory.mktemp("oauth") / "data"))
    # many clients register from 127.0.0.1 here: the per-address limit is tests/service/test_security_oauth.py's
    environ = {"CODESEARCH_OAUTH_REGISTRATIONS_PER_ADDRESS": "1000"}
    app = build_app(lambda: NoSearcher(), get_store=lambda: store, anonymous_access=False, environ=environ)
    with serving(app, lifespan="on") as url:
        yield {"url": url, "store": store, "app": app}
    store.close()


class Browser:
    """A user's browser: cookies, no redirects followed (the test looks at each one)."""

    def __init__(self, base: str):
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=30, follow_redirects=False)

    def close(self):
        self.http.close()

    def csrf(self, page: str) -> str:
        return re.search(r'<meta name="csrf-token" content="([^"]*)">', page).group(1)

    def sign_in(self, account: dict, next: str = "") -> httpx.Response:
        page = self.http.get("/login")
        r = self.http.post("/login", data={"email": account["email"], "password": account["password"],
                                           "next": next, "csrf_token": self.csrf(page.text)})
        assert r.status_code == 303, r.text
        return r

    def consent_form(self, authorize_url: str) -> tuple[httpx.Response, dict[str, str]]:
        """GET the authorization URL: the consent page and its hidden fields."""
        r = self.http.get(authorize_url)
        fields = {html.unescape(k): html.unescape(v) for k, v in _HIDDEN.findall(r.text)} if r.status_code == 200 else {}
        return r, fields

    def decide(self, fields: dict[str, str], decision: str = "allow") -> httpx.Response:
        return self.http.post("/oauth/authorize", data={**fields, "decision": decision})

    def authorize(self, authorize_url: str, decision: str = "allow") -> dict[str, list[str]]:
        """The whole consent: the page, the click, and the query of the redirect it ends in."""
        page, fields = self.consent_form(authorize_url)
        assert page.status_code == 200 and "Allow access to codesearch?" in page.text, page.text[:2000]
        r = self.decide(fields, decision)
        assert r.status_code == 303, r.text
        return redirect_query(r)


def redirect_query(r: httpx.Response) -> dict[str, list[str]]:
    return parse_qs(urlsplit(r.headers["location"]).query, keep_blank_values=True)


def register(base: str, **metadata) -> httpx.Response:
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "client_name": "test client",
            "grant_types": ["authorization_code", "refresh_token"], **metadata}
    return httpx.post(base + "/oauth/register", json=body, timeout=30)


def authorize_url(client_id: str, pkce: Pkce, state: str = "st-1", **extra) -> str:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": state,
              "code_challenge": pkce.challenge, "code_challenge_method": "S256", **extra}
    return "/oauth/authorize?" + urlencode({k: v for k, v in params.items() if v is not None})


def token(base: str, auth=None, **form) -> httpx.Response:
    return httpx.post(base + "/oauth/token", data={k: v for k, v in form.items() if v is not None}, auth=auth,
                      timeout=30)


def get_code(base: str, browser: Browser, client_id: str, pkce: Pkce | None = None, **extra) -> tuple[str, Pkce]:
    pkce = pkce or Pkce.make()
    q = browser.authorize(authorize_url(client_id, pkce, **extra))
    return q["code"][0], pkce


def tokens_for(base: str, browser: Browser, client_id: str) -> dict:
    code, pkce = get_code(base, browser, client_id)
    r = token(base, grant_type="authorization_code", code=code, redirect_uri=REDIRECT, client_id=client_id,
              code_verifier=pkce.verifier)
    assert r.status_code == 200, r.text
    return r.json()


def mcp_initialize(base: str, bearer: str | None) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    return httpx.post(base + "/api/mcp", json=body, headers=headers, timeout=30)
