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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from codesearch import spreadsheet
from codesearch.errors import InvalidArgument
from codesearch.store.audit import EventCount

if TYPE_CHECKING:
    from codesearch.store import Store

#: The most days one report covers.
MAX_DAYS = 366
#: The ranges the page offers (days back from today, today included); 30 is the default.
PRESETS = (7, 30, 90, 365)
DEFAULT_DAYS = 30

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

    def json(self, retention_days: int) -> dict[str, Any]:
        """The shape of ``GET /api/usage`` (docs/http-api.md#usage)."""
        return {
            "from": self.range.first.isoformat(),
            "to": self.range.last.isoformat(),
            "timeZone": "UTC",
            "days": self.days,
            "totals": self.totals,
            "retentionDays": retention_days,
            "oldestEventAt": self.oldest_event_at.isoformat() if self.oldest_event_at else None,
        }

    def csv(self) -> str:
        """One row per day (`CSV_COLUMNS`), text cells neutralised for spreadsheets."""
        keys = list(LABELS)
        return spreadsheet.csv_text(CSV_COLUMNS, ([d["date"], *(d[k] for k in keys)] for d in self.days))


def usage_report(store: Store, r: UsageRange) -> UsageReport:
    """The report of `r` from `store`'s audit log (see the module docstring)."""
    found = {d.day: d for d in store.count_audit_by_day(r.since, r.until, COLUMNS)}
    days: list[dict[str, Any]] = []
    for i in range(r.days):
        day = r.first + timedelta(days=i)
        d = found.get(day)
        row: dict[str, Any] = {"date": day.isoformat(), "activeUsers": d.users if d else 0}
        row.update({c.name: (d.counts[c.name] if d else 0) for c in COLUMNS})
        days.append(row)
    totals = {"activeUsers": store.count_audit_users(r.since, r.until) if found else 0}
    totals.update({c.name: sum(int(d[c.name]) for d in days) for c in COLUMNS})
    return UsageReport(r, days, totals, store.oldest_audit_event_at())
