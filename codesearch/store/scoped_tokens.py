"""Repository-scoped access tokens: short-lived bearer tokens limited to named repositories.

A token is ``sbst_`` + 256 random bits (the prefix Sourcebot's clients recognize), shown once;
the store keeps only its HMAC-SHA256 under the server secret, like API keys. It expires
`SCOPED_TOKEN_TTL` after it is made (one hour, as in Sourcebot; a caller may ask for less, never
more), and revoking it deletes it. Who may make one, and which repositories it may name, is the
caller's business (`codesearch.service.routes.ee`); here a token is checked: unknown, expired,
or of a user who may not use credentials (waiting, deactivated: `_waits`) is None.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, insert, select

from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict
from codesearch.store.models import User
from codesearch.store.tables import repos, scoped_access_tokens

SCOPED_TOKEN_PREFIX = "sbst_"
#: How long a scoped token works, at most.
SCOPED_TOKEN_TTL = timedelta(hours=1)
#: Repositories one token may name, and live tokens one user may hold.
MAX_SCOPED_REPOS = 1000
MAX_LIVE_SCOPED_TOKENS = 1000


@dataclass(frozen=True)
class ScopedToken:
    """A scoped access token as stored: never its value."""

    id: str
    user_id: int
    repo_ids: tuple[int, ...]
    created_at: datetime
    expires_at: datetime


class ScopedTokensMixin(StoreBase):
    """The `Store` methods for scoped access tokens (mixed into `Store`)."""

    def _scoped_hash(self, token: str) -> str:
        return hmac.new(self._secret, b"scoped:" + token.encode("utf-8"), hashlib.sha256).hexdigest()

    def create_scoped_access_token(
        self, user_id: int, repo_ids: list[int], *, ttl_seconds: float | None = None
    ) -> tuple[ScopedToken, str]:
        """A new token of `user_id` for `repo_ids` (1 to `MAX_SCOPED_REPOS`, duplicates dropped,
        order kept): (token, value). The value is returned this once. `ttl_seconds` is capped at
        `SCOPED_TOKEN_TTL`. Conflict when the user holds `MAX_LIVE_SCOPED_TOKENS` live tokens."""
        ids = tuple(dict.fromkeys(int(r) for r in repo_ids))
        if not ids or len(ids) > MAX_SCOPED_REPOS:
            raise ValueError(f"a scoped access token names 1 to {MAX_SCOPED_REPOS} repositories")
        ttl = (
            SCOPED_TOKEN_TTL.total_seconds()
            if ttl_seconds is None
            else min(ttl_seconds, SCOPED_TOKEN_TTL.total_seconds())
        )
        if ttl <= 0:
            raise ValueError("a scoped access token must live for a positive time")
        value = SCOPED_TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = self._now()
        token = ScopedToken(secrets.token_hex(16), user_id, ids, now, now + timedelta(seconds=ttl))
        with self._tx(write=True) as c:
            self._get_user(c, user_id)
            c.execute(delete(scoped_access_tokens).where(scoped_access_tokens.c.expires_at <= now))
            live = c.scalar(
                select(func.count()).select_from(scoped_access_tokens).where(scoped_access_tokens.c.user_id == user_id)
            )
            if (live or 0) >= MAX_LIVE_SCOPED_TOKENS:
                raise Conflict(
                    f"this user holds {MAX_LIVE_SCOPED_TOKENS} live scoped access tokens: revoke some, or wait"
                )
            c.execute(
                insert(scoped_access_tokens).values(
                    id=token.id,
                    token_hash=self._scoped_hash(value),
                    user_id=user_id,
                    repo_ids=list(ids),
                    created_at=token.created_at,
                    expires_at=token.expires_at,
                )
            )
        return token, value

    def verify_scoped_access_token(self, value: str) -> tuple[ScopedToken, User] | None:
        """The unexpired token of `value` and its user, or None (unknown, expired, revoked, or a
        user who may not use credentials now)."""
        if not isinstance(value, str) or not value.startswith(SCOPED_TOKEN_PREFIX) or len(value) > 256:
            return None
        digest = self._scoped_hash(value)
        with self._tx() as c:
            row = c.execute(
                select(scoped_access_tokens).where(
                    scoped_access_tokens.c.token_hash == digest, scoped_access_tokens.c.expires_at > self._now()
                )
            ).first()
            if row is None or not hmac.compare_digest(row.token_hash, digest) or self._waits(c, row.user_id):
                return None
            user = self._get_user(c, row.user_id)
        token = ScopedToken(row.id, row.user_id, tuple(int(r) for r in row.repo_ids), row.created_at, row.expires_at)
        return token, user

    def existing_repo_ids(self, repo_ids: list[int]) -> set[int]:
        """Which of `repo_ids` are repositories the store knows."""
        with self._tx() as c:
            return {int(r) for r in c.scalars(select(repos.c.id).where(repos.c.id.in_(list(repo_ids))))}

    def revoke_scoped_access_token(self, user_id: int, token_id: str) -> bool:
        """`user_id` revokes their token `token_id` (deleted); False when they have no such token."""
        with self._tx(write=True) as c:
            return bool(
                c.execute(
                    delete(scoped_access_tokens).where(
                        scoped_access_tokens.c.id == token_id, scoped_access_tokens.c.user_id == user_id
                    )
                ).rowcount
            )
