"""The `Store` methods for the OAuth 2.0 clients MCP clients register (`codesearch.store.oauth`).

Anyone may register a client, so pending clients (no token was ever issued to them) are what an
abuser can pile up: they expire after `pending_ttl_seconds`, and at most `max_pending` are kept,
the oldest removed to make room, in the transaction of `create_oauth_client` (the table grows
only there). A client secret is returned once and kept as its HMAC (`OAuthHashMixin.oauth_hash`).
"""

from __future__ import annotations

import hmac
import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, func, insert, select
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store.oauth import CLIENT_SECRET_PREFIX, MAX_SECRET_LENGTH, OAuthClient, OAuthHashMixin
from codesearch.store.tables import oauth_clients, oauth_codes


class OAuthClientsMixin(OAuthHashMixin):
    """The `Store` methods for registered OAuth clients (mixed into `Store`)."""

    def create_oauth_client(
        self,
        name: str,
        redirect_uris: list[str],
        metadata: dict[str, Any],
        *,
        with_secret: bool,
        pending_ttl_seconds: float | None = None,
        max_pending: int | None = None,
    ) -> tuple[OAuthClient, str | None]:
        """Register a client (its metadata already validated): (client, secret or None). The
        secret is returned this once; only its HMAC is kept.

        In the same transaction, first: pending clients older than `pending_ttl_seconds` are
        removed, and the oldest pending clients beyond `max_pending - 1` too, so that with this
        one at most `max_pending` are pending (see the module docstring)."""
        client_id = "cso_client_" + secrets.token_urlsafe(24)
        secret = CLIENT_SECRET_PREFIX + secrets.token_urlsafe(32) if with_secret else None
        now = self._now()
        with self._tx(write=True) as c:
            self._trim_pending_oauth_clients(
                c, now, pending_ttl_seconds, None if max_pending is None else max_pending - 1
            )
            c.execute(
                insert(oauth_clients).values(
                    id=client_id,
                    name=name,
                    redirect_uris=list(redirect_uris),
                    metadata=dict(metadata),
                    secret_hash=self.oauth_hash(secret) if secret else None,
                    created_at=now,
                )
            )
        return OAuthClient(client_id, name, list(redirect_uris), dict(metadata), secret is not None, now, None), secret

    def get_oauth_client(self, client_id: str, *, pending_ttl_seconds: float | None = None) -> OAuthClient | None:
        """The registered client `client_id`, or None: unknown, or pending for longer than
        `pending_ttl_seconds` (expired: as good as removed, whenever its row goes)."""
        if not isinstance(client_id, str) or not client_id or len(client_id) > 64:
            return None
        with self._tx() as c:
            row = c.execute(select(oauth_clients).where(oauth_clients.c.id == client_id)).first()
        if row is None:
            return None
        client = OAuthClient(
            row.id,
            row.name,
            list(row.redirect_uris or []),
            dict(row.metadata or {}),
            row.secret_hash is not None,
            row.created_at,
            row.last_used_at,
        )
        if (
            client.pending
            and pending_ttl_seconds is not None
            and client.created_at <= self._now() - timedelta(seconds=pending_ttl_seconds)
        ):
            return None
        return client

    def delete_expired_oauth_clients(self, pending_ttl_seconds: float) -> int:
        """Remove the clients pending for longer than `pending_ttl_seconds`; returns how many."""
        with self._tx(write=True) as c:
            return self._trim_pending_oauth_clients(c, self._now(), pending_ttl_seconds, None)

    def count_oauth_clients(self) -> dict[str, int]:
        """``{"pending": n, "authorized": m}``: registered clients that never completed an
        authorization, and those that did."""
        with self._tx() as c:
            rows = c.execute(
                select(oauth_clients.c.last_used_at.is_(None), func.count()).group_by(
                    oauth_clients.c.last_used_at.is_(None)
                )
            ).all()
        counts = {"pending": 0, "authorized": 0}
        for pending, n in rows:
            counts["pending" if pending else "authorized"] += n
        return counts

    def _trim_pending_oauth_clients(
        self, c: SAConnection, now: datetime, ttl_seconds: float | None, keep: int | None
    ) -> int:
        """Remove the pending clients created `ttl_seconds` ago or earlier, then the oldest
        pending ones beyond the newest `keep`. A client holding a live code (its user said Allow
        and the exchange is under way) is spared: it is about to complete its authorization.
        Returns how many were removed (their expired codes go with them: ON DELETE CASCADE; a
        pending client has no token)."""
        live_code = (
            select(oauth_codes.c.id)
            .where(
                oauth_codes.c.client_id == oauth_clients.c.id,
                oauth_codes.c.used_at.is_(None),
                oauth_codes.c.expires_at > now,
            )
            .exists()
        )
        pending = and_(oauth_clients.c.last_used_at.is_(None), ~live_code)
        removed = 0
        if ttl_seconds is not None:
            cutoff = now - timedelta(seconds=ttl_seconds)
            removed += c.execute(delete(oauth_clients).where(pending, oauth_clients.c.created_at <= cutoff)).rowcount
        if keep is not None:
            beyond = (
                select(oauth_clients.c.id)
                .where(pending)
                .order_by(oauth_clients.c.created_at.desc(), oauth_clients.c.id.desc())
                .offset(max(keep, 0))
            )
            older = list(c.scalars(beyond))
            for start in range(0, len(older), 500):
                batch = older[start : start + 500]
                removed += c.execute(delete(oauth_clients).where(oauth_clients.c.id.in_(batch))).rowcount
        return removed or 0

    def verify_oauth_client_secret(self, client_id: str, secret: str) -> bool:
        """Whether `secret` is the secret of confidential client `client_id` (constant time)."""
        if (
            not isinstance(secret, str)
            or not secret.startswith(CLIENT_SECRET_PREFIX)
            or len(secret) > MAX_SECRET_LENGTH
        ):
            return False
        with self._tx() as c:
            stored = c.scalar(select(oauth_clients.c.secret_hash).where(oauth_clients.c.id == client_id))
        if not stored:
            return False
        return hmac.compare_digest(stored, self.oauth_hash(secret))
