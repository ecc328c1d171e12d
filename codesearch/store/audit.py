"""The audit log's storage: append events, read them a page at a time, prune past the retention.

What is recorded and when is `codesearch.audit`'s business; the store keeps the rows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.rows import from_row
from codesearch.store.tables import audit_events

#: Rows deleted per transaction when pruning.
PRUNE_BATCH = 10_000


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
