"""Batch search as a Ray Dataset: many queries at once, one row per match (docs/batch.md).

    import codesearch.data as csd

    ds = csd.search(["old_client.connect", "sym:LegacyAuth", {"query": "TODO", "matches": 50}],
                    "~/.codesearch/index")                 # an index directory: read tasks open the shards
    ds = csd.search(queries, "http://cs:3000", api_key="cs_…")   # a service, off the cluster
    ds = csd.search(queries, Client.ray(api_key="cs_…"))         # a service's searchers on this cluster

    ds.groupby("repository").count().to_pandas()            # nothing runs before this line
    ds.write_parquet("s3://bucket/audit/")                   # or stream it out, never in one process

    counts = csd.insights(["old_client.connect"], "~/.codesearch", "12 months ago")   # over history
    counts.to_pandas().pivot_table(index="date", columns="query", values="match_count", aggfunc="sum")

Each query is a string of the query language (with `matches`, `regex`, `case_sensitive` of the
call) or a ``POST /api/search`` body with its own (``query``, ``matches``, ``isRegexEnabled``,
``isCaseSensitivityEnabled``). ``query_id`` is the query's position in the list, from 0. The rows of
a query are what ``Client.search`` returns for it through the same source, with the same options;
the queries of a batch share the work (`codesearch.search.batch`) and its read tasks run over the
cluster's cores and nodes (`codesearch.data.datasource`).

The Dataset is lazy: building it only checks the queries (a query that does not parse raises
`BadQuery` naming its position); the searching happens when it is consumed (``to_pandas``,
``write_parquet``, ``iter_batches``, ``count``…), block by block.

`insights` counts queries at points in a repository's history (`codesearch.insights`, docs/insights.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from codesearch.data.queries import BadQuery, Defaults, QuerySpec, specs_of
from codesearch.data.rows import FILE_SCHEMA, MATCH_SCHEMA
from codesearch.data.sources import HttpSource, IndexSource, RaySource, Source, source_of

if TYPE_CHECKING:
    from ray.actor import ActorHandle
    from ray.data import Dataset

    from codesearch.client import Client
    from codesearch.insights.dataset import Source as HistorySource

__all__ = [
    "FILE_SCHEMA",
    "MATCH_SCHEMA",
    "BadQuery",
    "HttpSource",
    "IndexSource",
    "QuerySpec",
    "RaySource",
    "dataset",
    "insights",
    "search",
]


def search(
    queries: Sequence[str | Mapping[str, Any]],
    source: str | os.PathLike[str] | Client | Source,
    *,
    per_file: bool = False,
    matches: int = 10_000,
    regex: bool = False,
    case_sensitive: bool = False,
    timeout_s: float | None = None,
    api_key: str | None = None,
    tasks: int | None = None,
) -> Dataset:
    """A lazy `ray.data.Dataset` of the matches of every query in `source` (see the module
    docstring): one row per match, or with `per_file` one row per matching file with its
    ``match_count``.

    `source`: an index directory (or a service data directory), an ``http(s)://`` service URL
    (with `api_key`), a `codesearch.Client` (``Client.local``, ``Client.http``, ``Client.ray``), or
    an `IndexSource` / `HttpSource` / `RaySource`. Through a service, the permissions of the owner
    of the API key apply. `matches`, `regex`, `case_sensitive` are the defaults of the queries
    that do not say; `timeout_s` bounds each query (None: no limit in-process, the service's 30 s
    through one). `tasks`: the number of read tasks (default: two per CPU of the cluster)."""
    src = source_of(source, api_key)
    specs = specs_of(queries, Defaults(matches, regex, case_sensitive, timeout_s), contexts_known=src.contexts_known)
    return dataset(specs, src, per_file=per_file, tasks=tasks)


def dataset(
    specs: Sequence[QuerySpec],
    source: Source,
    *,
    per_file: bool = False,
    with_errors: bool = False,
    tasks: int | None = None,
    progress: ActorHandle[Any] | None = None,
) -> Dataset:
    """The Dataset of queries made and checked already (`codesearch.data.queries`), under their own
    ids: what `search` and ``codesearch batch`` build on. `with_errors` keeps a query that fails as
    it runs as a row with an ``error`` column (otherwise it stops the batch); `progress` (a
    `datasource.ProgressCounter`) counts the queries answered."""
    import ray
    import ray.data

    from codesearch.data.datasource import BatchDatasource, plan_tasks
    from codesearch.insights.dataset import tasks_run_at_once

    if not ray.is_initialized():
        ray.init()  # (as Ray Data would: the number of tasks follows the cluster's CPUs)
    n = plan_tasks(len(specs), tasks)
    ds = BatchDatasource(specs, source, per_file=per_file, with_errors=with_errors, tasks=n, progress=progress)
    # as many blocks as tasks asked for: no ``SplitBlocks`` of each task's blocks into Ray Data's default 200
    out: Dataset = ray.data.read_datasource(ds, num_cpus=source.task_cpus, override_num_blocks=n)
    return tasks_run_at_once(out)  # (else Ray Data runs one read task alone first: see its docstring)


def insights(
    queries: Sequence[str | Mapping[str, Any]],
    source: HistorySource,
    since: datetime | str,
    until: datetime | str | None = None,
    step: str = "month",
    **options: Any,
) -> Dataset:
    """Each query's matches per repository at each point of history from `since` to `until` (default:
    now), `step` apart (``day``, ``week``, ``month``, ``quarter``, ``year``): a lazy Dataset of
    (``query_id``, ``query``, ``repository``, ``date``, ``commit``, ``match_count``, ``file_count``).
    `source` is a service data directory, a git repository, a list of them, or name → path; the
    counts are over the commit of each repository's default branch at each date, read from its git
    data without re-indexing history (`codesearch.insights.dataset.run_insights`, whose keyword
    options `options` are)."""
    from codesearch.insights.dataset import run_insights

    return run_insights(queries, source, since, until, step, **options)
