"""The compiled build kernels (codesearch/index/kernels.c) against plain-Python oracles.

`scan` is checked against trigrams taken byte by byte from ``bytes.replace``-normalized text and
line starts from the positions of ``\\n``; `invert` against pyroaring building each posting list
from a dict of trigram → documents. Neither oracle shares code with the kernels or with the
numpy code they replaced.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from codesearch.index import _kernels
from codesearch.index.trigrams import scan

KELVIN, LONG_S = "\u212a".encode(), "\u017f".encode()


def oracle_trigrams(data: bytes) -> list[int]:
    text = data.replace(KELVIN, b"k").replace(LONG_S, b"s")
    seen: dict[int, None] = {}
    for i in range(len(text) - 2):
        seen.setdefault(text[i] << 16 | text[i + 1] << 8 | text[i + 2])
    return list(seen)


def oracle_lines(data: bytes) -> list[int]:
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10 and i + 1 < len(data)]
    return starts


SCAN_CASES = [
    ("empty", b""),
    ("one byte", b"a"),
    ("two bytes", b"ab"),
    ("one trigram", b"abc"),
    ("repeats kept once, first occurrence first", b"abcabcabc"),
    ("final newline starts no line", b"a\nb\n"),
    ("empty lines", b"\n\n\n"),
    ("Kelvin sign normalized to k", b"a" + KELVIN + b"b"),
    ("long s normalized to s", LONG_S + b"xy"),
    ("cut Kelvin sign left as is", b"ab\xe2\x84"),
    ("cut long s left as is", b"ab\xc5"),
    ("high bytes", bytes(range(256)) * 2),
    ("NUL-free binary-looking bytes", bytes(random.Random(1).randrange(1, 256) for _ in range(5000))),
]


@pytest.mark.parametrize("name,data", SCAN_CASES, ids=[c[0] for c in SCAN_CASES])
def test_scan_matches_the_oracle(name: str, data: bytes) -> None:
    trigrams, lines = scan(data)
    assert trigrams.tolist() == oracle_trigrams(data)
    assert lines.tolist() == oracle_lines(data)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"a", b"B", b"\n", b"ab", b"abc", KELVIN, LONG_S, b"\xe2", b"\xc5", b"\xff"]), max_size=60
    )
)
def test_scan_property(parts: list[bytes]) -> None:
    data = b"".join(parts)
    trigrams, lines = scan(data)
    assert trigrams.tolist() == oracle_trigrams(data)
    assert lines.tolist() == oracle_lines(data)


def test_scan_leaves_its_bit_set_clear_for_the_next_file() -> None:
    seen = bytearray(1 << 21)
    data = b"the same words in two files"
    for _ in range(2):
        out, lines = np.empty(len(data), np.uint32), np.empty(len(data) + 1, np.uint32)
        nt, _ = _kernels.scan(data, seen, out, lines)
        assert nt == len(oracle_trigrams(data))
        assert not any(seen)


@pytest.mark.parametrize(
    "args,message",
    [
        ((b"abc", bytearray(10), np.empty(1, np.uint32), np.empty(4, np.uint32)), "bit set of 2 MiB"),
        ((b"abcd", bytearray(1 << 21), np.empty(1, np.uint32), np.empty(5, np.uint32)), "too small"),
        ((b"abc", b"\0" * (1 << 21), np.empty(1, np.uint32), np.empty(4, np.uint32)), "writable"),
    ],
    ids=["small bit set", "small output", "read-only bit set"],
)
def test_scan_refuses_bad_buffers(args: tuple, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        _kernels.scan(*args)


def invert(per_doc: list[list[int]]) -> dict[int, BitMap]:
    starts = np.zeros(len(per_doc) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in per_doc], out=starts[1:])
    flat = np.array([t for doc in per_doc for t in doc], dtype=np.uint32)
    keys, card, offs, post = _kernels.invert(flat, starts)
    k, c, o = (np.frombuffer(keys, np.uint32), np.frombuffer(card, np.uint32), np.frombuffer(offs, np.uint64))
    assert k.size == c.size == o.size - 1 and int(o[-1]) == len(post)
    lists = {int(t): BitMap.deserialize(post[int(o[i]) : int(o[i + 1])]) for i, t in enumerate(k)}
    assert [len(lists[int(t)]) for t in k] == c.tolist()
    return lists


def oracle_invert(per_doc: list[list[int]]) -> dict[int, BitMap]:
    out: dict[int, list[int]] = {}
    for d, doc in enumerate(per_doc):
        for t in doc:
            out.setdefault(t, []).append(d)
    return {t: BitMap(docs) for t, docs in sorted(out.items())}


def _random_docs(n_docs: int, vocabulary: int, per_doc: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [rng.sample(range(vocabulary), min(per_doc, vocabulary)) for _ in range(n_docs)]


INVERT_CASES = [
    ("no documents", []),
    ("documents without trigrams", [[], [], []]),
    ("array containers", _random_docs(50, 1000, 30, 1)),
    ("a trigram in every document: a run container", [[7] for _ in range(5000)]),
    ("more than 4096 documents, scattered: bitset containers", _random_docs(9000, 4, 2, 2)),
    ("documents past 65535: several containers", [[1, (1 << 24) - 1]] * 3 + [[] for _ in range(70000)] + [[1]]),
    ("alternating documents: runs lose to arrays", [[5] if d % 2 else [] for d in range(3000)]),
]


@pytest.mark.parametrize("name,per_doc", INVERT_CASES, ids=[c[0] for c in INVERT_CASES])
def test_invert_matches_pyroaring(name: str, per_doc: list[list[int]]) -> None:
    assert invert(per_doc) == oracle_invert(per_doc)


def test_invert_is_no_larger_than_pyroaring_on_real_text() -> None:
    """On real text the containers chosen are CRoaring's own (within a few bytes in all)."""
    text = open(__file__, "rb").read()
    per_doc = [scan(text[i : i + 2000])[0].tolist() for i in range(0, len(text), 500)]
    ours = invert(per_doc)
    theirs = oracle_invert(per_doc)
    assert ours == theirs
    assert sum(len(b.serialize()) for b in ours.values()) <= sum(len(b.serialize()) for b in theirs.values())


@pytest.mark.slow  # over 1 s of the fast lane: `make test` runs it
def test_invert_of_more_pairs_than_a_small_sort_matches_a_numpy_oracle() -> None:
    """Above 2**21 (trigram, document) pairs `invert` takes its two-level path (split by the high
    byte, then a count by the low 16 bits): every key, every count and the documents of sampled
    lists (among them every list long enough for bitset containers) against numpy's lexsort."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(0, 1200, size=4000)
    common = rng.integers(0, 1 << 24, size=40, dtype=np.uint32)  # in thousands of documents
    per_doc = [np.unique(np.concatenate([rng.integers(0, 1 << 24, size=n, dtype=np.uint32),
                                          common[rng.random(40) < 0.8]])) for n in sizes]
    starts = np.zeros(len(per_doc) + 1, dtype=np.int64)
    np.cumsum([t.size for t in per_doc], out=starts[1:])
    flat = np.concatenate(per_doc).astype(np.uint32)
    assert flat.size > 1 << 21
    keys, card, offs, post = _kernels.invert(flat, starts)
    k, c, o = (np.frombuffer(keys, np.uint32), np.frombuffer(card, np.uint32), np.frombuffer(offs, np.uint64))
    doc_of = np.repeat(np.arange(len(per_doc), dtype=np.uint32), np.diff(starts))
    order = np.lexsort((doc_of, flat))
    want_keys, want_card = np.unique(flat, return_counts=True)
    assert k.tolist() == want_keys.tolist() and c.tolist() == want_card.tolist()
    first = np.concatenate([[0], np.cumsum(want_card)])
    sampled = set(rng.choice(k.size, 300, replace=False).tolist()) | {i for i in range(k.size) if c[i] > 4096}
    for i in sampled:
        got = BitMap.deserialize(post[int(o[i]) : int(o[i + 1])])
        assert list(got) == doc_of[order[first[i] : first[i + 1]]].tolist()


def test_invert_refuses_bad_input() -> None:
    with pytest.raises(ValueError, match="does not describe"):
        _kernels.invert(np.array([1, 2], np.uint32), np.array([0, 5], np.int64))
    with pytest.raises(ValueError, match="above 24 bits"):
        _kernels.invert(np.array([1 << 24], np.uint32), np.array([0, 1], np.int64))


# -- literal search: the `find` kernel behind LiteralMatcher, against RE2 -------------------------

PIECES = [b"a", b"A", b"k", b"K", b"s", b"S", b"_", b"\n", b" ", b"ab", b"AB", b"\xc3\xa9", b"\xc3\x89", KELVIN, LONG_S, b"\xff"]


def re2_spans(literal: str, data: bytes, case_sensitive: bool) -> list[tuple[int, int]]:
    import re2

    options = re2.Options()
    options.case_sensitive = case_sensitive
    return [m.span() for m in re2.compile(re2.escape(literal), options).finditer(data)]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES), max_size=80).map(b"".join),
    st.lists(st.sampled_from(["a", "A", "k", "s", "S", "_", "ab", "é", "É", "x"]), min_size=1, max_size=4).map("".join),
    st.booleans(),
)
def test_literal_matches_are_re2s(data: bytes, literal: str, case_sensitive: bool) -> None:
    from codesearch.query.regex import LiteralMatcher

    matcher = LiteralMatcher(literal, case_sensitive)
    want = re2_spans(literal, data, case_sensitive)
    assert list(matcher.finditer(data)) == want
    assert matcher.search(data) == bool(want)


FIND_CASES = [
    # (haystack, needle, fold, start, expected)
    (b"", b"abc", False, 0, -1),
    (b"abc", b"abc", False, 0, 0),
    (b"xxabc", b"abc", False, 3, -1),
    (b"ab", b"abc", False, 0, -1),
    (b"ABC abc", b"abc", True, 0, 0),
    (b"ABC abc", b"abc", True, 1, 4),
    (b"x" * 100 + b"Needle_Z", b"needle_z", True, 0, 100),
    (b"x" * 100 + b"Needle_Z", b"needle_z", False, 0, -1),
    (b"@[`{", b"`{", True, 0, 2),  # | 0x20 makes '@' look like '`': the compare rules it out
    (b"abc", b"", False, 1, 1),
    (b"abc", b"bc", False, 2**63 - 1, -1),  # start + len(needle) would overflow
    (b"abc", b"bc", True, 2**63 - 2, -1),
]


@pytest.mark.parametrize("hay,needle,fold,start,expected", FIND_CASES)
def test_find_table(hay: bytes, needle: bytes, fold: bool, start: int, expected: int) -> None:
    assert _kernels.find(hay, needle, fold, start) == expected


def find_oracle(hay: bytes, needle: bytes, fold: bool, start: int) -> int:
    """bytes.find, on both sides lowered in ASCII only (bytes.lower) when folded: no code of ours."""
    return hay.lower().find(needle.lower(), start) if fold else hay.find(needle, start)


# Few distinct bytes, so that the two bytes `find` scans for together agree often and the whole
# needle is compared at many places; long enough for 16-place blocks and the tail after them.
FIND_BYTES = st.sampled_from([b"a", b"A", b"b", b"B", b"_", b"@", b"`", b"\xff", b"\n"])


@settings(max_examples=500, deadline=None)
@given(
    st.integers(0, 300).flatmap(lambda n: st.lists(FIND_BYTES, min_size=n, max_size=n)).map(b"".join),
    st.data(),
    st.booleans(),
    st.integers(min_value=-2, max_value=310),
)
def test_find_is_bytes_find(hay: bytes, data: st.DataObject, fold: bool, start: int) -> None:
    if hay and data.draw(st.booleans(), label="needle from the text"):  # a needle that is there
        i = data.draw(st.integers(0, len(hay) - 1), label="from")
        needle = hay[i : i + data.draw(st.integers(1, 100), label="length")]  # over 64: the needle is copied to the heap
        needle = needle.swapcase() if data.draw(st.booleans(), label="swap case") else needle
    else:
        needle = data.draw(st.lists(FIND_BYTES, min_size=1, max_size=40).map(b"".join), label="needle")
    assert _kernels.find(hay, needle, fold, start) == find_oracle(hay, needle, fold, max(start, 0))


def test_find_reaches_every_place_of_a_long_text() -> None:
    """A needle at each offset of a text whose length is not a multiple of 16, in both cases."""
    base = bytearray(b"x" * 83)
    for at in range(len(base) - 4):
        hay = bytes(base[:at]) + b"QzRw" + bytes(base[at + 4 :])
        assert _kernels.find(hay, b"QzRw", False, 0) == at
        assert _kernels.find(hay.lower(), b"QZRW", True, 0) == at
        assert _kernels.find(hay, b"QzRw", False, at + 1) == -1


# -- dictionary lookup: the `slots` kernel behind TrigramIndex, against a plain bisection ---------


def slots_oracle(keys: list[int], cards: list[int], want: list[int]) -> tuple[list[int], list[int]]:
    """Each wanted key's position in `keys` and its card, by a dict: no bucket table, no kernel."""
    at = {k: i for i, k in enumerate(keys)}
    return [at.get(w, -1) for w in want], [cards[at[w]] if w in at else 0 for w in want]


# keys of the 24-bit trigram space and a little above it (a table reaches the largest key: 2**32
# would make one of 4 million buckets per example; test_slots_reach_the_largest_key has one)
KEYS = st.one_of(st.integers(0, 1 << 24), st.integers(0, 4096), st.integers(0, 1 << 26))


@settings(max_examples=300, deadline=None)
@given(st.sets(KEYS, max_size=400), st.lists(KEYS, max_size=60), st.data())
def test_slots_are_a_bisections(keys: set[int], want: list[int], data: st.DataObject) -> None:
    from codesearch.index.shard import TABLE_SHIFT, _bucket_table

    ordered = sorted(keys)
    want = want + data.draw(st.lists(st.sampled_from(ordered), max_size=20), label="present") if ordered else want
    cards = [k % 1000 + 1 for k in ordered]
    k = np.array(ordered, dtype=np.uint32)
    slot_out, card_out = np.empty(len(want), np.int64), np.empty(len(want), np.int64)
    _kernels.slots(k, np.array(cards, dtype=np.uint32), _bucket_table(k), TABLE_SHIFT, np.array(want, dtype=np.uint32),
                   slot_out, card_out)
    assert (slot_out.tolist(), card_out.tolist()) == slots_oracle(ordered, cards, want)


def test_slots_refuses_arrays_that_disagree() -> None:
    keys = np.array([1, 2, 3], dtype=np.uint32)
    table = np.array([0, 3], dtype=np.uint32)
    out = np.empty(1, np.int64)
    with pytest.raises(ValueError, match="disagree"):
        _kernels.slots(keys, np.array([1, 2], dtype=np.uint32), table, 10, np.array([2], dtype=np.uint32), out, out)
    with pytest.raises(TypeError, match="writable"):
        _kernels.slots(keys, keys, table, 10, np.array([2], dtype=np.uint32), b"x" * 8, out)


def test_slots_reach_the_largest_key() -> None:
    from codesearch.index.shard import TABLE_SHIFT, _bucket_table

    keys = [0, 7, 1 << 24, (1 << 32) - 1025, (1 << 32) - 2, (1 << 32) - 1]
    want = [*keys, 1, (1 << 32) - 3, 1 << 31]
    k = np.array(keys, dtype=np.uint32)
    slot_out, card_out = np.empty(len(want), np.int64), np.empty(len(want), np.int64)
    cards = list(range(1, len(keys) + 1))
    _kernels.slots(k, np.array(cards, dtype=np.uint32), _bucket_table(k), TABLE_SHIFT, np.array(want, dtype=np.uint32),
                   slot_out, card_out)
    assert (slot_out.tolist(), card_out.tolist()) == slots_oracle(keys, cards, want)
