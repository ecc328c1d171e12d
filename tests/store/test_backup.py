"""`codesearch backup` / `codesearch restore` (codesearch.store.backup, .restore, codesearch.cli.backup):
round trips on SQLite and a real PostgreSQL (and from one to the other), a snapshot taken while
writers commit, older backups migrated forward, and every kind of bad file refused with nothing
changed."""

from __future__ import annotations

import gzip
import json
import os
import stat
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from sqlalchemy import JSON, Boolean, Date, DateTime, Float, LargeBinary, Numeric, Text, event, insert, text

from codesearch.cli import main
from codesearch.hosts.base import HostRepo
from codesearch.store import LATEST_VERSION, Store, StoreError
from codesearch.store import tables as t
from codesearch.store.backup import (
    FORMAT_VERSION,
    backup_to_file,
    decode_value,
    encode_value,
    reflect,
    secret_entry,
)
from codesearch.store.engine import make_engine
from codesearch.store.restore import restore_from_file
from codesearch.store.secret import ENV_VAR
from tests.store.schema_rows import build_at, contents, encoded, fill

pytestmark = pytest.mark.slow  # a real PostgreSQL (started once per worker), many small databases

ENV = {ENV_VAR: "test-secret"}


def sqlite_url(folder) -> str:
    os.makedirs(folder, exist_ok=True)
    return f"sqlite:///{folder}/codesearch.db"


@pytest.fixture
def new_db(request, tmp_path):
    """A function giving the URL of a new, empty database of a backend (sqlite or postgresql)."""
    names = iter(range(100))

    def make(backend: str) -> str:
        if backend == "sqlite":
            return sqlite_url(tmp_path / f"db{next(names)}")
        return request.getfixturevalue("postgres_server").database()

    return make


BACKENDS = ["sqlite", "postgresql"]


def populate(store: Store) -> None:
    """Rows of the kinds an operator cannot lose: users and keys, connections and repos, jobs,
    audit, a removed user (whose id must never be given again)."""
    owner = store.create_user("owner@example.com", "Owner")
    gone = store.create_user("gone@example.com", "Gone")
    store.create_api_key(owner.id, "ci")
    store.upsert_connection("gh", "github", {"type": "github", "repos": ["acme/app", "acme/lib"]})
    store.upsert_repos("gh", [HostRepo(name=f"github.com/acme/{n}", display_name=f"acme/{n}", code_host_type="github",
                                       clone_url=f"https://github.com/acme/{n}.git", topics=["x"]) for n in ("app", "lib")])
    store.enqueue_sync_job("gh")
    store.add_audit_events([{"actor": "cli", "action": "test", "target": "é ✓", "details": {"n": [1, None]}}])
    store.remove_user(gone.id)


def dump(url: str):
    engine = make_engine(url)
    try:
        with engine.connect() as c:
            return contents(c)
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    "source_backend,target_backend",
    [("sqlite", "sqlite"), ("postgresql", "postgresql"), ("sqlite", "postgresql"), ("postgresql", "sqlite")],
)
def test_round_trip_keeps_every_row_and_never_reuses_an_id(new_db, source_backend, target_backend, tmp_path):
    source, dest = new_db(source_backend), new_db(target_backend)
    with Store.open(tmp_path / "a", database_url=source, environ=ENV) as store:
        populate(store)

    engine = make_engine(source)
    try:
        made = backup_to_file(engine, str(tmp_path / "b.gz"))
    finally:
        engine.dispose()
    assert stat.S_IMODE(os.stat(tmp_path / "b.gz").st_mode) == 0o600
    engine = make_engine(dest)
    try:
        loaded = restore_from_file(engine, str(tmp_path / "b.gz"))
    finally:
        engine.dispose()

    assert made.rows == loaded.rows and made.rows["users"] == 1 and made.rows["repos"] == 2
    assert dump(dest) == dump(source)
    with Store.open(tmp_path / "a", database_url=dest, environ=ENV) as store:
        assert store.schema_version() == LATEST_VERSION
        assert store.create_user("new@example.com", "New").id == 3  # 2 was removed: not given again
        assert store.create_api_key(1, "next")[0] == 2
        assert {r.name for r in store.list_repos()[0]} == {"github.com/acme/app", "github.com/acme/lib"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_backup_is_one_snapshot_while_writers_commit(new_db, backend, tmp_path):
    """A writer commits a row into two tables (in one transaction) before each table is read:
    the backup holds as many of one as of the other (it read one snapshot, not table by table)."""
    url = new_db(backend)
    Store.open(tmp_path / "a", database_url=url, environ=ENV).close()
    reader, writer = make_engine(url), make_engine(url)
    commits = []

    def commit_one(conn, cursor, statement, *_):
        if statement.lstrip().upper().startswith("SELECT") and " FROM " in statement.upper():
            n = len(commits)
            with writer.connect() as c:
                c.execution_options(codesearch_write=True)
                with c.begin():
                    c.execute(insert(t.audit_events).values(at=_now(), actor="w", action="a", target=str(n), details={}))
                    c.execute(insert(t.login_failures).values(key=f"k{n}", failures=1, last_failure_at=_now()))
            commits.append(n)

    event.listen(reader, "before_cursor_execute", commit_one)
    try:
        summary = backup_to_file(reader, str(tmp_path / "b.gz"))
    finally:
        reader.dispose()
        writer.dispose()
    assert len(commits) > 5  # the writer did commit between the reads
    assert summary.rows["audit_events"] == summary.rows["login_failures"]
    assert summary.rows["audit_events"] < len(commits)


def _now():
    return datetime.now(UTC)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("version", [1])  # the oldest; every version is upgraded in test_schema_upgrades
def test_an_older_backup_is_migrated_forward_on_restore(new_db, backend, version, tmp_path):
    source, dest = new_db(backend), new_db(backend)
    engine = make_engine(source)
    try:
        build_at(engine, version)
        with engine.begin() as c:
            before = encoded(c, fill(c))
        made = backup_to_file(engine, str(tmp_path / "old.gz"))
    finally:
        engine.dispose()
    assert made.schema_version == version
    engine = make_engine(dest)
    try:
        restore_from_file(engine, str(tmp_path / "old.gz"))
        with engine.connect() as c:
            after = contents(c)
            assert c.scalar(text("SELECT max(version) FROM schema_version")) == LATEST_VERSION
    finally:
        engine.dispose()
    for table, row in before.items():
        assert [{k: v for k, v in r.items() if k in row} for r in after[table]] == [row], table


# ------------------------------------------------------------------------------ bad files


def _lines(path):
    with gzip.open(path, "rb") as f:
        return [json.loads(line) for line in f]


def _write(path, lines):
    with gzip.open(path, "wb") as f:
        for line in lines:
            f.write(json.dumps(line).encode() + b"\n")


def _header(**changes):
    def change(lines):
        lines[0].update(changes)
        return lines

    return change


def _flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


BAD_FILES = [
    # (case, how the good backup is spoiled, what the refusal says)
    ("newer schema", lambda p: _write(p, _header(schemaVersion=LATEST_VERSION + 1)(_lines(p))),
     f"schema version {LATEST_VERSION + 1}"),
    ("newer file format", lambda p: _write(p, _header(formatVersion=FORMAT_VERSION + 1)(_lines(p))),
     f"file format {FORMAT_VERSION + 1}"),
    ("not a backup", lambda p: _write(p, [{"hello": "world"}]), "not a codesearch backup"),
    ("not gzip", lambda p: p.write_bytes(b"id,name\n1,x\n"), "corrupt"),
    ("a rotten byte", _flip_a_byte, "corrupt|nothing was changed"),
    ("cut in the middle", lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size * 2 // 3]), "cut short"),
    ("its end line lost", lambda p: _write(p, _lines(p)[:-1]), "cut short"),
    ("a row lost", lambda p: _write(p, (lambda ls: ls[:2] + ls[3:])(_lines(p))), "do not add up"),
    ("a table it should not have", lambda p: _write(p, _lines(p)[:1] + [{"table": "nope", "columns": []}]),
     "'nope' is not in schema version"),
]


@pytest.fixture(scope="module")
def good_backup(tmp_path_factory):
    """A backup of a SQLite database with enough rows that a damaged middle is met after some
    rows were loaded (made once: each case spoils a copy)."""
    folder = tmp_path_factory.mktemp("good")
    with Store.open(folder / "a", environ=ENV) as store:
        populate(store)
        store.add_audit_events([{"actor": "cli", "action": "fill", "target": f"{i}" * 20} for i in range(300)])
    engine = make_engine(sqlite_url(folder / "a"))
    try:
        backup_to_file(engine, str(folder / "b.gz"))
    finally:
        engine.dispose()
    return folder / "b.gz"


@pytest.mark.parametrize("case,spoil,message", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_bad_backup_is_refused_and_changes_nothing(case, spoil, message, good_backup, tmp_path):
    bad = tmp_path / "b.gz"
    bad.write_bytes(good_backup.read_bytes())
    spoil(bad)
    target = make_engine(sqlite_url(tmp_path / "b"))
    try:
        with pytest.raises(StoreError, match=message):
            restore_from_file(target, str(bad))
        with target.connect() as c:
            assert reflect(c) == [], "a refused restore left tables behind"
    finally:
        target.dispose()


# ------------------------------------------------------------------------------ the commands


def test_the_commands_round_trip_the_secret_and_refuse_what_would_lose_data(tmp_path, capsys):
    a, b, file = str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "backup.gz")
    with Store.open(a, environ={}) as store:
        populate(store)
        _, key = store.create_api_key(1, "ops")
    assert main(["backup", file, "--data-dir", a]) == 0
    assert "to " + file in capsys.readouterr().out
    assert main(["backup", file, "--data-dir", a]) == 2  # never overwrites a backup
    assert "exists already" in capsys.readouterr().err

    assert main(["restore", file, "--data-dir", b]) == 0
    with Store.open(b, environ={}) as store:
        assert store.verify_api_key(key) is not None  # the secret came along: keys still work
        assert [e.action for e in store.list_audit_events(action="store.restore")[0]] == ["store.restore"]
    assert main(["restore", file, "--data-dir", b]) == 2  # a database is there already
    assert "--replace" in capsys.readouterr().err
    assert main(["restore", file, "--data-dir", b, "--replace"]) == 0

    c = str(tmp_path / "c")
    Store.open(c, environ={}).close()  # another data directory, with its own secret
    assert main(["restore", file, "--data-dir", c]) == 2
    assert "another server secret" in capsys.readouterr().err


def test_the_secret_is_left_out_when_asked_or_when_it_comes_from_the_environment(tmp_path):
    Store.open(tmp_path, environ={}).close()
    assert secret_entry(str(tmp_path), {})["from"] == "file"
    assert secret_entry(str(tmp_path), {}, include=False) == {"from": "left out"}
    assert secret_entry(str(tmp_path), ENV) == {"from": "environment", "variable": ENV_VAR}



VALUES = [
    # (column type, value as the database driver gives it, as the backup writes it)
    (DateTime(timezone=True), datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "2025-01-02T03:04:05.000006+00:00"),
    (DateTime(), datetime(2025, 1, 2, 3, 4, 5), "2025-01-02T03:04:05+00:00"),  # naive: UTC (SQLite)
    (Date(), date(2025, 1, 2), "2025-01-02"),
    (Numeric(10, 2), Decimal("12.25"), "12.25"),
    (Float(), 1.5, 1.5),
    (LargeBinary(), b"\x00\xff", "AP8="),
    (JSON(), {"a": [1, None, "é"]}, {"a": [1, None, "é"]}),
    (Boolean(), True, True),
    (Text(), "line\nline", "line\nline"),
]


@pytest.mark.parametrize("column_type,value,written", VALUES, ids=[type(v[0]).__name__ for v in VALUES])
def test_values_are_written_as_json_and_read_back(column_type, value, written):
    assert encode_value(column_type, value) == written
    assert json.loads(json.dumps(written)) == written
    back = decode_value(column_type, written, "postgresql")
    assert back == (value.replace(tzinfo=UTC) if isinstance(value, datetime) and value.tzinfo is None else value)
