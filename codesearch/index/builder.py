"""Build shards: read sources, apply the indexing rules, invert trigrams, write shard files.

Per file (`ShardBuilder.add`): the rules of docs/indexing.md#what-gets-indexed decide whether the content is indexed
(size, binary, trigram count; ALWAYS_INDEX_FILE_PATTERNS lifts the first and last), the
language is detected, the distinct folded trigrams of content and path are computed with numpy,
and the content goes to ctags on a background thread.

Per shard (`ShardBuilder._flush`, when `shard_max_bytes` of content have been gathered, or an
even share of what the build expects when it was told (`ShardBuilder.expect`, `even_share`)):
documents are ordered (ordinary source first, then tests and docs, then vendored files; by path
within a class) so early termination keeps the best results; all (trigram, document) pairs are
inverted by a stable sort by trigram in compiled code (docs/index-format.md#building-a-shard); each posting list
becomes a serialized roaring bitmap; the sections of `codesearch.index.format` are written.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from codesearch import defaults
from codesearch.errors import IndexBuildError
from codesearch.globs import PatternList
from codesearch.index import _kernels, manifest, scratch, symbol_columns
from codesearch.index import format as fmt
from codesearch.index.language import SKIPPED, detect, rank_class, wants_symbols
from codesearch.index.quadgrams import filter_for
from codesearch.index.recency import OID_BYTES, UNKNOWN_OID, blob_id
from codesearch.index.shard import ShardSymbol
from codesearch.index.sources import RepoInfo, SourceFile, listed
from codesearch.index.symbol_columns import SymbolColumns
from codesearch.index.symbols import Symbol, SymbolExtractor, find_ctags
from codesearch.index.trigrams import count_folded, scan, unique_trigrams

log = logging.getLogger(__name__)

#: Told the input bytes of each file (or part) as it is indexed; it may raise to cancel the build.
Progress = Callable[[int], object]
#: The symbols of each document of a shard, in document order: from ctags (a build) or from an
#: older shard (compaction).
DocSymbols = Sequence[Sequence[Symbol | ShardSymbol]]


class Source(Protocol):
    """What a build reads: one repository and its files (`DirectorySource`, `GitSource`)."""

    @property
    def repo(self) -> RepoInfo: ...

    def files(self) -> Iterator[SourceFile]: ...


# Skip reasons, stored as doc.skip codes.
INDEXED, TOO_LARGE, TOO_MANY_TRIGRAMS, BINARY = 0, 1, 2, 3
SKIP_REASONS = {INDEXED: "", TOO_LARGE: "too large", TOO_MANY_TRIGRAMS: "too many trigrams", BINARY: "binary"}


@dataclass
class IndexSettings:
    """The indexing rules (docs/indexing.md#what-gets-indexed) and build knobs."""

    max_file_size: int = defaults.MAX_FILE_SIZE
    max_trigram_count: int = defaults.MAX_TRIGRAM_COUNT
    #: globs indexed despite the size and trigram limits: the entry points pass
    #: ``ALWAYS_INDEX_FILE_PATTERNS`` (`codesearch.environment.always_index_patterns`); none by default
    always_index: PatternList = field(default_factory=lambda: PatternList([]))
    shard_max_bytes: int = 100 << 20
    #: the most revisions indexed per git repository (``CODESEARCH_MAX_INDEXED_REVISIONS``)
    max_revisions: int = defaults.MAX_INDEXED_REVISIONS
    ctags: bool = True
    ctags_timeout_s: float = 5.0


@dataclass
class IndexStats:
    input_bytes: int = 0
    files: int = 0
    skipped: int = 0
    shards: list[str] = field(default_factory=list)
    #: repositories not rebuilt: what they would be built from is what their shards were built from
    unchanged: int = 0
    postings_bytes: int = 0
    total_bytes: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


@dataclass
class BuildDoc:
    """A document on its way into a shard: what the builder (or the compactor) writes."""

    path: str
    size: int
    mask: int
    skip: int
    language: str
    content: bytes
    trigrams: np.ndarray
    name_trigrams: np.ndarray
    lines: np.ndarray
    rank: int
    repo: int = 0  # index into the shard's repositories
    qfilter: bytes = b""  # the quadgram filter of the content (`quadgrams.filter_for`)
    oid: bytes = UNKNOWN_OID  # the git blob id of the content (`recency`; zeros: unknown)
    time: int = 0  # Unix time of the last commit that touched the file (`recency`; 0: unknown)


def with_repo(doc: BuildDoc, repo: int) -> BuildDoc:
    """`doc` as the shard's `repo`-th repository's: itself when it is already (most documents;
    `dataclasses.replace` costs ~8 µs a document)."""
    return doc if doc.repo == repo else dataclasses.replace(doc, repo=repo)


def shard_prefix(repo: RepoInfo) -> str:
    """The file-name prefix of a repository's shards: readable, unique by repository id."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", repo.name)[-80:].strip("_.") or "repo"
    return f"{slug}.{repo.id}"


class ShardBuilder:
    """Builds the shards of one repository into `out_dir`, or of several one after the other
    (`begin_repo`), packed into shared shards: a bulk build of many small repositories writes
    compound shards at once instead of merging small ones afterwards. `repos_of` names the
    repositories each written shard holds."""

    def __init__(
        self,
        out_dir: str,
        repo: RepoInfo,
        settings: IndexSettings,
        stats: IndexStats,
        progress: Progress | None = None,
        name: str | None = None,
    ):
        self.out_dir = out_dir
        self.name = name or shard_prefix(repo)
        self.repo = repo
        self.repos: list[RepoInfo] = [repo]
        self.repos_of: dict[str, list[int]] = {}
        self._placed: set[int] = set()  # indexes into self.repos that some shard holds
        self.settings = settings
        self.stats = stats
        self.progress = progress
        self.docs: list[BuildDoc] = []
        self.content_bytes = 0
        self.symbols = SymbolExtractor(settings.ctags_timeout_s, enabled=settings.ctags)
        self.written: list[str] = []
        self.cut_at = settings.shard_max_bytes  # content bytes at which a shard is written

    def expect(self, listed: int) -> None:
        """The build will add about `listed` bytes of content from now on (`listed_bytes`): cut
        them into even shards (`even_share`), not full ones and a small remainder that compaction
        would read and write again."""
        self.cut_at = even_share(listed, self.settings.shard_max_bytes)

    def begin_repo(self, repo: RepoInfo) -> None:
        """The files added from now on are `repo`'s."""
        if repo.id in (r.id for r in self.repos):
            raise IndexBuildError(f"{repo.name}: added twice to one build")
        self.repo = repo
        self.repos.append(repo)

    def add(self, f: SourceFile) -> None:
        s = self.settings
        always = s.always_index and s.always_index.matches(f.path)
        skip, content, trigrams, lines = INDEXED, b"", _EMPTY, _EMPTY
        oid = f.content_id if len(f.content_id) == OID_BYTES else UNKNOWN_OID
        if f.size > s.max_file_size and not always:
            skip = TOO_LARGE
        else:
            try:
                content = f.read()
            except Exception as e:  # an unreadable blob or file: warn and go on
                self.stats.warnings.append(f"{self.repo.name}/{f.path}: cannot read: {e}")
                return
            if oid == UNKNOWN_OID:
                oid = blob_id(content)
            if b"\0" in content:
                skip, content = BINARY, b""
            else:
                trigrams, lines = scan(content)
                # the folded count is never above the exact one: count it only when it may matter
                if trigrams.size > s.max_trigram_count and count_folded(trigrams) > s.max_trigram_count and not always:
                    skip, content, trigrams = TOO_MANY_TRIGRAMS, b"", _EMPTY
        if skip != INDEXED:
            lines = _EMPTY
        lang = SKIPPED if skip else (f.linguist.language or detect(f.path, content))
        if wants_symbols(lang):
            self.symbols.submit(len(self.docs), f.path, content)
        name_tri = unique_trigrams(f.path.encode("utf-8", "replace"))
        self.docs.append(
            BuildDoc(
                f.path,
                f.size,
                f.branch_mask,
                skip,
                lang,
                content,
                trigrams,
                name_tri,
                lines,
                rank_class(f.path, f.linguist),
                len(self.repos) - 1,
                filter_for(content, trigrams.size) if skip == INDEXED else b"",
                oid,
                f.time,
            )
        )
        self.content_bytes += len(content)
        self.stats.files += 1
        self.stats.input_bytes += f.size
        self.stats.skipped += skip != INDEXED
        if self.progress:
            self.progress(f.size)
        if self.content_bytes >= self.cut_at:
            self._flush()

    def finish(self) -> list[str]:
        if self.docs or len(self._placed) < len(self.repos):
            self._flush(final=True)  # an empty repository still gets a (possibly empty) shard
        self.symbols.close()
        return self.written

    def _flush(self, final: bool = False) -> None:
        symbols = self.symbols.collect()
        repos = self.repos
        order = sorted(
            range(len(self.docs)), key=lambda i: (self.docs[i].rank, repos[self.docs[i].repo].name, self.docs[i].path)
        )
        used = sorted({self.docs[i].repo for i in order} | (set(range(len(repos))) - self._placed if final else set()))
        self._placed.update(used)
        remap = {old: new for new, old in enumerate(used)}
        docs = [with_repo(self.docs[i], remap[self.docs[i].repo]) for i in order]
        syms = [symbols.get(i, ()) for i in order]
        self.docs, self.content_bytes = [], 0
        path = os.path.join(self.out_dir, f"{self.name}.{len(self.written)}{fmt.SUFFIX}")
        size, postings = write_docs(path, [repos[r] for r in used], docs, syms)
        self.repos_of[os.path.basename(path)] = [repos[r].id for r in used]
        self.written.append(path)
        self.stats.total_bytes += size
        self.stats.postings_bytes += postings


_EMPTY = np.empty(0, dtype=np.uint32)


def even_share(total: int, most: int) -> int:
    """Where to cut `total` bytes into the fewest shards of at most `most` bytes, all of about
    the same size: 250 MB with shards of at most 100 MB become three of 84, not two of 100 and
    one of 50. No shard of a repository bigger than half a shard is then small enough for
    compaction (`compact.SMALL_FRACTION`) to merge it again: a bulk build ends without a merge."""
    if total <= most:
        return most
    return -(-total // -(-total // most))


def listed_bytes(sizes: Iterable[int], settings: IndexSettings) -> int:
    """The content bytes files of these `sizes` may bring to a build: the files not too large
    to read (binary files are only known once read, so they count)."""
    return sum(size for size in sizes if size <= settings.max_file_size)


def _postings(per_doc: list[np.ndarray]) -> dict[str, fmt.Section]:
    """Invert per-document arrays of distinct trigram ids (any order) into the four sections of
    a trigram index, in compiled code (`_kernels.invert`): a stable sort by trigram (each
    list's documents come out in order), then each list written as a serialized roaring bitmap
    (docs/index-format.md#building-a-shard)."""
    starts = np.zeros(len(per_doc) + 1, dtype=np.int64)
    np.cumsum([t.size for t in per_doc], out=starts[1:])
    flat = np.concatenate(per_doc).astype(np.uint32, copy=False) if per_doc else _EMPTY
    keys, card, offs, post = _kernels.invert(flat, starts)
    return {
        "keys": np.frombuffer(keys, dtype=np.uint32),
        "card": np.frombuffer(card, dtype=np.uint32),
        "offs": np.frombuffer(offs, dtype=np.uint64),
        "post": post,
    }


def write_docs(
    path: str, repos: list[RepoInfo], docs: list[BuildDoc], syms: DocSymbols | SymbolColumns
) -> tuple[int, int]:
    """Write one shard of `docs` (in this order; ``doc.repo`` indexes `repos`) with their symbols
    `syms` (one list per document, or as columns already); returns (file size, posting bytes)."""
    sections = _sections(repos, docs, syms)
    size = fmt.write_shard(path, sections)
    return size, len(sections["ctg.post"]) + len(sections["ntg.post"])


def _sections(repos: list[RepoInfo], docs: list[BuildDoc], syms: DocSymbols | SymbolColumns) -> dict[str, fmt.Section]:
    languages = sorted({d.language for d in docs})
    lang_idx = {lang: i for i, lang in enumerate(languages)}
    cols = syms if isinstance(syms, SymbolColumns) else symbol_columns.from_symbols(syms)
    paths = [d.path.encode("utf-8", "replace") for d in docs]
    content = _postings([d.trigrams for d in docs])
    names = _postings([d.name_trigrams for d in docs])
    words = fmt.branch_words(len(r.branches) for r in repos)
    return {
        "meta": {
            "format": fmt.FORMAT_VERSION,
            "repos": [repo.to_json() for repo in repos],
            "languages": languages,
            "symbolKinds": cols.kinds,
            "docCount": len(docs),
            "symbolCount": len(cols.lines),
            "createdAt": time.time(),
            "branchWords": words,
        },
        "doc.repo": np.array([d.repo for d in docs], dtype=np.uint32),
        "doc.lang": np.array([lang_idx[d.language] for d in docs], dtype=np.uint16),
        "doc.skip": np.array([d.skip for d in docs], dtype=np.uint8),
        "doc.size": np.array([d.size for d in docs], dtype=np.uint64),
        "doc.brch": fmt.pack_masks([d.mask for d in docs], words).reshape(-1),
        "doc.rank": np.array([d.rank for d in docs], dtype=np.uint8),
        "doc.oid": b"".join(d.oid for d in docs),
        "doc.time": np.array([d.time for d in docs], dtype=np.int64),
        "doc.path": fmt.offsets([len(p) for p in paths]),
        "doc.cont": fmt.offsets([len(d.content) for d in docs]),
        "doc.line": fmt.offsets([d.lines.size for d in docs]),
        "paths": b"".join(paths),
        "content": b"".join(d.content for d in docs),
        "lines": np.concatenate([d.lines for d in docs]) if docs else _EMPTY,
        **{f"ctg.{k}": v for k, v in content.items()},
        **{f"ntg.{k}": v for k, v in names.items()},
        "doc.qflt": fmt.offsets([len(d.qfilter) for d in docs]),
        "qfilter": b"".join(d.qfilter for d in docs),
        **symbol_columns.sections(cols),
    }


@functools.lru_cache(maxsize=1)
def _ctags_in_use() -> bool:
    return find_ctags() is not None


def build_key(source: Source, settings: IndexSettings) -> str | None:
    """What a repository's shards are built from, as one hash: the shard format, the indexing
    rules, what the shards record about the repository, and each indexed revision with its commit.
    Two builds with the same key write the same documents, so a re-index whose key equals the one
    its shards were built from has nothing to do (`index_source`): an unchanged repository costs
    reading its refs, not a rebuild. None for a source that cannot name its content by commits
    (a plain directory): it is always rebuilt."""
    revisions = getattr(source, "revisions", None)
    if revisions is None:
        return None
    rules = {
        "format": fmt.FORMAT_VERSION,
        "max_file_size": settings.max_file_size,
        "max_trigram_count": settings.max_trigram_count,
        "always_index": [(inc, rx.pattern, base) for inc, rx, base in settings.always_index.rules],
        "symbols": bool(settings.ctags and _ctags_in_use()),
        "linguist": 1,  # .gitattributes overrides are read (languages, ranking): indexes from before are rebuilt
        "recency": 1,  # doc.time and doc.oid are recorded: indexes from before are rebuilt to have them
    }
    content = {"rules": rules, "repo": source.repo.to_json(), "revisions": [(r.ref, r.commit) for r in revisions]}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def index_source(
    source: Source,
    out_dir: str,
    settings: IndexSettings | None = None,
    stats: IndexStats | None = None,
    progress: Progress | None = None,
    rebuild: bool = False,
) -> IndexStats:
    """Index one source (a `DirectorySource` or `GitSource`) into shards in `out_dir`.

    The new shards are built in a private folder under new names (a new generation) and then
    swapped in through the manifest (`codesearch.index.manifest`): searches see the old shards
    or the new ones, never a mix, and never nothing. A repository whose shards in the index were
    built from exactly what this build would read (`build_key`) is left as it is
    (`IndexStats.unchanged`): no shard is written, the manifest is not touched. `rebuild` builds
    it all the same (a re-index someone asked for).
    """
    settings = settings or IndexSettings()
    stats = stats or IndexStats()
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    key = build_key(source, settings)
    if key is not None and not rebuild and manifest.built_from(out_dir, source.repo.id) == key:
        stats.unchanged += 1
        stats.seconds += time.perf_counter() - t0
        return stats
    prefix = shard_prefix(source.repo)
    generation = manifest.next_generation(out_dir)
    build_dir = scratch.open_build_dir(out_dir, generation)
    builder = ShardBuilder(build_dir, source.repo, settings, stats, progress, name=f"{prefix}.g{generation}")
    try:
        files = listed(source.files())
        builder.expect(listed_bytes((f.size for f in files), settings))
        for f in files:
            builder.add(f)
        written = builder.finish()
        stats.warnings.extend(getattr(source, "warnings", []))
        manifest.swap_repo(
            out_dir, source.repo.id, source.repo.name, generation, written, replaces_prefix=prefix, built_from=key
        )
        stats.shards.extend(os.path.join(out_dir, os.path.basename(p)) for p in written)
    finally:
        builder.symbols.close()
        scratch.remove_build_dir(build_dir)
    stats.seconds += time.perf_counter() - t0
    return stats
