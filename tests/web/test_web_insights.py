"""The insights pages in Chromium: the form makes an insight, its page draws the chart (one line
per query, labelled axes, a legend), the table and the CSV link under it; everything is reachable
with the keyboard, fits a 360 px screen and passes axe, in light and dark.

The counts themselves are checked against brute force in tests/insights/; here, the page must
show exactly what `GET /api/insights/<id>` says.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from codesearch.insights.refresh import refresh_all
from tests.a11y import audit, describe
from tests.webpages import make_insight
from tests.webworld import browser, login, page_for, web  # noqa: F401  (pytest fixtures)

NOW = datetime(2024, 6, 15, tzinfo=UTC)
SCREENS = [(360, "light"), (360, "dark"), (1400, "light"), (1400, "dark")]


@pytest.fixture(scope="module")
def insight_id(web):
    return make_insight(web)


def test_the_form_makes_an_insight_and_its_page_draws_it(page_for, web):
    page = page_for(web["member"])
    page.goto(web["url"] + "/insights")
    page.fill("#insight-name", "handlers over time")
    page.fill("#insight-queries", "handle_request\nsym:Server\nupper")
    page.select_option("#insight-step", "month")
    page.fill("#insight-since", "2024-01-01")
    page.click(".insight-form button[type=submit]")
    page.wait_for_url(re.compile(r"/insights/\d+$"))
    assert "No points yet" in page.text_content("main")
    insight = int(page.url.rsplit("/", 1)[1])
    refresh_all(web["store"], web["data"], now=NOW)
    page.reload()
    chart = page.locator("svg.insight-chart")
    assert chart.count() == 1
    assert page.locator("svg.insight-chart polyline.line").count() == 3  # one line per query
    assert page.locator("svg.insight-chart circle.dot").count() == 3 * 6
    assert page.locator(".legend li").all_text_contents() == ["handle_request", "sym:Server", "upper"]
    axis_titles = page.locator("svg.insight-chart .axis-title").all_text_contents()
    assert axis_titles == ["Date", "Matches"]
    assert "2024-01" in page.locator("svg.insight-chart").text_content()
    # the table says what the API says
    api = page.request.get(f"{web['url']}/api/insights/{insight}").json()
    rows = page.locator("#insight-counts tbody tr")
    assert rows.count() == len(api["points"]) == 6
    for i, point in enumerate(api["points"]):
        cells = rows.nth(i).locator("td").all_text_contents()
        assert [int(c.replace(",", "")) for c in cells[1:4]] == point["matchCounts"]
    assert api["points"][-1]["matchCounts"][0] > 0
    # the CSV link downloads the same counts
    href = page.get_attribute("a[download]", "href")
    csv = page.request.get(web["url"].split("/web")[0] + href)
    assert csv.status == 200 and csv.headers["content-type"].startswith("text/csv")
    assert csv.text().count("\n") == 1 + 6 * 3 * len(api["points"][-1]["repositories"])


def test_a_mistake_answers_the_form_again_with_what_was_typed(page_for, web):
    page = page_for(web["member"])
    page.goto(web["url"] + "/insights")
    page.fill("#insight-name", "broken")
    page.fill("#insight-queries", "fine\nfile:")
    page.fill("#insight-since", "2024-01-01")
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.click(".insight-form button[type=submit]")
    assert answer.value.status == 400
    assert "query 2: missing value after file:" in page.text_content(".form-error")
    assert page.input_value("#insight-queries") == "fine\nfile:"
    assert page.input_value("#insight-name") == "broken"


def test_another_members_insight_is_not_found(page_for, web, insight_id):
    page = page_for(web["member"])
    resp = page.goto(f"{web['url']}/insights/{insight_id}")  # the owner's
    assert resp.status == 404


def test_the_page_is_reachable_with_the_keyboard(page_for, web, insight_id):
    page = page_for(web["owner"])
    page.goto(f"{web['url']}/insights/{insight_id}")
    reached = []
    for _ in range(30):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("""() => { const e = document.activeElement;
            return e.matches('.chart-box') ? 'chart' : e.matches('a[download]') ? 'csv'
                 : e.matches('.insight-actions button.danger') ? 'delete' : e.tagName.toLowerCase(); }"""))
    assert {"chart", "csv", "delete"} <= set(reached), reached
    assert reached.index("csv") < reached.index("chart")  # in reading order
    page.goto(web["url"] + "/insights")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.matches('.insight-form button[type=submit]')"):
            break
    else:
        pytest.fail("the form's button is not reachable with Tab")
    assert page.locator("header nav a[href$='/insights']").count() == 1  # linked from the navigation


@pytest.mark.parametrize("width,scheme", SCREENS)
def test_the_pages_fit_the_screen_and_pass_the_audit(browser, web, insight_id, width, scheme):
    ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    try:
        page = ctx.new_page()
        page.set_default_timeout(20_000)
        login(page, web, web["owner"])
        for path in ("/insights", f"/insights/{insight_id}"):
            page.goto(web["url"] + path)
            assert page.evaluate("() => document.scrollingElement.scrollWidth") <= width, path
            problems = audit(page)
            assert not problems, f"{path} {width}px {scheme}:\n" + describe(problems)
        box = page.locator(".chart-box")
        scroll = box.evaluate("b => ({scroll: b.scrollWidth, client: b.clientWidth})")
        assert (scroll["scroll"] > scroll["client"]) is (width < 600)  # the chart scrolls inside its box
        assert page.locator("svg.insight-chart").bounding_box()["height"] > 150  # drawn, not squashed
    finally:
        ctx.close()
