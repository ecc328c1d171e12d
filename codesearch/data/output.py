"""Writing a batch's rows to one file as they arrive, in the format its name says: ``.parquet``,
``.csv`` or ``.jsonl``. A block is written and dropped before the next is read, so a batch of any
size goes to disk without being held in one process; the file appears under its name only once
complete (written beside it, then renamed), never half-written.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import IO, Any

import pyarrow as pa

from codesearch.errors import InvalidArgument

FORMATS = (".parquet", ".csv", ".jsonl")


def format_of(path: str) -> str:
    """The output format of `path` by its extension, or `InvalidArgument` naming the ones there are."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise InvalidArgument(
            f"{path}: the output's extension says its format: {', '.join(FORMATS)} (not {ext or 'none'})"
        )
    return ext


def check_writable(path: str) -> None:
    """`InvalidArgument` unless `path` can be created (before a batch spends its time)."""
    format_of(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InvalidArgument(f"{path}: no such directory {folder}")
    if not os.access(folder, os.W_OK):
        raise InvalidArgument(f"{path}: cannot write in {folder}")
    if os.path.isdir(path):
        raise InvalidArgument(f"{path} is a directory")


class RowWriter:
    """Rows of one schema into `path`: `write` each Arrow table, then `close` (or `abort`)."""

    def __init__(self, path: str, schema: pa.Schema):
        self.path = path
        self.format = format_of(path)
        self.schema = schema
        self.rows = 0
        fd, self.scratch = tempfile.mkstemp(
            prefix=".codesearch-batch-", suffix=self.format, dir=os.path.dirname(os.path.abspath(path))
        )
        os.close(fd)
        self._writer: Any = None
        self._text: IO[str] | None = None
        if self.format == ".parquet":
            import pyarrow.parquet as pq

            self._writer = pq.ParquetWriter(self.scratch, schema)
        elif self.format == ".csv":
            import pyarrow.csv as pacsv

            self._writer = pacsv.CSVWriter(self.scratch, schema)
        else:
            self._text = open(self.scratch, "w", encoding="utf-8")  # noqa: SIM115 - closed by close/abort

    def write(self, table: pa.Table) -> None:
        table = table.select(self.schema.names).cast(self.schema)
        self.rows += table.num_rows
        if self._text is not None:
            for row in table.to_pylist():
                self._text.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            self._writer.write_table(table)

    def close(self) -> None:
        """Finish the file and give it its name."""
        self._finish()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(self.scratch, 0o666 & ~umask)  # (a scratch file is private until it is the output)
        os.replace(self.scratch, self.path)

    def abort(self) -> None:
        """Drop what was written."""
        try:
            self._finish()
        finally:
            if os.path.exists(self.scratch):
                os.remove(self.scratch)

    def _finish(self) -> None:
        if self._text is not None:
            self._text.close()
        elif self._writer is not None:
            self._writer.close()
