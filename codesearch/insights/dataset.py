"""Insights as a Ray Dataset: one task per repository, rows of (query, repository, date, commit, counts).

`run_insights(queries, repos_or_source, since, until, step)` checks the queries and the dates
in the calling process (a mistake fails at once, naming the query), then returns a lazy
``ray.data.Dataset``: a dataset of the repositories, one per block, mapped by
`codesearch.insights.engine.count_repository`, so each repository is one Ray task, run where the
cluster has a CPU free, streamed to whoever consumes the rows (``to_pandas()``,
``write_parquet()``, ``iter_batches()``). Nothing is computed until the dataset is consumed, and
no process holds all the rows unless asked.

Every block has the same Arrow schema (`SCHEMA`): ``query_id`` (the query's position, from 0),
``query``, ``repository``, ``date`` (UTC), ``commit`` (null before the branch's first commit),
``match_count`` and ``file_count`` (see `codesearch.insights.spec.PointCount`).

`repos_or_source` is where the repositories are:

* a git repository (a work tree or a bare repository), named as ``codesearch index`` names it;
* a codesearch data directory: every repository of its state store, read where the service
  reads them (`codesearch.insights.scope`), those without a clone yet left out;
* a list of git repositories or `RepoTarget`s, or a mapping of names to git repositories.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from codesearch.errors import InvalidArgument
from codesearch.index.builder import IndexSettings
from codesearch.index.sources import local_repo_name, repo_git_dir
from codesearch.insights.engine import REPO_TIMEOUT_S, RepoTarget, count_repository
from codesearch.insights.spec import InsightQuery, PointCount, check_queries, points

if TYPE_CHECKING:
    import pyarrow as pa
    import ray.data

__all__ = ["COLUMNS", "Counter", "count_remote", "counter", "run_insights", "targets_of"]

COLUMNS = ("query_id", "query", "repository", "date", "commit", "match_count", "file_count")

Source = str | os.PathLike[str] | Iterable[str | os.PathLike[str] | RepoTarget] | Mapping[str, str]


def schema() -> pa.Schema:
    """The Arrow schema of every block (`COLUMNS`)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("query_id", pa.int32()),
            ("query", pa.string()),
            ("repository", pa.string()),
            ("date", pa.timestamp("us", tz="UTC")),
            ("commit", pa.string()),
            ("match_count", pa.int64()),
            ("file_count", pa.int64()),
        ]
    )


def _target_of_path(path: str | os.PathLike[str]) -> RepoTarget:
    path = os.fspath(path)
    git_dir = repo_git_dir(path)
    if git_dir is None:
        raise InvalidArgument(f"{path}: not a git repository")
    return RepoTarget(local_repo_name(path), git_dir)


def _is_data_dir(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "codesearch.db")) or os.path.isdir(os.path.join(path, "repos"))


def targets_of(source: Source) -> list[RepoTarget]:
    """The repositories `source` names (see the module docstring), by name."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if repo_git_dir(path) is None and _is_data_dir(path):
            return _store_targets(path)
        return [_target_of_path(path)]
    if isinstance(source, Mapping):
        return [RepoTarget(str(name), _target_of_path(path).git_dir) for name, path in source.items()]
    out = [s if isinstance(s, RepoTarget) else _target_of_path(s) for s in source]
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise InvalidArgument("two repositories have the same name: give a mapping of names to repositories")
    return out


def _store_targets(data_dir: str) -> list[RepoTarget]:
    from codesearch.insights.scope import resolve_scope
    from codesearch.store import Store

    with Store.open(data_dir) as store:
        return resolve_scope(store, data_dir).targets


def _count_block(
    batch: pa.Table,
    queries: list[dict[str, Any]],
    dates: list[datetime],
    settings: IndexSettings | None,
    contexts: Mapping[str, set[str]] | None,
    timeout_s: float,
) -> pa.Table:
    """A Ray Data task: the rows of the repositories of one block (one repository)."""
    import pyarrow as pa

    rows: list[dict[str, Any]] = []
    for target in batch.to_pylist():
        found = count_repository(
            RepoTarget(**target), queries, dates, settings=settings, contexts=contexts, timeout_s=timeout_s
        )
        rows += [r.to_row() for r in found]
    return pa.Table.from_pylist(rows, schema=schema())


#: How one repository is counted: `count_repository`'s signature (in this process, or as a Ray task).
Counter = Callable[..., list[PointCount]]


def count_remote(
    target: RepoTarget, queries: Sequence[Any], dates: Sequence[datetime], **options: Any
) -> list[PointCount]:
    """`count_repository` as a Ray task (one CPU), waited for: for a process that asks Ray for
    no CPU of its own (the scheduler actor) and must not count on it."""
    import ray

    task = _remote_count()
    result: list[PointCount] = ray.get(task.remote(target, list(queries), list(dates), **options))
    return result


@functools.cache
def _remote_count() -> Any:
    import ray

    return ray.remote(num_cpus=1, max_retries=0)(count_repository)


def counter() -> Counter:
    """How to count a repository here: as Ray tasks when this process is connected to Ray, else in it."""
    import ray

    return count_remote if ray.is_initialized() else count_repository


def run_insights(
    queries: Sequence[InsightQuery | str | Mapping[str, Any]],
    repos_or_source: Source,
    since: datetime | str,
    until: datetime | str | None = None,
    step: str = "month",
    *,
    settings: IndexSettings | None = None,
    contexts: Mapping[str, set[str]] | None = None,
    timeout_s: float = REPO_TIMEOUT_S,
) -> ray.data.Dataset:
    """Each query's counts per repository at each point from `since` to `until` (default:
    now), `step` apart (``day``, ``week``, ``month``, ``quarter``, ``year``), as a lazy Ray
    Dataset (see the module docstring). Queries are strings (literal, case-insensitive) or
    search request bodies (``{"query", "isRegexEnabled", "isCaseSensitivityEnabled"}``).
    InvalidArgument for a bad query, date or step, or no repository."""
    import ray.data

    checked = [q.to_json() for q in check_queries(queries, contexts)]
    dates = points(since, until, step)
    targets = targets_of(repos_or_source)
    if not targets:
        raise InvalidArgument("no repository to count in")
    items = [asdict(t) for t in targets]
    count = functools.partial(
        _count_block, queries=checked, dates=dates, settings=settings, contexts=contexts, timeout_s=timeout_s
    )
    return tasks_run_at_once(
        ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
            count, batch_size=1, batch_format="pyarrow", zero_copy_batch=True
        )
    )


def tasks_run_at_once(ds: ray.data.Dataset) -> ray.data.Dataset:
    """`ds`, with Ray Data's per-operator resource reservation turned off in its own context (not
    the caller's global one; datasets derived from it inherit it).

    Why: the reservation keeps part of the cluster's CPUs back for each operator's outputs, so a
    dataset whose work is one operator of CPU-bound tasks (a batch search, insights) runs a single
    task until the first one ends, then the rest 0.15-0.2 s apart. Measured on Ray 2.60 with four
    tasks that each sleep 1 s: 3.2-3.3 s with the reservation, 2.2 s without, on one 2-CPU node
    and on a 2-node cluster of one CPU each alike (bench/RESULTS.md). Our blocks are small Arrow
    tables of rows; the object store's own limits still apply. A caller who chains heavy
    operators of its own can turn it back on: ``ds.context.op_resource_reservation_enabled = True``.
    """
    ds.context.op_resource_reservation_enabled = False
    return ds
