"""The database engine: SQLAlchemy for any URL, with the SQLite settings the store relies on.

`make_engine` is how every `Store` (and the tests that build a database by hand) gets its engine:
on SQLite it sets WAL, foreign keys, the busy timeout and ``BEGIN IMMEDIATE`` for write
transactions (see the package docstring for why); any other URL (PostgreSQL) gets a plain
pooled engine. `describe_database` names the database in messages without its folder or password.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from codesearch.store.errors import StoreError

#: SQLite waits this long for a lock before giving up ("database is locked").
BUSY_TIMEOUT_MS = 30_000


def is_memory_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and (
        url.database in (None, "", ":memory:") or "mode=memory" in str(url.query.get("mode", ""))
    )


def describe_database(url: URL) -> str:
    """The database as messages name it: a SQLite file by its file name only (its folder is a
    server path, which no answer may carry), any other by its URL without the password."""
    if url.get_backend_name() == "sqlite":
        return "SQLite database " + (os.path.basename(url.database or "") if not is_memory_sqlite(url) else ":memory:")
    return url.render_as_string(hide_password=True)


def _enable_wal(cur: sqlite3.Cursor) -> None:
    """Put the database in WAL mode (a no-op once it is: the mode is stored in the file).

    Switching a new database to WAL needs its exclusive lock, and SQLite answers "database
    is locked" at once, without waiting on busy_timeout, when another process opening the
    same new file holds it. So wait here, for as long as busy_timeout would."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def make_engine(url: str) -> Engine:
    """An engine for `url`, with the SQLite settings of the package docstring when it is SQLite."""
    try:
        u = make_url(url)
    except ArgumentError:
        raise StoreError(
            "the database URL (DATABASE_URL) is not a valid SQLAlchemy URL, "
            "e.g. postgresql+psycopg://user:password@host/db"
        ) from None
    if u.get_backend_name() != "sqlite":
        try:
            return create_engine(u, pool_pre_ping=True)
        except (ImportError, NoSuchModuleError) as e:
            raise StoreError(
                f"database {u.render_as_string(hide_password=True)}: its driver is not installed "
                f"({e}); install it (e.g. pip install psycopg) or use another DATABASE_URL"
            ) from None
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000}}
    if is_memory_sqlite(u):
        kwargs["poolclass"] = StaticPool  # one shared connection: single-threaded use (tests) only
    engine = create_engine(u, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _enable_wal(cur)
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.execute("PRAGMA foreign_keys = ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Write transactions take the write lock up front, so they queue on busy_timeout
        # instead of failing when a read transaction would have to be upgraded.
        write = conn.get_execution_options().get("codesearch_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine
