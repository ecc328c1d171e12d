"""A real PostgreSQL server for the store's tests: initdb into a temporary folder, `postgres`
listening on 127.0.0.1 on a free port (and a socket in that folder), stopped by its PID.

PostgreSQL refuses to run as root, so under root (CI, this machine) initdb and postgres run as
the ``postgres`` user through ``setpriv`` (which execs: the PID we hold is the postmaster's).
The server keeps PostgreSQL's durability defaults (`DURABLE`), which a production server must
keep too (docs/operations.md, The state database): the tests kill server processes, and with
``synchronous_commit = off`` the crash recovery that follows drops transactions whose COMMIT had
already returned (test_crash_mid_write lost the 10 rows committed just before the kill in about
one run in ten). Only initdb skips its fsync (a throwaway cluster). Every wait is bounded.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

from tests.ports import free_port as _free_port

BIN_DIRS = ("/usr/local/bin", "/usr/lib/postgresql/15/bin")

#: PostgreSQL's defaults, said explicitly so that nobody trades them for speed here again
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def find_binary(name: str) -> str | None:
    for folder in BIN_DIRS:
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK):
            return path
    return shutil.which(name)


def missing_reason() -> str | None:
    """Why the tests cannot start PostgreSQL here (None when they can)."""
    absent = [n for n in ("initdb", "postgres") if find_binary(n) is None]
    if absent:
        return f"PostgreSQL binaries not found ({', '.join(absent)} in {' or '.join(BIN_DIRS)} or on PATH)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run PostgreSQL as"
    return None


class PostgresServer:
    """One throwaway server; `database()` makes a new empty database and returns its URL."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="codesearch-pg-")
        self.data = os.path.join(self.root, "data")
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]

    def start(self, timeout: float = 120.0) -> None:
        initdb = [find_binary("initdb") or "initdb", "-D", self.data, "-U", "postgres", "--auth=trust"]
        subprocess.run(
            [*self._as_user, *initdb, "-E", "UTF8", "--locale=C", "--no-sync"],
            check=True,
            capture_output=True,
            timeout=timeout,
        )
        settings = {**DURABLE, "shared_buffers": "16MB", "max_connections": "40", "listen_addresses": "127.0.0.1"}
        cmd = [find_binary("postgres") or "postgres", "-D", self.data, "-p", str(self.port), "-k", self.root]
        for key, value in settings.items():
            cmd += ["-c", f"{key}={value}"]
        self.process = subprocess.Popen(
            [*self._as_user, *cmd], stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.root, "log"), "wb")
        )
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL did not start: {self.log()[-2000:]}") from None
                time.sleep(0.1)

    def log(self) -> str:
        try:
            with open(os.path.join(self.root, "log"), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def dsn(self, database: str) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database}"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def database(self, prefix: str = "t") -> str:
        """A new, empty database; its SQLAlchemy URL."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn("postgres"), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def crash_backend(self, pid: int, timeout: float = 120.0) -> None:
        """Kill server process `pid` with SIGKILL and return once the server is back from the
        crash recovery that follows. The postmaster notices the death only some time after the
        kill, and until it does it still accepts connections; so a witness session, opened
        before the kill, tells when it has: the reset ends every session. The first connection
        after that is served by the recovered server."""
        import psycopg

        deadline = time.monotonic() + timeout
        witness = psycopg.connect(self.dsn("postgres"), autocommit=True, connect_timeout=10)
        os.kill(pid, signal.SIGKILL)
        try:
            while True:
                witness.execute("SELECT 1")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL did not reset after its process {pid} was killed")
                time.sleep(0.05)
        except psycopg.OperationalError:
            pass  # the reset ended the witness's session
        finally:
            witness.close()
        while True:
            try:
                psycopg.connect(self.dsn("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:  # "in recovery mode", "not yet accepting connections"
                if time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL did not recover: {self.log()[-2000:]}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # "immediate" shutdown: a throwaway server needs no checkpoint
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)
