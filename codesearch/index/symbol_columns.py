"""A shard's symbols as columns, the shape of its ``sym.*`` sections (docs/index-format.md).

A build gets its symbols from ctags as one object per definition (`symbols.Symbol`), and turns
them into columns once, when it writes a shard (`from_symbols`). Compaction used to read every
symbol of the shards it merges back into an object (`Shard.symbol`) only to turn it into columns
again: nearly half of a merge's CPU, 1.5 of 3.2 CPU-s for a shard of 95 MB and 210,670 symbols,
and the name's hash computed again besides. `from_shards` copies each document's run of
symbols column by column instead, with the hashes the shard already holds, so that a merge
writes the same bytes in a tenth of the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from codesearch.index import format as fmt

if TYPE_CHECKING:
    from codesearch.index.shard import Shard, ShardSymbol
    from codesearch.index.symbols import Symbol


class SymbolColumns(NamedTuple):
    """The symbols of a shard's documents, in document order."""

    counts: np.ndarray  # per document, how many of its symbols follow (uint64)
    kinds: list[str]  # the kind table: every kind and parent kind used, sorted
    names: bytes  # the names, UTF-8, one after the other
    name_lengths: np.ndarray  # uint64
    lines: np.ndarray  # uint32, 1-based
    kind: np.ndarray  # uint16, into `kinds`
    parents: bytes  # the parents' names
    parent_lengths: np.ndarray  # uint64
    parent_kind: np.ndarray  # uint16, into `kinds`
    keys: np.ndarray  # uint64: `format.symbol_key` of each name


def from_symbols(syms: Sequence[Sequence[Symbol | ShardSymbol]]) -> SymbolColumns:
    """Columns from one list of symbol objects per document (a build's ctags output)."""
    flat = [s for ss in syms for s in ss]
    kinds = sorted({s.kind for s in flat} | {s.parent_kind for s in flat})
    kind_idx = {k: i for i, k in enumerate(kinds)}
    names = [s.name.encode() for s in flat]
    parents = [s.parent.encode() for s in flat]
    hashed = {n: fmt.symbol_key(n) for n in set(names)}  # a third of a shard's names are distinct
    return SymbolColumns(
        counts=np.array([len(ss) for ss in syms], dtype=np.uint64),
        kinds=kinds,
        names=b"".join(names),
        name_lengths=np.array([len(n) for n in names], dtype=np.uint64),
        lines=np.array([s.line for s in flat], dtype=np.uint32),
        kind=np.array([kind_idx[s.kind] for s in flat], dtype=np.uint16),
        parents=b"".join(parents),
        parent_lengths=np.array([len(n) for n in parents], dtype=np.uint64),
        parent_kind=np.array([kind_idx[s.parent_kind] for s in flat], dtype=np.uint16),
        keys=np.fromiter((hashed[n] for n in names), dtype=np.uint64, count=len(names)),
    )


def from_shards(shards: Sequence[Shard], docs: Sequence[tuple[int, int]]) -> SymbolColumns:
    """Columns of the symbols of `docs`, each ``(index into shards, document of that shard)``,
    copied from the shards' sections (the same bytes `from_symbols` would make of them)."""
    runs = [(si, int(shards[si].sym_offs[d]), int(shards[si].sym_offs[d + 1])) for si, d in docs]
    keys_of: dict[int, np.ndarray] = {}  # per shard, each symbol's key (the shard keeps them sorted)
    used: dict[int, set[int]] = {}
    for si, a, b in runs:
        if b > a:
            s = shards[si]
            used.setdefault(si, set()).update(np.unique(s.sym_kind[a:b]).tolist(), np.unique(s.sym_pknd[a:b]).tolist())
    kinds = sorted({shards[si].symbol_kinds[k] for si, ks in used.items() for k in ks})
    new_idx = {k: i for i, k in enumerate(kinds)}
    remap = {si: np.array([new_idx.get(k, 0) for k in shards[si].symbol_kinds], dtype=np.uint16) for si in used}
    names, parents = [], []
    name_lengths, parent_lengths, lines, kind, parent_kind, keys = [], [], [], [], [], []
    for si, a, b in runs:
        if b == a:
            continue
        s = shards[si]
        if si not in keys_of:
            k = np.empty(s.sym_lkey.size, dtype=np.uint64)
            k[s.sym_lidx] = s.sym_lkey
            keys_of[si] = k
        noff, poff = s.sym_noff, s.sym_poff
        names.append(s.sym_name[int(noff[a]) : int(noff[b])])
        parents.append(s.sym_pnam[int(poff[a]) : int(poff[b])])
        name_lengths.append(np.diff(noff[a : b + 1]))
        parent_lengths.append(np.diff(poff[a : b + 1]))
        lines.append(s.sym_line[a:b])
        kind.append(remap[si][s.sym_kind[a:b]])
        parent_kind.append(remap[si][s.sym_pknd[a:b]])
        keys.append(keys_of[si][a:b])

    def cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.empty(0, dtype=dtype)

    return SymbolColumns(
        counts=np.array([b - a for _, a, b in runs], dtype=np.uint64),
        kinds=kinds,
        names=b"".join(names),
        name_lengths=cat(name_lengths, np.uint64),
        lines=cat(lines, np.uint32),
        kind=cat(kind, np.uint16),
        parents=b"".join(parents),
        parent_lengths=cat(parent_lengths, np.uint64),
        parent_kind=cat(parent_kind, np.uint16),
        keys=cat(keys, np.uint64),
    )


def sections(cols: SymbolColumns) -> dict[str, fmt.Section]:
    """The ``doc.syms`` and ``sym.*`` sections of `cols`."""
    order = np.argsort(cols.keys, kind="stable").astype(np.uint32)
    return {
        "doc.syms": fmt.offsets(cols.counts),
        "sym.name": cols.names,
        "sym.noff": fmt.offsets(cols.name_lengths),
        "sym.line": cols.lines,
        "sym.kind": cols.kind,
        "sym.pnam": cols.parents,
        "sym.poff": fmt.offsets(cols.parent_lengths),
        "sym.pknd": cols.parent_kind,
        "sym.lkey": cols.keys[order],
        "sym.lidx": order,
    }
