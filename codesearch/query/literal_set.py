"""Regexes that are a small set of literals, matched by the compiled literal search.

A regex such as ``(TODO|FIXME|XXX):`` matches exactly the strings ``TODO:``, ``FIXME:`` and
``XXX:``. RE2 has no multi-literal prefilter and reads such a pattern at ~0.5 GB/s; the `find`
kernel (codesearch/index/kernels.c) finds each literal at 14-19 GB/s. So a regex that is only
literals, groups and alternations (and character classes of a few literal characters), with no
anchor, flag, repetition or escape class, is expanded into its strings (`literal_set`), and a
`LiteralSetMatcher` verifies it: the leftmost occurrence of any of the strings, then the next one
after it.

That equals RE2's leftmost-first semantics when no string is a prefix of another (checked on the
case-folded strings for a case-insensitive search): at any position at most one of them can match,
so which alternative RE2 would prefer never matters. A set that is not prefix-free, or larger than
`MAX_STRINGS`, stays with RE2.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from codesearch.index import _kernels
from codesearch.query.regex import CompiledRegex, compile_regex, has_fold_signs

if TYPE_CHECKING:
    import sre_constants as _c
    import sre_parse as _sre_parse
else:
    from re import _constants as _c
    from re import _parser as _sre_parse

#: Expansions with more strings than this stay with RE2 (each string is one pass of the kernel).
MAX_STRINGS = 16


def _expand(items: Any) -> list[str] | None:
    """The strings a parsed sequence matches, or None when it is not a plain set of literals."""
    out = [""]
    for op, av in items:
        if op is _c.LITERAL:
            choices = [chr(av)]
        elif op is _c.IN and all(o is _c.LITERAL for o, _ in av):
            choices = [chr(v) for _, v in av]
        elif op is _c.SUBPATTERN and av[1] == 0 and av[2] == 0:  # a group without flags
            sub = _expand(av[3])
            if sub is None:
                return None
            choices = sub
        elif op is _c.BRANCH:
            choices = []
            for branch in av[1]:
                sub = _expand(branch)
                if sub is None:
                    return None
                choices += sub
        else:
            return None
        out = [a + b for a in out for b in choices]
        if len(out) > MAX_STRINGS:
            return None
    return out


#: ``[:``, ``[=`` or ``[.``: in RE2 a POSIX class (``[_[:alpha:]]`` is ``_`` or a letter), in
#: Python a ``[`` among the class's characters (``_[:alph`` and then a literal ``]``). Python
#: warns only when the class starts with it (``[[:upper:]]``).
_POSIX_CLASS = re.compile(r"\[[:=.]")


def parse_plain(pattern: str) -> list[tuple[Any, Any]] | None:
    """The items of `pattern` as Python's regex parser reads them (ASCII classes), or None when
    it cannot read it, warns about it (a "possible nested set" such as ``[[:upper:]]``), may hold
    a POSIX class that RE2 reads otherwise (`_POSIX_CLASS`: ``[_[:alpha:]]``), or sets a global
    flag such as ``(?i)`` or ``(?s)``."""
    if _POSIX_CLASS.search(pattern):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            parsed = _sre_parse.parse(pattern, re.ASCII)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError, Warning):
        return None
    if parsed.state.flags & ~(re.ASCII | re.UNICODE):
        return None
    return list(parsed.data)


@functools.lru_cache(maxsize=512)
def literal_set(pattern: str, case_sensitive: bool) -> tuple[str, ...] | None:
    """The strings `pattern` matches when it is a prefix-free set of ASCII literals (see the module
    docstring), in pattern order; None otherwise."""
    items = parse_plain(pattern)
    if items is None:
        return None
    strings = _expand(items)
    if not strings or any(not s or not s.isascii() for s in strings):
        return None
    strings = list(dict.fromkeys(strings))
    keys = strings if case_sensitive else [s.lower() for s in strings]
    if len(set(keys)) < len(keys):  # two spellings of one string without case: RE2 decides which
        return None
    for a in keys:
        if any(b != a and b.startswith(a) for b in keys):
            return None
    return tuple(strings)


class LiteralSetMatcher:
    """Verifies a regex that is a prefix-free set of literals with the `find` kernel, with the
    interface of `CompiledRegex`. Like `LiteralMatcher`, a case-insensitive set with a ``k`` or an
    ``s`` goes to RE2 in a text that holds the Kelvin sign or the long s (RE2 folds them)."""

    engine = "literal-set"

    def __init__(self, pattern: str, strings: tuple[str, ...], case_sensitive: bool):
        self.pattern = pattern
        self.case_sensitive = case_sensitive
        self._needles = [s.encode("ascii") for s in strings]
        self._fold = not case_sensitive
        self._signs = self._fold and any(c in n for n in self._needles for c in b"kKsS")
        self._re2: CompiledRegex = compile_regex(pattern, case_sensitive)

    def _kernel_exact(self, data: bytes) -> bool:
        return not (self._signs and has_fold_signs(data))

    def absent_from(self, data: memoryview | bytes) -> bool:
        """True when no literal of the set occurs in `data` (see `LiteralMatcher.absent_from`)."""
        return not self._signs and all(_kernels.find(data, n, self._fold, 0) < 0 for n in self._needles)

    def search(self, data: bytes, deadline: float | None = None) -> bool:
        if not self._kernel_exact(data):
            return self._re2.search(data, deadline)
        return any(_kernels.find(data, n, self._fold, 0) >= 0 for n in self._needles)

    def finditer(self, data: bytes, deadline: float | None = None) -> Iterator[tuple[int, int]]:
        if not self._kernel_exact(data):
            yield from self._re2.finditer(data, deadline)
            return
        fold, needles = self._fold, self._needles
        nxt = [_kernels.find(data, n, fold, 0) for n in needles]
        while True:
            live = [(at, i) for i, at in enumerate(nxt) if at >= 0]
            if not live:
                return
            at, i = min(live)
            end = at + len(needles[i])
            yield at, end
            for j, pos in enumerate(nxt):
                if 0 <= pos < end:
                    nxt[j] = _kernels.find(data, needles[j], fold, end)


@functools.lru_cache(maxsize=512)
def compile_literal_set(pattern: str, case_sensitive: bool) -> LiteralSetMatcher | None:
    """A `LiteralSetMatcher` for `pattern`, or None when it is not a prefix-free literal set."""
    strings = literal_set(pattern, case_sensitive)
    return None if strings is None else LiteralSetMatcher(pattern, strings, case_sensitive)
