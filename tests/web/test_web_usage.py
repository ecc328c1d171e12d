"""The usage report through the real service (Serve on 127.0.0.1) and its page in Chromium.

Over HTTP: calls made with an API key and with the web UI's session are recorded with how the
caller signed in (detail ``via``), and ``GET /api/usage`` counts today's audit rows exactly as a
count by hand over ``GET /api/audit``'s rows does; only owners may read it (a member's key 403,
no key 401), a bad range is a 400 that names the parameter, the CSV holds the JSON's numbers.

In Chromium: the page draws two charts (active users; the calls, with a legend), the totals and
a table of every day equal to the API's, the ranges and the CSV link; a bad range answers the
form again; members get a 403 page; keyboard-reachable, fits 360 px and passes axe in light and
dark. The counting itself is checked against brute force in tests/store/test_usage_report.py.
"""

from __future__ import annotations

import csv
import io
import time
from datetime import UTC, datetime

import httpx
import pytest

from codesearch.audit import usage
from tests.a11y import audit, describe
from tests.webworld import browser, login, page_for, web  # noqa: F401  (pytest fixtures)

SCREENS = [(360, "light"), (360, "dark"), (1400, "light"), (1400, "dark")]
COUNTED = ("searches", "askQuestions", "mcpCalls", "apiKeyCalls")


@pytest.fixture(scope="module")
def keys(web):
    store = web["store"]
    return {
        "owner": store.create_api_key(web["owner"]["id"], "usage owner")[1],
        "member": store.create_api_key(web["member"]["id"], "usage member")[1],
    }


def _get(web, path: str, key: str | None, **params) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(f"{web['url']}{path}", params=params, headers=headers, timeout=30)


def _wait_for(store, since: datetime, n: int, deadline_s: float = 20.0) -> list:
    """The events since `since` once at least `n` are written (the service flushes every 0.5 s)."""
    deadline = time.monotonic() + deadline_s
    while True:
        events = store.list_audit_events(since=since, per_page=500)[0]
        if len(events) >= n or time.monotonic() > deadline:
            return events
        time.sleep(0.2)


def _by_hand(events, day: str) -> dict:
    """Today's column values, counted over the audit rows one by one."""
    todays = [e for e in events if e.at.astimezone(UTC).date().isoformat() == day]
    via = [(e.action, e.details.get("via", "")) for e in todays]
    return {
        "date": day,
        "activeUsers": len({e.actor_user_id for e in todays if e.actor_user_id is not None}),
        "searches": sum(a == "search" for a, _ in via),
        "askQuestions": sum(a == "chat.ask" for a, _ in via),
        "mcpCalls": sum(a == "mcp.tool" for a, _ in via),
        "apiKeyCalls": sum(v == "apikey" and a != "mcp.tool" for a, v in via),
    }


def test_calls_are_recorded_with_how_the_caller_signed_in_and_counted_exactly(page_for, web, keys):
    store = web["store"]
    start = datetime.now(UTC)
    for q in ("usage_needle_one", "usage_needle_two"):
        r = httpx.post(f"{web['url']}/api/search", json={"query": q, "matches": 3},
                       headers={"Authorization": f"Bearer {keys['member']}"}, timeout=30)
        assert r.status_code == 200, r.text
    page = page_for(web["owner"], sign_in=True)  # a sign-in, then a search on the page: the session
    page.goto(web["url"] + "/search?q=usage_needle_page")
    events = _wait_for(store, start, 4)
    searched = {e.target: (e.actor, e.details.get("via")) for e in events if e.action == "search"}
    assert searched == {
        "usage_needle_one": ("member@example.com", "apikey"),
        "usage_needle_two": ("member@example.com", "apikey"),
        "usage_needle_page": ("owner@example.com", "session"),
    }

    r = _get(web, "/api/usage", keys["owner"], days="1")
    assert r.status_code == 200, r.text
    body = r.json()
    today = datetime.now(UTC).date().isoformat()
    assert (body["from"], body["to"], body["timeZone"], len(body["days"])) == (today, today, "UTC", 1)
    # every row of the log up to this read (not the read's own event, written after it counted)
    rows = [e for e in store.list_audit_events(per_page=500)[0] if e.request_id != r.headers["X-Request-Id"]]
    assert body["days"] == [_by_hand(rows, today)]
    assert body["days"][0]["searches"] >= 3 and body["days"][0]["apiKeyCalls"] >= 2
    assert body["totals"]["activeUsers"] == body["days"][0]["activeUsers"] >= 2
    read = _wait_for(store, start, len(events) + 1)
    assert any(e.action == "usage.read" and e.target == f"{today}..{today}" for e in read)


ASKS = [
    # (who, params) -> (status, errorCode, message)
    ("member", {}, 403, "INSUFFICIENT_PERMISSIONS", "only owners may read the usage report"),
    (None, {}, 401, "NOT_AUTHENTICATED", None),
    ("owner", {"days": "400"}, 400, "INVALID_ARGUMENT", "days: must be 1 to 366, got 400"),
    ("owner", {"from": "2026-02-30"}, 400, "INVALID_ARGUMENT", "from: not a date (YYYY-MM-DD): '2026-02-30'"),
    ("owner", {"from": "2026-03-02", "to": "2026-03-01"}, 400, "INVALID_ARGUMENT",
     "from: 2026-03-02 is after to: 2026-03-01"),
]


@pytest.mark.parametrize("path", ["/api/usage", "/api/usage.csv"])
@pytest.mark.parametrize("who,params,status,code,message", ASKS)
def test_only_owners_read_it_and_a_bad_range_says_what_is_wrong(web, keys, path, who, params, status, code, message):
    r = _get(web, path, keys[who] if who else None, **params)
    assert r.status_code == status, r.text
    assert r.json()["errorCode"] == code
    if message:
        assert r.json()["message"] == message


def _written(store, r: httpx.Response) -> None:
    """Wait until the usage read answered by `r` is in the log (the service flushes every 0.5 s)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if any(e.request_id == r.headers["X-Request-Id"] for e in store.list_audit_events(action="usage.read")[0]):
            return
        time.sleep(0.2)
    raise AssertionError("the usage read was not recorded")


def test_the_csv_holds_the_json_numbers(web, keys):
    _written(web["store"], _get(web, "/api/usage", keys["owner"], days="1"))  # the owner is active today
    r = _get(web, "/api/usage.csv", keys["owner"], days="7")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"].startswith('attachment; filename="usage-')
    rows = list(csv.reader(io.StringIO(r.text)))
    _written(web["store"], r)
    body = _get(web, "/api/usage", keys["owner"], days="7").json()
    assert rows[0] == list(usage.CSV_COLUMNS)
    got = [[row[0], *map(int, row[1:])] for row in rows[1:]]
    # the JSON read came second: the CSV read's own event is one more API-key call today
    expected = [[d["date"], d["activeUsers"], *(d[k] for k in COUNTED)] for d in body["days"]]
    expected[-1][-1] -= 1
    assert got == expected and len(got) == 7


def test_the_page_shows_what_the_api_says(page_for, web, keys):
    page = page_for(web["owner"])
    page.goto(web["url"] + "/settings/usage?days=7")
    assert page.locator(".settings-tabs a[aria-current=page]").text_content() == "Usage"
    assert page.locator("svg.insight-chart").count() == 2
    assert page.locator("#users-chart-title").text_content().startswith("Active users per day")
    assert page.locator("#calls-chart-title").text_content().startswith("Calls per day")
    assert page.locator("svg.insight-chart .axis-title").all_text_contents() == ["Date", "Users", "Date", "Calls"]
    assert page.locator(".legend li").all_text_contents() == ["Searches", "Ask questions", "MCP calls", "API-key calls"]
    assert page.locator(".usage-ranges a[aria-current=page]").text_content() == "Last 7 days"
    body = _get(web, "/api/usage", keys["owner"], days="7").json()
    rows = page.locator("#usage-days tbody tr")
    assert rows.count() == 7
    for i, d in enumerate(body["days"][:-1]):  # today moves on as the API reads are recorded
        cells = rows.nth(i).locator("td").all_text_contents()
        assert cells[0] == d["date"]
        assert [int(c.replace(",", "")) for c in cells[1:]] == [d["activeUsers"], *(d[k] for k in COUNTED)]
    searches = int(page.locator("[data-total=searches]").text_content().replace(",", ""))
    assert searches == body["totals"]["searches"]
    href = page.get_attribute("a[download]", "href")
    assert href.endswith(f"/api/usage.csv?from={body['from']}&to={body['to']}")
    got = page.request.get(web["serve_url"] + href)  # the session cookie opens it
    assert got.status == 200 and got.text().count("\n") == 8


def test_a_bad_range_answers_the_form_again(page_for, web):
    page = page_for(web["owner"])
    page.goto(web["url"] + "/settings/usage")
    page.fill("#usage-from", "2020-01-01")
    page.fill("#usage-to", "2026-01-01")
    with page.expect_response(lambda r: "/settings/usage?" in r.url) as answer:
        page.click(".usage-form button[type=submit]")
    assert answer.value.status == 400
    assert page.text_content(".form-error") == "from/to: at most 366 days, got 2193"
    assert page.input_value("#usage-from") == "2020-01-01"


def test_members_and_visitors_are_kept_out(page_for, web):
    resp = page_for(web["member"]).goto(web["url"] + "/settings/usage")
    assert resp.status == 403
    page = page_for(web["member"])
    page.goto(web["url"] + "/settings/keys")
    assert page.locator(".settings-tabs a[href$='/settings/usage']").count() == 0  # no link for members
    visitor = page_for()
    visitor.goto(web["url"] + "/settings/usage")
    assert "/login" in visitor.url


def test_the_page_is_reachable_with_the_keyboard(page_for, web):
    page = page_for(web["owner"])
    page.goto(web["url"] + "/settings/usage")
    reached = []
    for _ in range(40):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("""() => { const e = document.activeElement;
            return e.matches('.chart-box') ? 'chart' : e.matches('a[download]') ? 'csv'
                 : e.matches('.usage-ranges a') ? 'range' : e.matches('#usage-from') ? 'from'
                 : e.tagName.toLowerCase(); }"""))
    assert {"chart", "csv", "range", "from"} <= set(reached), reached
    assert reached.index("range") < reached.index("csv") < reached.index("chart")


@pytest.mark.parametrize("width,scheme", SCREENS)
def test_the_page_fits_the_screen_and_passes_the_audit(browser, web, width, scheme):
    ctx = browser.new_context(viewport={"width": width, "height": 900}, color_scheme=scheme)
    try:
        page = ctx.new_page()
        page.set_default_timeout(20_000)
        login(page, web, web["owner"])
        for query in ("days=30", "from=2020-01-01&to=2026-01-01"):  # the report, and a refused range
            page.goto(f"{web['url']}/settings/usage?{query}")
            assert page.evaluate("() => document.scrollingElement.scrollWidth") <= width, query
            problems = audit(page)
            assert not problems, f"{query} {width}px {scheme}:\n" + describe(problems)
    finally:
        ctx.close()
