"""One shard's trigram dictionary looked up once for every query of a batch (`codesearch.search.batch`).

A search alone asks its shard's `TrigramIndex`, for each query trigram, the size of its posting
list (one vectorised lookup per query, expanding each any-case trigram into its up to 8 index
trigrams in Python) and the bytes the list is stored in (the ``indexBytesLoaded`` counter: one
lookup per trigram). Over the 1,000 capped queries of bench/bench_batch.py these small lookups
were a tenth of a read task's CPU, nearly all of it Python's cost per call.

`PostingTable` answers both for every trigram the queries of a block may ask a shard about, from
one vectorised pass: every variant of every trigram expanded with numpy and found in one binary
search of the dictionary, which also finds where each variant's list is stored, so that a list is
decoded (the union of its variants) without looking anything up again, once for all the batch's
queries (`PostingLists`, kept across the blocks of a read task). Its answers are the index's
(`cardinalities`, `stored_size`, `postings`), so the candidates and the counters are the same. A
table lives as long as one block's sweep of its shard.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator

import numpy as np
from pyroaring import BitMap

from codesearch.errors import IndexFormatError
from codesearch.index.shard import TrigramIndex
from codesearch.index.trigrams import ANY_CASE_SHIFT
from codesearch.query import ast
from codesearch.query.planner import ContentLeaf, SymbolLeaf
from codesearch.query.trigram_query import TrigramQuery

#: Decoded posting lists a batch keeps per shard across its blocks (`PostingLists`); past it the
#: shard's lists are dropped and decoded again as needed (the index's own cache keeps 4,096).
LISTS_PER_SHARD = 8192


class PostingLists:
    """The posting lists a batch decoded, per shard's content index, kept across the blocks of the
    batch (a read task's, a `Searcher`'s): query trigram → its list, at most `LISTS_PER_SHARD` per
    index. Keyed weakly: a shard dropped by a reload takes its lists with it."""

    def __init__(self) -> None:
        self._by_index: weakref.WeakKeyDictionary[TrigramIndex, dict[int, BitMap]] = weakref.WeakKeyDictionary()

    def of(self, index: TrigramIndex) -> dict[int, BitMap]:
        lists = self._by_index.get(index)
        if lists is None or len(lists) >= LISTS_PER_SHARD:
            lists = self._by_index[index] = {}
        return lists


class PostingTable:
    """The `TrigramIndex` answers (posting list sizes, stored bytes, the lists) for a set of query
    trigrams, looked up together; any trigram not in the set is asked of the index itself."""

    def __init__(self, index: TrigramIndex, trigrams: Iterable[int], lists: dict[int, BitMap], path: str = ""):
        self.index = index
        #: decoded lists, shared with the other blocks of the batch (`PostingLists.of`)
        self.lists = lists
        self.path = path  # (the shard's: in the error of a corrupt list)
        wanted = np.fromiter(set(trigrams), dtype=np.int64)
        keys = index.keys
        cards = sizes = starts = ends = np.zeros(wanted.size, dtype=np.int64)
        #: the dictionary slots of the variants present, query trigram after query trigram
        self._present: np.ndarray = np.zeros(0, dtype=np.int64)
        if keys.size and wanted.size:
            variants, valid = _variants(wanted)
            flat = variants[valid]
            idx = keys.searchsorted(flat.astype(np.uint32))
            idx_c = np.minimum(idx, keys.size - 1)
            found = (idx < keys.size) & (keys[idx_c] == flat)
            per_variant = np.zeros(variants.shape, dtype=np.int64)
            per_variant[valid] = np.where(found, index.card[idx_c], 0)
            cards = per_variant.sum(axis=1)
            offs = index.offs
            per_variant[valid] = np.where(found, offs[idx_c + 1].astype(np.int64) - offs[idx_c].astype(np.int64), 0)
            sizes = per_variant.sum(axis=1)
            self._present = idx_c[found]
            counts = np.bincount(np.nonzero(valid)[0][found], minlength=wanted.size)  # variants present per trigram
            ends = np.cumsum(counts)
            starts = ends - counts
        listed = wanted.tolist()
        self._cards: dict[int, int] = dict(zip(listed, cards.tolist(), strict=True))
        self._sizes: dict[int, int] = dict(zip(listed, sizes.tolist(), strict=True))
        #: query trigram → where the slots of its variants present are in `_present`
        spans = zip(starts.tolist(), ends.tolist(), strict=True)
        self._slots: dict[int, tuple[int, int]] = dict(zip(listed, spans, strict=True))

    def cardinalities(self, trigrams: Iterable[int]) -> list[int]:
        """`TrigramIndex.cardinalities`."""
        trigrams = list(trigrams)
        try:
            return [self._cards[t] for t in trigrams]
        except KeyError:
            return self.index.cardinalities(trigrams)

    def stored_size(self, trigram: int) -> int:
        """`TrigramIndex.stored_size`."""
        size = self._sizes.get(trigram)
        return size if size is not None else self.index.stored_size(trigram)

    def postings(self, trigram: int) -> BitMap:
        """`TrigramIndex.postings` (do not mutate): decoded from the slots the table found, at most
        once per batch."""
        out = self.lists.get(trigram)
        if out is not None:
            return out
        span = self._slots.get(trigram)
        if span is None:
            return self.index.postings(trigram)
        parts = [self._decode(slot) for slot in self._present[span[0] : span[1]].tolist()]
        out = parts[0] if len(parts) == 1 else BitMap.union(*parts) if parts else BitMap()
        self.lists[trigram] = out
        return out

    def _decode(self, slot: int) -> BitMap:
        index = self.index
        a, b = int(index.offs[slot]), int(index.offs[slot + 1])
        try:
            # pyroaring reads any buffer (no copy of the mapped file); its stub says bytes
            return BitMap.deserialize(index.post[a:b])  # type: ignore[arg-type]
        except Exception:
            trigram = int(index.keys[slot])
            raise IndexFormatError(self.path, f"corrupt posting list for trigram {trigram:#08x}") from None


def _variants(trigrams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`codesearch.index.trigrams.variants` of many query trigrams at once: an array of 8 index
    trigrams per query trigram (every combination of the cases of its any-case letters) and which of
    the 8 are distinct (a combination that would flip a byte that is no any-case letter is not)."""
    base = trigrams & 0xFFFFFF
    flags = trigrams >> ANY_CASE_SHIFT
    letters = np.zeros(trigrams.size, dtype=np.int64)  # the any-case bits of bytes that are ASCII letters
    flips = np.zeros(8, dtype=np.int64)  # what each combination flips (bit 4 >> i: byte i)
    combos = np.arange(8, dtype=np.int64)
    for i, shift in enumerate((16, 8, 0)):
        bit = 4 >> i
        b = (base >> shift) & 0xFF
        letter = ((b >= 65) & (b <= 90)) | ((b >= 97) & (b <= 122))
        letters |= np.where(letter & ((flags & bit) != 0), bit, 0)
        flips |= np.where((combos & bit) != 0, 0x20 << shift, 0)
    variants = base[:, None] ^ flips[None, :]
    valid = (combos[None, :] & ~letters[:, None]) == 0
    return variants, valid


def content_trigrams(root: ast.Node) -> Iterator[int]:
    """Every trigram a plan may look up in a shard's content index (its content and ``sym:`` terms,
    negated ones too): what a `PostingTable` for the plan's queries holds."""
    if isinstance(root, (ContentLeaf, SymbolLeaf)):
        yield from _trigrams(root.trigrams)
    elif isinstance(root, (ast.And, ast.Or)):
        for child in root.children:
            yield from content_trigrams(child)
    elif isinstance(root, ast.Not):
        yield from content_trigrams(root.child)


def _trigrams(q: TrigramQuery) -> Iterator[int]:
    yield from q.trigrams
    for sub in q.subs:
        yield from _trigrams(sub)
