"""Google Cloud IAP sign-in (the ``gcp-iap`` identity provider: codesearch.sso.iap, codesearch.web.iap).

The app (`build_app`, a real `Store`) is served over HTTP on 127.0.0.1 (`tests.asgiserver`), its
config loaded from JSON with `load_config`. Google's side is `tests.fakehosts.iap.FakeIapKeys`: a
key set on 127.0.0.1 (``CODESEARCH_GCP_IAP_JWKS_URL`` points there) with real EC P-256 keys, and
assertions signed with them (joserfc), sent in ``x-goog-iap-jwt-assertion`` as IAP would.
Hostile assertions are made by hand: unsigned, other algorithms, other keys, tampered, expired,
for another audience or issuer … Nothing of ours is mocked.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import logging
import re

import httpx
import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from codesearch.config import load_config
from codesearch.errors import ConfigError
from codesearch.serving.api import build_app
from codesearch.sso import build_providers
from codesearch.sso.iap import ASSERTION_HEADER, IapKeys, IapRefused, IapUnavailable, IapVerifier
from codesearch.store import Store
from codesearch.accounts import hash_password
from tests.asgiserver import bound_socket, serving
from tests.fakehosts.iap import DROP, FakeIapKeys, subject_of

AUD = "/projects/123456789/global/backendServices/987654321"
IAP_ENTRY = {"provider": "gcp-iap", "purpose": "sso", "audience": {"env": "IAP_AUDIENCE"}}


class _Searcher:
    def search(self, *a, **k):
        raise AssertionError("no search in these tests")


@pytest.fixture(scope="module")
def google():
    with FakeIapKeys() as keys:
        yield keys


@pytest.fixture
def world(google, tmp_path):
    """`world(entries=[IAP_ENTRY], anonymous=False, **env)`: a fresh store and app behind "IAP"."""
    started = []

    def make(entries=(IAP_ENTRY,), anonymous=False, **extra):
        env = {"IAP_AUDIENCE": AUD, "CODESEARCH_GCP_IAP_JWKS_URL": google.jwks_url, **extra}
        config = load_config(json.dumps({"identityProviders": list(entries)}), environ=env)
        store = Store.open(str(tmp_path / f"data{len(started)}"))
        sock = bound_socket()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        app = build_app(lambda: _Searcher(), get_store=lambda: store, anonymous_access=anonymous, public_url=url,
                        environ=env, identity_providers=config.identity_providers)
        ctx = serving(app, sock=sock)
        ctx.__enter__()
        started.append((ctx, store))
        google.down = False
        return World(url, store, google)

    yield make
    for ctx, store in started:
        ctx.__exit__(None, None, None)
        store.close()


class World:
    def __init__(self, url: str, store: Store, google: FakeIapKeys):
        self.url, self.store, self.google = url, store, google

    def assertion(self, email: str, **kw) -> str:
        return self.google.assertion(AUD, email, **kw)

    def call(self, method: str, path: str, assertion: str | None = None, headers: dict | None = None,
             **kw) -> httpx.Response:
        h = {ASSERTION_HEADER: assertion} if assertion is not None else {}
        h.update(headers or {})
        return httpx.request(method, self.url + path, headers=h, timeout=20, follow_redirects=False, **kw)

    def as_(self, email: str, method: str = "GET", path: str = "/settings/account", **kw) -> httpx.Response:
        return self.call(method, path, self.assertion(email), **kw)


def signed_in_as(page: httpx.Response) -> tuple[str, str] | None:
    m = re.search(r"Signed in as <strong>([^<]+)</strong> · (\w+)", page.text)
    return (m.group(1), m.group(2)) if page.status_code == 200 and m else None


def csrf_of(page: httpx.Response) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


# ----------------------------------------------------------------------------- config

E = {"env": "IAP_AUDIENCE"}
CONFIG_CASES = [
    # (identityProviders, refused with, warned with, (id, display name) of the entry in use)
    ([IAP_ENTRY], None, None, ("gcp-iap", "Google Cloud IAP")),
    ([{**IAP_ENTRY, "audience": {"googleCloudSecret": "projects/p/secrets/aud/versions/1"}}], None, None,
     ("gcp-iap", "Google Cloud IAP")),
    ([{**IAP_ENTRY, "id": "iap", "displayName": "Corp IAP"}], None, None, ("iap", "Corp IAP")),
    ([IAP_ENTRY, {**IAP_ENTRY, "audience": {"env": "OTHER"}}], None,
     "identityProviders[1]: accepted but not used: only one gcp-iap entry is used", ("gcp-iap", "Google Cloud IAP")),
    ([{"provider": "gcp-iap", "purpose": "sso"}], 'identityProviders[0]: missing required property "audience"',
     None, None),
    ([{**IAP_ENTRY, "audience": AUD}], "identityProviders[0].audience: expected a token reference", None, None),
    ([{**IAP_ENTRY, "purpose": "account_linking"}], 'identityProviders[0].purpose: must be "sso"', None, None),
    ([{**IAP_ENTRY, "clientId": E}], 'identityProviders[0].clientId: unknown property "clientId"', None, None),
]


@pytest.mark.parametrize("section,problem,warning,entry", CONFIG_CASES)
def test_config(section, problem, warning, entry):
    doc = json.dumps({"identityProviders": section})
    if problem:
        with pytest.raises(ConfigError) as e:
            load_config(doc, environ={})
        assert problem in str(e.value)
        return
    config = load_config(doc, environ={})
    assert [w for w in config.warnings if warning is None or warning not in w] == []
    assert bool(config.warnings) == (warning is not None)
    (iap,) = config.identity_providers
    assert (iap.id, iap.name, iap.provider, iap.purpose) == (*entry, "gcp-iap", "sso")
    assert build_providers(config.identity_providers) == {}  # no button, no callback: IAP has no flow


# ----------------------------------------------------------------------------- who is signed in

def test_a_valid_assertion_signs_in_pages_and_api_first_user_owner(world):
    w = world()
    page = w.as_("Alice@Example.com")
    assert signed_in_as(page) == ("alice@example.com", "owner")
    user = w.store.find_user_by_email("alice@example.com")
    assert user.role == "OWNER"
    (acct,) = w.store.list_linked_accounts(user_id=user.id)
    assert (acct.provider, acct.provider_type, acct.subject, acct.host) == (
        "gcp-iap", "gcp-iap", subject_of("Alice@Example.com"), None)
    assert w.as_("alice@example.com", path="/api/repos").status_code == 200
    assert w.call("GET", "/api/repos").status_code == 401  # the same request without IAP: nobody
    # later requests find the linked identity: no second user, no second link
    assert signed_in_as(w.as_("alice@example.com")) == ("alice@example.com", "owner")
    assert len(w.store.list_users()) == 1 and len(w.store.list_linked_accounts(user_id=user.id)) == 1


SIGN_UP_CASES = [
    # (REQUIRE_APPROVAL_NEW_MEMBERS, status of the second person's page and API call, their role, pending)
    ("false", 200, 200, "MEMBER", False),
    ("true", 403, 403, "MEMBER", True),
]


@pytest.mark.parametrize("approval,page_status,api_status,role,pending", SIGN_UP_CASES)
def test_later_users_sign_up_under_the_usual_rules(world, approval, page_status, api_status, role, pending):
    w = world(REQUIRE_APPROVAL_NEW_MEMBERS=approval)
    assert signed_in_as(w.as_("owner@example.com")) == ("owner@example.com", "owner")
    page = w.as_("bob@example.com")
    assert page.status_code == page_status
    api = w.as_("bob@example.com", path="/api/repos")
    assert api.status_code == api_status
    bob = w.store.find_user_by_email("bob@example.com")
    assert bob.role == role and w.store.is_pending(bob.id) is pending
    if pending:
        assert "Waiting for approval" in page.text and "approve" in api.json()["message"]
        assert api.json()["errorCode"] == "INSUFFICIENT_PERMISSIONS"
        w.store.approve_account_request(bob.id)
        assert signed_in_as(w.as_("bob@example.com")) == ("bob@example.com", "member")
    else:
        assert signed_in_as(page) == ("bob@example.com", "member")
    assert len(w.store.list_users()) == 2


def test_an_existing_account_with_the_address_is_the_one_signed_in(world):
    """IAP vouches for the address: the identity is linked to the account that has it."""
    w = world()
    carol = w.store.create_user("carol@example.com", "Carol", role="OWNER")
    w.store.set_user_password(carol.id, hash_password("a long password"))
    assert signed_in_as(w.as_("carol@example.com")) == ("carol@example.com", "owner")
    (acct,) = w.store.list_linked_accounts(user_id=carol.id)
    assert (acct.provider, acct.subject) == ("gcp-iap", subject_of("carol@example.com"))
    assert [u.email for u in w.store.list_users()] == ["carol@example.com"]


def test_the_assertion_comes_before_a_session_cookie(world):
    """Whoever IAP says is at the keyboard now is the caller, whatever cookie the browser kept."""
    w = world()
    w.as_("first@example.com")
    dave = w.store.create_user("dave@example.com", "Dave")
    w.store.set_user_password(dave.id, hash_password("a long password"))
    with httpx.Client(base_url=w.url, timeout=20) as browser:
        login = browser.get("/login")
        r = browser.post("/login", data={"email": "dave@example.com", "password": "a long password",
                                         "csrf_token": csrf_of(login)})
        assert r.status_code == 303 and browser.cookies.get("codesearch_session")
        assert signed_in_as(browser.get("/settings/account")) == ("dave@example.com", "member")
        page = browser.get("/settings/account", headers={ASSERTION_HEADER: w.assertion("first@example.com")})
        assert signed_in_as(page) == ("first@example.com", "owner")


# ----------------------------------------------------------------------------- CSRF

def test_unsafe_methods_need_the_csrf_token_of_the_iap_user(world):
    """IAP's cookie rides along with cross-site requests: POST/PUT/PATCH/DELETE need the page's token."""
    w = world()
    owner = w.assertion("owner@example.com")
    token = csrf_of(w.call("GET", "/settings/keys", owner))
    member = w.assertion("member@example.com")
    member_token = csrf_of(w.call("GET", "/settings/keys", member))
    cases = [
        # (assertion, X-CSRF-Token, expected status of POST /api/repos/999/reindex)
        (owner, None, 401),
        (owner, "0" * 64, 401),
        (owner, member_token, 401),
        (owner, token, 404),  # signed in: the repository does not exist
        (member, member_token, 403),  # signed in, not an owner
    ]
    for assertion, csrf, status in cases:
        r = w.call("POST", "/api/repos/999/reindex", assertion, headers={"X-CSRF-Token": csrf} if csrf else None)
        assert r.status_code == status, (csrf, r.text)
    # the pages' forms carry the same token
    assert w.call("POST", "/settings/keys", owner, data={"name": "ci", "csrf_token": "nope"}).status_code == 403
    made = w.call("POST", "/settings/keys", owner, data={"name": "ci", "csrf_token": token})
    assert made.status_code == 201
    key = re.search(r"\b(cs_[A-Za-z0-9_-]+)", made.text).group(1)
    assert w.call("GET", "/api/repos", headers={"Authorization": f"Bearer {key}"}).status_code == 200


# ----------------------------------------------------------------------------- hostile assertions

def _b64(data: bytes | dict) -> str:
    raw = json.dumps(data).encode() if isinstance(data, dict) else data
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _unsigned(g: FakeIapKeys) -> str:
    return f"{_b64({'alg': 'none', 'kid': g.keys[0].kid})}.{_b64(g.claims(AUD, 'eve@example.com'))}."


def _hs256_with_public_key(g: FakeIapKeys) -> str:
    """The old algorithm confusion: HMAC keyed with the public key the server holds."""
    head = _b64({"alg": "HS256", "kid": g.keys[0].kid})
    body = _b64(g.claims(AUD, "eve@example.com"))
    secret = json.dumps(g.keys[0].as_dict(private=False)).encode()
    sig = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(sig)}"


def _rs256(g: FakeIapKeys) -> str:
    key = RSAKey.generate_key(2048)
    return jwt.encode({"alg": "RS256", "kid": g.keys[0].kid}, g.claims(AUD, "eve@example.com"), key)


def _es384(g: FakeIapKeys) -> str:
    key = ECKey.generate_key("P-384")
    return jwt.encode({"alg": "ES384", "kid": g.keys[0].kid}, g.claims(AUD, "eve@example.com"), key,
                      algorithms=["ES384"])


def _tampered(g: FakeIapKeys) -> str:
    head, _body, sig = g.assertion(AUD, "eve@example.com").split(".")
    return f"{head}.{_b64(g.claims(AUD, 'ceo@example.com'))}.{sig}"


def _impostor_key(g: FakeIapKeys, same_kid: bool) -> str:
    key = ECKey.generate_key("P-256", parameters={"kid": g.keys[0].kid if same_kid else "not-googles"})
    return g.assertion(AUD, "eve@example.com", key=key)


HOSTILE = [
    # (name, the assertion made from the fake, what the 401 says)
    ("garbage", lambda g: "not-a-jwt", "not a signed JWT"),
    ("five parts (a JWE)", lambda g: "a.b.c.d.e", "not a signed JWT"),
    ("header not JSON", lambda g: "!!!.e30.e30", "header is not base64url-encoded JSON"),
    ("header a list", lambda g: f"{_b64(b'[1]')}.e30.e30", "header is not a JSON object"),
    ("unsigned (alg none)", _unsigned, "unsigned (alg none)"),
    ("HS256 keyed with the public key", _hs256_with_public_key, "not signed with ES256"),
    ("RS256", _rs256, "not signed with ES256"),
    ("ES384", _es384, "not signed with ES256"),
    ("no kid", lambda g: g.assertion(AUD, "eve@example.com", header={"kid": DROP}), "names no key (kid)"),
    ("a key Google does not publish", lambda g: _impostor_key(g, same_kid=False), "not one of Google Cloud IAP's"),
    ("another key under Google's kid", lambda g: _impostor_key(g, same_kid=True), "signature does not verify"),
    ("tampered claims", _tampered, "signature does not verify"),
    ("expired", lambda g: g.assertion(AUD, "eve@example.com", exp=1_000_000_000, iat=999_999_000), "expired"),
    ("issued in the future", lambda g: g.assertion(AUD, "eve@example.com", iat=4_000_000_000, exp=4_000_000_600),
     "issued in the future"),
    ("another audience", lambda g: g.assertion("/projects/1/apps/someone-else", "eve@example.com"),
     "meant for another application"),
    ("audience list without ours", lambda g: g.assertion(["/projects/1/apps/x"], "eve@example.com"),
     "meant for another application"),
    ("another issuer", lambda g: g.assertion(AUD, "eve@example.com", iss="https://accounts.google.com"),
     "not issued by Google Cloud IAP"),
    ("no issuer", lambda g: g.assertion(AUD, "eve@example.com", iss=DROP), "lacks the claim(s) iss"),
    ("no expiry", lambda g: g.assertion(AUD, "eve@example.com", exp=DROP), "lacks the claim(s) exp"),
    ("no email", lambda g: g.assertion(AUD, "eve@example.com", email=DROP), "lacks the claim(s) email"),
    ("no subject", lambda g: g.assertion(AUD, "eve@example.com", sub=DROP), "lacks the claim(s) sub"),
    ("email not an address", lambda g: g.assertion(AUD, "eve@example.com", email="eve"), "not an e-mail address"),
    ("email with a space", lambda g: g.assertion(AUD, "eve@example.com", email="eve @example.com"),
     "not an e-mail address"),
    ("too long", lambda g: g.assertion(AUD, "eve@example.com", pad="x" * 9000), "longer than 8192"),
]


@pytest.mark.parametrize("name,make,why", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_assertions_are_refused_never_anonymous(world, caplog, name, make, why):
    w = world(anonymous=True)  # visitors may search: a bad assertion must still not pass as one
    assertion = make(w.google)
    caplog.set_level(logging.DEBUG)
    api = w.call("GET", "/api/repos", assertion)
    assert api.status_code == 401, api.text
    body = api.json()
    assert body["errorCode"] == "NOT_AUTHENTICATED" and why in body["message"], body
    assert body["message"].startswith(f"Google Cloud IAP's signed header ({ASSERTION_HEADER}) was refused")
    page = w.call("GET", "/settings/account", assertion)
    assert page.status_code == 401 and why in html.unescape(page.text) and "Signed in as" not in page.text
    assert w.call("GET", "/api/repos").status_code == 200  # the same visitor without the header: anonymous
    assert w.store.list_users() == []
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith(("codesearch", "uvicorn")))
    assert "refused" in logged  # the refusal is logged, the token is not (nor any long part of it)
    assert not [p for p in assertion.split(".") if len(p) >= 16 and (p in logged or p in api.text or p in page.text)]


def test_two_assertions_in_one_request_are_refused(world):
    w = world()
    good = w.assertion("alice@example.com")
    r = httpx.get(w.url + "/api/repos", headers=[(ASSERTION_HEADER, good), (ASSERTION_HEADER, good)], timeout=20)
    assert r.status_code == 401 and "more than once" in r.json()["message"]


# ----------------------------------------------------------------------------- when it does not apply

def test_without_the_header_or_without_the_provider_nothing_changes(world):
    w = world()
    assert w.call("GET", "/api/repos").status_code == 401
    assert w.call("GET", "/login").status_code == 200
    assert w.call("GET", "/api/health", "garbage").status_code == 401  # a header that is there is checked
    assert w.call("GET", "/static/style.css", "garbage").status_code == 200  # static files need nobody
    plain = world(entries=[])  # no gcp-iap entry: the header means nothing here
    good = plain.assertion("alice@example.com")
    assert plain.call("GET", "/api/repos", good).status_code == 401
    assert plain.call("GET", "/settings/account", good).status_code == 303  # to the sign-in page
    assert plain.store.list_users() == []


# ----------------------------------------------------------------------------- keys and configuration

def test_keys_unreachable_or_audience_unresolvable_is_503_never_a_sign_in(world):
    w = world(anonymous=True)
    w.google.down = True
    try:
        r = w.as_("alice@example.com", path="/api/repos")
    finally:
        w.google.down = False
    assert r.status_code == 503 and r.json()["errorCode"] == "SERVICE_UNAVAILABLE", r.text
    assert "key set answered HTTP 500" in r.json()["message"]
    v = world(anonymous=True, IAP_AUDIENCE="")
    r = v.as_("alice@example.com", path="/api/repos")
    assert r.status_code == 503 and "IAP_AUDIENCE" in r.json()["message"], r.text
    page = v.as_("alice@example.com")
    assert page.status_code == 503 and "Sign-in is unavailable" in page.text
    assert w.store.list_users() == [] and v.store.list_users() == []


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_key_set_is_cached_refreshed_for_new_keys_at_a_bounded_rate(google):
    """Google rotates keys: an unknown kid reads the set again, at most once per interval."""
    google.down = False
    clock = Clock()
    keys = IapKeys(google.jwks_url, ttl_s=3600, refresh_interval_s=30, clock=clock)
    verify = IapVerifier(keys, lambda: AUD).verify
    before = google.fetches
    for _ in range(5):
        assert verify(google.assertion(AUD, "a@example.com")).email == "a@example.com"
    assert google.fetches - before == 1  # cached
    new = google.rotate()
    try:
        fresh = google.assertion(AUD, "a@example.com", key=new)
        clock.t += 10
        for _ in range(20):  # a key id unknown within the interval: refused, Google not asked again
            with pytest.raises(IapRefused, match="not one of Google Cloud IAP's"):
                verify(fresh)
        assert google.fetches - before == 1
        clock.t += 21
        assert verify(fresh).email == "a@example.com"  # the interval passed: read again, found
        assert google.fetches - before == 2
        clock.t += 31
        for n in range(50):  # a flood of made-up key ids: one request to Google per interval
            forged = google.assertion(AUD, "a@example.com", header={"kid": f"made-up-{n}"})
            with pytest.raises(IapRefused, match="not one of Google Cloud IAP's"):
                verify(forged)
        assert google.fetches - before == 3
        google.down = True  # the set cannot be read again: the last one read keeps working
        clock.t += 3601
        assert verify(fresh).email == "a@example.com"
        assert google.fetches - before == 4
    finally:
        google.down = False
        google.keys.remove(new)
    cold = IapKeys(google.jwks_url, refresh_interval_s=30, clock=clock)
    google.down = True
    try:
        with pytest.raises(IapUnavailable, match="answered HTTP 500"):
            IapVerifier(cold, lambda: AUD).verify(google.assertion(AUD, "a@example.com"))
        fetched = google.fetches
        with pytest.raises(IapUnavailable):  # asked again at once: no second request
            IapVerifier(cold, lambda: AUD).verify(google.assertion(AUD, "a@example.com"))
        assert google.fetches == fetched
    finally:
        google.down = False


# ----------------------------------------------------------------------------- the owners' switches

SWITCH_CASES = [
    # (the config's entry, the providers the owners switched off, status of a page and of an API call)
    (IAP_ENTRY, [], 200),
    (IAP_ENTRY, ["gcp-iap"], 403),
    (IAP_ENTRY, ["github"], 200),  # another provider's switch changes nothing here
    ({**IAP_ENTRY, "id": "corp-iap"}, ["corp-iap"], 403),
    ({**IAP_ENTRY, "id": "corp-iap"}, ["gcp-iap"], 200),  # the switch goes by the entry's id
]


@pytest.mark.parametrize("entry,off,status", SWITCH_CASES)
def test_iap_switched_off_on_the_security_page_signs_nobody_in(world, entry, off, status):
    w = world(entries=[entry], anonymous=True)
    w.store.put_service_setting("security", {"disabled_providers": off})  # before the app first reads it
    page = w.as_("alice@example.com")
    api = w.as_("alice@example.com", path="/api/repos")
    assert (page.status_code, api.status_code) == (status, status), (page.text, api.text)
    if status == 403:  # answered as any provider switched off, never as an anonymous visitor
        assert "Signing in with Google Cloud IAP is turned off on this server." in page.text
        assert "Signed in as" not in page.text
        assert api.json() == {"statusCode": 403, "errorCode": "INSUFFICIENT_PERMISSIONS",
                              "message": "Signing in with Google Cloud IAP is turned off on this server."}
        assert w.store.list_users() == []
    else:
        assert signed_in_as(page) == ("alice@example.com", "owner")


def test_the_security_page_switches_iap_but_not_from_a_request_that_came_through_it(world):
    w = world()
    owner = w.store.create_user("owner@example.com", "Owner", role="OWNER")
    w.store.set_user_password(owner.id, hash_password("a long password"))
    page = w.as_("owner@example.com", path="/settings/security")
    assert page.status_code == 200 and 'name="provider" value="gcp-iap" checked' in page.text
    assert "Google Cloud IAP" in page.text
    off = {"password_login": "on", "csrf_token": csrf_of(page)}  # no provider checked: IAP off
    r = w.as_("owner@example.com", "POST", "/settings/security", data=off)
    assert r.status_code == 409 and "switching it off would refuse your next request" in html.unescape(r.text)
    assert w.store.service_setting("security") is None  # nothing stored
    with httpx.Client(base_url=w.url, timeout=20) as browser:  # the owner's password, not through IAP
        login = browser.get("/login")
        r = browser.post("/login", data={"email": "owner@example.com", "password": "a long password",
                                         "csrf_token": csrf_of(login)})
        assert r.status_code == 303
        token = csrf_of(browser.get("/settings/security"))
        r = browser.post("/settings/security", data={"password_login": "on", "csrf_token": token})
        assert r.status_code == 303, r.text
    assert w.store.service_setting("security")["disabled_providers"] == ["gcp-iap"]
    assert w.as_("owner@example.com").status_code == 403  # this app knows at once


def test_a_deactivated_user_and_a_service_account_are_refused(world):
    """Never signed in interactively, whatever IAP vouches for; reactivated, the user is let in again."""
    w = world()
    assert signed_in_as(w.as_("owner@example.com")) == ("owner@example.com", "owner")
    assert signed_in_as(w.as_("dana@example.com")) == ("dana@example.com", "member")
    dana = w.store.find_user_by_email("dana@example.com")
    w.store.set_user_suspended(dana.id, True)
    linked = w.store.create_service_account("CI robot")  # an IAP identity linked to it somehow
    w.store.link_account(linked.id, provider="gcp-iap", provider_type="gcp-iap", subject=subject_of(linked.email))
    unlinked = w.store.create_service_account("Deploy robot")
    cases = [
        # (the address IAP vouches for, status, heading of the page, the user's linked accounts after)
        ("dana@example.com", 403, "Account deactivated", 1),
        (linked.email, 403, "Not for interactive use", 1),
        (unlinked.email, 409, "Sign-in refused", 0),  # its address was never verified: not joined by it
    ]
    for email, status, heading, links in cases:
        page = w.as_(email)
        api = w.as_(email, path="/api/repos")
        assert page.status_code == status and heading in page.text and "Signed in as" not in page.text, email
        assert api.status_code == status and api.json()["errorCode"] == "INSUFFICIENT_PERMISSIONS", api.text
        user = w.store.find_user_by_email(email)
        assert len(w.store.list_linked_accounts(user_id=user.id)) == links
    assert len(w.store.list_users()) == 4  # nobody signed up instead
    w.store.set_user_suspended(dana.id, False)
    assert signed_in_as(w.as_("dana@example.com")) == ("dana@example.com", "member")
