"""Backing up the state database: one consistent, portable file, taken while the service runs.

A backup is a logical dump made through SQLAlchemy, not a copy of the database's own files:

* the same file format for SQLite and PostgreSQL, so a backup of one restores into the other
  (moving from the SQLite file to PostgreSQL is a backup and a restore);
* no outside tool: ``pg_dump`` must be at least the server's major version and is seldom
  installed next to the service, and a dump in its format could not be migrated by us;
* every table is read in one read-only transaction on a snapshot (SQLite in WAL mode: one read
  transaction; PostgreSQL: ``REPEATABLE READ, READ ONLY``), so writers go on while it runs and
  the backup holds each of their transactions whole or not at all;
* it carries its schema version, so `codesearch.store.restore` rebuilds that version's schema,
  loads the rows and migrates them forward like any older database.

The file is gzip-compressed JSON lines (`FORMAT` and `FORMAT_VERSION` in the first line, the
header; then per table a line naming it and its columns followed by one line per row; then a
last line with the row counts, whose absence means the file was cut short). gzip's CRC catches
rotten bytes. Values are written by column type: timestamps as ISO 8601 in UTC, JSON columns as
JSON, binary as base64, the rest as they are.

What a backup holds: every table of the state database (users, keys, sessions, connections with
their configuration, repositories, jobs, audit log, chats, ...) and, unless told otherwise, the
server secret file of the data directory (without it, restored API keys and sealed host tokens
cannot be verified or opened), so a backup file is as sensitive as the data directory: it is
written 0600. Not in it: the mirrors and the index (both rebuilt from the connections after a
restore), the config file (the operator's own) and secrets given in the environment.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, Protocol

from sqlalchemy import MetaData, Table, select, text
from sqlalchemy import types as sqltypes
from sqlalchemy.engine import Connection, Engine

from codesearch import environment
from codesearch.store.engine import describe_database
from codesearch.store.errors import StoreError
from codesearch.store.files import FILE_MODE
from codesearch.store.migrations import current_version
from codesearch.store.secret import ENV_VAR, secret_path

FORMAT = "codesearch-backup"
#: The layout of the file itself (not the schema's version, which the header also carries).
FORMAT_VERSION = 1
DB_FILE = "codesearch.db"


def database_url(data_dir: str, environ: Mapping[str, str] | None = None) -> str:
    """The state database of `data_dir`, as `Store.open` finds it: ``DATABASE_URL`` (or
    Sourcebot's split variables), else the SQLite file in the data directory."""
    environ = os.environ if environ is None else environ
    return environment.database_url(environ) or f"sqlite:///{os.path.join(data_dir, DB_FILE)}"


@dataclass
class BackupSummary:
    """What a backup or a restore did, for the command's message."""

    schema_version: int
    rows: dict[str, int] = field(default_factory=dict)
    secret: str = "none"  # "file": the secret file is in the backup; "environment": it is not

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


class Output(Protocol):
    """Where a backup is written (a file, a gzip file)."""

    def write(self, data: bytes, /) -> object: ...


# ---------------------------------------------------------------------------------------- values


def encode_value(column_type: sqltypes.TypeEngine[Any], value: Any) -> Any:
    """A column's value as JSON: timestamps ISO 8601 in UTC (naive ones are UTC), dates ISO 8601,
    decimals as text (exact), binary base64."""
    if value is None:
        return None
    if isinstance(column_type, sqltypes.DateTime) and isinstance(value, datetime):
        return (value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)).isoformat()
    if isinstance(value, date | Decimal):
        return str(value) if isinstance(value, Decimal) else value.isoformat()
    if isinstance(column_type, sqltypes._Binary):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def decode_value(column_type: sqltypes.TypeEngine[Any], value: Any, dialect: str) -> Any:
    """The inverse of `encode_value` for a column of `dialect` (SQLite keeps naive UTC)."""
    if value is None:
        return None
    if isinstance(column_type, sqltypes.DateTime):
        stamp = datetime.fromisoformat(value)
        stamp = stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
        return stamp.replace(tzinfo=None) if dialect == "sqlite" else stamp
    if isinstance(column_type, sqltypes.Date):
        return date.fromisoformat(value)
    if isinstance(column_type, sqltypes.Numeric) and not isinstance(column_type, sqltypes.Float):
        return Decimal(value)
    if isinstance(column_type, sqltypes._Binary):
        return base64.b64decode(value)
    return value


# ---------------------------------------------------------------------------------------- dump


def reflect(conn: Connection) -> list[Table]:
    """The database's tables as they are (whatever its schema version), parents before children."""
    md = MetaData()
    md.reflect(bind=conn)
    return [t for t in md.sorted_tables if not t.name.startswith("sqlite_")]


def sequences(conn: Connection, tables: list[Table]) -> dict[str, int]:
    """The last id each table's id generator gave (ids of deleted rows are never given again)."""
    if conn.dialect.name == "sqlite":
        if not conn.dialect.has_table(conn, "sqlite_sequence"):
            return {}
        return {str(name): int(seq) for name, seq in conn.execute(text("SELECT name, seq FROM sqlite_sequence"))}
    if conn.dialect.name != "postgresql":
        return {}
    found = {}
    for t in tables:
        if "id" not in t.c:
            continue
        seq = conn.scalar(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": t.name})
        if seq:
            last, called = conn.execute(text(f"SELECT last_value, is_called FROM {seq}")).one()
            if called:
                found[t.name] = int(last)
    return found


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """One read transaction on a snapshot of the whole database: SQLite (WAL) fixes it at the first
    read; PostgreSQL's REPEATABLE READ at the first statement. Writers are not blocked."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SET TRANSACTION READ ONLY"))
            yield conn


def _write_line(out: Output, obj: object) -> None:
    out.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n")


def write_backup(engine: Engine, out: Output, *, secret: dict[str, str] | None = None) -> BackupSummary:
    """Write the database behind `engine` to `out` (uncompressed JSON lines; `backup_to_file`
    compresses). `secret` goes into the header as it is (`secret_entry`)."""
    from codesearch import version as codesearch_version

    database = describe_database(engine.url)
    with snapshot(engine) as conn:
        schema = current_version(conn)
        if schema == 0:
            raise StoreError(f"{database} is empty (no schema yet): there is nothing to back up")
        tables = reflect(conn)
        _write_line(
            out,
            {
                "format": FORMAT,
                "formatVersion": FORMAT_VERSION,
                "schemaVersion": schema,
                "createdAt": datetime.now(UTC).isoformat(),
                "codesearch": codesearch_version(),
                "from": conn.dialect.name,
                "secret": secret or {"from": "none"},
            },
        )
        summary = BackupSummary(schema, secret=(secret or {}).get("from", "none"))
        for table in tables:
            columns = list(table.c)
            _write_line(out, {"table": table.name, "columns": [c.name for c in columns]})
            count = 0
            query = select(table).order_by(*(table.primary_key.columns or columns))
            for row in conn.execution_options(yield_per=1000).execute(query):
                _write_line(out, [encode_value(c.type, v) for c, v in zip(columns, row, strict=True)])
                count += 1
            summary.rows[table.name] = count
        _write_line(out, {"end": True, "rows": summary.rows, "sequences": sequences(conn, tables)})
    return summary


def secret_entry(data_dir: str, environ: Mapping[str, str] | None = None, *, include: bool = True) -> dict[str, str]:
    """What the backup says of the server secret: the file's text (``from: file``), or that it
    comes from the environment (not copied: the operator sets the same variable again), or that
    it was left out (``--without-secret``) or there is none yet."""
    environ = os.environ if environ is None else environ
    if (environ.get(ENV_VAR) or "").strip():
        return {"from": "environment", "variable": ENV_VAR}
    path = secret_path(data_dir)
    if not os.path.exists(path):
        return {"from": "none"}
    if not include:
        return {"from": "left out"}
    with open(path, encoding="utf-8") as f:
        return {"from": "file", "value": f.read().strip()}


def backup_to_file(engine: Engine, path: str, *, secret: dict[str, str] | None = None) -> BackupSummary:
    """`write_backup` into a new gzip file at `path` (mode 0600), written whole or not at all:
    a temporary file beside it is renamed into place once flushed to disk. An existing file is
    refused (a backup never overwrites another)."""
    path = os.path.abspath(path)
    if os.path.exists(path):
        raise StoreError(f"{os.path.basename(path)} exists already: choose a new file name for the backup")
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
                summary = write_backup(engine, out, secret=secret)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return summary
