"""OAuth 2.0 for MCP clients: what is refused, and how (the abuse table).

Every case runs against the real service on 127.0.0.1 (`tests.oauthworld`) with real HTTP
requests: registration (RFC 7591 errors), the authorization endpoint (every refused request
is a page saying what is wrong, never a redirect to the client: RFC 9700 §4.11.2), the consent
form (CSRF; a changed form is refused like a bad request; only the user's Deny goes back to the
client, as ``access_denied``), the token endpoint (RFC 6749 errors: replayed codes, PKCE, redirect
URIs, clients, expiry, refresh token reuse), revocation (RFC 7009), expired and revoked access
tokens at the MCP endpoint, and no secret in any log line.
"""

from __future__ import annotations

import base64
import html
import logging
from datetime import timedelta
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest

from codesearch.oauth import redirects as oauth_redirects
from tests.oauthworld import (
    MEMBER,
    OWNER,
    REDIRECT,
    Browser,
    Pkce,
    authorize_url,
    get_code,
    mcp_initialize,
    oauth_app,  # noqa: F401  (fixture)
    register,
    token,
    tokens_for,
)


@pytest.fixture(scope="module")
def base(oauth_app):
    return oauth_app["url"]


@pytest.fixture(scope="module")
def owner(base):
    b = Browser(base)
    b.sign_in(OWNER)
    yield b
    b.close()


@pytest.fixture(scope="module")
def client_id(base):
    r = register(base)
    assert r.status_code == 201, r.text
    return r.json()["client_id"]


@pytest.fixture
def clock(oauth_app):
    """Move the store's clock: `clock(seconds)` from now on."""
    store = oauth_app["store"]
    real = store.clock

    def move(seconds: float):
        store.clock = lambda: real() + timedelta(seconds=seconds)

    yield move
    store.clock = real


# ---------------------------------------------------------------------- registration (RFC 7591)

BAD_REGISTRATIONS = [
    # (what is wrong, registration fields, the RFC 7591 error)
    ("no redirect_uris", {"redirect_uris": None}, "invalid_redirect_uri"),
    ("empty redirect_uris", {"redirect_uris": []}, "invalid_redirect_uri"),
    ("redirect_uris not a list", {"redirect_uris": "https://a.example/cb"}, "invalid_redirect_uri"),
    ("http on a public host", {"redirect_uris": ["http://app.example.com/cb"]}, "invalid_redirect_uri"),
    ("http on a look-alike of loopback", {"redirect_uris": ["http://127.0.0.1.evil.example/cb"]}, "invalid_redirect_uri"),
    ("http on localhost.evil", {"redirect_uris": ["http://localhost.evil.example/cb"]}, "invalid_redirect_uri"),
    ("a fragment", {"redirect_uris": ["https://app.example.com/cb#x"]}, "invalid_redirect_uri"),
    ("user information", {"redirect_uris": ["https://good.example@evil.example/cb"]}, "invalid_redirect_uri"),
    ("javascript:", {"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
    ("data:", {"redirect_uris": ["data:text/html,hi"]}, "invalid_redirect_uri"),
    ("a relative URI", {"redirect_uris": ["/callback"]}, "invalid_redirect_uri"),
    ("a scheme-relative URI", {"redirect_uris": ["//evil.example/cb"]}, "invalid_redirect_uri"),
    ("https without a host", {"redirect_uris": ["https:///cb"]}, "invalid_redirect_uri"),
    ("a space", {"redirect_uris": ["https://app.example.com/c b"]}, "invalid_redirect_uri"),
    ("a non-string", {"redirect_uris": [42]}, "invalid_redirect_uri"),
    ("too many", {"redirect_uris": [f"https://app.example.com/{i}" for i in range(11)]}, "invalid_redirect_uri"),
    ("too long", {"redirect_uris": ["https://app.example.com/" + "a" * 2000]}, "invalid_redirect_uri"),
    ("one bad among good", {"redirect_uris": [REDIRECT, "http://evil.example/cb"]}, "invalid_redirect_uri"),
    ("private_key_jwt", {"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
    ("client_credentials", {"grant_types": ["client_credentials"]}, "invalid_client_metadata"),
    ("implicit", {"grant_types": ["authorization_code", "implicit"]}, "invalid_client_metadata"),
    ("response_type token", {"response_types": ["token"]}, "invalid_client_metadata"),
    ("unknown scope", {"scope": "mcp admin"}, "invalid_client_metadata"),
    ("a long name", {"client_name": "x" * 201}, "invalid_client_metadata"),
    ("a javascript: client_uri", {"client_uri": "javascript:alert(1)"}, "invalid_client_metadata"),
    ("a huge unknown field", {"software_statement_padding": "x" * 5000}, "invalid_client_metadata"),
]


@pytest.mark.parametrize("what,fields,error", BAD_REGISTRATIONS, ids=[c[0] for c in BAD_REGISTRATIONS])
def test_bad_registrations_are_refused(base, what, fields, error):
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", **fields}
    body = {k: v for k, v in body.items() if v is not None}
    r = httpx.post(base + "/oauth/register", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"] == error and r.json()["error_description"]
    assert r.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("raw,content_type", [(b"{not json", "application/json"), (b"[1, 2]", "application/json"),
                                              (b"redirect_uris=x", "application/x-www-form-urlencoded")])
def test_registration_must_be_a_json_object(base, raw, content_type):
    r = httpx.post(base + "/oauth/register", content=raw, headers={"content-type": content_type})
    assert r.status_code == 400 and r.json()["error"] == "invalid_client_metadata"


GOOD_REDIRECTS = ["http://127.0.0.1:8080/cb", "http://localhost/cb", "http://[::1]:9999/cb",
                  "https://app.example.com/cb?x=1", "com.example.app:/callback", "com.example.app://oauth/cb"]


@pytest.mark.parametrize("uri", GOOD_REDIRECTS)
def test_good_redirect_uris_are_accepted(base, uri):
    r = register(base, redirect_uris=[uri])
    assert r.status_code == 201, r.text
    assert r.json()["redirect_uris"] == [uri] and "client_secret" not in r.json()


@pytest.mark.parametrize("method", ["client_secret_post", "client_secret_basic", None])
def test_confidential_clients_see_their_secret_once_and_it_is_stored_hashed(base, oauth_app, method):
    fields = {"token_endpoint_auth_method": method} if method else {"token_endpoint_auth_method": None}
    body = {"redirect_uris": [REDIRECT], **{k: v for k, v in fields.items() if v}}
    r = httpx.post(base + "/oauth/register", json=body)
    assert r.status_code == 201
    got = r.json()
    assert got["token_endpoint_auth_method"] == (method or "client_secret_basic")  # RFC 7591's default
    assert got["client_secret"].startswith("cso_cs_") and got["client_secret_expires_at"] == 0
    with oauth_app["store"].engine.connect() as c:
        stored = c.exec_driver_sql("SELECT secret_hash, metadata FROM oauth_clients WHERE id = ?",
                                   (got["client_id"],)).one()
    assert stored[0] == oauth_app["store"].oauth_hash(got["client_secret"]) and got["client_secret"] not in stored[1]


# ---------------------------------------------------------------------- authorization endpoint


REFUSED_REQUESTS = [
    # (what is wrong, the authorization request's parameters changed (None removes one), the OAuth
    #  error the page names for the developer, words the page says to the user). Every one is a
    #  page, never a redirect: not when the client or its redirect URI is wrong (nowhere safe to
    #  go), and not otherwise either, since anyone may register a client with any redirect URI
    #  and the user has done nothing yet (RFC 9700 §4.11.2: no open redirector).
    ("no client_id", {"client_id": None}, "invalid_client", "not registered on this server"),
    ("unknown client_id", {"client_id": "cso_client_nope"}, "invalid_client", "not registered on this server"),
    ("no redirect_uri", {"redirect_uri": None}, "invalid_request", "does not say where to send you back"),
    ("an unregistered redirect_uri", {"redirect_uri": "https://evil.example/cb"}, "invalid_request",
     "did not register"),
    ("a redirect_uri with an extra path", {"redirect_uri": REDIRECT + "/../evil"}, "invalid_request",
     "did not register"),
    ("a redirect_uri with an extra query", {"redirect_uri": REDIRECT + "?next=https://evil.example"},
     "invalid_request", "did not register"),
    ("a redirect_uri in another case", {"redirect_uri": REDIRECT.upper()}, "invalid_request", "did not register"),
    ("a redirect_uri with a trailing slash", {"redirect_uri": REDIRECT + "/"}, "invalid_request", "did not register"),
    ("response_type token", {"response_type": "token"}, "unsupported_response_type",
     "only the authorization code flow is supported"),
    ("no response_type", {"response_type": None}, "unsupported_response_type",
     "only the authorization code flow is supported"),
    ("no PKCE", {"code_challenge": None, "code_challenge_method": None}, "invalid_request",
     "did not protect the request with PKCE"),
    ("PKCE plain", {"code_challenge_method": "plain"}, "invalid_request", "accepts only S256"),
    ("PKCE without a method (plain by default)", {"code_challenge_method": None}, "invalid_request",
     "accepts only S256"),
    ("a malformed code_challenge", {"code_challenge": "short"}, "invalid_request", "code_challenge is malformed"),
    ("an unknown scope", {"scope": "mcp admin"}, "invalid_scope", "a permission this server does not know ('admin')"),
    ("another resource", {"resource": "https://evil.example/api/mcp"}, "invalid_target",
     "access to another server"),
    ("a resource on another path", {"resource": "RESOURCE/../admin"}, "invalid_target", "access to another server"),
    ("a state too long", {"state": "x" * 1001}, "invalid_request", "state is longer than 1000 characters"),
]


def _authorize_params(base: str, client_id: str, changes: dict) -> dict[str, str]:
    """A good authorization request's parameters, with `changes` (None removes a parameter)."""
    q = {k: v[0] for k, v in parse_qs(urlsplit(authorize_url(client_id, Pkce.make(), state="s t&a=te/é")).query).items()}
    for k, v in changes.items():
        if v is None:
            q.pop(k, None)
        else:
            q[k] = v.replace("RESOURCE", base + "/api/mcp")
    return q


def _assert_refusal_page(r: httpx.Response, error: str, words: str) -> None:
    assert r.status_code == 400, r.text
    assert "location" not in r.headers and r.headers["cache-control"] == "no-store"
    assert "This authorization request cannot be used" in r.text
    assert words in html.unescape(r.text), r.text
    assert f"<code>{error}</code>" in r.text  # the OAuth error, for the developer, below the words
    assert "you were not sent back to the application" in r.text
    assert "127.0.0.1:33333" not in r.text and "evil.example" not in r.text  # no link to the client either


@pytest.mark.parametrize("what,changes,error,words", REFUSED_REQUESTS, ids=[c[0] for c in REFUSED_REQUESTS])
@pytest.mark.parametrize("signed_in", [True, False], ids=["signed-in", "visitor"])
def test_a_refused_authorization_request_is_a_page_never_a_redirect(base, owner, client_id, what, changes, error,
                                                                     words, signed_in):
    http = owner.http if signed_in else httpx.Client(base_url=base)
    r = http.get("/oauth/authorize", params=_authorize_params(base, client_id, changes))
    _assert_refusal_page(r, error, words)


def test_a_repeated_parameter_is_a_page(base, owner, client_id):
    other = register(base).json()["client_id"]
    pk = Pkce.make()
    for extra, words in ((f"&client_id={other}", "gives client_id more than once"),
                         ("&redirect_uri=" + quote("https://evil.example/cb", safe=""),
                          "gives redirect_uri more than once"),
                         ("&scope=mcp&scope=offline_access", "gives scope more than once"),
                         ("&state=other", "gives state more than once")):
        r = owner.http.get(authorize_url(client_id, pk) + extra)
        _assert_refusal_page(r, "invalid_request", words)


def test_a_visitor_signs_in_first_and_comes_back_to_the_consent_page(base, client_id):
    visitor = Browser(base)
    url = authorize_url(client_id, Pkce.make())
    r = visitor.http.get(url)
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")
    next_ = parse_qs(urlsplit(r.headers["location"]).query)["next"][0]
    assert next_ == url
    back = visitor.sign_in(MEMBER, next=next_)
    assert back.headers["location"] == url
    page, fields = visitor.consent_form(url)
    assert page.status_code == 200 and MEMBER["email"] in page.text and fields["client_id"] == client_id
    visitor.close()


@pytest.mark.parametrize("next_", ["https://evil.example/", "//evil.example/", "/\\evil.example", "javascript:alert(1)"])
def test_signing_in_never_leaves_the_site(base, next_):
    b = Browser(base)
    assert b.sign_in(MEMBER, next=next_).headers["location"] == "/"
    b.close()


def test_the_consent_page_shows_the_client_escaped_and_cannot_be_framed(base, owner):
    cid = register(base, client_name='<script>alert("x")</script>').json()["client_id"]
    r = owner.http.get(authorize_url(cid, Pkce.make()))
    assert r.status_code == 200
    assert "<script>alert" not in r.text and "&lt;script&gt;alert" in r.text
    assert r.headers["x-frame-options"] == "DENY" and r.headers["cache-control"] == "no-store"


# ---------------------------------------------------------------------- the consent form


def test_consent_needs_the_csrf_token_of_the_signed_in_session(base, owner, client_id):
    page, fields = owner.consent_form(authorize_url(client_id, Pkce.make()))
    other = Browser(base)
    other.sign_in(MEMBER)
    _, other_fields = other.consent_form(authorize_url(client_id, Pkce.make()))
    for token_value in (None, "", "forged", other_fields["csrf_token"]):
        form = {**fields, "decision": "allow"}
        if token_value is None:
            del form["csrf_token"]
        else:
            form["csrf_token"] = token_value
        r = owner.http.post("/oauth/authorize", data=form)
        assert r.status_code == 403 and "location" not in r.headers, token_value
    other.close()


def test_a_consent_post_without_a_session_is_refused(base, owner, client_id):
    _, fields = owner.consent_form(authorize_url(client_id, Pkce.make()))
    r = httpx.post(base + "/oauth/authorize", data={**fields, "decision": "allow"})
    assert r.status_code in (401, 403) and "location" not in r.headers


TAMPERED_CONSENTS = [
    # (the consent form's field changed by hand, the OAuth error, words of the page): checked
    # again, and a page like on GET (a form the page did not send is no user's answer)
    ("redirect_uri", "https://evil.example/cb", "invalid_request", "did not register"),
    ("client_id", "cso_client_nope", "invalid_client", "not registered on this server"),
    ("code_challenge_method", "plain", "invalid_request", "accepts only S256"),
    ("scope", "mcp admin", "invalid_scope", "does not know"),
    ("resource", "https://evil.example/api/mcp", "invalid_target", "access to another server"),
]


@pytest.mark.parametrize("field,value,error,words", TAMPERED_CONSENTS, ids=[c[0] for c in TAMPERED_CONSENTS])
@pytest.mark.parametrize("decision", ["allow", "deny"])
def test_a_tampered_consent_form_is_checked_again(base, owner, client_id, oauth_app, field, value, error, words,
                                                  decision):
    _, fields = owner.consent_form(authorize_url(client_id, Pkce.make()))
    before = _count_codes(oauth_app)
    r = owner.decide({**fields, field: value}, decision)
    _assert_refusal_page(r, error, words)
    assert _count_codes(oauth_app) == before  # no code issued


def _count_codes(app) -> int:
    with app["store"].engine.connect() as c:
        return c.exec_driver_sql("SELECT count(*) FROM oauth_codes").scalar()


def test_deny_sends_access_denied_with_the_state(base, owner, client_id):
    got = owner.authorize(authorize_url(client_id, Pkce.make(), state="xyz"), decision="deny")
    assert got == {"error": ["access_denied"], "error_description": ["the user denied access"], "state": ["xyz"],
                   "iss": [base]}


@pytest.mark.parametrize("state", [None, "", "a", "ünï cødé & = ? # /", "x" * 500])
def test_the_state_is_echoed_exactly(base, owner, client_id, state):
    got = owner.authorize(authorize_url(client_id, Pkce.make(), state=state))
    assert got.get("state") == (None if state is None else [state])
    assert got["code"][0].startswith("cso_ac_")


# ---------------------------------------------------------------------- the token endpoint


def _exchange(base, cid, the_code, pkce, **over):
    form = {"grant_type": "authorization_code", "code": the_code, "redirect_uri": REDIRECT, "client_id": cid,
            "code_verifier": pkce.verifier, **over}
    return token(base, **form)


CODE_ERRORS = [
    # (what is wrong, form fields changed, status, error)
    ("another verifier (PKCE mismatch)", {"code_verifier": Pkce.make().verifier}, 400, "invalid_grant"),
    ("the challenge sent as the verifier (plain)", {"code_verifier": "CHALLENGE"}, 400, "invalid_grant"),
    ("a malformed verifier", {"code_verifier": "short"}, 400, "invalid_request"),
    ("no verifier", {"code_verifier": None}, 400, "invalid_request"),
    ("another redirect_uri", {"redirect_uri": "http://127.0.0.1:33333/other"}, 400, "invalid_grant"),
    ("no redirect_uri", {"redirect_uri": None}, 400, "invalid_request"),
    ("an unknown code", {"code": "cso_ac_nope"}, 400, "invalid_grant"),
    ("no code", {"code": None}, 400, "invalid_request"),
    ("an unknown client", {"client_id": "cso_client_nope"}, 401, "invalid_client"),
    ("no client", {"client_id": None}, 401, "invalid_client"),
    ("another client", {"client_id": "OTHER"}, 400, "invalid_grant"),
    ("a secret for a public client", {"client_secret": "cso_cs_guess"}, 401, "invalid_client"),
    ("another resource", {"resource": "https://evil.example/api/mcp"}, 400, "invalid_target"),
    ("an unknown grant type", {"grant_type": "password"}, 400, "unsupported_grant_type"),
    ("the implicit grant", {"grant_type": "implicit"}, 400, "unsupported_grant_type"),
    ("no grant type", {"grant_type": None}, 400, "invalid_request"),
]


@pytest.mark.parametrize("what,over,status,error", CODE_ERRORS, ids=[c[0] for c in CODE_ERRORS])
def test_bad_code_exchanges_are_refused(base, owner, client_id, what, over, status, error):
    code, pk = get_code(base, owner, client_id)
    other = register(base).json()["client_id"]
    over = {k: (other if v == "OTHER" else pk.challenge if v == "CHALLENGE" else v) for k, v in over.items()}
    r = _exchange(base, client_id, code, pk, **over)
    assert (r.status_code, r.json()["error"]) == (status, error), r.text
    assert r.headers["cache-control"] == "no-store" and r.headers["pragma"] == "no-cache"
    assert "access_token" not in r.json()


def test_a_code_is_usable_once_and_a_replay_revokes_its_tokens(base, owner, client_id, oauth_app):
    code, pk = get_code(base, owner, client_id)
    first = _exchange(base, client_id, code, pk)
    assert first.status_code == 200
    access, refresh = first.json()["access_token"], first.json()["refresh_token"]
    assert mcp_initialize(base, access).status_code == 200
    replay = _exchange(base, client_id, code, pk)
    assert (replay.status_code, replay.json()["error"]) == (400, "invalid_grant")
    assert mcp_initialize(base, access).status_code == 401  # the replay revoked the grant
    r = token(base, grant_type="refresh_token", refresh_token=refresh, client_id=client_id)
    assert r.json()["error"] == "invalid_grant"


def test_a_failed_pkce_check_uses_the_code_up(base, owner, client_id):
    code, pk = get_code(base, owner, client_id)
    assert _exchange(base, client_id, code, pk, code_verifier=Pkce.make().verifier).json()["error"] == "invalid_grant"
    assert _exchange(base, client_id, code, pk).json()["error"] == "invalid_grant"


def test_a_code_presented_by_another_client_still_works_for_its_own(base, owner, client_id):
    code, pk = get_code(base, owner, client_id)
    other = register(base).json()["client_id"]
    assert _exchange(base, other, code, pk).json()["error"] == "invalid_grant"
    assert _exchange(base, client_id, code, pk).status_code == 200


def test_an_expired_code_is_refused(base, owner, client_id, clock):
    code, pk = get_code(base, owner, client_id)
    clock(601)
    r = _exchange(base, client_id, code, pk)
    assert (r.status_code, r.json()["error"]) == (400, "invalid_grant") and "expired" in r.json()["error_description"]


@pytest.mark.parametrize("body,content_type", [
    ("grant_type=authorization_code&grant_type=refresh_token", "application/x-www-form-urlencoded"),
    ('{"grant_type": "authorization_code"}', "application/json"),
])
def test_malformed_token_requests(base, body, content_type):
    r = httpx.post(base + "/oauth/token", content=body, headers={"content-type": content_type})
    assert (r.status_code, r.json()["error"]) == (400, "invalid_request")


def test_confidential_clients_must_authenticate_as_registered(base, owner):
    reg = register(base, token_endpoint_auth_method="client_secret_basic").json()
    cid, secret = reg["client_id"], reg["client_secret"]
    cases = [
        # (how the client authenticates, status, error)
        (dict(auth=None, client_id=cid), 401, "invalid_client"),  # no secret
        (dict(auth=(cid, "cso_cs_wrong")), 401, "invalid_client"),  # a wrong secret
        (dict(auth=None, client_id=cid, client_secret=secret), 401, "invalid_client"),  # post, registered basic
        (dict(auth=(cid, secret), client_id="cso_client_other"), 400, "invalid_request"),  # two client ids
    ]
    for how, status, error in cases:
        code, pk = get_code(base, owner, cid)
        auth = how.pop("auth")
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                "code_verifier": pk.verifier, **how}
        r = token(base, auth=auth, **form)
        assert (r.status_code, r.json()["error"]) == (status, error), (how, r.text)
        if status == 401 and auth is not None:
            assert r.headers["www-authenticate"].startswith("Basic")
    r = httpx.post(base + "/oauth/token", data={"grant_type": "authorization_code"},
                   headers={"Authorization": "Basic !!!not base64"})
    assert (r.status_code, r.json()["error"]) == (401, "invalid_client")
    code, pk = get_code(base, owner, cid)
    r = token(base, auth=(cid, secret), grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
              code_verifier=pk.verifier)
    assert r.status_code == 200, r.text


# ---------------------------------------------------------------------- refresh tokens


def test_refresh_rotates_and_a_reused_refresh_token_revokes_the_grant(base, owner, client_id):
    t0 = tokens_for(base, owner, client_id)
    r1 = token(base, grant_type="refresh_token", refresh_token=t0["refresh_token"], client_id=client_id)
    assert r1.status_code == 200
    t1 = r1.json()
    assert t1["refresh_token"] != t0["refresh_token"] and t1["access_token"] != t0["access_token"]
    assert mcp_initialize(base, t1["access_token"]).status_code == 200
    reuse = token(base, grant_type="refresh_token", refresh_token=t0["refresh_token"], client_id=client_id)
    assert (reuse.status_code, reuse.json()["error"]) == (400, "invalid_grant")
    for access in (t0["access_token"], t1["access_token"]):
        assert mcp_initialize(base, access).status_code == 401
    r = token(base, grant_type="refresh_token", refresh_token=t1["refresh_token"], client_id=client_id)
    assert r.json()["error"] == "invalid_grant"  # the newest one too: the whole grant


REFRESH_ERRORS = [
    # (what is wrong, form fields changed, status, error)
    ("another client", {"client_id": "OTHER"}, 400, "invalid_grant"),
    ("an access token as refresh token", {"refresh_token": "ACCESS"}, 400, "invalid_grant"),
    ("an unknown refresh token", {"refresh_token": "cso_rt_nope"}, 400, "invalid_grant"),
    ("no refresh token", {"refresh_token": None}, 400, "invalid_request"),
    ("more scope than granted", {"scope": "mcp admin"}, 400, "invalid_scope"),
    ("another resource", {"resource": "https://evil.example/api/mcp"}, 400, "invalid_target"),
]


@pytest.mark.parametrize("what,over,status,error", REFRESH_ERRORS, ids=[c[0] for c in REFRESH_ERRORS])
def test_bad_refreshes_are_refused_and_leave_the_token_usable(base, owner, client_id, what, over, status, error):
    t = tokens_for(base, owner, client_id)
    other = register(base).json()["client_id"]
    form = {"grant_type": "refresh_token", "refresh_token": t["refresh_token"], "client_id": client_id}
    form.update({k: (other if v == "OTHER" else t["access_token"] if v == "ACCESS" else v) for k, v in over.items()})
    r = token(base, **form)
    assert (r.status_code, r.json()["error"]) == (status, error), r.text
    ok = token(base, grant_type="refresh_token", refresh_token=t["refresh_token"], client_id=client_id)
    assert ok.status_code == 200, ok.text


def test_an_expired_refresh_token_is_refused(base, owner, client_id, clock):
    t = tokens_for(base, owner, client_id)
    clock(90 * 86400 + 1)
    r = token(base, grant_type="refresh_token", refresh_token=t["refresh_token"], client_id=client_id)
    assert (r.status_code, r.json()["error"]) == (400, "invalid_grant")


def test_a_client_without_the_refresh_grant_gets_no_refresh_token(base, owner):
    cid = register(base, grant_types=["authorization_code"]).json()["client_id"]
    t = tokens_for(base, owner, cid)
    assert "refresh_token" not in t


# ---------------------------------------------------------------------- access tokens at the MCP endpoint


BEARERS = [
    # (what is presented, 401's error="invalid_token"?)
    ("nothing", None, False),
    ("an unknown access token", "cso_at_" + "A" * 43, True),
    ("a refresh token", "REFRESH", True),
    ("an authorization code", "CODE", True),
    ("a client secret", "SECRET", True),
    ("garbage", "not a token", True),
]


@pytest.mark.parametrize("what,bearer,invalid", BEARERS, ids=[c[0] for c in BEARERS])
def test_only_access_tokens_open_the_mcp_endpoint(base, owner, client_id, what, bearer, invalid):
    t = tokens_for(base, owner, client_id)
    code, _ = get_code(base, owner, client_id)
    secret = register(base, token_endpoint_auth_method="client_secret_post").json()["client_secret"]
    bearer = {"REFRESH": t["refresh_token"], "CODE": code, "SECRET": secret}.get(bearer, bearer)
    r = mcp_initialize(base, bearer)
    assert r.status_code == 401
    assert ('error="invalid_token"' in r.headers["www-authenticate"]) == invalid
    assert r.headers["www-authenticate"].startswith(f'Bearer resource_metadata="{base}/.well-known/')


def test_an_expired_access_token_is_refused(base, owner, client_id, clock):
    t = tokens_for(base, owner, client_id)
    assert mcp_initialize(base, t["access_token"]).status_code == 200
    clock(3601)
    r = mcp_initialize(base, t["access_token"])
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]


def test_the_members_token_is_the_member(base, client_id):
    member = Browser(base)
    member.sign_in(MEMBER)
    t = tokens_for(base, member, client_id)
    assert mcp_initialize(base, t["access_token"]).status_code == 200
    # outside the MCP endpoint the token opens nothing (it never reaches the owners' audit log)
    r = httpx.get(base + "/api/audit", headers={"Authorization": f"Bearer {t['access_token']}"})
    assert r.status_code == 401
    member.close()


# ---------------------------------------------------------------------- revocation (RFC 7009)


def test_revocation(base, owner, client_id):
    t = tokens_for(base, owner, client_id)
    other = register(base).json()["client_id"]
    revoke = lambda tok, cid: httpx.post(base + "/oauth/revoke", data={"token": tok, "client_id": cid})  # noqa: E731
    # unknown tokens and other clients' tokens: 200, and nothing happens (RFC 7009 §2.2)
    assert revoke("cso_at_unknown", client_id).status_code == 200
    assert revoke(t["access_token"], other).status_code == 200
    assert mcp_initialize(base, t["access_token"]).status_code == 200
    # an access token: only itself
    assert revoke(t["access_token"], client_id).status_code == 200
    assert mcp_initialize(base, t["access_token"]).status_code == 401
    t2 = token(base, grant_type="refresh_token", refresh_token=t["refresh_token"], client_id=client_id).json()
    assert mcp_initialize(base, t2["access_token"]).status_code == 200
    # a refresh token: the whole grant
    assert revoke(t2["refresh_token"], client_id).status_code == 200
    assert mcp_initialize(base, t2["access_token"]).status_code == 401
    assert token(base, grant_type="refresh_token", refresh_token=t2["refresh_token"],
                 client_id=client_id).json()["error"] == "invalid_grant"
    # client authentication is required
    r = httpx.post(base + "/oauth/revoke", data={"token": t2["access_token"]})
    assert (r.status_code, r.json()["error"]) == (401, "invalid_client")
    r = httpx.post(base + "/oauth/revoke", data={"client_id": client_id})
    assert (r.status_code, r.json()["error"]) == (400, "invalid_request")


# ---------------------------------------------------------------------- connected apps (/settings/apps)


def test_a_visitor_is_sent_to_sign_in_for_the_connected_apps(base):
    r = httpx.get(base + "/settings/apps")
    assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")


REFUSED_APP_REVOCATIONS = [
    # (who posts, to which client, with which CSRF token, status): the app keeps its access
    ("the owner, without a CSRF token", "MINE", None, 403),
    ("the owner, with a forged CSRF token", "MINE", "forged", 403),
    ("the owner, with the member's CSRF token", "MINE", "THEIRS", 403),
    ("the member, for an app only the owner allowed", "MINE", "OWN", 404),
    ("the owner, for an unknown client", "cso_client_nope", "OWN", 404),
    ("the owner, for a client never allowed", "NEVER", "OWN", 404),
]


@pytest.mark.parametrize("who,target,csrf,status", REFUSED_APP_REVOCATIONS,
                         ids=[c[0] for c in REFUSED_APP_REVOCATIONS])
def test_refused_app_revocations_leave_the_access(base, owner, who, target, csrf, status):
    cid = register(base).json()["client_id"]
    t = tokens_for(base, owner, cid)
    member = Browser(base)
    member.sign_in(MEMBER)
    poster = member if who.startswith("the member") else owner
    tokens = {"OWN": poster.csrf(poster.http.get("/settings/apps").text),
              "THEIRS": member.csrf(member.http.get("/settings/apps").text)}
    target = {"MINE": cid, "NEVER": register(base).json()["client_id"]}.get(target, target)
    form = {} if csrf is None else {"csrf_token": tokens.get(csrf, csrf)}
    r = poster.http.post(f"/settings/apps/{target}/revoke", data=form)
    member.close()
    assert r.status_code == status, r.text
    assert mcp_initialize(base, t["access_token"]).status_code == 200
    assert f'data-client-id="{cid}"' in owner.http.get("/settings/apps").text


def test_revoking_an_app_twice_finds_nothing_the_second_time(base, owner, oauth_app):
    cid = register(base).json()["client_id"]
    tokens_for(base, owner, cid)
    code, pk = get_code(base, owner, cid)  # allowed again, its code not exchanged yet
    csrf = owner.csrf(owner.http.get("/settings/apps").text)
    first = owner.http.post(f"/settings/apps/{cid}/revoke", data={"csrf_token": csrf})
    assert first.status_code == 303 and first.headers["location"] == f"/settings/apps?revoked={cid}"
    again = owner.http.post(f"/settings/apps/{cid}/revoke", data={"csrf_token": csrf})
    assert again.status_code == 404 and "no access to your account" in again.text
    late = _exchange(base, cid, code, pk)  # the code in flight was taken back too
    assert (late.status_code, late.json()["error"]) == (400, "invalid_grant")


# ---------------------------------------------------------------------- secrets stay out of logs and the store


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))


#: Loggers of the test's own HTTP client (they print the redirects it receives, codes included):
#: not the service's.
CLIENT_SIDE = ("httpx", "httpcore")


def test_no_log_line_holds_a_token_code_secret_or_verifier(base, owner, oauth_app):
    """Every logger of the process at DEBUG, uvicorn's access log included, while a client
    registers, is authorized, exchanges its code, replays it and calls the MCP endpoint."""
    handler = _Lines()
    handler.addFilter(lambda r: not r.name.startswith(CLIENT_SIDE))
    watched = [logging.getLogger(), logging.getLogger("uvicorn.access"), logging.getLogger("uvicorn.error"),
               logging.getLogger("codesearch")]
    levels = [lg.level for lg in watched]
    for lg in watched:
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
    try:
        _log_secrets_check(base, owner, oauth_app, handler.lines)
    finally:
        for lg, level in zip(watched, levels):
            lg.removeHandler(handler)
            lg.setLevel(level)


def _log_secrets_check(base, owner, oauth_app, lines):
    secrets_seen = []
    reg = register(base, token_endpoint_auth_method="client_secret_post").json()
    secrets_seen.append(reg["client_secret"])
    code, pk = get_code(base, owner, reg["client_id"])
    secrets_seen += [code, pk.verifier]
    t = token(base, grant_type="authorization_code", code=code, redirect_uri=REDIRECT, client_id=reg["client_id"],
              client_secret=reg["client_secret"], code_verifier=pk.verifier).json()
    secrets_seen += [t["access_token"], t["refresh_token"]]
    replay = token(base, grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
                   client_id=reg["client_id"], client_secret=reg["client_secret"], code_verifier=pk.verifier)
    assert replay.json()["error"] == "invalid_grant"
    mcp_initialize(base, t["access_token"])
    # a refused authorization request, carrying a fresh client's secret-looking values, and the
    # user revoking an app on the settings page
    other = register(base, token_endpoint_auth_method="client_secret_post").json()
    secrets_seen.append(other["client_secret"])
    third = register(base).json()["client_id"]
    t2 = tokens_for(base, owner, third)
    secrets_seen += [t2["access_token"], t2["refresh_token"]]
    r = owner.http.get("/oauth/authorize", params=_authorize_params(base, other["client_id"],
                                                                    {"code_challenge_method": "plain"}))
    assert r.status_code == 400
    page = owner.http.get("/settings/apps")
    r = owner.http.post(f"/settings/apps/{third}/revoke", data={"csrf_token": owner.csrf(page.text)})
    assert r.status_code == 303 and mcp_initialize(base, t2["access_token"]).status_code == 401
    oauth_app["app"].state.services.audit.flush()
    assert any("presented again" in line for line in lines)  # the replay was logged, without the code
    assert any("authorization request refused (invalid_request)" in line for line in lines)
    assert any("/oauth/token" in line for line in lines)  # uvicorn's access log was watched too
    for s in secrets_seen:
        assert not any(s in line for line in lines)
    # the database holds none of them either
    with oauth_app["store"].engine.connect() as c:
        dump = repr([c.exec_driver_sql(f"SELECT * FROM {t}").all()
                     for t in ("oauth_clients", "oauth_codes", "oauth_tokens", "audit_events")])
    for s in secrets_seen:
        assert s not in dump


def test_redirect_uri_rules_directly():
    """The redirect URI rule, function by function (what the registration table goes through)."""
    assert oauth_redirects.redirect_uri_problem("https://a.example/cb") is None
    assert oauth_redirects.redirect_uri_problem("http://127.0.0.1/cb") is None
    assert "loopback" in oauth_redirects.redirect_uri_problem("http://a.example/cb")
    assert "fragment" in oauth_redirects.redirect_uri_problem("https://a.example/cb#")
    assert "private-use" in oauth_redirects.redirect_uri_problem("myapp:/cb")  # not a reverse domain name
    assert base64  # noqa: B018


def test_a_code_raced_by_parallel_requests_is_redeemed_once(base, owner, client_id):
    """Eight exchanges of one code at once: exactly one gets tokens, and since the others are
    replays, the tokens it got are revoked too."""
    from concurrent.futures import ThreadPoolExecutor

    code, pk = get_code(base, owner, client_id)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _exchange(base, client_id, code, pk), range(8)))
    ok = [a for a in answers if a.status_code == 200]
    assert len(ok) == 1 and all(a.json()["error"] == "invalid_grant" for a in answers if a.status_code != 200)
    assert mcp_initialize(base, ok[0].json()["access_token"]).status_code == 401


def test_a_refresh_token_raced_by_parallel_requests_is_used_once(base, owner, client_id):
    t = tokens_for(base, owner, client_id)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: token(base, grant_type="refresh_token", refresh_token=t["refresh_token"],
                                                client_id=client_id), range(8)))
    assert sum(a.status_code == 200 for a in answers) == 1
    fresh = next(a for a in answers if a.status_code == 200).json()
    assert mcp_initialize(base, fresh["access_token"]).status_code == 401  # the reuses revoked the grant
