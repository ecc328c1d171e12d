"""Regexes that start with a literal and stay on one line (codesearch/query/prefix_regex.py):
which qualify, and that their matches are exactly RE2's (a property test over random texts)."""

from __future__ import annotations

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch.query.prefix_regex import PrefixRegexMatcher, compile_prefixed, literal_prefix

KELVIN = "\u212a".encode()

PREFIXES = [
    # (pattern, its literal prefix or None)
    (r"select[\t\x20]+\*[\t\x20]+from", "select"),
    (r"grpc_\w+_create", "grpc_"),
    (r"for\s+\w+", None),  # \s matches a newline
    (r"foo[^x]bar", None),  # so does a negated class
    (r"foo.bar", "foo"),  # . does not
    (r"(?s)foo.bar", None),  # unless (?s)
    (r"^foo", None),  # an anchor
    (r"foo\b", None),  # a word boundary
    (r"fo+bar", None),  # the prefix is "f" only: too short
    (r"func\d{2,}x", "func"),
    (r"ab(c|d\n)", None),  # a newline in a branch
    (r"abc[a-z\n]", None),  # a class that holds the newline
    ("caf\u00e9x", "caf"),  # the prefix ends before the first character above ASCII
]


@pytest.mark.parametrize("pattern,want", PREFIXES)
def test_which_patterns_qualify(pattern: str, want: str | None) -> None:
    assert literal_prefix(pattern) == want


def re2_spans(pattern: str, data: bytes, case_sensitive: bool) -> list[tuple[int, int]]:
    options = re2.Options()
    options.case_sensitive = case_sensitive
    return [m.span() for m in re2.compile("(?m)" + pattern, options).finditer(data)]


PATTERNS = [r"sel[ \t]+\*[ \t]+from", r"key\w*=\d+", r"abc.*x", r"abc(d|e)+f?"]
PIECES = [b"sel", b"SEL", b" ", b"\t", b"*", b"from", b"FROM", b"\n", b"key", b"KEY", b"_x", b"=", b"42",
          b"abc", b"d", b"e", b"f", b"x", KELVIN, b"\xc3\xa9"]


def test_a_pattern_only_the_fallback_engine_takes_stays_with_it() -> None:
    """RE2 refuses a repetition above 1000; the fallback engine verifies such a pattern."""
    assert literal_prefix(r"abc\d{1001}") == "abc"
    assert compile_prefixed(r"abc\d{1001}", True) is None


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(PATTERNS), st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join), st.booleans())
def test_matches_are_re2s(pattern: str, data: bytes, case_sensitive: bool) -> None:
    matcher = compile_prefixed(pattern, case_sensitive)
    assert isinstance(matcher, PrefixRegexMatcher)
    want = re2_spans(pattern, data, case_sensitive)
    assert list(matcher.finditer(data)) == want
    assert matcher.search(data) == bool(want)
