"""The rows of a batch: the answer of each query as Arrow tables, one row per match or per file.

A query's rows are made from its ``POST /api/search`` answer by the Python client's own reading of
it (`codesearch.client.results.SearchResult`): a match row is a `Match` of ``Client.search``, so
the rows of a query are what ``Client.search`` returns for it, whatever the source. Like
``Client.search``, a file matched by its name only (``file:`` alone) has no match row; its file
row (``per_file``) counts its name ranges.

Columns (docs/batch.md): matches ``query_id, query, repository, path, line_number, column, line,
language, branch``; files ``query_id, query, repository, path, language, branch, match_count``;
with ``error`` (`ERROR_COLUMN`) when a batch keeps its failed queries as rows (``codesearch
batch``), the other columns of such a row empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from codesearch.client.results import SearchResult
from codesearch.data.queries import QuerySpec

MATCH_SCHEMA = pa.schema(
    [
        ("query_id", pa.int64()),
        ("query", pa.string()),
        ("repository", pa.string()),
        ("path", pa.string()),
        ("line_number", pa.int64()),
        ("column", pa.int64()),
        ("line", pa.string()),
        ("language", pa.string()),
        ("branch", pa.string()),
    ]
)
FILE_SCHEMA = pa.schema(
    [
        ("query_id", pa.int64()),
        ("query", pa.string()),
        ("repository", pa.string()),
        ("path", pa.string()),
        ("language", pa.string()),
        ("branch", pa.string()),
        ("match_count", pa.int64()),
    ]
)
ERROR_COLUMN = "error"


def schema(per_file: bool, with_errors: bool = False) -> pa.Schema:
    base = FILE_SCHEMA if per_file else MATCH_SCHEMA
    return base.append(pa.field(ERROR_COLUMN, pa.string())) if with_errors else base


def rows_of(spec: QuerySpec, response: dict[str, Any], per_file: bool) -> list[dict[str, Any]]:
    """The rows of one query's answer."""
    result = SearchResult(response, spec.query)
    head = {"query_id": spec.query_id, "query": spec.query}
    if per_file:
        return [
            {
                **head,
                "repository": f.repo,
                "path": f.path,
                "language": f.language,
                "branch": f.branches[0] if f.branches else "",
                "match_count": _file_match_count(raw),
            }
            for f, raw in zip(result.files, response.get("files", []), strict=True)
        ]
    return [
        {
            **head,
            "repository": m.repo,
            "path": m.path,
            "line_number": m.line,
            "column": m.column,
            "line": m.text,
            "language": m.language,
            "branch": m.branch,
        }
        for m in result.matches
    ]


def error_row(spec: QuerySpec, message: str) -> dict[str, Any]:
    return {"query_id": spec.query_id, "query": spec.query, ERROR_COLUMN: message}


def table(rows: Iterable[dict[str, Any]], per_file: bool, with_errors: bool = False) -> pa.Table:
    """`rows` as one Arrow table of the batch's schema (missing values are nulls)."""
    s = schema(per_file, with_errors)
    rows = list(rows)
    return pa.Table.from_pydict({name: [r.get(name) for r in rows] for name in s.names}, schema=s)


def _file_match_count(f: dict[str, Any]) -> int:
    """A presented file's match ranges: its name's and its chunks'."""
    return len(f["fileName"]["matchRanges"]) + sum(len(c["matchRanges"]) for c in f.get("chunks", []))
