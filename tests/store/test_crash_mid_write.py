"""The state database survives a crash in the middle of a transaction, on SQLite and on a real
PostgreSQL: a writer process (tests.store.crash_writer) is killed with SIGKILL half-way through a
multi-row write (or, on PostgreSQL, the server process of its connection is), and then the
database opens, is intact, shows every transaction committed before the kill whole and nothing of
the one cut, and takes the same write again."""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from sqlalchemy import text

from codesearch.store import Store
from codesearch.store.durability import UNSAFE, durability_warnings
from tests.store import crash_writer as w

pytestmark = pytest.mark.slow  # writer subprocesses and a real PostgreSQL

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT = 120.0  # bound on every wait (a loaded machine is slow to start a Python process)


class Writer:
    """The writer process and its lines (read by a thread, so every wait is bounded)."""

    def __init__(self, mode: str, data_dir: str, url: str):
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.store.crash_writer", mode, data_dir, url],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def wait_for(self, done) -> str:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None or time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"the writer stopped or hung before the moment: {self.process.stderr.read()[-3000:]}")
            if done(line):
                return line

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        assert self.process.wait(timeout=WAIT) == -signal.SIGKILL


def new_database(request, tmp_path, backend: str):
    """(URL of a new empty database of `backend`, the PostgreSQL server or None)."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path}/data/codesearch.db", None
    server = request.getfixturevalue("postgres_server")
    return server.database(), server


def _intact(store: Store) -> None:
    with store.engine.connect() as c:
        if c.dialect.name == "sqlite":
            assert c.execute(text("PRAGMA integrity_check")).scalar() == "ok"
            assert c.execute(text("PRAGMA foreign_key_check")).all() == []
        # PostgreSQL keeps a COMMIT that returned only with these on (the test server's, and a
        # production server's, settings: tests.store.postgres.DURABLE)
        assert durability_warnings(c) == []


@pytest.mark.parametrize(
    "backend,victim",
    [
        ("sqlite", "writer process"),  # SQLite runs inside the writer: this is the database's crash too
        ("postgresql", "writer process"),
        ("postgresql", "server process of its connection"),  # the postmaster resets and recovers from its log
    ],
)
def test_a_write_killed_half_way_leaves_nothing_of_itself(request, backend, victim, tmp_path):
    url, server = new_database(request, tmp_path, backend)
    data_dir = str(tmp_path / "data")
    writer = Writer("pause", data_dir, url)
    backend_pid = int(writer.wait_for(lambda line: line.startswith("paused")).split()[1])
    if victim.startswith("server"):
        server.crash_backend(backend_pid)
    writer.kill()

    with Store.open(data_dir, database_url=url, environ=w.ENV) as store:
        _intact(store)
        names = {r.name for r in store.repos_for_connection("gh")}
        assert names == {f"github.com/acme/before-{i}" for i in range(w.BEFORE)}, "half a transaction is visible"
        assert store.list_repos(per_page=500)[1] == w.BEFORE
        result = store.upsert_repos("gh", w.repos("during", w.DURING), prune=False)  # the lock is free again
        assert len(result.added) == w.DURING


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_batches_committed_until_a_kill_at_any_moment_are_whole(request, backend, tmp_path):
    url, _ = new_database(request, tmp_path, backend)
    data_dir = str(tmp_path / "data")
    writer = Writer("loop", data_dir, url)
    writer.wait_for(lambda line: line == "3")  # a few batches committed, the next one under way
    writer.kill()

    with Store.open(data_dir, database_url=url, environ=w.ENV) as store:
        _intact(store)
        events, total = store.list_audit_events(per_page=10_000)
        sizes = Counter(e.action for e in events)
        assert len(sizes) >= 4 and total == sum(sizes.values())
        assert set(sizes.values()) == {w.BATCH}, f"a batch is partly there: {sizes}"


@pytest.mark.parametrize(
    "setting,value,warned",
    [
        ("synchronous_commit", "off", True),  # a server process's crash loses acknowledged commits
        ("synchronous_commit", "local", False),  # flushed locally before COMMIT returns ("on": every other test)
    ],
)
def test_a_postgresql_database_that_may_lose_commits_is_named_in_a_warning(
    postgres_server, tmp_path, caplog, setting, value, warned
):
    import psycopg

    url = postgres_server.database()
    with psycopg.connect(postgres_server.dsn("postgres"), autocommit=True, connect_timeout=10) as c:
        c.execute(f'ALTER DATABASE "{url.rsplit("/", 1)[1]}" SET {setting} = {value}')
    with caplog.at_level(logging.WARNING, logger="codesearch.store.durability"):
        Store.open(str(tmp_path / "data"), database_url=url, environ=w.ENV).close()
    messages = [r.getMessage() for r in caplog.records if r.name == "codesearch.store.durability"]
    expected = f"{url}: PostgreSQL runs with {setting} = {value}: {UNSAFE[setting][1]}; keep its default (on)"
    assert messages == ([expected] if warned else [])
