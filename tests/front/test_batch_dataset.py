"""Batch search as a Ray Dataset over an index directory (`codesearch.data.search`) and the
``codesearch batch`` command on it, in the test session's Ray.

The differential test: for a table of queries (literals, regexes, file:/repo:/lang: filters, sym:,
case sensitivity, a query with no match, capped queries, a search body with its own options),
searched together in several read tasks, the rows of each query equal what `Client.search`
(`Client.local` on the same index) returns for it, match for match.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

import codesearch.data as csd
from codesearch import Client
from codesearch.cli import main
from codesearch.data.datasource import ProgressCounter
from codesearch.data.queries import Defaults, specs_of
from codesearch.data.sources import IndexSource
from codesearch.errors import InvalidArgument

#: (query, Client.search keyword arguments)
TABLE = [
    ("foo", {}),
    ("FOO", {"case_sensitive": True}),
    ("foo", {"case_sensitive": True}),
    ("handler_123", {}),
    ("café", {}),
    ('"foo bar"', {}),
    (r"def \w+_\d+", {"regex": True}),
    (r"[Ff]oo(Bar)?", {"regex": True, "case_sensitive": True}),
    (r"/h.llo/", {}),
    (r"file:\.py$ def", {}),
    ("file:src/ return", {}),
    ("lang:python class", {}),
    ("lang:Go func", {}),
    ("-lang:python foo", {}),
    ("repo:plain foo", {}),
    ("repo:gitrepo rev:dev bar", {}),
    ("rev:* handler", {}),
    ("sym:Handler", {}),
    ("sym:^main$", {}),
    ("sym:Handler lang:python", {}),
    ("nomatchzzz", {}),
    ("value", {"matches": 5}),  # capped: the budget runs out part-way through a shard
    ("foo or bar", {"matches": 1}),  # capped at one match
    ("Handler1", {"matches": 2}),  # capped, definitions first
]


def body(query: str, kw: dict) -> dict:
    return {"query": query, "matches": kw.get("matches", 10_000), "isRegexEnabled": kw.get("regex", False),
            "isCaseSensitivityEnabled": kw.get("case_sensitive", False)}


def expected_rows(cs: Client, query: str, kw: dict) -> list[tuple]:
    res = cs.search(query, matches=kw.get("matches", 10_000), regex=kw.get("regex", False),
                    case_sensitive=kw.get("case_sensitive", False))
    return sorted((m.repo, m.path, m.line, m.column, m.text, m.language, m.branch) for m in res)


def got_rows(df: pd.DataFrame) -> list[tuple]:
    return sorted(df[["repository", "path", "line_number", "column", "line", "language", "branch"]]
                  .itertuples(index=False, name=None))


@pytest.fixture(scope="module")
def cs(indexed_corpus):
    with Client.local(indexed_corpus["index"]) as client:
        yield client


def test_every_row_equals_what_client_search_returns(ray_session, indexed_corpus, cs):
    ds = csd.search([body(q, kw) for q, kw in TABLE], indexed_corpus["index"], tasks=3)
    df = ds.to_pandas()
    assert list(df.columns) == ["query_id", "query", "repository", "path", "line_number", "column", "line",
                                "language", "branch"]
    assert set(df["query_id"]) <= set(range(len(TABLE)))
    for i, (query, kw) in enumerate(TABLE):
        mine = df[df["query_id"] == i]
        assert set(mine["query"]) <= {query}
        assert got_rows(mine) == expected_rows(cs, query, kw), (i, query)
    assert not df[df["query"] == "nomatchzzz"].shape[0]
    assert df[df["query_id"] == TABLE.index(("value", {"matches": 5}))].shape[0] == 5


def test_query_strings_take_the_options_of_the_call(ray_session, indexed_corpus, cs):
    ds = csd.search(["FOO", r"def \w+_\d+"], indexed_corpus["index"], regex=True, case_sensitive=True, matches=7)
    df = ds.to_pandas()
    for i, query in enumerate(["FOO", r"def \w+_\d+"]):
        assert got_rows(df[df["query_id"] == i]) == expected_rows(
            cs, query, {"regex": True, "case_sensitive": True, "matches": 7})


def test_per_file_rows_count_the_matches_of_each_file(ray_session, indexed_corpus, cs):
    queries = ["foo", r"file:\.py$", "sym:Handler", "nomatchzzz"]
    df = csd.search(queries, indexed_corpus["index"], per_file=True, tasks=2).to_pandas()
    assert list(df.columns) == ["query_id", "query", "repository", "path", "language", "branch", "match_count"]
    for i, query in enumerate(queries):
        res = cs.search(query, matches=10_000)
        mine = df[df["query_id"] == i]
        assert sorted(zip(mine["repository"], mine["path"], mine["match_count"], strict=True)) == sorted(
            (f.repo, f.path, len(f.matches) + (len(raw["fileName"]["matchRanges"])))
            for f, raw in zip(res.files, res.response["files"], strict=True))
    assert (df[df["query"] == r"file:\.py$"]["match_count"] > 0).all()  # files matched by name only


def test_the_dataset_is_lazy_and_streams_in_blocks(ray_session, indexed_corpus):
    specs = specs_of(["foo", "bar", "baz", "value"], Defaults(), contexts_known=True)
    counter = ProgressCounter.remote()
    ds = csd.dataset(specs, IndexSource(indexed_corpus["index"]), tasks=2, progress=counter)
    assert ray_session.get(counter.value.remote()) == 0  # built: nothing searched
    blocks = list(ds.iter_batches(batch_format="pandas", batch_size=None))
    assert ray_session.get(counter.value.remote()) == 4
    assert len(blocks) >= 2  # (one per read task at least: no process gathered them first)
    assert sorted(pd.concat(blocks)["query_id"].unique()) == [0, 1, 2, 3]


#: (the copies `IndexSource.per_node` names: "here" is this node's id, "index" the real index,
#: "missing" a directory that does not exist; the `default` path; whether the batch finds the index)
PER_NODE = [
    ({"here": "index"}, "missing", True),  # this node's own copy, whatever the default
    ({"some-other-node": "missing"}, "index", True),  # this node is not named: the default
    ({"some-other-node": "index"}, "missing", False),  # another node's copy is not this node's
    ({}, "index", True),  # no copies named: the one directory
]


@pytest.mark.parametrize(("copies", "default", "found"), PER_NODE)
def test_a_read_task_opens_the_copy_of_its_own_node(ray_session, indexed_corpus, cs, tmp_path, copies, default,
                                                    found):
    where = {"index": indexed_corpus["index"], "missing": str(tmp_path / "no-index-here")}
    here = ray_session.get_runtime_context().get_node_id()
    source = IndexSource.per_node({here if node == "here" else node: where[p] for node, p in copies.items()},
                                  where[default])
    if not found:
        with pytest.raises(Exception, match="no-index-here"):
            csd.search(["foo"], source, tasks=2).to_pandas()
        return
    df = csd.search(["foo", "Handler1"], source, tasks=2).to_pandas()
    for i, query in enumerate(["foo", "Handler1"]):
        assert got_rows(df[df["query_id"] == i]) == expected_rows(cs, query, {})


@pytest.mark.parametrize("copies", [{"": "/x"}, {"node": ""}])
def test_a_per_node_copy_needs_a_node_and_a_path(copies):
    with pytest.raises(InvalidArgument, match="per-node index copies"):
        IndexSource.per_node(copies, "/x")


def test_no_query_is_no_row(ray_session, indexed_corpus):
    ds = csd.search([], indexed_corpus["index"])
    assert ds.count() == 0 and ds.schema().names == csd.MATCH_SCHEMA.names


def test_a_bad_query_is_refused_when_the_dataset_is_built(indexed_corpus):
    with pytest.raises(csd.BadQuery, match=r"^query 2: .*fork"):
        csd.search(["foo", "bar", "fork:perhaps x"], indexed_corpus["index"])
    with pytest.raises(csd.BadQuery, match=r"^query 0: search context 'web' not found"):
        csd.search(["context:web foo"], indexed_corpus["index"])


# ---------------------------------------------------------------- the command

@pytest.mark.parametrize("ext", ["parquet", "csv", "jsonl"])
def test_the_command_writes_every_query_s_rows_and_reports_a_bad_line(ray_session, indexed_corpus, cs, tmp_path,
                                                                       capsys, ext):
    queries = tmp_path / "queries.txt"
    queries.write_text("foo\n\nfork:perhaps x\nsym:Handler\n#include\nnomatchzzz\n")
    out = tmp_path / f"hits.{ext}"
    code = main(["batch", str(queries), "--index", indexed_corpus["index"], "--out", str(out), "--matches", "50"])
    err = capsys.readouterr().err
    assert code == 1  # a query was bad: reported, the others written
    assert f"{queries}: line 3 (query 1): invalid value 'perhaps' for fork:" in err and "skipped" in err
    if ext == "parquet":
        df = pd.read_parquet(out)
    elif ext == "csv":
        df = pd.read_csv(out, keep_default_na=False)
    else:
        df = pd.DataFrame([json.loads(line) for line in out.read_text().splitlines()])
    # query ids follow the file's queries (blank lines are not queries; the bad one keeps its id)
    for query_id, query in [(0, "foo"), (2, "sym:Handler"), (3, "#include"), (4, "nomatchzzz")]:
        assert got_rows(df[df["query_id"] == query_id]) == expected_rows(cs, query, {"matches": 50}), query
    assert set(df["query_id"]) == {0, 2, 3}
    summary = dict(line.split(None, 1) for line in err.splitlines() if line.startswith("  "))
    assert summary["queries"].split()[:4] == ["5", "4", "searched,", "1"]
    assert summary["matches"].strip() == f"{len(df):,}"
    assert summary["files"].split()[0] == f"{len(set(zip(df['repository'], df['path'], strict=True))):,}"
    assert summary["rows"].split() == [f"{len(df):,}", str(out)]
    assert "seconds" in summary


def test_the_command_with_json_lines_per_file_and_no_bad_query(ray_session, indexed_corpus, cs, tmp_path, capsys):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps(body("FOO", {"case_sensitive": True, "matches": 3})) + "\n"
                       + json.dumps(body(r"def \w+_\d+", {"regex": True})) + "\n")
    out = tmp_path / "files.csv"
    assert main(["batch", str(queries), "--index", indexed_corpus["index"], "--out", str(out), "--per-file"]) == 0
    df = pd.read_csv(out, keep_default_na=False)
    assert list(df.columns) == ["query_id", "query", "repository", "path", "language", "branch", "match_count"]
    assert df[df["query_id"] == 0]["match_count"].sum() == 3
    res = cs.search(r"def \w+_\d+", regex=True, matches=10_000)
    assert df[df["query_id"] == 1]["match_count"].sum() == len(res)
    assert "bad" not in capsys.readouterr().err


# ------------------------------------------------------------------ all tasks at once


def test_search_and_insights_datasets_run_their_tasks_at_once(ray_session, indexed_corpus, tmp_path):
    """Ray Data's resource reservation would start a batch's second read task only about 1 s after
    its first (bench/RESULTS.md: that is a timing, so it is measured by bench/bench_batch.py, not
    asserted here): the datasets turn it off in their own context, and only there."""
    import ray.data

    from tests.corpus import make_local_repo

    repo = make_local_repo(str(tmp_path / "r"), {"a.py": "x = 1\n"})
    for ds in (csd.search(["foo"], indexed_corpus["index"]), csd.insights(["x"], repo, "2024-01-01", step="year")):
        assert ds.context.op_resource_reservation_enabled is False
        assert ds.map_batches(lambda b: b).context.op_resource_reservation_enabled is False  # derived ones too
    assert ray.data.DataContext.get_current().op_resource_reservation_enabled  # the caller's own context
