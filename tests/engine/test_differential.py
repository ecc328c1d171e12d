"""Differential tests: the engine's matches equal a brute-force scan of the same files.

Each case is (query, flags, tree): the query string goes to the engine, the tree, written here
by hand in the oracle's own representation (see tests/oracle.py), goes to the oracle, which never
sees the query string. So the table is also a specification of what each query means, and a
parser that builds the wrong tree makes the engine disagree with the oracle. The comparison is
on exact match spans (repo, path, branches, start byte, end byte) and on the set of matching
files, with a match cap high enough that the engine must be exhaustive.
"""

from __future__ import annotations

import pytest
import regex

from tests.oracle import engine_spans

R = {"is_regex": True}
CS = {"case_sensitive": True}
RCS = {"is_regex": True, "case_sensitive": True}

CASES = [
    # literals and case
    ("foo", {}, ("text", "foo")),
    ("Foo", CS, ("text", "Foo")),
    ("FOO", CS, ("text", "FOO")),
    ("foo", CS, ("text", "foo")),
    ("handler_123", {}, ("text", "handler_123")),
    ("useState", {}, ("text", "useState")),
    ("usestate", CS, ("text", "usestate")),
    ("x", {}, ("text", "x")),
    ("ab", {}, ("text", "ab")),
    ("a", {}, ("text", "a")),
    ("-foo", {}, ("text", "-foo")),
    ("foo(", {}, ("text", "foo(")),
    ("test()", {}, ("text", "test()")),
    ("or", {}, ("text", "or")),
    ("nomatchzzz", {}, ("text", "nomatchzzz")),
    ('"foo bar"', {}, ("text", "foo bar")),
    ('"foo bar"', CS, ("text", "foo bar")),
    ("foo bar", {}, ("and", ("text", "foo"), ("text", "bar"))),
    ("foo bar baz", CS, ("and", ("text", "foo"), ("text", "bar"), ("text", "baz"))),
    ('"foo', {}, ("text", '"foo')),
    ('""', {}, ("false",)),
    # non-ASCII, folding
    ("café", {}, ("text", "café")),
    ("CAFÉ", {}, ("text", "CAFÉ")),
    ("café", CS, ("text", "café")),
    ("straße", {}, ("text", "straße")),
    ("STRASSE", {}, ("text", "STRASSE")),
    ("kelvin", {}, ("text", "kelvin")),
    ("\u212aelvin", CS, ("text", "\u212aelvin")),
    ("ſtraße", {}, ("text", "ſtraße")),
    ("naïve", {}, ("text", "naïve")),
    ("caf", {}, ("text", "caf")),
    # boolean structure
    ("foo or bar", {}, ("or", ("text", "foo"), ("text", "bar"))),
    ("a b or c d", {}, ("or", ("and", ("text", "a"), ("text", "b")), ("and", ("text", "c"), ("text", "d")))),
    ("foo OR bar", {}, ("and", ("text", "foo"), ("text", "OR"), ("text", "bar"))),
    ("-(foo or bar) baz", {}, ("and", ("not", ("or", ("text", "foo"), ("text", "bar"))), ("text", "baz"))),
    ("-(foo) bar", {}, ("and", ("not", ("text", "foo")), ("text", "bar"))),
    ("(hello or parse) value", {}, ("and", ("or", ("text", "hello"), ("text", "parse")), ("text", "value"))),
    ("foo -lang:python", {}, ("and", ("text", "foo"), ("not", ("lang", "python")))),
    ("-file:test parse", {}, ("and", ("not", ("file", "test")), ("text", "parse"))),
    ("- file:test parse", {}, ("and", ("not", ("file", "test")), ("text", "parse"))),
    ('-"foo bar" baz', {}, ("and", ("text", '-"foo bar"'), ("text", "baz"))),
    ("or or foo", {}, ("or", ("text", "or"), ("text", "foo"))),
    # file names, languages, skipped files
    (r"file:\.py$ def", {}, ("and", ("file", r"\.py$"), ("text", "def"))),
    (r"file:\.py$", {}, ("file", r"\.py$")),
    ("file:src/ return", {}, ("and", ("file", "src/"), ("text", "return"))),
    ("file:APP", {}, ("file", "APP")),
    ("file:APP", CS, ("file", "APP")),
    ("file:data", {}, ("file", "data")),
    ("lang:python class", {}, ("and", ("lang", "python"), ("text", "class"))),
    ("lang:Go func", {}, ("and", ("lang", "Go"), ("text", "func"))),
    ("lang:skipped", {}, ("lang", "skipped")),
    ("lang:c handler", {}, ("and", ("lang", "c"), ("text", "handler"))),
    ("lang:markdown demo", {}, ("and", ("lang", "markdown"), ("text", "demo"))),
    ("lang:TypeScript", {}, ("lang", "TypeScript")),
    # regex mode
    (r"def \w+_\d+", R, ("and", ("regex", "def"), ("regex", r"\w+_\d+"))),
    (r"^import", R, ("regex", r"^import")),
    (r"[Ff]oo(Bar)?", RCS, ("regex", r"[Ff]oo(Bar)?")),
    (r"\bfoo\b", R, ("regex", r"\bfoo\b")),
    (r"foo\nbar", R, ("regex", r"foo\nbar")),
    (r"o\s+b", R, ("regex", r"o\s+b")),
    (r"(?i)hello", RCS, ("regex", r"(?i)hello")),
    (r"caf.", R, ("regex", r"caf.")),
    (r"h.llo|p[aA]rse", R, ("regex", r"h.llo|p[aA]rse")),
    (r"\d{3}", R, ("regex", r"\d{3}")),
    (r"return \w+ \* \d", R, ("and", ("regex", "return"), ("regex", r"\w+"), ("regex", r"\*"), ("regex", r"\d"))),
    (r"^$", R, ("regex", r"^$")),
    (r"x*", R, ("regex", r"x*")),
    (r'"(?<=def )\w+"', R, ("regex", r"(?<=def )\w+")),
    (r'"(foo)\s+\1"', R, ("regex", r"(foo)\s+\1")),
    (r"(?:foo|bar)baz", R, ("regex", r"(?:foo|bar)baz")),
    (r"[[:upper:]]{3}", RCS, ("regex", r"[[:upper:]]{3}")),
    (r"\pL+é", R, ("regex", r"\pL+é")),
    # regex mode: a group glued to more text is part of one regex; standing alone it is a group
    (r"(foo|test)\(", R, ("regex", r"(foo|test)\(")),
    (r"(def|class)\s+\w+", R, ("regex", r"(def|class)\s+\w+")),
    (r"(parse|value)_\d", R, ("regex", r"(parse|value)_\d")),
    (r"(foo)+_bar", R, ("regex", r"(foo)+_bar")),
    (r"(a+)+$", R, ("regex", r"(a+)+$")),
    (r"(foo|Foo)Bar", RCS, ("regex", r"(foo|Foo)Bar")),
    (r"(include|define)\s<", R, ("regex", r"(include|define)\s<")),
    (r"(hello|parse) (foo|bar)baz", R, ("and", ("regex", "hello|parse"), ("regex", "(foo|bar)baz"))),
    (r"-file:\.py$ (foo|test)\(", R, ("and", ("not", ("file", r"\.py$")), ("regex", r"(foo|test)\("))),
    (r"-(foo|bar) (baz|value)", R, ("and", ("not", ("regex", "foo|bar")), ("regex", "baz|value"))),
    (r"((foo|test)\( or (def|class)\s)", R, ("or", ("regex", r"(foo|test)\("), ("regex", r"(def|class)\s"))),
    # literal mode: the same gluing, brackets searched as typed
    ("(foo)", {}, ("text", "foo")),
    ("(1),", {}, ("text", "(1),")),
    ("():", {}, ("text", "():")),
    (r"test\(\)", {}, ("text", r"test\(\)")),
    # GitHub code search's spellings: path: is file:, language: is lang:, /…/ is a regex in
    # either mode (the oracle reads the trees; the queries are what a GitHub user types)
    (r"path:\.py$ def", {}, ("and", ("file", r"\.py$"), ("text", "def"))),
    ("-path:test parse", {}, ("and", ("not", ("file", "test")), ("text", "parse"))),
    ("path:APP", CS, ("file", "APP")),
    ("language:python class", {}, ("and", ("lang", "python"), ("text", "class"))),
    ("-language:python foo", {}, ("and", ("not", ("lang", "python")), ("text", "foo"))),
    (r"/def\s\w+_\d+/", {}, ("regex", r"def\s\w+_\d+")),
    ("/h.llo/", {}, ("regex", "h.llo")),
    ("/H.llo/", CS, ("regex", "H.llo")),
    ("/fo+/", R, ("regex", "fo+")),
    (r"/caf./ path:\.py$", {}, ("and", ("regex", "caf."), ("file", r"\.py$"))),
    ("/[Ff]oo/ or /p[aA]rse/", {}, ("or", ("regex", "[Ff]oo"), ("regex", "p[aA]rse"))),
    ('"/foo/"', {}, ("text", "/foo/")),
    ("//", {}, ("text", "//")),
    # branches and tags
    ("rev:dev foo", {}, ("and", ("rev", "dev"), ("text", "foo"))),
    ("rev:* handler", {}, ("and", ("rev", "*"), ("text", "handler"))),
    ("rev:release foo", {}, ("and", ("rev", "release"), ("text", "foo"))),
    ("rev:v1 parse", {}, ("and", ("rev", "v1"), ("text", "parse"))),
    ("rev:main Foo", CS, ("and", ("rev", "main"), ("text", "Foo"))),
    ("rev:nosuchbranch foo", {}, ("and", ("rev", "nosuchbranch"), ("text", "foo"))),
    ("rev:refs/heads/ useState", {}, ("and", ("rev", "refs/heads/"), ("text", "useState"))),
    # symbols
    ("sym:Handler", {}, ("sym", "Handler")),
    ("sym:^main$", {}, ("sym", "^main$")),
    ("sym:parse_\\d", {}, ("sym", r"parse_\d")),
    ("sym:foo", {}, ("sym", "foo")),
    ("sym:FOO", CS, ("sym", "FOO")),
    ("sym:Handler lang:python", {}, ("and", ("sym", "Handler"), ("lang", "python"))),
    ("rev:* sym:release", {}, ("and", ("rev", "*"), ("sym", "release"))),
    # symbols: patterns at the edges of a document's names scanned in one pass (search/symbol_match.py)
    ("sym:^parse", {}, ("sym", "^parse")),
    ("sym:\\d$", {}, ("sym", r"\d$")),
    ("sym:1$|^m", {}, ("sym", "1$|^m")),
    ("sym:\\bparse_\\d\\b", {}, ("sym", r"\bparse_\d\b")),
    ("sym:(?i)HANDLER", CS, ("sym", "(?i)HANDLER")),
    ("sym:(?:Foo|parse_)\\d", {}, ("sym", r"(?:Foo|parse_)\d")),
    ("sym:[^a-z_]main", {}, ("sym", "[^a-z_]main")),  # "\nmain" in the joined names: no name's match
    ("sym:\\d\\s*", {}, ("sym", r"\d\s*")),  # \s* runs on across the newline after a name
    ("sym:\\Amain", {}, ("sym", r"\Amain")),  # start of text: names one by one
    ("sym:(?s)_\\d.", {}, ("sym", r"(?s)_\d.")),  # . takes a newline: names one by one
    # repositories
    ("repo:plain foo", {}, ("and", ("repo", "plain"), ("text", "foo"))),
    ("-repo:plain foo", {}, ("and", ("not", ("repo", "plain")), ("text", "foo"))),
    ("repo:gitrepo rev:dev bar", {}, ("and", ("repo", "gitrepo"), ("rev", "dev"), ("text", "bar"))),
    ("archived:no foo", {}, ("and", ("archived", "no"), ("text", "foo"))),
    ("fork:only foo", {}, ("and", ("fork", "only"), ("text", "foo"))),
    ("visibility:private foo", {}, ("and", ("visibility", "private"), ("text", "foo"))),
    ("visibility:any hello", {}, ("and", ("visibility", "any"), ("text", "hello"))),
]


def _oracle_answer(oracle, flags, tree):
    return oracle.search(tree, case_sensitive=flags.get("case_sensitive", False))


@pytest.mark.parametrize("query,flags,tree", CASES, ids=[f"{q}|{''.join(sorted(f))}" for q, f, _ in CASES])
def test_engine_equals_brute_force(indexed_corpus, query, flags, tree):
    searcher, oracle = indexed_corpus["searcher"], indexed_corpus["oracle"]
    want_spans, want_files = _oracle_answer(oracle, flags, tree)
    resp = searcher.search(query, matches=10**6, **flags)
    got_spans, got_files = engine_spans(resp)
    assert got_files == want_files, f"files differ: missing {want_files - got_files}, extra {got_files - want_files}"
    assert got_spans == want_spans, f"spans differ: missing {sorted(want_spans - got_spans)[:5]}, extra {sorted(got_spans - want_spans)[:5]}"
    assert resp["isSearchExhaustive"]
    assert resp["stats"]["actualMatchCount"] == resp["stats"]["totalMatchCount"]


def test_corpus_is_not_trivial(indexed_corpus):
    """The cases above are only meaningful if most of them match something."""
    oracle = indexed_corpus["oracle"]
    matching = sum(1 for _, f, t in CASES if _oracle_answer(oracle, f, t)[1])
    assert matching >= len(CASES) * 0.75


GLUED_GROUPS = [
    q for q, f, t in CASES if f.get("is_regex") and q.startswith("(") and q[1] != "?" and t[0] == "regex"
]


def _answer_or_error(oracle, tree):
    try:
        return oracle.search(tree)
    except regex.error:  # not a regular expression at all (RE2 refused it too)
        return "error"


def test_glued_regex_groups_differ_from_their_split_reading(indexed_corpus):
    """The regex-group rows can catch a parser that splits them: on this corpus each finds other
    spans or files than the AND of its group and the rest would (or the rest is no regex)."""
    oracle = indexed_corpus["oracle"]
    assert len(GLUED_GROUPS) >= 6
    for query in GLUED_GROUPS:
        close = query.index(")")
        split = ("and", ("regex", query[1:close]), ("regex", query[close + 1 :]))
        whole = oracle.search(("regex", query))
        assert whole[1], f"{query} should match something"
        assert _answer_or_error(oracle, split) != whole, query
