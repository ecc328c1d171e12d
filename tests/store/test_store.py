"""The state database (codesearch.store): migrations, connections, repos, jobs, users, API keys,
the server secret, search contexts, and concurrent use from threads and processes."""

from __future__ import annotations

import multiprocessing
import os
import stat
import threading
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, create_engine, insert, inspect, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex, CreateTable

from codesearch.errors import CodesearchError
from codesearch.hosts.base import HostRepo
from codesearch.store import (
    COMPLETED,
    FAILED,
    IN_PROGRESS,
    INDEX_FAILED,
    INDEX_JOB,
    INDEXED,
    LATEST_VERSION,
    MEMBER,
    MIGRATIONS,
    OWNER,
    PENDING,
    SYNC_FAILED,
    SYNC_JOB,
    SYNC_NEEDED,
    SYNCED,
    Backoff,
    Conflict,
    NotFound,
    SchemaTooNew,
    SearchContext,
    Store,
    StoreError,
    load_server_secret,
    migrate,
)
from codesearch.store import tables
from codesearch.store.migrations import current_version
from codesearch.store.secret import ENV_VAR, secret_path
from codesearch.store.store import make_engine

ENV = {ENV_VAR: "test-secret"}
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self, now: datetime = T0):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def store(tmp_path, clock):
    s = Store.open(tmp_path, environ=ENV, clock=clock)
    yield s
    s.close()


def repo(name: str, **kw) -> HostRepo:
    host, path = name.split("/", 1)
    return HostRepo(name=name, display_name=path, code_host_type=kw.pop("code_host_type", "github"),
                    clone_url=f"https://{name}.git", **kw)


def store_in(store: Store, *names: str, connection: str = "c") -> dict[str, int]:
    store.upsert_connection(connection, "github", {"type": "github"})
    return store.upsert_repos(connection, [repo(n) for n in names]).ids


# ----------------------------------------------------------------------------- migrations

def test_open_migrates_an_empty_database_and_reopening_is_idempotent(tmp_path):
    s = Store.open(tmp_path, environ=ENV)
    assert s.schema_version() == LATEST_VERSION == MIGRATIONS[-1][0]
    s.upsert_connection("c", "git", {"type": "git", "url": "file:///x"})
    s.close()
    assert os.path.exists(tmp_path / "codesearch.db")
    for _ in range(2):
        with Store.open(tmp_path, environ=ENV) as s:
            assert s.schema_version() == LATEST_VERSION
            assert [c.name for c in s.list_connections()] == ["c"]
            with s.engine.connect() as c:
                rows = c.execute(text("SELECT version FROM schema_version ORDER BY version")).scalars().all()
            assert rows == [m[0] for m in MIGRATIONS]  # each migration recorded once


def test_migrated_schema_is_the_schema_of_tables_py(store):
    """migrations.py (frozen steps) and tables.py (the latest shape) must agree."""
    insp = inspect(store.engine)
    assert set(insp.get_table_names()) == set(tables.metadata.tables)
    for name, table in tables.metadata.tables.items():
        db_cols = {c["name"]: c for c in insp.get_columns(name)}
        assert list(db_cols) == [c.name for c in table.columns], name
        for col in table.columns:
            assert db_cols[col.name]["nullable"] == col.nullable or col.primary_key, (name, col.name)
        want_indexes = {tuple(c.name for c in ix.columns) for ix in table.indexes}
        assert {tuple(ix["column_names"]) for ix in insp.get_indexes(name)} == want_indexes, name
        want_fks = {(fk.parent.name, fk.column.table.name, fk.ondelete) for fk in table.foreign_keys}
        got_fks = {(fk["constrained_columns"][0], fk["referred_table"], (fk.get("options") or {}).get("ondelete"))
                   for fk in insp.get_foreign_keys(name)}
        assert got_fks == want_fks, name


def test_a_database_newer_than_the_code_is_refused(tmp_path):
    Store.open(tmp_path, environ=ENV).close()
    engine = create_engine(f"sqlite:///{tmp_path / 'codesearch.db'}")
    with engine.begin() as c:
        c.execute(insert(tables.schema_version).values(version=LATEST_VERSION + 1, description="from the future",
                                                      applied_at=T0))
    engine.dispose()
    with pytest.raises(SchemaTooNew) as info:
        Store.open(tmp_path, environ=ENV)
    assert isinstance(info.value, StoreError) and isinstance(info.value, CodesearchError)
    assert "SQLite database codesearch.db" in str(info.value) and str(tmp_path) not in str(info.value)
    msg = str(info.value)
    assert f"version {LATEST_VERSION + 1}" in msg and f"up to {LATEST_VERSION}" in msg and "codesearch.db" in msg


def _add_column(conn):
    conn.execute(text("ALTER TABLE repos ADD COLUMN extra VARCHAR(10)"))


def _broken(conn):
    Table("half_done", MetaData(), Column("id", Integer, primary_key=True)).create(conn)
    raise RuntimeError("migration bug")


_NEXT = LATEST_VERSION + 1  # a migration after the real ones


@pytest.mark.parametrize("steps, expect_version, expect_extra", [
    ([MIGRATIONS], LATEST_VERSION, False),  # fresh → latest
    ([MIGRATIONS, MIGRATIONS + [(_NEXT, "add repos.extra", _add_column)]], _NEXT, True),  # latest → next later
    ([MIGRATIONS + [(_NEXT, "add repos.extra", _add_column)]], _NEXT, True),  # fresh → next in one go
    ([MIGRATIONS + [(_NEXT, "add repos.extra", _add_column)]] * 2, _NEXT, True),  # twice: nothing to do
])
def test_migrations_apply_in_order_and_only_once(tmp_path, steps, expect_version, expect_extra):
    engine = make_engine(f"sqlite:///{tmp_path / 'm.db'}")
    for migrations in steps:
        assert migrate(engine, migrations=migrations) == migrations[-1][0]
    with engine.connect() as c:
        assert current_version(c) == expect_version
        assert ("extra" in {col["name"] for col in inspect(c).get_columns("repos")}) == expect_extra
    engine.dispose()


def test_a_failing_migration_changes_nothing(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'm.db'}")
    migrate(engine, migrations=MIGRATIONS)
    with pytest.raises(RuntimeError, match="migration bug"):
        migrate(engine, migrations=MIGRATIONS + [(LATEST_VERSION + 1, "broken", _broken)])
    with engine.connect() as c:
        assert current_version(c) == LATEST_VERSION
        assert not inspect(c).has_table("half_done")  # DDL rolled back with the version row
    engine.dispose()


def test_schema_is_portable_to_postgresql():
    dialect = postgresql.dialect()
    for table in tables.metadata.sorted_tables:
        ddl = str(CreateTable(table).compile(dialect=dialect))
        assert "DATETIME" not in ddl  # timestamps are TIMESTAMP WITH TIME ZONE there
        for ix in table.indexes:
            str(CreateIndex(ix).compile(dialect=dialect))
    assert "TIMESTAMP WITH TIME ZONE" in str(CreateTable(tables.jobs).compile(dialect=dialect))


def test_database_url_is_used(tmp_path):
    other = tmp_path / "elsewhere.db"
    with Store.open(tmp_path / "data", environ={**ENV, "DATABASE_URL": f"sqlite:///{other}"}) as s:
        s.create_user("a@example.com")
    assert other.exists() and not (tmp_path / "data" / "codesearch.db").exists()
    with Store.open(tmp_path / "x", database_url=f"sqlite:///{other}", environ=ENV) as s:
        assert [u.email for u in s.list_users()] == ["a@example.com"]


def test_a_missing_database_driver_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError) as info:
        Store.open(tmp_path, database_url="postgresql+nosuchdriver://user:hunter2@db.example/cs", environ=ENV)
    msg = str(info.value)
    assert "db.example" in msg and "hunter2" not in msg
    with pytest.raises(StoreError, match="not a valid SQLAlchemy URL"):
        Store.open(tmp_path, database_url="not a url :: hunter2", environ=ENV)


def test_sqlite_runs_in_wal_mode_with_foreign_keys_and_busy_timeout(store, tmp_path):
    with store.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    assert (tmp_path / "codesearch.db-wal").exists()


# ----------------------------------------------------------------------------- connections

def test_connection_upsert_reports_new_and_changed_configs(store, clock):
    c, needs = store.upsert_connection("gh", "github", {"type": "github", "orgs": ["a"]})
    assert needs and c.sync_status == SYNC_NEEDED and c.synced_at is None and c.config == {"type": "github", "orgs": ["a"]}
    synced = store.update_connection_status("gh", SYNCED, config_hash=c.config_hash)
    assert synced.sync_status == SYNCED and synced.synced_at == clock.now
    same, needs = store.upsert_connection("gh", "github", {"orgs": ["a"], "type": "github"})  # key order irrelevant
    assert not needs and same.id == c.id and same.sync_status == SYNCED
    changed, needs = store.upsert_connection("gh", "github", {"type": "github", "orgs": ["a", "b"]})
    assert needs and changed.id == c.id and changed.sync_status == SYNC_NEEDED and changed.config_hash != c.config_hash
    # a sync that ran with the old config does not hide the change
    after = store.update_connection_status("gh", SYNCED, config_hash=c.config_hash)
    assert after.sync_status == SYNC_NEEDED
    with pytest.raises(NotFound, match="connection 'nope'"):
        store.get_connection("nope")


@pytest.mark.parametrize("before,after,needs_sync", [
    (1, 1, False),
    (1, 2, True),   # the kind's listing changed (an upgrade): listed again, once
    (2, 2, False),
    (2, 1, True),
])
def test_a_new_listing_version_is_a_change_of_the_connection(store, clock, before, after, needs_sync):
    config = {"type": "git", "url": "file:///srv/git/*"}
    c, _ = store.upsert_connection("local", "git", config, listing_version=before)
    store.update_connection_status("local", SYNCED, config_hash=c.config_hash)
    again, needs = store.upsert_connection("local", "git", config, listing_version=after)
    assert needs is needs_sync and (again.sync_status == SYNC_NEEDED) is needs_sync
    assert again.config == config  # the version is not stored as config


def test_deleting_a_connection_orphans_only_repos_no_other_connection_links(store, clock):
    store.upsert_connection("a", "github", {"n": 1})
    store.upsert_connection("b", "gitlab", {"n": 2})
    ids = store.upsert_repos("a", [repo("github.com/o/only-a"), repo("github.com/o/shared")]).ids
    store.upsert_repos("b", [repo("github.com/o/shared")])
    job = store.enqueue_sync_job("a")
    clock.advance(5)
    assert store.delete_connection("a") == [ids["github.com/o/only-a"]]
    assert store.get_repo(ids["github.com/o/only-a"]).orphaned_at == clock.now
    assert store.get_repo(ids["github.com/o/shared"]).orphaned_at is None
    assert store.connections_for_repo(ids["github.com/o/shared"]) == ["b"]
    with pytest.raises(NotFound):
        store.get_job(job.id)  # its sync jobs went with it
    with pytest.raises(NotFound):
        store.delete_connection("a")
    assert store.delete_connection("b") == [ids["github.com/o/shared"]]


def test_connections_due_for_sync(store, clock):
    store.upsert_connection("new", "git", {"a": 1})
    store.upsert_connection("fresh", "git", {"a": 2})
    store.update_connection_status("fresh", SYNCED)
    assert [c.name for c in store.connections_due_for_sync(3600)] == ["new"]
    job = store.enqueue_sync_job("new")
    assert store.connections_due_for_sync(3600) == []  # a pending job is enough
    store.claim_job(SYNC_JOB, "w")
    store.fail_job(job.id, "boom", retry=False)
    store.update_connection_status("new", SYNC_FAILED, error="boom")  # what the runtime does
    assert store.connections_due_for_sync(3600) == []  # failed recently: wait one interval ...
    store.upsert_connection("new", "git", {"a": 3})  # ... unless its config changes
    assert [c.name for c in store.connections_due_for_sync(3600)] == ["new"]
    store.update_connection_status("new", SYNC_FAILED, error="boom again")
    clock.advance(3601)
    assert {c.name for c in store.connections_due_for_sync(3600)} == {"new", "fresh"}


# ----------------------------------------------------------------------------- repos

def test_repo_ids_are_stable_across_relisting_and_changes_are_counted(store, clock):
    store.upsert_connection("c", "github", {})
    first = store.upsert_repos("c", [repo("github.com/o/a", stars=1), repo("github.com/o/b")])
    assert sorted(first.added) == sorted(first.ids.values()) == sorted(first.linked) and not first.updated
    clock.advance(10)
    again = store.upsert_repos("c", [repo("github.com/o/b"), repo("github.com/o/a", stars=2), repo("github.com/o/c")])
    assert again.ids["github.com/o/a"] == first.ids["github.com/o/a"]
    assert again.ids["github.com/o/b"] == first.ids["github.com/o/b"]
    assert again.updated == [first.ids["github.com/o/a"]] and again.added == [again.ids["github.com/o/c"]]
    assert again.linked == [again.ids["github.com/o/c"]]
    a = store.get_repo("github.com/o/a")
    assert a.stars == 2 and a.updated_at == clock.now and a.created_at == T0
    assert store.get_repo(first.ids["github.com/o/b"]).updated_at == T0  # untouched when unchanged


def test_relisting_without_a_repo_unlinks_and_orphans_it_and_listing_it_again_revives_it(store, clock):
    ids = store_in(store, "github.com/o/a", "github.com/o/b")
    clock.advance(1)
    r = store.upsert_repos("c", [repo("github.com/o/a")])
    assert r.unlinked == r.orphaned == [ids["github.com/o/b"]]
    assert store.get_repo(ids["github.com/o/b"]).orphaned_at == clock.now
    kept = store.upsert_repos("c", [repo("github.com/o/x")], prune=False)
    assert kept.unlinked == [] and store.get_repo("github.com/o/a").orphaned_at is None
    back = store.upsert_repos("c", [repo("github.com/o/a"), repo("github.com/o/b")])
    assert back.ids["github.com/o/b"] == ids["github.com/o/b"] and store.get_repo(ids["github.com/o/b"]).orphaned_at is None
    assert back.unlinked == [kept.ids["github.com/o/x"]]


def test_link_unlink_and_garbage_collection_after_the_grace_period(store, clock):
    ids = store_in(store, "github.com/o/a")
    store.upsert_connection("d", "github", {"d": 1})
    rid = ids["github.com/o/a"]
    assert store.link_repo(rid, "d") is True and store.link_repo(rid, "d") is False
    assert store.unlink_repo(rid, "c") is False  # still linked to d
    assert store.unlink_repo(rid, "d") is True
    assert store.orphaned_repos(grace_seconds=10) == []
    clock.advance(10)
    assert [r.id for r in store.orphaned_repos(grace_seconds=10)] == [rid]
    store.link_repo(rid, "c")  # a sync re-linked it meanwhile: the GC must not delete it
    assert store.delete_repo(rid, only_if_orphaned=True) is False
    store.unlink_repo(rid, "c")
    store.enqueue_index_job(rid)
    assert store.delete_repo(rid, only_if_orphaned=True) is True
    with pytest.raises(NotFound) as info:
        store.get_repo(rid)
    assert info.value.error_code == "REPOSITORY_NOT_FOUND" and info.value.status_code == 404
    assert store.list_jobs(repo_id=rid) == []
    assert store.repo_ids() == set()
    # ids are never reused, even for the highest id
    assert store.upsert_repos("c", [repo("github.com/o/new")]).ids["github.com/o/new"] > rid


def test_repo_fields_round_trip(store):
    store.upsert_connection("c", "github", {})
    store.upsert_repos("c", [repo("github.com/o/r", web_url="https://github.com/o/r", default_branch="main",
                                  fork=True, archived=True, public=False, topics=["x", "y"], size_bytes=12_000_000_000,
                                  pushed_at="2023-02-03T04:05:06Z", stars=7, external_id="99",
                                  file_url_template="https://github.com/o/r/blob/{branch}/{path}")])
    r = store.get_repo("github.com/o/r")
    assert (r.display_name, r.code_host_type, r.clone_url, r.default_branch) == ("o/r", "github", "https://github.com/o/r.git", "main")
    assert (r.fork, r.archived, r.public, r.topics, r.size_bytes, r.stars) == (True, True, False, ["x", "y"], 12_000_000_000, 7)
    assert r.pushed_at == datetime(2023, 2, 3, 4, 5, 6, tzinfo=timezone.utc)
    assert r.index_status == "NEW" and r.indexed_at is None and r.indexed_revisions == {}
    done = store.update_repo_index_status(r.id, INDEXED, revisions={"refs/heads/main": "abc"})
    assert done.index_status == INDEXED and done.indexed_at is not None and done.indexed_revisions == {"refs/heads/main": "abc"}
    bad = store.update_repo_index_status(r.id, INDEX_FAILED, error="clone failed")
    assert bad.last_error == "clone failed" and bad.indexed_at == done.indexed_at  # the old index stays served
    # mappings work as listings too
    store.upsert_repos("c", [{"name": "gitea.com/o/m", "code_host_type": "gitea", "clone_url": "https://gitea.com/o/m"}],
                       prune=False)
    assert store.get_repo("gitea.com/o/m").display_name == "o/m"


NAMES = ["github.com/acme/Zeta", "github.com/acme/alpha", "gitlab.com/grp/beta_1", "github.com/other/gamma%",
         "gitea.com/acme/delta"]
PUSHED = {"github.com/acme/Zeta": "2024-03-01T00:00:00Z", "github.com/acme/alpha": "2024-01-01T00:00:00Z",
          "gitlab.com/grp/beta_1": "2024-02-01T00:00:00Z", "github.com/other/gamma%": None,
          "gitea.com/acme/delta": "2023-12-01T00:00:00Z"}


@pytest.mark.parametrize("kw, want_names, want_total", [
    ({}, sorted(NAMES), 5),
    ({"direction": "desc"}, sorted(NAMES, reverse=True), 5),
    ({"per_page": 2}, sorted(NAMES)[:2], 5),
    ({"per_page": 2, "page": 3}, sorted(NAMES)[4:], 5),
    ({"per_page": 2, "page": 4}, [], 5),
    ({"sort": "pushed"}, ["gitea.com/acme/delta", "github.com/acme/alpha", "gitlab.com/grp/beta_1",
                          "github.com/acme/Zeta", "github.com/other/gamma%"], 5),  # never pushed: last
    ({"sort": "pushed", "direction": "desc"}, ["github.com/acme/Zeta", "gitlab.com/grp/beta_1", "github.com/acme/alpha",
                                               "gitea.com/acme/delta", "github.com/other/gamma%"], 5),
    ({"query": "ACME"}, sorted(n for n in NAMES if "acme" in n.lower()), 3),
    ({"query": "zeta"}, ["github.com/acme/Zeta"], 1),
    ({"query": "a%"}, ["github.com/other/gamma%"], 1),  # % and _ are literal, not wildcards
    ({"query": "a_1"}, ["gitlab.com/grp/beta_1"], 1),
    ({"query": "acme", "per_page": 1, "page": 2, "direction": "desc"}, [sorted(n for n in NAMES if "acme" in n)[1]], 3),
    ({"query": "nothing"}, [], 0),
    ({"connection": "second"}, ["github.com/acme/alpha"], 1),
])
def test_list_repos_pages_sorts_and_filters(store, kw, want_names, want_total):
    store.upsert_connection("c", "github", {})
    store.upsert_repos("c", [repo(n, pushed_at=PUSHED[n]) for n in NAMES])
    store.upsert_connection("second", "github", {"x": 1})
    store.upsert_repos("second", [repo("github.com/acme/alpha", pushed_at=PUSHED["github.com/acme/alpha"])])
    rows, total = store.list_repos(**kw)
    assert [r.name for r in rows] == want_names and total == want_total


@pytest.mark.parametrize("kw", [{"page": 0}, {"per_page": 0}, {"sort": "stars"}, {"direction": "up"}])
def test_list_repos_rejects_bad_arguments(store, kw):
    with pytest.raises(ValueError):
        store.list_repos(**kw)


def test_repos_due_for_index(store, clock):
    ids = store_in(store, "github.com/o/a", "github.com/o/b")
    a, b = ids["github.com/o/a"], ids["github.com/o/b"]
    assert [r.id for r in store.repos_due_for_index(3600)] == [a, b]
    store.update_repo_index_status(a, INDEXED)
    job = store.enqueue_index_job(b)
    assert store.repos_due_for_index(3600) == []
    store.claim_job(INDEX_JOB, "w")
    store.fail_job(job.id, "broken", retry=False)
    assert store.repos_due_for_index(3600) == []  # failed recently: wait one interval
    clock.advance(3601)
    assert [r.id for r in store.repos_due_for_index(3600)] == [a, b]
    store.upsert_repos("c", [repo("github.com/o/a")])  # b orphaned: not indexed any more
    assert [r.id for r in store.repos_due_for_index(3600)] == [a]


# ----------------------------------------------------------------------------- jobs

def test_job_lifecycle(store, clock):
    ids = store_in(store, "github.com/o/a", "github.com/o/b")
    j1 = store.enqueue_index_job(ids["github.com/o/a"])
    assert (j1.state, j1.attempts, j1.worker_id, j1.kind) == (PENDING, 0, None, INDEX_JOB)
    assert store.enqueue_index_job(ids["github.com/o/a"]).id == j1.id  # deduplicated
    clock.advance(1)
    j2 = store.enqueue_index_job(ids["github.com/o/b"])
    assert store.claim_job(SYNC_JOB, "w1") is None  # other kind
    got = store.claim_job(INDEX_JOB, "w1")
    assert got.id == j1.id and (got.state, got.attempts, got.worker_id, got.started_at) == (IN_PROGRESS, 1, "w1", clock.now)
    assert store.enqueue_index_job(ids["github.com/o/a"]).id == j1.id  # in progress counts too ...
    forced = store.enqueue_index_job(ids["github.com/o/a"], force=True)  # ... unless forced
    assert forced.id not in (j1.id, j2.id) and forced.state == PENDING
    assert store.claim_job(INDEX_JOB, "w2").id == j2.id  # oldest first
    assert store.complete_job(j1.id, worker_id="w2") is False  # not w2's job
    clock.advance(2)
    assert store.complete_job(j1.id, worker_id="w1") is True
    done = store.get_job(j1.id)
    assert (done.state, done.finished_at) == (COMPLETED, clock.now)
    assert store.complete_job(j1.id) is False  # only once
    assert [j.id for j in store.list_jobs(kind=INDEX_JOB)] == [forced.id, j2.id, j1.id]
    assert [j.id for j in store.list_jobs(state=IN_PROGRESS)] == [j2.id]
    with pytest.raises(NotFound, match="job 999"):
        store.get_job(999)
    with pytest.raises(NotFound, match="repository 999"):
        store.enqueue_index_job(999)


def test_failed_jobs_retry_with_backoff_then_fail(tmp_path, clock):
    store = Store.open(tmp_path, environ=ENV, clock=clock, max_attempts=3, retry_base_seconds=10, retry_max_seconds=15)
    store.upsert_connection("c", "github", {})
    job = store.enqueue_sync_job("c")
    delays = []
    for attempt in (1, 2):
        claimed = store.claim_job(SYNC_JOB, "w")
        assert claimed.id == job.id and claimed.attempts == attempt
        failed = store.fail_job(job.id, f"error {attempt}", worker_id="w")
        assert failed.state == PENDING and failed.error == f"error {attempt}"
        delays.append((failed.next_attempt_at - clock.now).total_seconds())
        assert store.claim_job(SYNC_JOB, "w") is None  # not before the backoff
        clock.advance(delays[-1])
    assert delays == [10, 15]  # 10 × 2^(n-1), capped at 15
    assert store.claim_job(SYNC_JOB, "w").attempts == 3
    final = store.fail_job(job.id, "error 3")
    assert (final.state, final.error, final.finished_at) == (FAILED, "error 3", clock.now)
    assert store.claim_job(SYNC_JOB, "w") is None
    assert store.fail_job(job.id, "again") is None  # not in progress any more
    store.claim_job(SYNC_JOB, "w")
    assert store.prune_jobs(60) == 0
    clock.advance(61)
    assert store.prune_jobs(60) == 1 and store.list_jobs() == []
    store.close()


def test_stale_in_progress_jobs_are_requeued(store, clock):
    ids = store_in(store, "github.com/o/a", "github.com/o/b")
    a = store.enqueue_index_job(ids["github.com/o/a"])
    b = store.enqueue_index_job(ids["github.com/o/b"])
    store.claim_job(INDEX_JOB, "dead")
    store.claim_job(INDEX_JOB, "alive")
    clock.advance(50)
    assert store.heartbeat_job(b.id, "alive") is True
    assert store.heartbeat_job(b.id, "someone-else") is False
    clock.advance(20)
    requeued = store.requeue_stale_jobs(60)
    assert [j.id for j in requeued] == [a.id] and requeued[0].state == PENDING
    assert "timed out" in requeued[0].error and "dead" in requeued[0].error
    assert store.heartbeat_job(a.id, "dead") is False and store.complete_job(a.id, "dead") is False
    assert store.get_job(b.id).state == IN_PROGRESS
    assert [j.id for j in store.requeue_stale_jobs(0)] == [b.id]  # start-up: take everything back
    clock.advance(store.retry_max_seconds)
    assert {store.claim_job(INDEX_JOB, "new").id for _ in range(2)} == {a.id, b.id}
    assert [j.id for j in store.release_worker_jobs("new", "actor died")] == sorted([a.id, b.id])
    assert store.get_job(a.id).error == "actor died"


def _claim_all(store: Store, worker: str) -> list[int]:
    got = []
    while (job := store.claim_job(INDEX_JOB, worker)) is not None:
        got.append(job.id)
        assert store.complete_job(job.id, worker)
    return got


def _enqueue_jobs(store: Store, n: int) -> set[int]:
    store.upsert_connection("c", "github", {})
    ids = store.upsert_repos("c", [repo(f"github.com/o/r{i}") for i in range(n)]).ids
    return {store.enqueue_index_job(rid).id for rid in ids.values()}


def test_concurrent_claims_from_threads_take_each_job_once(store):
    want = _enqueue_jobs(store, 120)
    results: dict[str, list[int]] = {}

    def run(name):
        results[name] = _claim_all(store, name)

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    claimed = [j for got in results.values() for j in got]
    assert len(results) == 8 and sorted(claimed) == sorted(want)  # every job, none twice
    assert all(j.state == COMPLETED and j.attempts == 1 for j in store.list_jobs(limit=1000))


def _process_worker(data_dir: str, name: str, start) -> list[int]:
    start.wait(30)
    with Store.open(data_dir, environ=ENV) as s:
        return _claim_all(s, name)


def test_concurrent_claims_from_processes_take_each_job_once(tmp_path):
    with Store.open(tmp_path, environ=ENV) as s:
        want = _enqueue_jobs(s, 150)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        start = manager.Event()
        with ctx.Pool(4) as pool:
            pending = [pool.apply_async(_process_worker, (str(tmp_path), f"p{i}", start)) for i in range(4)]
            start.set()
            results = [p.get(60) for p in pending]
    claimed = [j for got in results for j in got]
    assert sorted(claimed) == sorted(want) and len(claimed) == len(set(claimed))
    with Store.open(tmp_path, environ=ENV) as s:
        assert {j.state for j in s.list_jobs(limit=1000)} == {COMPLETED}


def _open_in_process(data_dir: str, start) -> int:
    start.wait(30)
    with Store.open(data_dir, environ={}) as s:
        s.create_user(f"u{os.getpid()}@example.com")
        return s.schema_version()


def test_several_processes_opening_a_new_data_dir_at_once(tmp_path):
    """Migrations run once, one server secret is generated, nobody fails on a lock."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        start = manager.Event()
        with ctx.Pool(4) as pool:
            pending = [pool.apply_async(_open_in_process, (str(tmp_path), start)) for _ in range(4)]
            start.set()
            assert [p.get(60) for p in pending] == [LATEST_VERSION] * 4
    with Store.open(tmp_path, environ={}) as s:
        users = s.list_users()
        assert len(users) == 4 and [u.role for u in users].count(OWNER) == 1
        with s.engine.connect() as c:
            assert c.exec_driver_sql("SELECT count(*) FROM schema_version").scalar() == LATEST_VERSION


# ----------------------------------------------------------------------------- users and API keys

def test_the_first_user_is_owner_and_emails_are_unique(store):
    first = store.create_user("  Ada@Example.com ", "Ada", role=MEMBER)
    second = store.create_user("bob@example.com", "Bob")
    third = store.create_user("cy@example.com", role=OWNER)
    assert (first.role, second.role, third.role) == (OWNER, MEMBER, OWNER)
    assert first.email == "ada@example.com" and store.find_user_by_email("ADA@example.com").id == first.id
    with pytest.raises(Conflict, match="ada@example.com"):
        store.create_user("ada@EXAMPLE.com")
    assert store.find_user_by_email("nobody@example.com") is None
    assert [u.id for u in store.list_users()] == [first.id, second.id, third.id]
    store.set_user_role(third.id, MEMBER)
    with pytest.raises(Conflict, match="last owner"):
        store.set_user_role(first.id, MEMBER)
    with pytest.raises(NotFound, match="user 42"):
        store.get_user(42)


def _db_bytes(data_dir) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data_dir.iterdir()) if p.name.startswith("codesearch.db"))


def test_api_keys_are_shown_once_and_stored_only_as_hmac(store, tmp_path, clock):
    import hashlib
    import hmac

    ada = store.create_user("ada@example.com")
    key_id, secret = store.create_api_key(ada.id, "laptop")
    assert secret.startswith("cs_") and len(secret) >= 40
    blob = _db_bytes(tmp_path)
    assert secret.encode() not in blob and secret[3:].encode() not in blob
    assert hmac.new(ENV[ENV_VAR].encode(), secret.encode(), hashlib.sha256).hexdigest().encode() in blob
    listed = store.list_api_keys(ada.id)
    assert [(k.id, k.name, k.created_at, k.last_used_at) for k in listed] == [(key_id, "laptop", T0, None)]
    assert not hasattr(listed[0], "key_hash") and secret not in repr(listed)
    _, other_secret = store.create_api_key(ada.id, "ci")
    assert other_secret != secret


def test_verify_api_key(store, clock):
    ada = store.create_user("ada@example.com")
    key_id, secret = store.create_api_key(ada.id, "k")
    clock.advance(5)
    assert store.verify_api_key(secret).id == ada.id
    assert store.list_api_keys(ada.id)[0].last_used_at == T0 + timedelta(seconds=5)
    clock.advance(1)
    store.verify_api_key(secret)  # within the resolution: no write
    assert store.list_api_keys(ada.id)[0].last_used_at == T0 + timedelta(seconds=5)
    clock.advance(store.last_used_resolution_seconds)
    store.verify_api_key(secret)
    assert store.list_api_keys(ada.id)[0].last_used_at == clock.now
    for bad in ["", "cs_", secret[:-1], secret + "x", secret.replace("cs_", "xx_"), "cs_" + "a" * 300, None, 12]:
        assert store.verify_api_key(bad) is None


def test_verification_depends_on_the_server_secret(tmp_path):
    with Store.open(tmp_path, environ=ENV) as s:
        uid = s.create_user("a@example.com").id
        _, secret = s.create_api_key(uid, "k")
    with Store.open(tmp_path, environ={ENV_VAR: "another-secret"}) as s:
        assert s.verify_api_key(secret) is None
    with Store.open(tmp_path, environ=ENV) as s:
        assert s.verify_api_key(secret).id == uid


def test_revoking_api_keys(store):
    owner = store.create_user("owner@example.com")
    ann = store.create_user("ann@example.com")
    bob = store.create_user("bob@example.com")
    ann_key, ann_secret = store.create_api_key(ann.id, "ann")
    bob_key, bob_secret = store.create_api_key(bob.id, "bob")
    owner_key, owner_secret = store.create_api_key(owner.id, "own")
    assert store.revoke_api_key(ann.id, bob_key) is False  # a member cannot revoke another's key
    assert store.revoke_api_key(ann.id, owner_key) is False
    assert store.verify_api_key(bob_secret).id == bob.id
    assert store.revoke_api_key(ann.id, ann_key) is True
    assert store.verify_api_key(ann_secret) is None  # revoked keys fail
    assert store.revoke_api_key(ann.id, ann_key) is False  # once
    assert store.list_api_keys(ann.id) == [] and store.list_api_keys(ann.id, include_revoked=True)[0].revoked_at
    assert store.revoke_api_key(owner.id, bob_key) is True  # owners may revoke any key
    assert store.verify_api_key(bob_secret) is None and store.verify_api_key(owner_secret).id == owner.id
    assert store.revoke_api_key(owner.id, 999) is False
    with pytest.raises(NotFound):
        store.revoke_api_key(999, owner_key)
    with pytest.raises(NotFound):
        store.create_api_key(999, "x")


# ----------------------------------------------------------------------------- the server secret

def test_server_secret_is_generated_once_with_0600_and_reused(tmp_path):
    first = load_server_secret(tmp_path, environ={})
    path = secret_path(tmp_path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len(first) == 64 and bytes.fromhex(first.decode())  # 32 random bytes, as hex
    assert load_server_secret(tmp_path, environ={}) == first
    assert load_server_secret(tmp_path / "other", environ={}) != first
    assert [p.name for p in tmp_path.iterdir()] == [".secret", "other"]  # no temporary files left


def test_server_secret_from_the_environment_wins(tmp_path):
    assert load_server_secret(tmp_path, environ={ENV_VAR: " from-env \n"}) == b"from-env"
    assert not os.path.exists(secret_path(tmp_path))
    generated = load_server_secret(tmp_path, environ={ENV_VAR: ""})
    # the file's content works as the variable: keys survive moving the secret to the environment
    assert load_server_secret(tmp_path / "x", environ={ENV_VAR: generated.decode()}) == generated


def test_server_secret_file_permissions_are_tightened(tmp_path):
    load_server_secret(tmp_path, environ={})
    os.chmod(secret_path(tmp_path), 0o644)
    load_server_secret(tmp_path, environ={})
    assert stat.S_IMODE(os.stat(secret_path(tmp_path)).st_mode) == 0o600


def test_api_keys_survive_a_restart_with_the_generated_secret(tmp_path):
    with Store.open(tmp_path, environ={}) as s:
        uid = s.create_user("a@example.com").id
        _, secret = s.create_api_key(uid, "k")
    with Store.open(tmp_path, environ={}) as s:
        assert s.verify_api_key(secret).id == uid


# ----------------------------------------------------------------------------- search contexts

def test_search_contexts_are_replaced_wholesale(store):
    store.replace_search_contexts([SearchContext("web", ["b", "a", "a"], "frontend"), SearchContext("all", ["a"])])
    assert store.find_search_context("web") == SearchContext("web", ["a", "b"], "frontend")
    assert [c.name for c in store.list_search_contexts()] == ["all", "web"]
    store.replace_search_contexts([SearchContext("web", ["c"])])
    assert store.list_search_contexts() == [SearchContext("web", ["c"], "")]
    assert store.find_search_context("all") is None
    store.replace_search_contexts([])
    assert store.list_search_contexts() == []


def test_errors_are_codesearch_errors_with_names():
    assert issubclass(NotFound, StoreError) and issubclass(Conflict, StoreError) and issubclass(StoreError, CodesearchError)
    e = NotFound("connection", "gh")
    assert str(e) == "connection 'gh' not found" and e.status_code == 404 and e.error_code == "NOT_FOUND"
    assert Conflict("x").status_code == 409


# ----------------------------------------------------------------------------- sign-in lock-outs

POLICY = Backoff(free=3, base_seconds=2.0, cap_seconds=30.0, forget_seconds=3600.0)


@pytest.mark.parametrize("failures,lock", [
    (0, 0), (1, 0), (3, 0),          # free
    (4, 2), (5, 4), (6, 8), (7, 16),  # doubling from the base
    (8, 30), (9, 30), (500, 30),      # capped (no overflow however many)
])
def test_backoff_lock_seconds(failures, lock):
    assert POLICY.lock_seconds(failures) == lock


def _attempt(store, email="a@example.com", address="10.0.0.1"):
    return store.begin_login_attempt([("account", email, POLICY), ("address", address, POLICY)])


def test_failed_sign_ins_lock_out_with_doubling_and_refusals_are_not_counted(store, clock):
    # (seconds to move the clock first, what begin_login_attempt answers)
    steps = [
        (0, (0, 0)), (0, (0, 0)), (0, (0, 0)),  # three free failures
        (0, (0, 2)),                            # the 4th is checked, and locks for 2 s if wrong
        (1, (1, 0)),                            # 1 s later: refused, 1 s left, not counted
        (1, (0, 4)),                            # the lock ended: the 5th is checked, next lock 4 s
        (3.5, (0.5, 0)),                        # refused
        (0.5, (0, 8)),                          # the 6th
    ]
    for advance, want in steps:
        clock.advance(advance)
        assert _attempt(store) == want
    clock.advance(8)
    store.end_login_attempt(reset=[("account", "a@example.com")], uncount=[("address", "10.0.0.1")])
    # the account starts again from zero; the address keeps its 6 failures minus the one that succeeded
    assert [_attempt(store, address="10.0.0.2") for _ in range(4)] == [(0, 0)] * 3 + [(0, 2)]
    clock.advance(2)
    assert _attempt(store, email="other@example.com") == (0, 8)  # address: 5 + 1


def test_lock_outs_are_per_counter_and_forgotten_after_a_quiet_day(store, clock):
    for _ in range(4):
        _attempt(store)
    assert _attempt(store)[0] == 2  # locked: account and address
    assert _attempt(store, email="b@example.com")[0] == 2  # another account, same address
    assert _attempt(store, address="10.0.0.9")[0] == 2  # same account, another address
    assert _attempt(store, email="b@example.com", address="10.0.0.9") == (0, 0)
    clock.advance(POLICY.forget_seconds)
    assert _attempt(store) == (0, 0)  # a fresh count
    with store.engine.connect() as c:
        rows = c.execute(text("SELECT key FROM login_failures")).scalars().all()
    assert len(rows) == 4 and not any("example.com" in k or "10.0.0" in k for k in rows)  # only HMACs stored


def test_lock_outs_are_shared_by_every_store_on_the_database_and_survive_a_restart(tmp_path, clock):
    with Store.open(tmp_path, environ=ENV, clock=clock) as first:
        for _ in range(4):
            _attempt(first)
    with Store.open(tmp_path, environ=ENV, clock=clock) as second:
        assert _attempt(second) == (2, 0)


def test_a_counter_that_forgets_sooner_keeps_the_sign_in_counters(store, clock):
    """OAuth registrations per address share the table and forget after an hour: counting one
    must not erase a sign-in counter that remembers a day."""
    daily = Backoff(free=3, base_seconds=2.0, cap_seconds=30.0, forget_seconds=86400.0)
    hourly = Backoff(free=2, base_seconds=3600.0, cap_seconds=3600.0, forget_seconds=3600.0)

    def sign_in():
        return store.begin_login_attempt([("account", "a@example.com", daily)])

    def register():
        return store.begin_login_attempt([("oauth-registration", "10.0.0.1", hourly)])

    for _ in range(4):
        sign_in()
    clock.advance(2 * 3600)
    assert register() == (0, 0)
    assert sign_in() == (0, 4)  # the 5th failure in a row, not a fresh count
    assert [register()[1] for _ in range(2)] == [0, 3600]  # the 3rd registration in a row is one too many
    clock.advance(3600)
    assert register() == (0, 0)  # after an hour's pause, a fresh count


def test_a_new_password_ends_the_account_lock_out(store, clock):
    user = store.create_user("a@example.com")
    for _ in range(4):
        _attempt(store)
    assert _attempt(store, address="10.0.0.5")[0] == 2
    store.set_user_password(user.id, "argon2-hash")
    assert _attempt(store, address="10.0.0.5") == (0, 0)


# ----------------------------------------------------------------------------- private data at rest

def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask():
    """Files created as the most careless umask would make them."""
    old = os.umask(0)
    yield
    os.umask(old)


def test_a_new_data_dir_is_private_whatever_the_umask(tmp_path, open_umask):
    data = tmp_path / "new" / "data"
    with Store.open(data, environ={}) as s:
        s.create_user("a@example.com")  # writes: the WAL and shared-memory files exist now
        assert _mode(data) == 0o700
        for name in ("codesearch.db", "codesearch.db-wal", "codesearch.db-shm", ".secret"):
            assert _mode(data / name) == 0o600, name


def test_an_existing_open_data_dir_is_tightened_and_keeps_its_data(tmp_path):
    with Store.open(tmp_path, environ={}) as s:
        uid = s.create_user("a@example.com").id
        _, key = s.create_api_key(uid, "k")
    os.chmod(tmp_path, 0o755)
    for name in ("codesearch.db", "codesearch.db-wal", "codesearch.db-shm", ".secret"):
        if (tmp_path / name).exists():
            os.chmod(tmp_path / name, 0o644)
    with Store.open(tmp_path, environ={}) as s:
        assert s.verify_api_key(key).id == uid
        assert _mode(tmp_path) == 0o700
        assert all(_mode(p) == 0o600 for p in tmp_path.iterdir() if p.name.startswith(("codesearch.db", ".secret")))


def test_recorded_errors_and_database_errors_carry_no_server_path(store, tmp_path):
    ids = store_in(store, "github.com/o/a")
    try:
        open(os.path.join(tmp_path, "index", "shard-7"), "rb")
    except OSError as e:
        real_failure = str(e)  # an OS error names the file it failed on
    assert str(tmp_path) in real_failure
    store.update_repo_index_status(ids["github.com/o/a"], INDEX_FAILED, error=real_failure)
    store.update_connection_status("c", SYNC_FAILED, error=real_failure)
    job = store.enqueue_index_job(ids["github.com/o/a"])
    store.claim_job(INDEX_JOB, "w")
    store.fail_job(job.id, real_failure, retry=False)
    shown = [store.get_repo(ids["github.com/o/a"]).last_error, store.get_connection("c").sync_error,
             store.get_job(job.id).error]
    assert shown == ["[Errno 2] No such file or directory: '<data dir>/index/shard-7'"] * 3
    assert str(tmp_path) not in store.database and store.database == "SQLite database codesearch.db"


def test_errors_of_a_local_repository_name_it_instead_of_its_folder(store, tmp_path):
    from codesearch.index.sources import GitSource

    folder = str(tmp_path.parent / "elsewhere" / "demo")  # outside the data directory
    store.upsert_connection("local", "git", {"type": "git", "url": "file://" + folder})
    rid = store.upsert_repos("local", [dict(name="git.local/demo", code_host_type="genericGitHost",
                                            clone_url="file://" + folder, local_path=folder)]).ids["git.local/demo"]
    try:
        GitSource(folder)
    except CodesearchError as e:
        real_failure = str(e)
    assert real_failure == f"{folder}: not a git repository"
    job = store.enqueue_index_job(rid)
    store.claim_job(INDEX_JOB, "w")
    store.fail_job(job.id, real_failure, retry=False)
    store.update_repo_index_status(rid, INDEX_FAILED, error=real_failure)
    assert store.get_job(job.id).error == store.get_repo(rid).last_error == "<git.local/demo>: not a git repository"


def test_sessions_are_keyed_by_auth_secret(tmp_path):
    """AUTH_SECRET validates session cookies: the same secret in every process accepts a cookie,
    another secret does not (without AUTH_SECRET it is derived from the server secret)."""
    with Store.open(tmp_path, environ={**ENV, "AUTH_SECRET": "one"}) as s:
        uid = s.create_user("a@example.com").id
        cookie, _session = s.create_web_session(uid, ttl_seconds=60)
        derived_cookie, _ = Store(s.engine, secret=b"test-secret").create_web_session(uid, ttl_seconds=60)
    for environ, accepted in (({**ENV, "AUTH_SECRET": "one"}, {cookie}), ({**ENV, "AUTH_SECRET": "two"}, set()),
                              (ENV, {derived_cookie})):
        with Store.open(tmp_path, environ=environ) as s:
            assert {c for c in (cookie, derived_cookie) if s.get_web_session(c) is not None} == accepted, environ
            with Store.open(tmp_path, environ=environ) as again:  # another process, the same key
                assert s.auth_key("csrf") == again.auth_key("csrf")


def test_chat_follow_ups_are_numbered_in_order_and_sharing_switches_visibility(store):
    user = store.create_user("asker@example.com", "Asker")
    chat = store.create_chat("first?", "first answer", user_id=user.id)
    assert store.list_chat_turns(chat.id) == []
    second = store.add_chat_turn(chat.id, "second?", "second answer", model={"model": "m"},
                                 steps=[{"tool": "grep", "arguments": {}, "output": "x", "is_error": False}])
    third = store.add_chat_turn(chat.id, "third?", "", status="FAILED", error="model down")
    assert (second.position, third.position) == (1, 2)
    turns = store.list_chat_turns(chat.id)
    assert [(t.position, t.question, t.answer, t.status, t.error) for t in turns] == [
        (1, "second?", "second answer", "COMPLETED", None), (2, "third?", "", "FAILED", "model down")]
    assert turns[0].steps[0]["tool"] == "grep" and turns[0].model == {"model": "m"}
    assert store.get_chat(chat.id).answer == "first answer"  # the chat row keeps the first turn
    with pytest.raises(NotFound):
        store.add_chat_turn("no-such-chat", "q?")
    with pytest.raises(ValueError, match="status"):
        store.add_chat_turn(chat.id, "q?", status="DONE")
    assert store.set_chat_visibility(chat.id, "PUBLIC").visibility == "PUBLIC"
    assert store.get_chat(chat.id).visibility == "PUBLIC"
    with pytest.raises(ValueError, match="visibility"):
        store.set_chat_visibility(chat.id, "EVERYONE")
    with pytest.raises(NotFound):
        store.set_chat_visibility("no-such-chat", "PRIVATE")
