"""The usage report (`codesearch.audit.usage`) against brute force: every column of every day is
the count a reader of the audit rows would make by hand, whatever the range, the day boundaries
(midnight UTC belongs to the day it starts) and the mix of actions, callers and credentials.

Also: the ranges the report accepts and the errors that name the wrong parameter, the CSV equal
to the JSON, and the query portable to PostgreSQL (compiled, as the schema test does)."""

from __future__ import annotations

import csv
import io
import random
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from sqlalchemy import case, distinct, func, select
from sqlalchemy.dialects import postgresql

from codesearch.audit import usage
from codesearch.errors import InvalidArgument
from codesearch.store import Store
from codesearch.store.audit import _matches
from codesearch.store.secret import ENV_VAR
from codesearch.store.tables import audit_events

ENV = {ENV_VAR: "test-secret"}
DAY0 = date(2026, 3, 1)
#: (action, via) pairs the random events draw from: what each column must and must not count.
KINDS = [
    ("search", "session"), ("search", "apikey"), ("search", ""), ("chat.ask", "session"), ("chat.ask", "apikey"),
    ("mcp.tool", "apikey"), ("mcp.tool", "oauth"), ("source.read", "apikey"), ("tree.read", "session"),
    ("login", ""), ("apikey.create", "session"), ("search.more", "apikey"), ("chat.read", "iap"),
]


def _brute(events: list[dict], first: date, last: date) -> tuple[list[dict], dict]:
    """What the report must say, counted from the rows one by one."""
    def via(e):
        return e["details"].get("via", "")

    def kind(e):
        out = set()
        if e["action"] == "search":
            out.add("searches")
        if e["action"] == "chat.ask":
            out.add("askQuestions")
        if e["action"] == "mcp.tool":
            out.add("mcpCalls")
        if via(e) == "apikey" and e["action"] != "mcp.tool":
            out.add("apiKeyCalls")
        return out

    days = []
    for i in range((last - first).days + 1):
        day = first + timedelta(days=i)
        todays = [e for e in events if e["at"].astimezone(UTC).date() == day]
        row = {"date": day.isoformat(),
               "activeUsers": len({e["actor_user_id"] for e in todays if e["actor_user_id"] is not None})}
        for name in ("searches", "askQuestions", "mcpCalls", "apiKeyCalls"):
            row[name] = sum(1 for e in todays if name in kind(e))
        days.append(row)
    inside = [e for e in events if first <= e["at"].astimezone(UTC).date() <= last]
    totals = {"activeUsers": len({e["actor_user_id"] for e in inside if e["actor_user_id"] is not None})}
    for name in ("searches", "askQuestions", "mcpCalls", "apiKeyCalls"):
        totals[name] = sum(d[name] for d in days)
    return days, totals


def _events(seed: int, n: int) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        action, via = rnd.choice(KINDS)
        user = rnd.choice([None, 1, 2, 3, 4, 5, 6, 7])
        day = DAY0 + timedelta(days=rnd.randrange(-3, 40))
        at = datetime(day.year, day.month, day.day, tzinfo=UTC) + rnd.choice([
            timedelta(0),  # midnight: the day it starts
            timedelta(microseconds=-1),  # the last instant of the day before
            timedelta(seconds=rnd.randrange(86_400)),
        ])
        if rnd.random() < 0.2:  # written in another zone: the same instant
            at = at.astimezone(timezone(timedelta(hours=-5)))
        out.append({"at": at, "actor_user_id": user, "actor": f"u{user}@example.com" if user else "anonymous",
                    "action": action, "target": rnd.choice(["=1+1", "-x", "q"]),
                    "details": {"via": via} if via else {}})
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    store = Store.open(tmp_path_factory.mktemp("usage"), environ=ENV)
    events = _events(seed=28, n=3000)
    store.add_audit_events(events)
    yield store, events
    store.close()


RANGES = [
    ("the whole data and beyond", DAY0 - timedelta(days=10), DAY0 + timedelta(days=50)),
    ("one day", DAY0 + timedelta(days=5), DAY0 + timedelta(days=5)),
    ("the first day with data, its eve excluded", DAY0 - timedelta(days=3), DAY0 - timedelta(days=2)),
    ("a week in the middle", DAY0 + timedelta(days=10), DAY0 + timedelta(days=16)),
    ("nothing in it", DAY0 + timedelta(days=200), DAY0 + timedelta(days=230)),
]


@pytest.mark.parametrize("name,first,last", RANGES, ids=[r[0] for r in RANGES])
def test_every_day_matches_a_count_by_hand(world, name, first, last):
    store, events = world
    report = usage.usage_report(store, usage.UsageRange(first, last))
    days, totals = _brute(events, first, last)
    assert report.days == days
    assert report.totals == totals
    assert len(report.days) == (last - first).days + 1  # every day, zeros included
    assert report.oldest_event_at == min(e["at"] for e in events)


def test_the_data_is_not_trivial(world):
    """The random events give every column something to count, and midnights to place."""
    _, events = world
    days, totals = _brute(events, DAY0 - timedelta(days=10), DAY0 + timedelta(days=50))
    assert totals["activeUsers"] == 7 and all(v > 50 for k, v in totals.items() if k != "activeUsers")
    assert sum(1 for e in events if e["at"].astimezone(UTC).time() == datetime.min.time()) > 100


def test_the_csv_says_what_the_json_says(world):
    store, _ = world
    report = usage.usage_report(store, usage.UsageRange(DAY0, DAY0 + timedelta(days=9)))
    rows = list(csv.reader(io.StringIO(report.csv())))
    assert rows[0] == list(usage.CSV_COLUMNS)
    assert [[r[0], *map(int, r[1:])] for r in rows[1:]] == [
        [d["date"], d["activeUsers"], d["searches"], d["askQuestions"], d["mcpCalls"], d["apiKeyCalls"]]
        for d in report.days
    ]
    body = report.json(90)
    assert (body["from"], body["to"], body["timeZone"], body["retentionDays"]) == (
        DAY0.isoformat(), (DAY0 + timedelta(days=9)).isoformat(), "UTC", 90)


def test_an_empty_log_reports_zeros(tmp_path):
    store = Store.open(tmp_path, environ=ENV)
    try:
        report = usage.usage_report(store, usage.UsageRange(DAY0, DAY0 + timedelta(days=1)))
        assert report.totals == dict.fromkeys(usage.LABELS, 0)
        assert [d["date"] for d in report.days] == ["2026-03-01", "2026-03-02"]
        assert report.oldest_event_at is None
    finally:
        store.close()


@pytest.mark.parametrize("via", ["apikey", "oauth", "session", "iap", ""])
def test_the_log_keeps_how_the_caller_signed_in(tmp_path, via):
    from codesearch.audit import AuditLog
    from codesearch.permissions import Identity

    store = Store.open(tmp_path, environ=ENV)
    try:
        user = store.create_user("ann@example.com", "Ann")
        log = AuditLog(lambda: store)
        log.record(Identity(user, via=via), "search", "q", regex=False, via="forged")  # the identity's word wins
        log.record(None, "search", "anonymous")
        assert log.flush() == 2
        events = {e.target: e.details for e in store.list_audit_events()[0]}
        assert events["q"] == ({"regex": False, "via": via} if via else {"regex": False})
        assert events["anonymous"] == {}
    finally:
        store.close()


def _recording(store) -> list[tuple[date, date]]:
    """The ranges `store` is asked to count from now on (the real store answers)."""
    asked: list[tuple[date, date]] = []
    real = store.count_audit_by_day

    def count(since, until, columns):
        asked.append((since.date(), (until - timedelta(days=1)).date()))
        return real(since, until, columns)

    store.count_audit_by_day = count
    return asked


def test_settled_days_are_counted_once_and_the_rest_every_time(tmp_path):
    """A day is kept once it is over (ten minutes after midnight UTC) and after the oldest
    event's day; today, the oldest day and days not asked for before are counted again."""
    store = Store.open(tmp_path, environ=ENV)
    try:
        events = [e for e in _events(seed=3, n=400) if e["at"].astimezone(UTC).date() >= DAY0]
        store.add_audit_events(events)
        now = datetime(2026, 3, 20, 0, 5, tzinfo=UTC)  # yesterday ended 5 minutes ago: not settled
        asked = _recording(store)
        r = usage.UsageRange(DAY0, date(2026, 3, 20))
        first = usage.usage_report(store, r, now=now)
        assert asked == [(DAY0, date(2026, 3, 20))]
        late = {"at": datetime(2026, 3, 19, 23, 59, 59, tzinfo=UTC), "actor_user_id": 99, "actor": "late@example.com",
                "action": "search", "target": "q", "details": {"via": "apikey"}}
        store.add_audit_events([late])
        asked.clear()
        second = usage.usage_report(store, r, now=now)
        assert asked == [(DAY0, DAY0), (date(2026, 3, 19), date(2026, 3, 20))]  # the oldest day, the unsettled
        days, totals = _brute([*events, late], r.first, r.last)
        assert (second.days, second.totals) == (days, totals) != (first.days, first.totals)
        asked.clear()
        wider = usage.usage_report(store, usage.UsageRange(DAY0 - timedelta(days=2), r.last), now=now)
        assert asked == [(DAY0 - timedelta(days=2), DAY0), (date(2026, 3, 19), date(2026, 3, 20))]
        assert wider.days[2:] == second.days
    finally:
        store.close()


def test_the_retention_removing_old_events_is_seen_at_once(tmp_path):
    store = Store.open(tmp_path, environ=ENV)
    try:
        events = _events(seed=5, n=600)
        store.add_audit_events(events)
        r = usage.UsageRange(DAY0 - timedelta(days=3), DAY0 + timedelta(days=39))
        now = datetime(2026, 6, 1, tzinfo=UTC)
        assert usage.usage_report(store, r, now=now).days == _brute(events, r.first, r.last)[0]  # all kept
        cut = datetime(2026, 3, 10, 13, 0, tzinfo=UTC)  # in the middle of a kept day
        assert store.prune_audit_events(cut) > 0
        left = [e for e in events if e["at"] >= cut]
        again = usage.usage_report(store, r, now=now)
        assert (again.days, again.totals) == _brute(left, r.first, r.last)
        store.prune_audit_events(datetime(2027, 1, 1, tzinfo=UTC))  # everything
        assert usage.usage_report(store, r, now=now).totals == dict.fromkeys(usage.LABELS, 0)
    finally:
        store.close()


TODAY = date(2026, 11, 29)
GOOD = [
    # (days, from, to) -> (first, last)
    ((None, None, None), (date(2026, 10, 31), TODAY)),  # 30 days, today included
    (("7", None, None), (date(2026, 11, 23), TODAY)),
    ((" 90 ", None, None), (date(2026, 9, 1), TODAY)),
    (("366", None, None), (date(2025, 11, 29), TODAY)),
    ((None, "2026-01-01", "2026-01-31"), (date(2026, 1, 1), date(2026, 1, 31))),
    ((None, "2026-05-05", "2026-05-05"), (date(2026, 5, 5), date(2026, 5, 5))),
    (("7", None, "2026-01-07"), (date(2026, 1, 1), date(2026, 1, 7))),  # days back from `to`
    ((None, "2026-11-01", None), (date(2026, 11, 1), TODAY)),
]


@pytest.mark.parametrize("given,expected", GOOD)
def test_a_range_is_whole_utc_days(given, expected):
    r = usage.parse_range(*given, now=TODAY)
    assert (r.first, r.last) == expected
    assert r.since == datetime(*expected[0].timetuple()[:3], tzinfo=UTC)
    assert r.until - r.since == timedelta(days=r.days)


BAD = [
    (("0", None, None), "days: must be 1 to 366, got 0"),
    (("367", None, None), "days: must be 1 to 366, got 367"),
    (("ten", None, None), "days: not a whole number of days: 'ten'"),
    ((None, "2026-13-01", None), "from: not a date (YYYY-MM-DD): '2026-13-01'"),
    ((None, None, "yesterday"), "to: not a date (YYYY-MM-DD): 'yesterday'"),
    ((None, "2026-02-01", "2026-01-01"), "from: 2026-02-01 is after to: 2026-01-01"),
    ((None, "2024-01-01", "2026-01-01"), "from/to: at most 366 days, got 732"),
]


@pytest.mark.parametrize("given,message", BAD, ids=[m for _, m in BAD])
def test_a_bad_range_names_the_parameter(given, message):
    with pytest.raises(InvalidArgument) as e:
        usage.parse_range(*given, now=TODAY)
    assert str(e.value) == message


def test_the_query_compiles_for_postgresql():
    day = func.to_char(func.timezone("UTC", audit_events.c.at), "YYYY-MM-DD")
    sums = [func.sum(case((_matches(c), 1), else_=0)) for c in usage.COLUMNS]
    stmt = select(day, func.count(distinct(audit_events.c.actor_user_id)), *sums).group_by(day)
    sql = str(stmt.compile(dialect=postgresql.dialect()))
    assert "timezone(" in sql and "->>" in sql and "GROUP BY" in sql
