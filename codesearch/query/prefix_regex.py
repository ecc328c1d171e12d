"""Regexes that begin with a literal and stay on one line, verified from their literal's places.

RE2 reads a file at ~0.5 GB/s whatever the pattern; for ``select[\\t\\x20]+\\*[\\t\\x20]+from``
(any case) most candidate files hold the words but not the statement, and a capped search read
31 MB through RE2 to find its 100 matches. Every match of such a pattern starts with its literal
prefix (``select``) and ends before the next newline. So a `PrefixRegexMatcher` finds the prefix
with the `find` kernel (14-19 GB/s) and asks RE2 only for a match that starts there and ends on
that line (`match` over ``[start, end of line]``), and only where the byte after the prefix can
go on a match (`follow_table`): most places of ``select`` are ``selected``, ``selection``,
``select_all``, which a table lookup rules out (31 MB verified: 24.0 → 15.5 ms at 1 GB).

That is exactly RE2's answer when (`prefixed`): the pattern starts with at least `MIN_PREFIX`
literal ASCII characters; nothing in it can match a newline (no ``\\s``, ``\\W``, negated class,
``[^...]``, ``(?s)``); it has no anchor or word boundary (whose meaning at the edge of the range
RE2 is given would depend on the text outside it) and no flag. Then the leftmost match at or
after a position starts at the first occurrence of the prefix there where RE2's anchored match
succeeds, and RE2's leftmost-first choice at that position is the anchored match's.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import re2

from codesearch.index import _kernels
from codesearch.query.literal_set import parse_plain
from codesearch.query.regex import CompiledRegex, compile_regex, has_fold_signs

if TYPE_CHECKING:
    import sre_constants as _c
else:
    from re import _constants as _c

#: Shorter prefixes occur too often for the prefix search to pay.
MIN_PREFIX = 3
#: Places of the prefix in a row where the pattern does not match before RE2 searches on its own.
MAX_MISSES = 8
_NEWLINE_FREE_CATEGORIES = {_c.CATEGORY_DIGIT, _c.CATEGORY_WORD, _c.CATEGORY_NOT_LINEBREAK}


def _one_line(items: Any) -> bool:
    """True when nothing in the parsed sequence can match a newline, an anchor or a boundary."""
    for op, av in items:
        if op is _c.LITERAL:
            if av == 10:
                return False
        elif op is _c.ANY:  # no (?s): checked by the caller
            continue
        elif op is _c.IN:
            for o, v in av:
                if o is _c.LITERAL and v != 10:
                    continue
                if o is _c.RANGE and not v[0] <= 10 <= v[1]:
                    continue
                if o is _c.CATEGORY and v in _NEWLINE_FREE_CATEGORIES:
                    continue
                return False
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
            if not _one_line(av[2]):
                return False
        elif op is _c.SUBPATTERN:
            if av[1] or av[2] or not _one_line(av[3]):
                return False
        elif op is _c.BRANCH:
            if not all(_one_line(b) for b in av[1]):
                return False
        else:  # AT (anchors, boundaries), NOT_LITERAL, GROUPREF, ASSERT, CATEGORY outside a class, ...
            return False
    return True


_ASCII_CLASS = {
    _c.CATEGORY_DIGIT: b"0123456789",
    _c.CATEGORY_WORD: b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz",
    _c.CATEGORY_SPACE: b" \t\n\r\f\v",
}


def _first(items: Any) -> tuple[set[int] | None, bool]:
    """(the bytes a match of the parsed sequence can start with, or None when that could be any
    or is not worked out here; whether the sequence can match the empty string). A superset is
    safe: it only decides where RE2 is asked."""
    out: set[int] = set()
    for op, av in items:
        if op is _c.LITERAL:
            if av > 127:
                return None, False
            out.add(av)
            return out, False
        if op is _c.IN:
            for o, v in av:
                if o is _c.LITERAL and v < 128:
                    out.add(v)
                elif o is _c.RANGE and v[1] < 128:
                    out.update(range(v[0], v[1] + 1))
                elif o is _c.CATEGORY and v in _ASCII_CLASS:
                    out.update(_ASCII_CLASS[v])
                else:  # a negation, a character above ASCII
                    return None, False
            return out, False
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
            lo, _, body = av
            first, empty = _first(body)
            if first is None:
                return None, False
            out |= first
            if lo > 0 and not empty:
                return out, False
            continue
        if op is _c.SUBPATTERN and not (av[1] or av[2]):
            first, empty = _first(av[3])
            if first is None:
                return None, False
            out |= first
            if not empty:
                return out, False
            continue
        if op is _c.BRANCH:
            any_empty = False
            for branch in av[1]:
                first, empty = _first(branch)
                if first is None:
                    return None, False
                out |= first
                any_empty |= empty
            if not any_empty:
                return out, False
            continue
        return None, False  # ., anchors and whatever else: not worked out
    return out, True


def follow_table(pattern: str, case_sensitive: bool) -> bytes | None:
    """For each byte value, 1 when a match of the qualifying `pattern` can have it right after
    its literal prefix, else 0; None when any byte can (or nothing need follow the prefix). Most
    places of a prefix such as ``select`` are words that go on (``selected``, ``selection``):
    this table rules them out without a call to RE2. Without case a letter counts in both cases,
    and every byte above ASCII counts (the Kelvin sign and the long s fold to ``k`` and ``s``)."""
    prefix = literal_prefix(pattern)
    items = parse_plain(pattern)
    if prefix is None or items is None:
        return None
    first, empty = _first(items[len(prefix) :])
    if first is None or empty:
        return None
    table = bytearray(256)
    for b in first:
        table[b] = 1
        if not case_sensitive and chr(b).isalpha():
            table[ord(chr(b).swapcase())] = 1
    if not case_sensitive:
        table[128:] = b"\x01" * 128
    return bytes(table)


@functools.lru_cache(maxsize=512)
def literal_prefix(pattern: str) -> str | None:
    """The literal the pattern starts with, when the pattern qualifies (module docstring)."""
    items = parse_plain(pattern)
    if items is None or not _one_line(items):
        return None
    prefix = []
    for op, av in items:
        if op is not _c.LITERAL or av > 127:
            break
        prefix.append(chr(av))
    return "".join(prefix) if len(prefix) >= MIN_PREFIX else None


class PrefixRegexMatcher:
    """Verifies a qualifying regex from the places of its literal prefix (interface of
    `CompiledRegex`); a case-insensitive prefix with a ``k`` or an ``s`` goes to plain RE2 in a
    text with the Kelvin sign or the long s, which RE2 folds with them."""

    engine = "re2-prefix"

    def __init__(self, pattern: str, prefix: str, plain: CompiledRegex, anchored: re2._Regexp[str]):
        self.pattern = pattern
        case_sensitive = plain.case_sensitive
        self.case_sensitive = case_sensitive
        self._prefix = prefix.encode("ascii")
        self._fold = not case_sensitive
        self._signs = self._fold and any(c in self._prefix for c in b"kKsS")
        self._anchored = anchored
        self._plain = plain
        self._follow = follow_table(pattern, case_sensitive)

    def absent_from(self, data: memoryview | bytes) -> bool:
        """True when the literal prefix, so the pattern, does not occur in `data` (see
        `LiteralMatcher.absent_from`)."""
        return not self._signs and _kernels.find(data, self._prefix, self._fold, 0) < 0

    def _exact(self, data: bytes) -> bool:
        return not (self._signs and has_fold_signs(data))

    def _next(self, data: bytes, pos: int) -> tuple[int, int] | None:
        """The leftmost match at or after `pos`: from the prefix's places while they pay; after
        `MAX_MISSES` places in a row where the pattern does not match, RE2's own search from
        there on (the same leftmost match: see the module docstring). A file full of the prefix
        and short of the pattern (``grpc_\\w+_create`` in gRPC's sources: 3,000 places of
        ``grpc_`` for a few matches, a RE2 call each) costs one scan instead."""
        find, prefix, fold, match = _kernels.find, self._prefix, self._fold, self._anchored.match
        follow, after, size = self._follow, len(self._prefix), len(data)
        at = find(data, prefix, fold, pos)
        misses = 0
        while at >= 0:
            if follow is not None and (at + after >= size or not follow[data[at + after]]):
                at = find(data, prefix, fold, at + 1)  # what follows the prefix rules a match out
                continue
            if misses == MAX_MISSES:
                m = self._anchored.search(data, at)
                return None if m is None else m.span()
            eol = data.find(b"\n", at)
            m = match(data, at, len(data) if eol < 0 else eol)
            if m is not None:
                return m.span()
            misses += 1
            at = find(data, prefix, fold, at + 1)
        return None

    def search(self, data: bytes, deadline: float | None = None) -> bool:
        if not self._exact(data):
            return self._plain.search(data, deadline)
        return self._next(data, 0) is not None

    def finditer(self, data: bytes, deadline: float | None = None) -> Iterator[tuple[int, int]]:
        if not self._exact(data):
            yield from self._plain.finditer(data, deadline)
            return
        pos = 0
        while (span := self._next(data, pos)) is not None:
            yield span
            pos = span[1]


@functools.lru_cache(maxsize=512)
def compile_prefixed(pattern: str, case_sensitive: bool) -> PrefixRegexMatcher | None:
    """A `PrefixRegexMatcher` for `pattern`, or None when it does not qualify."""
    prefix = literal_prefix(pattern)
    if prefix is None:
        return None
    plain = compile_regex(pattern, case_sensitive)
    # a pattern only the fallback engine takes (RE2 refuses {1001}) is verified by the fallback
    return None if plain.re2 is None else PrefixRegexMatcher(pattern, prefix, plain, plain.re2)
