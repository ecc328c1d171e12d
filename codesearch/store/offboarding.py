"""Offboarding and service accounts: removing, deactivating and reactivating members.

Removing a member deletes the account: their sign-in sessions, API keys, OAuth codes and tokens,
scoped access tokens, linked identities and saved insights go with it (foreign keys cascade),
and so do their PRIVATE chats (nobody else may read those; a chat without a user would look like
an anonymous visitor's). Their PUBLIC chats stay readable by their links, without an owner.

Deactivating keeps the account but ends every credential at once, in the same transaction:
sessions are deleted, API keys revoked, OAuth grants and scoped access tokens deleted. While
``suspended_at`` is set, every credential check of the store refuses the user as well
(`MembersMixin._waits`), so a key minted in a race is refused too. Reactivating clears
``suspended_at``; the user signs in again and makes new keys (the old ones stay revoked).

The last active human OWNER can be neither removed nor deactivated (`LastOwner`): someone must
be able to manage the service. Credentials are read from the database on every request, on
every replica (no cache holds them), so an ended credential is refused at once everywhere.

A service account is a non-human member (``kind = service``) owning API keys for CI jobs and
bots. Its e-mail is a made-up address under ``.invalid`` (RFC 2606), so no identity provider
can sign in as it, it has no password, and `create_web_session` refuses it: it never signs in
interactively.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from sqlalchemy import and_, delete, func, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict
from codesearch.store.models import User
from codesearch.store.rows import from_row
from codesearch.store.tables import (
    api_keys,
    chats,
    oauth_codes,
    oauth_tokens,
    scoped_access_tokens,
    users,
    web_sessions,
)
from codesearch.store.users import insert_user

#: The domain of service accounts' made-up addresses (``.invalid`` never resolves: RFC 2606).
SERVICE_EMAIL_DOMAIN = "service-account.invalid"
_MAX_SERVICE_NAME = 100


class LastOwner(Conflict):
    """The last active owner would be removed or deactivated (403, as Sourcebot answers)."""

    status_code = 403
    error_code = "LAST_OWNER_CANNOT_BE_REMOVED"


class OffboardingMixin(StoreBase):
    """The `Store` methods for removing, deactivating and reactivating members, and service
    accounts (mixed into `Store`)."""

    def remove_user(self, user_id: int) -> User:
        """Delete the account of `user_id` and everything it owns but its PUBLIC chats (see the
        module docstring); the user as it was. NotFound when there is none; `LastOwner` when it
        is the last active owner."""
        with self._tx(write=True) as c:
            user = self._get_user(c, user_id)
            self._check_not_last_owner(c, user, "removed")
            self._end_credentials(c, user_id)
            c.execute(delete(chats).where(chats.c.user_id == user_id, chats.c.visibility == m.CHAT_PRIVATE))
            c.execute(delete(users).where(users.c.id == user_id))
            return user

    def set_user_suspended(self, user_id: int, suspended: bool) -> tuple[User, bool]:
        """Deactivate (`suspended`) or reactivate `user_id`: (the user now, whether it changed).
        Deactivating ends every credential in the same transaction; it is a no-op on a user
        deactivated already. NotFound when there is no such user; `LastOwner` for the last
        active owner."""
        with self._tx(write=True) as c:
            user = self._get_user(c, user_id)
            if bool(user.suspended_at) == suspended:
                return user, False
            if suspended:
                self._check_not_last_owner(c, user, "deactivated")
                self._end_credentials(c, user_id)
            c.execute(
                update(users).where(users.c.id == user_id).values(suspended_at=self._now() if suspended else None)
            )
            return self._get_user(c, user_id), True

    def create_service_account(self, name: str, *, role: str = m.MEMBER) -> User:
        """A new service account called `name` (1 to 100 characters), with a made-up address
        under ``.invalid``, no password and `role`."""
        name = (name or "").strip()
        if not name or len(name) > _MAX_SERVICE_NAME:
            raise ValueError(f"a service account needs a name of 1 to {_MAX_SERVICE_NAME} characters")
        if role not in m.ROLES:
            raise ValueError(f"unknown role {role!r}")
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "service"
        email = f"{slug}-{secrets.token_hex(4)}@{SERVICE_EMAIL_DOMAIN}"
        with self._tx(write=True) as c:
            self._serialize_user_creation(c)
            if not c.scalar(select(func.count()).select_from(users)):
                raise Conflict("the first account must be a person (an owner who can sign in)")
            uid = insert_user(c, email, name, None, role, self._now(), email_verified=False)
            c.execute(update(users).where(users.c.id == uid).values(kind=m.SERVICE))
            return self._get_user(c, uid)

    def list_service_accounts(self) -> list[User]:
        """Every service account, oldest first."""
        with self._tx() as c:
            return [
                from_row(User, r)
                for r in c.execute(select(users).where(users.c.kind == m.SERVICE).order_by(users.c.id))
            ]

    def last_activity(self) -> dict[int, datetime]:
        """When each user last used the service, as far as the store knows: the latest of their
        sessions' `last_seen_at` and their keys' `last_used_at` (users never seen are absent)."""
        out: dict[int, datetime] = {}
        with self._tx() as c:
            for uid, at in list(
                c.execute(
                    select(web_sessions.c.user_id, func.max(web_sessions.c.last_seen_at)).group_by(
                        web_sessions.c.user_id
                    )
                )
            ) + list(
                c.execute(select(api_keys.c.user_id, func.max(api_keys.c.last_used_at)).group_by(api_keys.c.user_id))
            ):
                if at is not None:
                    at = at if at.tzinfo else at.replace(tzinfo=UTC)
                    out[uid] = max(out.get(uid, at), at)
        return out

    def count_active_owners(self) -> int:
        """Owners who can manage the service: human, not deactivated."""
        with self._tx() as c:
            return self._active_owners(c)

    # ------------------------------------------------------------------ internals

    def _active_owners(self, c: SAConnection) -> int:
        return int(
            c.scalar(
                select(func.count())
                .select_from(users)
                .where(and_(users.c.role == m.OWNER, users.c.suspended_at.is_(None), users.c.kind == m.HUMAN))
            )
            or 0
        )

    def _check_not_last_owner(self, c: SAConnection, user: User, what: str) -> None:
        if user.role == m.OWNER and user.kind == m.HUMAN and user.suspended_at is None and self._active_owners(c) <= 1:
            raise LastOwner(
                f"user {user.email!r} is the last owner and cannot be {what}: make another member owner first"
            )

    def _end_credentials(self, c: SAConnection, user_id: int) -> None:
        """End every credential of `user_id` in transaction `c`."""
        c.execute(delete(web_sessions).where(web_sessions.c.user_id == user_id))
        c.execute(
            update(api_keys)
            .where(api_keys.c.user_id == user_id, api_keys.c.revoked_at.is_(None))
            .values(revoked_at=self._now())
        )
        c.execute(delete(oauth_tokens).where(oauth_tokens.c.user_id == user_id))
        c.execute(delete(oauth_codes).where(oauth_codes.c.user_id == user_id))
        c.execute(delete(scoped_access_tokens).where(scoped_access_tokens.c.user_id == user_id))
