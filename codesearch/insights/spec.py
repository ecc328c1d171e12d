"""What an insight asks: its queries, the points in time it counts at, and the rows it answers.

An insight counts each query's matches per repository at points in time, so its inputs are
checked here once, before any git process starts, with errors that say what is wrong and
where (the query's position in the list, the bad date): a mistake found after the first
repository was read would waste that work, and a Ray task's failure names nothing useful.

* `InsightQuery`: one query in the ordinary query language with its options (the fields of
  ``POST /api/search``: ``query``, ``isRegexEnabled``, ``isCaseSensitivityEnabled``).
  ``rev:``/``branch:`` is refused: an insight counts each repository's default branch as it was
  at each point, there is no other branch to choose.
* `points`: the dates from `since` to `until`, one `step` apart (calendar steps: a month after
  January 31 is the last day of February, and every point is counted from `since`, so the days
  never drift).
* `PointCount`: one row of the answer (query, repository, date, commit, counts).
"""

from __future__ import annotations

import calendar
import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from codesearch.errors import InvalidArgument, QueryError, SearchContextNotFound
from codesearch.git.dates import parse_when
from codesearch.query import ast
from codesearch.query.planner import Plan
from codesearch.search.engine import make_plan
from codesearch.search.options import SearchOptions

__all__ = [
    "STEPS",
    "InsightQuery",
    "PointCount",
    "as_date",
    "check_queries",
    "points",
    "step_of",
]

#: The steps an insight may take, by canonical name (with the adjectives people write too).
STEPS = ("day", "week", "month", "quarter", "year")
_STEP_ALIASES = {"daily": "day", "weekly": "week", "monthly": "month", "quarterly": "quarter", "yearly": "year"}
#: Calendar months per step (0: a fixed length in days, `_STEP_DAYS`).
_STEP_MONTHS = {"day": 0, "week": 0, "month": 1, "quarter": 3, "year": 12}
_STEP_DAYS = {"day": 1, "week": 7}


@dataclass(frozen=True)
class InsightQuery:
    """One query of an insight and its options, as ``POST /api/search`` takes them."""

    query: str
    regex: bool = False
    case_sensitive: bool = False

    @classmethod
    def of(cls, value: InsightQuery | str | Mapping[str, Any]) -> InsightQuery:
        """A query from a plain string (a literal search, case-insensitive), a search request
        body (``{"query", "isRegexEnabled", "isCaseSensitivityEnabled"}``) or an `InsightQuery`."""
        if isinstance(value, InsightQuery):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, Mapping):
            query = value.get("query")
            if not isinstance(query, str):
                raise InvalidArgument(f"a query needs a 'query' string (got {value!r})")
            regex = value.get("isRegexEnabled", value.get("regex", False))
            case = value.get("isCaseSensitivityEnabled", value.get("case_sensitive", False))
            if not isinstance(regex, bool) or not isinstance(case, bool):
                raise InvalidArgument(f"isRegexEnabled and isCaseSensitivityEnabled must be true or false in {value!r}")
            return cls(query, regex, case)
        raise InvalidArgument(f"a query is a string or a search request body, not {type(value).__name__}")

    def to_json(self) -> dict[str, Any]:
        """The query as a search request body (how the store and the HTTP API write it)."""
        return {"query": self.query, "isRegexEnabled": self.regex, "isCaseSensitivityEnabled": self.case_sensitive}

    def plan(self, contexts: Mapping[str, set[str]] | None = None) -> Plan:
        """The engine's plan of this query, to be evaluated on every branch of a shard: an
        insight's shard holds one "branch" per commit counted (`codesearch.insights.snapshot`),
        so the rule "without ``rev:`` only the default branch" must not apply."""
        options = SearchOptions(is_regex=self.regex, case_sensitive=self.case_sensitive, contexts=dict(contexts or {}))
        p = make_plan(self.query, options)
        if any(isinstance(n, ast.Branch) for n in ast.walk(p.query)):
            raise QueryError(
                "an insight counts each repository's default branch at each point in time: "
                "remove the rev:/branch: filter from the query"
            )
        return dataclasses.replace(p, default_branch_only=False)


def check_queries(
    queries: Iterable[InsightQuery | str | Mapping[str, Any]], contexts: Mapping[str, set[str]] | None = None
) -> list[InsightQuery]:
    """The queries, each parsed and planned once so that a bad one fails before any repository
    is read; the error names the query's position (from 1) and says what is wrong."""
    out: list[InsightQuery] = []
    for i, value in enumerate(queries, 1):
        try:
            q = InsightQuery.of(value)
            if not q.query.strip():
                raise InvalidArgument("the query is empty")
            q.plan(contexts)
        except (QueryError, InvalidArgument, SearchContextNotFound) as e:
            raise InvalidArgument(f"query {i}: {e}") from None
        out.append(q)
    if not out:
        raise InvalidArgument("an insight needs at least one query")
    return out


def step_of(step: str) -> str:
    """The canonical name of a step (``monthly`` → ``month``); InvalidArgument for others."""
    name = step.strip().lower() if isinstance(step, str) else ""
    name = _STEP_ALIASES.get(name, name)
    if name not in STEPS:
        raise InvalidArgument(f"step {step!r} is not one of {', '.join(STEPS)}")
    return name


def as_date(value: datetime | str, name: str, now: datetime | None = None) -> datetime:
    """`value` as an aware UTC datetime: a datetime (naive means UTC) or what
    `codesearch.git.dates.parse_when` reads (``2024-01-31``, ``12 months ago``)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    try:
        return parse_when(value, now)
    except InvalidArgument as e:
        raise InvalidArgument(f"{name}: {e}") from None


def _add_months(t: datetime, n: int) -> datetime:
    y, m = divmod(t.year * 12 + t.month - 1 + n, 12)
    return t.replace(year=y, month=m + 1, day=min(t.day, calendar.monthrange(y, m + 1)[1]))


def nth_point(since: datetime, step: str, k: int) -> datetime:
    """The `k`-th point (from 0) of a series starting at `since`: counted from `since` itself, so
    a monthly series from January 31 goes Feb 29 (or 28), Mar 31, Apr 30 …"""
    months = _STEP_MONTHS[step]
    return _add_months(since, months * k) if months else since + timedelta(days=_STEP_DAYS[step] * k)


def points(
    since: datetime | str, until: datetime | str | None, step: str, *, limit: int | None = None
) -> list[datetime]:
    """The points from `since` to `until` (both included; `until` defaults to now), `step`
    apart. InvalidArgument when `until` is before `since`, or when there would be more than
    `limit` points (the message says how many, and how to have fewer)."""
    now = datetime.now(UTC)
    start = as_date(since, "since", now)
    end = now if until is None else as_date(until, "until", now)
    step = step_of(step)
    if end < start:
        raise InvalidArgument(f"until ({end:%Y-%m-%d}) is before since ({start:%Y-%m-%d})")
    out: list[datetime] = []
    while (t := nth_point(start, step, len(out))) <= end:
        if limit is not None and len(out) >= limit:
            raise InvalidArgument(
                f"from {start:%Y-%m-%d} to {end:%Y-%m-%d} by {step} is more than {limit} points: "
                "start later or take a longer step"
            )
        out.append(t)
    return out


@dataclass(frozen=True)
class PointCount:
    """One row of an insight: how often query `query_id` (its position in the list, from 0)
    matched in `repository` at `date`, counted on `commit` (the newest commit of the default
    branch at or before `date`; None when the branch has no commit that old, then both counts
    are 0).

    `match_count` counts the matches of the query's content and symbol terms (each match
    range, as the search shows them); a query without any (only ``file:``, ``lang:``, ``repo:``
    terms) counts each matching file once. `file_count` is the number of matching files."""

    query_id: int
    query: str
    repository: str
    date: datetime
    commit: str | None
    match_count: int
    file_count: int

    def to_row(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "query": self.query,
            "repository": self.repository,
            "date": self.date,
            "commit": self.commit,
            "match_count": self.match_count,
            "file_count": self.file_count,
        }
