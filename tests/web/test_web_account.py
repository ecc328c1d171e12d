"""The account side of the web UI: sign-in, sessions, CSRF, API keys, users (codesearch.sessions,
codesearch.web.pages_account, the cookie support of codesearch.service.auth).

Browser tests run a real headless Chromium against the Serve app on 127.0.0.1 (`tests.webworld`,
mounted under ``/web``, anonymous access off); the first-account setup and a few edge cases run
in process against `build_app` with Starlette's TestClient. Screenshots: tests/output/screenshots/.
"""

from __future__ import annotations

import re
import time
import warnings
from datetime import timedelta

import httpx
import pytest

from codesearch.serving.api import build_app
from codesearch.store import Store
from codesearch import accounts, sessions
from tests.webworld import browser, login, page_for, shot, web  # noqa: F401  (pytest fixtures)
from tests.conftest import LOCAL

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

SEARCH = {"query": "handle_request", "matches": 50}


def _csrf(page) -> str:
    return page.locator("meta[name=csrf-token]").get_attribute("content")


def _cookie(page, name: str) -> dict | None:
    return next((c for c in page.context.cookies() if c["name"] == name), None)


def _session_client(page, web) -> httpx.Client:
    """httpx with the browser's session cookie (and nothing else)."""
    c = _cookie(page, sessions.SESSION_COOKIE)
    assert c, "not signed in"
    return httpx.Client(base_url=web["serve_url"], cookies={c["name"]: c["value"]}, timeout=30)


def _create_key(page, web, name: str) -> str:
    page.goto(web["url"] + "/settings/keys")
    page.fill("input[name=name]", name)
    page.click("form.row-form button[type=submit]")
    page.wait_for_selector("#new-key")
    return page.input_value("#new-key")


# ----------------------------------------------------------------------------- in the browser

def test_sign_in_wrong_password_and_cookie_flags(page_for, web):
    page = page_for(None)
    page.goto(web["url"] + "/login")
    shot(page, "login")
    for email, password in ((web["owner"]["email"], "not-the-password"), ("nobody@example.com", "whatever-1")):
        page.fill("input[name=email]", email)
        page.fill("input[name=password]", password)
        with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/web/login")) as info:
            page.click("button[type=submit]")
        assert info.value.status == 401
        assert page.locator(".form-error").inner_text() == "Incorrect email or password."  # no user enumeration
        assert _cookie(page, sessions.SESSION_COOKIE) is None
    shot(page, "login-error")

    login(page, web, web["owner"])
    assert page.url == web["url"] + "/"
    cookie = _cookie(page, sessions.SESSION_COOKIE)
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Lax" and cookie["path"] == "/web"
    assert cookie["expires"] > 0  # persistent (30 days), not a browser-session cookie
    assert cookie["secure"] is False  # plain http on 127.0.0.1
    # the raw cookie value is never stored: only its SHA-256
    assert web["store"].get_web_session(cookie["value"])[1].email == web["owner"]["email"]
    with web["store"].engine.connect() as c:
        ids = [r[0] for r in c.exec_driver_sql("SELECT id FROM web_sessions")]
    assert cookie["value"] not in ids and web["store"].web_session_id(cookie["value"]) in ids


def _submit_login(page, email: str, password: str):
    """Sign in through the form; the response to the POST (status, headers)."""
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", password)
    with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/web/login")) as info:
        page.click("button[type=submit]")
    page.wait_for_load_state()
    return info.value


def test_wrong_passwords_lock_the_account_out_with_doubling_waits(page_for, web):
    """5 free failures, then lock-outs of 1, 2, 4 s…: the right password is refused during one
    (429, Retry-After) and works after it; a success starts the count again."""
    store = web["store"]
    account = {"email": "locked@example.com", "password": "locked-pass-1"}
    store.create_user(account["email"], "Locked", password_hash=accounts.hash_password(account["password"]))
    page = page_for(None)
    page.goto(web["url"] + "/login")
    # (password, status, Retry-After, message)
    steps = [("wrong-pass-0", 401, None, "Incorrect email or password.")] * 5 + [
        ("wrong-pass-0", 429, "1", "Incorrect email or password. Too many attempts: try again in 1 s."),
        ("wait", None, None, None),
        ("wrong-pass-0", 429, "2", "Incorrect email or password. Too many attempts: try again in 2 s."),
        ("wait", None, None, None),
        ("wrong-pass-0", 429, "4", "Incorrect email or password. Too many attempts: try again in 4 s."),
        (account["password"], 429, None, "Too many sign-in attempts: try again in"),  # right, but locked out
    ]
    retry_after = 0
    for password, status, header, message in steps:
        if password == "wait":
            time.sleep(retry_after + 0.2)
            continue
        response = _submit_login(page, account["email"], password)
        assert response.status == status, (password, page.inner_text(".form-error"))
        assert page.inner_text(".form-error").startswith(message)
        if header:
            assert response.headers["retry-after"] == header
        retry_after = int(response.headers.get("retry-after", "0"))
    assert retry_after >= 1 and sessions.SESSION_COOKIE not in {c["name"] for c in page.context.cookies()}
    shot(page, "login-locked-out")
    time.sleep(retry_after + 0.2)
    login_via_form(page, account)  # the lock-out is over: the right password works
    assert page.url == web["url"] + "/"

    # the success reset the account's count: five more free failures
    again = page_for(None)
    again.goto(web["url"] + "/login")
    assert [_submit_login(again, account["email"], "wrong-pass-1").status for _ in range(5)] == [401] * 5


def test_one_address_trying_many_accounts_is_locked_out(page_for, web):
    """Failures from one client address count across accounts (unknown emails too): after 20
    free ones the address waits, even for a right password. Every browser test signs in from
    127.0.0.1, so the address starts and ends with a clean count."""
    store, address = web["store"], "127.0.0.1"
    page = page_for(None)
    page.goto(web["url"] + "/login")
    token = _csrf(page)

    def attempt(email, password):
        return page.request.post(web["url"] + "/login", max_redirects=0,
                                 form={"email": email, "password": password, "csrf_token": token})

    def rows():
        with store.engine.connect() as c:
            return c.exec_driver_sql("SELECT count(*) FROM login_failures").scalar()

    store.end_login_attempt(reset=[("address", address)])
    try:
        statuses = [attempt(f"sprayed-{i}@example.com", "guess-pass-1").status for i in range(21)]
        assert statuses == [401] * 20 + [429]
        for i, wait in ((21, 1), (22, 2)):  # let the doubling lock-outs pass: 4 s leave time to check
            time.sleep(wait + 0.2)
            r = attempt(f"sprayed-{i}@example.com", "guess-pass-1")
            assert (r.status, r.headers["retry-after"]) == (429, str(wait * 2))
        counted = rows()
        # a right password for an account never tried before is refused too, and not counted
        r = attempt(web["owner"]["email"], web["owner"]["password"])
        assert r.status == 429 and int(r.headers["retry-after"]) >= 1 and "Too many sign-in attempts" in r.text()
        assert rows() == counted
    finally:
        store.end_login_attempt(reset=[("address", address)])
    assert attempt(web["owner"]["email"], web["owner"]["password"]).status == 303


def test_api_key_created_in_the_page_works_until_revoked(page_for, web):
    page = page_for(web["owner"])
    key = _create_key(page, web, "ci runner")
    assert key.startswith("cs_")
    assert "will not be shown again" in page.inner_text(".key-created")
    shot(page, "key-created")

    r = httpx.post(web["url"] + "/api/search", json=SEARCH, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.json()["files"] and "handle_request" in r.text

    page.goto(web["url"] + "/settings/keys")  # shown once: a fresh page lists it without the secret
    assert page.locator("#new-key").count() == 0 and key not in page.content()
    row = page.locator("tr", has_text="ci runner")
    assert "active" in row.inner_text() and "never" not in row.locator("td").nth(2).inner_text()  # last used: now
    shot(page, "keys")

    page.once("dialog", lambda d: d.accept())  # "Revoke the key …?"
    row.locator("button", has_text="Revoke").click()
    page.wait_for_url(re.compile(r".*/settings/keys\?revoked=\d+$"))
    assert "was revoked" in page.inner_text(".notice")
    assert "revoked" in page.locator("tr", has_text="ci runner").inner_text()
    r = httpx.post(web["url"] + "/api/search", json=SEARCH, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 401
    shot(page, "keys-after-revoke")


def test_a_member_sees_and_revokes_only_their_own_keys(page_for, web):
    store = web["store"]
    owner_kid, owner_key = store.create_api_key(web["owner"]["id"], "owner private key")
    page = page_for(web["member"])
    member_key = _create_key(page, web, "member laptop")
    page.goto(web["url"] + "/settings/keys")
    text = page.inner_text("main")
    assert "member laptop" in text and "owner private key" not in text and "mcp tests" not in text
    assert page.locator("header nav a", has_text="Users").count() == 0

    # the owner's key id, posted with the member's valid CSRF token: 404, and nothing changes
    r = page.request.post(f"{web['url']}/settings/keys/{owner_kid}/revoke", form={"csrf_token": _csrf(page)},
                          max_redirects=0)
    assert r.status == 404
    assert httpx.post(web["url"] + "/api/search", json=SEARCH, headers={"Authorization": f"Bearer {owner_key}"},
                      timeout=30).status_code == 200
    assert [k.id for k in store.list_api_keys(web["owner"]["id"]) if k.id == owner_kid] == [owner_kid]
    assert httpx.get(web["url"] + "/api/repos", headers={"Authorization": f"Bearer {member_key}"},
                     timeout=30).status_code == 200

    response = page.goto(web["url"] + "/settings/users")
    assert response.status == 403 and "Only owners" in page.inner_text("main")


def test_the_owner_adds_a_member_who_can_sign_in(page_for, web):
    page = page_for(web["owner"])
    page.goto(web["url"] + "/settings/users")
    assert web["member"]["email"] in page.inner_text("table.users")
    page.fill("#new-email", "New.Person@Example.com")
    page.fill("#new-name", "New Person")
    page.fill("#new-password", "short")
    page.evaluate("document.querySelector('#new-password').removeAttribute('minlength')")
    page.click("form.grid-form button[type=submit]")
    assert "at least 8 characters" in page.inner_text(".form-error")
    page.fill("#new-password", "new-person-pass")
    page.click("form.grid-form button[type=submit]")
    page.wait_for_url(re.compile(r".*/settings/users\?added=\d+$"))
    assert "new.person@example.com was added" in page.inner_text(".notice")
    row = page.locator("tr", has_text="new.person@example.com")
    assert "member" in row.inner_text() and "New Person" in row.inner_text()
    shot(page, "users")

    # adding the same email again is refused
    page.fill("#new-email", "new.person@example.com")
    page.fill("#new-password", "another-pass-1")
    page.click("form.grid-form button[type=submit]")
    assert "exists already" in page.inner_text(".form-error")

    other = page_for({"email": "new.person@example.com", "password": "new-person-pass"})
    assert other.url == web["url"] + "/"
    other.goto(web["url"] + "/settings/keys")
    assert "new.person@example.com" in other.inner_text(".settings-tabs")


def test_forms_need_the_csrf_token(page_for, web):
    page = page_for(web["owner"])
    page.goto(web["url"] + "/settings/keys")
    token = _csrf(page)
    before = len(web["store"].list_api_keys(web["owner"]["id"], include_revoked=True))
    for form in ({"name": "no token"}, {"name": "wrong token", "csrf_token": "x" * 43}, {"name": "e", "csrf_token": ""}):
        r = page.request.post(web["url"] + "/settings/keys", form=form, max_redirects=0)
        assert r.status == 403, form
        assert "security token" in r.text()
    assert len(web["store"].list_api_keys(web["owner"]["id"], include_revoked=True)) == before
    r = page.request.post(web["url"] + "/settings/keys", form={"name": "with token", "csrf_token": token},
                          max_redirects=0)
    assert r.status == 201
    # sign out without a token: refused, still signed in
    assert page.request.post(web["url"] + "/logout", form={}, max_redirects=0).status == 403
    assert page.goto(web["url"] + "/settings/keys").url.endswith("/settings/keys")

    # the sign-in form is protected too (a visitor's token is bound to the codesearch_csrf cookie)
    visitor = page_for(None)
    visitor.goto(web["url"] + "/login")
    assert _cookie(visitor, sessions.CSRF_COOKIE)["httpOnly"] is True
    creds = {"email": web["owner"]["email"], "password": web["owner"]["password"]}
    assert visitor.request.post(web["url"] + "/login", form=creds, max_redirects=0).status == 403
    assert visitor.request.post(web["url"] + "/login", form={**creds, "csrf_token": token},  # someone else's token
                                max_redirects=0).status == 403
    ok = visitor.request.post(web["url"] + "/login", form={**creds, "csrf_token": _csrf(visitor)}, max_redirects=0)
    assert ok.status == 303 and ok.headers["location"] == "/web/"


def test_the_api_accepts_the_session_cookie_with_csrf_for_changes(page_for, web):
    page = page_for(web["member"])
    page.goto(web["url"] + "/settings/keys")
    token = _csrf(page)
    with _session_client(page, web) as c:
        assert c.get("/web/api/repos").status_code == 200
        r = c.post("/web/api/search", json=SEARCH)
        assert r.status_code == 401 and r.json()["errorCode"] == "NOT_AUTHENTICATED"
        assert c.post("/web/api/search", json=SEARCH, headers={"X-CSRF-Token": "wrong"}).status_code == 401
        r = c.post("/web/api/search", json=SEARCH, headers={"X-CSRF-Token": token})
        assert r.status_code == 200 and "handle_request" in r.text
    # the page's own fetch() (http.js apiFetch sends X-CSRF-Token) works signed in
    status = page.evaluate("""async () => {
        const {apiFetch} = await import(document.body.dataset.root + '/static/http.js');
        return (await apiFetch(document.body.dataset.root + '/api/search',
            {method: 'POST', headers: {'Content-Type': 'application/json'},
             body: JSON.stringify({query: 'handle_request', matches: 5})})).status; }""")
    assert status == 200
    # a key in the header wins over the cookie, and needs no CSRF token
    with _session_client(page, web) as c:
        r = c.post("/web/api/search", json=SEARCH, headers={"Authorization": f"Bearer {web['key']}"})
        assert r.status_code == 200


def test_signed_out_pages_redirect_to_sign_in_and_back(page_for, web):
    page = page_for(None)
    response = page.goto(web["url"] + "/settings/keys")
    assert response.url.startswith(web["url"] + "/login?next=")
    assert page.locator("input[name=next]").input_value() == "/web/settings/keys"
    page.fill("input[name=email]", web["owner"]["email"])
    page.fill("input[name=password]", web["owner"]["password"])
    page.click("button[type=submit]")
    page.wait_for_url(web["url"] + "/settings/keys")
    # sign out: the session ends on the server too
    with _session_client(page, web) as c:
        assert c.get("/web/api/repos").status_code == 200
        page.click("header button:has-text('Sign out')")
        page.wait_for_url(re.compile(r".*/login\?signed_out=1$"))
        assert "You have signed out" in page.inner_text("main")
        assert c.get("/web/api/repos").status_code == 401
    assert _cookie(page, sessions.SESSION_COOKIE) is None
    # an open redirect is not possible
    page.goto(web["url"] + "/login?next=//evil.example/x")
    login_via_form(page, web["owner"])
    assert page.url == web["url"] + "/"


def login_via_form(page, account):
    page.fill("input[name=email]", account["email"])
    page.fill("input[name=password]", account["password"])
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login" not in url)


def test_change_password(page_for, web):
    store = web["store"]
    user = store.create_user("changer@example.com", "Changer", password_hash=accounts.hash_password("first-pass-1"))
    account = {"email": user.email, "password": "first-pass-1"}
    page, elsewhere = page_for(account), page_for(account, sign_in=True)  # two sessions
    page.goto(web["url"] + "/settings/password")
    page.fill("#current", "wrong-pass-1")
    page.fill("#password", "second-pass-2")
    page.fill("#confirm", "second-pass-2")
    page.click("form.stack button[type=submit]")
    assert "not right" in page.inner_text(".form-error")
    page.fill("#current", "first-pass-1")
    page.fill("#password", "second-pass-2")
    page.fill("#confirm", "second-pass-2")
    page.click("form.stack button[type=submit]")
    assert "was changed" in page.inner_text(".notice")
    assert page.goto(web["url"] + "/settings/keys").url.endswith("/settings/keys")  # this session lives on
    assert "/login" in elsewhere.goto(web["url"] + "/settings/keys").url  # the other one ended
    assert accounts.verify_password(store.get_user(user.id).password_hash, "second-pass-2")


def test_dark_mode_screenshots(page_for, web):
    page = page_for(web["owner"])
    page.emulate_media(color_scheme="dark")
    _create_key(page, web, "dark mode key")
    shot(page, "key-created-dark")
    page.goto(web["url"] + "/settings/users")
    shot(page, "users-dark")
    visitor = page_for(None)
    visitor.emulate_media(color_scheme="dark")
    visitor.goto(web["url"] + "/login")
    shot(visitor, "login-dark")
    bg = visitor.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(13, 17, 23)"


# ----------------------------------------------------------------------------- in process

class _Searcher:
    def search(self, query, options):
        return {"files": [], "stats": {}}


@pytest.fixture()
def fresh(tmp_path):
    store = Store.open(tmp_path / "data")
    app = build_app(lambda: _Searcher(), get_store=lambda: store, anonymous_access=False, data_dir=str(tmp_path / "data"))
    yield store, app
    store.close()


def _form_token(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def test_first_account_setup(fresh):
    store, app = fresh
    c = TestClient(app, base_url=LOCAL)
    page = c.get("/login")
    assert page.status_code == 200 and 'href="/setup"' in page.text
    form = c.get("/setup")
    assert form.status_code == 200
    token = _form_token(form.text)
    good = {"email": "Boss@Example.com", "name": "Boss", "password": "boss-pass-1", "confirm": "boss-pass-1",
            "csrf_token": token}
    assert c.post("/setup", data={**good, "csrf_token": "nope"}).status_code == 403
    for bad, why in (({"confirm": "boss-pass-2"}, "do not match"), ({"password": "short", "confirm": "short"}, "at least 8"),
                     ({"email": "not-an-email"}, "valid email")):
        r = c.post("/setup", data={**good, **bad})
        assert r.status_code == 400 and why in r.text
    assert not store.has_users()
    r = c.post("/setup", data=good, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith(sessions.SESSION_COOKIE + "="))
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie and "Secure" not in cookie
    (owner,) = store.list_users()
    assert owner.email == "boss@example.com" and owner.role == "OWNER"
    assert accounts.verify_password(owner.password_hash, "boss-pass-1")
    # signed in now; setup is gone for everyone
    assert c.get("/settings/users").status_code == 200
    assert c.get("/setup").status_code == 404
    assert TestClient(app, base_url=LOCAL).get("/setup").status_code == 404
    other = TestClient(app, base_url=LOCAL)
    r = other.post("/setup", data={**good, "email": "intruder@example.com",
                                   "csrf_token": _form_token(other.get("/login").text)})
    assert r.status_code == 404 and len(store.list_users()) == 1
    assert 'href="/setup"' not in other.get("/login").text


def test_login_upgrades_an_outdated_hash_and_sessions_expire(fresh):
    from argon2 import PasswordHasher

    store, app = fresh
    weak = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash("legacy-pass-1")
    user = store.create_user("old@example.com", password_hash=weak)
    c = TestClient(app, base_url=LOCAL)
    r = c.post("/login", data={"email": "OLD@example.com ", "password": "legacy-pass-1", "next": "/settings/keys",
                               "csrf_token": _form_token(c.get("/login").text)}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/settings/keys"
    upgraded = store.get_user(user.id).password_hash
    assert upgraded != weak and not accounts.needs_rehash(upgraded)
    assert accounts.verify_password(upgraded, "legacy-pass-1")
    assert c.get("/login", follow_redirects=False).status_code == 303  # signed in: /login moves on
    assert c.get("/api/repos").status_code == 200
    # 30 days (AUTH_SESSION_MAX_AGE_SECONDS' default) later the session is gone
    real = store.clock
    store.clock = lambda: real() + sessions.SESSION_TTL + timedelta(seconds=1)
    try:
        assert c.get("/api/repos").status_code == 401
        r = c.get("/settings/keys", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")
        assert store.delete_expired_web_sessions() == 1
    finally:
        store.clock = real


def test_secure_cookie_over_https_and_safe_next(fresh):
    store, app = fresh
    store.create_user("o@example.com", password_hash=accounts.hash_password("owner-pass-1"))
    c = TestClient(app, base_url="https://localhost")
    r = c.post("/login", data={"email": "o@example.com", "password": "owner-pass-1", "next": "https://evil.example/",
                               "csrf_token": _form_token(c.get("/login").text)}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    assert all("Secure" in h for h in r.headers.get_list("set-cookie"))
    for value, want in (("/repos?q=1", "/repos?q=1"), ("//evil", "/"), ("/\\evil", "/"), ("evil", "/"),
                        ("", "/")):
        assert sessions.safe_next(value, "") == want
    assert sessions.safe_next("/settings/keys", "/cs") == "/cs/settings/keys"
    assert sessions.safe_next("/cs/settings/keys", "/cs") == "/cs/settings/keys"


def test_passwords():
    h = accounts.hash_password("correct horse")
    assert h.startswith("$argon2id$") and accounts.verify_password(h, "correct horse")
    assert not accounts.verify_password(h, "wrong horse") and not accounts.verify_password(None, "x")
    assert not accounts.verify_password("garbage", "correct horse")
    with pytest.raises(accounts.WeakPassword, match="at least 8"):
        accounts.hash_password("1234567")


def test_cli_set_password(tmp_path, monkeypatch, capsys):
    import io

    from codesearch import cli

    data = str(tmp_path / "d")
    assert cli.main(["users", "create", "cli@example.com", "--data-dir", data]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("cli-pass-123\n"))
    assert cli.main(["users", "set-password", "cli@example.com", "--password-stdin", "--data-dir", data]) == 0
    with Store.open(data) as s:
        assert accounts.verify_password(s.find_user_by_email("cli@example.com").password_hash, "cli-pass-123")
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    with pytest.raises(SystemExit, match="at least 8"):
        cli.main(["users", "set-password", "cli@example.com", "--password-stdin", "--data-dir", data])


def test_one_session_lookup_per_request(fresh, monkeypatch):
    store, app = fresh
    store.create_user("o@example.com", password_hash=accounts.hash_password("owner-pass-1"))
    c = TestClient(app, base_url=LOCAL)
    login_page = c.get("/login")
    assert login_page.headers["x-frame-options"] == "DENY"
    c.post("/login", data={"email": "o@example.com", "password": "owner-pass-1",
                           "csrf_token": _form_token(login_page.text)})
    calls = []
    real = store.get_web_session
    monkeypatch.setattr(store, "get_web_session", lambda *a, **k: calls.append(1) or real(*a, **k))
    for path, lookups in (("/static/style.css", 0), ("/settings/keys", 1), ("/api/repos", 1)):
        calls.clear()
        assert c.get(path).status_code == 200, path
        assert len(calls) == lookups, path  # the API reuses the middleware's lookup
    calls.clear()
    assert TestClient(app, base_url=LOCAL).get("/api/repos").status_code == 401 and calls == []  # no cookie: no lookup
