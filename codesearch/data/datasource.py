"""The Ray Data side of a batch: a `Datasource` whose read tasks each answer a contiguous part of
the queries against the source, and yield their rows as Arrow blocks.

Why a `Datasource` (``ray.data.read_datasource``) and not ``from_items(queries).map_batches``:
the read tasks are planned when the Dataset executes, not when it is built (nothing runs until
the caller consumes it), each one opens the source once for its whole part (the index's shards;
an HTTP client; the attachment to the searchers) and yields a block per `queries_per_block`
queries as they are answered, so rows stream out while the rest is searched and no process
holds more than a block; and its tasks' count and CPUs are ours to choose (`plan_tasks`), with
no intermediate dataset of the queries in the object store.

Why a task holds a part of the queries over every shard rather than a group of shards for every
query: a query's answer depends on all shards at once (a capped query spends its `matches`
budget shard after shard, definitions first across all of them), so splitting shards between
tasks would change the answers of capped queries, or need a per-query merge after a shuffle
(Ray Data's ``groupby(...).map_groups``: 9-16 s for 200,000 small rows on the 2-core machine of
bench/RESULTS.md, more than the whole batch of bench/bench_batch.py), and a capped query would
search every group to the full budget instead of stopping at its first shards. Tasks over parts
of the queries answer each query exactly as ``Client.search`` does and run in parallel over the
cluster's cores and nodes; within a task, the queries of a block share the shards' work
(`codesearch.search.batch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import ray
from ray.data import Datasource, ReadTask
from ray.data.block import BlockMetadata

from codesearch.data import rows
from codesearch.data.queries import BadQuery, QuerySpec
from codesearch.data.sources import Found, Source

if TYPE_CHECKING:
    from ray.actor import ActorHandle

#: Queries answered together (one block of rows, one `Searcher.search_many`): large enough to
#: share the shards' work, small enough that a block streams out soon and stays small.
QUERIES_PER_BLOCK = 32
#: Read tasks per CPU of the cluster: more tasks than CPUs, so that a task of slow queries does
#: not leave the other CPUs idle at the end.
TASKS_PER_CPU = 2


@ray.remote(num_cpus=0)
class ProgressCounter:
    """Counts the queries answered by a batch's read tasks (`codesearch batch`'s progress bar)."""

    def __init__(self) -> None:
        self.done = 0

    def add(self, n: int) -> None:
        self.done += n

    def value(self) -> int:
        return self.done


class BatchDatasource(Datasource):
    """The rows of `specs` searched in `source` (`codesearch.data.search`)."""

    def __init__(
        self,
        specs: Sequence[QuerySpec],
        source: Source,
        *,
        per_file: bool = False,
        with_errors: bool = False,
        tasks: int | None = None,
        queries_per_block: int = QUERIES_PER_BLOCK,
        progress: ActorHandle[Any] | None = None,
    ):
        super().__init__()  # type: ignore[no-untyped-call]  # Ray leaves Datasource.__init__ unannotated
        self.specs = list(specs)
        self.source = source
        self.per_file = per_file
        self.with_errors = with_errors
        self.tasks = tasks
        self.queries_per_block = max(1, queries_per_block)
        self.progress = progress

    def get_name(self) -> str:
        return "CodesearchBatch"

    def estimate_inmemory_data_size(self) -> int | None:
        return None  # (as many rows as matches: unknown until searched)

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        schema = rows.schema(self.per_file, self.with_errors)
        parts = split(self.specs, plan_tasks(len(self.specs), self.tasks))  # (`tasks`: `dataset` planned them)
        return [
            ReadTask(
                partial(
                    read_part,
                    part,
                    self.source,
                    self.per_file,
                    self.with_errors,
                    self.queries_per_block,
                    self.progress,
                ),
                BlockMetadata(num_rows=None, size_bytes=None, input_files=None, exec_stats=None),
                schema=schema,
                per_task_row_limit=per_task_row_limit,
            )
            for part in parts
        ]


def plan_tasks(queries: int, wanted: int | None) -> int:
    """How many read tasks: `wanted`, else `TASKS_PER_CPU` per CPU of the cluster, never more than
    one per `QUERIES_PER_BLOCK` / 4 queries (a task should have work to share) nor fewer than one."""
    if wanted is not None:
        return max(1, min(wanted, queries))
    resources: dict[str, float] = ray.cluster_resources() if ray.is_initialized() else {}  # type: ignore[no-untyped-call]
    cpus = int(resources.get("CPU", 1))
    return max(1, min(TASKS_PER_CPU * max(cpus, 1), -(-queries // max(QUERIES_PER_BLOCK // 4, 1))))


def split(specs: Sequence[QuerySpec], n: int) -> list[list[QuerySpec]]:
    """`specs` in `n` contiguous parts of (nearly) equal size, none empty (one empty part for no
    query: a Dataset of no rows still has a read task, and its schema)."""
    if not specs:
        return [[]]
    size, extra = divmod(len(specs), n)
    parts, start = [], 0
    for k in range(n):
        end = start + size + (1 if k < extra else 0)
        if end > start:
            parts.append(list(specs[start:end]))
        start = end
    return parts


def read_part(
    part: list[QuerySpec],
    source: Source,
    per_file: bool,
    with_errors: bool,
    queries_per_block: int,
    progress: ActorHandle[Any] | None,
) -> Iterator[pa.Table]:
    """One read task: open the source, answer `part` a block at a time. A query's own error is a
    row (`with_errors`) or stops the batch with `BadQuery` naming it."""
    if not part:  # (no query: no rows, but the columns)
        yield rows.table([], per_file, with_errors)
        return
    runner = source.open()
    try:
        for start in range(0, len(part), queries_per_block):
            block = part[start : start + queries_per_block]
            out = rows.Block(per_file, with_errors)
            for spec, answer in zip(block, runner.answer(block, per_file), strict=True):
                if isinstance(answer, Found):
                    out.add_files(spec, answer.files)
                elif isinstance(answer, list):
                    out.add_rows(answer)
                elif with_errors:
                    out.add_rows([rows.error_row(spec, str(answer))])
                else:
                    raise BadQuery(spec.query_id, str(answer), spec.line)
            if progress is not None:
                progress.add.remote(len(block))
            yield out.table()
    finally:
        runner.close()
