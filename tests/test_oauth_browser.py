"""The consent page in a real headless Chromium (Debian's `chromium`, Playwright): a visitor
opens the authorization URL, signs in, comes back to the consent page, presses Allow, and the
browser is sent to the client's loopback redirect URI with the code and the state. Screenshot:
tests/output/screenshots/oauth-consent.png."""

from __future__ import annotations

import os
import shutil
from urllib.parse import parse_qs, urlsplit

from tests.oauthworld import OWNER, REDIRECT, Pkce, authorize_url, oauth_app, register  # noqa: F401  (fixture)

SCREENSHOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output", "screenshots")


def test_a_visitor_signs_in_allows_and_is_sent_back_to_the_client(oauth_app):
    from playwright.sync_api import sync_playwright

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is missing: `make deps` installs it from Debian"
    base = oauth_app["url"]
    cid = register(base, client_name="Browser test client").json()["client_id"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page()
            page.set_default_timeout(15_000)
            page.goto(base + authorize_url(cid, Pkce.make(), state="from-the-browser"))
            assert "/login" in page.url
            page.fill("input[name=email]", OWNER["email"])
            page.fill("input[name=password]", OWNER["password"])
            page.click("button[type=submit]")
            page.wait_for_selector("text=Allow access to codesearch?")
            assert page.locator(".oauth-client").inner_text() == "Browser test client"
            os.makedirs(SCREENSHOTS, exist_ok=True)
            page.screenshot(path=os.path.join(SCREENSHOTS, "oauth-consent.png"), full_page=True)
            with page.expect_request(lambda r: r.url.startswith(REDIRECT + "?")) as sent:
                page.click("button[value=allow]")
            q = parse_qs(urlsplit(sent.value.url).query)
            assert q["state"] == ["from-the-browser"] and q["code"][0].startswith("cso_ac_") and q["iss"] == [base]
        finally:
            browser.close()
