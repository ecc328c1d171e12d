"""Saved insights in the state database (migration 9): the insight, its points, their counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, inspect

from codesearch.store import LATEST_VERSION, MIGRATIONS, InsightCount, NotFound, Store, migrate, tables
from codesearch.store.secret import ENV_VAR
from codesearch.store.store import make_engine
from tests.store.test_store import Clock

ENV = {ENV_VAR: "test-secret"}
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
JAN, FEB = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 2, 1, tzinfo=UTC)
QUERIES = [{"query": "oldclient", "isRegexEnabled": False, "isCaseSensitivityEnabled": False}]


@pytest.fixture
def store(tmp_path):
    s = Store.open(tmp_path, environ=ENV, clock=Clock(T0))
    yield s
    s.close()


@pytest.fixture
def users(store):
    return store.create_user("ann@example.com", "Ann"), store.create_user("bob@example.com", "Bob")


def _count(at, repo_id=1, query_index=0, n=3):
    return InsightCount(at, repo_id, f"example.com/r{repo_id}", query_index, "a" * 40, n, 1)


def test_an_insight_is_stored_as_given(store, users):
    ann, _ = users
    made = store.create_insight(ann.id, " Migration ", QUERIES, step="month", since=JAN,
                                repos=["example.com/r1"], repo_filter=None)
    got = store.get_insight(made.id)
    assert got == made
    assert (got.user_id, got.name, got.queries, got.repos, got.repo_filter, got.step, got.since) == (
        ann.id, "Migration", QUERIES, ["example.com/r1"], None, "month", JAN)
    assert (got.created_at, got.refreshed_at, got.error) == (T0, None, None)


def test_lists_are_per_user_or_everyones(store, users):
    ann, bob = users
    a = store.create_insight(ann.id, "b-ann", QUERIES, step="week", since=JAN)
    b = store.create_insight(bob.id, "a-bob", QUERIES, step="month", since=JAN, repo_filter="^example")
    assert [i.id for i in store.list_insights(ann.id)] == [a.id]
    assert [i.id for i in store.list_insights()] == [b.id, a.id]  # by name
    assert (store.count_insights(ann.id), store.count_insights(bob.id)) == (1, 1)


def test_a_point_is_added_whole_and_once(store, users):
    ann, _ = users
    i = store.create_insight(ann.id, "x", QUERIES, step="month", since=JAN)
    assert store.add_insight_point(i.id, JAN, [_count(JAN, 1), _count(JAN, 2, n=5)])
    assert store.add_insight_point(i.id, FEB, [])  # a point with no repository in scope is still a point
    assert not store.add_insight_point(i.id, JAN, [_count(JAN, 1, n=99)])  # the first one stays
    assert store.insight_points(i.id) == [JAN, FEB]
    assert [(c.at, c.repo_id, c.match_count) for c in store.insight_counts(i.id)] == [(JAN, 1, 3), (JAN, 2, 5)]
    assert store.get_insight(i.id).refreshed_at == T0
    with pytest.raises(ValueError, match="given for the point"):
        store.add_insight_point(i.id, FEB + timedelta(days=1), [_count(FEB)])


def test_errors_are_recorded_and_cleared_by_the_next_point(store, users):
    i = store.create_insight(users[0].id, "x", QUERIES, step="month", since=JAN)
    store.record_insight_error(i.id, "example.com/r1: git failed")
    assert store.get_insight(i.id).error == "example.com/r1: git failed"
    store.add_insight_point(i.id, JAN, [])
    assert store.get_insight(i.id).error is None


def test_deleting_an_insight_or_its_user_deletes_its_points(store, users):
    ann, bob = users
    a = store.create_insight(ann.id, "a", QUERIES, step="month", since=JAN)
    b = store.create_insight(bob.id, "b", QUERIES, step="month", since=JAN)
    for i in (a, b):
        store.add_insight_point(i.id, JAN, [_count(JAN)])
    assert store.delete_insight(a.id) and not store.delete_insight(a.id)
    assert (store.insight_points(a.id), store.insight_counts(a.id)) == ([], [])
    with pytest.raises(NotFound):
        store.get_insight(a.id)
    assert not store.add_insight_point(a.id, FEB, [])  # the insight is gone
    with store.engine.begin() as c:  # (accounts are deleted only as declined sign-ups: the cascade is the point)
        c.execute(delete(tables.users).where(tables.users.c.id == bob.id))
    assert store.list_insights() == [] and store.insight_counts(b.id) == []


@pytest.mark.parametrize("kwargs", [{"name": " "}, {"step": "fortnight"}, {"queries": []}])
def test_bad_values_are_programming_errors(store, users, kwargs):
    args = {"name": "x", "queries": QUERIES, "step": "month", **kwargs}
    with pytest.raises(ValueError):
        store.create_insight(users[0].id, args.pop("name"), args.pop("queries"), since=JAN, **args)


def test_migration_9_adds_the_tables_to_a_version_8_database(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    assert migrate(engine, migrations=[m for m in MIGRATIONS if m[0] <= 8]) == 8
    assert "insights" not in inspect(engine).get_table_names()
    assert migrate(engine) == LATEST_VERSION
    assert {"insights", "insight_points", "insight_counts"} <= set(inspect(engine).get_table_names())
    engine.dispose()
