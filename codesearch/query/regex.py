"""Compiled regular expressions for verification: RE2 first, a bounded fallback second.

Every content, file-name and symbol pattern runs through `compile_regex`. RE2 (google-re2)
runs in linear time on any input, so it is used whenever it accepts the pattern. Syntax RE2
lacks (look-around, back-references, possessive quantifiers) falls back to the `regex` module
with a time budget per call: the smaller of `FALLBACK_TIMEOUT_S` and what is left before the
search's `deadline` (a `time.monotonic()` instant). A call that runs out raises `RegexTimeout`
instead of hanging the search (ReDoS), so a backtracking pattern over thousands of candidate
files still ends at the search's deadline. The fallback releases the GIL while it matches
(``concurrent=True``), so that the other searches a process runs at the same time keep their
share of the CPU.

Semantics, for both engines: patterns are UTF-8; ``^`` and ``$`` match at line boundaries;
``.`` does not match a newline. Offsets are byte offsets into the UTF-8 text.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass

import re2
import regex as _regex

from codesearch.index import _kernels

_KELVIN = "\u212a".encode()
_LONG_S = "\u017f".encode()

#: Seconds one fallback call (one document) may take before the search gives up on it.
FALLBACK_TIMEOUT_S = 0.5


class RegexError(ValueError):
    """The pattern is not a valid regular expression for either engine.

    `offset` is the 0-based character offset in the pattern where the problem is (the
    unclosed ``(`` or ``[`` of a missing bracket), so that a caller can point at it in the
    text the user typed."""

    def __init__(self, reason: str, offset: int = 0):
        super().__init__(reason)
        self.offset = offset


class RegexTimeout(RuntimeError):
    """A fallback pattern ran out of its time budget on one document."""


def _re2_options(case_sensitive: bool) -> re2.Options:
    o = re2.Options()
    o.log_errors = False
    o.case_sensitive = case_sensitive
    o.max_mem = 64 << 20
    return o


@dataclass(frozen=True)
class CompiledRegex:
    """A compiled pattern with one interface whichever engine runs it."""

    pattern: str
    case_sensitive: bool
    engine: str  # "re2" or "fallback"
    _re2: re2._Regexp[str] | None = None
    _fallback: _regex.Pattern[str] | None = None

    @property
    def re2(self) -> re2._Regexp[str] | None:
        """The compiled RE2 pattern (with multi-line anchors), None on the fallback engine."""
        return self._re2

    def search(self, data: bytes, deadline: float | None = None) -> bool:
        """True when the pattern occurs in `data`."""
        if self._re2 is not None:
            return self._re2.search(data) is not None
        assert self._fallback is not None  # one engine or the other (`compile_regex`)
        text = data.decode("utf-8", "surrogateescape")
        timeout = self._budget(deadline)
        try:
            return self._fallback.search(text, concurrent=True, timeout=timeout) is not None
        except TimeoutError:
            raise RegexTimeout(f"pattern {self.pattern!r} took longer than {timeout:.3g}s") from None

    def absent_from(self, data: memoryview | bytes) -> bool:
        """True when the pattern certainly does not occur in `data` without reading it into
        bytes; a regex cannot say so (False: read it and search)."""
        return False

    def _budget(self, deadline: float | None) -> float:
        """Seconds the next fallback call may take (raises `RegexTimeout` when none are left)."""
        if deadline is None:
            return FALLBACK_TIMEOUT_S
        left = deadline - time.monotonic()
        if left <= 0:
            raise RegexTimeout(f"pattern {self.pattern!r}: the search's deadline passed")
        return min(FALLBACK_TIMEOUT_S, left)

    def finditer(self, data: bytes, deadline: float | None = None) -> Iterator[tuple[int, int]]:
        """Yield ``(start, end)`` byte offsets of the non-overlapping matches in `data`."""
        if self._re2 is not None:
            for m in self._re2.finditer(data):
                yield m.span()
            return
        assert self._fallback is not None  # one engine or the other (`compile_regex`)
        text = data.decode("utf-8", "surrogateescape")
        timeout = self._budget(deadline)
        try:
            spans = [m.span() for m in self._fallback.finditer(text, concurrent=True, timeout=timeout)]
        except TimeoutError:
            raise RegexTimeout(f"pattern {self.pattern!r} took longer than {timeout:.3g}s") from None
        # Character offsets to byte offsets, one pass over the text.
        pos_c = pos_b = 0
        for s, e in spans:
            s_b = pos_b + len(text[pos_c:s].encode("utf-8", "surrogateescape"))
            e_b = s_b + len(text[s:e].encode("utf-8", "surrogateescape"))
            pos_c, pos_b = e, e_b
            yield s_b, e_b


@functools.lru_cache(maxsize=512)
def compile_regex(pattern: str, case_sensitive: bool = True) -> CompiledRegex:
    """Compile `pattern` with multi-line anchors; raise `RegexError` when no engine accepts it."""
    try:
        compiled = re2.compile("(?m)" + pattern, _re2_options(case_sensitive))
        return CompiledRegex(pattern, case_sensitive, "re2", _re2=compiled)
    except re2.error:
        re2_reason = _re2_reason(pattern, case_sensitive)
    flags = _regex.MULTILINE | _regex.V0 | (0 if case_sensitive else _regex.IGNORECASE | _regex.FULLCASE)
    try:
        r = _regex.compile(pattern, flags)
    except _regex.error as e:
        raise RegexError(re2_reason, error_offset(pattern, e)) from None
    except (ValueError, OverflowError, RecursionError):
        raise RegexError(re2_reason) from None
    return CompiledRegex(pattern, case_sensitive, "fallback", _fallback=r)


def has_fold_signs(data: bytes) -> bool:
    """True when `data` holds the Kelvin sign or the long s, which RE2's case folding matches with
    ``k`` and ``s`` and an ASCII fold does not: a case-insensitive search for a text with a ``k`` or
    an ``s`` then needs RE2. Most files are ASCII, which `bytes.isascii` tells in a fraction of
    one scan for either sign."""
    if data.isascii():
        return False
    return _kernels.find(data, _KELVIN, False, 0) >= 0 or _kernels.find(data, _LONG_S, False, 0) >= 0


class LiteralMatcher:
    """A literal substring, found by the compiled `find` kernel where that is exact.

    The kernel (codesearch/index/kernels.c) scans for the literal's two rarest bytes together with
    a vector loop and compares the literal only where both are: 14-19 GB/s on code, against ~1 GB/s
    for ``bytes.find`` and ~0.5 GB/s for lower-casing and finding. Case-sensitive: always the
    kernel. Case-insensitive, for an ASCII literal: the kernel folding ASCII letters, which is
    what RE2's case folding does on such a literal, except that RE2 also matches ``k`` with the
    Kelvin sign and ``s`` with the long s: a literal with a ``k`` or an ``s`` goes to RE2 in a text
    that holds either sign. A non-ASCII literal goes to RE2. Matches are leftmost and
    non-overlapping, as RE2's.
    """

    engine = "literal"

    def __init__(self, text: str, case_sensitive: bool):
        self.pattern = text
        self.case_sensitive = case_sensitive
        raw = text.encode("utf-8")
        self._needle = raw
        self._fold = not case_sensitive
        self._fast = case_sensitive or raw.isascii()
        #: a case-insensitive ASCII literal that RE2 would also match with the Kelvin sign or long s
        self._signs = self._fold and self._fast and any(c in raw for c in b"kKsS")
        self._re2 = compile_regex(re2.escape(text), case_sensitive)

    def _kernel_exact(self, data: bytes) -> bool:
        """True when the kernel finds exactly what RE2 would in `data`."""
        return self._fast and not (self._signs and has_fold_signs(data))

    def absent_from(self, data: memoryview | bytes) -> bool:
        """True when the literal certainly does not occur in `data`, any buffer (a shard's mapped
        content, not copied into bytes): the kernel's answer where it is exact. Most candidates
        of a rare literal hold its trigrams but not the literal; they need not be copied."""
        return self._fast and not self._signs and _kernels.find(data, self._needle, self._fold, 0) < 0

    def search(self, data: bytes, deadline: float | None = None) -> bool:
        if not self._kernel_exact(data):
            return self._re2.search(data)
        return _kernels.find(data, self._needle, self._fold, 0) >= 0

    def finditer(self, data: bytes, deadline: float | None = None) -> Iterator[tuple[int, int]]:
        if not self._kernel_exact(data):
            yield from self._re2.finditer(data)
            return
        n, needle, fold = len(self._needle), self._needle, self._fold
        i = _kernels.find(data, needle, fold, 0)
        while i >= 0:
            yield i, i + n
            i = _kernels.find(data, needle, fold, i + max(n, 1))


@functools.lru_cache(maxsize=512)
def compile_literal(text: str, case_sensitive: bool = True) -> LiteralMatcher:
    """A literal substring as a matcher with the interface of `CompiledRegex`."""
    return LiteralMatcher(text, case_sensitive)


def _re2_reason(pattern: str, case_sensitive: bool) -> str:
    """RE2's complaint about the pattern as the user wrote it (without our ``(?m)`` prefix)."""
    try:
        re2.compile(pattern, _re2_options(case_sensitive))
        return "invalid regular expression"
    except re2.error as e:
        msg = e.args[0] if e.args else str(e)
    if isinstance(msg, bytes):
        msg = msg.decode("utf-8", "replace")
    return f"invalid regular expression: {msg}"


def error_offset(pattern: str, err: _regex.error) -> int:
    """Where in `pattern` the error `err` (of the `regex` module, which reports positions where
    RE2 does not) is, clamped to the pattern. An unclosed group or character class points at its
    opening bracket: the end of the pattern would say nothing about which bracket is open."""
    # types-regex leaves out the position and message that `regex.error` has (as `re.error` does)
    pos = err.pos if isinstance(err.pos, int) else 0  # type: ignore[attr-defined]
    msg = err.msg or ""  # type: ignore[attr-defined]
    if "missing )" in msg:
        opener = _unclosed(pattern, "(")
        if opener is not None:
            return opener
    if "unterminated character set" in msg:
        opener = _unclosed(pattern, "[")
        if opener is not None:
            return opener
    return max(0, min(pos, len(pattern) - 1)) if pattern else 0


def _unclosed(pattern: str, bracket: str) -> int | None:
    """Offset of the last ``(`` left open (or the ``[`` left open) in `pattern`, skipping escaped
    characters and, for ``(``, character classes."""
    stack: list[int] = []
    in_class = -1
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class >= 0:
            if c == "]" and i > in_class + 1 and not (i == in_class + 2 and pattern[in_class + 1] == "^"):
                in_class = -1
        elif c == "[":
            in_class = i
        elif c == "(":
            stack.append(i)
        elif c == ")" and stack:
            stack.pop()
        i += 1
    if bracket == "[":
        return in_class if in_class >= 0 else None
    return stack[-1] if stack else None
