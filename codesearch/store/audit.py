"""The audit log's storage: append events, read them a page at a time, count them per UTC day
(`AuditMixin.count_audit_by_day`), prune past the retention.

What is recorded and when, and what the usage report's columns mean, is `codesearch.audit`'s
business; the store keeps the rows and counts what it is told to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import and_, case, delete, func, insert, literal, select
from sqlalchemy.engine import Connection as SAConnection
from sqlalchemy.sql import ColumnElement

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.rows import from_row
from codesearch.store.tables import audit_events

#: Rows deleted per transaction when pruning.
PRUNE_BATCH = 10_000


@dataclass(frozen=True)
class EventCount:
    """One counted column of `AuditMixin.count_audit_by_day`: the events whose action is one of
    `actions` (any action when empty) and none of `excluding`, made by a caller who signed in
    `via` (any way when ""; the event's ``via`` detail, `codesearch.audit.log`)."""

    name: str
    actions: tuple[str, ...] = ()
    excluding: tuple[str, ...] = ()
    via: str = ""


@dataclass(frozen=True)
class DayCounts:
    """One UTC day: the ids of the accounts that left an event (`users`), and each `EventCount`."""

    day: date
    users: set[int]
    counts: dict[str, int]


def _day_of(c: SAConnection) -> ColumnElement[str]:
    """An event's UTC day as ``YYYY-MM-DD``: SQLite keeps `at` as naive UTC text (its first ten
    characters), PostgreSQL as a ``timestamptz`` (read in UTC whatever the session's zone)."""
    at = audit_events.c.at
    if c.dialect.name == "sqlite":
        return func.substr(at, 1, 10)
    return func.to_char(func.timezone("UTC", at), "YYYY-MM-DD")


def _matches(spec: EventCount) -> ColumnElement[bool]:
    conds: list[ColumnElement[bool]] = []
    if spec.actions:
        conds.append(audit_events.c.action.in_(spec.actions))
    if spec.excluding:
        conds.append(audit_events.c.action.not_in(spec.excluding))
    if spec.via:
        conds.append(audit_events.c.details["via"].as_string() == spec.via)
    return and_(*conds) if conds else literal(True)


class AuditMixin(StoreBase):
    """The `Store` methods for the audit log (mixed into `Store`)."""

    def add_audit_events(self, events: list[dict[str, Any]]) -> int:
        """Append events (``{at, actor_user_id, actor, action, target, details, request_id}``;
        `at` defaults to now) in one transaction; returns how many."""
        if not events:
            return 0
        now = self._now()
        rows = [
            {
                "at": e.get("at") or now,
                "actor_user_id": e.get("actor_user_id"),
                "actor": str(e["actor"])[:320],
                "action": str(e["action"])[:64],
                "target": str(e.get("target") or ""),
                "details": dict(e.get("details") or {}),
                "request_id": e.get("request_id"),
            }
            for e in events
        ]
        with self._tx(write=True) as c:
            c.execute(insert(audit_events), rows)
        return len(rows)

    def list_audit_events(
        self,
        *,
        action: str | None = None,
        actor: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        page: int = 1,
        per_page: int = 50,
    ) -> tuple[list[m.AuditEvent], int]:
        """One page of the audit log, newest first, and the total count of matching events.
        `action` matches the action or, ending in ``.``, every action under it (``apikey.``);
        `actor` is an e-mail (or ``anonymous``, ``cli``); `since`/`until` bound `at` (inclusive,
        exclusive)."""
        if page < 1 or per_page < 1:
            raise ValueError("page and per_page start at 1")
        conds = []
        if action:
            conds.append(
                audit_events.c.action.startswith(action, autoescape=True)
                if action.endswith(".")
                else audit_events.c.action == action
            )
        if actor:
            conds.append(audit_events.c.actor == actor)
        if since is not None:
            conds.append(audit_events.c.at >= since)
        if until is not None:
            conds.append(audit_events.c.at < until)
        with self._tx() as c:
            total = c.scalar(select(func.count()).select_from(audit_events).where(*conds))
            rows = c.execute(
                select(audit_events)
                .where(*conds)
                .order_by(audit_events.c.at.desc(), audit_events.c.id.desc())
                .limit(per_page)
                .offset((page - 1) * per_page)
            )
            return [from_row(m.AuditEvent, r) for r in rows], int(total or 0)

    def prune_audit_events(self, before: datetime, batch: int = PRUNE_BATCH) -> int:
        """Delete the events older than `before` (the retention), `batch` rows per transaction (no
        long lock on a large log); returns how many."""
        total = 0
        while True:
            with self._tx(write=True) as c:
                ids = select(audit_events.c.id).where(audit_events.c.at < before).limit(batch).scalar_subquery()
                n = c.execute(delete(audit_events).where(audit_events.c.id.in_(ids))).rowcount or 0
            total += n
            if n < batch:
                return total

    def count_audit_by_day(self, since: datetime, until: datetime, columns: Sequence[EventCount]) -> list[DayCounts]:
        """Per UTC day of ``since <= at < until``, in order, the days with events only: the
        accounts that left an event (anonymous callers and the command line are no account) and
        the events of each of `columns`. One pass over the range (the index on `at`), grouped by
        day and account, so that the accounts of several days can be united by the caller."""
        with self._tx() as c:
            day = _day_of(c)
            user = audit_events.c.actor_user_id
            sums = [func.sum(case((_matches(col), 1), else_=0)) for col in columns]
            rows = c.execute(
                select(day, user, *sums)
                .where(audit_events.c.at >= since, audit_events.c.at < until)
                .group_by(day, user)
                .order_by(day)
            )
            out: list[DayCounts] = []
            for r in rows:
                d = date.fromisoformat(r[0])
                if not out or out[-1].day != d:
                    out.append(DayCounts(d, set(), dict.fromkeys((col.name for col in columns), 0)))
                if r[1] is not None:
                    out[-1].users.add(int(r[1]))
                for col, v in zip(columns, r[2:], strict=True):
                    out[-1].counts[col.name] += int(v or 0)
            return out

    def oldest_audit_event_at(self) -> datetime | None:
        """When the oldest event kept was recorded (None: the log is empty)."""
        with self._tx() as c:
            at: datetime | None = c.scalar(select(func.min(audit_events.c.at)))
            return at
