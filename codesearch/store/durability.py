"""Whether a PostgreSQL server keeps what it acknowledges: the settings it must not turn off.

A commit the store saw succeed must still be there after any crash. PostgreSQL promises that
only with its defaults for three settings; each one turned off loses that promise in its own way:

* ``synchronous_commit = off``: COMMIT returns before its log record is written, so a crash of
  any server process (the postmaster then restarts every session and recovers from the log on
  disk) drops the last transactions the store was told were committed;
* ``fsync = off``: the log is never forced to disk, so a power loss or an OS crash drops
  committed transactions and may leave the database corrupt;
* ``full_page_writes = off``: a page half-written when the OS stops cannot be repaired from
  the log.

The store does not override the operator's server (``synchronous_commit`` may be set higher
on purpose, for replicas); `durability_warnings` names what is off, and `Store.open` logs it as
a warning, once per open. SQLite needs no check: the store sets its own pragmas
(`codesearch.store.engine`).
"""

from __future__ import annotations

import logging

from sqlalchemy.engine import Connection, Engine

log = logging.getLogger(__name__)

#: setting -> the value that breaks the promise, and what is lost then
UNSAFE = {
    "synchronous_commit": ("off", "a crash of a server process loses the last commits the service was told succeeded"),
    "fsync": ("off", "a power loss or OS crash loses committed transactions and may corrupt the database"),
    "full_page_writes": ("off", "a power loss or OS crash may leave pages torn beyond repair"),
}


def durability_warnings(conn: Connection) -> list[str]:
    """One sentence per durability setting that is off for this connection's session
    (server, database and role settings included); none on SQLite."""
    if conn.dialect.name != "postgresql":
        return []
    found = []
    for name, (bad, lost) in UNSAFE.items():
        value = conn.exec_driver_sql(f"SHOW {name}").scalar()
        if str(value).lower() == bad:
            found.append(f"{name} = {value}: {lost}")
    return found


def warn_if_not_durable(engine: Engine, database: str) -> None:
    """Log, as a warning for the operator, the settings of `durability_warnings`."""
    with engine.connect() as conn:
        warnings = durability_warnings(conn)
    for warning in warnings:
        log.warning("%s: PostgreSQL runs with %s; keep its default (on)", database, warning)
