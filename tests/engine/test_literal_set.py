"""Regexes that are a set of literals (codesearch/query/literal_set.py): which patterns qualify,
and that their matches are exactly RE2's (a property test over random texts)."""

from __future__ import annotations

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch.query.literal_set import LiteralSetMatcher, compile_literal_set, literal_set

KELVIN = "\u212a".encode()

SETS = [
    # (pattern, case_sensitive, strings or None)
    ("(TODO|FIXME|XXX):", True, ("TODO:", "FIXME:", "XXX:")),
    ("TODO|FIXME", True, ("TODO", "FIXME")),
    ("colou?r", True, None),  # a repetition
    ("(?:get|set)_value", True, ("get_value", "set_value")),
    ("[gs]et_value", True, ("get_value", "set_value")),
    ("[a-z]et", True, None),  # a range
    ("[^g]et", True, None),  # a negated class
    ("^TODO", True, None),  # an anchor
    (r"\bTODO\b", True, None),  # word boundaries
    ("TO.O", True, None),  # any character
    ("(?i)todo", True, None),  # a flag
    ("ab|abc", True, None),  # a prefix of another: RE2 prefers one
    ("Ab|aB", False, None),  # one string without case
    ("Ab|aB", True, ("Ab", "aB")),
    ("caf\u00e9|tea", True, None),  # not ASCII
    ("(a|b)(c|d)(e|f)(g|h)(i|j)", True, None),  # 32 strings: more than MAX_STRINGS
    (r"TODO\(x\)", True, ("TODO(x)",)),
    ("ab[x[:digit:]]", True, None),  # RE2: x or a digit; Python: x, [, :, d, i, g, t then ]
]


@pytest.mark.parametrize("pattern,case_sensitive,want", SETS)
def test_which_patterns_are_literal_sets(pattern: str, case_sensitive: bool, want: tuple[str, ...] | None) -> None:
    assert literal_set(pattern, case_sensitive) == want


def re2_spans(pattern: str, data: bytes, case_sensitive: bool) -> list[tuple[int, int]]:
    options = re2.Options()
    options.case_sensitive = case_sensitive
    return [m.span() for m in re2.compile("(?m)" + pattern, options).finditer(data)]


PATTERNS = ["(TODO|FIXME|XXX):", "ab|cd", "(ab|cd)e", "[ks]ey|lock", "a|b|c"]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(PATTERNS),
    st.lists(st.sampled_from([b"TODO:", b"todo:", b"FIXME", b"XXX:", b"ab", b"AB", b"cd", b"e", b"key", b"sey",
                              b"LOCK", b"a", b"b", b"c", b" ", b"\n", KELVIN, b"\xc3\xa9"]), max_size=30).map(b"".join),
    st.booleans(),
)
def test_matches_are_re2s(pattern: str, data: bytes, case_sensitive: bool) -> None:
    matcher = compile_literal_set(pattern, case_sensitive)
    assert isinstance(matcher, LiteralSetMatcher)
    want = re2_spans(pattern, data, case_sensitive)
    assert list(matcher.finditer(data)) == want
    assert matcher.search(data) == bool(want)
