"""Property tests: random files and random query trees, the engine against the brute-force oracle.

Hypothesis draws the query's meaning first, as a tree in the oracle's representation
(tests/oracle.py), then renders it as a query string following the query language's rules, with
random choices among the ways of writing the same thing: bare or quoted terms, groups,
``-(…)`` or ``- (…)``, and regexes whose first group is glued to more text. The oracle evaluates
the tree; the engine answers the string. Our parser is never asked what the query means.
"""

from __future__ import annotations

import os
import re
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch.globs import PatternList
from codesearch.index.builder import IndexSettings
from codesearch.index.paths import index_paths
from codesearch.search.engine import Searcher
from tests.oracle import Oracle, docs_from_dir, engine_spans

ALPHABET = "abcAB é\n_K\u212a("
texts = st.text(alphabet=ALPHABET, max_size=60)
files = st.lists(texts, min_size=1, max_size=6)
literals = st.text(alphabet="abcAB é_K(", min_size=1, max_size=5)
regex_atoms = st.sampled_from(["a", "b", "c", "A", "é", " ", "_", ".", "[ab]", "[^a]", r"\w", r"\s", "\n", "K", "(?i:ab)", "^", "$", r"\b"])
file_patterns = st.sampled_from(["f1", "d0", r"f[02]\.txt$", "D1", "F"])


@st.composite
def regexes(draw):
    parts = draw(st.lists(regex_atoms, min_size=1, max_size=5))
    out = []
    for p in parts:
        q = draw(st.sampled_from(["", "", "*", "+", "?", "{1,2}"]))
        out.append(p + (q if p not in ("^", "$", r"\b") else ""))
    alt = draw(st.booleans())
    return "|".join(["".join(out[: len(out) // 2 + 1]), "".join(out[len(out) // 2 + 1 :]) or "b"]) if alt else "".join(out)


@st.composite
def grouped_regexes(draw):
    """A regex whose first group may be glued to more text: ``(a|b)c``, ``(ab)+``, ``x(a|b)``."""
    head = draw(st.sampled_from(["", "", "a", "^"]))
    group = "(" + draw(regexes()) + ")" + draw(st.sampled_from(["", "+", "*", "?"]))
    tail = "".join(draw(st.lists(regex_atoms.filter(lambda a: a not in (" ", "\n")), max_size=2)))
    return head + group + tail


# -- rendering a tree as a query string --------------------------------------------------------

_PREFIX_LIKE = re.compile(r"[a-z]+:")


def _balanced(s: str) -> bool:
    """Unescaped brackets pair up, never closing more than opened."""
    depth, i = 0, 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        depth += (c == "(") - (c == ")")
        if depth < 0:
            return False
        i += 1
    return depth == 0


def _can_be_bare(kind: str, s: str) -> bool:
    """Whether the term `s` reads as itself when written without quotes, wherever it stands.

    A bare term runs to whitespace, so it may hold none, nor a quote; it must not read as
    something else: ``or``, a negation, a prefix expression, or, for literal text, a group
    standing alone (``(ab)`` is the text ``ab``; in regex mode the group holding the regex is the
    same regex). Its brackets must pair up (an unpaired one would pair with a group's), and a
    final backslash would escape the ``)`` of a group around it.
    """
    if not s or any(c.isspace() or c == '"' for c in s) or s == "or" or s[0] == "-":
        return False
    if _PREFIX_LIKE.match(s) or s.endswith("\\") or not _balanced(s):
        return False
    if kind == "text" and s[0] == "(" and s[-1] == ")":
        return False
    return True


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(draw, tree) -> str:
    """A query string meaning `tree`, choosing at random among equivalent spellings."""
    kind = tree[0]
    if kind in ("text", "regex"):
        s = tree[1]
        term = s if _can_be_bare(kind, s) and draw(st.booleans()) else _quote(s)
        return f"({term})" if draw(st.integers(0, 4)) == 0 else term
    if kind == "file":
        return "file:" + tree[1]
    if kind == "false":
        return draw(st.sampled_from(["()", '""', "( )"]))
    if kind == "not":
        child = tree[1]
        dash = draw(st.sampled_from(["-", "- "]))
        if child[0] == "file" and draw(st.booleans()):
            return dash + render(draw, child)
        return f"{dash}({render(draw, child)})"
    parts = []
    for child in tree[1:]:
        text = render(draw, child)
        if child[0] in ("and", "or") and not (kind == "or" and child[0] == "and" and draw(st.booleans())):
            text = f"({text})"  # AND binds tighter than OR: an AND inside an OR needs no brackets
        parts.append(text)
    return draw(st.sampled_from([" or ", "  or "]) if kind == "or" else st.sampled_from([" ", "  "])).join(parts)


def trees(leaves):
    def grow(children):
        return st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda cs: ("and", *cs)),
            st.lists(children, min_size=2, max_size=3).map(lambda cs: ("or", *cs)),
            children.map(lambda c: ("not", c)),
        )

    return st.recursive(leaves, grow, max_leaves=5)


literal_leaves = st.one_of(literals.map(lambda s: ("text", s)), file_patterns.map(lambda p: ("file", p)), st.just(("false",)))
regex_leaves = st.one_of(
    regexes().map(lambda s: ("regex", s)), grouped_regexes().map(lambda s: ("regex", s)), file_patterns.map(lambda p: ("file", p))
)


# -- the check ---------------------------------------------------------------------------------


def _check(contents: list[str], query: str, tree, is_regex: bool, case_sensitive: bool) -> None:
    with tempfile.TemporaryDirectory() as root:
        src = os.path.join(root, "src")
        for i, text in enumerate(contents):
            os.makedirs(os.path.join(src, f"d{i % 2}"), exist_ok=True)
            with open(os.path.join(src, f"d{i % 2}", f"f{i}.txt"), "w", encoding="utf-8") as f:
                f.write(text)
        out = os.path.join(root, "index")
        index_paths([src], out, IndexSettings(ctags=False, always_index=PatternList([])))
        want = Oracle(docs_from_dir(src, src.strip("/"))).search(tree, case_sensitive=case_sensitive)
        searcher = Searcher(out)
        try:
            got = engine_spans(searcher.search(query, matches=10**6, is_regex=is_regex, case_sensitive=case_sensitive))
        finally:
            searcher.close()
        assert got == want, f"query {query!r} for tree {tree!r}"


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(files, literals, st.booleans(), st.data())
def test_random_literals(contents, literal, case_sensitive, data):
    tree = ("text", literal)
    _check(contents, data.draw(st.composite(render)(tree)), tree, False, case_sensitive)


@FAST
@given(files, st.one_of(regexes(), grouped_regexes()), st.booleans(), st.data())
def test_random_regexes(contents, pattern, case_sensitive, data):
    tree = ("regex", pattern)
    _check(contents, data.draw(st.composite(render)(tree)), tree, True, case_sensitive)


@FAST
@given(files, trees(literal_leaves), st.booleans(), st.data())
def test_random_literal_queries(contents, tree, case_sensitive, data):
    _check(contents, data.draw(st.composite(render)(tree)), tree, False, case_sensitive)


@FAST
@given(files, trees(regex_leaves), st.data())
def test_random_regex_queries(contents, tree, data):
    _check(contents, data.draw(st.composite(render)(tree)), tree, True, False)


BARE = [  # (leaf kind, term, may be written without quotes)
    ("regex", "(a|b)c", True),  # a glued group: one regex
    ("regex", "a(b|c)", True),
    ("regex", "(ab)", True),  # a group standing alone holds the same regex
    ("text", "(ab)", False),  # ... but the text would lose its brackets
    ("text", "(a)b", True),
    ("text", "a(b", False),  # an unpaired bracket would pair with a group's
    ("regex", "(?i:ab)", True),
    ("regex", "a b", False),
    ("regex", r"ab\n", True),
    ("regex", "ab\n", False),  # a newline is whitespace
    ("regex", "ab\\", False),  # would escape the ")" of a group around it
    ("text", 'a"b', False),
    ("text", "or", False),
    ("text", "-a", False),
    ("text", "file:x", False),
    ("text", "case:x", False),  # not a prefix we know, but the renderer stays on the safe side
    ("text", "File:x", True),  # prefixes are lower case: a word
]


def test_bare_term_rule():
    assert [(k, s, _can_be_bare(k, s)) for k, s, _ in BARE] == BARE
