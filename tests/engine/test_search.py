"""Search results: response shape, positions, chunks, caps, ranking, stats, errors, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig

import pytest

from codesearch.cli import main as cli_main
from codesearch.errors import QueryParseError, SearchContextNotFound
from codesearch.index.builder import IndexSettings
from codesearch.index.paths import index_paths
from codesearch.search.engine import Searcher
from codesearch.search.options import SearchOptions
from tests.oracle import Oracle, docs_from_dir, engine_spans

FILE_KEYS = {"fileName", "webUrl", "repository", "repositoryId", "language", "chunks", "branches"}
STATS_KEYS = {"actualMatchCount", "totalMatchCount", "duration", "fileCount", "filesSkipped", "contentBytesLoaded",
              "indexBytesLoaded", "crashes", "shardFilesConsidered", "filesConsidered", "filesLoaded", "shardsScanned",
              "shardsSkipped", "shardsSkippedFilter", "ngramMatches", "ngramLookups", "wait", "matchTreeConstruction",
              "matchTreeSearch", "regexpsConsidered", "flushReason"}


def _index(tmp_path, files: dict[str, str | bytes], **settings):
    src = tmp_path / "src"
    for path, data in files.items():
        full = src / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data.encode() if isinstance(data, str) else data)
    index_paths([str(src)], str(tmp_path / "ix"), IndexSettings(**settings))
    return Searcher(str(tmp_path / "ix")), str(src)


def test_response_shape(indexed_corpus):
    r = indexed_corpus["searcher"].search("handler", matches=5, context_lines=1)
    assert set(r) == {"stats", "files", "repositoryInfo", "isSearchExhaustive"}
    assert set(r["stats"]) == STATS_KEYS
    assert all(isinstance(v, int) for k, v in r["stats"].items() if k != "flushReason")
    assert r["stats"]["flushReason"] == "FLUSH_REASON_FINAL_FLUSH"
    for f in r["files"]:
        assert FILE_KEYS <= set(f) and "content" not in f
        assert f["webUrl"].startswith("http://localhost:3000/browse/") and "/-/blob/" in f["webUrl"]
        for ch in f["chunks"]:
            assert set(ch) == {"content", "matchRanges", "contentStart", "symbols"}
    assert {i["id"] for i in r["repositoryInfo"]} == {f["repositoryId"] for f in r["files"]}
    assert set(r["repositoryInfo"][0]) == {"id", "codeHostType", "name", "displayName", "webUrl"}


def test_positions_and_chunks_agree_with_the_file(indexed_corpus):
    """Every range's byteOffset/lineNumber/column and every chunk's text, recomputed from the file."""
    s, oracle = indexed_corpus["searcher"], indexed_corpus["oracle"]
    by_key = {(d.repo, d.path): d.content for d in oracle.docs if "HEAD" in d.branches or "refs/heads/main" in d.branches}
    for q, flags in [("café", {}), ("foo", {}), (r"o\s+b", {"is_regex": True}), ("kelvin", {}), (r"foo\nbar", {"is_regex": True})]:
        for ctx in (0, 2):
            r = s.search(q, matches=10**6, context_lines=ctx, **flags)
            for f in r["files"]:
                content = by_key[(f["repository"], f["fileName"]["text"])]
                lines = content.split(b"\n")
                for ch in f["chunks"]:
                    start = ch["contentStart"]
                    first = start["lineNumber"]
                    assert start["column"] == 1
                    assert start["byteOffset"] == sum(len(l) + 1 for l in lines[: first - 1])
                    n = ch["content"].count("\n") + 1
                    assert ch["content"] == b"\n".join(lines[first - 1 : first - 1 + n]).decode("utf-8", "replace")
                    for rng in ch["matchRanges"]:
                        for pos in (rng["start"], rng["end"]):
                            off = pos["byteOffset"]
                            line = content[:off].count(b"\n") + 1
                            col = len(content[content.rfind(b"\n", 0, off) + 1 : off].decode("utf-8", "replace")) + 1
                            assert (pos["lineNumber"], pos["column"]) == (line, col)
                        assert first <= rng["start"]["lineNumber"] <= first + n - 1
                # Chunks are separate: no overlap, no adjacency.
                bounds = [(c["contentStart"]["lineNumber"], c["contentStart"]["lineNumber"] + c["content"].count("\n")) for c in f["chunks"]]
                assert all(b[0] > a[1] + 1 for a, b in zip(bounds, bounds[1:]))


def test_context_lines_merge_chunks(tmp_path):
    s, _ = _index(tmp_path, {"a.txt": "x\nneedle 1\nx\nx\nneedle 2\nx\nx\nx\nx\nx\nneedle 3\n"}, ctags=False)
    assert len(s.search("needle")["files"][0]["chunks"]) == 3
    chunks = s.search("needle", context_lines=1)["files"][0]["chunks"]
    assert [(c["contentStart"]["lineNumber"], c["content"].count("\n") + 1) for c in chunks] == [(1, 6), (10, 2)]


@pytest.mark.parametrize("cap", [1, 3, 7, 50])
def test_match_cap_and_exhaustiveness(indexed_corpus, cap):
    s = indexed_corpus["searcher"]
    full = s.search("foo", matches=10**6)
    total = full["stats"]["actualMatchCount"]
    r = s.search("foo", matches=cap)
    st = r["stats"]
    assert st["actualMatchCount"] == sum(len(c["matchRanges"]) for f in r["files"] for c in f["chunks"]) + sum(len(f["fileName"]["matchRanges"]) for f in r["files"])
    assert st["actualMatchCount"] == min(cap, total)
    assert r["isSearchExhaustive"] == (st["totalMatchCount"] <= st["actualMatchCount"]) == (cap >= total)
    # Capped results are a subset of the full answer.
    assert engine_spans(r)[0] <= engine_spans(full)[0]


def test_predicate_only_queries_are_capped_by_files(indexed_corpus):
    s = indexed_corpus["searcher"]
    r = s.search("lang:text", matches=2)
    assert len(r["files"]) == 2 and not r["isSearchExhaustive"]
    assert s.search("lang:skipped", matches=100)["isSearchExhaustive"]


def test_whole_returns_content(indexed_corpus):
    r = indexed_corpus["searcher"].search("file:no-newline", whole=True)
    assert r["files"][0]["content"] == "foo bar\nlast line foo"


def test_ranking_definitions_and_file_names_first(tmp_path):
    files = {f"use{i}.py": "from lib import ParseConfig\nx = ParseConfig()  # ParseConfigs\n" for i in range(5)}
    files["zz_lib.py"] = "class ParseConfig:\n    pass\n"
    files["a_sub.py"] = "y = MyParseConfigurator\n"
    files["parseconfig_notes.txt"] = "nothing here about it\n"
    s, _ = _index(tmp_path, files)
    names = [f["fileName"]["text"] for f in s.search("ParseConfig", matches=100)["files"]]
    assert names[0] == "zz_lib.py"  # the definition
    assert names[-1] == "a_sub.py"  # substring only
    r = s.search("ParseConfig or file:parseconfig", matches=100)
    assert [f["fileName"]["text"] for f in r["files"]][:2] == ["zz_lib.py", "parseconfig_notes.txt"]


def test_symbol_results_carry_symbols(indexed_corpus):
    r = indexed_corpus["searcher"].search("sym:^Handler1$")
    f = r["files"][0]
    assert f["fileName"]["text"] == "src/app.py"
    assert f["chunks"][0]["symbols"] == [{"symbol": "Handler1", "kind": "class", "parent": None}]


def test_file_name_ranges(indexed_corpus):
    r = indexed_corpus["searcher"].search("file:app", matches=100)
    for f in r["files"]:
        for rng in f["fileName"]["matchRanges"]:
            a, b = rng["start"]["byteOffset"], rng["end"]["byteOffset"]
            assert f["fileName"]["text"].encode()[a:b].lower() == b"app"


def test_branches_and_web_urls(indexed_corpus):
    s = indexed_corpus["searcher"]
    r = s.search("rev:release file:release.py")
    assert r["files"][0]["branches"] == ["refs/heads/release/1.0"]
    assert "@release%2F1.0/-/blob/src/release.py" in r["files"][0]["webUrl"]
    assert s.search("file:release.py")["files"] == []  # not on the default branch


def test_contexts(indexed_corpus):
    s, plain = indexed_corpus["searcher"], indexed_corpus["plain_name"]
    opts = SearchOptions(matches=1000, contexts={"plainonly": {plain}})
    r = s.search("foo context:plainonly", options=opts)
    assert r["files"] and {f["repository"] for f in r["files"]} == {plain}
    with pytest.raises(SearchContextNotFound):
        s.search("foo context:nope", options=opts)


@pytest.mark.parametrize("query,flags", [("archived:maybe", {}), ("file:(", {}), ("a(", {"is_regex": True}),
                                         ("a or or b", {}), ("sym:[", {}), ("repo:*x", {})])
def test_bad_queries_raise_parse_errors(indexed_corpus, query, flags):
    with pytest.raises(QueryParseError):
        indexed_corpus["searcher"].search(query, **flags)


@pytest.mark.parametrize("query", ["", "   ", "()", '""'])
def test_empty_queries_return_nothing(indexed_corpus, query):
    r = indexed_corpus["searcher"].search(query)
    assert r["files"] == [] and r["isSearchExhaustive"]


def test_deadline_stops_the_search(indexed_corpus):
    r = indexed_corpus["searcher"].search("e", options=SearchOptions(matches=10**6, timeout_s=0))
    assert not r["isSearchExhaustive"]


def test_catastrophic_fallback_regex_is_bounded(tmp_path):
    s, _ = _index(tmp_path, {"a.txt": "a" * 5000 + "!\n" + "needle aaa\n"}, ctags=False)
    r = s.search(r"\baaa|(a+)+\1!", is_regex=True, matches=10)  # back-reference: runs on the fallback engine
    assert r["stats"]["duration"] < 30e9


# -- real code: Python's own standard library ------------------------------------------------

STDLIB_PACKAGES = ["json", "email", "http", "urllib", "asyncio", "collections", "importlib", "logging", "xml", "concurrent"]


@pytest.fixture(scope="module")
def stdlib_index(tmp_path_factory):
    root = sysconfig.get_paths()["stdlib"]
    out = tmp_path_factory.mktemp("stdlib")
    paths = [os.path.join(root, p) for p in STDLIB_PACKAGES]
    index_paths(paths, str(out / "ix"))
    docs = []
    for p in paths:
        docs += docs_from_dir(p, p.strip("/"))
    return Searcher(str(out / "ix")), Oracle(docs)


@pytest.mark.parametrize("query,flags,tree", [  # tree: what the query means, in the oracle's terms
    ("def __init__", {}, ("and", ("text", "def"), ("text", "__init__"))),
    ("import", {}, ("text", "import")),
    ("raise TypeError(", {}, ("and", ("text", "raise"), ("text", "TypeError("))),
    ("lang:python sym:^urlsplit$", {}, ("and", ("lang", "python"), ("sym", "^urlsplit$"))),
    (r"def \w+_(header|value)s?\(", {"is_regex": True}, ("and", ("regex", "def"), ("regex", r"\w+_(header|value)s?\("))),
    ("file:__init__ class", {}, ("and", ("file", "__init__"), ("text", "class"))),
    ("-file:json decode", {}, ("and", ("not", ("file", "json")), ("text", "decode"))),
    (r"(?i)content-type", {"is_regex": True}, ("regex", r"(?i)content-type")),
    ("NotImplementedError or ValueError", {"case_sensitive": True}, ("or", ("text", "NotImplementedError"), ("text", "ValueError"))),
    (r"(urlsplit|urlparse)\(", {"is_regex": True}, ("regex", r"(urlsplit|urlparse)\(")),
    (r"(def|class)\s+url", {"is_regex": True}, ("regex", r"(def|class)\s+url")),
])
def test_stdlib_against_brute_force(stdlib_index, query, flags, tree):
    searcher, oracle = stdlib_index
    want = oracle.search(tree, case_sensitive=flags.get("case_sensitive", False))
    got = engine_spans(searcher.search(query, matches=10**7, **flags))
    assert got == want
    assert want[1], "query should match something in the standard library"


# -- command line -------------------------------------------------------------------------


def test_cli_index_and_search(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("def hello():\n    return 'world'\n")
    assert cli_main(["index", str(src), "--out", str(tmp_path / "ix")]) == 0
    capsys.readouterr()
    assert cli_main(["search", "hello", "--index", str(tmp_path / "ix")]) == 0
    out = capsys.readouterr().out
    assert out == f"{str(src).strip('/')}/a.py:1:def hello():\n"
    assert cli_main(["search", "sym:hello", "--index", str(tmp_path / "ix"), "--json"]) == 0
    resp = json.loads(capsys.readouterr().out)
    assert resp["files"][0]["chunks"][0]["symbols"][0]["symbol"] == "hello"
    assert cli_main(["search", "nomatch", "--index", str(tmp_path / "ix")]) == 1
    assert cli_main(["search", "archived:maybe", "--index", str(tmp_path / "ix")]) == 2
    assert "archived" in capsys.readouterr().err


def test_cli_entry_point_runs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "codesearch.cli", "search", "x", "--index", str(tmp_path / "none")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "index directory does not exist" in out.stderr and "Traceback" not in out.stderr


# -- several searchers: partial results merged ------------------------------------------------


def _expected_chunks(content: bytes, spans: list[tuple[int, int]], ctx: int) -> list[tuple[int, int]]:
    """(first line, last line) of each chunk for these spans, computed plainly."""
    def line(off):
        return content[:off].count(b"\n") + 1
    n_lines = content.count(b"\n") + (0 if content.endswith(b"\n") else 1)
    groups = []
    for a, b in spans:
        lo, hi = max(line(a) - ctx, 1), min(line(max(a, b - 1)) + ctx, n_lines)
        if groups and lo <= groups[-1][1] + 1:
            groups[-1][1] = max(groups[-1][1], hi)
        else:
            groups.append([lo, hi])
    return [tuple(g) for g in groups]


@pytest.mark.parametrize("cap", [1, 2, 5, 13, 40, 10**6])
@pytest.mark.parametrize("ctx", [0, 2])
def test_merging_searchers_equals_one_searcher(indexed_corpus, cap, ctx):
    """Shards split over two 'searchers', each ranked and capped alone, then merged."""
    import time

    from codesearch.search.engine import make_plan, merge_partials, partial_result, search_shards

    s, oracle = indexed_corpus["searcher"], indexed_corpus["oracle"]
    options = SearchOptions(matches=cap, context_lines=ctx)
    one = s.search("foo or handler", options=options)
    p = make_plan("foo or handler", options)
    halves = [s.shards[::2], s.shards[1::2]]
    partials = [partial_result(search_shards(h, p, options, time.monotonic() + 30), options, origin=i)
                for i, h in enumerate(halves)]
    merged = merge_partials(partials, options, time.perf_counter_ns())
    full = engine_spans(s.search("foo or handler", matches=10**6))[0]
    got = engine_spans(merged)[0]
    assert got <= full
    assert merged["stats"]["actualMatchCount"] == one["stats"]["actualMatchCount"] == min(cap, len(full))
    assert merged["isSearchExhaustive"] == one["isSearchExhaustive"]
    if cap >= len(full):
        assert got == full
    contents = {(d.repo, d.path): d.content for d in oracle.docs if d.branches[0] in ("HEAD", "refs/heads/main")}
    for f in merged["files"]:
        content = contents[(f["repository"], f["fileName"]["text"])]
        spans = [(r["start"]["byteOffset"], r["end"]["byteOffset"]) for c in f["chunks"] for r in c["matchRanges"]]
        bounds = [(c["contentStart"]["lineNumber"], c["contentStart"]["lineNumber"] + c["content"].count("\n")) for c in f["chunks"]]
        assert bounds == _expected_chunks(content, spans, ctx)
        for c in f["chunks"]:
            first = c["contentStart"]["lineNumber"]
            lines = content.split(b"\n")
            assert c["content"] == b"\n".join(lines[first - 1 : first + c["content"].count("\n")]).decode("utf-8", "replace")


@pytest.mark.parametrize("ctx", [0, 1, 3])
def test_truncating_a_presented_file_keeps_exact_chunks(indexed_corpus, ctx):
    from codesearch.search.present import truncate_file_result

    s, oracle = indexed_corpus["searcher"], indexed_corpus["oracle"]
    contents = {(d.repo, d.path): d.content for d in oracle.docs if d.branches[0] in ("HEAD", "refs/heads/main")}
    resp = s.search("foo or bar file:notes", matches=10**6, context_lines=ctx)
    f = max(resp["files"], key=lambda f: sum(len(c["matchRanges"]) for c in f["chunks"]))
    content = contents[(f["repository"], f["fileName"]["text"])]
    all_spans = [(r["start"]["byteOffset"], r["end"]["byteOffset"]) for c in f["chunks"] for r in c["matchRanges"]]
    names = len(f["fileName"]["matchRanges"])
    assert len(all_spans) > 10
    for keep in range(names + 1, names + len(all_spans)):
        t = truncate_file_result(f, keep, ctx)
        spans = [(r["start"]["byteOffset"], r["end"]["byteOffset"]) for c in t["chunks"] for r in c["matchRanges"]]
        assert spans == all_spans[: keep - names]
        bounds = [(c["contentStart"]["lineNumber"], c["contentStart"]["lineNumber"] + c["content"].count("\n")) for c in t["chunks"]]
        assert bounds == _expected_chunks(content, spans, ctx)


@pytest.mark.parametrize("query,is_regex", [("abcabd or bcabde", True), ("abcabd", True), ("abcabd", False)])
def test_a_candidate_without_the_text_is_read_once_where_it_lies(tmp_path, query, is_regex):
    """A candidate that holds the trigrams and not the text is ruled out where its content lies
    (`absent_from`), and counts as one file read, whatever the number of terms that rule it out."""
    doc = "cab abc bca abd bde\n"
    s, _ = _index(tmp_path, {"decoy.txt": doc, "other.txt": "nothing to see\n"})
    r = s.search(query, matches=10, is_regex=is_regex, case_sensitive=True)
    assert r["files"] == []
    read = (r["stats"]["filesLoaded"], r["stats"]["contentBytesLoaded"])
    # a literal's quadgram filter may drop the decoy before it is read (a regex term has none)
    assert read == (1, len(doc)) if is_regex else read in {(1, len(doc)), (0, 0)}
    assert r["stats"]["filesConsidered"] == r["stats"]["filesLoaded"]
