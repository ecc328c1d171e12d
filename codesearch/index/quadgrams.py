"""Quadgram filters: a small Bloom filter per document that sharpens the candidates of literals.

Why: the trigram index keeps the case of the text, so a case-sensitive literal such as
``ErrAbortHandler`` finds the few files that hold ``rAb`` and ``tHa``. A case-insensitive one
(Sourcebot's default) can only ask for each trigram in any case, and every large file that has
``err``, ``abort`` and ``handler`` somewhere qualifies: on the 1 GB corpus 220 candidate files
(59 MB to verify) for 19 matches, against 8 case-sensitively. What tells those files apart are
the grams that cross the word boundaries (``rrab``, ``rtha``), which no trigram holds.

What: each indexed document gets a one-hash Bloom filter of its *folded* quadgrams (normalized
text, ASCII letters lower-cased: `trigrams.fold`), `BITS_PER_TRIGRAM` bits per distinct trigram
of the document (about 3 bits per distinct quadgram on source code: a false positive rate near
30% per quadgram, so a file that lacks three of a literal's quadgrams passes one time in ~40),
more for text with many more quadgrams than trigrams (`filter_for`).
A literal's candidates from the trigram index are then narrowed to the documents whose filter
may hold every folded quadgram of the literal (`select`), in compiled code, before any content
is read. The filter never drops a document that holds the literal, in any case. Quadgrams with
a byte above ASCII are not asked for: RE2 folds non-ASCII letters (``É``/``é``) that the ASCII
fold leaves apart.

On disk: sections ``doc.qflt`` (u64[D+1] offsets) and ``qfilter`` (the filters, concatenated;
an empty filter for a document without indexed content): docs/index-format.md. The bit of a
quadgram ``q`` (its four bytes big-endian) in a filter of ``m`` bits is
``((q * 0x9E3779B1) mod 2^32) * m >> 32`` (codesearch/index/kernels.c).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from pyroaring import BitMap

from codesearch.index import _kernels
from codesearch.index.trigrams import fold

#: Filter bits per distinct trigram of the document (a document has ~1.2-1.5 distinct quadgrams
#: per distinct trigram): the filters cost ~9% of the content they describe.
BITS_PER_TRIGRAM = 4
#: A filter with more of its bits set than this is built again larger (`filter_for`).
MAX_FILL = 0.4
#: The size of a filter built again: bits per distinct quadgram (then about 28 % of its bits set,
#: one hash: a quadgram the document lacks passes a little more than one time in four) ...
BITS_PER_QUADGRAM = 3
#: ... and at most this many bits per byte of content (12.5 % of the content).
MAX_BITS_PER_BYTE = 1


def filter_for(content: bytes, n_trigrams: int) -> bytes:
    """The quadgram filter of one document's content (b"" for content shorter than 4 bytes).

    Sized first by the document's distinct trigrams (`BITS_PER_TRIGRAM`), which is right for
    source code. Text with few trigrams and many quadgrams (hex dumps, tables of numbers, data
    files of a small alphabet: up to 16 times as many) fills that filter up, and a full filter
    lets every quadgram through: at 10 GB, files of 1-2 MB with 20,000-50,000 distinct trigrams
    and up to 97,000 quadgrams were 65-75 % filled, and 87 MB of false candidates of an any-case
    literal went to verification. So a filter more than `MAX_FILL` full is built again at
    `BITS_PER_QUADGRAM` bits per distinct quadgram, their number estimated from the first fill
    (linear counting), at most `MAX_BITS_PER_BYTE` bits per byte of content. The size is all a
    reader needs to know (the bit of a quadgram depends on it): older filters stay valid."""
    if len(content) < 4:
        return b""
    nbytes = max(8, (BITS_PER_TRIGRAM * n_trigrams + 63) // 64 * 8)
    out = bytearray(nbytes)
    _kernels.quad_filter(content, out)
    bits, ones = 8 * nbytes, int.from_bytes(out, "little").bit_count()
    if ones <= MAX_FILL * bits:
        return bytes(out)
    quads = len(content) - 3 if ones == bits else -bits * math.log(1 - ones / bits)
    larger = (min(BITS_PER_QUADGRAM * quads, MAX_BITS_PER_BYTE * len(content)) + 63) // 64 * 8
    if larger <= nbytes:
        return bytes(out)
    out = bytearray(int(larger))
    _kernels.quad_filter(content, out)
    return bytes(out)


def literal_quads(text: str) -> tuple[int, ...]:
    """The distinct folded quadgrams of a literal, as the filters hold them, leaving out those
    with a byte above ASCII."""
    data = fold(text.encode("utf-8"))
    return tuple(
        sorted({int.from_bytes(data[i : i + 4], "big") for i in range(len(data) - 3) if data[i : i + 4].isascii()})
    )


class QuadFilters:
    """The quadgram filters of one shard, read from its mapped sections."""

    def __init__(self, offsets: np.ndarray, filters: memoryview):
        self.offsets = offsets
        self.filters = filters

    def of(self, doc: int) -> memoryview:
        """The filter of one document (compaction copies it into the merged shard)."""
        return self.filters[int(self.offsets[doc]) : int(self.offsets[doc + 1])]

    def select(self, docs: BitMap, quads: tuple[int, ...]) -> BitMap:
        """The documents of `docs` whose filter may hold every quadgram of `quads` (`docs`
        itself when there is nothing to narrow: do not mutate the result). Asked however few the
        candidates: a shard's few may be large files (at 10 GB, 110 shards, an any-case rare
        literal had 1-7 candidates in most shards, 87 MB of them false, which a floor of 8
        candidates let through), and the filter costs less than verifying the smallest file."""
        if not quads or not docs:
            return docs
        cand = np.frombuffer(docs.to_array(), dtype=np.uint32)
        out = np.empty(cand.size, dtype=np.uint32)
        kept = _kernels.quad_select(self.filters, self.offsets, cand, _quad_array(quads), out)
        return BitMap(out[:kept]) if kept else BitMap()


@functools.lru_cache(maxsize=1024)
def _quad_array(quads: tuple[int, ...]) -> np.ndarray:
    """`quads` as the kernel takes them, made once per search (every shard asks for them)."""
    out = np.array(quads, dtype=np.uint32)
    out.flags.writeable = False
    return out
