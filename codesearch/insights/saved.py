"""Saved insights as callers use them: created within limits, seen by who may, counted over what they may see.

The HTTP API (``/api/insights``) and the pages (``/insights``) are two front doors to the same
rules, written once here:

* **Who**: a signed-in user (member or owner) creates insights of their own; a user sees and
  deletes their own, an owner everyone's; anyone else is told the insight does not exist (404),
  exactly as for an id that was never used.
* **What is counted for a reader**: the counts of the repositories the reader may see now
  (`codesearch.permissions`), whatever the insight's owner could see when its points were
  counted; a repository hidden from the reader contributes nothing, not even a zero row.
* **Bounded work**: at most `MAX_QUERIES` queries, `MAX_REPOS` repositories and `MAX_POINTS`
  points per insight (a refresh counts the newest `MAX_POINTS` points at most), `MAX_INSIGHTS`
  insights per user. A request beyond a limit is a 400 that says which limit and how to stay
  within it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from codesearch import spreadsheet
from codesearch.errors import InsufficientPermissions, InvalidArgument, RepositoryNotFound
from codesearch.insights.scope import all_repos, matching
from codesearch.insights.spec import as_date, check_queries, points, step_of
from codesearch.permissions import Identity, visible_repos
from codesearch.store.errors import NotFound
from codesearch.store.models import OWNER, Insight, InsightCount

if TYPE_CHECKING:
    from codesearch.store import Store

__all__ = [
    "MAX_INSIGHTS",
    "MAX_POINTS",
    "MAX_QUERIES",
    "MAX_REPOS",
    "InsightView",
    "create",
    "csv_text",
    "delete",
    "insight_for",
    "list_for",
    "view",
]

MAX_QUERIES = 10
MAX_REPOS = 50
MAX_POINTS = 60
MAX_INSIGHTS = 50
MAX_NAME = 200


def _user_id(identity: Identity) -> int:
    uid = identity.user_id
    if uid is None:
        raise InsufficientPermissions("sign in to create insights: an insight belongs to a user")
    return uid


def may_see(identity: Identity, insight: Insight) -> bool:
    """The insight's user, or an owner."""
    return identity.user_id is not None and (identity.user_id == insight.user_id or identity.role == OWNER)


def insight_for(store: Store, identity: Identity, insight_id: int) -> Insight:
    """The insight `insight_id` if `identity` may see it; NotFound (404) otherwise, the same
    answer as for an insight that does not exist."""
    try:
        insight = store.get_insight(insight_id)
    except NotFound:
        insight = None
    if insight is None or not may_see(identity, insight):
        raise NotFound("insight", insight_id)
    return insight


def list_for(store: Store, identity: Identity) -> list[Insight]:
    """The insights `identity` may see: an owner's are everyone's, a member's their own, an
    anonymous caller's none."""
    if identity.user_id is None:
        return []
    return store.list_insights(None if identity.role == OWNER else identity.user_id)


def create(
    store: Store,
    identity: Identity,
    *,
    name: str,
    queries: Sequence[str | Mapping[str, Any]],
    step: str,
    since: datetime | str,
    repos: Sequence[str] = (),
    repo_filter: str | None = None,
    contexts: Mapping[str, set[str]] | None = None,
    now: datetime | None = None,
) -> Insight:
    """A new insight of `identity`'s user, every value checked (see the module docstring). Its
    points are counted by the scheduler's next refresh (`codesearch.insights.refresh`)."""
    user_id = _user_id(identity)
    name = (name or "").strip()
    if not name or len(name) > MAX_NAME:
        raise InvalidArgument(f"name: give the insight a name of 1 to {MAX_NAME} characters")
    if len(queries) > MAX_QUERIES:
        raise InvalidArgument(f"queries: {len(queries)} given; an insight counts at most {MAX_QUERIES}")
    checked = check_queries(queries, contexts)
    step = step_of(step)
    now = now or datetime.now(UTC)
    start = as_date(since, "since", now)
    if start > now:
        raise InvalidArgument(f"since: {start:%Y-%m-%d} is in the future; an insight counts the past")
    points(start, now, step, limit=MAX_POINTS)
    _check_scope(store, identity, list(repos), repo_filter)
    if store.count_insights(user_id) >= MAX_INSIGHTS:
        raise InvalidArgument(f"you have {MAX_INSIGHTS} insights already, the most a user may have: delete one first")
    return store.create_insight(
        user_id,
        name,
        [q.to_json() for q in checked],
        step=step,
        since=start,
        repos=list(dict.fromkeys(repos)),
        repo_filter=repo_filter,
    )


def _check_scope(store: Store, identity: Identity, names: list[str], repo_filter: str | None) -> None:
    """The named repositories exist and are visible (a hidden one is "not found", as an unknown
    one), or the filter compiles; either way at most `MAX_REPOS` of them."""
    if names and repo_filter:
        raise InvalidArgument("give repositories or a repository filter, not both")
    visible = visible_repos(identity)
    if names:
        if len(set(names)) > MAX_REPOS:
            raise InvalidArgument(f"repositories: {len(set(names))} given; an insight counts in at most {MAX_REPOS}")
        for repo_name in names:
            row = store.find_repo(repo_name) if isinstance(repo_name, str) else None
            if row is None or visible is not None and row.id not in visible:
                raise RepositoryNotFound(
                    f"repository {repo_name!r} not found: give full names including the host (e.g. github.com/org/repo)"
                )
        return
    selects = matching(repo_filter) if repo_filter else None
    found = sum(
        1 for r in all_repos(store) if (visible is None or r.id in visible) and (selects is None or selects(r.name))
    )
    if found > MAX_REPOS:
        what = f"the filter {repo_filter!r} selects" if repo_filter else "without a filter, the insight counts in all"
        raise InvalidArgument(
            f"repositories: {what} {found} repositories; at most {MAX_REPOS}: name them or narrow the filter"
        )


def delete(store: Store, identity: Identity, insight_id: int) -> Insight:
    """Delete an insight its user or an owner may see (NotFound otherwise); returns it."""
    insight = insight_for(store, identity, insight_id)
    store.delete_insight(insight.id)
    return insight


@dataclass
class RepoPoint:
    """One repository's counts at a point, one per query."""

    repository: str
    commit: str | None
    match_counts: list[int]
    file_counts: list[int]


@dataclass
class Point:
    """A point of an insight as a reader sees it: totals per query over the visible
    repositories, and each visible repository's counts."""

    date: datetime
    match_counts: list[int]
    file_counts: list[int]
    repositories: list[RepoPoint] = field(default_factory=list)


@dataclass
class InsightView:
    """An insight with its points, as `identity` may see them (`view`)."""

    insight: Insight
    points: list[Point]
    #: the counts behind the points, the reader's visible ones only
    counts: list[InsightCount]

    @property
    def queries(self) -> list[str]:
        return [str(q.get("query", "")) for q in self.insight.queries]


def view(store: Store, identity: Identity, insight_id: int) -> InsightView:
    """The insight and its points, counted over the repositories `identity` may see now."""
    insight = insight_for(store, identity, insight_id)
    visible = visible_repos(identity)
    counts = [c for c in store.insight_counts(insight.id) if visible is None or c.repo_id in visible]
    n = len(insight.queries)
    by_date: dict[datetime, Point] = {d: Point(d, [0] * n, [0] * n) for d in store.insight_points(insight.id)}
    repos: dict[tuple[datetime, str], RepoPoint] = {}
    for c in counts:
        point = by_date.get(c.at)
        if point is None or not 0 <= c.query_index < n:
            continue
        point.match_counts[c.query_index] += c.match_count
        point.file_counts[c.query_index] += c.file_count
        rp = repos.get((c.at, c.repo_name))
        if rp is None:
            rp = repos[(c.at, c.repo_name)] = RepoPoint(c.repo_name, c.commit_sha, [0] * n, [0] * n)
            point.repositories.append(rp)
        rp.match_counts[c.query_index] = c.match_count
        rp.file_counts[c.query_index] = c.file_count
    return InsightView(insight, [by_date[d] for d in sorted(by_date)], counts)


#: The columns of an insight's CSV: those of `codesearch.insights.dataset.COLUMNS`.
CSV_COLUMNS = ("query_id", "query", "repository", "date", "commit", "match_count", "file_count")


def csv_text(v: InsightView) -> str:
    """The visible counts as CSV, one row per (date, repository, query), as the Dataset of
    `run_insights` has them; text cells neutralised for spreadsheets (`codesearch.spreadsheet`)."""
    queries = v.queries
    rows = (
        [
            c.query_index,
            queries[c.query_index],
            c.repo_name,
            c.at.isoformat(),
            c.commit_sha or "",
            c.match_count,
            c.file_count,
        ]
        for c in v.counts
        if 0 <= c.query_index < len(queries)
    )
    return spreadsheet.csv_text(CSV_COLUMNS, rows)
