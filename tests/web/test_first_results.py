"""First results first (codesearch/web/first_results.py): on one replica, the rest of a results
page waits while another page is still before its first result, and that wait is bounded."""

from __future__ import annotations

import asyncio
import re

import pytest

from codesearch.web import first_results, results_page
from codesearch.web.first_results import PAGE_BUDGET_S, STALE_S, TURN_S, FirstResultsFirst
from codesearch.web.results_page import Links, page_stream

from tests.web.test_results_page import PAGE, chunk


def run(coro):
    return asyncio.run(coro)


def test_with_no_page_waiting_a_turn_is_at_once():
    async def go():
        g = FirstResultsFirst()
        return await g.turn(1.0), g.waiting()

    assert run(go()) == (0.0, 0)


def test_a_turn_lasts_until_the_waiting_page_is_done():
    async def go():
        g = FirstResultsFirst()
        w = g.enter()
        asyncio.get_running_loop().call_later(0.02, w.done)
        waited = await g.turn(5.0)
        return waited, g.waiting()

    waited, left = run(go())
    assert 0.01 < waited < 1.0 and left == 0


@pytest.mark.parametrize("pages", [1, 3])
def test_a_turn_is_bounded_when_a_page_never_gets_its_first_result(pages):
    async def go():
        g = FirstResultsFirst()
        for _ in range(pages):
            g.enter()
        turns = g.pages()
        waits = [await g.turn(TURN_S)]
        while turns.waited < PAGE_BUDGET_S:  # a page's slices: bounded over all of them
            await turns.turn()
        await turns.turn()  # its budget spent: no more waiting
        return waits[0], turns.waited

    one, total = run(go())
    assert TURN_S * 0.9 <= one < TURN_S + 0.5
    assert PAGE_BUDGET_S * 0.9 <= total < PAGE_BUDGET_S + TURN_S + 0.5


def test_done_is_idempotent_and_a_stale_page_stops_counting():
    now = [100.0]
    g = FirstResultsFirst(clock=lambda: now[0])
    a, b = g.enter(), g.enter()
    a.done()
    a.done()
    assert g.waiting() == 1
    now[0] += STALE_S + 1  # b's stream never started (the browser left before the body)
    assert g.waiting() == 0
    b.done()
    assert g.waiting() == 0


def test_each_event_loop_has_its_own_gate():
    async def one():
        g = first_results.gate()
        return g, g is first_results.gate()

    (g1, same1), (g2, same2) = run(one()), run(one())
    assert same1 and same2 and g1 is not g2


def test_a_page_that_ends_before_any_result_is_done_waiting(tmp_path, monkeypatch):
    """The results page of a service without searchers is its error page: the request's `Waiting`
    ends with it (otherwise every other page's rest would wait for it until it went stale)."""
    from tests.web.test_web_modules import _results_page

    g = FirstResultsFirst()
    entered = []
    real_enter = g.enter
    monkeypatch.setattr(g, "enter", lambda: entered.append(1) or real_enter())
    monkeypatch.setattr(first_results, "gate", lambda: g)
    html = _results_page(tmp_path, path="/search?q=handle_request")
    assert "no searchers" in html and entered == [1] and g.waiting() == 0


def test_the_rest_of_a_page_waits_while_another_page_is_before_its_first_result():
    """Page A has shown its first file and is drawing the rest, one file per slice; page B starts
    (a new search: its `Waiting` entered at the request, as `pages_search.search` does) and its
    first answer takes 30 ms. None of A's rest is drawn from B's start to B's first file; then
    A goes on, and both pages are whole."""
    order = []
    real = results_page.render_file

    def recording(f, *args, **kwargs):
        order.append(f["fileName"]["text"])
        return real(f, *args, **kwargs)

    async def go():
        b_started = asyncio.Event()
        waiting = {}

        async def events(prefix, delay):
            if delay:
                await asyncio.sleep(delay)
            yield chunk(*(f"{prefix}{i:02d}.py" for i in range(8)))
            yield {"type": "final", "accumulatedStats": {}, "isSearchExhaustive": True}

        async def page_a():
            parts = []
            async for part in page_stream(PAGE, events("a", 0), Links("", "", "q")):
                parts.append(part)
                if len(parts) == 2:  # A's first file is out: B's request arrives now
                    waiting["b"] = first_results.gate().enter()
                    order.append("B starts")
                    b_started.set()
            return "".join(parts)

        async def page_b():
            await b_started.wait()
            parts = []
            async for part in page_stream(PAGE, events("b", 0.03), Links("", "", "q"), waiting=waiting["b"]):
                parts.append(part)
            return "".join(parts)

        pages = await asyncio.gather(page_a(), page_b())
        return pages, first_results.gate().waiting()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(results_page, "render_file", recording)
        mp.setattr(results_page, "RENDER_SLICE_S", 0.0)
        (a, b), left = run(go())
    start = order.index("B starts")
    assert order[: start + 1] == ["a00.py", "B starts"]
    assert order[start + 1] == "b00.py", order  # B's first file before any more of A
    for page, prefix in ((a, "a"), (b, "b")):
        assert sorted(set(re.findall(rf"{prefix}\d\d\.py", page))) == [f"{prefix}{i:02d}.py" for i in range(8)]
    assert left == 0
