"""Compaction: many small shards become a few compound ones, and tombstoned documents go.

Indexing writes the shards of one repository at a time (`builder.index_source`), so an index of
a thousand small repositories starts as a thousand small shards, and every search would pay a
thousand times the fixed cost of a shard. Re-indexing a repository tombstones its old documents
instead of rewriting the shards they share with other repositories (`manifest.swap_repo`). This
module cleans up after both, in the background, the way Zoekt merges small repositories into
compound shards:

* `plan` picks groups of shards to merge: shards holding less than `small_fraction` of a full
  shard's content, and shards whose documents are more than `dead_fraction` tombstoned (by
  content bytes), grouped in file-name order up to `target_bytes` of live content per group. A
  group of one shard is rewritten only when it has tombstones to drop.
* `merge` reads the live documents of a group (contents, paths, lines, branches, languages,
  symbols: everything but the trigrams, which are computed again from the contents), writes them
  as new shards of at most `target_bytes` (`builder.write_docs`, documents ordered as the builder
  orders them) and swaps them in with `manifest.replace_shards`: atomically, and refused when a
  source left the index meanwhile; repositories tombstoned meanwhile stay tombstoned.
* `compact` plans and merges until nothing is left to do.

The answers of the index are the same before and after (tests check it against the oracle).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from codesearch.errors import IndexFormatError
from codesearch.index import format as fmt
from codesearch.index import manifest, symbol_columns
from codesearch.index.builder import INDEXED, BuildDoc, IndexSettings, even_share, with_repo, write_docs
from codesearch.index.language import rank_class
from codesearch.index.recency import UNKNOWN_OID, blob_id
from codesearch.index.shard import Shard
from codesearch.index.sources import RepoInfo
from codesearch.index.trigrams import unique_trigrams

if TYPE_CHECKING:  # parallel imports the builder, as this module does: no cycle at run time
    from codesearch.index.parallel import Pool

log = logging.getLogger(__name__)

#: A shard with less live content than this fraction of a full one is merged with others.
SMALL_FRACTION = 0.5
#: A shard with more of its content tombstoned than this is rewritten.
DEAD_FRACTION = 0.25


@dataclass
class CompactionStats:
    merged_shards: int = 0
    written_shards: int = 0
    live_bytes: int = 0
    dropped_bytes: int = 0
    refused: int = 0
    written: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _ShardFacts:
    name: str
    content_bytes: int
    live_bytes: int


def _facts(entry: manifest.IndexedShard) -> _ShardFacts | None:
    try:
        shard = Shard(entry.path, verify=False).with_dead(entry.dead)
    except IndexFormatError as e:
        log.error("compaction skips %s", e)
        return None
    try:
        offs = shard.cont_offs
        total = int(offs[-1]) if shard.doc_count else 0
        if shard.dead:
            live = shard.docs_where("all")
            sizes = np.diff(offs.astype(np.int64))
            live_bytes = int(sizes[np.fromiter(live, dtype=np.int64, count=len(live))].sum()) if live else 0
        else:
            live_bytes = total
        return _ShardFacts(os.path.basename(entry.path), total, live_bytes)
    finally:
        shard.close()


#: Per index directory: the facts of its shards at the last `plan`, by (file, tombstones, file
#: identity). A shard file never changes once written (a merge writes new files), so a compactor
#: polling an index that does not change opens no shard: at 116 shards, opening every one to
#: plan cost 3 % of a core, all the time.
_KNOWN_FACTS: dict[str, dict[tuple[object, ...], _ShardFacts | None]] = {}


def _known_facts(
    entry: manifest.IndexedShard,
    known: dict[tuple[object, ...], _ShardFacts | None],
    keep: dict[tuple[object, ...], _ShardFacts | None],
) -> _ShardFacts | None:
    """`_facts(entry)`, from `known` when the same file with the same tombstones was planned
    before; what is returned is kept in `keep` for the next plan."""
    try:
        st = os.stat(entry.path)
    except OSError:
        return _facts(entry)  # (gone: `_facts` says why, and nothing is kept)
    key = (entry.path, entry.dead, st.st_ino, st.st_size, st.st_mtime_ns)
    f = known[key] if key in known else _facts(entry)
    if f is not None:
        keep[key] = f
    return f


def plan(
    index_dir: str, target_bytes: int, small_fraction: float = SMALL_FRACTION, dead_fraction: float = DEAD_FRACTION
) -> list[list[str]]:
    """Groups of shard file names to merge (see the module docstring)."""
    groups: list[list[str]] = []
    current: list[str] = []
    size = 0
    entries = manifest.current_index(index_dir)
    has_dead = {os.path.basename(e.path) for e in entries if e.dead}
    known = _KNOWN_FACTS.get(index_dir, {})
    keep = _KNOWN_FACTS[index_dir] = {}  # (only the shards of this plan: the table never outgrows the index)
    for entry in entries:
        f = _known_facts(entry, known, keep)
        if f is None:
            continue
        small = f.live_bytes < small_fraction * target_bytes
        dead = f.content_bytes and (f.content_bytes - f.live_bytes) > dead_fraction * f.content_bytes
        if not (small or dead):
            continue
        if current and size + f.live_bytes > target_bytes:
            groups.append(current)
            current, size = [], 0
        current.append(f.name)
        size += f.live_bytes
        if dead and not small:  # a big shard with tombstones: rewritten on its own
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    return [g for g in groups if len(g) > 1 or g[0] in has_dead]


def merge(
    index_dir: str, names: list[str], settings: IndexSettings | None = None, stats: CompactionStats | None = None
) -> bool:
    """Merge the shards `names` of `index_dir` into new shards of their live documents; returns
    False when the manifest refused the swap (a source left the index meanwhile)."""
    settings = settings or IndexSettings()
    stats = stats or CompactionStats()
    entries = {os.path.basename(e.path): e for e in manifest.current_index(index_dir)}
    if any(n not in entries for n in names):
        stats.refused += 1
        return False
    repos: list[RepoInfo] = []
    repo_index: dict[int, int] = {}
    docs: list[BuildDoc] = []
    sources: list[tuple[int, int]] = []  # each document's (shard, document in it): where its symbols are
    shards = [Shard(entries[n].path).with_dead(entries[n].dead) for n in names]
    try:
        dropped = 0
        for si, shard in enumerate(shards):
            live = 0
            for d in shard.docs_where("all"):
                repo = shard.repo(d)
                if repo.id not in repo_index:
                    repo_index[repo.id] = len(repos)
                    repos.append(repo)
                docs.append(_read_doc(shard, d, repo_index[repo.id]))
                sources.append((si, d))
                live += len(docs[-1].content)
            dropped += (int(shard.cont_offs[-1]) if shard.doc_count else 0) - live
        generation = manifest.next_generation(index_dir)
        built_dir = os.path.join(index_dir, f".compact-{generation}")
        os.makedirs(built_dir, exist_ok=True)
        try:
            built, repos_of = _write_groups(
                built_dir, generation, repos, docs, shards, sources, settings.shard_max_bytes
            )
        except BaseException:  # a full disk (`DiskFull`): the shards written so far go, the index stays as it was
            shutil.rmtree(built_dir, ignore_errors=True)
            raise
    finally:
        for shard in shards:
            shard.close()
    ok = manifest.replace_shards(index_dir, {n: entries[n].dead for n in names}, built, repos_of)
    shutil.rmtree(built_dir, ignore_errors=True)
    if ok:
        stats.dropped_bytes += dropped
        stats.merged_shards += len(names)
        stats.written_shards += len(built)
        stats.live_bytes += sum(len(d.content) for d in docs)
        stats.written.extend(os.path.basename(p) for p in built)
    else:
        stats.refused += 1
    return ok


def _read_doc(shard: Shard, d: int, repo: int) -> BuildDoc:
    """One live document of `shard` as the builder holds it (trigrams computed from the content)."""
    path = shard.doc_path(d)
    content = shard.content(d)
    skip = int(shard.doc_skip[d])
    trigrams = unique_trigrams(content) if skip == INDEXED else np.empty(0, dtype=np.uint32)
    return BuildDoc(
        path=path,
        size=int(shard.doc_size[d]),
        mask=shard.branch_bits(d),
        skip=skip,
        language=shard.language(d),
        content=content,
        trigrams=trigrams,
        name_trigrams=unique_trigrams(path.encode("utf-8", "replace")),
        lines=np.array(shard.line_starts(d), dtype=np.uint32),
        rank=int(shard.doc_rank[d]) if shard.doc_rank is not None else rank_class(path),
        repo=repo,
        qfilter=bytes(shard.quad_filters.of(d)),
        oid=shard.content_id(d) or (blob_id(content) if skip == INDEXED else UNKNOWN_OID),
        time=shard.commit_time(d),
    )


def _write_groups(
    out_dir: str,
    generation: int,
    repos: list[RepoInfo],
    docs: list[BuildDoc],
    shards: list[Shard],
    sources: list[tuple[int, int]],
    max_bytes: int,
) -> tuple[list[str], dict[str, list[int]]]:
    """Write `docs` as shards of at most `max_bytes` of content each, in the builder's order
    (ordinary source first, then tests and docs, then vendored files), cut evenly
    (`builder.even_share`): no small last shard for the next round to merge again. Each
    document's symbols are copied from where `sources` says it was, ``(index into shards,
    document)``."""
    order = sorted(range(len(docs)), key=lambda i: (docs[i].rank, repos[docs[i].repo].name, docs[i].path))
    cut = even_share(sum(len(d.content) for d in docs), max_bytes)
    built: list[str] = []
    repos_of: dict[str, list[int]] = {}
    batch: list[int] = []
    size = 0

    def flush() -> None:
        nonlocal batch, size
        if not batch:
            return
        used = sorted({docs[i].repo for i in batch})
        remap = {old: new for new, old in enumerate(used)}
        part = [with_repo(docs[i], remap[docs[i].repo]) for i in batch]
        name = f"compound.g{generation}.{len(built)}{fmt.SUFFIX}"
        path = os.path.join(out_dir, name)
        write_docs(
            path, [repos[r] for r in used], part, symbol_columns.from_shards(shards, [sources[i] for i in batch])
        )
        built.append(path)
        repos_of[name] = [repos[r].id for r in used]
        batch, size = [], 0

    for i in order:
        if batch and (size >= cut or size + len(docs[i].content) > max_bytes):
            flush()
        batch.append(i)
        size += len(docs[i].content)
    flush()
    return built, repos_of


def _merge_in_worker(args: tuple[str, list[str], IndexSettings]) -> tuple[bool, CompactionStats]:
    """`merge` in a worker process of `codesearch.index.parallel.Pool`."""
    index_dir, group, settings = args
    stats = CompactionStats()
    return merge(index_dir, group, settings, stats), stats


def _add(stats: CompactionStats, other: CompactionStats) -> None:
    for f in dataclasses.fields(CompactionStats):
        mine = getattr(stats, f.name)
        setattr(stats, f.name, mine + getattr(other, f.name))


def compact(
    index_dir: str, settings: IndexSettings | None = None, *, max_rounds: int = 100, pool: Pool | None = None
) -> CompactionStats:
    """Merge until `plan` has nothing left (at most `max_rounds` rounds). With a `pool`
    (`codesearch.index.parallel.Pool`) the groups of a round, which share no shard, are merged
    by its workers side by side; each swap takes the manifest's lock, so they serialise there."""
    settings = settings or IndexSettings()
    stats = CompactionStats()
    for _ in range(max_rounds):
        groups = plan(index_dir, settings.shard_max_bytes)
        if not groups:
            break
        progressed = False
        if pool is not None and len(groups) > 1:
            for ok, one in pool.executor().map(_merge_in_worker, [(index_dir, g, settings) for g in groups]):
                progressed |= ok
                _add(stats, one)
        else:
            for group in groups:
                progressed |= merge(index_dir, group, settings, stats)
        if not progressed:
            break
    return stats
