"""Connections: the code-host configurations of the config file, and their sync status.

A connection is created or updated by name from the config (`upsert_connection`); its config's
hash says whether it changed, which is what makes it SYNC_NEEDED. The sync worker lists its
host and applies the listing to the repos (`codesearch.store.repos`); the scheduler asks which
connections are due (`connections_due_for_sync`). Deleting a connection unlinks its repos;
those no other connection lists are left orphaned for garbage collection.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, insert, or_, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.errors import NotFound
from codesearch.store.models import Connection
from codesearch.store.rows import from_row, get_one
from codesearch.store.tables import connections, jobs, repo_connections


def config_hash(config: Mapping[str, Any]) -> str:
    """sha256 of the config as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class ConnectionsMixin(StoreBase):
    """The `Store` methods for connections (mixed into `Store`)."""

    def upsert_connection(
        self, name: str, type: str, config: Mapping[str, Any], listing_version: int = 1
    ) -> tuple[Connection, bool]:
        """Create or update a connection by name. Returns (row, needs_sync): needs_sync is True
        when the connection is new or its config changed (its status is then SYNC_NEEDED).
        `listing_version` (`codesearch.hosts.base.listing_version` of its type) counts as part
        of the config: a new version of a kind's listing is a change of its connections."""
        h = config_hash(config if listing_version <= 1 else {**config, "#listing-version": listing_version})
        now = self._now()
        with self._tx(write=True) as c:
            row = c.execute(select(connections).where(connections.c.name == name)).first()
            if row is None:
                c.execute(
                    insert(connections).values(
                        name=name,
                        type=type,
                        config=dict(config),
                        config_hash=h,
                        sync_status=m.SYNC_NEEDED,
                        sync_error=None,
                        sync_warnings=[],
                        created_at=now,
                        updated_at=now,
                        synced_at=None,
                    )
                )
                changed = True
            elif row.config_hash != h or row.type != type:
                c.execute(
                    update(connections)
                    .where(connections.c.id == row.id)
                    .values(type=type, config=dict(config), config_hash=h, sync_status=m.SYNC_NEEDED, updated_at=now)
                )
                changed = True
            else:
                changed = False
            return self._get_connection(c, name), changed

    def get_connection(self, name: str) -> Connection:
        with self._tx() as c:
            return self._get_connection(c, name)

    def list_connections(self) -> list[Connection]:
        with self._tx() as c:
            return [from_row(Connection, r) for r in c.execute(select(connections).order_by(connections.c.name))]

    def delete_connection(self, name: str) -> list[int]:
        """Delete a connection (its links and sync jobs go with it). Returns the ids of the repos
        that now have no connection: they are marked orphaned (`orphaned_at` = now) for
        garbage collection after the grace period."""
        now = self._now()
        with self._tx(write=True) as c:
            cid = self._connection_id(c, name)
            linked = list(c.scalars(select(repo_connections.c.repo_id).where(repo_connections.c.connection_id == cid)))
            c.execute(delete(repo_connections).where(repo_connections.c.connection_id == cid))
            c.execute(delete(jobs).where(jobs.c.connection_id == cid))
            c.execute(delete(connections).where(connections.c.id == cid))
            return self._mark_orphans(c, linked, now)

    def update_connection_status(
        self,
        name: str,
        status: str,
        *,
        error: str | None = None,
        warnings: Iterable[str] | None = None,
        config_hash: str | None = None,
    ) -> Connection:
        """Set a connection's sync status. SYNCED / SYNCED_WITH_WARNINGS also set `synced_at`.
        Pass the `config_hash` the sync ran with: when the config changed meanwhile, the
        status stays SYNC_NEEDED so that the new config is synced too."""
        if status not in m.CONNECTION_STATUSES:
            raise ValueError(f"unknown connection status {status!r}")
        now = self._now()
        with self._tx(write=True) as c:
            row = c.execute(
                select(connections.c.id, connections.c.config_hash).where(connections.c.name == name)
            ).first()
            if row is None:
                raise NotFound("connection", name)
            values: dict[str, Any] = {"sync_status": status, "sync_error": self.public_error(error), "updated_at": now}
            if warnings is not None:
                values["sync_warnings"] = list(warnings)
            if status in (m.SYNCED, m.SYNCED_WITH_WARNINGS):
                values["synced_at"] = now
            if config_hash is not None and config_hash != row.config_hash:
                values["sync_status"] = m.SYNC_NEEDED
            c.execute(update(connections).where(connections.c.id == row.id).values(**values))
            return self._get_connection(c, name)

    def connections_due_for_sync(self, interval_seconds: float) -> list[Connection]:
        """Connections to sync now: no sync job PENDING or IN_PROGRESS, and either SYNC_NEEDED,
        or never synced / last synced more than `interval_seconds` ago (a sync job that FAILED
        within the interval holds those back, so a failing host is retried once per interval).
        The sync worker sets the status (SYNCING, then SYNCED or FAILED) with
        `update_connection_status`: a connection left in SYNC_NEEDED is always due."""
        cutoff = self._now() - timedelta(seconds=interval_seconds)
        active = exists().where(
            jobs.c.connection_id == connections.c.id,
            jobs.c.kind == m.SYNC_JOB,
            jobs.c.state.in_((m.PENDING, m.IN_PROGRESS)),
        )
        recent_failure = exists().where(
            jobs.c.connection_id == connections.c.id,
            jobs.c.kind == m.SYNC_JOB,
            jobs.c.state == m.FAILED,
            jobs.c.finished_at >= cutoff,
        )
        stale = or_(connections.c.synced_at.is_(None), connections.c.synced_at < cutoff)
        q = (
            select(connections)
            .where(~active, or_(connections.c.sync_status == m.SYNC_NEEDED, and_(stale, ~recent_failure)))
            .order_by(connections.c.id)
        )
        with self._tx() as c:
            return [from_row(Connection, r) for r in c.execute(q)]

    def _get_connection(self, c: SAConnection, name: str) -> Connection:
        return get_one(c, Connection, connections.c.name, name, "connection")

    def _connection_id(self, c: SAConnection, name: str) -> int:
        cid: int | None = c.scalar(select(connections.c.id).where(connections.c.name == name))
        if cid is None:
            raise NotFound("connection", name)
        return cid
