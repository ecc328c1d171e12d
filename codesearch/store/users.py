"""Users: accounts of the service, their roles and password hashes.

E-mails are trimmed, lower-cased and unique. The first user ever is OWNER, and the last OWNER
cannot be demoted. The store never sees a password, only its hash. Joining by oneself (sign-up,
approval, invites) is `codesearch.store.members`; the identities a user signs in with are
`codesearch.store.identities`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict
from codesearch.store.lockouts import LOGIN_ACCOUNT
from codesearch.store.models import User
from codesearch.store.rows import from_row, get_one, inserted_id
from codesearch.store.tables import users


def insert_user(
    c: SAConnection,
    email: str,
    name: str,
    password_hash: str | None,
    role: str,
    created_at: datetime,
    *,
    email_verified: bool,
) -> int:
    """Add a user's row in transaction `c` (whose caller serialized user creation and checked
    that `email` is free); its id."""
    return inserted_id(
        c.execute(
            insert(users).values(
                email=email,
                name=name or "",
                password_hash=password_hash,
                role=role,
                created_at=created_at,
                email_verified=bool(email_verified),
            )
        )
    )


class UsersMixin(StoreBase):
    """The `Store` methods for users (mixed into `Store`)."""

    def create_user(
        self,
        email: str,
        name: str = "",
        *,
        role: str = m.MEMBER,
        password_hash: str | None = None,
        email_verified: bool = True,
    ) -> User:
        """Create a user (email is trimmed and lower-cased, and unique: Conflict otherwise).
        The first user ever created is OWNER whatever `role` says. This is how an owner adds
        someone (settings page, command line), so the address counts as verified unless
        `email_verified` says otherwise (people who join by themselves: `sign_up`)."""
        if role not in m.ROLES:
            raise ValueError(f"unknown role {role!r}")
        email = (email or "").strip().lower()
        if not email:
            raise ValueError("a user needs an email")
        with self._tx(write=True) as c:
            self._serialize_user_creation(c)
            if c.scalar(select(func.count()).select_from(users).where(users.c.email == email)):
                raise Conflict(f"a user with email {email!r} already exists")
            if not c.scalar(select(func.count()).select_from(users)):
                role = m.OWNER
            uid = insert_user(c, email, name, password_hash, role, self._now(), email_verified=email_verified)
            return self._get_user(c, uid)

    def get_user(self, user_id: int) -> User:
        with self._tx() as c:
            return self._get_user(c, user_id)

    def find_user_by_email(self, email: str) -> User | None:
        with self._tx() as c:
            row = c.execute(select(users).where(users.c.email == (email or "").strip().lower())).first()
            return from_row(User, row) if row else None

    def list_users(self) -> list[User]:
        with self._tx() as c:
            return [from_row(User, r) for r in c.execute(select(users).order_by(users.c.id))]

    def set_user_role(self, user_id: int, role: str) -> User:
        """Change a user's role; demoting the last active human OWNER (one who can sign in and
        manage the service) is a Conflict."""
        if role not in m.ROLES:
            raise ValueError(f"unknown role {role!r}")
        with self._tx(write=True) as c:
            user = self._get_user(c, user_id)
            active_owners = (
                select(func.count())
                .select_from(users)
                .where(users.c.role == m.OWNER, users.c.suspended_at.is_(None), users.c.kind == m.HUMAN)
            )
            if (
                user.role == m.OWNER
                and role != m.OWNER
                and user.suspended_at is None
                and user.kind == m.HUMAN
                and (c.scalar(active_owners) or 0) <= 1
            ):
                raise Conflict(f"user {user.email!r} is the last owner")
            c.execute(update(users).where(users.c.id == user_id).values(role=role))
            return self._get_user(c, user_id)

    def create_first_user(self, email: str, name: str = "", *, password_hash: str | None = None) -> User:
        """Create the first user (OWNER) in one transaction: Conflict when any user exists already
        (two simultaneous first-account setups cannot both succeed)."""
        email = (email or "").strip().lower()
        if not email:
            raise ValueError("a user needs an email")
        with self._tx(write=True) as c:
            self._serialize_user_creation(c)
            if c.scalar(select(func.count()).select_from(users)):
                raise Conflict("the first account exists already")
            uid = insert_user(c, email, name, password_hash, m.OWNER, self._now(), email_verified=False)
            return self._get_user(c, uid)

    def has_users(self) -> bool:
        with self._tx() as c:
            return c.scalar(select(users.c.id).limit(1)) is not None

    def set_user_password(self, user_id: int, password_hash: str | None) -> User:
        """Set (or clear, with None) the user's password hash. NotFound when there is no such user.
        The caller hashes (`codesearch.accounts.hash_password`): the store never sees passwords.
        A new password also ends the account's sign-in lock-out (`begin_login_attempt`): the
        guesses it punished were aimed at the old one."""
        with self._tx(write=True) as c:
            user = self._get_user(c, user_id)
            c.execute(update(users).where(users.c.id == user_id).values(password_hash=password_hash))
            self._reset_login_counter(c, LOGIN_ACCOUNT, user.email)
            return self._get_user(c, user_id)

    def _get_user(self, c: SAConnection, user_id: int) -> User:
        return get_one(c, User, users.c.id, user_id, "user")
