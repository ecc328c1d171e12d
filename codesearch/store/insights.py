"""Saved insights: a user's queries counted per repository at points in time (`codesearch.insights`).

An insight belongs to the user who made it (deleted with them). Its points are added by the
scheduler's refresh (`codesearch.insights.refresh`), each point in one transaction with all its
counts, so a reader sees a point whole or not at all; a point added twice (two refreshes racing)
keeps the first. What a reader may see of the counts (the repositories they may see) is decided
by the API and the pages, which read them all here.

The values are checked by the layer that takes them from a caller (`codesearch.insights.saved`):
here, a bad step or an empty name is a ValueError (a programming error).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store.base import StoreBase
from codesearch.store.models import Insight, InsightCount
from codesearch.store.rows import from_row, get_one, inserted_id
from codesearch.store.tables import insight_counts, insight_points, insights

#: The steps an insight may take (`codesearch.insights.spec.STEPS`).
INSIGHT_STEPS = ("day", "week", "month", "quarter", "year")

_COUNT_COLUMNS = [
    insight_counts.c.at,
    insight_counts.c.repo_id,
    insight_counts.c.repo_name,
    insight_counts.c.query_index,
    insight_counts.c.commit_sha,
    insight_counts.c.match_count,
    insight_counts.c.file_count,
]


class InsightsMixin(StoreBase):
    """The `Store` methods for saved insights (mixed into `Store`)."""

    def create_insight(
        self,
        user_id: int,
        name: str,
        queries: Sequence[Mapping[str, Any]],
        *,
        step: str,
        since: datetime,
        repos: Iterable[str] = (),
        repo_filter: str | None = None,
    ) -> Insight:
        """A new insight of `user_id` (NotFound when not a user), without points yet."""
        name = (name or "").strip()
        if not name or step not in INSIGHT_STEPS or not queries:
            raise ValueError(f"an insight needs a name, queries and a step of {INSIGHT_STEPS} (got {step!r})")
        now = self._now()
        with self._tx(write=True) as c:
            self._get_user(c, user_id)
            insight_id = inserted_id(
                c.execute(
                    insert(insights).values(
                        user_id=user_id,
                        name=name,
                        queries=[dict(q) for q in queries],
                        repos=list(repos),
                        repo_filter=repo_filter or None,
                        step=step,
                        since=since,
                        created_at=now,
                        updated_at=now,
                    )
                )
            )
            return self._get_insight(c, insight_id)

    def get_insight(self, insight_id: int) -> Insight:
        """NotFound when there is no such insight."""
        with self._tx() as c:
            return self._get_insight(c, insight_id)

    def list_insights(self, user_id: int | None = None) -> list[Insight]:
        """Insights by name: `user_id`'s, or everyone's when None."""
        q = select(insights)
        if user_id is not None:
            q = q.where(insights.c.user_id == user_id)
        with self._tx() as c:
            return [from_row(Insight, r) for r in c.execute(q.order_by(insights.c.name, insights.c.id))]

    def count_insights(self, user_id: int) -> int:
        with self._tx() as c:
            return int(c.scalar(select(func.count()).select_from(insights).where(insights.c.user_id == user_id)) or 0)

    def delete_insight(self, insight_id: int) -> bool:
        """Delete an insight with its points; False when there was none."""
        with self._tx(write=True) as c:
            return bool(c.execute(delete(insights).where(insights.c.id == insight_id)).rowcount)

    def insight_points(self, insight_id: int) -> list[datetime]:
        """The dates of the insight's counted points, oldest first."""
        with self._tx() as c:
            q = select(insight_points.c.at).where(insight_points.c.insight_id == insight_id)
            return list(c.scalars(q.order_by(insight_points.c.at)))

    def insight_counts(self, insight_id: int) -> list[InsightCount]:
        """Every count of the insight, by date, repository name, query."""
        with self._tx() as c:
            rows = c.execute(
                select(*_COUNT_COLUMNS)
                .where(insight_counts.c.insight_id == insight_id)
                .order_by(insight_counts.c.at, insight_counts.c.repo_name, insight_counts.c.query_index)
            )
            return [from_row(InsightCount, r) for r in rows]

    def add_insight_point(self, insight_id: int, at: datetime, counts: Iterable[InsightCount]) -> bool:
        """Record the point `at` with its `counts` (whose `at` must be `at`) in one transaction;
        False when the point was there already (it is kept) or the insight is gone."""
        rows = []
        for n in counts:
            if n.at != at:
                raise ValueError(f"a count of {n.at} given for the point {at}")
            rows.append(
                {
                    "insight_id": insight_id,
                    "at": at,
                    "repo_id": n.repo_id,
                    "repo_name": n.repo_name,
                    "query_index": n.query_index,
                    "commit_sha": n.commit_sha,
                    "match_count": n.match_count,
                    "file_count": n.file_count,
                }
            )
        now = self._now()
        with self._tx(write=True) as c:
            if c.scalar(select(insights.c.id).where(insights.c.id == insight_id)) is None:
                return False
            there = select(insight_points.c.at).where(
                insight_points.c.insight_id == insight_id, insight_points.c.at == at
            )
            if c.scalar(there) is not None:
                return False
            c.execute(insert(insight_points).values(insight_id=insight_id, at=at, computed_at=now))
            if rows:
                c.execute(insert(insight_counts), rows)
            c.execute(update(insights).where(insights.c.id == insight_id).values(refreshed_at=now, error=None))
            return True

    def record_insight_error(self, insight_id: int, error: str | None) -> None:
        """What went wrong in the insight's last refresh (None: nothing)."""
        with self._tx(write=True) as c:
            c.execute(update(insights).where(insights.c.id == insight_id).values(error=error))

    def _get_insight(self, c: SAConnection, insight_id: int) -> Insight:
        return get_one(c, Insight, insights.c.id, insight_id, "insight")
