"""The state database upgrades from every schema version the project has shipped, on SQLite and on a
real PostgreSQL: a database built at version k (the migrations 1..k) and holding a row in every
table opens with this codesearch, every row is still there, and its schema is the one a new
database gets. Versions are read from `MIGRATIONS`, so each new migration is tried from every
older version without touching this file."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from codesearch.store import LATEST_VERSION, MIGRATIONS, Store
from codesearch.store.engine import make_engine
from codesearch.store.secret import ENV_VAR
from tests.store.schema_rows import build_at, contents, encoded, fill, schema_of

pytestmark = pytest.mark.slow  # every shipped version on two backends, PostgreSQL started once per worker

ENV = {ENV_VAR: "test-secret"}
VERSIONS = [number for number, _, _ in MIGRATIONS]
_FRESH: dict[str, object] = {}


@pytest.fixture(params=["sqlite", "postgresql"])
def new_database(request, tmp_path):
    """A function giving the URL of a new, empty database on the backend of the test."""
    if request.param == "sqlite":
        return request.param, lambda name: f"sqlite:///{tmp_path / name}.db"
    server = request.getfixturevalue("postgres_server")
    return request.param, server.database


def fresh_schema(new_database) -> object:
    """The schema a new database gets on this backend (computed once per backend and worker)."""
    backend, make = new_database
    if backend not in _FRESH:
        engine = make_engine(make("fresh"))
        try:
            build_at(engine, LATEST_VERSION)
            with engine.connect() as c:
                _FRESH[backend] = schema_of(c)
        finally:
            engine.dispose()
    return _FRESH[backend]


def test_versions_are_numbered_one_to_latest():
    assert VERSIONS == list(range(1, LATEST_VERSION + 1))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_database_of_every_shipped_version_upgrades_with_its_rows(new_database, version, tmp_path):
    want_schema = fresh_schema(new_database)
    database_url = new_database[1](f"v{version}")
    engine = make_engine(database_url)
    try:
        build_at(engine, version)
        with engine.begin() as c:
            written = fill(c)
            before = encoded(c, written)
    finally:
        engine.dispose()
    assert set(written) >= {"users"}, "the filler wrote nothing"

    with Store.open(tmp_path / "data", database_url=database_url, environ=ENV) as store:
        assert store.schema_version() == LATEST_VERSION
        with store.engine.connect() as c:
            after = contents(c)
            applied = c.execute(text("SELECT version FROM schema_version ORDER BY version")).scalars().all()
            assert schema_of(c) == want_schema
        users = store.list_users()

    assert applied == VERSIONS
    for table, row in before.items():
        assert len(after[table]) == 1, f"{table}: {len(after[table])} rows after the upgrade from {version}"
        survived = {k: v for k, v in after[table][0].items() if k in row}
        assert survived == row, f"{table} changed in the upgrade from version {version}"
    assert [u.email for u in users] == ["owner@example.com"]  # and the code reads them

