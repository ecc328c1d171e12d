"""Joining: sign-ups waiting for an owner's approval, and invitations.

With ``REQUIRE_APPROVAL_NEW_MEMBERS`` on, a user who signs up (single sign-on, or an invite-less
local sign-up) gets a row in `account_requests` and cannot sign in until an owner approves
(the row goes) or declines (the user goes). The first user ever is OWNER and never waits.

An invite lets one person join without approval, with the invite's role: the owner who makes it
gets a random token once (``inv_`` + 43 URL-safe characters, for the link ``/invite/<token>``);
the store keeps only its HMAC-SHA256 under a key derived from the server secret (the row's
`id`). An invite may name an e-mail: then only a user with that e-mail can use it, and through
an identity provider only when the provider verified that address (else anyone who can claim
the address unverified at some provider could use a leaked link as that person). Through the
invite's own form with a password the address is as typed: that user's address does not count
as verified. An invite works once, until `expires_at`.

`sign_up` decides all of this in one transaction, with the linked account of the identity that
signs up (no user is left without the identity it signed up with). Using an invite is a
conditional UPDATE whose row count is checked, so of two simultaneous uses one gets
`InviteInvalid`, on PostgreSQL too; creating users is serialized (`_serialize_user_creation`),
so two simultaneous first sign-ups cannot both become OWNER.

A user who waits for approval is refused by every credential check of the store
(`get_web_session`, `verify_api_key`, `verify_oauth_access_token`, `verify_scoped_access_token`:
`_waits`), whatever the caller checks besides; so is a user an owner deactivated
(`codesearch.store.offboarding`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Exists, delete, exists, func, insert, literal, or_, select, text, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict, NotFound
from codesearch.store.models import LinkedIdentity
from codesearch.store.tables import account_requests, invites, users
from codesearch.store.users import insert_user

INVITE_PREFIX = "inv_"
#: PostgreSQL advisory lock key serializing the creation of users ("user" in ASCII).
_PG_USERS_LOCK = 0x75736572
#: How long an invite works unless its creator says otherwise.
INVITE_TTL = timedelta(days=7)


class InviteInvalid(Conflict):
    """The invite token is unknown, used, expired, or for another e-mail (the message says which,
    in words fit for the person holding the link)."""


@dataclass
class Invite:
    """An invite as listed: never its token."""

    id: str  # the token's HMAC (hex): what the store keeps
    email: str | None
    role: str
    created_by: int | None
    created_at: datetime
    expires_at: datetime
    accepted_at: datetime | None
    accepted_by: int | None


@dataclass
class AccountRequest:
    user_id: int
    email: str
    name: str
    created_at: datetime


class MembersMixin(StoreBase):
    """The `Store` methods for account requests and invites (mixed into `Store`)."""

    # ------------------------------------------------------------------ invites

    def invite_id(self, token: str) -> str:
        """The stored id of an invite token."""
        return hmac.new(self.derive_key("invites"), (token or "").encode("utf-8"), hashlib.sha256).hexdigest()

    def create_invite(
        self,
        created_by: int | None,
        *,
        email: str | None = None,
        role: str = m.MEMBER,
        ttl_seconds: float = INVITE_TTL.total_seconds(),
    ) -> tuple[Invite, str]:
        """A new invite: (invite, token). The token is returned this once."""
        if role not in m.ROLES:
            raise ValueError(f"unknown role {role!r}")
        token = INVITE_PREFIX + secrets.token_urlsafe(32)
        now = self._now()
        row: dict[str, Any] = {
            "id": self.invite_id(token),
            "email": (email or "").strip().lower() or None,
            "role": role,
            "created_by": created_by,
            "created_at": now,
            "expires_at": now + timedelta(seconds=ttl_seconds),
            "accepted_at": None,
            "accepted_by": None,
        }
        with self._tx(write=True) as c:
            c.execute(insert(invites).values(**row))
        return Invite(**row), token

    def list_invites(self, *, include_used: bool = False) -> list[Invite]:
        """Invites, newest first: open ones only unless `include_used`."""
        conds = [] if include_used else [invites.c.accepted_at.is_(None), invites.c.expires_at > self._now()]
        with self._tx() as c:
            return [
                Invite(**r._mapping)
                for r in c.execute(select(invites).where(*conds).order_by(invites.c.created_at.desc()))
            ]

    def find_invite(self, token: str) -> Invite | None:
        """The open (unused, unexpired) invite of `token`, or None."""
        if not isinstance(token, str) or not token.startswith(INVITE_PREFIX) or len(token) > 200:
            return None
        with self._tx() as c:
            row = c.execute(select(invites).where(invites.c.id == self.invite_id(token))).first()
        if row is None or row.accepted_at is not None or row.expires_at <= self._now():
            return None
        return Invite(**row._mapping)

    def revoke_invite(self, invite_id: str) -> bool:
        """Delete an unused invite; False when there is none."""
        with self._tx(write=True) as c:
            return bool(
                c.execute(delete(invites).where(invites.c.id == invite_id, invites.c.accepted_at.is_(None))).rowcount
            )

    def _take_invite(
        self, c: SAConnection, token: str, email: str, user_id: int, *, email_proven: bool
    ) -> dict[str, Any]:
        """Use up the invite of `token` for `user_id` (whose address is `email`), in `c`; the
        invite's row. `email_proven`: an identity provider verified `email` (or the address was
        typed into the invite's own form). `InviteInvalid` says why it cannot be used (never
        echoing the token)."""
        row = c.execute(select(invites).where(invites.c.id == self.invite_id(token))).first()
        now = self._now()
        if row is None:
            raise InviteInvalid("This invite link is not valid.")
        if row.accepted_at is not None:
            raise InviteInvalid("This invite was used already.")
        if row.expires_at <= now:
            raise InviteInvalid("This invite has expired: ask for a new one.")
        if row.email and row.email != email:
            raise InviteInvalid(f"This invite is for another e-mail address than {email}.")
        if row.email and not email_proven:
            raise InviteInvalid(
                f"This invite is for {row.email}, and the provider you signed in with does not "
                "say that address is verified. Sign in with a provider that verifies it, or join "
                "with a password on the invite's page."
            )
        # Conditional: of two transactions using the invite at once (PostgreSQL's READ COMMITTED
        # lets both read it unused), the second updates no row and is refused.
        if not c.execute(
            update(invites)
            .where(invites.c.id == row.id, invites.c.accepted_at.is_(None))
            .values(accepted_at=now, accepted_by=user_id)
        ).rowcount:
            raise InviteInvalid("This invite was used already.")
        return dict(row._mapping)

    def _serialize_user_creation(self, c: SAConnection) -> None:
        """Make transactions that create users run one at a time (the first user is OWNER: two
        must not both see an empty table). SQLite's write transactions (``BEGIN IMMEDIATE``)
        are serialized already; PostgreSQL takes a transaction-scoped advisory lock."""
        if c.dialect.name == "postgresql":
            c.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_USERS_LOCK})

    @staticmethod
    def _waiting(user_id_column: ColumnElement[Any]) -> ColumnElement[bool]:
        """SQL: the user of `user_id_column` may not use any credential: they wait for approval,
        or an owner deactivated them (`codesearch.store.offboarding`)."""
        who = users.alias("credential_user")  # an alias: never correlated with a query's own `users`
        deactivated: Exists = exists().where(who.c.id == user_id_column, who.c.suspended_at.is_not(None))
        return or_(exists().where(account_requests.c.user_id == user_id_column), deactivated)

    def _waits(self, c: SAConnection, user_id: int) -> bool:
        """Whether `user_id` may not use any credential now (see `_waiting`)."""
        return bool(c.scalar(select(self._waiting(literal(user_id)))))

    # ------------------------------------------------------------------ signing up

    def sign_up(
        self,
        email: str,
        name: str = "",
        *,
        password_hash: str | None = None,
        email_verified: bool = False,
        require_approval: bool = False,
        invite_token: str | None = None,
        identity: LinkedIdentity | None = None,
    ) -> tuple[m.User, bool]:
        """Create a user who joins by themselves: (user, pending). The first user ever is OWNER;
        with a valid invite the user gets its role and the invite is used up (`InviteInvalid`
        otherwise); else a MEMBER who waits for approval (pending) when `require_approval`.
        `email_verified`: an identity provider verified the address (stored on the user).
        `identity`: the keyword arguments of `link_account` for the identity signing up, linked
        in the same transaction. An e-mail that exists already, or an identity linked already
        (a concurrent sign-in was faster), is a `Conflict` and nothing is stored."""
        email = (email or "").strip().lower()
        if not email:
            raise ValueError("a user needs an email")
        now = self._now()
        with self._tx(write=True) as c:
            self._serialize_user_creation(c)
            if c.scalar(select(func.count()).select_from(users).where(users.c.email == email)):
                raise Conflict(f"a user with email {email!r} already exists")
            first = not c.scalar(select(func.count()).select_from(users))
            uid = insert_user(c, email, name, password_hash, m.MEMBER, now, email_verified=email_verified)
            invite = None
            if invite_token and not first:
                # a password join types the address into the invite's own form
                invite = self._take_invite(
                    c, invite_token, email, uid, email_proven=bool(email_verified) or password_hash is not None
                )
            role = m.OWNER if first else (invite["role"] if invite else m.MEMBER)
            if role != m.MEMBER:
                c.execute(update(users).where(users.c.id == uid).values(role=role))
            pending = bool(require_approval and not first and invite is None)
            if pending:
                c.execute(insert(account_requests).values(user_id=uid, created_at=now))
            if identity is not None:
                self._link_account(c, uid, **identity)
            return self._get_user(c, uid), pending

    def accept_invite(self, token: str, user_id: int) -> m.User:
        """An existing user uses an invite: it is used up and the user gets its role if higher.
        An invite for an e-mail needs the user's address to be that one, and verified."""
        with self._tx(write=True) as c:
            user = self._get_user(c, user_id)
            invite = self._take_invite(c, token, user.email, user_id, email_proven=user.email_verified)
            c.execute(delete(account_requests).where(account_requests.c.user_id == user_id))
            if invite["role"] == m.OWNER and user.role != m.OWNER:
                c.execute(update(users).where(users.c.id == user_id).values(role=m.OWNER))
            return self._get_user(c, user_id)

    # ------------------------------------------------------------------ requests

    def is_pending(self, user_id: int) -> bool:
        """Whether the user waits for an owner's approval (and so may not sign in)."""
        with self._tx() as c:
            return c.scalar(select(account_requests.c.user_id).where(account_requests.c.user_id == user_id)) is not None

    def list_account_requests(self) -> list[AccountRequest]:
        """Users waiting for approval, oldest first."""
        with self._tx() as c:
            rows = c.execute(
                select(account_requests.c.user_id, account_requests.c.created_at, users.c.email, users.c.name)
                .join(users, users.c.id == account_requests.c.user_id)
                .order_by(account_requests.c.created_at, account_requests.c.user_id)
            )
            return [
                AccountRequest(user_id=r.user_id, email=r.email, name=r.name, created_at=r.created_at) for r in rows
            ]

    def approve_account_request(self, user_id: int) -> m.User:
        """Let a waiting user in. NotFound when the user does not wait."""
        with self._tx(write=True) as c:
            if not c.execute(delete(account_requests).where(account_requests.c.user_id == user_id)).rowcount:
                raise NotFound("account request", user_id)
            return self._get_user(c, user_id)

    def decline_account_request(self, user_id: int) -> m.User:
        """Refuse a waiting user: the user (and their linked accounts) are deleted. NotFound when
        the user does not wait. Returns the user as it was."""
        with self._tx(write=True) as c:
            if c.scalar(select(account_requests.c.user_id).where(account_requests.c.user_id == user_id)) is None:
                raise NotFound("account request", user_id)
            user = self._get_user(c, user_id)
            c.execute(delete(account_requests).where(account_requests.c.user_id == user_id))
            c.execute(delete(users).where(users.c.id == user_id))
            return user
