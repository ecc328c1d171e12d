"""The insight chart's SVG (`codesearch.web.insights_chart`), without a browser: its ticks, lines,
labels and escaping. The page around it is tested in Chromium (test_web_insights.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from xml.etree import ElementTree

import pytest

from codesearch.web.insights_chart import DASHES, SERIES_CLASSES, Series, line_chart, nice_ticks, style_of

NS = {"s": "http://www.w3.org/2000/svg"}
DATES = [datetime(2024, m, 1, tzinfo=UTC) for m in range(1, 7)]


@pytest.mark.parametrize("top, ticks", [
    (0, [0, 1]),
    (1, [0, 1]),
    (4, [0, 1, 2, 3, 4]),
    (5, [0, 1, 2, 3, 4, 5]),
    (7, [0, 2, 4, 6, 8]),
    (12, [0, 3, 6, 9, 12]),
    (99, [0, 20, 40, 60, 80, 100]),
    (1234, [0, 250, 500, 750, 1000, 1250]),
])
def test_ticks_are_round_and_reach_the_top(top, ticks):
    assert nice_ticks(top) == ticks


def _svg(series, dates=DATES, **kw):
    return ElementTree.fromstring(str(line_chart(dates, series, title="T", step="month", **kw)))


def test_one_line_per_query_and_a_dot_per_point():
    svg = _svg([Series("a", [1, 2, 3, 4, 5, 6]), Series("b", [0, 0, 1, 1, 2, 2])])
    lines = svg.findall(".//s:polyline", NS)
    assert len(lines) == 2 and len(svg.findall(".//s:circle", NS)) == 12
    assert [g.get("class") for g in svg.findall("s:g[@data-series]", NS)] == ["series series-0", "series series-1"]
    labels = [t.text for t in svg.findall(".//s:text", NS)]
    assert {"2024-01", "2024-06", "Date", "Matches"} <= set(labels)
    assert svg.get("role") == "img" and svg.find("s:title", NS).text == "T"
    # the highest value sits on the top tick, the lowest on the axis
    ys = [float(p.split(",")[1]) for p in lines[0].get("points").split()]
    assert ys == sorted(ys, reverse=True)


def test_a_single_point_is_a_dot_without_a_line():
    svg = _svg([Series("a", [3])], dates=DATES[:1])
    assert svg.findall(".//s:polyline", NS) == [] and len(svg.findall(".//s:circle", NS)) == 1


def test_many_dates_get_few_labels():
    dates = [datetime(2020, 1, 1, tzinfo=UTC).replace(year=2020 + i // 12, month=i % 12 + 1) for i in range(60)]
    svg = _svg([Series("a", list(range(60)))], dates=dates)
    assert len([t for t in svg.findall(".//s:text", NS) if re.fullmatch(r"\d{4}-\d{2}", t.text or "")]) <= 8


def test_user_text_is_escaped():
    text = str(line_chart(DATES, [Series('<script>alert(1)</script>"', [1] * 6)], title="<b>x</b>", step="month"))
    assert "<script>" not in text and "<b>" not in text
    ElementTree.fromstring(text)  # still well-formed


def test_lines_look_different_without_colour():
    assert len({style_of(i) for i in range(len(SERIES_CLASSES) * len(DASHES))}) == len(SERIES_CLASSES) * len(DASHES)
    assert len({style_of(i)[1] for i in range(len(DASHES))}) == len(DASHES)
