"""Tests of the query parser (docs/query-language.md#syntax): query + flags → AST printed as an s-expression."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch.errors import QueryParseError
from codesearch.query.ast import Const, Content, Node, Not, walk
from codesearch.query.parser import parse

LIT: dict = {}
RE = {"is_regex": True}
CS = {"case_sensitive": True}
RECS = {"is_regex": True, "case_sensitive": True}

CASES = [
    # --- docs/query-language.md#prefixes examples -----------------------------------------------
    ("foo bar", LIT, '(and substr:(?i)"foo" substr:(?i)"bar")'),
    ('"foo bar"', LIT, 'substr:(?i)"foo bar"'),
    ("foo OR bar", LIT, '(and substr:(?i)"foo" substr:(?i)"OR" substr:(?i)"bar")'),
    (
        "a b or c d",
        LIT,
        '(or (and substr:(?i)"a" substr:(?i)"b") (and substr:(?i)"c" substr:(?i)"d"))',
    ),
    ("-(foo) bar", LIT, '(and (not substr:(?i)"foo") substr:(?i)"bar")'),
    (r"file:\.ts$ useState", LIT, r'(and file:(?i)"\\.ts$" substr:(?i)"useState")'),
    (r"repo:^github\.com/org/api$ lang:go", LIT, r'(and repo:"^github\\.com/org/api$" lang:"go")'),
    ("rev:release foo", LIT, '(and rev:"release" substr:(?i)"foo")'),
    # --- every prefix and alias ----------------------------------------------------------------
    ("content:foo", LIT, 'substr:(?i)"foo"'),
    ("c:foo", LIT, 'substr:(?i)"foo"'),
    ('content:"foo bar"', LIT, 'substr:(?i)"foo bar"'),
    ("file:x", LIT, 'file:(?i)"x"'),
    ("f:x", LIT, 'file:(?i)"x"'),
    ("repo:x", LIT, 'repo:"x"'),
    ("r:x", LIT, 'repo:"x"'),
    ("lang:Go", LIT, 'lang:"Go"'),
    ('lang:"Visual Basic .NET"', LIT, 'lang:"Visual Basic .NET"'),
    ("sym:Foo", LIT, 'sym:(?i)"Foo"'),
    ("rev:*", LIT, 'rev:"*"'),
    ("context:web", LIT, 'context:"web"'),
    ("reposet:a,b,c", LIT, 'reposet:"a,b,c"'),
    ("reposet:a,,b,", LIT, 'reposet:"a,b"'),
    ('reposet:"a, b"', LIT, 'reposet:"a,b"'),
    ("archived:yes", LIT, "archived:yes"),
    ("archived:no", LIT, "archived:no"),
    ("archived:only", LIT, "archived:only"),
    ("fork:yes", LIT, "fork:yes"),
    ("fork:no", LIT, "fork:no"),
    ("fork:only", LIT, "fork:only"),
    ("visibility:public", LIT, "visibility:public"),
    ("visibility:private", LIT, "visibility:private"),
    ("visibility:any", LIT, "visibility:any"),
    ("file:(a|b)\\.go$", LIT, r'file:(?i)"(a|b)\\.go$"'),
    ("(file:(a|b))", LIT, 'file:(?i)"(a|b)"'),
    ("lang:go foo", LIT, '(and lang:"go" substr:(?i)"foo")'),
    # --- GitHub code search's spellings: path: language: /regex/ ---------------------------------
    ("path:x", LIT, 'file:(?i)"x"'),
    (r"path:\.py$ def", LIT, r'(and file:(?i)"\\.py$" substr:(?i)"def")'),
    ("-path:test", LIT, '(not file:(?i)"test")'),
    ("path:X", CS, 'file:"X"'),
    ("language:Go", LIT, 'lang:"Go"'),
    ('language:"Visual Basic .NET"', LIT, 'lang:"Visual Basic .NET"'),
    ("-language:python foo", LIT, '(and (not lang:"python") substr:(?i)"foo")'),
    ("/fo+/", LIT, 'regex:(?i)"fo+"'),
    ("/fo+/", RE, 'regex:(?i)"fo+"'),
    ("/Fo+/", CS, 'regex:"Fo+"'),
    ("/a.c/ b.c", LIT, '(and regex:(?i)"a.c" substr:(?i)"b.c")'),
    (r"/a\/b/ x/", LIT, r'(and regex:(?i)"a\\/b" substr:(?i)"x/")'),
    ("(/x/ or y)", LIT, '(or regex:(?i)"x" substr:(?i)"y")'),
    # not a slashed regex: too short, quoted, not at both ends, or a prefix value
    ("//", LIT, 'substr:(?i)"//"'),
    ("/", LIT, 'substr:(?i)"/"'),
    ('"/x/"', LIT, 'substr:(?i)"/x/"'),
    ("/x", LIT, 'substr:(?i)"/x"'),
    ("x/", LIT, 'substr:(?i)"x/"'),
    ("-/x/", LIT, 'substr:(?i)"-/x/"'),
    ("file:/src/", LIT, 'file:(?i)"/src/"'),
    ("Path:x", LIT, 'substr:(?i)"Path:x"'),
    ("languages:go", LIT, 'substr:(?i)"languages:go"'),
    # --- unknown or mis-cased prefixes are plain terms -------------------------------------------
    ("case:yes", LIT, 'substr:(?i)"case:yes"'),
    ("case:yes foo", LIT, '(and substr:(?i)"case:yes" substr:(?i)"foo")'),
    ("http://x.com/a", LIT, 'substr:(?i)"http://x.com/a"'),
    ("File:x", LIT, 'substr:(?i)"File:x"'),
    ('"file:x"', LIT, 'substr:(?i)"file:x"'),
    ("a:b:c", LIT, 'substr:(?i)"a:b:c"'),
    # --- case-sensitive mode -------------------------------------------------------------------
    ("Foo", CS, 'substr:"Foo"'),
    ("file:X sym:Y repo:Z", CS, '(and file:"X" sym:"Y" repo:"Z")'),
    ("c:Foo", CS, 'substr:"Foo"'),
    # --- regex mode ----------------------------------------------------------------------------
    ("foo.*bar", RE, 'regex:(?i)"foo.*bar"'),
    ("Foo.*Bar", RECS, 'regex:"Foo.*Bar"'),
    (r'"\d+ x"', RE, r'regex:(?i)"\\d+ x"'),
    ("content:a+", RE, 'regex:(?i)"a+"'),
    ("test()", RE, 'regex:(?i)"test()"'),
    ("lang:c++ file:x", RE, '(and lang:"c++" file:(?i)"x")'),
    ("a or b", RE, '(or regex:(?i)"a" regex:(?i)"b")'),
    ("a or", RE, '(and regex:(?i)"a" regex:(?i)"or")'),
    ('"(?<=a)b"', RE, 'regex:(?i)"(?<=a)b"'),  # fallback engine accepts look-behind
    # a group standing alone holds a regex; glued to more text it is part of one regex
    ("(foo|bar)", RE, 'regex:(?i)"foo|bar"'),
    ("(foo|bar)baz", RE, 'regex:(?i)"(foo|bar)baz"'),
    ('"(foo|bar)baz"', RE, 'regex:(?i)"(foo|bar)baz"'),
    ("x(foo|bar)", RE, 'regex:(?i)"x(foo|bar)"'),
    (r"(urlsplit|urlparse)\( x", RE, r'(and regex:(?i)"(urlsplit|urlparse)\\(" regex:(?i)"x")'),
    ("(a|b)(c|d)", RE, 'regex:(?i)"(a|b)(c|d)"'),
    ("((a|b)c d)", RE, '(and regex:(?i)"(a|b)c" regex:(?i)"d")'),
    # literal mode never compiles bare terms
    ("foo( [a", LIT, '(and substr:(?i)"foo(" substr:(?i)"[a")'),
    # --- negation ------------------------------------------------------------------------------
    ("-file:test", LIT, '(not file:(?i)"test")'),
    ("-file:test foo", LIT, '(and (not file:(?i)"test") substr:(?i)"foo")'),
    ("-f:test", LIT, '(not file:(?i)"test")'),
    ("-repo:x lang:go", LIT, '(and (not repo:"x") lang:"go")'),
    ("-archived:only", LIT, "(not archived:only)"),
    ("-foo", LIT, 'substr:(?i)"-foo"'),
    ("a -b", LIT, '(and substr:(?i)"a" substr:(?i)"-b")'),
    ("-", LIT, 'substr:(?i)"-"'),
    ("a - b", LIT, '(and substr:(?i)"a" substr:(?i)"-" substr:(?i)"b")'),
    ('-"foo bar"', LIT, r'substr:(?i)"-\"foo bar\""'),  # a dash negates a prefix or a group only
    ('-("foo bar")', LIT, '(not substr:(?i)"foo bar")'),
    ("- file:x", LIT, '(not file:(?i)"x")'),  # the negated expression may follow after whitespace
    ("- (a b)", LIT, '(not (and substr:(?i)"a" substr:(?i)"b"))'),
    ("-\t\tfile:x y", LIT, '(and (not file:(?i)"x") substr:(?i)"y")'),
    ("- foo", LIT, '(and substr:(?i)"-" substr:(?i)"foo")'),
    ("- -file:x", LIT, '(and substr:(?i)"-" (not file:(?i)"x"))'),
    ("-(a)b", LIT, 'substr:(?i)"-(a)b"'),
    ("-(a or b)", LIT, '(not (or substr:(?i)"a" substr:(?i)"b"))'),
    ("-(a b) c", LIT, '(and (not (and substr:(?i)"a" substr:(?i)"b")) substr:(?i)"c")'),
    ("--file:x", LIT, 'substr:(?i)"--file:x"'),
    ("-(", LIT, 'substr:(?i)"-("'),
    ("-(foo", LIT, 'substr:(?i)"-(foo"'),
    ("-case:yes", LIT, 'substr:(?i)"-case:yes"'),
    ("-()", LIT, "(not false)"),
    ("-(-(a))", LIT, '(not (not substr:(?i)"a"))'),
    ("(a -)", LIT, '(and substr:(?i)"a" substr:(?i)"-")'),
    # --- parentheses ---------------------------------------------------------------------------
    ("foo(", LIT, 'substr:(?i)"foo("'),
    ("test()", LIT, 'substr:(?i)"test()"'),
    ("foo(bar) baz", LIT, '(and substr:(?i)"foo(bar)" substr:(?i)"baz")'),
    ("()", LIT, "false"),
    ("( )", LIT, "false"),
    ("(())", LIT, "false"),
    ("", LIT, "false"),
    ("   ", LIT, "false"),
    (" \t\n ", LIT, "false"),
    ("(a)", LIT, 'substr:(?i)"a"'),
    ("((a))", LIT, 'substr:(?i)"a"'),
    ("(a (b))", LIT, '(and substr:(?i)"a" substr:(?i)"b")'),
    ("(a (b c)) d", LIT, '(and substr:(?i)"a" substr:(?i)"b" substr:(?i)"c" substr:(?i)"d")'),
    ("(a or b) c", LIT, '(and (or substr:(?i)"a" substr:(?i)"b") substr:(?i)"c")'),
    (
        "(a or b) or (c or d)",
        LIT,
        '(or substr:(?i)"a" substr:(?i)"b" substr:(?i)"c" substr:(?i)"d")',
    ),
    (
        "((a b) or (c d)) e",
        LIT,
        '(and (or (and substr:(?i)"a" substr:(?i)"b") (and substr:(?i)"c" substr:(?i)"d"))'
        ' substr:(?i)"e")',
    ),
    ("(test())", LIT, 'substr:(?i)"test()"'),
    ("(a", LIT, 'substr:(?i)"(a"'),
    ("(a b", LIT, '(and substr:(?i)"(a" substr:(?i)"b")'),
    ("((a)", LIT, 'substr:(?i)"((a)"'),  # outer "(" unmatched: one word to the whitespace
    ("(foo( bar)", LIT, '(and substr:(?i)"(foo(" substr:(?i)"bar)")'),
    ("a)", LIT, 'substr:(?i)"a)"'),
    (")", LIT, 'substr:(?i)")"'),
    (") (a)", LIT, '(and substr:(?i)")" substr:(?i)"a")'),
    ("(a) b)", LIT, '(and substr:(?i)"a" substr:(?i)"b)")'),
    ("(a)b", LIT, 'substr:(?i)"(a)b"'),  # a group glued to more text is part of one word
    ("(a)(b)", LIT, 'substr:(?i)"(a)(b)"'),
    ("((a)b)", LIT, 'substr:(?i)"(a)b"'),
    ("(a)) b", LIT, '(and substr:(?i)"(a))" substr:(?i)"b")'),  # a stray ")" does not close
    ("(a (b))c", LIT, '(and substr:(?i)"(a" substr:(?i)"(b))c")'),
    (r"(a\)", LIT, r'substr:(?i)"(a\\)"'),  # an escaped bracket is no bracket
    (r"(a\) b)", LIT, r'(and substr:(?i)"a\\)" substr:(?i)"b")'),
    (r"(a\\) b", LIT, r'(and substr:(?i)"a\\\\" substr:(?i)"b")'),  # an escaped backslash is not
    ('("a)" b)', LIT, '(and substr:(?i)"a)" substr:(?i)"b")'),  # quoted ")" does not close
    ('("a b")', LIT, 'substr:(?i)"a b"'),
    ("(a () b)", LIT, "false"),
    ("a ()", LIT, "false"),
    ("() or a", LIT, 'substr:(?i)"a"'),
    ("a or ()", LIT, 'substr:(?i)"a"'),
    ("a () or b", LIT, 'substr:(?i)"b"'),
    ("() or ()", LIT, "false"),
    ("(file:x)", LIT, 'file:(?i)"x"'),
    ("(rev:main) foo", LIT, '(and rev:"main" substr:(?i)"foo")'),
    # --- or ------------------------------------------------------------------------------------
    ("or", LIT, 'substr:(?i)"or"'),
    ("or a", LIT, '(and substr:(?i)"or" substr:(?i)"a")'),
    ("a or", LIT, '(and substr:(?i)"a" substr:(?i)"or")'),
    ("a or or", LIT, '(or substr:(?i)"a" substr:(?i)"or")'),
    ("or or a", LIT, '(or substr:(?i)"or" substr:(?i)"a")'),
    ("or or", LIT, '(and substr:(?i)"or" substr:(?i)"or")'),
    ("a or b or c", LIT, '(or substr:(?i)"a" substr:(?i)"b" substr:(?i)"c")'),
    ("a OR b", LIT, '(and substr:(?i)"a" substr:(?i)"OR" substr:(?i)"b")'),
    ('a "or" b', LIT, '(and substr:(?i)"a" substr:(?i)"or" substr:(?i)"b")'),
    ("(or a) b", LIT, '(and substr:(?i)"or" substr:(?i)"a" substr:(?i)"b")'),
    ("(a or) b", LIT, '(and substr:(?i)"a" substr:(?i)"or" substr:(?i)"b")'),
    ("a (or) b", LIT, '(and substr:(?i)"a" substr:(?i)"or" substr:(?i)"b")'),
    ("a or(b)", LIT, '(and substr:(?i)"a" substr:(?i)"or(b)")'),
    ("a order", LIT, '(and substr:(?i)"a" substr:(?i)"order")'),
    ("file:x or -file:y", LIT, '(or file:(?i)"x" (not file:(?i)"y"))'),
    ("a or b", CS, '(or substr:"a" substr:"b")'),
    # --- quotes --------------------------------------------------------------------------------
    ('file:"my dir/x"', LIT, 'file:(?i)"my dir/x"'),
    (r'file:"a \"b\""', LIT, r'file:(?i)"a \"b\""'),
    (r'"say \"hi\""', LIT, r'substr:(?i)"say \"hi\""'),
    (r'"a\\b"', LIT, r'substr:(?i)"a\\b"'),
    (r'"\d+ x"', LIT, r'substr:(?i)"\\d+ x"'),
    ('"a" "b"', LIT, '(and substr:(?i)"a" substr:(?i)"b")'),
    ('"a"b', LIT, '(and substr:(?i)"a" substr:(?i)"b")'),
    ('"a b" or c', LIT, '(or substr:(?i)"a b" substr:(?i)"c")'),
    # an unclosed quote is an ordinary character
    ('"foo', LIT, r'substr:(?i)"\"foo"'),
    ('a "foo', LIT, r'(and substr:(?i)"a" substr:(?i)"\"foo")'),
    ('a "foo\\"', LIT, r'(and substr:(?i)"a" substr:(?i)"\"foo\\\"")'),
    ('file:"abc', LIT, r'file:(?i)"\"abc"'),
    ('-"abc', LIT, r'substr:(?i)"-\"abc"'),
    ('("abc)', LIT, r'substr:(?i)"\"abc"'),
    ('"a" "b', LIT, r'(and substr:(?i)"a" substr:(?i)"\"b")'),
    # an empty quoted term looks for nothing, like ()
    ('""', LIT, "false"),
    ('a ""', LIT, "false"),
    ('a or ""', LIT, 'substr:(?i)"a"'),
    ('-""', LIT, r'substr:(?i)"-\"\""'),
    # a quote inside a word is kept, spaces of a closed quoted string included
    ('print("hello world")', LIT, r'substr:(?i)"print(\"hello world\")"'),
    ('foo"bar', LIT, r'substr:(?i)"foo\"bar"'),
    ('x="1" y', LIT, r'(and substr:(?i)"x=\"1\"" substr:(?i)"y")'),
    ('a"b (c) d"', LIT, r'substr:(?i)"a\"b (c) d\""'),
    ("file:a\"b c\"", LIT, r'file:(?i)"a\"b c\""'),
    # --- non-ASCII -----------------------------------------------------------------------------
    ("ünï cödé", LIT, '(and substr:(?i)"ünï" substr:(?i)"cödé")'),
    ("a\u00a0b", LIT, '(and substr:(?i)"a" substr:(?i)"b")'),  # any Unicode whitespace splits
]


@pytest.mark.parametrize(("query", "flags", "expected"), CASES)
def test_parse(query, flags, expected):
    assert str(parse(query, **flags)) == expected


ERRORS = [
    ("archived:maybe", LIT, 9, "expected yes, no or only"),
    ("foo archived:maybe", LIT, 13, "'maybe'"),
    ("fork:Yes", LIT, 5, "expected yes, no or only"),
    ("visibility:internal", LIT, 11, "expected public, private or any"),
    ("file:", LIT, 5, "missing value after file:"),
    ("foo file:", LIT, 9, "missing value after file:"),
    ("f: x", LIT, 2, "missing value after f:"),
    ("lang: go", LIT, 5, "missing value after lang:"),
    ("(file:)", LIT, 6, "missing value after file:"),
    ("-file:", LIT, 6, "missing value after file:"),
    ("reposet:", LIT, 8, "missing value after reposet:"),
    ('file:""', LIT, 5, "empty value after file:"),
    ("reposet:,", LIT, 8, "at least one repository name"),
    ("a or or b", LIT, 5, "`or` right after `or`"),
    ("(x a or or b)", LIT, 8, "`or` right after `or`"),
    ("or or or a", LIT, 6, "`or` right after `or`"),
    # a regex error points at the character of the query the regex engine complains about: the
    # unclosed bracket, the second of two repeats (mapped through quotes, escapes and slashes)
    ("foo(", RE, 3, "invalid regular expression: missing )"),
    ("a b[", RE, 3, "missing ]"),
    ('a "x ("', RE, 5, "missing )"),
    ('-"x ("', RE, 4, "missing )"),
    ("a**", RECS, 2, "invalid regular expression"),
    ("foo (bar|baz", RE, 4, "missing )"),
    ("ok foo(bar", RE, 6, "missing )"),
    ('"a\\" (b"', RE, 5, "missing )"),
    ('file:"a \\" ("', LIT, 11, "missing )"),
    ("x{2,1}", RE, 2, "invalid regular expression"),
    ("content:(", RE, 8, "missing )"),
    ("c:x +y", RE, 4, "repetition"),
    ("file:foo(", LIT, 8, "missing )"),
    ("a -file:a(", LIT, 9, "missing )"),
    ("path:foo(", LIT, 8, "path: invalid regular expression"),
    ("a repo:[", LIT, 7, "missing ]"),
    ("r:[", LIT, 2, "missing ]"),
    ("sym:*x", LIT, 4, "repetition"),
    ('file:"a ("', LIT, 8, "missing )"),
    # a /…/ term is a regex in either mode; a bad one says how to search for the text
    ("/a(b/", LIT, 2, 'quote it: "/a(b/"'),
    ("x /**/", LIT, 3, "repetition"),
    ("/[/", RE, 1, "missing ]"),
    ("ü file:", LIT, 7, "missing value"),
    ("a \ud800", LIT, 2, "surrogate"),
]


@pytest.mark.parametrize(("query", "flags", "position", "reason"), ERRORS)
def test_parse_error(query, flags, position, reason):
    with pytest.raises(QueryParseError) as info:
        parse(query, **flags)
    err = info.value
    assert err.position == position, err.reason
    assert reason in err.reason
    assert err.query == query
    assert err.error_code == "FAILED_TO_PARSE_QUERY" and err.status_code == 400


def test_regex_error_reason_comes_from_compile_regex():
    with pytest.raises(QueryParseError) as info:
        parse("file:[", is_regex=False)
    assert "invalid regular expression" in info.value.reason
    assert "file:" in info.value.reason


def test_nodes_carry_flags():
    node = parse("foo", is_regex=True, case_sensitive=True)
    assert node == Content("foo", is_regex=True, case_sensitive=True)
    assert parse("()") == Const(False)


# --- robustness ---------------------------------------------------------------------------------

ALPHABET = '()"-: \\ortabcfilepsymvxyzk,.*[]+?^$\t'


def _check(query: str, **flags) -> None:
    try:
        node = parse(query, **flags)
    except QueryParseError as e:
        assert 0 <= e.position <= len(query)
        assert e.reason
        return
    assert isinstance(node, Node)
    for n in walk(node):
        assert isinstance(n, Node)
    str(node)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=40), st.booleans(), st.booleans())
def test_fuzz_small_alphabet(query, is_regex, case_sensitive):
    _check(query, is_regex=is_regex, case_sensitive=case_sensitive)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["(", ")", '"', "-", "or", "OR", " ", "file:", "repo:", "sym:", "c:", "archived:",
             "reposet:", "lang:", "rev:", "\\", "\\\"", "a", "b(", "x)", "[", "*", "yes"]
        ),
        max_size=30,
    ).map("".join),
    st.booleans(),
)
def test_fuzz_tokens(query, is_regex):
    _check(query, is_regex=is_regex)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30), st.booleans())
def test_fuzz_any_text(query, is_regex):
    _check(query, is_regex=is_regex)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30))
def test_quoted_term_round_trips(text):
    quoted = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    assert parse(quoted) == Content(text, is_regex=False, case_sensitive=False)
    assert parse("-(" + quoted + ")") == Not(Content(text, is_regex=False, case_sensitive=False))
    assert parse("-" + quoted) == Content("-" + quoted, is_regex=False, case_sensitive=False)


N = 10_000
DEEP = [
    "(" * N,
    ")" * N,
    "(" * N + "a" + ")" * N,
    "-(" * N + "a" + ")" * N,
    "(a " * N + ")" * N,
    "(a or " * N + "b" + ")" * N,
    "(a or (b " * N + ")" * (2 * N),
    '("' * N,
    '"' * N,
    '"' * (N + 1),
    "\\" * N + '"',
    "a or " * N + "b",
    "or " * N,
    "-" * N,
    "-(" * N,
    "() " * N,
    '(x -file:y "q" or ' * N + ")" * N,
    'x"' + "(a) " * N,
    "a " * (10 * N),
    "(a)" * N,
    "(" * N + "a)" * N,
    "-(a)b " * N,
    "- " * N + "x",
    "- " * N + "file:x",
    "\\(" * N + ")" * N,
    "a or or " * N + "b",
]


@pytest.mark.parametrize("query", DEEP, ids=[f"deep{i}" for i in range(len(DEEP))])
@pytest.mark.parametrize("is_regex", [False, True])
def test_pathological_queries_are_fast(query, is_regex):
    """Linear, not quadratic: each takes well under a second here; a quadratic parser would take
    minutes on these 10,000-fold inputs, so the bound is generous (a loaded CI machine must not
    make it flaky) and still catches the blow-up."""
    start = time.perf_counter()
    try:
        parse(query, is_regex=is_regex)
    except QueryParseError as e:
        assert 0 <= e.position <= len(query)
    assert time.perf_counter() - start < 15.0


def test_deep_nesting_shapes():
    assert parse("(" * N + "a" + ")" * N) == Content("a", False, False)
    node = parse("(a " * N + ")" * N)
    assert len(node.children) == N  # flattened into one AND
    node = parse("-(" * N + "a" + ")" * N)
    depth = 0
    while isinstance(node, Not):
        node, depth = node.child, depth + 1
    assert depth == N and node == Content("a", False, False)


# The terms a search shows, ranks and counts: the leaves under no negation (or under two), left to right.
POSITIVE_LEAVES = [
    ("a", ["a"]),
    ("a b", ["a", "b"]),
    ("a -(b)", ["a"]),
    ("a -b", ["a", "-b"]),  # a dash before a bare word is part of the word
    ("-(a -(b)) c", ["b", "c"]),
    ("(a or b) -(c or d) e", ["a", "b", "e"]),
    ("-(a)", []),
]


@pytest.mark.parametrize(("query", "expected"), POSITIVE_LEAVES)
def test_positive_leaves(query, expected):
    from codesearch.query.ast import positive_leaves

    assert [n.pattern for n in positive_leaves(parse(query))] == expected


def test_positive_leaves_of_a_deep_query():
    from codesearch.query.ast import positive_leaves

    assert [n.pattern for n in positive_leaves(parse("-(" * N + "a" + ")" * N))] == ([] if N % 2 else ["a"])
