"""Trigrams: the unit of the index, shared by the index builder and the query planner.

A trigram is three consecutive bytes of *folded* text, packed into an int as
``b0 << 16 | b1 << 8 | b2`` (24 bits). Folding is what makes one index serve case-sensitive
and case-insensitive queries (ENGINEERING.md §2.6): the index holds folded trigrams, a query
looks up the folded trigrams of its literals, and verification checks the exact case.

Folding (``fold``):
  * ASCII ``A-Z`` become ``a-z``;
  * the two non-ASCII characters whose Unicode case orbit contains an ASCII letter are replaced
    by that letter: KELVIN SIGN U+212A → ``k`` and LATIN SMALL LETTER LONG S U+017F → ``s``.
    RE2's case-insensitive matching treats them as ``k`` and ``s``; without this, ``(?i)kab``
    could match text that the index says cannot match.

Postings are per document, not per position, so folding may change the length of the text.
The same ``fold`` is applied to queries, so a literal that occurs in a document always yields
trigrams that the document's posting lists contain. For case-insensitive queries the planner
also drops trigrams that contain non-ASCII bytes (their other cases are different bytes).
"""

from __future__ import annotations

import numpy as np

_FOLD_TABLE = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_KELVIN = "\u212a".encode()
_LONG_S = "\u017f".encode()


def fold(data: bytes) -> bytes:
    """Fold bytes for trigram extraction (see the module docstring)."""
    if _KELVIN in data:
        data = data.replace(_KELVIN, b"k")
    if _LONG_S in data:
        data = data.replace(_LONG_S, b"s")
    return data.translate(_FOLD_TABLE)


def trigram_array(folded: bytes) -> np.ndarray:
    """All trigram ids of folded bytes, in text order, with repeats (uint32).

    Reads the text as overlapping big-endian 4-byte words (a strided view, no copy) and drops
    the last byte of each: one vectorised pass instead of three shifts and ors.
    """
    n = len(folded)
    if n < 3:
        return np.empty(0, dtype=np.uint32)
    words = np.ndarray(shape=(n - 2,), dtype=">u4", buffer=folded + b"\0", strides=(1,))
    return (words >> np.uint32(8)).astype(np.uint32, copy=False)


def unique_trigrams(folded: bytes) -> np.ndarray:
    """The distinct trigram ids of folded bytes, sorted (uint32)."""
    t = trigram_array(folded)
    if t.size == 0:
        return t
    t.sort()
    keep = np.empty(t.size, dtype=bool)
    keep[0] = True
    np.not_equal(t[1:], t[:-1], out=keep[1:])
    return t[keep]


def string_trigrams(text: str | bytes) -> list[int]:
    """Distinct trigram ids of a query literal, in order of first occurrence."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    f = fold(data)
    seen: dict[int, None] = {}
    for i in range(len(f) - 2):
        seen.setdefault(f[i] << 16 | f[i + 1] << 8 | f[i + 2], None)
    return list(seen)


def has_non_ascii(trigram: int) -> bool:
    """True when one of the trigram's bytes is not ASCII."""
    return bool(trigram & 0x808080)


def render(trigram: int) -> str:
    """A trigram as readable text (bytes that are not printable ASCII as \\xNN)."""
    out = []
    for shift in (16, 8, 0):
        b = (trigram >> shift) & 0xFF
        out.append(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}")
    return "".join(out)
