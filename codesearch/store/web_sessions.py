"""Sign-in sessions of the web UI.

The cookie value is returned once; the store keeps its HMAC-SHA256 under the sign-in secret
(`AUTH_SECRET`), so changing that secret ends every session, and a copy of the database holds
no cookie. Each session has its own CSRF token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any, ClassVar

from sqlalchemy import Select, bindparam, delete, insert, select, update

from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict
from codesearch.store.models import SERVICE, User, WebSession
from codesearch.store.tables import users, web_sessions


class AccountDisabled(Conflict):
    """The account may not sign in: a service account, or deactivated by an owner (403)."""

    status_code = 403
    error_code = "INSUFFICIENT_PERMISSIONS"


class WebSessionsMixin(StoreBase):
    """The `Store` methods for web sign-in sessions (mixed into `Store`)."""

    _session_of: ClassVar[Select[Any] | None] = None  # `_session_query`, once built

    def web_session_id(self, cookie_value: str) -> str:
        """The stored id of a session cookie value: its HMAC-SHA256 under the sign-in secret,
        hex. A cookie is valid only while that secret is the one it was issued under."""
        return hmac.new(self._auth_secret, cookie_value.encode("utf-8"), hashlib.sha256).hexdigest()

    def create_web_session(self, user_id: int, *, ttl_seconds: float) -> tuple[str, WebSession]:
        """A new sign-in session for the user: (cookie value, session). The cookie value (256
        random bits, URL-safe) is returned this once; only its SHA-256 is stored. The session has
        its own random CSRF token. NotFound when `user_id` is not a user; `AccountDisabled` for a
        service account or a deactivated user (neither signs in interactively)."""
        value = secrets.token_urlsafe(32)
        now = self._now()
        row: dict[str, Any] = {
            "id": self.web_session_id(value),
            "user_id": user_id,
            "csrf_token": secrets.token_urlsafe(32),
            "created_at": now,
            "expires_at": now + timedelta(seconds=ttl_seconds),
            "last_seen_at": now,
        }
        with self._tx(write=True) as c:
            user = self._get_user(c, user_id)
            if user.kind == SERVICE:
                raise AccountDisabled(f"{user.name!r} is a service account: it uses API keys and cannot sign in")
            if user.suspended_at is not None:
                raise AccountDisabled("this account is deactivated: ask an owner to reactivate it")
            c.execute(insert(web_sessions).values(**row))
        return value, WebSession(**row)

    def get_web_session(
        self, cookie_value: str, *, touch_resolution_seconds: float = 60.0
    ) -> tuple[WebSession, User] | None:
        """The unexpired session of a cookie value and its user (one read), or None; None too
        while the user waits for approval (`is_pending`). Updates `last_seen_at` at most once
        per `touch_resolution_seconds`."""
        if not isinstance(cookie_value, str) or not cookie_value or len(cookie_value) > 256:
            return None
        now = self._now()
        sid = self.web_session_id(cookie_value)
        user_cols = list(users.columns)
        with self._tx() as c:
            row = c.execute(self._session_query(), {"sid": sid, "now": now}).first()
        if row is None:
            return None
        mp = row._mapping
        session = WebSession(**{col.name: mp[col.name] for col in web_sessions.columns})
        user = User(**{col.name: mp[f"u_{col.name}"] for col in user_cols})
        if now - session.last_seen_at >= timedelta(seconds=touch_resolution_seconds):
            with self._tx(write=True) as c:
                c.execute(update(web_sessions).where(web_sessions.c.id == sid).values(last_seen_at=now))
            session.last_seen_at = now
        return session, user

    @classmethod
    def _session_query(cls) -> Select[Any]:
        """The session of id ``sid`` unexpired at ``now``, with its user's columns (``u_`` and
        the name), unless the user may not use credentials: built once, as the API key's query
        (`ApiKeysMixin._key_owner_query`: building it was most of what the check cost)."""
        query = cls._session_of
        if query is None:
            query = (
                select(web_sessions, *[col.label(f"u_{col.name}") for col in users.columns])
                .join(users, users.c.id == web_sessions.c.user_id)
                .where(
                    web_sessions.c.id == bindparam("sid"),
                    web_sessions.c.expires_at > bindparam("now"),
                    ~cls._waiting(web_sessions.c.user_id),
                )
            )
            cls._session_of = query
        return query

    def delete_web_session(self, cookie_value: str) -> bool:
        """End the session of a cookie value; True when there was one."""
        if not isinstance(cookie_value, str) or not cookie_value:
            return False
        with self._tx(write=True) as c:
            return bool(
                c.execute(delete(web_sessions).where(web_sessions.c.id == self.web_session_id(cookie_value))).rowcount
            )

    def delete_user_web_sessions(self, user_id: int, *, keep: str | None = None) -> int:
        """End every session of the user (but the one of cookie value `keep`); how many ended."""
        conds = [web_sessions.c.user_id == user_id]
        if keep:
            conds.append(web_sessions.c.id != self.web_session_id(keep))
        with self._tx(write=True) as c:
            return c.execute(delete(web_sessions).where(*conds)).rowcount

    def delete_expired_web_sessions(self) -> int:
        """Remove expired sessions; how many."""
        with self._tx(write=True) as c:
            return c.execute(delete(web_sessions).where(web_sessions.c.expires_at <= self._now())).rowcount
