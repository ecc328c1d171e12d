"""Builds that use every core they are given: repositories in parallel, and parts of a big one.

Building a shard is CPU work in this process (reading contents, numpy trigram extraction, the
inversion and the roaring bitmaps) plus ctags in a process of its own, so one build uses about
one core. `index_paths` (the ``codesearch index`` command, the benchmarks) and `index_source`
take ``jobs``:

* several repositories: the big ones are each indexed whole by one of ``jobs`` worker
  processes, the small ones packed together into shared (compound) shards by one worker each
  (`plan_builds`, `index_bundle`), the biggest build first;
* one repository bigger than `PART_MIN_BYTES`: its files (listed here, their contents read by
  the workers) are cut into ``jobs`` parts of about equal size, in path order; each worker builds
  the shards of its part with its own ctags, and the parent swaps all of them in at once
  (`manifest.swap_repo`), so searches still see the old repository or the new one.

Worker processes are started with ``forkserver`` (the parent may run threads: ctags feeders,
Ray) and re-used for the whole build. The service's indexer actors build serially (each actor
is one process reserving one CPU, and a job must stay cancellable file by file); they run in
parallel with each other instead.
"""

from __future__ import annotations

import concurrent.futures
import functools
import gc
import heapq
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from codesearch.git.objects import ObjectBatch
from codesearch.index import manifest, scratch
from codesearch.index.attributes import Linguist
from codesearch.index.builder import (
    IndexSettings,
    IndexStats,
    Progress,
    ShardBuilder,
    Source,
    listed_bytes,
    shard_prefix,
)
from codesearch.index.sources import DirectorySource, GitSource, RepoInfo, SourceFile, listed, read_file

#: A repository smaller than this is built by one process (starting workers costs more).
PART_MIN_BYTES = 32 << 20


def default_jobs() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


#: A file of a part: (path, size, branch mask, locator: its full path or blob sha, linguist overrides).
_Listed = tuple[str, int, int, str, Linguist, bytes, int]


@dataclass(frozen=True)
class _Part:
    """What a worker needs to build one part of a repository (plain, picklable data)."""

    kind: str  # "dir" or "git"
    location: str  # the directory, or the git directory
    repo: dict[str, Any]  # RepoInfo.to_json()
    files: list[_Listed]
    build_dir: str
    name: str
    settings: IndexSettings


def _listing(source: Source) -> tuple[str, str, list[_Listed]]:
    """The source's files as plain data, and how a worker reads their contents again."""
    if isinstance(source, GitSource):
        return "git", source.git_dir, [_plain(f) for f in listed(source.files())]
    if isinstance(source, DirectorySource):
        return "dir", source.root, [_plain(f) for f in listed(source.files())]
    raise TypeError(f"cannot build {type(source).__name__} in parts")


def _plain(f: SourceFile) -> _Listed:
    return (f.path, f.size, f.branch_mask, f.locator, f.linguist, f.content_id, f.time)


def _read_blob(repo: ObjectBatch, sha: str, _size: int) -> bytes:
    return repo.blob(sha)


def _build_part(part: _Part) -> IndexStats:
    """In a worker: build the shards of one part into `part.build_dir`."""
    stats = IndexStats()
    repo: ObjectBatch | None = None
    read: Callable[[str, int], bytes]
    if part.kind == "git":
        repo = ObjectBatch(part.location, timeout_s=math.inf)  # bounded by the build's own limit
        read = functools.partial(_read_blob, repo)
    else:
        read = read_file

    builder = ShardBuilder(part.build_dir, RepoInfo.from_json(part.repo), part.settings, stats, name=part.name)
    builder.expect(listed_bytes((f[1] for f in part.files), part.settings))
    try:
        for path, size, mask, loc, linguist, content_id, when in part.files:
            content = functools.partial(read, loc, size)
            builder.add(SourceFile(path, size, mask, content, loc, linguist, content_id, when))
        stats.shards = builder.finish()
    finally:
        builder.symbols.close()
        if repo is not None:
            repo.close()
    return stats


def _split(files: list[_Listed], parts: int) -> list[list[_Listed]]:
    """`files` (in path order) cut into at most `parts` runs of about equal total size."""
    total = sum(f[1] for f in files) or 1
    out: list[list[_Listed]] = []
    current: list[_Listed] = []
    size = 0
    for f in files:
        current.append(f)
        size += f[1]
        if size >= total * (len(out) + 1) / parts and len(out) < parts - 1:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def _worker_started() -> None:
    """In each worker, once: what a build uses is imported, and every object the imports made
    is put out of the cyclic collector's sight (`gc.freeze`): its full collections during a
    build walked them all again each time (0.5 of 14 CPU-s of the 1 GB build)."""
    from codesearch.index import builder  # noqa: F401 - imported for what it makes

    gc.freeze()


class Pool:
    """Worker processes for builds, started once (``forkserver``) and re-used."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None

    def executor(self) -> concurrent.futures.ProcessPoolExecutor:
        if self._executor is None:
            ctx = multiprocessing.get_context("forkserver")
            self._executor = concurrent.futures.ProcessPoolExecutor(
                max_workers=self.jobs, mp_context=ctx, initializer=_worker_started
            )
        return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def index_source_in_parts(
    source: Source,
    out_dir: str,
    settings: IndexSettings,
    stats: IndexStats,
    pool: Pool,
    progress: Progress | None = None,
) -> IndexStats:
    """`builder.index_source` for a big repository: its parts built by the pool's workers."""
    t0 = time.perf_counter()
    kind, location, files = _listing(source)
    prefix = shard_prefix(source.repo)
    generation = manifest.next_generation(out_dir)
    build_dir = scratch.open_build_dir(out_dir, generation)
    try:
        n = pool.jobs if sum(f[1] for f in files) >= PART_MIN_BYTES else 1
        parts = [
            _Part(kind, location, source.repo.to_json(), chunk, build_dir, f"{prefix}.g{generation}.p{i}", settings)
            for i, chunk in enumerate(_split(files, n))
        ]
        written: list[str] = []
        for part_stats, part in zip(pool.executor().map(_build_part, parts), parts, strict=True):
            _add(stats, part_stats)
            written.extend(part_stats.shards)
            if progress:
                progress(sum(f[1] for f in part.files))
        stats.warnings.extend(getattr(source, "warnings", []))
        manifest.swap_repo(out_dir, source.repo.id, source.repo.name, generation, written, replaces_prefix=prefix)
        stats.shards.extend(os.path.join(out_dir, os.path.basename(p)) for p in written)
    finally:
        scratch.remove_build_dir(build_dir)
    stats.seconds += time.perf_counter() - t0
    return stats


#: What a worker builds (`_index_one`): paths, index directory, settings, branch and tag globs.
_Build = tuple[list[str], str, IndexSettings, tuple[str, ...], tuple[str, ...]]


def _index_one(args: _Build) -> IndexStats:
    """In a worker: index one path whole (`builder.index_source`), or several small ones packed
    into shared shards (`index_bundle`)."""
    paths, out_dir, settings, branches, tags = args
    from codesearch.index.builder import index_source
    from codesearch.index.sources import open_source

    if len(paths) > 1:
        return index_bundle(paths, out_dir, settings, branches, tags)
    source = open_source(paths[0], branches, tags, settings.max_revisions)
    try:
        return index_source(source, out_dir, settings)
    finally:
        if hasattr(source, "close"):
            source.close()


def index_bundle(
    paths: list[str], out_dir: str, settings: IndexSettings, branches: Iterable[str] = (), tags: Iterable[str] = ()
) -> IndexStats:
    """Index several (small) repositories into shared shards, swapped in together
    (`manifest.swap_repos`): one pass over their contents, where indexing each alone and
    compacting afterwards would extract every trigram twice."""
    from codesearch.index.sources import open_source

    stats = IndexStats()
    t0 = time.perf_counter()
    generation = manifest.next_generation(out_dir)
    build_dir = scratch.open_build_dir(out_dir, generation)
    builder: ShardBuilder | None = None
    swapped: list[tuple[int, str, str | None]] = []
    sources: list[tuple[Source, list[SourceFile]]] = []
    try:
        # listed first, read after: the builder cuts the bundle's shards evenly (`ShardBuilder.expect`)
        for path in paths:
            opened = open_source(path, branches, tags, settings.max_revisions)
            sources.append((opened, []))
            sources[-1][1].extend(listed(opened.files()))
        if not sources:
            raise ValueError("index_bundle: no paths")
        for source, files in sources:
            if builder is None:
                builder = ShardBuilder(build_dir, source.repo, settings, stats, name=f"bundle.g{generation}")
                builder.expect(listed_bytes((f.size for _, each in sources for f in each), settings))
            else:
                builder.begin_repo(source.repo)
            for f in files:
                builder.add(f)
            files.clear()
            if hasattr(source, "close"):
                source.close()  # its git process, if it read blobs: not one left open per repository
            stats.warnings.extend(getattr(source, "warnings", []))
            swapped.append((source.repo.id, source.repo.name, shard_prefix(source.repo)))
        assert builder is not None
        written = builder.finish()
        manifest.swap_repos(out_dir, swapped, generation, written, builder.repos_of)
        stats.shards.extend(os.path.join(out_dir, os.path.basename(p)) for p in written)
    finally:
        if builder is not None:
            builder.symbols.close()
        for each, _ in sources:
            if hasattr(each, "close"):
                each.close()
        scratch.remove_build_dir(build_dir)
    stats.seconds += time.perf_counter() - t0
    return stats


#: What a file costs a build besides its bytes (reading it, its language, the Python around it),
#: in bytes of content that cost as much: fitted to the 1 GB corpus's builds (7.7 ms a MB, 98 µs
#: a file). It orders the builds, not the shards' sizes.
FILE_COST_BYTES = 12 << 10


def _measure(args: tuple[str, int]) -> tuple[int, int]:
    """About the content bytes a build of the path will read, and how many files: a git
    repository's object store (compressed: a rough measure; files 0), a directory's files of at
    most `max_file_size` bytes (a larger one is not read)."""
    path, max_file_size = args
    git = os.path.isdir(os.path.join(path, ".git")) or (
        os.path.isfile(os.path.join(path, "HEAD")) and os.path.isdir(os.path.join(path, "objects"))
    )
    total = files = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        size = entry.stat(follow_symlinks=False).st_size
                        if git or size <= max_file_size:
                            total += size
                            files += not git
        except OSError:
            continue
    return total, files


def _ready() -> None:
    """A task that only makes a worker start (`_measure_all`)."""


def _measure_all(asks: list[tuple[str, int]], pool: Pool) -> list[tuple[int, int]]:
    """`_measure` of each path: here while the workers start (a Python each, importing the
    build's modules: ~0.3 s in which this process would wait), then the rest by the workers."""
    executor = pool.executor()
    started = [executor.submit(_ready) for _ in range(pool.jobs)]
    out: list[tuple[int, int]] = []
    while len(out) < len(asks) and not all(f.done() for f in started):
        out.append(_measure(asks[len(out)]))
    rest = asks[len(out) :]
    out.extend(executor.map(_measure, rest, chunksize=max(1, len(rest) // (4 * pool.jobs))))
    return out


def plan_builds(
    paths: list[str], sizes: list[int], shard_bytes: int, costs: list[int] | None = None
) -> list[list[int]]:
    """The builds of a bulk index, as lists of indexes into `paths`: a repository of at least
    half a shard (by `sizes`, its content bytes) alone (its builder cuts it into even shards,
    `builder.even_share`); the smaller ones packed into the fewest bundles of about a shard
    each, as even as the biggest-first greedy makes them (each repository to the lightest bundle
    so far). Bundles of at least half a shard each are left alone by compaction, so the build
    ends when its last bundle is written; more, smaller bundles would give the workers more to do
    side by side but a merge afterwards that reads and writes them again, which costs about as
    much as building them. The builds come costliest first (by `costs`, default `sizes`), so
    that the workers, each taking the next, end close together."""
    costs = costs or sizes
    order = sorted(range(len(paths)), key=lambda i: (-sizes[i], i))
    big = [[i] for i in order if sizes[i] >= shard_bytes // 2]
    small = [i for i in order if sizes[i] < shard_bytes // 2]
    count = max(1, -(-sum(sizes[i] for i in small) // max(1, shard_bytes))) if small else 0
    bundles: list[list[int]] = [[] for _ in range(count)]
    lightest = [(0, b) for b in range(count)]
    for i in small:
        load, b = heapq.heappop(lightest)
        bundles[b].append(i)
        heapq.heappush(lightest, (load + sizes[i], b))
    return sorted(big + bundles, key=lambda b: -sum(costs[i] for i in b))


def index_many(
    paths: list[str],
    out_dir: str,
    settings: IndexSettings,
    stats: IndexStats,
    pool: Pool,
    branches: Iterable[str] = (),
    tags: Iterable[str] = (),
    progress: Progress | None = None,
) -> None:
    """Index many paths, ``pool.jobs`` builds at a time (`plan_builds`: big repositories alone,
    small ones packed into shared shards), the biggest first, so that no worker is left with a
    big build while the others idle at the end. A path given twice is indexed once."""
    t0 = time.perf_counter()
    paths = list(dict.fromkeys(paths))
    executor = pool.executor()
    measured = _measure_all([(p, settings.max_file_size) for p in paths], pool)
    sizes = [size for size, _ in measured]
    costs = [size + FILE_COST_BYTES * files for size, files in measured]
    futures = [
        executor.submit(_index_one, ([paths[i] for i in build], out_dir, settings, tuple(branches), tuple(tags)))
        for build in plan_builds(paths, sizes, settings.shard_max_bytes, costs)
    ]
    if progress:
        for done in concurrent.futures.as_completed(futures):
            progress(done.result().input_bytes)
    for future in futures:
        one = future.result()
        seconds = one.seconds
        _add(stats, one)
        stats.shards.extend(one.shards)
        stats.seconds -= seconds
    stats.seconds += time.perf_counter() - t0


def _add(stats: IndexStats, other: IndexStats) -> None:
    stats.input_bytes += other.input_bytes
    stats.files += other.files
    stats.skipped += other.skipped
    stats.postings_bytes += other.postings_bytes
    stats.total_bytes += other.total_bytes
    stats.seconds += other.seconds
    stats.warnings.extend(other.warnings)
