"""A batch's input and output without Ray (`codesearch.data.queries`, `.rows`, `.output`): how a queries
file is read (which lines are queries, their ids, JSON Lines of search bodies), what a bad query is
told, that the rows of a query are what `Client.search` returns for it, and that the output's
format is its extension's, checked before any work."""

from __future__ import annotations

import csv
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from codesearch import Client
from codesearch.cli import main
from codesearch.data.output import RowWriter, format_of
from codesearch.data.queries import BadQuery, Defaults, queries_from_lines, specs_of
from codesearch.data.rows import MATCH_SCHEMA, rows_of, rows_of_files, table
from codesearch.errors import InvalidArgument

D = Defaults(matches=100)


def read(lines: list[str], jsonl=None, contexts_known=True):
    good, bad, total = queries_from_lines(lines, D, contexts_known=contexts_known, jsonl=jsonl)
    return [(s.query_id, s.line, s.query) for s in good], [(b.query_id, b.line) for b in bad], total


# ---------------------------------------------------------------- the queries file

@pytest.mark.parametrize("lines, good, bad", [
    # every non-blank line is a query, numbered from 0; blank lines are not queries
    (["foo", "", "  ", "bar"], [(0, 1, "foo"), (1, 4, "bar")], []),
    # no comments: `#include` is a query (as a line of grep -f)
    (["#include <stdio.h>", "# TODO"], [(0, 1, "#include <stdio.h>"), (1, 2, "# TODO")], []),
    # a bad query keeps its id (reported with its line), the next ones theirs
    (["foo", "fork:perhaps bar", "baz"], [(0, 1, "foo"), (2, 3, "baz")], [(1, 2)]),
    (["(bar", "lang:"], [(0, 1, "(bar")], [(1, 2)]),  # an open group is a literal; "lang:" needs a value
    (["archived:maybe", "", "ok"], [(1, 3, "ok")], [(0, 1)]),
    # CRLF files
    (["foo\r", "bar\r"], [(0, 1, "foo"), (1, 2, "bar")], []),
])
def test_plain_lines(lines, good, bad):
    lines = [line if line.endswith("\n") else line + "\n" for line in lines]
    got_good, got_bad, total = read(lines)
    assert (got_good, got_bad, total) == (good, bad, len(good) + len(bad))


def test_regex_flags_apply_to_plain_lines():
    good, bad, _ = queries_from_lines(["(foo", "a+b"], Defaults(matches=5, regex=True, case_sensitive=True),
                                      contexts_known=True)
    assert [b.line for b in bad] == [1]  # an unbalanced group is no regex
    assert good[0].options.is_regex and good[0].options.case_sensitive and good[0].options.matches == 5


def test_json_lines_of_search_bodies_each_with_its_own_options():
    lines = [
        json.dumps({"query": "foo", "matches": 3}),
        "",
        json.dumps({"query": "a+b", "isRegexEnabled": True, "isCaseSensitivityEnabled": True, "contextLines": 2,
                    "whole": True, "source": "x", "extra": 1}),  # fields a batch has no use for are ignored
        "{not json",
        json.dumps({"matches": 3}),
        json.dumps(["foo"]),
        json.dumps({"query": "foo", "matches": 0}),
        json.dumps({"query": "foo", "matches": "5"}),
        json.dumps({"query": "foo", "isRegexEnabled": "yes"}),
        json.dumps({"query": "  "}),
    ]
    good, bad, total = queries_from_lines(lines, D, contexts_known=True)
    assert total == 9
    assert [(s.query_id, s.line, s.query, s.options.matches, s.options.is_regex, s.options.case_sensitive)
            for s in good] == [(0, 1, "foo", 3, False, False), (1, 3, "a+b", 100, True, True)]
    assert [(b.query_id, b.line) for b in bad] == [(2, 4), (3, 5), (4, 6), (5, 7), (6, 8), (7, 9), (8, 10)]
    reasons = [b.reason for b in bad]
    assert reasons[0].startswith("not a JSON search body")
    assert "needs a string 'query'" in reasons[1]
    assert "a string or a search body" in reasons[2]
    assert "'matches' must be a positive integer, not 0" in reasons[3]
    assert "'matches' must be a positive integer, not \"5\"" in reasons[4]
    assert "'isRegexEnabled' must be true or false" in reasons[5]
    assert "empty" in reasons[6]
    assert str(bad[0]).startswith("line 4 (query 2): ")


@pytest.mark.parametrize("first, jsonl", [
    ('{"query": "foo"}', True),  # the first non-blank line decides
    ("foo", False),
    ('{"a"}', False),  # not a JSON object: a query (with braces)
])
def test_the_first_line_says_whether_the_file_is_json_lines(first, jsonl):
    good, bad, _ = queries_from_lines(["", first, '{"query": "bar"}'], D, contexts_known=True)
    assert [s.query for s in good] == (["foo", "bar"] if jsonl else [first, '{"query": "bar"}'])
    assert bad == []


def test_a_service_judges_its_own_search_contexts():
    assert read(["context:web foo"], contexts_known=False)[0] == [(0, 1, "context:web foo")]
    good, bad, _ = read(["context:web foo"], contexts_known=True)
    assert good == [] and bad == [(0, 1)]


def test_queries_of_the_python_api_are_checked_with_their_position():
    specs = specs_of(["foo", {"query": "bar", "matches": 2}], D, contexts_known=True)
    assert [(s.query_id, s.query, s.options.matches) for s in specs] == [(0, "foo", 100), (1, "bar", 2)]
    with pytest.raises(BadQuery, match=r"^query 1: .*missing \)"):
        specs_of(["foo", "(bar"], Defaults(regex=True), contexts_known=True)
    with pytest.raises(InvalidArgument, match="a list of queries"):
        specs_of("foo", D, contexts_known=True)
    with pytest.raises(InvalidArgument, match="matches must be a positive integer"):
        Defaults(matches=0)
    with pytest.raises(InvalidArgument, match="timeout_s"):
        Defaults(timeout_s=0)


# ---------------------------------------------------------------- rows

QUERIES = [
    ("foo", {}),
    ("Foo", {"case_sensitive": True}),
    (r"def \w+", {"regex": True}),
    ("lang:python parse", {}),
    (r"file:\.go$ func", {}),
    ("repo:plain bar", {}),
    ("sym:Handler", {}),
    ("nomatchzzz", {}),
    ("file:README", {}),  # file names only: files, no match rows (as Client.search)
    ("café", {}),  # columns in characters
    (r"foo\nbar", {"regex": True}),  # a match over two lines: the line it starts on
]


def client_rows(res):
    return [(m.repo, m.path, m.line, m.column, m.text, m.language, m.branch) for m in res]


def batch_rows(rows):
    return [(r["repository"], r["path"], r["line_number"], r["column"], r["line"], r["language"], r["branch"])
            for r in rows]


@pytest.mark.parametrize("matches", [10_000, 3])
def test_the_rows_of_a_query_are_the_matches_client_search_returns(indexed_corpus, matches):
    """Both ways rows are made: from an answer (through a service) and from the files before they
    are presented (over an index)."""
    searcher = indexed_corpus["searcher"]
    specs = specs_of([{"query": q, "matches": matches, "isRegexEnabled": f.get("regex", False),
                       "isCaseSensitivityEnabled": f.get("case_sensitive", False)} for q, f in QUERIES], D,
                     contexts_known=True)
    asked = [(s.query, s.options) for s in specs]
    answers = searcher.search_many(asked)
    found = searcher.files_many(asked)
    with Client.local(indexed_corpus["index"]) as cs:
        for spec, answer, files, (query, flags) in zip(specs, answers, found, QUERIES, strict=True):
            expected = cs.search(query, matches=matches, **flags)
            for rows in (rows_of(spec, answer, per_file=False), rows_of_files(spec, files, per_file=False)):
                assert batch_rows(rows) == client_rows(expected), query
                assert {(r["query_id"], r["query"]) for r in rows} <= {(spec.query_id, query)}
            for per_file in (rows_of(spec, answer, per_file=True), rows_of_files(spec, files, per_file=True)):
                assert [(f["repository"], f["path"], f["language"], f["branch"]) for f in per_file] == [
                    (f.repo, f.path, f.language, f.branches[0] if f.branches else "") for f in expected.files]
                assert sum(f["match_count"] for f in per_file) == expected.stats["actualMatchCount"]
    assert table(rows_of(specs[0], answers[0], False), per_file=False).schema == MATCH_SCHEMA


@pytest.mark.slow  # over 1 s of the fast lane: `make test` runs it (tests/conftest.py, SLOW_MODULES)
def test_rows_made_before_presentation_equal_client_search_for_every_query_class(indexed_corpus):
    """The differential table of the engine (every query class, CRLF and non-UTF-8 files among the
    corpus's), capped and not: rows made from the files before presentation equal the matches
    `Client.search` reads from the presented answer."""
    from tests.engine.test_differential import CASES

    searcher = indexed_corpus["searcher"]
    for matches in (10_000, 4):
        specs = specs_of([{"query": q, "matches": matches, "isRegexEnabled": f.get("is_regex", False),
                           "isCaseSensitivityEnabled": f.get("case_sensitive", False)} for q, f, _ in CASES], D,
                         contexts_known=True)
        asked = [(s.query, s.options) for s in specs]
        for spec, answer, files in zip(specs, searcher.search_many(asked), searcher.files_many(asked), strict=True):
            assert batch_rows(rows_of_files(spec, files, False)) == batch_rows(rows_of(spec, answer, False)), spec
            assert rows_of_files(spec, files, True) == rows_of(spec, answer, True), spec


# ---------------------------------------------------------------- output

ROWS = [{"query_id": 0, "query": "foo", "repository": "r", "path": "a.py", "line_number": 3, "column": 1,
         "line": "foo = 'é,\"x\"'", "language": "Python", "branch": "HEAD"},
        {"query_id": 2, "query": "b,ar", "repository": "r", "path": "b.go", "line_number": 1, "column": 7,
         "line": "", "language": "Go", "branch": "refs/heads/main"}]


@pytest.mark.parametrize("ext", [".parquet", ".csv", ".jsonl", ".JSONL"])
def test_each_output_format_holds_the_rows_as_written(tmp_path, ext):
    path = str(tmp_path / f"out{ext}")
    w = RowWriter(path, MATCH_SCHEMA)
    w.write(table(ROWS[:1], per_file=False))
    w.write(table([], per_file=False))
    w.write(table(ROWS[1:], per_file=False))
    assert not (tmp_path / f"out{ext}").exists()  # named only once complete
    w.close()
    if ext == ".parquet":
        got = pq.read_table(path).to_pylist()
    elif ext == ".csv":
        with open(path, newline="", encoding="utf-8") as f:
            got = [{k: int(v) if k in ("query_id", "line_number", "column") else v for k, v in row.items()}
                   for row in csv.DictReader(f)]
    else:
        with open(path, encoding="utf-8") as f:
            got = [json.loads(line) for line in f]
    assert got == ROWS
    assert [p.name for p in tmp_path.iterdir()] == [f"out{ext}"]


def test_an_aborted_output_leaves_nothing(tmp_path):
    w = RowWriter(str(tmp_path / "out.parquet"), MATCH_SCHEMA)
    w.write(table(ROWS, per_file=False))
    w.abort()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["out.txt", "out", "out.json", "out.parquet.gz"])
def test_an_output_format_we_do_not_write_is_refused_before_any_work(tmp_path, capsys, name):
    queries = tmp_path / "q.txt"
    queries.write_text("foo\n")
    with pytest.raises(InvalidArgument, match=r"\.parquet, \.csv, \.jsonl"):
        format_of(name)
    # (no index there: the output is checked first)
    code = main(["batch", str(queries), "--index", str(tmp_path / "nope"), "--out", str(tmp_path / name)])
    assert code == 2
    assert ".parquet, .csv, .jsonl" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["q.txt"]


def test_a_missing_queries_file_or_index_is_bad_usage(tmp_path, capsys):
    out = str(tmp_path / "o.csv")
    assert main(["batch", str(tmp_path / "nope.txt"), "--index", str(tmp_path), "--out", out]) == 2
    assert "nope.txt" in capsys.readouterr().err
    (tmp_path / "q.txt").write_text("foo\n")
    assert main(["batch", str(tmp_path / "q.txt"), "--index", str(tmp_path / "none"), "--out", out]) == 2
    assert "no such index directory" in capsys.readouterr().err
    (tmp_path / "blank.txt").write_text("\n\n")
    assert main(["batch", str(tmp_path / "blank.txt"), "--index", str(tmp_path), "--out", out]) == 2
    assert "no query to run (0 queries in the file)" in capsys.readouterr().err
    assert pa is not None
