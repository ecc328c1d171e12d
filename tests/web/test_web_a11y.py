"""An accessibility audit of every page (`tests.webpages.PAGES`, the OAuth consent and invite
pages included) with axe-core, in a real headless Chromium against the Serve app (the
`tests.webworld` world): no "serious" or "critical" violation, on a wide and a narrow screen, in
light and dark mode (contrast differs), and with the parts a person opens by hand (the query
syntax, the narrow screen's filters, a research step) open. The first-setup page (only while
there is no account) is audited in an app of its own; it and the invite page also with their
form answered with an error.

axe-core is installed by ``make axe`` (part of ``make test``) into ``.tools/``; see `tests.a11y`.
"""

from __future__ import annotations

import pytest

from tests.a11y import COLOUR_RULES, audit, describe
from tests.asgiserver import serving
from tests.webpages import PAGES, open_page, page_data
from tests.webworld import browser, login, web  # noqa: F401  (pytest fixtures)

#: The screens every audit looks at: wide and narrow, light and dark (contrast differs).
SCREENS = [(1400, "light"), (1400, "dark"), (390, "light"), (390, "dark")]

#: What a person opens on some pages before reading them: audited open.
OPENED = {
    "home": "details.syntax > summary",
    "search": "#filters-box:not([open]) > summary",
    "chat": ".steps summary",
}


@pytest.mark.parametrize("width", dict.fromkeys(width for width, _ in SCREENS))
def test_every_page_passes_the_audit(browser, web, width):
    """Each page is opened once per width and audited in both schemes, switched in place (the
    scheme is CSS alone, ``prefers-color-scheme``, without transitions: no page reads it at load;
    so in the second scheme only the rules about colours can answer otherwise, and only they
    run); no page links a stylesheet from its body."""
    schemes = [scheme for w, scheme in SCREENS if w == width]
    found = {}
    for who in dict.fromkeys(p.who for p in PAGES):
        ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=schemes[0])
        try:
            page = ctx.new_page()
            page.set_default_timeout(20_000)
            if who:
                login(page, web, web[who])
            for spec in (p for p in PAGES if p.who == who):
                open_page(page, web, spec)
                if spec.name in OPENED and page.locator(OPENED[spec.name]).count():
                    page.locator(OPENED[spec.name]).first.click()
                # Chromium stops reading a page at a stylesheet in its body until it loads: the
                # results page's first result once waited for the search form's
                if page.locator("body link[rel=stylesheet]").count():
                    found[f"{spec.name} (stylesheet in the body)"] = "a <link rel=stylesheet> in <body>"
                for k, scheme in enumerate(schemes):
                    page.emulate_media(color_scheme=scheme)
                    problems = audit(page, only=COLOUR_RULES if k else ())
                    if problems:
                        found[f"{spec.name} ({scheme})"] = describe(problems)
        finally:
            ctx.close()
    assert not found, "\n\n".join(f"{name}:\n{text}" for name, text in found.items())


def _submit_mismatched_passwords(page) -> None:
    """Fill a sign-up form (setup, invite) with passwords that differ and send it: the server
    answers the page again with its error (400)."""
    page.fill("input[name=email]", "someone@example.com")
    page.fill("input[name=password]", "first-pass-1")
    page.fill("input[name=confirm]", "other-pass-2")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.click("form.stack button[type=submit]")
    assert answer.value.status == 400
    page.wait_for_selector(".form-error")


def _audit_states(browser, url: str, path: str) -> dict:
    """The audit of `path` and of its form answered with an error, on every screen: {screen: problems}."""
    found = {}
    for width, scheme in SCREENS:
        ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        try:
            page = ctx.new_page()
            page.set_default_timeout(20_000)
            resp = page.goto(url + path)
            assert resp is not None and resp.status == 200, (path, resp and resp.status)
            for state in ("empty", "error"):
                if state == "error":
                    _submit_mismatched_passwords(page)
                problems = audit(page)
                if problems:
                    found[f"{path} {state} {width}px {scheme}"] = describe(problems)
        finally:
            ctx.close()
    return found


def test_the_first_setup_page_passes_the_audit(browser, tmp_path):
    """The owner's sign-up while the server has no account (its own app: the world has accounts)."""
    from codesearch.serving.api import build_app

    app = build_app(lambda: None, data_dir=str(tmp_path / "data"), anonymous_access=False, environ={})
    with serving(app) as url:
        found = _audit_states(browser, url, "/setup")
    assert not found, "\n\n".join(f"{name}:\n{text}" for name, text in found.items())


def test_the_invite_page_with_an_error_passes_the_audit(browser, web):
    """The invite page as PAGES audits it, and answered with an error (the invite stays unused)."""
    found = _audit_states(browser, web["url"], f"/invite/{page_data(web)['invite']}")
    assert not found, "\n\n".join(f"{name}:\n{text}" for name, text in found.items())


def test_the_audit_finds_what_it_looks_for(browser, web):
    """The audit is no formality: the same page with a control stripped of its name fails it."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = ctx.new_page()
        login(page, web, web["owner"])
        page.goto(web["url"] + "/")
        assert audit(page) == []
        page.evaluate("() => { const q = document.querySelector('input[name=q]');"
                      " q.removeAttribute('aria-label'); q.removeAttribute('placeholder'); }")
        page.evaluate("() => document.querySelector('header.top a.brand').textContent = ''")
        ids = {v["id"] for v in audit(page)}
        assert {"label", "link-name"} <= ids, ids
        # the second scheme's audit runs the colour rules alone, and they do find what they look for
        assert audit(page, only=COLOUR_RULES) == []
        page.evaluate("() => document.querySelector('main').insertAdjacentHTML('beforeend',"
                      " '<p style=\"color:#777;background:#888\">faint words</p>')")
        assert {v["id"] for v in audit(page, only=COLOUR_RULES)} == {"color-contrast"}
    finally:
        ctx.close()
