"""A process that writes to the state database and is killed (`kill -9`) by test_crash_mid_write.

    python -m tests.store.crash_writer pause DATA_DIR DATABASE_URL
        commits a connection and 10 repositories, then starts one `upsert_repos` of 100 more
        (one transaction, one INSERT per repository) and stops after the 50th INSERT, printing
        ``paused <PostgreSQL backend PID or 0>``, until it is killed (60 s at most).
    python -m tests.store.crash_writer loop DATA_DIR DATABASE_URL
        commits batches of 50 audit events (one transaction each, action ``batch-N``), printing
        N after each, until it is killed (30 s at most).

Every line is flushed at once: the test reads them to know where the writer is.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from sqlalchemy import event

from codesearch.hosts.base import HostRepo
from codesearch.store import Store
from codesearch.store.secret import ENV_VAR

ENV = {ENV_VAR: "test-secret"}
BEFORE, DURING, PAUSE_AT, BATCH = 10, 100, 50, 50


def repos(prefix: str, n: int) -> list[HostRepo]:
    return [
        HostRepo(
            name=f"github.com/acme/{prefix}-{i}",
            display_name=f"acme/{prefix}-{i}",
            code_host_type="github",
            clone_url=f"https://github.com/acme/{prefix}-{i}.git",
        )
        for i in range(n)
    ]


def pause(store: Store) -> None:
    store.upsert_connection("gh", "github", {"type": "github"})
    store.upsert_repos("gh", repos("before", BEFORE))
    inserts = 0

    def stop_half_way(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        nonlocal inserts
        if statement.lstrip().upper().startswith("INSERT INTO REPOS"):
            inserts += 1
            if inserts == PAUSE_AT:
                info = getattr(conn.connection.dbapi_connection, "info", None)
                print(f"paused {getattr(info, 'backend_pid', 0) or 0}", flush=True)
                time.sleep(60)
                sys.exit(3)  # not killed: the test failed to, say so by the exit code

    event.listen(store.engine, "after_cursor_execute", stop_half_way)
    store.upsert_repos("gh", repos("during", DURING), prune=False)


def loop(store: Store) -> None:
    deadline = time.monotonic() + 30
    n = 0
    while time.monotonic() < deadline:
        store.add_audit_events([{"actor": "w", "action": f"batch-{n}", "target": str(i)} for i in range(BATCH)])
        print(n, flush=True)
        n += 1


def main(argv: list[str]) -> None:
    mode, data_dir, url = argv
    with Store.open(data_dir, database_url=url, environ=ENV) as store:
        {"pause": pause, "loop": loop}[mode](store)


if __name__ == "__main__":
    main(sys.argv[1:])
