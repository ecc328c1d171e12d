"""OAuth pages in a real headless Chromium (Debian's Chromium, `tests.chromium`, Playwright).

- The consent flow: a visitor opens the authorization URL, signs in, comes back to the consent
  page, presses Allow, and the browser is sent to the client's loopback redirect URI with the
  code and the state. Screenshot: tests/output/screenshots/oauth-consent.png.
- Connected apps (``/settings/apps``): after a flow the app is listed (name, where it sends the
  browser back, scopes); Revoke takes its access back: its access token is refused at
  ``/api/mcp`` (401) and its refresh token at ``/oauth/token`` (``invalid_grant``), while another
  user's access to the same app keeps working. Screenshot: tests/output/screenshots/oauth-apps.png.
- A client that registered a hostile name (HTML, script) is shown as text on both pages: the
  markup is inert (no element made of it, no script run).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.chromium import launch_chromium
from tests.oauthworld import (
    MEMBER,
    OWNER,
    REDIRECT,
    Browser,
    Pkce,
    authorize_url,
    mcp_initialize,
    oauth_app,  # noqa: F401  (fixture)
    register,
    token,
    tokens_for,
)

#: Not in the fast lane (`make check`): see tests/conftest.py.
pytestmark = pytest.mark.browser

SCREENSHOTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "output", "screenshots")

#: Client names an attacker could register; each must show as exactly this text.
HOSTILE_NAMES = [
    '<img src=x onerror="window.__xss = (window.__xss || 0) + 1">',
    '<script>window.__xss = (window.__xss || 0) + 1</script>',
    '"><svg onload="window.__xss = 1">',
]


@contextmanager
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            page.dialogs = []  # the texts of confirm() dialogs, each accepted

            def accept(dialog):
                page.dialogs.append(dialog.message)
                dialog.accept()

            page.on("dialog", accept)
            yield page
        finally:
            browser.close()


def sign_in_through_consent(page, base: str, url: str) -> None:
    """Open the authorization URL as a visitor and sign in: the consent page is next."""
    page.goto(base + url)
    assert "/login" in page.url
    page.fill("input[name=email]", OWNER["email"])
    page.fill("input[name=password]", OWNER["password"])
    page.click("button[type=submit]")
    page.wait_for_selector("text=Allow access to codesearch?")


def allow(page) -> dict[str, list[str]]:
    """Press Allow: the query of the browser's request to the client's redirect URI (the answer
    to the consent form is a redirect there). Nothing listens on the client's loopback port, so
    that request fails and the browser shows its error page (at the failed URL in `chromium`, at
    ``chrome-error://`` in the headless shell), which is waited for, so that the test's next
    navigation is not cut off by it. What is checked is that the browser was sent there. (A
    `page.route` cannot answer in the client's place: Playwright routes only the first request of
    a redirect chain.)"""
    with page.expect_request(lambda request: request.url.startswith(REDIRECT + "?")) as sent:
        page.click("button[value=allow]")
    page.wait_for_url(lambda url: url.startswith((REDIRECT, "chrome-error:")))
    return parse_qs(urlsplit(sent.value.url).query)


def exchange(base: str, client_id: str, code: str, pkce: Pkce) -> dict:
    r = token(base, grant_type="authorization_code", code=code, redirect_uri=REDIRECT, client_id=client_id,
              code_verifier=pkce.verifier)
    assert r.status_code == 200, r.text
    return r.json()


def assert_inert(page, selector: str, name: str) -> None:
    """The element shows `name` as text: no element was made of it and no script of it ran."""
    shown = page.locator(selector)
    assert shown.inner_text() == name
    assert shown.locator("*").count() == 0
    assert page.evaluate("window.__xss") is None
    assert page.locator("img[src=x], svg[onload]").count() == 0


def test_a_visitor_signs_in_allows_and_is_sent_back_to_the_client(oauth_app):
    base = oauth_app["url"]
    cid = register(base, client_name="Browser test client").json()["client_id"]
    with chromium() as page:
        sign_in_through_consent(page, base, authorize_url(cid, Pkce.make(), state="from-the-browser"))
        assert page.locator(".oauth-client").inner_text() == "Browser test client"
        os.makedirs(SCREENSHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SCREENSHOTS, "oauth-consent.png"), full_page=True)
        q = allow(page)
        assert q["state"] == ["from-the-browser"] and q["code"][0].startswith("cso_ac_") and q["iss"] == [base]


def test_a_connected_app_is_listed_and_revoking_it_refuses_its_tokens(oauth_app):
    base, store = oauth_app["url"], oauth_app["store"]
    cid = register(base, client_name="Editor MCP", scope="mcp offline_access").json()["client_id"]
    member = Browser(base)
    member.sign_in(MEMBER)
    theirs = tokens_for(base, member, cid)  # the same app, allowed by another user
    member.close()
    pkce = Pkce.make()
    with chromium() as page:
        sign_in_through_consent(page, base, authorize_url(cid, pkce, scope="mcp offline_access"))
        mine = exchange(base, cid, allow(page)["code"][0], pkce)
        assert mcp_initialize(base, mine["access_token"]).status_code == 200

        page.goto(base + "/settings/apps")
        row = page.locator(f"tr[data-client-id='{cid}']")
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        assert cells[0] == "Editor MCP"
        assert cells[1] == "http://127.0.0.1:33333"  # where it sends the browser back
        assert cells[2] == "search and read code as you (MCP), stay connected (refresh tokens)"
        assert page.locator("nav.settings-tabs a[aria-current=page]").inner_text() == "Connected apps"
        os.makedirs(SCREENSHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SCREENSHOTS, "oauth-apps.png"), full_page=True)

        row.locator("button", has_text="Revoke").click()
        page.wait_for_selector("p.notice")
        assert page.dialogs == ["Revoke the access of “Editor MCP”? It will have to ask you again."]
        assert page.locator("p.notice").inner_text() == "“Editor MCP” no longer has access: its tokens were revoked."
        assert page.locator(f"tr[data-client-id='{cid}']").count() == 0
        assert page.locator("p.empty").inner_text() == "No application has access to your account."

    refused = [
        # (what the app tries after the revocation, what it gets)
        ("its access token at /api/mcp", mcp_initialize(base, mine["access_token"]).status_code, 401),
        ("its refresh token at /oauth/token", token(base, grant_type="refresh_token", client_id=cid,
                                                    refresh_token=mine["refresh_token"]).json().get("error"),
         "invalid_grant"),
        ("the other user's access token", mcp_initialize(base, theirs["access_token"]).status_code, 200),
        ("the other user's refresh token", token(base, grant_type="refresh_token", client_id=cid,
                                                 refresh_token=theirs["refresh_token"]).status_code, 200),
    ]
    for what, got, expected in refused:
        assert got == expected, what
    oauth_app["app"].state.services.audit.flush()
    events, _ = store.list_audit_events(action="oauth.grant.revoke")
    assert [(e.actor, e.details["name"], e.details["revoked"]) for e in events if e.target == cid] == [
        (OWNER["email"], "Editor MCP", 2)]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_client_name_is_inert_on_the_consent_page_and_the_apps_list(oauth_app, name):
    base = oauth_app["url"]
    cid = register(base, client_name=name).json()["client_id"]
    pkce = Pkce.make()
    with chromium() as page:
        sign_in_through_consent(page, base, authorize_url(cid, pkce))
        assert_inert(page, ".oauth-client", name)
        exchange(base, cid, allow(page)["code"][0], pkce)
        page.goto(base + "/settings/apps")
        assert_inert(page, f"tr[data-client-id='{cid}'] .oauth-client", name)
        page.locator(f"tr[data-client-id='{cid}'] button", has_text="Revoke").click()
        page.wait_for_selector("p.notice")
        assert page.dialogs == [f"Revoke the access of “{name}”? It will have to ask you again."]
        assert page.locator("p.notice").inner_text() == f"“{name}” no longer has access: its tokens were revoked."
        assert page.evaluate("window.__xss") is None
