"""Reading a shard: the document table as numpy views, posting lists on demand.

`Shard` wraps a checked, memory-mapped `ShardFile`. Nothing is copied at open except the small
JSON `meta` section; arrays are views into the map. A posting list is deserialized the first
time a query needs it (docs/index-format.md#reading-a-shard: about 4 µs each; eager loading would cost several
times the file size in RAM) and kept in a small per-shard cache.

A `Shard` is shared by every search of its process, concurrently (searchers serve several
queries at once), so it keeps no per-query state: what a query read is counted by the query
(`codesearch.search.evaluate`), never accumulated here.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from pyroaring import BitMap

from codesearch.errors import IndexFormatError
from codesearch.index import _kernels
from codesearch.index.format import ShardFile, branch_words, mask_names, mask_of, symbol_key
from codesearch.index.quadgrams import QuadFilters
from codesearch.index.recency import OID_BYTES, UNKNOWN_OID
from codesearch.index.sources import RepoInfo
from codesearch.index.trigrams import variants

#: byte → its ASCII lower case (other bytes unchanged)
_ASCII_LOWER = np.array([c + 32 if 65 <= c <= 90 else c for c in range(256)], dtype=np.uint8)


class Definitions(NamedTuple):
    """`Shard.definitions`: three arrays of one row per definition."""

    docs: np.ndarray  # the document
    kinds: np.ndarray  # the kind, an index into `Shard.symbol_kinds`
    exact: np.ndarray  # written as searched (not only up to ASCII case)


_NO_DEFINITIONS = Definitions(np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, bool))


@dataclass(frozen=True)
class ShardSymbol:
    name: str
    kind: str
    line: int
    parent: str
    parent_kind: str


#: ctags kinds that name something defined elsewhere (an import, an include), in any language.
REFERENCE_KINDS = frozenset({"unknown", "import", "header", "packageName", "using"})
#: ... and in the languages where "namespace" is an import (in C++ or C# it is a definition).
IMPORT_NAMESPACE_LANGUAGES = frozenset({"Python", "Elm", "Falcon"})


def is_reference(kind: str, language: str) -> bool:
    """True when a ctags symbol of `kind` in a `language` file is not a definition."""
    return kind in REFERENCE_KINDS or (kind == "namespace" and language in IMPORT_NAMESPACE_LANGUAGES)


@functools.lru_cache(maxsize=8192)
def _variants(trigram: int) -> tuple[int, ...]:
    """`trigrams.variants`, kept (at most a few MB): every search expands its trigrams on every
    shard (8 index trigrams for an any-case trigram of letters), and searches repeat trigrams."""
    return tuple(variants(trigram))


@functools.lru_cache(maxsize=1024)
def _expanded(trigrams: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray | None]:
    """The index trigrams to look up for `trigrams` (each any-case one as its `variants`), and
    where each one's variants start (None when there are none: all are exact): a search asks
    every shard about the same trigrams, so they are expanded once, not once per shard."""
    expanded = [_variants(t) for t in trigrams]
    want = np.array([v for vs in expanded for v in vs], dtype=np.uint32)
    if len(want) == len(trigrams):
        return want, None
    groups = np.cumsum([0] + [len(vs) for vs in expanded[:-1]]).astype(np.intp)
    return want, groups


#: The dictionary's bucket table (`TrigramIndex.slots`) has one entry per 2**TABLE_SHIFT trigram
#: ids: 16,384 buckets over the 24-bit trigram space, a few dozen keys each, 64 KB per dictionary.
TABLE_SHIFT = 10


class TrigramIndex:
    """One trigram → posting list dictionary (content or file names) of a shard."""

    def __init__(self, f: ShardFile, prefix: str):
        self._f = f
        self.keys = f.array(f"{prefix}.keys", np.uint32)
        self.card = f.array(f"{prefix}.card", np.uint32)
        self.offs = f.array(f"{prefix}.offs", np.uint64)
        self.post = f.raw(f"{prefix}.post")
        if not (self.keys.size == self.card.size == self.offs.size - 1):
            raise IndexFormatError(f.path, f"{prefix}: dictionary sections disagree in length")
        if self.offs.size and int(self.offs[-1]) > len(self.post):
            raise IndexFormatError(f.path, f"{prefix}: posting offsets point past the posting section")
        self._table = _bucket_table(self.keys)
        self._lookup = functools.lru_cache(maxsize=4096)(self._load)
        self._sizes = functools.lru_cache(maxsize=4096)(self._stored_size)

    def slots(self, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(where each trigram of `want`, uint32 index trigrams, is in the dictionary or -1, its
        posting list's size or 0), by the `slots` kernel: one bucket of the table searched per
        trigram instead of the whole dictionary, whose deep levels miss the cache."""
        where = np.empty(want.size, dtype=np.int64)
        sizes = np.empty(want.size, dtype=np.int64)
        _kernels.slots(self.keys, self.card, self._table, TABLE_SHIFT, want, where, sizes)
        return where, sizes

    def slot(self, trigram: int) -> int:
        """Index of `trigram` in the dictionary, or -1 when absent."""
        return int(self.slots(np.array([trigram], dtype=np.uint32))[0][0])

    def cardinality(self, trigram: int) -> int:
        i = self.slot(trigram)
        return int(self.card[i]) if i >= 0 else 0

    def cardinalities(self, trigrams: Iterable[int]) -> list[int]:
        """Posting list sizes of many query trigrams at once (0 for absent ones), one kernel
        call. An any-case trigram counts the sum over its `variants` (an upper bound of its
        union, good for ordering)."""
        trigrams = tuple(trigrams)
        want, groups = _expanded(trigrams)
        if not self.keys.size or not want.size:
            return [0] * len(trigrams)
        sizes = self.slots(want)[1]
        counts: list[int] = (sizes if groups is None else np.add.reduceat(sizes, groups)).tolist()
        return counts

    def postings(self, trigram: int) -> BitMap:
        """The documents containing `trigram` (for an any-case trigram: any of its variants; an
        empty BitMap when none); do not mutate."""
        return self._lookup(trigram)

    def stored_size(self, trigram: int) -> int:
        """Bytes of `trigram`'s serialized posting lists in the file (0 when absent): what a
        query that uses it reads of the index, whether or not it is cached by now."""
        return self._sizes(trigram)

    def _found(self, trigram: int) -> list[int]:
        """The dictionary slots of `trigram`'s index trigrams (its `variants`) that are there."""
        where = self.slots(np.array(_variants(trigram), dtype=np.uint32))[0]
        return [int(i) for i in where if i >= 0]

    def _stored_size(self, trigram: int) -> int:
        return sum(int(self.offs[i + 1]) - int(self.offs[i]) for i in self._found(trigram))

    def _load(self, trigram: int) -> BitMap:
        found = self._found(trigram)
        if not found:
            return BitMap()
        try:
            # pyroaring reads any buffer (no copy of the mapped file); its stub says bytes
            lists = [BitMap.deserialize(self.post[int(self.offs[i]) : int(self.offs[i + 1])]) for i in found]  # type: ignore[arg-type]
        except Exception:
            raise IndexFormatError(self._f.path, f"corrupt posting list for trigram {trigram:#08x}") from None
        return lists[0] if len(lists) == 1 else BitMap.union(*lists)


def _bucket_table(keys: np.ndarray) -> np.ndarray:
    """table[b] = the first slot of `keys` (sorted) at or above b << TABLE_SHIFT, one entry more
    than there are buckets (the last is the number of keys); buckets reach the largest key."""
    if not keys.size:
        return np.zeros(2, dtype=np.uint32)
    buckets = (int(keys[-1]) >> TABLE_SHIFT) + 1
    starts = np.arange(buckets, dtype=np.uint32) << np.uint32(TABLE_SHIFT)
    table = np.empty(buckets + 1, dtype=np.uint32)
    table[:-1] = keys.searchsorted(starts)
    table[-1] = keys.size
    return table


class Shard:
    """An open shard: repositories, documents, contents, lines, symbols and trigram indexes."""

    def __init__(self, path: str, verify: bool = True):
        f = ShardFile(path, verify=verify)
        self.file = f
        self.path = path
        meta = f.json("meta")
        try:
            self.repos = [RepoInfo.from_json(r) for r in meta["repos"]]
            self.languages: list[str] = list(meta["languages"])
            self.symbol_kinds: list[str] = list(meta["symbolKinds"])
            self.doc_count = int(meta["docCount"])
            #: u64 words of each document's branch mask (format.py: ``doc.brch``)
            self.branch_words = int(meta["branchWords"])
        except (KeyError, TypeError, ValueError) as e:
            raise IndexFormatError(path, f"meta section is incomplete: {e}") from None
        if self.branch_words < 1 or self.branch_words < branch_words(len(r.branches) for r in self.repos):
            raise IndexFormatError(path, f"branchWords {self.branch_words} is too small for the repositories' branches")
        n = self.doc_count
        self.doc_repo = f.array("doc.repo", np.uint32)
        self.doc_lang = f.array("doc.lang", np.uint16)
        self.doc_skip = f.array("doc.skip", np.uint8)
        self.doc_size = f.array("doc.size", np.uint64)
        brch = f.array("doc.brch", np.uint64)
        if brch.size != n * self.branch_words:
            raise IndexFormatError(
                path, f"section 'doc.brch' has {brch.size} words, expected {n} documents x {self.branch_words}"
            )
        #: the documents' branch masks, one row of `branch_words` u64 words each (`branch_bits`)
        self.doc_branches = brch.reshape(n, self.branch_words)
        self.path_offs = f.array("doc.path", np.uint64)
        self.cont_offs = f.array("doc.cont", np.uint64)
        self.line_offs = f.array("doc.line", np.uint64)
        self.sym_offs = f.array("doc.syms", np.uint64)
        #: each document's rank class (`language.rank_class`, with its .gitattributes overrides); None in
        #: shards written before it was recorded (compaction then derives it from the path)
        self.doc_rank = f.array("doc.rank", np.uint8) if f.has("doc.rank") else None
        #: each document's git blob id (20 bytes each) and last commit time (Unix seconds); None in shards
        #: written before they were recorded, 0 / zeros for one unknown (`codesearch.index.recency`)
        self.doc_oid = f.raw("doc.oid") if f.has("doc.oid") else None
        self.doc_time = f.array("doc.time", np.int64) if f.has("doc.time") else None
        if self.doc_oid is not None and len(self.doc_oid) != OID_BYTES * n:
            raise IndexFormatError(path, f"section 'doc.oid' has {len(self.doc_oid)} bytes, expected {OID_BYTES * n}")
        for name, arr, want in (
            ("doc.repo", self.doc_repo, n),
            ("doc.lang", self.doc_lang, n),
            ("doc.skip", self.doc_skip, n),
            ("doc.size", self.doc_size, n),
            ("doc.path", self.path_offs, n + 1),
            ("doc.cont", self.cont_offs, n + 1),
            ("doc.line", self.line_offs, n + 1),
            ("doc.syms", self.sym_offs, n + 1),
            *((("doc.rank", self.doc_rank, n),) if self.doc_rank is not None else ()),
            *((("doc.time", self.doc_time, n),) if self.doc_time is not None else ()),
        ):
            if arr.size != want:
                raise IndexFormatError(path, f"section {name!r} has {arr.size} entries, expected {want}")
        self.paths_blob = f.raw("paths")
        self.content_blob = f.raw("content")
        self.lines = f.array("lines", np.uint32)
        if n and (
            int(self.cont_offs[-1]) > len(self.content_blob)
            or int(self.path_offs[-1]) > len(self.paths_blob)
            or int(self.line_offs[-1]) > self.lines.size
        ):
            raise IndexFormatError(path, "document offsets point past their sections")
        if n and (int(self.doc_repo.max()) >= len(self.repos) or int(self.doc_lang.max()) >= len(self.languages)):
            raise IndexFormatError(path, "document table refers to unknown repositories or languages")
        self.content_index = TrigramIndex(f, "ctg")
        self.quad_filters = QuadFilters(f.array("doc.qflt", np.uint64), f.raw("qfilter"))
        if self.quad_filters.offsets.size != n + 1 or (
            n and int(self.quad_filters.offsets[-1]) > len(f.raw("qfilter"))
        ):
            raise IndexFormatError(path, "quadgram filter offsets disagree with the document table")
        self.name_index = TrigramIndex(f, "ntg")
        self.sym_name = f.raw("sym.name")
        self.sym_noff = f.array("sym.noff", np.uint64)
        self.sym_line = f.array("sym.line", np.uint32)
        self.sym_kind = f.array("sym.kind", np.uint16)
        self.sym_pnam = f.raw("sym.pnam")
        self.sym_poff = f.array("sym.poff", np.uint64)
        self.sym_pknd = f.array("sym.pknd", np.uint16)
        self.sym_lkey = f.array("sym.lkey", np.uint64)
        self.sym_lidx = f.array("sym.lidx", np.uint32)
        if not (self.sym_lkey.size == self.sym_lidx.size == self.sym_line.size):
            raise IndexFormatError(path, "symbol sections disagree in length")
        self._paths: list[str] | None = None
        self._bitmaps: dict[str, BitMap] = {}
        #: Ids of repositories tombstoned in this shard (see `with_dead`).
        self.dead: frozenset[int] = frozenset()

    def docs_where(self, name: str) -> BitMap:
        """Cached document sets that every query may need: "all" (the live documents: those of
        repositories not tombstoned), "default-branch", "has-symbols" (both live only too).

        Shards are immutable, so these are computed once per tombstone set; callers must not
        mutate them.
        """
        bm = self._bitmaps.get(name)
        if bm is None:
            if name == "all":
                if self.dead:
                    dead_idx = [i for i, r in enumerate(self.repos) if r.id in self.dead]
                    bm = BitMap(np.flatnonzero(~np.isin(self.doc_repo, dead_idx)).astype(np.uint32))
                else:
                    bm = BitMap(range(self.doc_count))
            elif name == "default-branch":
                bm = BitMap(np.flatnonzero((self.doc_branches[:, 0] & np.uint64(1)) != 0).astype(np.uint32))
            elif name == "has-symbols":
                bm = BitMap(np.flatnonzero(np.diff(self.sym_offs) > 0).astype(np.uint32))
            else:
                raise KeyError(name)
            if name != "all" and self.dead:
                bm &= self.docs_where("all")
            self._bitmaps[name] = bm
        return bm

    # -- documents -------------------------------------------------------------------------

    @property
    def paths(self) -> list[str]:
        """All document paths, decoded once on first use."""
        if self._paths is None:
            blob = bytes(self.paths_blob)
            offs = self.path_offs.tolist()
            self._paths = [blob[offs[i] : offs[i + 1]].decode("utf-8", "replace") for i in range(self.doc_count)]
        return self._paths

    def doc_path(self, doc: int) -> str:
        return self.paths[doc]

    def content(self, doc: int) -> bytes:
        return self.content_view(doc).tobytes()

    def content_view(self, doc: int) -> memoryview:
        """The document's content where the shard file is mapped, not copied (see `content`)."""
        a, b = int(self.cont_offs[doc]), int(self.cont_offs[doc + 1])
        return self.content_blob[a:b]

    def line_starts(self, doc: int) -> np.ndarray:
        return self.lines[int(self.line_offs[doc]) : int(self.line_offs[doc + 1])]

    def content_id(self, doc: int) -> bytes | None:
        """The git blob id of the document's content (20 bytes), None when unknown."""
        if self.doc_oid is None:
            return None
        oid = bytes(self.doc_oid[OID_BYTES * doc : OID_BYTES * (doc + 1)])
        return None if oid == UNKNOWN_OID else oid

    def commit_time(self, doc: int) -> int:
        """Unix time of the last commit that touched the document's path; 0 when unknown."""
        return int(self.doc_time[doc]) if self.doc_time is not None else 0

    def language(self, doc: int) -> str:
        return self.languages[int(self.doc_lang[doc])]

    def repo(self, doc: int) -> RepoInfo:
        return self.repos[int(self.doc_repo[doc])]

    def branch_bits(self, doc: int) -> int:
        """The document's branch mask: bit i set when its blob is on branch i of its repository."""
        return mask_of(self.doc_branches[doc])

    def branches(self, doc: int) -> list[str]:
        repo = self.repo(doc)
        return mask_names(repo.branches, self.branch_bits(doc))

    def symbol_range(self, doc: int) -> range:
        """Indexes of the document's symbols in the sym.* arrays."""
        return range(int(self.sym_offs[doc]), int(self.sym_offs[doc + 1]))

    def symbol_names(self, doc: int) -> list[bytes]:
        """The document's symbol names as UTF-8 bytes, cheap enough to scan on every candidate."""
        r = self.symbol_range(doc)
        if not r:
            return []
        offs = self.sym_noff[r.start : r.stop + 1].tolist()
        blob = bytes(self.sym_name[offs[0] : offs[-1]])
        base = offs[0]
        return [blob[offs[i] - base : offs[i + 1] - base] for i in range(len(offs) - 1)]

    def symbol_text(self, doc: int) -> bytes:
        """The document's symbol names joined by ``\\n``: one text that a ``sym:`` pattern scans in
        one pass (`codesearch.search.symbol_match`); `symbol_starts` says where each name starts."""
        r = self.symbol_range(doc)
        if not r:
            return b""
        return self._symbol_lines[int(self.sym_noff[r.start]) + r.start : int(self.sym_noff[r.stop]) + r.stop - 1]

    def symbol_starts(self, doc: int) -> np.ndarray:
        """Where each of the document's symbol names starts in its `symbol_text` (name ``k`` ends
        one byte before name ``k + 1`` starts, the last one at the end of the text)."""
        r = self.symbol_range(doc)
        first = self.sym_noff[r.start : r.stop].astype(np.int64) + np.arange(r.start, r.stop, dtype=np.int64)
        return first - first[0] if first.size else first

    @functools.cached_property
    def _symbol_lines(self) -> bytes:
        """Every symbol name of the shard, one per line: symbol ``i`` starts at ``sym_noff[i] + i``.
        Built on the shard's first ``sym:`` search (a few milliseconds), it holds the names once
        more (about 1.5 % of the shard's size) so that `symbol_text` is one slice."""
        n = self.sym_noff.size - 1
        if n <= 0:
            return b""
        names = np.frombuffer(self.sym_name[: int(self.sym_noff[-1])], dtype=np.uint8)
        return np.insert(names, self.sym_noff[1:-1].astype(np.int64), ord("\n")).tobytes()

    def may_define(self, keys: np.ndarray) -> bool:
        """Whether a symbol of the shard has one of `keys` (`symbol_key`s of names): a binary
        search, so that a search for an identifier skips at once the shards that cannot hold a
        definition of it (most of them), before any other work on them."""
        lkey = self.sym_lkey
        if not lkey.size or not keys.size:
            return False
        if keys.size == 1:  # one identifier, the usual search: scalar steps cost less than array ones
            key = keys[0]
            first = int(lkey.searchsorted(key))
            return first < lkey.size and bool(lkey[first] == key)
        at = np.minimum(lkey.searchsorted(keys), lkey.size - 1)
        return bool((lkey[at] == keys).any())

    def _keyed(self, name: bytes) -> np.ndarray:
        """Indexes (into the sym.* arrays) of the symbols whose ``sym.lkey`` is `name`'s: those
        named `name` up to ASCII case (and, rarely, another name of the same key)."""
        key = np.uint64(symbol_key(name))
        lo, hi = int(self.sym_lkey.searchsorted(key, "left")), int(self.sym_lkey.searchsorted(key, "right"))
        keyed: np.ndarray = self.sym_lidx[lo:hi]
        return keyed

    def definitions(self, name: bytes) -> Definitions:
        """The definitions of symbols called `name`, compared ASCII-case-insensitively: per
        definition its document, kind (an index into `symbol_kinds`) and whether it is written
        as `name` is, what ranking needs to verify first. Found by binary search in ``sym.lkey``
        (keys of the lower-cased names), then compared in arrays: a name common in a codebase
        (``RETURN`` in each of Ansible's 8,000 modules) has thousands. Names that ctags reports
        for what is defined elsewhere (imports, includes: `is_reference`) and documents of
        tombstoned repositories do not count."""
        ks = self._keyed(name).astype(np.int64)
        if not ks.size:
            return _NO_DEFINITIONS
        starts = self.sym_noff[ks].astype(np.int64)
        same_length = self.sym_noff[ks + 1].astype(np.int64) - starts == len(name)
        ks, starts = ks[same_length], starts[same_length]
        names = np.frombuffer(self.sym_name, dtype=np.uint8)
        written = names[starts[:, None] + np.arange(len(name), dtype=np.int64)]
        wanted = np.frombuffer(name, dtype=np.uint8)
        same = (_ASCII_LOWER[written] == _ASCII_LOWER[wanted]).all(axis=1)
        docs, kinds = self.sym_doc[ks], self.sym_kind[ks].astype(np.int64)
        keep = same & ~self._reference_kinds[kinds, self.doc_lang[docs].astype(np.int64)]
        if self.dead:
            dead_rows = np.array([r.id in self.dead for r in self.repos], dtype=bool)
            keep &= ~dead_rows[self.doc_repo[docs]]
        return Definitions(docs[keep], kinds[keep], (written == wanted).all(axis=1)[keep])

    @functools.cached_property
    def _reference_kinds(self) -> np.ndarray:
        """`is_reference` as a table: [kind index, language index] → True when not a definition."""
        return np.array(
            [[is_reference(k, lang) for lang in self.languages] for k in self.symbol_kinds], dtype=bool
        ).reshape(len(self.symbol_kinds), len(self.languages))

    def symbols_named(self, name: bytes, doc: int) -> list[int]:
        """Indexes (into the sym.* arrays) of `doc`'s symbols whose name is `name` up to ASCII
        case, in symbol order: a binary search in ``sym.lkey``, not a scan of the document's
        symbols (a large file has thousands)."""
        mine = self.symbol_range(doc)
        ks = self._keyed(name)
        ks = np.sort(ks[(ks >= mine.start) & (ks < mine.stop)]).tolist()
        want = name.lower()
        return [k for k in ks if self.symbol_name(k).lower() == want]

    def symbol_name(self, k: int) -> bytes:
        """The name of symbol `k` (an index into the sym.* arrays) as written, UTF-8 bytes."""
        return bytes(self.sym_name[int(self.sym_noff[k]) : int(self.sym_noff[k + 1])])

    @functools.cached_property
    def sym_doc(self) -> np.ndarray:
        """The document of each symbol (the inverse of `symbol_range`)."""
        return np.repeat(np.arange(self.doc_count, dtype=np.uint32), np.diff(self.sym_offs).astype(np.int64))

    # -- tombstones --------------------------------------------------------------------------

    def with_dead(self, dead: Iterable[int]) -> Shard:
        """This shard as one index version sees it: the repositories (ids) in `dead` are
        tombstoned (re-indexed or removed since the shard was written), their documents are no
        longer part of the index. Shares the file and every cache with `self`."""
        dead = frozenset(int(r) for r in dead) & {r.id for r in self.repos}
        if dead == self.dead:
            return self
        other = copy.copy(self)
        other.dead = dead
        other._bitmaps = {}
        return other

    @property
    def live_repos(self) -> list[RepoInfo]:
        """The repositories of the shard that are not tombstoned."""
        return [r for r in self.repos if r.id not in self.dead] if self.dead else self.repos

    def is_live(self, doc: int) -> bool:
        return not self.dead or self.repos[int(self.doc_repo[doc])].id not in self.dead

    def symbol(self, i: int) -> ShardSymbol:
        """Symbol number `i` of the shard (see `symbol_range`)."""
        name = bytes(self.sym_name[int(self.sym_noff[i]) : int(self.sym_noff[i + 1])]).decode("utf-8", "replace")
        parent = bytes(self.sym_pnam[int(self.sym_poff[i]) : int(self.sym_poff[i + 1])]).decode("utf-8", "replace")
        return ShardSymbol(
            name,
            self.symbol_kinds[int(self.sym_kind[i])],
            int(self.sym_line[i]),
            parent,
            self.symbol_kinds[int(self.sym_pknd[i])],
        )

    def symbols(self, doc: int) -> list[ShardSymbol]:
        return [self.symbol(i) for i in self.symbol_range(doc)]

    def close(self) -> None:
        self.file.close()

    def __repr__(self) -> str:
        return f"Shard({self.path!r}, docs={self.doc_count})"
