"""Differential tests: the engine's matches equal a brute-force scan of the same files.

Each case is (query, flags). The comparison is on exact match spans (repo, path, branches,
start byte, end byte) and on the set of matching files, with a match cap high enough that the
engine must be exhaustive.
"""

from __future__ import annotations

import pytest

from tests.oracle import engine_spans

R = {"is_regex": True}
CS = {"case_sensitive": True}
RCS = {"is_regex": True, "case_sensitive": True}

CASES = [
    # literals and case
    ("foo", {}), ("Foo", CS), ("FOO", CS), ("foo", CS), ("handler_123", {}), ("useState", {}), ("usestate", CS),
    ("x", {}), ("ab", {}), ("a", {}), ("-foo", {}), ("foo(", {}), ("test()", {}), ("or", {}), ("nomatchzzz", {}),
    ('"foo bar"', {}), ('"foo bar"', CS), ("foo bar", {}), ("foo bar baz", CS),
    # non-ASCII, folding
    ("café", {}), ("CAFÉ", {}), ("café", CS), ("straße", {}), ("STRASSE", {}), ("kelvin", {}), ("\u212aelvin", CS),
    ("ſtraße", {}), ("naïve", {}), ("caf", {}),
    # boolean structure
    ("foo or bar", {}), ("a b or c d", {}), ("foo OR bar", {}), ("-(foo or bar) baz", {}), ("-(foo) bar", {}),
    ("(hello or parse) value", {}), ("foo -lang:python", {}), ("-file:test parse", {}),
    # file names, languages, skipped files
    (r"file:\.py$ def", {}), (r"file:\.py$", {}), ("file:src/ return", {}), ("file:APP", {}), ("file:APP", CS),
    ("file:data", {}), ("lang:python class", {}), ("lang:Go func", {}), ("lang:skipped", {}), ("lang:c handler", {}),
    ("lang:markdown demo", {}), ("lang:TypeScript", {}),
    # regex mode
    (r"def \w+_\d+", R), (r"^import", R), (r"[Ff]oo(Bar)?", RCS), (r"\bfoo\b", R), (r"foo\nbar", R), (r"o\s+b", R),
    (r"(?i)hello", RCS), (r"caf.", R), (r"h.llo|p[aA]rse", R), (r"\d{3}", R), (r"return \w+ \* \d", R),
    (r"^$", R), (r"x*", R), (r'"(?<=def )\w+"', R), (r'"(foo)\s+\1"', R), (r"(?:foo|bar)baz", R), (r"[[:upper:]]{3}", RCS), (r"\pL+é", R),
    # branches and tags
    ("rev:dev foo", {}), ("rev:* handler", {}), ("rev:release foo", {}), ("rev:v1 parse", {}), ("rev:main Foo", CS),
    ("rev:nosuchbranch foo", {}), ("rev:refs/heads/ useState", {}),
    # symbols
    ("sym:Handler", {}), ("sym:^main$", {}), ("sym:parse_\\d", {}), ("sym:foo", {}), ("sym:FOO", CS),
    ("sym:Handler lang:python", {}), ("rev:* sym:release", {}),
    # repositories
    ("repo:plain foo", {}), ("-repo:plain foo", {}), ("repo:gitrepo rev:dev bar", {}), ("archived:no foo", {}),
    ("fork:only foo", {}), ("visibility:private foo", {}), ("visibility:any hello", {}),
]


@pytest.mark.parametrize("query,flags", CASES, ids=[f"{q}|{''.join(sorted(f))}" for q, f in CASES])
def test_engine_equals_brute_force(indexed_corpus, query, flags):
    searcher, oracle = indexed_corpus["searcher"], indexed_corpus["oracle"]
    want_spans, want_files = oracle.search(query, **flags)
    resp = searcher.search(query, matches=10**6, **flags)
    got_spans, got_files = engine_spans(resp)
    assert got_files == want_files, f"files differ: missing {want_files - got_files}, extra {got_files - want_files}"
    assert got_spans == want_spans, f"spans differ: missing {sorted(want_spans - got_spans)[:5]}, extra {sorted(got_spans - want_spans)[:5]}"
    assert resp["isSearchExhaustive"]
    assert resp["stats"]["actualMatchCount"] == resp["stats"]["totalMatchCount"]


def test_corpus_is_not_trivial(indexed_corpus):
    """The cases above are only meaningful if most of them match something."""
    oracle = indexed_corpus["oracle"]
    matching = sum(1 for q, f in CASES if oracle.search(q, **f)[1])
    assert matching >= len(CASES) * 0.75
