"""The rows of a batch: the answer of each query as Arrow tables, one row per match or per file.

Through a service, a query's rows are made from its ``POST /api/search`` answer by the Python
client's own reading of it (`codesearch.client.results.SearchResult`: a match row is a `Match` of
``Client.search``, `rows_of`). Over an index, from the files the answer would hold, ranked and
capped, before they are presented (`Searcher.files_many`): each match range's line and column as
the chunks would place them (`codesearch.search.present.match_lines`), without building the JSON
and reading it back (`rows_of_files`: 10-20 % less CPU for a batch of capped queries). Either way the rows of a query
are what ``Client.search`` returns for it (tests/front/test_batch_queries.py holds the two to
that). Like ``Client.search``, a file matched by its name only (``file:`` alone) has no match row;
its file row (``per_file``) counts its name ranges.

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
from codesearch.search.document import FileMatch
from codesearch.search.present import match_lines

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


def rows_of_files(spec: QuerySpec, files: list[FileMatch], per_file: bool) -> list[dict[str, Any]]:
    """The rows of one query's files (`Searcher.files_many`), as `rows_of` reads them from the answer."""
    block = Block(per_file)
    block.add_files(spec, files)
    out: list[dict[str, Any]] = block.table().to_pylist()
    return out


class Block:
    """The rows of a block of queries, built column by column (one Python list per column, one
    Arrow table at the end), not as a dict per row: a batch of capped queries makes tens of
    thousands of rows, and dicts cost more to build and to read back than the columns."""

    def __init__(self, per_file: bool, with_errors: bool = False):
        self.schema = schema(per_file, with_errors)
        self.per_file = per_file
        self.columns: dict[str, list[Any]] = {name: [] for name in self.schema.names}
        self.rows = 0

    def add_rows(self, rows: list[dict[str, Any]]) -> None:
        """Rows given as dicts (`rows_of`, `error_row`); a column a row lacks is null."""
        for name, column in self.columns.items():
            column.extend(r.get(name) for r in rows)
        self.rows += len(rows)

    def add_files(self, spec: QuerySpec, files: list[FileMatch]) -> None:
        """The rows of one query's files (`Searcher.files_many`), as `rows_of` reads them from the
        answer: per match range its line (`present.match_lines`), or per file its range count."""
        c = self.columns
        repository, path, language, branch = c["repository"], c["path"], c["language"], c["branch"]
        before = len(path)
        if self.per_file:
            for fm in files:
                shard, doc = fm.shard, fm.doc
                repository.append(shard.repo(doc).name)
                path.append(shard.doc_path(doc))
                language.append(shard.language(doc))
                branch.append(fm.branches[0] if fm.branches else "")
                c["match_count"].append(fm.match_count)
        else:
            line_number, column, line = c["line_number"], c["column"], c["line"]
            for fm in files:
                shard, doc = fm.shard, fm.doc
                lines = match_lines(fm)
                if not lines:
                    continue
                n = len(lines)
                repository.extend([shard.repo(doc).name] * n)
                path.extend([shard.doc_path(doc)] * n)
                language.extend([shard.language(doc)] * n)
                branch.extend([fm.branches[0] if fm.branches else ""] * n)
                for number, col, text in lines:
                    line_number.append(number)
                    column.append(col)
                    line.append(text)
        added = len(path) - before
        c["query_id"].extend([spec.query_id] * added)
        c["query"].extend([spec.query] * added)
        if ERROR_COLUMN in c:
            c[ERROR_COLUMN].extend([None] * added)
        self.rows += added

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(self.columns, schema=self.schema)


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
