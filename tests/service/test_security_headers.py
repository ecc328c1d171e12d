"""Who a request comes from, which host it is for, and what a page may do (issue 24, items 4, 7, 9),
over real HTTP on one `codesearch serve` (its own Ray and Serve proxy, anonymous access on, as the
local demo has it):

* **Sign-in lock-outs ignore a client's X-Forwarded-For.** Serve's proxy believed it from any
  loopback peer, so a locked-out address got in again by naming another, and one address could
  guess as many passwords as it named addresses. The current-password check of
  ``/settings/password`` is throttled like a sign-in.
* **Only the service's own host names are answered** (loopback, ``AUTH_URL``'s host,
  ``CODESEARCH_ALLOWED_HOSTS``): a DNS-rebinding page's requests carry its own name and are
  refused, on every route and by the MCP transport, which also refuses a foreign ``Origin``.
* **Every page has the site's Content-Security-Policy**, ``nosniff`` and no framing.

Unit tables at the end pin down the rules themselves (trusted proxies, host names) without Serve;
they import the modules they test inside the tests, so the HTTP tests also run on a codesearch
that has none of this (and fail there).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import free_port
from tests.corpus import make_local_repo
from tests.oauthworld import REDIRECT, Pkce, authorize_url, register
from tests.service.test_serve_cli import ONE_WORKER_EACH, URLS_PY, Served

OWNER = ("owner@example.com", "owner-pass-1")
MEMBER = ("member@example.com", "member-pass-1")
PUBLIC_NAME = "codesearch.test"  # AUTH_URL's host (never resolved: only sent as Host)
EXTRA_NAME = "search.internal"  # CODESEARCH_ALLOWED_HOSTS
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def _users(env: dict, email: str, password: str) -> None:
    out = subprocess.run([sys.executable, "-m", "codesearch.cli", "users", "create", email, "--password-stdin"],
                         input=password + "\n", capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("security")
    make_local_repo(str(root / "repos" / "urls"), {"urls.py": URLS_PY})
    config = root / "config.json"
    config.write_text(json.dumps({"settings": ONE_WORKER_EACH,
                                  "connections": {"local": {"type": "git", "url": f"file://{root / 'repos'}/*"}}}))
    port = free_port()
    (root / "data").mkdir()
    s = Served(root / "data", port=port, searchers=1, CONFIG_PATH=str(config), FORCE_ENABLE_ANONYMOUS_ACCESS="true",
               AUTH_URL=f"http://{PUBLIC_NAME}:{port}", CODESEARCH_ALLOWED_HOSTS=EXTRA_NAME)
    try:
        s.wait_healthy()
        _users(s.env, *OWNER)  # the first user: OWNER
        _users(s.env, *MEMBER)
        yield s
    finally:
        s.stop()


@pytest.fixture
def store(served):
    """The service's state store, opened beside it (to reset the lock-outs a test leaves)."""
    from codesearch import environment
    from codesearch.store import Store

    st = Store.open(environment.data_dir(served.env))
    yield st
    st.close()


def _reset_lockouts(store) -> None:
    from codesearch.store import LOGIN_ACCOUNT, LOGIN_ADDRESS

    store.end_login_attempt(reset=[(LOGIN_ADDRESS, "127.0.0.1"), (LOGIN_ACCOUNT, OWNER[0]), (LOGIN_ACCOUNT, MEMBER[0])])


def _csrf(page: httpx.Response) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found, page.text[:2000]
    return found.group(1)


def _sign_in(base: str, email: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30, headers={"Accept": "text/html"})
    done = client.post("/login", data={"email": email, "password": password, "next": "/",
                                       "csrf_token": _csrf(client.get("/login"))})
    assert done.status_code == 303, done.text[:2000]
    return client


def _login_attempt(base: str, email: str, password: str, forwarded_for: str | None = None) -> httpx.Response:
    """One sign-in from a fresh browser (its own visitor cookie), optionally naming another client."""
    with httpx.Client(base_url=base, timeout=30, headers={"Accept": "text/html"}) as client:
        token = _csrf(client.get("/login"))
        headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
        return client.post("/login", data={"email": email, "password": password, "next": "/", "csrf_token": token},
                           headers=headers)


# ------------------------------------------------------------------ 4. lock-outs and X-Forwarded-For


def test_a_locked_out_address_stays_locked_out_whatever_it_names(served, store):
    from codesearch.store import LOGIN_ADDRESS, Backoff

    _reset_lockouts(store)
    # 127.0.0.1 locked out for five minutes, as 20 failed sign-ins and a few more would have done
    store.begin_login_attempt([(LOGIN_ADDRESS, "127.0.0.1", Backoff(free=0, base_seconds=300, cap_seconds=300,
                                                                     forget_seconds=86400))])
    try:
        cases = [  # (password, X-Forwarded-For)
            ("wrong-password", None),
            ("wrong-password", "10.9.8.7"),
            (OWNER[1], "10.9.8.7"),  # the right password is refused during a lock-out too
            (OWNER[1], "10.9.8.7, 127.0.0.1"),
        ]
        for password, xff in cases:
            r = _login_attempt(served.base, OWNER[0], password, xff)
            assert r.status_code == 429, (xff, r.status_code, r.text[:500])
            assert int(r.headers["retry-after"]) > 200 and "Too many sign-in attempts" in r.text
            assert "codesearch_session" not in r.headers.get("set-cookie", "")
    finally:
        _reset_lockouts(store)


def test_one_address_guessing_on_many_accounts_meets_the_lock_out_whatever_it_names(served, store):
    _reset_lockouts(store)
    try:
        statuses = [_login_attempt(served.base, f"guess{i}@example.com", "wrong-password", f"10.77.{i}.1").status_code
                    for i in range(30)]
        # 20 free failures per address (`throttle.ADDRESS`), then every guess is answered 429
        assert statuses == [401] * 20 + [429] * 10, statuses
    finally:
        _reset_lockouts(store)


def test_guessing_the_current_password_on_the_password_page_meets_the_lock_out(served, store):
    _reset_lockouts(store)
    client = _sign_in(served.base, *MEMBER)
    try:
        statuses = []
        for i in range(6):
            r = client.post("/settings/password", data={"current": f"guess-{i}", "password": "new-pass-123",
                                                         "confirm": "new-pass-123",
                                                         "csrf_token": _csrf(client.get("/settings/password"))})
            statuses.append(r.status_code)
        # 5 free failures per account (`throttle.ACCOUNT`), then 429 with Retry-After
        assert statuses == [400] * 5 + [429], statuses
        assert int(r.headers["retry-after"]) >= 1 and "try again in" in r.text
    finally:
        client.close()
        _reset_lockouts(store)


# ------------------------------------------------------------------ 7. Host and Origin


def _mcp_tools(served: Served, host: str | None = None, origin: str | None = None) -> httpx.Response:
    headers = {**MCP_HEADERS, **({"Host": host} if host else {}), **({"Origin": origin} if origin else {})}
    return httpx.post(f"{served.base}/api/mcp", json=TOOLS_LIST, headers=headers, timeout=60)


def _tool_names(r: httpx.Response) -> set[str]:
    data = [line[5:] for line in r.text.splitlines() if line.startswith("data:")] or [r.text]
    return {t["name"] for t in json.loads(data[-1])["result"]["tools"]}


REQUESTS = {  # name → (method, path, body, headers)
    "search": ("POST", "/api/search", {"query": "urlsplit", "matches": 10}, {}),
    "repos": ("GET", "/api/repos", None, {}),
    "page": ("GET", "/", None, {"Accept": "text/html"}),
}


@pytest.mark.parametrize("host,allowed", [
    ("evil.example", False),
    ("rebind.attacker.example:{port}", False),  # DNS rebinding: the attacker's name, our address
    ("127.0.0.1.attacker.example:{port}", False),
    ("127.0.0.1:{port}", True),
    ("localhost:{port}", True),
    ("[::1]:{port}", True),
    (PUBLIC_NAME + ":{port}", True),  # AUTH_URL's host
    (EXTRA_NAME, True),  # CODESEARCH_ALLOWED_HOSTS
])
def test_only_the_services_own_host_names_are_answered(served, host, allowed):
    host = host.format(port=served.port)
    for name, (method, path, body, headers) in REQUESTS.items():
        r = httpx.request(method, served.base + path, json=body, headers={**headers, "Host": host}, timeout=60)
        if allowed:
            assert r.status_code == 200, (name, host, r.status_code, r.text[:300])
        else:
            assert r.status_code == 421, (name, host, r.status_code, r.text[:300])
            if path.startswith("/api/"):
                assert r.json()["errorCode"] == "MISDIRECTED_REQUEST" and repr(host) in r.json()["message"]
                assert "CODESEARCH_ALLOWED_HOSTS" in r.json()["message"]
            else:
                assert "Wrong host" in r.text and "content-security-policy" in r.headers
    r = _mcp_tools(served, host)
    if allowed:
        assert r.status_code == 200 and "grep" in _tool_names(r), (host, r.status_code, r.text[:300])
    else:
        assert r.status_code == 421 and r.json()["errorCode"] == "MISDIRECTED_REQUEST", (host, r.text[:300])
    # load balancers probe health by address: always answered, it says nothing
    assert httpx.get(f"{served.base}/api/health", headers={"Host": host}, timeout=30).json() == {"status": "ok"}


@pytest.mark.parametrize("origin,allowed", [
    (None, True),  # not a browser
    ("http://127.0.0.1:{port}", True),
    ("http://localhost:6274", True),  # a local MCP client's page (the MCP Inspector)
    ("http://" + PUBLIC_NAME + ":{port}", True),
    ("http://evil.example", False),
    ("http://rebind.attacker.example:{port}", False),
    ("null", False),
])
def test_mcp_refuses_a_browser_request_from_another_sites_page(served, origin, allowed):
    r = _mcp_tools(served, origin=origin and origin.format(port=served.port))
    if allowed:
        assert r.status_code == 200 and "grep" in _tool_names(r), (origin, r.status_code, r.text[:300])
    else:
        assert r.status_code == 403, (origin, r.status_code, r.text[:300])


# ------------------------------------------------------------------ 9. the pages' headers


def _assert_page_headers(r: httpx.Response, what: str) -> str:
    assert r.headers.get("content-type", "").startswith("text/html"), (what, r.status_code, r.headers)
    csp = r.headers.get("content-security-policy", "")
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives.get("default-src") == ["'self'"], (what, csp)
    assert directives.get("frame-ancestors") == ["'none'"], (what, csp)
    assert directives.get("base-uri") == ["'none'"] and directives.get("object-src") == ["'none'"], (what, csp)
    assert "script-src" not in directives, (what, csp)  # scripts: 'self' only, no inline
    assert directives.get("form-action", [""])[0] == "'self'", (what, csp)
    assert r.headers.get("x-content-type-options") == "nosniff", what
    assert r.headers.get("x-frame-options") == "DENY", what
    assert r.headers.get("referrer-policy") in ("same-origin", "no-referrer"), what
    return csp


def test_every_page_has_the_sites_security_headers(served, store):
    _reset_lockouts(store)
    base = served.base
    visitor = httpx.Client(base_url=base, timeout=60, headers={"Accept": "text/html"})
    owner = _sign_in(base, *OWNER)
    try:
        members = owner.get("/settings/members")
        invite = owner.post("/settings/members/invites", data={"email": "", "role": "MEMBER",
                                                               "csrf_token": _csrf(members)})
        assert invite.status_code == 201, invite.text[:2000]
        token = re.search(r"/invite/([A-Za-z0-9_-]+)", invite.text).group(1)
        client_id = register(base, client_name="<b>Evil client</b>").json()["client_id"]
        repo = httpx.get(f"{base}/api/repos", timeout=30).json()[0]["repoName"]
        pages = [  # (who, path, status)
            (visitor, "/login", 200),
            (visitor, f"/invite/{token}", 200),
            (visitor, "/invite/not-a-token", 404),
            (visitor, "/no-such-page", 404),  # the error page
            (visitor, "/", 200),
            (visitor, "/search?q=urlsplit", 200),
            (visitor, "/repos", 200),
            (visitor, f"/browse/{repo}", 200),
            (visitor, f"/browse/{repo}/-/blob/urls.py", 200),
            (owner, authorize_url(client_id, Pkce.make()), 200),  # the OAuth consent page
            (owner, authorize_url("no-such-client", Pkce.make()), 400),  # its refusal
            (owner, "/chats", 200),
            *[(owner, f"/settings/{page}", 200) for page in (
                "keys", "password", "account", "apps", "users", "members", "connections", "access", "mcp", "audit")],
        ]
        for who, path, status in pages:
            r = who.get(path)
            assert r.status_code == status, (path, r.status_code, r.text[:500])
            csp = _assert_page_headers(r, path)
            if path.startswith("/oauth/authorize") and status == 200:  # its answer redirects to the client
                assert csp.split("form-action ")[1].split(";")[0] == "'self' http://127.0.0.1:33333", csp
                assert urlsplit(REDIRECT).port == 33333
        refused = visitor.get("/", headers={"Host": "evil.example"})
        assert refused.status_code == 421
        _assert_page_headers(refused, "the wrong-host page")
    finally:
        visitor.close()
        owner.close()


# ------------------------------------------------------------------ the rules, without Serve


def _scope(peer: str | None, headers: dict[str, str] | None = None, stamped: bool = True, scheme: str = "http"):
    from codesearch import forwarded

    scope = {"type": "http", "scheme": scheme, "client": (peer, 40000) if peer else None,
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
    if stamped and peer:
        scope[forwarded.PEER_KEY] = peer
    return scope


@pytest.mark.parametrize("trusted,peer,headers,stamped,expected", [
    # no trusted proxy: the peer, whatever the headers say
    ("", "203.0.113.9", {}, True, ("203.0.113.9", "http")),
    ("", "127.0.0.1", {"X-Forwarded-For": "10.9.8.7", "X-Forwarded-Proto": "https"}, True, ("127.0.0.1", "http")),
    # a trusted proxy: the rightmost address it did not add itself... or that is not another trusted proxy
    ("127.0.0.1", "127.0.0.1", {"X-Forwarded-For": "198.51.100.4"}, True, ("198.51.100.4", "http")),
    ("127.0.0.1", "127.0.0.1", {"X-Forwarded-For": "6.6.6.6, 198.51.100.4"}, True, ("198.51.100.4", "http")),
    ("127.0.0.1,10.0.0.0/8", "127.0.0.1", {"X-Forwarded-For": "6.6.6.6, 198.51.100.4, 10.1.2.3"}, True,
     ("198.51.100.4", "http")),
    ("127.0.0.1", "127.0.0.1", {"X-Forwarded-For": "198.51.100.4:5555", "X-Forwarded-Proto": "http, https"}, True,
     ("198.51.100.4", "https")),
    ("127.0.0.1", "127.0.0.1", {}, True, ("127.0.0.1", "http")),  # the proxy's own request
    ("::1", "::1", {"X-Forwarded-For": "[2001:db8::7]:443"}, True, ("2001:db8::7", "http")),
    # an untrusted peer's headers are its own words
    ("10.0.0.0/8", "203.0.113.9", {"X-Forwarded-For": "10.1.2.3", "X-Forwarded-Proto": "https"}, True,
     ("203.0.113.9", "http")),
    # the Forwarded header is never read (a proxy sets one family; the other would be the client's)
    ("127.0.0.1", "127.0.0.1", {"Forwarded": "for=6.6.6.6;proto=https"}, True, ("127.0.0.1", "http")),
    # nobody vouched for the peer (a proxy started without FORWARDED_ALLOW_IPS=none): X-Forwarded-For may have
    # rewritten it, so every such request is the one client `UNVERIFIED`; without the header, the peer
    ("127.0.0.1", "10.9.8.7", {"X-Forwarded-For": "10.9.8.7"}, False, ("unverified-proxy", "http")),
    ("", "198.51.100.4", {}, False, ("198.51.100.4", "http")),
])
def test_the_client_address_and_scheme(trusted, peer, headers, stamped, expected):
    from codesearch import forwarded

    client = forwarded.client_of(_scope(peer, headers, stamped), {"CODESEARCH_TRUSTED_PROXIES": trusted})
    assert (client.address, client.scheme) == expected


def test_the_proxy_vouches_for_the_peer_only_when_its_uvicorn_believes_no_forwarded_header():
    import anyio

    from codesearch import forwarded

    seen = []

    async def app(scope, receive, send):
        seen.append(scope.get(forwarded.PEER_KEY))

    for environ, want in (({"FORWARDED_ALLOW_IPS": "none"}, "192.0.2.1"), ({}, None),
                          ({"FORWARDED_ALLOW_IPS": "127.0.0.1"}, None), ({"FORWARDED_ALLOW_IPS": "*"}, None)):
        scope = {**_scope("192.0.2.1", stamped=False), forwarded.PEER_KEY: "forged"}
        anyio.run(forwarded.PeerStamp(app, environ), scope, None, None)
        assert seen[-1] == want, environ
    assert forwarded.PROXY_ENV == {"FORWARDED_ALLOW_IPS": "none"}


@pytest.mark.parametrize("value", ["10.0.0.0/8, ::1", "", " 192.0.2.1 "])
def test_trusted_proxies_accepts_addresses_and_networks(value):
    from codesearch import forwarded

    forwarded.parse_networks(value)


@pytest.mark.parametrize("value", ["proxy.internal", "10.0.0.0/33", "*"])
def test_trusted_proxies_refuses_anything_else(value):
    from codesearch.environment import InvalidEnvironmentVariable
    from codesearch import forwarded

    with pytest.raises(InvalidEnvironmentVariable, match="CODESEARCH_TRUSTED_PROXIES"):
        forwarded.parse_networks(value)


@pytest.mark.parametrize("environ,host,allowed", [
    ({}, "localhost", True),
    ({}, "LOCALHOST:8080", True),
    ({}, "127.0.0.1:3000", True),
    ({}, "[::1]:3000", True),
    ({}, "evil.example", False),
    ({}, "localhost.evil.example", False),
    ({}, "", False),
    ({}, "localhost:99999", False),
    ({"AUTH_URL": "https://code.example.com"}, "code.example.com", True),
    ({"AUTH_URL": "https://code.example.com"}, "code.example.com:443", True),
    ({"AUTH_URL": "https://code.example.com"}, "code.example.com.", True),
    ({"AUTH_URL": "https://code.example.com"}, "other.example.com", False),
    ({"CODESEARCH_ALLOWED_HOSTS": "a.example, b.example:8443"}, "a.example:1", True),
    ({"CODESEARCH_ALLOWED_HOSTS": "a.example, b.example:8443"}, "b.example:8443", True),
    ({"CODESEARCH_ALLOWED_HOSTS": "a.example, b.example:8443"}, "b.example", False),
    ({"CODESEARCH_ALLOWED_HOSTS": "*"}, "anything.example", True),
    ({"PUBLIC_URL": "http://10.0.0.5:3000"}, "10.0.0.5:3000", True),  # `public_url` (serve_config.yaml, --host)
    ({"PUBLIC_URL": "https://search.example.com/cs"}, "search.example.com", True),
])
def test_allowed_hosts(environ, host, allowed):
    from codesearch.service.middleware import allowed_hosts

    hosts = allowed_hosts.AllowedHosts.from_environ(environ, [environ.get("PUBLIC_URL", "http://localhost:3000")])
    assert hosts.allows(host) is allowed


def test_allowed_hosts_refuses_what_is_not_a_host():
    from codesearch.environment import InvalidEnvironmentVariable
    from codesearch.service.middleware import allowed_hosts

    with pytest.raises(InvalidEnvironmentVariable, match="CODESEARCH_ALLOWED_HOSTS"):
        allowed_hosts.AllowedHosts.from_environ({"CODESEARCH_ALLOWED_HOSTS": "https://code.example.com/"})


@pytest.mark.parametrize("host,environ,warns", [
    ("127.0.0.1", {}, False),
    ("0.0.0.0", {}, True),
    ("0.0.0.0", {"AUTH_URL": "https://code.example.com"}, False),
    ("0.0.0.0", {"CODESEARCH_ALLOWED_HOSTS": "code.internal"}, False),
    ("10.0.0.5", {}, False),  # its public URL is http://10.0.0.5:PORT, a host the service answers for
])
def test_serve_warns_when_it_listens_beyond_loopback_for_no_named_host(host, environ, warns):
    from codesearch.serving.launcher import hosts_warning

    warning = hosts_warning(host, environ)
    assert bool(warning) is warns
    if warns:
        assert "421" in warning and "AUTH_URL" in warning and "CODESEARCH_ALLOWED_HOSTS" in warning


@pytest.mark.parametrize("url,source", [
    ("http://127.0.0.1:33333/callback", "http://127.0.0.1:33333"),
    ("https://Idp.Example.com/authorize?x=1", "https://idp.example.com"),
    ("cursor://anysphere.cursor-retrieval/oauth/callback", "cursor:"),
    ("https:", "https:"),
    ("http://[::1]:8080/cb", "http://[::1]:8080"),
    ("https://x.example; script-src *", None),
    ("not a url", None),
])
def test_form_action_sources(url, source):
    from codesearch.service.middleware import security_headers

    assert security_headers.source_of(url) == source
