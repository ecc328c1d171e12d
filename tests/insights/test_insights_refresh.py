"""Saved insights get their points: the refresh counts what is missing, as its owner may see it,
and the scheduler's tick runs it (on a thread of its own) when points fall due."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from codesearch.insights import saved
from codesearch.insights.engine import RepoTarget, count_repository
from codesearch.insights.refresh import due_points, refresh_all, refresh_insight
from codesearch.insights.spec import points
from tests.insightworld import ALPHA_NAME, BETA_NAME, identity, make_service_world

MAY_15 = datetime(2024, 5, 15, tzinfo=UTC)
QUERIES = ["oldclient", "newclient", r"file:\.md$"]


@pytest.fixture
def world(tmp_path):
    w = make_service_world(str(tmp_path))
    w["store"].clock = lambda: MAY_15
    yield w
    w["store"].close()


def _create(w, user, **kw):
    args = {"name": "migration", "queries": QUERIES, "step": "month", "since": "2024-01-01", **kw}
    return saved.create(w["store"], identity(w["store"], user), now=MAY_15, **args)


def _engine(w, name, dates):
    rows = count_repository(RepoTarget(name, w["dirs"][name] + "/.git"), QUERIES, dates)
    return {(r.date, r.query_id): (r.commit, r.match_count, r.file_count) for r in rows}


def test_a_refresh_counts_every_due_point_once(world):
    store = world["store"]
    insight = _create(world, world["bob"], repos=[ALPHA_NAME, BETA_NAME])
    due = points("2024-01-01", MAY_15, "month")
    assert due_points(insight, MAY_15) == due and len(due) == 5
    assert refresh_insight(store, insight, world["data"]) == 5
    assert refresh_insight(store, insight, world["data"]) == 0
    assert store.insight_points(insight.id) == due
    want = {name: _engine(world, name, due) for name in (ALPHA_NAME, BETA_NAME)}
    got = store.insight_counts(insight.id)
    assert len(got) == 2 * 5 * len(QUERIES)
    for c in got:
        assert (c.commit_sha, c.match_count, c.file_count) == want[c.repo_name][(c.at, c.query_index)]


def test_only_repositories_the_owner_may_see_are_counted(world):
    store = world["store"]
    carol = _create(world, world["carol"], repo_filter="acme")  # beta is hidden from Carol
    bob = _create(world, world["bob"], repo_filter="acme")
    assert refresh_all(store, world["data"]) == {carol.id: 5, bob.id: 5}
    assert {c.repo_name for c in store.insight_counts(carol.id)} == {ALPHA_NAME}
    assert {c.repo_name for c in store.insight_counts(bob.id)} == {ALPHA_NAME, BETA_NAME}


def test_a_failing_repository_is_left_out_and_named(world):
    store = world["store"]
    insight = _create(world, world["bob"], repos=[ALPHA_NAME, BETA_NAME])

    def count(target, *args, **kwargs):
        if target.name == BETA_NAME:
            raise RuntimeError("the clone is damaged")
        return count_repository(target, *args, **kwargs)

    assert refresh_insight(store, insight, world["data"], count=count) == 5
    assert {c.repo_name for c in store.insight_counts(insight.id)} == {ALPHA_NAME}
    assert store.get_insight(insight.id).error == f"{BETA_NAME}: the clone is damaged"


def test_the_scheduler_adds_a_point_when_one_falls_due(tmp_path):
    from codesearch.runtime.scheduler import Scheduler

    w = make_service_world(str(tmp_path))
    w["store"].close()
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"connections": {"open": {"type": "git", "url": "file://" + w["dirs"][ALPHA_NAME]}}}))
    sched = Scheduler(str(cfg), w["data"])
    now = {"t": MAY_15}
    sched.store.clock = lambda: now["t"]
    sched.insights.interval_s = 0
    try:
        insight = saved.create(sched.store, identity(sched.store, w["ann"]), name="m", queries=QUERIES, step="month",
                               since="2024-01-01", repos=[ALPHA_NAME], now=MAY_15)
        assert sched.tick()["insights"] is True
        sched.insights.join(60)
        assert sched.store.insight_points(insight.id) == points("2024-01-01", MAY_15, "month")
        now["t"] = datetime(2024, 6, 2, tzinfo=UTC)  # June 1 is due now
        assert sched.tick()["insights"] is True
        sched.insights.join(60)
        assert sched.store.insight_points(insight.id)[-1] == datetime(2024, 6, 1, tzinfo=UTC)
        assert len(sched.store.insight_points(insight.id)) == 6
        june = [c for c in sched.store.insight_counts(insight.id) if c.at.month == 6]
        assert {(c.query_index, c.match_count) for c in june} == {
            (q, m) for (d, q), (_, m, _) in _engine(w, ALPHA_NAME, [datetime(2024, 6, 1, tzinfo=UTC)]).items()}
    finally:
        sched.close()
