"""The state database survives a crash in the middle of a transaction, on SQLite and on a real
PostgreSQL: a writer process (tests.store.crash_writer) is killed with SIGKILL half-way through a
multi-row write (or, on PostgreSQL, the server process of its connection is), and then the
database opens, is intact, shows every transaction committed before the kill whole and nothing of
the one cut, and takes the same write again."""

from __future__ import annotations

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

from codesearch.errors import StoreError
from codesearch.store import Store
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


def _wait_for_server(server) -> None:
    import psycopg

    deadline = time.monotonic() + WAIT
    while True:
        try:
            psycopg.connect(server.dsn("postgres"), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, "PostgreSQL did not recover from the killed backend"
            time.sleep(0.2)


def _open_after_recovery(data_dir: str, url: str) -> Store:
    """The store, once PostgreSQL is out of the crash recovery that a killed backend starts: the
    postmaster may notice the death only after `_wait_for_server` got its connection."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            return Store.open(data_dir, database_url=url, environ=w.ENV)
        except StoreError as e:
            if not any(s in str(e) for s in ("recovery mode", "starting up")) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _intact(store: Store) -> None:
    with store.engine.connect() as c:
        if c.dialect.name == "sqlite":
            assert c.execute(text("PRAGMA integrity_check")).scalar() == "ok"
            assert c.execute(text("PRAGMA foreign_key_check")).all() == []


@pytest.mark.parametrize(
    "backend,victim",
    [
        ("sqlite", "writer process"),  # SQLite runs inside the writer: this is the database's crash too
        ("postgresql", "writer process"),
        pytest.param(
            "postgresql",
            "server process of its connection",
            # Open defect (2026-11-29): in the full suite the store opened during or after the
            # postmaster's crash recovery once showed "recovery mode" and, retried, none of the
            # rows committed before the kill; alone it passed. Not understood yet: kept visible
            # as a non-strict xfail until it is (docs/operations.md claims only what is tested).
            marks=pytest.mark.xfail(strict=False, reason="PostgreSQL backend kill: recovery race under investigation"),
        ),
    ],
)
def test_a_write_killed_half_way_leaves_nothing_of_itself(request, backend, victim, tmp_path):
    url, server = new_database(request, tmp_path, backend)
    data_dir = str(tmp_path / "data")
    writer = Writer("pause", data_dir, url)
    backend_pid = int(writer.wait_for(lambda line: line.startswith("paused")).split()[1])
    if victim.startswith("server"):
        os.kill(backend_pid, signal.SIGKILL)  # the postmaster resets every session and recovers from its log
        _wait_for_server(server)
    writer.kill()

    with _open_after_recovery(data_dir, url) as store:
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
