"""Trigrams: the unit of the index, shared by the index builder and the query planner.

A trigram is three consecutive bytes of *normalized* text, packed into an int as
``b0 << 16 | b1 << 8 | b2`` (24 bits). The index keeps the case of the text (like Google's
code search), so a case-sensitive query looks up exactly the trigrams it needs and its
candidates are the files that have them in that case (``ErrAbortHandler`` is not a candidate
in a file that only has ``errabort`` and ``handler``).

Normalizing (``normalize``) replaces the two non-ASCII characters whose Unicode case orbit
contains an ASCII letter by that letter: KELVIN SIGN U+212A → ``k`` and LATIN SMALL LETTER LONG
S U+017F → ``s``. RE2's case-insensitive matching treats them as ``k`` and ``s``; with them
normalized, a case-insensitive query for ``kab`` finds its trigram in a text that spells it
with the Kelvin sign. (A case-sensitive ``k`` also finds such a text: a false positive, which
verification removes.)

Query trigrams: a trigram of a case-insensitive term carries *any-case flags* above its 24
bits: bit ``ANY_CASE_SHIFT + i`` set means byte ``i`` (0 = the first, most significant) is an
ASCII letter that may be in either case. `variants` expands such a trigram into the index
trigrams it stands for (at most 8), and a document matches it when it has any of them. The
index itself only ever holds plain 24-bit trigrams.

``fold`` (ASCII lower-casing and the two characters above) is what the indexing rule
``maxTrigramCount`` counts distinct trigrams of (`count_folded`), as before.
"""

from __future__ import annotations

import threading

import numpy as np

try:
    from codesearch.index import _kernels
except ImportError as e:  # a checkout whose C part was never compiled
    raise ImportError(
        "codesearch.index._kernels is not built: `make install` (or `pip install -e .`) compiles "
        "codesearch/index/kernels.c with the machine's C compiler"
    ) from e

_FOLD_TABLE = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_KELVIN = "\u212a".encode()
_LONG_S = "\u017f".encode()

#: Any-case flags of a query trigram start at this bit (one bit per byte, first byte first).
ANY_CASE_SHIFT = 24
_BYTE_MASK = 0xFFFFFF
_LETTERS = frozenset(range(ord("a"), ord("z") + 1)) | frozenset(range(ord("A"), ord("Z") + 1))
_tables = threading.local()


def normalize(data: bytes) -> bytes:
    """The bytes trigrams are taken from: Kelvin sign → ``k``, long s → ``s``, the rest as is."""
    if _KELVIN in data:
        data = data.replace(_KELVIN, b"k")
    if _LONG_S in data:
        data = data.replace(_LONG_S, b"s")
    return data


def fold(data: bytes) -> bytes:
    """`normalize`, then ASCII ``A-Z`` to ``a-z``."""
    return normalize(data).translate(_FOLD_TABLE)


def _seen() -> bytearray:
    """This thread's bit set for `scan` (2 MiB, one bit per trigram id; the kernel leaves it zeroed)."""
    seen: bytearray | None = getattr(_tables, "seen", None)
    if seen is None:
        seen = _tables.seen = bytearray(1 << 21)
    return seen


def scan(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """The distinct trigram ids of `data`'s normalized text (uint32, in order of first
    occurrence) and the offsets where its lines start (uint32; 0 first, none after a final
    newline): one pass of the compiled kernel (`codesearch.index._kernels.scan`)."""
    n = len(data)
    trigrams = np.empty(max(n - 2, 0), dtype=np.uint32)
    lines = np.empty(n + 1, dtype=np.uint32)
    nt, nl = _kernels.scan(data, _seen(), trigrams, lines)
    # copies when the arrays are mostly unused: a document keeps them until its shard is written
    return (trigrams[:nt].copy() if 2 * nt < trigrams.size else trigrams[:nt]), (
        lines[:nl].copy() if 2 * nl < lines.size else lines[:nl]
    )


#: Data up to this long (a path, mostly) is scanned into this thread's scratch arrays.
_SHORT = 4096


def unique_trigrams(data: bytes) -> np.ndarray:
    """The distinct trigram ids of `data`'s normalized text, in order of first occurrence
    (uint32): the index builder's inversion (`_kernels.invert`, a sort by trigram) needs no order.
    Short data (every file's path) is scanned into scratch arrays kept per thread: two arrays
    made for each path cost more than the scan."""
    if len(data) > _SHORT:
        return scan(data)[0]
    scratch: tuple[np.ndarray, np.ndarray] | None = getattr(_tables, "short", None)
    if scratch is None:
        scratch = _tables.short = (np.empty(_SHORT, dtype=np.uint32), np.empty(_SHORT + 1, dtype=np.uint32))
    nt, _ = _kernels.scan(data, _seen(), scratch[0], scratch[1])
    return scratch[0][:nt].copy()


def count_folded(unique: np.ndarray) -> int:
    """How many distinct trigrams the folded text has, from the distinct trigrams of the
    normalized text (`unique_trigrams`): what ``maxTrigramCount`` limits (compiled:
    `_kernels.count_folded`)."""
    return _kernels.count_folded(np.ascontiguousarray(unique, dtype=np.uint32), _seen())


def string_trigrams(text: str | bytes, case_sensitive: bool = True) -> list[int]:
    """Distinct trigram ids of a query literal, in order of first occurrence. Case-insensitive:
    the folded text's trigrams, each ASCII letter with its any-case flag."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if case_sensitive:
        return list(dict.fromkeys(_packed(normalize(data), None)))
    f = fold(data)
    flags = [1 if b in _LETTERS else 0 for b in f]
    return list(dict.fromkeys(_packed(f, flags)))


def trigrams_of(data: bytes, any_case: list[int]) -> list[int]:
    """The trigram ids of `data` (already normalized, letters of any-case positions lower-case),
    with the any-case flag of each byte from `any_case` (1 or 0 per byte)."""
    return _packed(data, any_case)


def _packed(data: bytes, flags: list[int] | None) -> list[int]:
    """Trigram ids of `data`; `flags` (one per byte, or None for none) sets each trigram's any-case bits."""
    out = []
    for i in range(len(data) - 2):
        t = data[i] << 16 | data[i + 1] << 8 | data[i + 2]
        if flags:
            t |= (flags[i] << 2 | flags[i + 1] << 1 | flags[i + 2]) << ANY_CASE_SHIFT
        out.append(t)
    return out


def is_any_case(trigram: int) -> bool:
    return trigram > _BYTE_MASK


def variants(trigram: int) -> list[int]:
    """The index trigrams a query trigram stands for: itself, or every case of its flagged bytes."""
    flags = trigram >> ANY_CASE_SHIFT
    if not flags:
        return [trigram]
    base = trigram & _BYTE_MASK
    out = [base]
    for i in range(3):
        if flags & (4 >> i):
            shift = 16 - 8 * i
            b = (base >> shift) & 0xFF
            if b in _LETTERS:
                other = b ^ 0x20
                out += [t & ~(0xFF << shift) | other << shift for t in out]
    return out


def has_non_ascii(trigram: int) -> bool:
    """True when one of the trigram's bytes is not ASCII."""
    return bool(trigram & 0x808080)


def render(trigram: int) -> str:
    """A trigram as readable text (bytes that are not printable ASCII as \\xNN). A trigram whose
    letters may all be in any case renders as ``abc`` followed by ``i`` outside the quotes
    (see `TrigramQuery.__str__`); single any-case letters inside a mixed one as ``[aA]``."""
    flags = trigram >> ANY_CASE_SHIFT
    out = []
    for i, shift in enumerate((16, 8, 0)):
        b = (trigram >> shift) & 0xFF
        ch = chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}"
        if flags & (4 >> i) and b in _LETTERS and not all_letters_any_case(trigram):
            ch = f"[{chr(b)}{chr(b ^ 0x20)}]"
        out.append(ch)
    return "".join(out)


def all_letters_any_case(trigram: int) -> bool:
    """True when the trigram has letters and every one of them may be in any case."""
    flags = trigram >> ANY_CASE_SHIFT
    letters = [i for i, shift in enumerate((16, 8, 0)) if (trigram >> shift) & 0xFF in _LETTERS]
    return bool(letters) and all(flags & (4 >> i) for i in letters)
