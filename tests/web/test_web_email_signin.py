"""E-mail and the security settings, end to end: sign-in codes, self sign-up, invite, join-request
and approval mails (codesearch.mail, codesearch.web.pages_email_code), and the owners' security
page (codesearch.web.pages_security) honoured by a second app over the same data directory.

Two apps (`build_app`, as two API replicas) are served by uvicorn on 127.0.0.1, each with its own
`Store` on one data directory, and send mail to a real SMTP server on 127.0.0.1 (aiosmtpd,
`tests.smtpserver`), whose received mails the tests read. The flows a person goes through run in
headless Chromium, with axe-core auditing every new or changed page.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from codesearch.accounts import hash_password
from codesearch.serving.api import build_app
from codesearch.store import Store
from codesearch.web.security_settings import SETTING_KEY, Security, SecuritySettings, forced_from_env
from tests.a11y import audit, describe
from tests.asgiserver import bound_socket, serving
from tests.smtpserver import smtp_server
from tests.webworld import browser  # noqa: F401  (pytest fixture)

ENV = {"SOURCEBOT_ENCRYPTION_KEY": "email-signin-test-secret-0123456789"}
OWNER = {"email": "owner@example.com", "password": "owner-pass-1"}
MEMBER = {"email": "member@example.com", "password": "member-pass-1"}


class _Searcher:
    def search(self, *a, **k):
        raise AssertionError("no search in these tests")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Two apps ("a", "b") over one data directory, mail to `inbox`; the owner and a member."""
    data = str(tmp_path_factory.mktemp("mail"))
    with smtp_server() as inbox:
        store = Store.open(data, environ=ENV)
        owner = store.create_first_user(OWNER["email"], "Owner", password_hash=hash_password(OWNER["password"]))
        store.create_user(MEMBER["email"], "Member", password_hash=hash_password(MEMBER["password"]))
        env = dict(ENV, SMTP_CONNECTION_URL=inbox.url(), EMAIL_FROM_ADDRESS="codesearch@example.com")
        stores, servers, urls = [], [], {}
        for name in ("a", "b"):
            s = Store.open(data, environ=ENV)
            sock = bound_socket()
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"
            app = build_app(lambda: _Searcher(), get_store=lambda s=s: s, anonymous_access=False, public_url=url,
                            environ=env)
            ctx = serving(app, sock=sock)
            urls[name] = ctx.__enter__()
            stores.append(s)
            servers.append(ctx)
        yield {"store": store, "inbox": inbox, "a": urls["a"], "b": urls["b"], "owner_id": owner.id, "data": data,
               "env": env}
        for ctx in servers:
            ctx.__exit__(None, None, None)
        for s in stores + [store]:
            s.close()


def _token(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


class Visitor:
    """An HTTP client with cookies, posting forms with the page's CSRF token."""

    def __init__(self, base: str):
        self.http = httpx.Client(base_url=base, timeout=30, follow_redirects=False)
        self.csrf = _token(self.http.get("/login").text)

    def post(self, path: str, **form) -> httpx.Response:
        return self.http.post(path, data={"csrf_token": self.csrf, **form})


def _owner(world, app: str = "a") -> Visitor:
    """The owner, signed in on `app` once per module (sessions outlive the settings' changes)."""
    if f"owner-{app}" in world:
        return world[f"owner-{app}"]
    v = Visitor(world[app])
    r = v.http.post("/login", data={"csrf_token": v.csrf, **OWNER})
    assert r.status_code == 303, r.text
    v.csrf = _token(v.http.get("/settings/security").text)
    world[f"owner-{app}"] = v
    return v


def _set(world, **switches) -> httpx.Response:
    """Save the security settings through app "a" as the owner (switches not named are off)."""
    form = {k: "on" for k, v in switches.items() if v is True}
    form.update({k: v for k, v in switches.items() if isinstance(v, str)})
    return _owner(world).post("/settings/security", **form)


def _axe(page, what: str) -> None:
    violations = audit(page)
    assert not violations, f"{what}:\n" + describe(violations)


# ----------------------------------------------------------------------------- the settings

@pytest.mark.parametrize("env, forced", [
    ({}, {}),
    ({"AUTH_CREDENTIALS_LOGIN_ENABLED": "false"}, {"password_login": False}),
    ({"AUTH_EMAIL_CODE_LOGIN_ENABLED": "TRUE", "REQUIRE_APPROVAL_NEW_MEMBERS": "false"},
     {"email_code_login": True, "require_approval": False}),
])
def test_the_environment_forces_switches(env, forced):
    assert forced_from_env(env) == forced


def test_a_forced_switch_wins_over_the_stored_choice(tmp_path):
    with Store.open(str(tmp_path), environ=ENV) as store:
        settings = SecuritySettings(lambda: store, {"password_login": True})
        settings.save(Security(password_login=False, email_code_login=True))
        assert settings.current().password_login is True and settings.current().email_code_login is True
        assert settings.stored().password_login is False  # the owners' choice is kept underneath
        store.put_service_setting(SETTING_KEY, {"self_signup": "yes", "disabled_providers": [1, "okta"]})
        assert SecuritySettings(lambda: store, {}).current() == Security(disabled_providers=frozenset({"okta"}))


@pytest.mark.parametrize("form, status, says", [
    ({"password_login": "maybe"}, 400, "must be “on” or “off”"),
    ({"password_login": "on", "provider": "nope"}, 400, "no single sign-on provider &#39;nope&#39;"),
    ({"password_login": "on", "signin_message": "x" * 1001}, 400, "at most 1000 fit"),
    ({}, 409, "no way to sign in"),  # everything off: the owner would be locked out
])
def test_bad_settings_are_refused_and_nothing_is_stored(world, form, status, says):
    before = world["store"].service_setting(SETTING_KEY)
    r = _owner(world).post("/settings/security", **form)
    assert r.status_code == status and says in r.text
    assert world["store"].service_setting(SETTING_KEY) == before


def test_members_and_visitors_cannot_change_the_settings(world):
    member = Visitor(world["a"])
    assert member.http.post("/login", data={"csrf_token": member.csrf, **MEMBER}).status_code == 303
    assert member.http.get("/settings/security").status_code == 403
    assert member.http.post("/settings/security", data={"password_login": "off"}).status_code == 403
    visitor = Visitor(world["a"])
    r = visitor.post("/settings/security", password_login="off")
    assert r.status_code == 303 and "/login" in r.headers["location"]


def test_a_change_on_one_app_reaches_the_other_within_seconds(world):
    assert _set(world, password_login=True).status_code == 303
    b = httpx.Client(base_url=world["b"], timeout=30)
    b.get("/login")  # b has read the settings now: the change below is news to it
    started = time.monotonic()
    assert _set(world, password_login=True, email_code_login=True, signin_message="Use your work address.").status_code == 303
    while "Email me a code" not in (page := b.get("/login").text):
        assert time.monotonic() - started < 8, "app b did not apply the change"
        time.sleep(0.1)
    assert "Use your work address." in page
    elapsed = time.monotonic() - started
    assert elapsed < 5, elapsed
    print(f"\nthe second app applied the change after {elapsed:.2f} s")


def test_a_switch_the_environment_forces_is_locked(world):
    assert _set(world, password_login=True, email_code_login=True).status_code == 303  # the owners say on
    with Store.open(world["data"], environ=ENV) as store:
        app = build_app(lambda: _Searcher(), get_store=lambda: store, anonymous_access=False,
                        environ=dict(world["env"], AUTH_EMAIL_CODE_LOGIN_ENABLED="false"))
        with serving(app) as url:
            owner = _owner({"c": url}, "c")
            page = owner.http.get("/settings/security").text
            assert "locked by <code>AUTH_EMAIL_CODE_LOGIN_ENABLED=false</code>" in page
            r = owner.post("/settings/security", password_login="on", email_code_login="on")
            assert r.status_code == 409 and "locked by AUTH_EMAIL_CODE_LOGIN_ENABLED=false" in r.text
            assert _ask_code(Visitor(url), MEMBER["email"]).status_code == 404  # the environment wins
            assert owner.post("/settings/security", password_login="on").status_code == 303  # the rest saves
    assert world["store"].service_setting(SETTING_KEY)["email_code_login"] is True  # the owners' choice, kept


def test_password_sign_in_turned_off_is_refused(world):
    assert _set(world, email_code_login=True).status_code == 303  # codes only: the owner can still sign in
    v = Visitor(world["a"])
    assert 'name="password"' not in v.http.get("/login").text
    r = v.http.post("/login", data={"csrf_token": v.csrf, **MEMBER})
    assert r.status_code == 403 and "turned off" in r.text
    assert _set(world, password_login=True).status_code == 303


# ----------------------------------------------------------------------------- e-mail codes

def _ask_code(v: Visitor, email: str) -> httpx.Response:
    return v.post("/login/code", email=email)


def test_codes_are_off_unless_switched_on(world):
    assert _set(world, password_login=True).status_code == 303
    v = Visitor(world["a"])
    assert _ask_code(v, MEMBER["email"]).status_code == 404
    assert v.post("/login/code/verify", email=MEMBER["email"], code="123456").status_code == 404


def test_asking_for_a_code_does_not_say_whether_the_address_has_an_account(world):
    assert _set(world, password_login=True, email_code_login=True).status_code == 303
    inbox = world["inbox"]
    answers = {}
    for email in (MEMBER["email"], "nobody-here@example.com"):
        r = _ask_code(Visitor(world["a"]), email)
        assert r.status_code == 200
        answers[email] = re.sub(r'(value|content)="[^"]*"', "", r.text).replace(email, "EMAIL")  # less the tokens
    assert answers[MEMBER["email"]] == answers["nobody-here@example.com"]
    inbox.wait_for(MEMBER["email"])
    time.sleep(0.3)  # (the mail to a stranger would have left as fast)
    assert inbox.to("nobody-here@example.com") == []


def test_a_wrong_code_fails_and_sending_is_limited(world):
    assert _set(world, password_login=True, email_code_login=True).status_code == 303
    v = Visitor(world["a"])
    email = "member@example.com"
    r = v.post("/login/code/verify", email=email, code="000000")
    assert r.status_code == 401 and "wrong or has expired" in r.text
    # 3 free; the 4th goes out and starts a 30 s wait (`throttle.CODE_SEND_ACCOUNT`)
    statuses = [_ask_code(v, "limited@example.com").status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]
    r = _ask_code(v, "limited@example.com")
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0 and "Too many codes" in r.text


def test_sign_in_with_a_code_in_the_browser(world, browser):
    assert _set(world, email_code_login=True, password_login=True, signin_message="Welcome, team.").status_code == 303
    inbox = world["inbox"]
    before = len(inbox.to(MEMBER["email"]))
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = ctx.new_page()
        page.set_default_timeout(15_000)
        page.goto(world["a"] + "/login")
        assert page.locator("#signin-message").inner_text() == "Welcome, team."
        _axe(page, "the sign-in page with codes")
        page.fill("#code-email", MEMBER["email"])
        page.click("form.code-request button[type=submit]")
        page.wait_for_selector("#code")
        _axe(page, "the code page")
        code = inbox.code_for(MEMBER["email"], before + 1)
        page.fill("#code", "999999" if code != "999999" else "111111")
        page.click("button[type=submit]")
        page.wait_for_selector(".form-error")
        _axe(page, "the code page with an error")
        page.fill("#code", code)
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/login" not in url)
        assert page.url == world["a"] + "/"
        page.goto(world["a"] + "/settings/keys")
        assert MEMBER["email"] in page.locator(".who").inner_text()
    finally:
        ctx.close()
    # the code worked once
    v = Visitor(world["a"])
    assert v.post("/login/code/verify", email=MEMBER["email"], code=code).status_code == 401


def test_the_security_page_in_the_browser(world, browser):
    assert _set(world, password_login=True).status_code == 303
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = ctx.new_page()
        page.set_default_timeout(15_000)
        page.goto(world["a"] + "/login")
        page.fill("input[name=email]", OWNER["email"])
        page.fill("input[name=password]", OWNER["password"])
        page.click("form[action$='/login'] button[type=submit]")
        page.wait_for_url(lambda url: "/login" not in url)
        page.goto(world["a"] + "/settings/security")
        _axe(page, "the security page")
        page.check("#email_code_login")
        page.check("#self_signup")
        page.fill("#signin_message", "Sign in with your example.com address.")
        page.click("form.security-form button[type=submit]")
        page.wait_for_selector("p.notice[role=status]")
        assert page.is_checked("#email_code_login") and page.is_checked("#self_signup")
        _axe(page, "the security page, saved")
        page.click("form[action$='/test-mail'] button[type=submit]")
        page.wait_for_selector("#mail-status")
        assert "A test mail went to owner@example.com." in page.content()
        world["inbox"].wait_for(OWNER["email"])
        page.uncheck("#password_login")
        page.uncheck("#email_code_login")
        page.click("form.security-form button[type=submit]")
        page.wait_for_selector(".form-error")
        assert "no way to sign in" in page.locator(".form-error").inner_text()
        _axe(page, "the security page with an error")
    finally:
        ctx.close()
    assert world["store"].service_setting(SETTING_KEY)["password_login"] is True  # the refused change was not stored


# ----------------------------------------------------------------------------- joining

def test_self_sign_up_by_code_waits_for_approval_and_mails_go_out(world):
    assert _set(world, password_login=True, email_code_login=True, self_signup=True,
                require_approval=True).status_code == 303
    inbox, newcomer = world["inbox"], "newcomer@example.com"
    owner_mails = len(inbox.to(OWNER["email"]))
    v = Visitor(world["a"])
    assert _ask_code(v, newcomer).status_code == 200
    r = v.post("/login/code/verify", email=newcomer, code=inbox.code_for(newcomer))
    assert r.status_code == 403 and "approve" in r.text
    user = world["store"].find_user_by_email(newcomer)
    assert user.email_verified and world["store"].is_pending(user.id)
    [request] = inbox.wait_for(OWNER["email"], owner_mails + 1)[owner_mails:]
    assert request["Subject"] == f"{newcomer} asks to join codesearch"
    assert f"{world['a']}/settings/members" in request.get_content()
    owner = _owner(world)
    assert owner.post(f"/settings/members/{user.id}/approve").status_code == 200
    [approved] = inbox.wait_for(newcomer, 2)[1:]
    assert approved["Subject"] == "You can sign in to codesearch now" and f"{world['a']}/login" in approved.get_content()


def test_self_sign_up_with_a_password(world, browser):
    assert _set(world, password_login=True).status_code == 303
    v = Visitor(world["a"])
    assert v.http.get("/signup").status_code == 404 and "/signup" not in v.http.get("/login").text
    assert _set(world, password_login=True, self_signup=True).status_code == 303
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = ctx.new_page()
        page.set_default_timeout(15_000)
        page.goto(world["a"] + "/login")
        page.click("a[href$='/signup']")
        _axe(page, "the sign-up page")
        page.fill("#email", "signed-up@example.com")
        page.fill("#password", "new-pass-123")
        page.fill("#confirm", "new-pass-124")
        page.click("button[type=submit]")
        page.wait_for_selector(".form-error")
        _axe(page, "the sign-up page with an error")
        page.fill("#password", "new-pass-123")
        page.fill("#confirm", "new-pass-123")
        page.click("button[type=submit]")
        page.wait_for_url(world["a"] + "/")
    finally:
        ctx.close()
    user = world["store"].find_user_by_email("signed-up@example.com")
    assert user.role == "MEMBER" and not world["store"].is_pending(user.id) and not user.email_verified


def test_an_invite_for_an_address_is_mailed(world):
    owner = _owner(world)
    r = owner.post("/settings/members/invites", email="invitee@example.com", role="MEMBER")
    assert r.status_code == 201 and "was sent to invitee@example.com" in r.text
    [mail] = world["inbox"].wait_for("invitee@example.com")
    assert mail["Subject"] == "Owner invited you to codesearch"
    link = re.search(r"(http://\S+/invite/inv_\S+)", mail.get_content()).group(1)
    assert link.startswith(world["a"]) and link in r.text
    assert httpx.get(link, timeout=30).status_code == 200
