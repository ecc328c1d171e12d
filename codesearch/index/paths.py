"""Index a list of paths into one index directory: the entry of `codesearch index` and of the tests.

Each path is one repository (a git repository is read from its object store, a directory from its files).
This module sits above the three ways a build runs (`builder.index_source` in this process,
`parallel` in worker processes, `compact` to merge small shards afterwards) and picks among them, so that
none of the three needs to know the others.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable

from codesearch.errors import IndexBuildError
from codesearch.index import parallel
from codesearch.index.builder import IndexSettings, IndexStats, Progress, index_source
from codesearch.index.compact import compact as compact_index
from codesearch.index.sources import open_source


def index_paths(
    paths: list[str],
    out_dir: str,
    settings: IndexSettings | None = None,
    branches: Iterable[str] = (),
    tags: Iterable[str] = (),
    progress: Progress | None = None,
    compact: bool = False,
    jobs: int = 1,
) -> IndexStats:
    """Index each path as one repository (git repositories from their object store); with
    `compact`, then merge the small shards into compound ones (`codesearch.index.compact`:
    `stats.shards` names the shards as written, before the merge). With ``jobs`` > 1 the build
    runs in that many processes (`codesearch.index.parallel`): many repositories side by side,
    or the parts of fewer big ones."""
    settings = settings or IndexSettings()
    stats = IndexStats()
    for p in paths:
        if not os.path.exists(p):
            raise IndexBuildError(f"{p}: no such file or directory")
    os.makedirs(out_dir, exist_ok=True)
    pool = parallel.Pool(jobs) if jobs > 1 else None
    try:
        if pool is not None and len(paths) >= 2 * jobs:
            parallel.index_many(paths, out_dir, settings, stats, pool, branches, tags, progress)
        else:
            for p in paths:
                source = open_source(p, branches, tags, settings.max_revisions)
                try:
                    if pool is not None:
                        parallel.index_source_in_parts(source, out_dir, settings, stats, pool, progress)
                    else:
                        index_source(source, out_dir, settings, stats, progress)
                finally:
                    if hasattr(source, "close"):
                        source.close()
        if compact:
            t0 = time.perf_counter()
            compact_index(out_dir, settings, pool=pool)
            stats.seconds += time.perf_counter() - t0
    finally:
        if pool is not None:
            pool.close()
    return stats
