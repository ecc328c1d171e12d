"""Regexes that start with a literal and stay on one line (codesearch/query/prefix_regex.py):
which qualify, and that their matches are exactly RE2's (a property test over random texts)."""

from __future__ import annotations

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch.query.prefix_regex import PrefixRegexMatcher, compile_prefixed, follow_table, literal_prefix

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
    (r"foo[_[:alpha:]]+bar", None),  # RE2: _ or a letter; Python: the characters _[:alph, then ]
    (r"foo[a[:space:]]bar", None),  # RE2's [:space:] holds the newline
    (r"foo[x[=a=]]", None),
]


@pytest.mark.parametrize("pattern,want", PREFIXES)
def test_which_patterns_qualify(pattern: str, want: str | None) -> None:
    assert literal_prefix(pattern) == want


def re2_spans(pattern: str, data: bytes, case_sensitive: bool) -> list[tuple[int, int]]:
    options = re2.Options()
    options.case_sensitive = case_sensitive
    return [m.span() for m in re2.compile("(?m)" + pattern, options).finditer(data)]


PATTERNS = [r"sel[ \t]+\*[ \t]+from", r"key\w*=\d+", r"abc.*x", r"abc(d|e)+f?", r"abc(?:d|)[x=]", r"key\d{2}|keyx",
            r"abc[D-F]*x"]
PIECES = [b"sel", b"SEL", b" ", b"\t", b"*", b"from", b"FROM", b"\n", b"key", b"KEY", b"_x", b"=", b"42",
          b"abc", b"ABC", b"d", b"D", b"e", b"f", b"x", b"X", KELVIN, b"\xc3\xa9"]

FOLLOWS = [
    # (pattern, case sensitive, the ASCII bytes that may follow its prefix; None: any byte may)
    (r"select[\t\x20]+\*[\t\x20]+from", True, b"\t "),
    (r"grpc_\w+_create", False, b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"),
    (r"func\d{2,}x", True, b"0123456789"),
    (r"abc(d|e)+f?", True, b"de"),
    (r"abc(d|e)+f?", False, b"DEde"),
    (r"key\w*=", True, b"0123456789=ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"),  # \w* may be empty
    (r"foo(?:x|)y", False, b"XYxy"),  # an empty branch lets what comes after the group in
    (r"abc[D-F]*x", False, b"DEFXdefx"),
    (r"abc.*x", True, None),  # . is any byte but the newline: not worth a table
    (r"abcd?", True, None),  # the prefix alone matches
    (r"abc[^x]", True, None),  # a negated class (the pattern does not qualify: a newline)
    (r"abc\u00e9", True, None),  # a character above ASCII
]


@pytest.mark.parametrize("pattern,case_sensitive,want", FOLLOWS)
def test_what_may_follow_the_prefix(pattern: str, case_sensitive: bool, want: bytes | None) -> None:
    table = follow_table(pattern, case_sensitive)
    if want is None:
        assert table is None
        return
    assert table is not None
    assert bytes(b for b in range(128) if table[b]) == want
    # without case, every byte above ASCII may follow: RE2 folds k and s with the Kelvin sign and long s
    assert all(table[128:]) if not case_sensitive else not any(table[128:])


@pytest.mark.parametrize(
    "pattern,data",
    [(r"foo[_[:alpha:]]+bar", b"x fooQbar"), (r"foo[x[:digit:]]{2}", b"foo12"), (r"foo[a[:space:]]bar", b"foo\nbar")],
)
def test_a_posix_class_inside_a_class_is_re2s(pattern: str, data: bytes) -> None:
    """Python reads ``[_[:alpha:]]`` as a set of characters and a literal ``]``; RE2 as ``_`` or
    a letter. Such a pattern is left to RE2 whole, which finds what RE2 finds."""
    from codesearch.search.engine import make_plan
    from codesearch.search.options import SearchOptions

    for case_sensitive in (True, False):
        assert compile_prefixed(pattern, case_sensitive) is None
        leaf = make_plan(pattern, SearchOptions(is_regex=True, case_sensitive=case_sensitive)).root
        want = re2_spans(pattern, data, case_sensitive)
        assert want and list(leaf.regex.finditer(data)) == want, (pattern, case_sensitive)


def test_places_the_next_byte_rules_out_cost_no_re2_call() -> None:
    """``selected`` and ``selection`` hold the prefix of ``select[ \\t]+\\*``; RE2 is asked only
    where a blank follows it."""
    data = b"selected selection select_all\n" * 50 + b"select * from t\n"
    matcher = compile_prefixed(r"select[\t\x20]+\*[\t\x20]+from", False)
    calls = []
    inner = matcher._anchored

    class Counting:
        def match(self, *a):
            calls.append(a[1])
            return inner.match(*a)

        def search(self, *a):
            return inner.search(*a)

    matcher._anchored = Counting()
    assert list(matcher.finditer(data)) == re2_spans(r"select[\t\x20]+\*[\t\x20]+from", data, False)
    assert len(calls) == 1


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


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(PATTERNS),
    st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join),
    st.booleans(),
    st.sampled_from([0, 1, 2]),
)
def test_matches_are_re2s_when_re2_takes_over_after_misses(
    pattern: str, data: bytes, case_sensitive: bool, misses: int
) -> None:
    """After `MAX_MISSES` places of the prefix in a row without a match, RE2 searches on its
    own: the same matches (tried here with 0-2 misses, so that texts of a few pieces switch)."""
    from codesearch.query import prefix_regex

    matcher = compile_prefixed(pattern, case_sensitive)
    saved = prefix_regex.MAX_MISSES
    prefix_regex.MAX_MISSES = misses
    try:
        assert list(matcher.finditer(data)) == re2_spans(pattern, data, case_sensitive)
    finally:
        prefix_regex.MAX_MISSES = saved


def test_a_file_full_of_the_prefix_is_searched_by_re2_after_a_few_misses() -> None:
    """gRPC's sources hold ``grpc_`` thousands of times and ``grpc_\\w+_create`` a few: the
    answer is RE2's, and RE2's anchored match is not asked at each of those places."""
    data = b"".join(b"grpc_call_%d(x);\n" % i for i in range(2000)) + b"grpc_channel_create(a);\n" * 3
    matcher = compile_prefixed(r"grpc_\w+_create", False)
    assert list(matcher.finditer(data)) == re2_spans(r"grpc_\w+_create", data, False)

    calls = []

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def match(self, *a):
            calls.append(a[1])
            return self.inner.match(*a)

        def search(self, *a):
            return self.inner.search(*a)

    matcher._anchored = Counting(matcher._anchored)
    assert len(list(matcher.finditer(data))) == 3
    assert len(calls) < 40, len(calls)
