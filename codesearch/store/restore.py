"""Restoring a backup (`codesearch.store.backup`) into an empty database, migrating it forward.

The restore is one transaction on the target database (SQLite and PostgreSQL both have
transactional DDL): it builds the schema of the backup's version with the migrations 1..k, loads
the rows table by table (parents first), sets the id generators past the ids the backup had
given, then runs the migrations k+1..N like any upgrade. Any error (a cut or rotten file, a row
the schema refuses) rolls all of it back: the target is left as it was.

Refused before anything is touched: a file that is not a backup, a backup of a newer file
format or schema version than this codesearch knows (restore it with that version or a newer
one), and a target that already holds a database unless ``replace`` is given (then its tables
are dropped first, in the same transaction).
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import zlib
from collections.abc import Generator
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Table, func, insert, select, text
from sqlalchemy import types as sqltypes
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from codesearch.store.backup import FORMAT, FORMAT_VERSION, BackupSummary, decode_value, reflect
from codesearch.store.engine import describe_database
from codesearch.store.errors import StoreError
from codesearch.store.files import FILE_MODE, private_dir
from codesearch.store.migrations import _PG_LOCK_KEY, LATEST_VERSION, MIGRATIONS, current_version
from codesearch.store.secret import secret_path
from codesearch.store.tables import schema_version as _schema_version

#: rows inserted per statement
BATCH = 500


def _lines(path: str) -> Generator[Any]:
    """The parsed lines of a backup file; a rotten or cut file is a `StoreError`."""
    name = os.path.basename(path)
    try:
        with gzip.open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                try:
                    yield json.loads(line)
                except ValueError:
                    raise StoreError(f"backup {name} is corrupt: line {number} is not JSON") from None
    except FileNotFoundError:
        raise StoreError(f"backup {name}: no such file") from None
    except (OSError, EOFError, zlib.error) as e:
        raise StoreError(f"backup {name} is corrupt or cut short ({e})") from None


def read_header(path: str) -> dict[str, Any]:
    """The header of the backup at `path`, checked: a backup, of a format and schema version
    this codesearch restores."""
    name = os.path.basename(path)
    lines = _lines(path)
    try:
        header = next(lines, None)
    finally:
        lines.close()
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise StoreError(f"{name} is not a codesearch backup (its first line has no format {FORMAT!r})")
    fmt, schema = header.get("formatVersion"), header.get("schemaVersion")
    if not isinstance(fmt, int) or not isinstance(schema, int) or schema < 1:
        raise StoreError(f"backup {name} is corrupt: its header has no valid formatVersion and schemaVersion")
    made_by = f" (made by codesearch {header.get('codesearch', '?')})"
    if fmt > FORMAT_VERSION:
        raise StoreError(
            f"backup {name} has file format {fmt}{made_by}; this codesearch reads up to {FORMAT_VERSION}: "
            "restore it with that codesearch or a newer one"
        )
    if schema > LATEST_VERSION:
        raise StoreError(
            f"backup {name} has schema version {schema}{made_by}; this codesearch knows versions up to "
            f"{LATEST_VERSION}: restore it with that codesearch or a newer one"
        )
    return header


def restore_from_file(engine: Engine, path: str, *, replace: bool = False) -> BackupSummary:
    """Restore the backup at `path` into the database behind `engine` (see the module docstring);
    returns what was loaded, by table (the schema version is the one the backup had)."""
    header = read_header(path)
    version = header["schemaVersion"]
    database = describe_database(engine.url)
    summary = BackupSummary(version, secret=str((header.get("secret") or {}).get("from", "none")))
    try:
        with engine.connect() as conn:
            conn.execution_options(codesearch_write=True)  # SQLite: BEGIN IMMEDIATE
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
                _clear(conn, database, replace=replace)
                _schema_version.create(conn)
                for _, _, step in MIGRATIONS[:version]:
                    step(conn)
                tables = {t.name: t for t in reflect(conn)}
                _load(conn, tables, path, summary)
                for number, description, step in MIGRATIONS[version:]:
                    step(conn)
                    conn.execute(
                        insert(_schema_version).values(
                            version=number, description=description, applied_at=datetime.now(UTC)
                        )
                    )
    except DBAPIError as e:
        raise StoreError(f"restoring into {database} failed, nothing was changed: {e.orig}") from None
    return summary


def _clear(conn: Connection, database: str, *, replace: bool) -> None:
    """Make sure the target is empty: refuse a database in use, or drop its tables when `replace`."""
    existing = reflect(conn)
    if not existing:
        return
    if not replace:
        found = current_version(conn)
        raise StoreError(
            f"{database} already holds a database (schema version {found}, {len(existing)} tables): "
            "restore into an empty one, or pass --replace to drop it first (stop the service before)"
        )
    for table in reversed(existing):
        table.drop(conn)
    if conn.dialect.name == "sqlite" and conn.dialect.has_table(conn, "sqlite_sequence"):
        conn.execute(text("DELETE FROM sqlite_sequence"))


def _load(conn: Connection, tables: dict[str, Table], path: str, summary: BackupSummary) -> None:
    name = os.path.basename(path)
    dialect = conn.dialect.name
    table: Table | None = None
    columns: list[Any] = []
    batch: list[dict[str, Any]] = []
    ended = False

    def flush() -> None:
        if table is not None and batch:
            conn.execute(insert(table), batch)
            batch.clear()

    lines = _lines(path)
    next(lines)  # the header, checked by read_header
    for line in lines:
        if ended:
            raise StoreError(f"backup {name} is corrupt: lines after its end")
        if isinstance(line, list):
            if table is None or len(line) != len(columns):
                raise StoreError(f"backup {name} is corrupt: a row outside a table or of the wrong length")
            batch.append({c.name: decode_value(c.type, v, dialect) for c, v in zip(columns, line, strict=True)})
            summary.rows[table.name] += 1
            if len(batch) >= BATCH:
                flush()
        elif isinstance(line, dict) and "table" in line:
            flush()
            table = tables.get(str(line["table"]))
            if table is None or not isinstance(line.get("columns"), list):
                version = summary.schema_version
                raise StoreError(
                    f"backup {name} is corrupt: table {line['table']!r} is not in schema version {version}"
                )
            unknown = [c for c in line["columns"] if c not in table.c]
            if unknown:
                raise StoreError(f"backup {name} is corrupt: table {table.name} has no columns {unknown}")
            columns = [table.c[c] for c in line["columns"]]
            summary.rows[table.name] = 0
        elif isinstance(line, dict) and line.get("end") is True:
            flush()
            if line.get("rows") != summary.rows:
                raise StoreError(f"backup {name} is corrupt: its rows do not add up to the counts at its end")
            _set_sequences(conn, tables, line.get("sequences") or {})
            ended = True
        else:
            raise StoreError(f"backup {name} is corrupt: an unexpected line")
    if not ended:
        raise StoreError(f"backup {name} is cut short: its last line (the row counts) is missing")


def _set_sequences(conn: Connection, tables: dict[str, Table], recorded: dict[str, int]) -> None:
    """Id generators past every id the backup holds or had given (ids are never reused)."""
    for table in tables.values():
        if "id" not in table.c or not isinstance(table.c.id.type, sqltypes.Integer):
            continue
        top = max(int(conn.scalar(select(func.max(table.c.id))) or 0), int(recorded.get(table.name, 0)))
        if top <= 0:
            continue
        if conn.dialect.name == "postgresql":
            seq = conn.scalar(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": table.name})
            if seq:
                conn.execute(text("SELECT setval(CAST(:s AS regclass), :v, true)"), {"s": seq, "v": top})
        elif conn.dialect.name == "sqlite" and conn.dialect.has_table(conn, "sqlite_sequence"):
            sql = "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = :t"
            if "AUTOINCREMENT" not in str(conn.scalar(text(sql), {"t": table.name}) or "").upper():
                continue
            updated = conn.execute(
                text("UPDATE sqlite_sequence SET seq = :v WHERE name = :t AND seq < :v"), {"t": table.name, "v": top}
            )
            if (
                updated.rowcount == 0
                and conn.scalar(text("SELECT count(*) FROM sqlite_sequence WHERE name = :t"), {"t": table.name}) == 0
            ):
                conn.execute(
                    text("INSERT INTO sqlite_sequence (name, seq) VALUES (:t, :v)"), {"t": table.name, "v": top}
                )


def restore_secret(data_dir: str, header: dict[str, Any], *, replace: bool = False, check_only: bool = False) -> str:
    """Put the backup's server secret file into `data_dir`; returns what was done, for the
    command's message. A different secret already there is refused unless `replace` (it would
    make the restored API keys and sealed tokens unusable, or the present ones). `check_only`:
    refuse or not, change nothing (run before the database is restored)."""
    entry = header.get("secret") or {}
    kind = entry.get("from")
    if kind == "environment":
        return f"the server secret came from {entry.get('variable')}: set it to the same value before starting"
    if kind != "file":
        return "the backup holds no server secret: API keys and linked accounts' tokens made before need the old one"
    value = str(entry.get("value") or "").strip()
    if not value:
        raise StoreError("the backup's server secret is empty")
    path = secret_path(private_dir(data_dir))
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            if f.read().strip() == value:
                return "the data directory's server secret is the backup's already"
        if not replace:
            raise StoreError(
                "the data directory has another server secret than the backup: pass --replace to put the "
                "backup's in its place (the present one is lost)"
            )
    if check_only:
        return ""
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(value + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return "the server secret was restored into the data directory"
