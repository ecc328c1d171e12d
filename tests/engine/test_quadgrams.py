"""Quadgram filters (codesearch/index/quadgrams.py): they never drop a document that holds the
literal, in any case, and they do drop most documents that only hold its words apart.

The oracle is plain Python: RE2-free case-insensitive containment (``casefold`` of ASCII text,
the Kelvin sign and long s spelled out), over documents and literals drawn at random.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from codesearch.index import _kernels
from codesearch.index.quadgrams import BITS_PER_TRIGRAM, QuadFilters, filter_for, literal_quads
from codesearch.index.trigrams import scan

KELVIN, LONG_S = "\u212a", "\u017f"


def filters_of(docs: list[str], make=None) -> QuadFilters:
    """The filters of `docs`, each made by `make` (bytes → filter; default `filter_for`)."""
    make = make or (lambda data: filter_for(data, scan(data)[0].size))
    blobs = [make(text.encode()) for text in docs]
    offsets = np.zeros(len(blobs) + 1, dtype=np.uint64)
    np.cumsum([len(b) for b in blobs], out=offsets[1:])
    return QuadFilters(offsets, memoryview(b"".join(blobs)))


def holds(text: str, literal: str, case_sensitive: bool) -> bool:
    """The oracle: does `text` contain `literal` (ASCII case folded when not case-sensitive, the
    Kelvin sign as k and the long s as s, as RE2 folds them)?"""
    if case_sensitive:
        return literal in text
    norm = {KELVIN: "k", LONG_S: "s"}

    def fold(s: str) -> str:
        return "".join(norm.get(c, c.lower() if c.isascii() else c) for c in s)

    return fold(literal) in fold(text)


WORDS = ["err", "Abort", "handler", "ERR", "abort", "Handler", "x", "_", " ", "\n", "é", "É", KELVIN, LONG_S, "sk"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), max_size=40).map("".join), min_size=1, max_size=30),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map("".join),
    st.booleans(),
)
def test_a_document_holding_the_literal_is_never_dropped(docs: list[str], literal: str, case_sensitive: bool) -> None:
    filters = filters_of(docs)
    kept = filters.select(BitMap(range(len(docs))), literal_quads(literal))
    for d, text in enumerate(docs):
        if holds(text, literal, case_sensitive):
            assert d in kept, (text, literal)


CASES = [
    # (literal, what the other documents hold, how many of them may pass at most)
    ("ErrAbortHandler", "err = abort(); handler(err); Abort the Handler; ERR", 3),
    ("select * from", "select a; * b; from c where selected from", 3),
    ("get_subchannel_refcount", "get subchannel refcount get_ subchannel_ _refcount", 3),
]


@pytest.mark.parametrize("literal,decoy,most", CASES, ids=[c[0] for c in CASES])
def test_documents_with_the_words_apart_are_mostly_dropped(literal: str, decoy: str, most: int) -> None:
    rng = random.Random(7)
    docs = []
    for i in range(40):
        words = decoy.split()
        rng.shuffle(words)
        docs.append(" ".join(words) * 3 + f" filler {i}")
    docs.append("x = " + literal.upper() + ";")
    kept = filters_of(docs).select(BitMap(range(len(docs))), literal_quads(literal))
    assert len(docs) - 1 in kept
    assert len(kept) - 1 <= most


def test_literal_quads_leave_out_non_ascii_and_short_literals() -> None:
    assert literal_quads("abc") == ()
    assert literal_quads("ABCD") == literal_quads("abcd") == (int.from_bytes(b"abcd", "big"),)
    assert literal_quads("caf\u00e9s") == ()  # each of its quadgrams has a byte of é
    assert literal_quads(KELVIN + "abc") == literal_quads("kabc")


def test_even_one_candidate_is_narrowed() -> None:
    """A shard's few candidates may be large files: the filter is asked whatever their number."""
    filters = filters_of(["nothing here"] * 3)
    assert len(filters.select(BitMap([1]), literal_quads("absent literal"))) == 0
    empty = BitMap()
    assert filters.select(empty, literal_quads("absent literal")) is empty


def test_text_of_a_small_alphabet_does_not_fill_its_filter_up() -> None:
    """50 KB of hex digits hold ~4,000 distinct trigrams and ~34,000 quadgrams: a filter sized by
    its trigrams alone (as filters were) is ~90 % full and lets half the decoys through."""
    rng = random.Random(11)
    decoy = " err = abort(); handler(err); the Handler "
    docs = ["".join(rng.choice("0123456789abcdef") for _ in range(50_000)) + decoy for _ in range(40)]
    docs.append(docs[0] + " ErrAbortHandler")

    def trigram_sized(data: bytes) -> bytes:
        out = bytearray(max(8, (BITS_PER_TRIGRAM * scan(data)[0].size + 63) // 64 * 8))
        _kernels.quad_filter(data, out)
        return bytes(out)

    def fill(f: bytes) -> float:
        return int.from_bytes(f, "little").bit_count() / (8 * len(f))

    kept = {}
    for name, make in (("by trigrams", trigram_sized), ("filter_for", None)):
        found = filters_of(docs, make).select(BitMap(range(len(docs))), literal_quads("ErrAbortHandler"))
        assert len(docs) - 1 in found
        kept[name] = len(found) - 1
    assert max(fill(filter_for(t.encode(), scan(t.encode())[0].size)) for t in docs) <= 0.55
    assert kept["by trigrams"] >= 10 and kept["filter_for"] <= kept["by trigrams"] / 2, kept


@pytest.mark.parametrize(
    "query,quads",
    [
        ("sym:ErrAbortHandler", literal_quads("ErrAbortHandler")),  # a name: the filters narrow its files
        ("sym:parse_config", literal_quads("parse_config")),
        ("sym:parse_\\d", ()),  # a regex: no quadgrams of it are certain
        ("sym:^main$", ()),
        ("sym:abc", ()),  # shorter than a quadgram
    ],
)
def test_a_symbol_name_is_narrowed_by_the_filters_of_its_files(query: str, quads: tuple[int, ...]) -> None:
    from codesearch.query.planner import SymbolLeaf
    from codesearch.search.engine import make_plan
    from codesearch.search.options import SearchOptions

    leaf = make_plan(query, SearchOptions()).root
    assert isinstance(leaf, SymbolLeaf) and leaf.quads == quads


def oracle_filter(data: bytes, size: int) -> bytes:
    """A filter of `size` bytes as the format defines it, in plain Python: the text with the
    Kelvin sign as k and the long s as s, ASCII lower-cased; for every four consecutive bytes q
    (big-endian), bit ((q * 0x9E3779B1) mod 2**32) * (8 * size) >> 32."""
    text = data.replace(b"\xe2\x84\xaa", b"k").replace(b"\xc5\xbf", b"s").lower()
    bits = 0
    for i in range(len(text) - 3):
        q = int.from_bytes(text[i : i + 4], "big")
        bits |= 1 << (((q * 0x9E3779B1) % (1 << 32)) * (8 * size) >> 32)
    return bits.to_bytes(size, "little")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([b"a", b"B", b"Zz", b"\n", b"abcd", b"\xe2\x84\xaa", b"\xc5\xbf", b"\xe2", b"\xe2\x84",
                              b"\xc5", b"\xff", b"@[`{"]), max_size=80).map(b"".join),
    st.integers(1, 64),
)
def test_the_compiled_filter_sets_the_bits_the_format_defines(data: bytes, size: int) -> None:
    """`_kernels.quad_filter` against the definition, over texts of letters of both cases, the two
    normalized characters, their cut forms and other bytes."""
    out = bytearray(size)
    _kernels.quad_filter(data, out)
    assert bytes(out) == oracle_filter(data, size)
