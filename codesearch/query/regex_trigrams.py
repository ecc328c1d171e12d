"""Trigram queries for regular expressions (Russ Cox, "Regular Expression Matching with a
Trigram Index", as in google/codesearch ``index/regexp.go``).

`regex_query(pattern, case_sensitive)` returns a `TrigramQuery` that every document containing a
match of the pattern satisfies. Documents are represented by the trigram ids of
``normalize(content)`` (exact case). The result over-approximates: when the analysis is unsure it
weakens (``ALL_QUERY`` is always correct); a false negative would lose search results.

The pattern is parsed with Python's ``re._parser`` (RE2 syntax is mostly a subset of Python's).
Syntax Python does not parse (RE2-only syntax such as ``\\pL``, ``\\C``, ``\\z``, ``(?U)``) and
POSIX classes (``[[:alpha:]]``, which Python would misread) give ``ALL_QUERY``.

Each node is summarised by an `_Info` (see its docstring): whether it can match the empty string,
the exact set of strings it matches (when small), or else the sets of prefixes and suffixes of
its non-empty matches, and a query every text containing a match satisfies. Strings in the sets
are Python ``str``; an ASCII letter in a case-insensitive scope becomes its any-case stand-in
(`_any_case`: a private-use character that turns into the letter with its trigram's any-case
flag), and a character whose bytes in the text cannot be predicted -- a non-ASCII character in a
case-insensitive scope, or any letter in a case-insensitive scope of a pattern that runs on the
``regex`` fallback engine (full case folding: ``ss`` matches ``ß``) -- is replaced by `_UNKNOWN`.
Trigrams are only taken from the runs of known characters between unknown ones, so a trigram that
touches an unknown character is never required.

Limits: exact sets hold at most `MAX_EXACT` strings, prefix/suffix sets at most `MAX_SET`
strings (longer ones are trimmed towards 2 characters), character classes of more than
`MAX_CLASS` distinct folded characters count as "any character", and a query never has more
than `MAX_LEAVES` trigram leaves (an OR that grows beyond it becomes ``all``; an AND drops
leaves).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codesearch.index.trigrams import trigrams_of
from codesearch.query.regex import RegexError, compile_regex
from codesearch.query.trigram_query import (
    ALL,
    ALL_QUERY,
    AND,
    NONE,
    NONE_QUERY,
    TrigramQuery,
    and_,
    leaf_and,
    or_,
)

if TYPE_CHECKING:  # typeshed describes Python's regex parser under its older, public names
    import sre_constants as _c
    import sre_parse as _sre_parse
else:  # the same modules, without the deprecation warning of those names
    from re import _constants as _c
    from re import _parser as _sre_parse

#: One item of a parsed pattern: an opcode and its argument, whose shape depends on the opcode.
_Item = tuple["_c._NamedIntConstant", Any]

#: Largest exact set before it is turned into trigrams plus prefix/suffix sets.
MAX_EXACT = 16
#: Largest prefix/suffix set; larger sets are trimmed to shorter strings.
MAX_SET = 20
#: Character classes with more distinct (folded) characters count as any character.
MAX_CLASS = 16
#: Most trigram leaves a query may have.
MAX_LEAVES = 100

#: Stands for one character whose bytes in the text are unknown. A pattern that contains this
#: character itself only loses precision (its trigrams are not required).
_UNKNOWN = "\U0010ffff"

_KELVIN = "\u212a"
_LONG_S = "\u017f"
#: ``chr(_ANY_CASE + ord(c))`` stands for the ASCII letter ``c`` (lower case) in either case.
_ANY_CASE = 0xF0000
#: Syntax that both parsers accept with different meanings: RE2's POSIX classes (Python reads
#: ``[[:alpha:]]`` as a class and a ``]``) and ``x{,n}``/``x{,}`` (a literal for RE2, a
#: repetition for Python).
_DIVERGENT = re.compile(r"\[:\^?[A-Za-z]+:\]|\{,\d*\}")

_MAXREPEAT = _c.MAXREPEAT
_IGNORECASE = _c.SRE_FLAG_IGNORECASE


class _Unsupported(Exception):
    """The analysis does not know this construct: the caller answers ``all``."""


# --------------------------------------------------------------------------------------------
# Queries


def _cap(q: TrigramQuery, limit: int = MAX_LEAVES) -> TrigramQuery:
    """`q` weakened to at most `limit` leaves (dropping AND leaves, or an OR as a whole)."""
    if q.size() <= limit:
        return q
    if q.op != AND:
        return ALL_QUERY
    trigrams = sorted(q.trigrams)[:limit]
    budget = limit - len(trigrams)
    subs = []
    for s in q.subs:
        if budget <= 0:
            break
        s = _cap(s, budget)
        if s.op == ALL:
            continue
        subs.append(s)
        budget -= s.size()
    return _make_and(frozenset(trigrams), tuple(subs))


def _make_and(trigrams: frozenset[int], subs: tuple[TrigramQuery, ...]) -> TrigramQuery:
    if not trigrams and not subs:
        return ALL_QUERY
    if not trigrams and len(subs) == 1:
        return subs[0]
    return TrigramQuery(AND, trigrams, subs)


def _and(a: TrigramQuery, b: TrigramQuery) -> TrigramQuery:
    return _cap(and_(a, b))


def _or(a: TrigramQuery, b: TrigramQuery) -> TrigramQuery:
    """``a OR b``, factoring trigrams common to two ANDs: (C∧A)∨(C∧B) = C∧(A∨B)."""
    if a.op == AND and b.op == AND:
        common = a.trigrams & b.trigrams
        if common:
            ra = _make_and(a.trigrams - common, a.subs)
            rb = _make_and(b.trigrams - common, b.subs)
            return _and(leaf_and(common), _or(ra, rb))
    return _cap(or_(a, b))


@functools.lru_cache(maxsize=8192)
def _str_trigrams(s: str) -> frozenset[int]:
    """Trigrams a text containing `s` certainly has (none that touch an unknown character)."""
    out: set[int] = set()
    for seg in s.split(_UNKNOWN):
        data, flags = bytearray(), []
        for ch in seg:
            if ord(ch) >= _ANY_CASE:
                data.append(ord(ch) - _ANY_CASE)
                flags.append(1)
            else:
                b = ch.encode("utf-8")
                data += b
                flags += [0] * len(b)
        if len(data) >= 3:
            out.update(trigrams_of(bytes(data), flags))
    return frozenset(out)


def _and_trigrams(q: TrigramQuery, strings: frozenset[str] | None) -> TrigramQuery:
    """`q` AND (the OR over `strings` of the AND of each string's trigrams)."""
    if not strings or q.op == NONE:
        return q
    alts = []
    for s in strings:
        ts = _str_trigrams(s)
        if not ts:  # a string without trigrams: the OR is `all`
            return q
        alts.append(ts)
    alt = NONE_QUERY
    for ts in sorted(alts, key=sorted):
        alt = _or(alt, leaf_and(ts))
        if alt.op == ALL:
            return q
    return _and(q, alt)


# --------------------------------------------------------------------------------------------
# Regexp summaries


@dataclass
class _Info:
    """What is known about the strings a regexp node matches.

    * ``can_empty``: the node may match the empty string (then ``match`` is ``all``).
    * ``exact``: when not None, every match is one of these strings.
    * ``prefix``/``suffix`` (only when ``exact`` is None): every *non-empty* match starts with one
      of ``prefix`` and ends with one of ``suffix``.
    * ``match``: a query that every text containing a match satisfies.
    """

    can_empty: bool
    exact: frozenset[str] | None
    prefix: frozenset[str]
    suffix: frozenset[str]
    match: TrigramQuery

    def nonempty_prefixes(self) -> frozenset[str]:
        return self.exact - {""} if self.exact is not None else self.prefix

    def nonempty_suffixes(self) -> frozenset[str]:
        return self.exact - {""} if self.exact is not None else self.suffix

    def add_exact(self) -> None:
        if self.exact is not None:
            self.match = _and_trigrams(self.match, self.exact)

    def simplify(self, force: bool) -> None:
        """Turn a large exact set into trigrams plus prefixes/suffixes; trim large sets."""
        if self.exact is not None:
            min_len = min((len(s) for s in self.exact), default=0)
            if len(self.exact) > MAX_EXACT or min_len >= 4 or (force and min_len >= 3):
                self.add_exact()
                nonempty = [s for s in self.exact if s]
                self.can_empty = "" in self.exact
                self.prefix = frozenset(s[:2] for s in nonempty)
                self.suffix = frozenset(s[-2:] for s in nonempty)
                self.exact = None
        if self.exact is None:
            self.prefix = self._simplify_set(self.prefix, suffix=False)
            self.suffix = self._simplify_set(self.suffix, suffix=True)

    def _simplify_set(self, t: frozenset[str], suffix: bool) -> frozenset[str]:
        # The set's trigrams go into the match query (only sound when no match is empty).
        if not self.can_empty:
            self.match = _and_trigrams(self.match, t)
        n = 3
        while n == 3 or len(t) > MAX_SET:
            if n == 0:  # pragma: no cover - the empty string ends the loop first
                break
            if suffix:
                t = frozenset(s[len(s) - n + 1 :] if len(s) >= n else s for s in t)
            else:
                t = frozenset(s[: n - 1] if len(s) >= n else s for s in t)
            n -= 1
        # Drop strings that a shorter member already accounts for ("ab" makes "abc" useless).
        kept: list[str] = []
        if suffix:
            for s in sorted(t, key=lambda s: s[::-1]):
                if not kept or not s.endswith(kept[-1]):
                    kept.append(s)
        else:
            for s in sorted(t):
                if not kept or not s.startswith(kept[-1]):
                    kept.append(s)
        return frozenset(kept)


def _exact(strings: Iterable[str]) -> _Info:
    ex = frozenset(strings)
    return _Info("" in ex, ex, frozenset(), frozenset(), ALL_QUERY)


def _empty_string() -> _Info:
    return _exact([""])


def _any_char() -> _Info:
    return _Info(False, None, frozenset([""]), frozenset([""]), ALL_QUERY)


def _any_match() -> _Info:
    return _Info(True, None, frozenset([""]), frozenset([""]), ALL_QUERY)


def _cross(a: frozenset[str], b: frozenset[str]) -> frozenset[str]:
    return frozenset(x + y for x in a for y in b)


def _concat(x: _Info, y: _Info) -> _Info:
    match = _and(x.match, y.match)
    can_empty = x.can_empty and y.can_empty
    if x.exact is not None and y.exact is not None:
        xy = _Info(can_empty, _cross(x.exact, y.exact), frozenset(), frozenset(), match)
    else:
        # Prefixes of the non-empty matches m = mx + my.
        if x.exact is not None:
            prefix = _cross(x.exact, y.prefix)
            if y.can_empty:
                prefix |= x.exact - {""}
        else:
            prefix = x.prefix
            if x.can_empty:
                prefix = prefix | y.nonempty_prefixes()
        if y.exact is not None:
            suffix = _cross(x.suffix, y.exact)
            if x.can_empty:
                suffix |= y.exact - {""}
        else:
            suffix = y.suffix
            if y.can_empty:
                suffix = suffix | x.nonempty_suffixes()
        xy = _Info(can_empty, None, prefix, suffix, match)
        # The text around the junction: a suffix of mx followed by a prefix of my.
        if x.exact is None and y.exact is None:
            xs = x.suffix | {""} if x.can_empty else x.suffix
            yp = y.prefix | {""} if y.can_empty else y.prefix
            if len(xs) <= MAX_SET and len(yp) <= MAX_SET:
                xy.match = _and_trigrams(xy.match, _cross(xs, yp))
    xy.simplify(False)
    return xy


def _alternate(x: _Info, y: _Info) -> _Info:
    if x.exact is not None and y.exact is not None:
        xy = _exact(x.exact | y.exact)
        xy.match = _or(x.match, y.match)
    else:
        # An exact side's strings leave the exact set: keep their trigrams in its match query.
        xm = _and_trigrams(x.match, x.exact) if x.exact is not None else x.match
        ym = _and_trigrams(y.match, y.exact) if y.exact is not None else y.match
        xy = _Info(
            x.can_empty or y.can_empty,
            None,
            x.nonempty_prefixes() | y.nonempty_prefixes(),
            x.nonempty_suffixes() | y.nonempty_suffixes(),
            _or(xm, ym),
        )
    xy.simplify(False)
    return xy


def _star_of(x: _Info) -> _Info:
    """Zero or more repetitions of `x`: every non-empty match starts/ends like a non-empty x."""
    info = _Info(True, None, x.nonempty_prefixes(), x.nonempty_suffixes(), ALL_QUERY)
    if not info.prefix or not info.suffix:  # x matches only "" (or nothing)
        return _empty_string()
    info.simplify(False)
    return info


def _char(cp: int, ci: bool, fallback: bool) -> str:
    """One pattern character as the index sees it: itself, its any-case stand-in, or
    `_UNKNOWN` when its bytes in the text cannot be predicted."""
    c = chr(cp)
    if ci and fallback and (cp >= 0x80 or c.isalpha()):
        return _UNKNOWN  # the fallback engine folds fully: "ss" matches "ß", "fi" matches "ﬁ"
    if c in (_KELVIN, _LONG_S):  # the index normalizes them to ASCII (`trigrams.normalize`)
        c = "k" if c == _KELVIN else "s"
        cp = ord(c)
    if cp < 0x80:
        if ci and c.isalpha():
            return chr(_ANY_CASE + ord(c.lower()))
        return c
    if ci or 0xD800 <= cp <= 0xDFFF:
        return _UNKNOWN
    return c


class _Analyzer:
    def __init__(self, fallback: bool):
        self.fallback = fallback

    def seq(self, items: Iterable[_Item], ci: bool) -> _Info:
        info = _empty_string()
        for op, av in items:
            if _is_repeat(op) and av[0] >= 1 and av[1] != 0:
                # x{lo,hi} unrolled into the sequence, so its copies combine with what precedes
                # them (``_\d{3}`` keeps the trigrams ``_00``…``_99``, not just ``000``…).
                lo, hi, p = av
                body = self.seq(p, ci)
                k = min(lo, 3)
                for _ in range(k):
                    info = _concat(info, _copy(body))
                if hi == _MAXREPEAT or hi > k:
                    info = _concat(info, _star_of(_copy(body)))
                continue
            info = _concat(info, self.node(op, av, ci))
        return info

    def node(self, op: _c._NamedIntConstant, av: Any, ci: bool) -> _Info:
        if op is _c.LITERAL:
            return _exact([_char(av, ci, self.fallback)])
        if op is _c.NOT_LITERAL or op is _c.ANY:
            return _any_char()
        if op is _c.IN:
            return self.char_class(av, ci)
        if op is _c.BRANCH:
            alts = av[1]
            info = self.seq(alts[0], ci)
            for alt in alts[1:]:
                info = _alternate(info, self.seq(alt, ci))
            return info
        if op is _c.SUBPATTERN:
            _group, add_flags, del_flags, p = av
            if add_flags & _IGNORECASE:
                ci = True
            if del_flags & _IGNORECASE:
                ci = False
            return self.seq(p, ci)
        if op is getattr(_c, "ATOMIC_GROUP", None):
            return self.seq(av, ci)
        if _is_repeat(op):
            lo, hi, p = av
            return self.repeat(self.seq(p, ci), lo, hi)
        if op is _c.AT or op is _c.ASSERT or op is _c.ASSERT_NOT:
            return _empty_string()
        if op is _c.GROUPREF or op is _c.GROUPREF_EXISTS:
            return _any_match()
        raise _Unsupported(str(op))

    def repeat(self, x: _Info, lo: int, hi: int) -> _Info:
        if hi == 0:
            return _empty_string()
        if lo == 0:
            return _star_of(x)
        # x{lo,hi} = x^k followed by x{lo-k, hi-k}; a few copies keep the junction trigrams.
        k = min(lo, 3)
        info = x
        for _ in range(k - 1):
            info = _concat(info, _copy(x))
        if hi == _MAXREPEAT or hi > k:
            info = _concat(info, _star_of(_copy(x)))
        return info

    def char_class(self, items: Iterable[_Item], ci: bool) -> _Info:
        chars: set[str] = set()
        raw = 0
        for op, av in items:
            if op is _c.LITERAL:
                raw += 1
                chars.add(_char(av, ci, self.fallback))
            elif op is _c.RANGE:
                lo, hi = av
                raw += hi - lo + 1
                if raw > 4 * MAX_CLASS:
                    return _any_char()
                chars.update(_char(cp, ci, self.fallback) for cp in range(lo, hi + 1))
            elif op is _c.CATEGORY and av is _c.CATEGORY_DIGIT and not self.fallback:
                raw += 10  # RE2's \d is ASCII [0-9] (the fallback's is any Unicode digit)
                chars.update("0123456789")
            elif op is _c.NEGATE or op is _c.CATEGORY:
                return _any_char()
            else:
                raise _Unsupported(str(op))
            if len(chars) > MAX_CLASS or raw > 4 * MAX_CLASS:
                return _any_char()
        if not chars:
            return _any_char()
        info = _exact(chars)
        info.simplify(False)
        return info


def _is_repeat(op: _c._NamedIntConstant) -> bool:
    return op in (_c.MAX_REPEAT, _c.MIN_REPEAT) or op is getattr(_c, "POSSESSIVE_REPEAT", None)


def _copy(x: _Info) -> _Info:
    return _Info(x.can_empty, x.exact, x.prefix, x.suffix, x.match)


# --------------------------------------------------------------------------------------------
# Entry point


def regex_query(pattern: str, case_sensitive: bool) -> TrigramQuery:
    """A trigram query that every document containing a match of `pattern` satisfies."""
    if _DIVERGENT.search(pattern):
        return ALL_QUERY
    try:
        fallback = compile_regex(pattern, case_sensitive).engine != "re2"
    except RegexError:
        return ALL_QUERY
    try:
        parsed = _sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError, ValueError, TypeError, Warning):
        return ALL_QUERY
    ci = not case_sensitive or bool(parsed.state.flags & _IGNORECASE)
    try:
        info = _Analyzer(fallback).seq(parsed.data, ci)
        info.simplify(True)
        info.add_exact()
    except (_Unsupported, RecursionError):
        return ALL_QUERY
    return _cap(info.match)
