"""An accessibility audit of every page (`tests.webpages.PAGES`) with axe-core, in a real
headless Chromium against the Serve app (the `tests.webworld` world): no "serious" or
"critical" violation, on a wide and a narrow screen, in light and dark mode (contrast differs),
and with the parts a person opens by hand (the query syntax, the narrow screen's filters, a
research step) open.

axe-core is installed by ``make axe`` (part of ``make test``) into ``.tools/``; see `tests.a11y`.
"""

from __future__ import annotations

import pytest

from tests.a11y import audit, describe
from tests.webpages import PAGES, open_page
from tests.webworld import browser, login, web  # noqa: F401  (pytest fixtures)

#: What a person opens on some pages before reading them: audited open.
OPENED = {
    "home": "details.syntax > summary",
    "search": "#filters-box:not([open]) > summary",
    "chat": ".steps summary",
}


@pytest.mark.parametrize("width,scheme", [(1400, "light"), (1400, "dark"), (390, "light"), (390, "dark")])
def test_every_page_passes_the_audit(browser, web, width, scheme):
    found = {}
    for who in dict.fromkeys(p.who for p in PAGES):
        ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
        try:
            page = ctx.new_page()
            page.set_default_timeout(20_000)
            if who:
                login(page, web, web[who])
            for spec in (p for p in PAGES if p.who == who):
                open_page(page, web, spec)
                if spec.name in OPENED and page.locator(OPENED[spec.name]).count():
                    page.locator(OPENED[spec.name]).first.click()
                problems = audit(page)
                if problems:
                    found[spec.name] = describe(problems)
        finally:
            ctx.close()
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
    finally:
        ctx.close()
