"""Linked accounts: the identities a user signs in with, and their code-host tokens.

A user has one row in `users` and any number of linked accounts (`linked_accounts`): one per
identity provider account (GitHub, GitLab, Google, an OpenID Connect provider, ...). Single
sign-on finds the user by ``(provider, subject)``; permission syncing asks the code host, with
the account's own token, which repositories it can read (user-driven), and matches repository
collaborators to accounts by ``(host, subject)`` (repo-driven).

Tokens are secrets: they are stored sealed (AES-256-GCM under a key derived from the server
secret, `seal`/`unseal`), never listed (`LinkedAccount` has no token fields), and read back only
by `account_tokens`, for the code that calls the host.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Unpack

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict, NotFound, StoreError
from codesearch.store.models import LinkedAccount, LinkedIdentity
from codesearch.store.rows import AnyRow, inserted_id
from codesearch.store.tables import linked_accounts, users

_SEAL_PREFIX = "v1:"


@dataclass
class AccountTokens:
    access_token: str | None
    refresh_token: str | None
    expires_at: datetime | None


_LISTED = [c for c in linked_accounts.columns if c.name not in ("access_token", "refresh_token")]


def _account(row: AnyRow) -> LinkedAccount:
    return LinkedAccount(**{c.name: row._mapping[c.name] for c in _LISTED})


class IdentitiesMixin(StoreBase):
    """The `Store` methods for linked accounts (mixed into `Store`)."""

    # ------------------------------------------------------------------ sealing secrets

    def _seal_key(self) -> bytes:
        return self.derive_key("linked account tokens")  # 32 bytes: AES-256

    def seal(self, value: str | None) -> str | None:
        """`value` encrypted and authenticated for storage (None stays None)."""
        if value is None:
            return None
        nonce = os.urandom(12)
        box = AESGCM(self._seal_key()).encrypt(nonce, value.encode("utf-8"), b"codesearch")
        return _SEAL_PREFIX + base64.urlsafe_b64encode(nonce + box).decode("ascii")

    def unseal(self, value: str | None) -> str | None:
        """What `seal` sealed. A value sealed under another server secret cannot be read: a
        `StoreError` that says so (the account must sign in again)."""
        if value is None:
            return None
        if not value.startswith(_SEAL_PREFIX):
            raise StoreError("a stored token is not in a known sealed form")
        raw = base64.urlsafe_b64decode(value[len(_SEAL_PREFIX) :].encode("ascii"))
        try:
            return AESGCM(self._seal_key()).decrypt(raw[:12], raw[12:], b"codesearch").decode("utf-8")
        except Exception:
            raise StoreError(
                "a stored token was sealed under another server secret "
                "(SOURCEBOT_ENCRYPTION_KEY changed): the account must sign in again"
            ) from None

    # ------------------------------------------------------------------ accounts

    def link_account(self, user_id: int, **identity: Unpack[LinkedIdentity]) -> LinkedAccount:
        """Link ``(provider, subject)`` to the user, or refresh the link (tokens, login, e-mail,
        last sign-in) when it exists already. The same identity linked to another user is a
        `Conflict`: an identity belongs to one user.

        `email` is the address the provider *verified* for this identity (None when it vouches
        for none): when it is the user's own address, the user's address counts as verified from
        then on (`users.email_verified`)."""
        with self._tx(write=True) as c:
            self._get_user(c, user_id)
            return self._link_account(c, user_id, **identity)

    def _link_account(
        self,
        c: SAConnection,
        user_id: int,
        *,
        provider: str,
        provider_type: str,
        subject: str,
        host: str | None = None,
        login: str | None = None,
        email: str | None = None,
        access_token: str | None = None,
        refresh_token: str | None = None,
        token_expires_at: datetime | None = None,
        scope: str | None = None,
        signed_in: bool = True,
    ) -> LinkedAccount:
        """`link_account` inside the caller's transaction `c` (`sign_up` creates a user and links
        its identity in one)."""
        subject = str(subject)
        if not provider or not subject:
            raise ValueError("a linked account needs a provider and a subject")
        now = self._now()
        email = (email or "").strip().lower() or None
        values: dict[str, Any] = {
            "login": login,
            "email": email,
            "host": host,
            "provider_type": provider_type,
            "scope": scope,
            "token_expires_at": token_expires_at,
        }
        if access_token is not None:
            values["access_token"] = self.seal(access_token)
        if refresh_token is not None:
            values["refresh_token"] = self.seal(refresh_token)
        if signed_in:
            values["last_sign_in_at"] = now
        row = c.execute(
            select(linked_accounts.c.id, linked_accounts.c.user_id).where(
                linked_accounts.c.provider == provider, linked_accounts.c.subject == subject
            )
        ).first()
        if row is not None and row.user_id != user_id:
            raise Conflict(f"this {provider_type} account is linked to another user")
        if row is None:
            aid = inserted_id(
                c.execute(
                    insert(linked_accounts).values(
                        user_id=user_id, provider=provider, subject=subject, created_at=now, **values
                    )
                )
            )
        else:
            aid = row.id
            c.execute(update(linked_accounts).where(linked_accounts.c.id == aid).values(**values))
        if email is not None:
            c.execute(update(users).where(users.c.id == user_id, users.c.email == email).values(email_verified=True))
        return _account(c.execute(select(linked_accounts).where(linked_accounts.c.id == aid)).one())

    def find_linked_account(self, provider: str, subject: str) -> LinkedAccount | None:
        with self._tx() as c:
            row = c.execute(
                select(linked_accounts).where(
                    linked_accounts.c.provider == provider, linked_accounts.c.subject == str(subject)
                )
            ).first()
            return _account(row) if row else None

    def get_linked_account(self, account_id: int) -> LinkedAccount:
        with self._tx() as c:
            row = c.execute(select(linked_accounts).where(linked_accounts.c.id == account_id)).first()
            if row is None:
                raise NotFound("linked account", account_id)
            return _account(row)

    def list_linked_accounts(
        self, *, user_id: int | None = None, host: str | None = None, with_host: bool = False
    ) -> list[LinkedAccount]:
        """Linked accounts, oldest first: of one user, on one host, or (`with_host`) on any code host."""
        conds = []
        if user_id is not None:
            conds.append(linked_accounts.c.user_id == user_id)
        if host is not None:
            conds.append(linked_accounts.c.host == host)
        if with_host:
            conds.append(linked_accounts.c.host.is_not(None))
        with self._tx() as c:
            return [
                _account(r) for r in c.execute(select(linked_accounts).where(*conds).order_by(linked_accounts.c.id))
            ]

    def unlink_account(self, user_id: int, account_id: int) -> bool:
        """Remove one of the user's linked accounts (and with it what it was granted: grants are
        matched through accounts at read time). False when the user has no such account."""
        with self._tx(write=True) as c:
            return bool(
                c.execute(
                    delete(linked_accounts).where(
                        linked_accounts.c.id == account_id, linked_accounts.c.user_id == user_id
                    )
                ).rowcount
            )

    def account_tokens(self, account_id: int) -> AccountTokens:
        """The account's tokens, unsealed (for calling its provider)."""
        with self._tx() as c:
            row = c.execute(
                select(
                    linked_accounts.c.access_token, linked_accounts.c.refresh_token, linked_accounts.c.token_expires_at
                ).where(linked_accounts.c.id == account_id)
            ).first()
        if row is None:
            raise NotFound("linked account", account_id)
        return AccountTokens(self.unseal(row.access_token), self.unseal(row.refresh_token), row.token_expires_at)

    def set_account_tokens(
        self,
        account_id: int,
        *,
        access_token: str | None,
        refresh_token: str | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        """New tokens for an account (after a refresh). A None refresh token keeps the old one."""
        values: dict[str, Any] = {"access_token": self.seal(access_token), "token_expires_at": expires_at}
        if refresh_token is not None:
            values["refresh_token"] = self.seal(refresh_token)
        with self._tx(write=True) as c:
            c.execute(update(linked_accounts).where(linked_accounts.c.id == account_id).values(**values))
