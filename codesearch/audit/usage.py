"""The usage report for owners: active users, searches, Ask questions, MCP calls and API-key calls
per UTC day, counted from the audit log and nothing else (no telemetry leaves the server).

What each column counts (the audit actions of `codesearch.audit.actions.ACTIONS`):

* ``activeUsers``: the distinct accounts that left any audit event that day (a search, a file
  read, a question, an MCP call, a sign-in, a change in the settings, ...); anonymous visitors
  and the command line are no account and are not counted. The range's total is the distinct
  accounts over the whole range, not the sum of the days.
* ``searches``: ``search`` events: the search page, ``POST /api/search`` and
  ``/api/stream_search``, ``/api/find_definitions`` and ``/api/find_references``, whatever the
  credential. An MCP client's searches are MCP calls, not searches.
* ``askQuestions``: ``chat.ask`` events: a question asked in the web UI's chat or over
  ``POST /api/chat`` and ``/api/chat/blocking`` (a follow-up question is a question).
* ``mcpCalls``: ``mcp.tool`` events: every tool an MCP client called, whichever way it signed in
  (API key or OAuth).
* ``apiKeyCalls``: the other audited calls made with an API key (detail ``via=apikey``): scripts
  and integrations on the HTTP API. Calls that the audit log does not record (listing the
  repositories, the health check) are not counted.

A range is whole UTC days, ``from`` to ``to`` inclusive, at most `MAX_DAYS` of them (a year and a
day, so that a year back from any day fits); `parse_range` checks it. Every day of the range is
in the report, with zeros where nothing happened.

Counting a day's events is one pass over them (`Store.count_audit_by_day`, about a microsecond an
event); a year of a 200-person team is a few million events. A day that is over no longer
changes: events are written with the time they happen, within seconds (`SETTLED` is ten
minutes), and the retention only removes the oldest, up to a moment of the oldest day still
kept. So each process keeps the counts of settled days after the oldest event's day
(`DayCache`, per store) and counts only the others again: today, the oldest day, days not asked
for before. The numbers are still those of the rows: a kept day is one whose rows cannot change.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from codesearch import spreadsheet
from codesearch.errors import InvalidArgument
from codesearch.store.audit import DayCounts, EventCount

if TYPE_CHECKING:
    from codesearch.store import Store

#: The most days one report covers.
MAX_DAYS = 366
#: The ranges the page offers (days back from today, today included); 30 is the default.
PRESETS = (7, 30, 90, 365)
DEFAULT_DAYS = 30

#: A day's counts are kept (`DayCache`) once it ended this long ago: events are written within
#: seconds of happening (the audit log's queue is flushed every half second), never later.
SETTLED = timedelta(minutes=10)
#: Days kept per store, at most.
CACHE_DAYS = 2 * MAX_DAYS

#: The counted columns, in the order of the report, the CSV and the chart.
COLUMNS = (
    EventCount("searches", actions=("search",)),
    EventCount("askQuestions", actions=("chat.ask",)),
    EventCount("mcpCalls", actions=("mcp.tool",)),
    EventCount("apiKeyCalls", excluding=("mcp.tool",), via="apikey"),
)
#: Every column of a day, ``activeUsers`` first, with its label for people.
LABELS = {
    "activeUsers": "Active users",
    "searches": "Searches",
    "askQuestions": "Ask questions",
    "mcpCalls": "MCP calls",
    "apiKeyCalls": "API-key calls",
}
#: The CSV's header: one row per day.
CSV_COLUMNS = ("date", "active_users", "searches", "ask_questions", "mcp_calls", "api_key_calls")


@dataclass(frozen=True)
class UsageRange:
    """Whole UTC days, `first` to `last` inclusive."""

    first: date
    last: date

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    @property
    def since(self) -> datetime:
        return datetime.combine(self.first, time(), UTC)

    @property
    def until(self) -> datetime:
        return datetime.combine(self.last + timedelta(days=1), time(), UTC)


def today() -> date:
    return datetime.now(UTC).date()


def _day(value: str, name: str) -> date:
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise InvalidArgument(f"{name}: not a date (YYYY-MM-DD): {value[:40]!r}") from None


def parse_range(
    days: str | int | None = None, first: str | None = None, last: str | None = None, *, now: date | None = None
) -> UsageRange:
    """The range asked for: ``from``/``to`` dates (``to`` defaults to today, ``from`` to `days`
    before ``to``), or the last `days` days ending today (default `DEFAULT_DAYS`). `InvalidArgument`
    names the parameter that is wrong: not a date, not a number, ``from`` after ``to``, more than
    `MAX_DAYS` days."""
    now = now or today()
    n = DEFAULT_DAYS
    if days not in (None, ""):
        try:
            n = int(str(days).strip())
        except ValueError:
            raise InvalidArgument(f"days: not a whole number of days: {str(days)[:40]!r}") from None
        if not 1 <= n <= MAX_DAYS:
            raise InvalidArgument(f"days: must be 1 to {MAX_DAYS}, got {n}")
    end = _day(last, "to") if last else now
    start = _day(first, "from") if first else end - timedelta(days=n - 1)
    if start > end:
        raise InvalidArgument(f"from: {start.isoformat()} is after to: {end.isoformat()}")
    if (end - start).days + 1 > MAX_DAYS:
        raise InvalidArgument(f"from/to: at most {MAX_DAYS} days, got {(end - start).days + 1}")
    return UsageRange(start, end)


@dataclass(frozen=True)
class UsageReport:
    """Every day of `range` (zeros where nothing happened) and the range's totals."""

    range: UsageRange
    days: list[dict[str, Any]]
    totals: dict[str, int]
    oldest_event_at: datetime | None

    def json(self, retention_days: int, audit_logging: bool = True) -> dict[str, Any]:
        """The shape of ``GET /api/usage`` (docs/http-api.md#usage). `audit_logging` False
        (``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED=false``): nothing new is counted, the numbers are
        those of the events recorded before it was turned off (``auditLoggingEnabled``)."""
        return {
            "from": self.range.first.isoformat(),
            "to": self.range.last.isoformat(),
            "timeZone": "UTC",
            "days": self.days,
            "totals": self.totals,
            "retentionDays": retention_days,
            "auditLoggingEnabled": audit_logging,
            "oldestEventAt": self.oldest_event_at.isoformat() if self.oldest_event_at else None,
        }

    def csv(self) -> str:
        """One row per day (`CSV_COLUMNS`), text cells neutralised for spreadsheets."""
        keys = list(LABELS)
        return spreadsheet.csv_text(CSV_COLUMNS, ([d["date"], *(d[k] for k in keys)] for d in self.days))


class DayCache:
    """The counts of settled days of one store, kept by `usage_report` (see the module docstring):
    a day is settled `SETTLED` after it ends, and kept while it is after the oldest event's day
    (the retention removes events from that day on, never after it); at most `CACHE_DAYS`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._days: dict[date, DayCounts] = {}

    def get(self, days: list[date], keep_after: date | None) -> dict[date, DayCounts]:
        with self._lock:
            for d in [d for d in self._days if keep_after is None or d <= keep_after]:
                del self._days[d]
            return {d: self._days[d] for d in days if d in self._days}

    def put(self, counted: dict[date, DayCounts]) -> None:
        with self._lock:
            self._days.update(counted)
            for d in sorted(self._days)[: max(0, len(self._days) - CACHE_DAYS)]:
                del self._days[d]


_caches: weakref.WeakKeyDictionary[Store, DayCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def _cache_of(store: Store) -> DayCache:
    with _caches_lock:
        cache = _caches.get(store)
        if cache is None:
            cache = _caches[store] = DayCache()
        return cache


def _runs(days: list[date]) -> list[tuple[date, date]]:
    """`days` (in order) as runs of consecutive days, (first, last) each."""
    runs: list[tuple[date, date]] = []
    for d in days:
        if runs and runs[-1][1] + timedelta(days=1) == d:
            runs[-1] = (runs[-1][0], d)
        else:
            runs.append((d, d))
    return runs


def _count(store: Store, days: list[date]) -> dict[date, DayCounts]:
    """The counts of `days` from the store: one query per run of consecutive days; a day without
    events is counted too (as zeros), so that it can be kept."""
    out: dict[date, DayCounts] = {}
    for first, last in _runs(days):
        r = UsageRange(first, last)
        found = {d.day: d for d in store.count_audit_by_day(r.since, r.until, COLUMNS)}
        for i in range(r.days):
            d = first + timedelta(days=i)
            out[d] = found.get(d) or DayCounts(d, set(), {c.name: 0 for c in COLUMNS})
    return out


def usage_report(store: Store, r: UsageRange, *, now: datetime | None = None) -> UsageReport:
    """The report of `r` from `store`'s audit log (see the module docstring): settled days from
    the store's `DayCache` when counted before, the others from the store (and kept if settled)."""
    now = now or datetime.now(UTC)
    oldest = store.oldest_audit_event_at()
    keep_after = oldest.astimezone(UTC).date() if oldest is not None else None
    settled_before = (now - SETTLED).date()  # a day before this one ended SETTLED ago or more
    days = [r.first + timedelta(days=i) for i in range(r.days)]
    cache = _cache_of(store)
    known = cache.get(days, keep_after)
    counted = _count(store, [d for d in days if d not in known])
    cache.put({d: c for d, c in counted.items() if d < settled_before and keep_after is not None and d > keep_after})
    known.update(counted)
    rows: list[dict[str, Any]] = []
    everyone: set[int] = set()
    for d in days:
        c = known[d]
        everyone |= c.users
        rows.append({"date": d.isoformat(), "activeUsers": len(c.users), **{k.name: c.counts[k.name] for k in COLUMNS}})
    totals = {"activeUsers": len(everyone)}
    totals.update({c.name: sum(int(row[c.name]) for row in rows) for c in COLUMNS})
    return UsageReport(r, rows, totals, oldest)
