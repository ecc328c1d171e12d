"""CSV cells a spreadsheet would run as formulas are neutralised (`codesearch.spreadsheet`), in
every CSV the service writes for people: an insight's counts and the usage report (both through
`spreadsheet.csv_text`; the table below is the rule, the insight test checks the wiring)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest

from codesearch import spreadsheet
from codesearch.insights import saved
from codesearch.store.models import Insight, InsightCount

CELLS = [
    # (value, cell written)
    ("=1+1", "'=1+1"),
    ("=HYPERLINK(\"http://evil.example\",\"x\")", "'=HYPERLINK(\"http://evil.example\",\"x\")"),
    ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1)", "'@SUM(A1)"),
    ("\t=1", "'\t=1"),
    ("\r=1", "'\r=1"),
    ("sym:handle", "sym:handle"),
    ("a=1", "a=1"),  # only the first character matters
    (" =1", " =1"),  # a leading space is text to every spreadsheet
    ("", ""),
    ("'already", "'already"),
    (-3, -3),  # numbers stay numbers, negative ones too
    (2.5, 2.5),
    (0, 0),
    (True, True),
    (None, None),
]


@pytest.mark.parametrize("value,cell", CELLS, ids=[repr(v) for v, _ in CELLS])
def test_a_cell_that_starts_like_a_formula_gets_an_apostrophe(value, cell):
    assert spreadsheet.safe_cell(value) == cell


def test_a_document_neutralises_every_text_cell_and_reads_back():
    text = spreadsheet.csv_text(["name", "=head"], [["=1+1", -1], ["ok", "-x"], [None, "\n=2"]])
    assert list(csv.reader(io.StringIO(text))) == [["name", "'=head"], ["'=1+1", "-1"], ["ok", "'-x"], ["", "\n=2"]]
    assert text.endswith("\n") and "\r\n" not in text


def test_the_insight_csv_neutralises_queries_and_repositories():
    at = datetime(2024, 1, 1, tzinfo=UTC)
    queries = [{"query": "=cmd()"}, {"query": "-file:test handler"}, {"query": "plain"}]
    insight = Insight(id=1, user_id=1, name="n", queries=queries, repos=[], repo_filter=None, step="month",
                      since=at, created_at=at, updated_at=at, refreshed_at=None, error=None)
    counts = [InsightCount(at, 1, "@example.com/r", k, "a" * 40, 3 - k, 1) for k in range(3)]
    rows = list(csv.reader(io.StringIO(saved.csv_text(saved.InsightView(insight, [], counts)))))
    assert [r[1:3] for r in rows[1:]] == [["'=cmd()", "'@example.com/r"], ["'-file:test handler", "'@example.com/r"],
                                          ["plain", "'@example.com/r"]]
    assert [r[5] for r in rows[1:]] == ["3", "2", "1"]
