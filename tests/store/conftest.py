"""A real PostgreSQL for the store's tests (`tests.store.postgres`): one server per test session
(per pytest worker), a new empty database per test. Tests that use it are skipped, saying why,
only when the PostgreSQL binaries are not on this machine."""

from __future__ import annotations

import pytest

from tests.store.postgres import PostgresServer, missing_reason


@pytest.fixture(scope="session")
def postgres_server():
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server):
    """The SQLAlchemy URL of a new, empty database on the session's server."""
    return postgres_server.database()
