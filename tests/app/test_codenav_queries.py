"""The pieces of code navigation that need no service: the queries a symbol lookup runs (any name,
however hostile, is searched as exactly itself), and the terms the file page highlights from the
query a search result link carries."""

from __future__ import annotations

import re

import pytest

from codesearch.query import ast
from codesearch.query.parser import parse
from codesearch.tools import codenav
from codesearch.errors import ToolInputError
from codesearch.web.codenav import highlight_terms

NAMES = ["shout", "Widget", "operator+", "a.b", "$scope", "x\\y", 'say"hi"', "(paren", "or", "-dash", "sym:x",
         "<img src=x onerror=alert(1)>", "日本語", "a b", "repo:evil"]


def _leaves(node):
    if isinstance(node, (ast.And, ast.Or)):
        for c in node.children:
            yield from _leaves(c)
    else:
        yield node


@pytest.mark.parametrize("name", NAMES)
def test_a_definition_lookup_is_exactly_one_symbol_of_that_name(name):
    tree = parse(codenav.definitions_query(name), is_regex=True, case_sensitive=True)
    assert isinstance(tree, ast.Symbol) and tree.case_sensitive
    rx = re.compile(tree.pattern)
    assert rx.search(name) and not rx.search(name + "x") and not rx.search("x" + name)


@pytest.mark.parametrize("name", NAMES)
def test_a_reference_lookup_is_the_name_as_a_whole_word(name):
    tree = parse(codenav.references_query(name), is_regex=True, case_sensitive=True)
    assert isinstance(tree, ast.Content) and tree.is_regex and tree.case_sensitive
    rx = re.compile(tree.pattern)
    assert rx.search(f"({name})") and rx.search(name)
    if re.match(r"\w", name):
        assert not rx.search("x" + name)
    if re.search(r"\w$", name):
        assert not rx.search(name + "x")


SCOPES = [
    # (repo, language, revision) -> the leaves besides the name
    ((None, None, None), set()),
    (("git.local/demo", None, None), {"repo:\"^git\\\\.local/demo$\""}),
    ((None, "Python", None), {'lang:"Python"'}),
    ((None, None, "HEAD"), set()),
    ((None, None, "release/1.0"), {'rev:"release/1.0"'}),
]


@pytest.mark.parametrize("scope,terms", SCOPES)
def test_scopes_become_filters(scope, terms):
    q = codenav.references_query("x", *scope)
    leaves = list(_leaves(parse(q, is_regex=True, case_sensitive=True)))
    assert len(leaves) == 1 + len(terms)
    assert set(q.split(" ")[1:]) == terms


def test_the_typescript_family_is_one_group():
    tree = parse(codenav.definitions_query("x", language="TSX"), is_regex=True, case_sensitive=True)
    langs = {leaf.name for leaf in _leaves(tree) if isinstance(leaf, ast.Language)}
    assert langs == {"TypeScript", "JavaScript", "JSX", "TSX"}


@pytest.mark.parametrize("bad,says", [("", "non-empty"), ("a\nb", "control"), ("a\tb", "control"), ("\x00", "control"),
                                      ("x" * 257, "at most 256"), (None, "non-empty"), (3, "non-empty")])
def test_names_that_cannot_be_looked_up_are_refused_with_the_reason(bad, says):
    with pytest.raises(ToolInputError, match=says):
        codenav.check_symbol(bad)


HIGHLIGHTS = [
    # (q, regex, case) -> terms to mark
    (("handle_request", False, False), [{"pattern": "handle_request", "regex": False, "case": False}]),
    (("lang:python server -content:body", False, False), [{"pattern": "server", "regex": False, "case": False}]),
    (("server -body", False, False), [{"pattern": "server", "regex": False, "case": False},
                                      {"pattern": "-body", "regex": False, "case": False}]),  # a word, not a negation
    (("foo or bar", False, True), [{"pattern": "foo", "regex": False, "case": True},
                                   {"pattern": "bar", "regex": False, "case": True}]),
    (("hand.e", True, False), [{"pattern": "hand.e", "regex": True, "case": False}]),
    (("file:x.py repo:demo", False, False), []),
    (("-(a or b) c", False, False), [{"pattern": "c", "regex": False, "case": False}]),
    (("a a a", False, False), [{"pattern": "a", "regex": False, "case": False}]),
    (("(unclosed", True, False), []),  # a regex error: nothing, never a failed page
    (("", False, False), []),
    (("   ", False, False), []),
]


@pytest.mark.parametrize("args,terms", HIGHLIGHTS)
def test_the_highlighted_terms_are_the_positive_content_terms(args, terms):
    assert highlight_terms(*args) == terms


def test_related_symbols_split_merged_chunks_into_lines_and_cap():
    chunk = {"content": "a x\nb x x\nc", "contentStart": {"lineNumber": 7},
             "matchRanges": [{"start": {"lineNumber": 7, "column": 3}, "end": {"lineNumber": 7, "column": 4}},
                             {"start": {"lineNumber": 8, "column": 3}, "end": {"lineNumber": 8, "column": 4}},
                             {"start": {"lineNumber": 8, "column": 5}, "end": {"lineNumber": 8, "column": 6}}]}
    resp = {"files": [{"fileName": {"text": "f.py"}, "repository": "r", "repositoryId": 1, "language": "Python",
                       "webUrl": "u", "chunks": [chunk], "branches": ["main"]}],
            "repositoryInfo": [{"id": 1}, {"id": 2}], "isSearchExhaustive": True}
    out = codenav.related_symbols(resp)
    assert [m["lineContent"] for m in out["files"][0]["matches"]] == ["a x", "b x x", "b x x"]
    assert out["stats"] == {"matchCount": 3} and out["repositoryInfo"] == [{"id": 1}] and out["isSearchExhaustive"]
    capped = codenav.related_symbols(resp, limit=2)
    assert capped["stats"] == {"matchCount": 2} and capped["isSearchExhaustive"] is False
    assert codenav.related_symbols(resp, revision="dev")["files"] == []
    assert len(codenav.related_symbols(resp, revision="main")["files"]) == 1
