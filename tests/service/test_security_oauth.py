"""OAuth for MCP clients under abuse (issue 24, items 2, 5 and 6), through one real `codesearch
serve` process (its own Ray and Serve) on 127.0.0.1, a user made with the CLI who signs in
through ``/login``, and real HTTP throughout:

* **registration costs are bounded**: a body over 16 KiB is 413, fields over their limits 400,
  an address that registered too many clients gets 429 with ``Retry-After``, pending clients (never
  authorized) are capped (the oldest go) and expire, an authorized one does not;
* **no hidden characters, no look-alike hosts**: bidi controls, zero-width and control characters
  and a Cyrillic ``і`` host are refused, naming the code point; a hostile client stored before
  that (put into the store directly) is drawn with its host alone, in ASCII and isolated;
* **an OAuth access token opens /api/mcp and nothing else**: the chat pages and their JSON,
  ``/api/*`` and the pages answer it as they answer no credential.

The service runs with small limits (`LIMITS`) so that each is reached in a few requests.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import delete, func, select, update

from codesearch import environment
from codesearch.store import Store
from codesearch.store.tables import login_failures, oauth_clients
from tests.oauthworld import REDIRECT, Browser, Pkce, authorize_url, mcp_initialize
from tests.service.test_serve_cli import ONE_WORKER_EACH, Served

PER_ADDRESS = 5
MAX_PENDING = 4
PENDING_TTL_S = 12
LIMITS = {
    "CODESEARCH_OAUTH_REGISTRATIONS_PER_ADDRESS": str(PER_ADDRESS),
    "CODESEARCH_OAUTH_MAX_PENDING_CLIENTS": str(MAX_PENDING),
    "CODESEARCH_OAUTH_PENDING_CLIENT_TTL_SECONDS": str(PENDING_TTL_S),
}
ALICE = {"email": "alice@example.com", "password": "alice-pass-1"}
SECRET_QUESTION = "where is the private launch plan kept?"


@dataclass
class World:
    served: Served
    store: Store  # the served instance's state database, opened by the test
    alice: Browser  # signed in
    chat_id: str  # a PRIVATE chat of alice's

    @property
    def base(self) -> str:
        return self.served.base


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("security-oauth")
    config = root / "config.json"
    config.write_text(json.dumps({"settings": ONE_WORKER_EACH}))
    data = root / "data"
    data.mkdir()
    served = Served(data, searchers=1, CONFIG_PATH=str(config), **LIMITS)
    store = browser = None
    try:
        served.wait_healthy(timeout_s=240, indexed=False)
        made = subprocess.run(
            [sys.executable, "-m", "codesearch.cli", "users", "create", ALICE["email"], "--password-stdin"],
            input=ALICE["password"] + "\n", capture_output=True, text=True, env=served.env, timeout=60)
        assert made.returncode == 0, made.stderr
        store = Store.open(environment.data_dir(served.env), environ=served.env)
        user = store.find_user_by_email(ALICE["email"])
        chat = store.create_chat(SECRET_QUESTION, "in the vault", user_id=user.id, visibility="PRIVATE")
        browser = Browser(served.base)
        browser.sign_in(ALICE)
        yield World(served, store, browser, chat.id)
    finally:
        if browser is not None:
            browser.close()
        if store is not None:
            store.close()
        code = served.stop()
    assert code == 0, served.log()[-3000:]


def register(base: str, **fields) -> httpx.Response:
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "client_name": "test client",
            "grant_types": ["authorization_code", "refresh_token"], **fields}
    return httpx.post(base + "/oauth/register", json={k: v for k, v in body.items() if v is not None}, timeout=30)


def forget_counters(store: Store) -> None:
    """Start every per-address counter from zero (the cases below all come from 127.0.0.1)."""
    with store._tx(write=True) as c:
        c.execute(delete(login_failures))


def clients(store: Store) -> dict[str, bool]:
    """Every stored client: id → pending (never completed an authorization)."""
    with store._tx() as c:
        return {r.id: r.last_used_at is None for r in c.execute(select(oauth_clients.c.id, oauth_clients.c.last_used_at))}


def age_clients(store: Store, seconds: float) -> None:
    """Every stored client registered `seconds` earlier than it was: the service's TTL then finds
    them as old as if that much time had passed (instead of the test waiting it out)."""
    with store._tx(write=True) as c:
        for row in c.execute(select(oauth_clients.c.id, oauth_clients.c.created_at)).all():
            c.execute(update(oauth_clients).where(oauth_clients.c.id == row.id)
                      .values(created_at=row.created_at - timedelta(seconds=seconds)))


def client_rows(store: Store) -> int:
    with store._tx() as c:
        return c.scalar(select(func.count()).select_from(oauth_clients))


def consent(world: World, client_id: str, redirect_uri: str = REDIRECT) -> httpx.Response:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "state": "s",
              "code_challenge": Pkce.make().challenge, "code_challenge_method": "S256"}
    return world.alice.http.get("/oauth/authorize?" + urlencode(params))


def access_token(world: World) -> tuple[str, str]:
    """An OAuth access token of alice's, end to end (register, consent, PKCE exchange): (client id, token)."""
    forget_counters(world.store)
    r = register(world.base, client_name="Editor MCP")
    assert r.status_code == 201, r.text
    cid, pkce = r.json()["client_id"], Pkce.make()
    code = world.alice.authorize(authorize_url(cid, pkce))["code"][0]
    t = httpx.post(world.base + "/oauth/token", data={"grant_type": "authorization_code", "code": code,
                                                      "redirect_uri": REDIRECT, "client_id": cid,
                                                      "code_verifier": pkce.verifier}, timeout=30)
    assert t.status_code == 200, t.text
    return cid, t.json()["access_token"]


# ---------------------------------------------------------------------- what a registration may cost

OVERSIZE = [
    # (what, the raw body, headers, status, error, words of the description)
    ("a body of 16 KiB + 1", json.dumps({"redirect_uris": [REDIRECT], "pad": "x" * 16384}).encode(), {}, 413,
     "invalid_client_metadata", "larger than 16384 bytes"),
    ("a chunked body of 20 KiB", None, {}, 413, "invalid_client_metadata", "larger than 16384 bytes"),
]

BAD_FIELDS = [
    # (what, registration fields, error, words of the description)
    ("11 redirect URIs", {"redirect_uris": [f"https://app.example.com/{i}" for i in range(11)]},
     "invalid_redirect_uri", "at most 10"),
    ("a redirect URI of 2,001 characters", {"redirect_uris": ["https://app.example.com/" + "a" * 1977]},
     "invalid_redirect_uri", "at most 2000 characters"),
    ("a client_name of 201 characters", {"client_name": "n" * 201}, "invalid_client_metadata", "client_name"),
    ("a client_uri of 2,001 characters", {"client_uri": "https://app.example.com/" + "u" * 1977},
     "invalid_client_metadata", "client_uri"),
    ("40 fields", {f"x_field_{i}": i for i in range(40)}, "invalid_client_metadata", "at most 32"),
    ("an unknown field of 5,000 bytes", {"software_statement": "s" * 5000}, "invalid_client_metadata",
     "'software_statement' is larger than 4096 bytes"),
]


def _chunks(total: int):
    yield b'{"redirect_uris": ["' + REDIRECT.encode() + b'"], "pad": "'
    for _ in range(total // 1024):
        yield b"x" * 1024
    yield b'"}'


def test_registration_body_and_fields_are_bounded(world):
    before = client_rows(world.store)
    for what, raw, headers, status, error, words in OVERSIZE:
        content = raw if raw is not None else _chunks(20 * 1024)
        r = httpx.post(world.base + "/oauth/register", content=content,
                       headers={"content-type": "application/json", **headers}, timeout=30)
        assert r.status_code == status, (what, r.status_code, r.text)
        assert r.json()["error"] == error and words in r.json()["error_description"], (what, r.text)
        assert r.headers["cache-control"] == "no-store"
    for what, fields, error, words in BAD_FIELDS:
        r = register(world.base, **fields)
        assert r.status_code == 400, (what, r.text)
        assert r.json()["error"] == error and words in r.json()["error_description"], (what, r.text)
    assert client_rows(world.store) == before  # nothing stored


def test_registrations_per_address_are_limited(world):
    forget_counters(world.store)
    for i in range(PER_ADDRESS):
        r = register(world.base, client_name=f"burst {i}")
        assert r.status_code == 201, (i, r.text)
    for _ in range(3):  # the next ones, however many, until the address pauses an hour
        r = register(world.base, client_name="one too many")
        assert r.status_code == 429, r.text
        assert r.json()["error"] == "temporarily_unavailable"
        assert "too many client registrations from your address" in r.json()["error_description"]
        assert 3500 <= int(r.headers["retry-after"]) <= 3600
        assert r.headers["cache-control"] == "no-store"
    # refused registrations cost nothing: a malformed one is still told what is wrong
    assert register(world.base, client_name="\u202e").status_code == 400
    forget_counters(world.store)


def test_pending_clients_are_capped_and_the_oldest_go(world):
    """3 × the cap registered (the per-address counter reset between bursts, as from many
    addresses): at most the cap of pending clients is kept, the newest ones."""
    made = []
    for i in range(3 * MAX_PENDING):
        if i % PER_ADDRESS == 0:
            forget_counters(world.store)
        r = register(world.base, client_name=f"flood {i}")
        assert r.status_code == 201, (i, r.text)
        made.append(r.json()["client_id"])
        pending = [cid for cid, is_pending in clients(world.store).items() if is_pending]
        assert len(pending) <= MAX_PENDING, (i, len(pending))
    assert set(made[-MAX_PENDING:]) <= set(clients(world.store))
    assert not set(made[:-MAX_PENDING]) & set(clients(world.store))
    gone = consent(world, made[0])
    assert gone.status_code == 400 and "is not registered on this server" in gone.text
    assert consent(world, made[-1]).status_code == 200
    forget_counters(world.store)


def test_a_pending_client_expires_and_an_authorized_one_stays(world):
    authorized, token = access_token(world)
    forget_counters(world.store)
    r = register(world.base, client_name="never finishes")
    assert r.status_code == 201, r.text
    pending = r.json()["client_id"]
    assert consent(world, pending).status_code == 200
    age_clients(world.store, PENDING_TTL_S + 1)  # both clients are past the TTL now
    late = consent(world, pending)  # expired: unknown, whether or not its row is gone yet
    assert late.status_code == 400 and "is not registered on this server" in late.text
    assert register(world.base, client_name="next").status_code == 201  # each registration removes the expired
    stored = clients(world.store)
    assert pending not in stored
    assert stored.get(authorized) is False  # completed an authorization: kept, and its token works
    assert mcp_initialize(world.base, token).status_code == 200
    forget_counters(world.store)


# ---------------------------------------------------------------------- hidden characters, look-alike hosts

HIDDEN = [
    # (what, registration fields, error, words of the description)
    ("U+202E in the name", {"client_name": "Good \u202eppA"}, "invalid_client_metadata",
     "client_name contains U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("U+2066 in the name", {"client_name": "a\u2066b"}, "invalid_client_metadata", "U+2066 LEFT-TO-RIGHT ISOLATE"),
    ("U+2067 in the name", {"client_name": "a\u2067b"}, "invalid_client_metadata", "U+2067 RIGHT-TO-LEFT ISOLATE"),
    ("U+2068 in the name", {"client_name": "a\u2068b"}, "invalid_client_metadata", "U+2068 FIRST STRONG ISOLATE"),
    ("U+2069 in the name", {"client_name": "a\u2069b"}, "invalid_client_metadata",
     "U+2069 POP DIRECTIONAL ISOLATE"),
    ("U+200F in the name", {"client_name": "app\u200f"}, "invalid_client_metadata", "U+200F RIGHT-TO-LEFT MARK"),
    ("U+200B in the name", {"client_name": "ap\u200bp"}, "invalid_client_metadata", "U+200B ZERO WIDTH SPACE"),
    ("a bell in the name", {"client_name": "app\x07"}, "invalid_client_metadata", "U+0007 (a control character)"),
    ("a newline in the name", {"client_name": "app\nAllowed by your admin"}, "invalid_client_metadata", "U+000A"),
    ("private use in the name", {"client_name": "app\ue000"}, "invalid_client_metadata",
     "U+E000 (a private-use character)"),
    ("U+202E in a redirect URI", {"redirect_uris": ["https://app.example.com/\u202ebc"]}, "invalid_redirect_uri",
     "redirect_uris[0]: the redirect URI contains U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("U+2066 in a loopback redirect URI", {"redirect_uris": [REDIRECT, "http://127.0.0.1:1/\u2066cb"]},
     "invalid_redirect_uri", "redirect_uris[1]: the redirect URI contains U+2066"),
    ("U+200F in a redirect host", {"redirect_uris": ["https://app\u200f.example.com/cb"]}, "invalid_redirect_uri",
     "U+200F RIGHT-TO-LEFT MARK"),
    ("a Cyrillic і in the host", {"redirect_uris": ["https://l\u0456near.app/cb"]}, "invalid_redirect_uri",
     "is not ASCII: register the IDNA (punycode, xn--...) form of the domain name (xn--lnear-n2e.app)"),
    ("a percent-encoded host", {"redirect_uris": ["https://app%2eexample.com/cb"]}, "invalid_redirect_uri",
     "the host may contain only letters, digits"),
    ("U+202E in client_uri", {"client_uri": "https://app.example.com/\u202e"}, "invalid_client_metadata",
     "client_uri contains U+202E"),
]


def test_hidden_characters_and_lookalike_hosts_are_refused(world):
    forget_counters(world.store)
    before = client_rows(world.store)
    for what, fields, error, words in HIDDEN:
        r = register(world.base, **fields)
        assert r.status_code == 400, (what, r.text)
        assert r.json()["error"] == error and words in r.json()["error_description"], (what, r.text)
    assert client_rows(world.store) == before
    ok = register(world.base, redirect_uris=["https://xn--lnear-n2e.app/cb"], client_name="Linear (IDNA)")
    assert ok.status_code == 201, ok.text  # the punycode form, as given
    forget_counters(world.store)


def test_the_consent_page_draws_a_hostile_client_plainly(world):
    """A client registered before the checks, with a look-alike host and bidi controls in its
    name and redirect URI: the page names the host alone, in ASCII, isolated; no control survives."""
    uri = "https://l\u0456near.app/\u202e\u2066moc.elgoog//:sptth"
    client, _ = world.store.create_oauth_client("Linear\u202e \u2067tcennoC", [uri], {}, with_secret=False)
    page = consent(world, client.id, uri)
    assert page.status_code == 200, page.text[:2000]
    host = re.search(r'<code class="oauth-host"><bdi dir="ltr">([^<]*)</bdi></code>', page.text)
    assert host and host.group(1) == "xn--lnear-n2e.app", page.text
    name = re.search(r'<bdi class="oauth-client">([^<]*)</bdi>', page.text)
    assert name and name.group(1) == "Linear[U+202E] [U+2067]tcennoC", page.text
    assert "(a name it chose itself)" in page.text
    full = re.search(r'<code class="oauth-redirect"><bdi dir="ltr">([^<]*)</bdi></code>', page.text)
    assert full and full.group(1) == "https://xn--lnear-n2e.app/[U+202E][U+2066]moc.elgoog//:sptth", page.text
    shown = re.sub(r'<input type="hidden"[^>]*>', "", page.text)  # the form sends the URI back as registered
    assert not [ch for ch in shown if ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"]
    assert "\u0456" not in shown


# ---------------------------------------------------------------------- an OAuth token opens /api/mcp only


def test_an_oauth_access_token_opens_only_the_mcp_endpoint(world):
    _, token = access_token(world)
    bearer = {"Authorization": f"Bearer {token}"}
    chat = f"/chat/{world.chat_id}"
    assert SECRET_QUESTION in world.alice.http.get(chat).text  # the chat is there, for alice's web session
    assert mcp_initialize(world.base, token).status_code == 200  # what the token is for
    cases = [
        # (method, path, headers, body): each answered to the token as to no credential
        ("GET", chat, {"Accept": "text/html"}, None),
        ("GET", chat, {"Accept": "application/json"}, None),
        ("GET", chat, {}, None),
        ("GET", "/chats", {"Accept": "text/html"}, None),
        ("GET", "/", {"Accept": "text/html"}, None),
        ("GET", "/settings/keys", {"Accept": "text/html"}, None),
        ("GET", "/api/repos", {}, None),
        ("POST", "/api/search", {}, {"query": "vault", "matches": 10}),
        ("GET", "/api/models", {}, None),
        ("PATCH", f"/api/chat/{world.chat_id}", {}, {"visibility": "PUBLIC"}),
        ("POST", "/api/chat/blocking", {}, {"query": "where is the plan?"}),
    ]
    with httpx.Client(base_url=world.base, timeout=30, follow_redirects=False) as http:
        for method, path, headers, body in cases:
            nobody = http.request(method, path, headers=headers, json=body)
            with_token = http.request(method, path, headers={**headers, **bearer}, json=body)
            assert with_token.status_code == nobody.status_code, (method, path, with_token.status_code,
                                                                  with_token.text[:500])
            assert with_token.status_code in (302, 303, 307, 401, 404), (method, path, with_token.status_code)
            assert SECRET_QUESTION not in with_token.text, (method, path)
            if path.startswith("/api/"):
                assert with_token.status_code == 401 and "only by the MCP endpoint" in with_token.json()["message"]
    assert world.store.get_chat(world.chat_id).visibility == "PRIVATE"
