"""The `Store` methods for OAuth 2.0 codes, access and refresh tokens, and grants (`codesearch.store.oauth`).

Each step that must happen once happens once, in one transaction: a code is redeemed at most once
(`redeem_oauth_code`), a refresh token is used at most once (`rotate_oauth_refresh_token`); a second
presentation of either is a replay and revokes its whole grant. Codes and tokens are kept as their
HMAC (`OAuthHashMixin.oauth_hash`) and compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store.models import User
from codesearch.store.oauth import (
    ACCESS,
    ACCESS_PREFIX,
    CODE_PREFIX,
    EXPIRED,
    MAX_SECRET_LENGTH,
    OK,
    REFRESH,
    REFRESH_PREFIX,
    REFUSED,
    REPLAYED,
    UNKNOWN,
    WRONG_CLIENT,
    AccessToken,
    ConnectedApp,
    IssuedTokens,
    OAuthCode,
    OAuthHashMixin,
    Redeemed,
)
from codesearch.store.rows import AnyRow
from codesearch.store.tables import oauth_clients, oauth_codes, oauth_tokens, users

#: the columns of `oauth_tokens` that listings read: nothing secret (not even `id`, the token's hash)
_TOKEN_LISTING = (
    oauth_tokens.c.kind,
    oauth_tokens.c.grant_id,
    oauth_tokens.c.client_id,
    oauth_tokens.c.scope,
    oauth_tokens.c.created_at,
    oauth_tokens.c.expires_at,
    oauth_tokens.c.used_at,
    oauth_tokens.c.revoked_at,
)


class OAuthTokensMixin(OAuthHashMixin):
    """The `Store` methods for OAuth codes, tokens and grants (mixed into `Store`)."""

    def create_oauth_code(
        self,
        *,
        client_id: str,
        user_id: int,
        redirect_uri: str,
        code_challenge: str,
        scope: str,
        resource: str | None,
        ttl_seconds: float,
    ) -> str:
        """A new authorization code (returned once; stored as its HMAC) starting a new grant."""
        code = CODE_PREFIX + secrets.token_urlsafe(32)
        now = self._now()
        with self._tx(write=True) as c:
            c.execute(
                insert(oauth_codes).values(
                    id=self.oauth_hash(code),
                    client_id=client_id,
                    user_id=user_id,
                    redirect_uri=redirect_uri,
                    code_challenge=code_challenge,
                    scope=scope,
                    resource=resource,
                    created_at=now,
                    expires_at=now + timedelta(seconds=ttl_seconds),
                    grant_id=secrets.token_hex(16),
                )
            )
            self._delete_expired_oauth(c, now)
        return code

    def redeem_oauth_code(
        self,
        code: str,
        *,
        client_id: str,
        check: Callable[[OAuthCode], str | None],
        access_ttl: float,
        refresh_ttl: float | None,
    ) -> Redeemed:
        """Exchange a code for tokens, in one transaction.

        Unknown code: `UNKNOWN`. Used before: `REPLAYED`, and every token of its grant is revoked.
        Issued to another client: `WRONG_CLIENT` (the code stays usable by its client). Expired:
        `EXPIRED`. Otherwise the code is used up, and `check(code)` (PKCE, redirect_uri,
        resource) returns None to issue tokens, or why not (`REFUSED`, with that `detail`).
        A refresh token comes along when `refresh_ttl` is given."""
        if not isinstance(code, str) or not code.startswith(CODE_PREFIX) or len(code) > MAX_SECRET_LENGTH:
            return Redeemed(UNKNOWN)
        digest = self.oauth_hash(code)
        now = self._now()
        with self._tx(write=True) as c:
            row = c.execute(select(oauth_codes).where(oauth_codes.c.id == digest)).first()
            if row is None or not hmac.compare_digest(row.id, digest):
                return Redeemed(UNKNOWN)
            if row.used_at is not None:
                revoked = self._revoke_grant(c, row.grant_id, now)
                return Redeemed(REPLAYED, grant_id=row.grant_id, user_id=row.user_id, revoked=revoked)
            if row.client_id != client_id:
                return Redeemed(WRONG_CLIENT, grant_id=row.grant_id, user_id=row.user_id)
            if row.expires_at <= now:
                return Redeemed(EXPIRED, grant_id=row.grant_id, user_id=row.user_id)
            used = c.execute(
                update(oauth_codes)
                .where(oauth_codes.c.id == digest, oauth_codes.c.used_at.is_(None))
                .values(used_at=now)
            ).rowcount
            if used != 1:  # another request got there first
                revoked = self._revoke_grant(c, row.grant_id, now)
                return Redeemed(REPLAYED, grant_id=row.grant_id, user_id=row.user_id, revoked=revoked)
            info = OAuthCode(
                row.client_id,
                row.user_id,
                row.redirect_uri,
                row.code_challenge,
                row.scope,
                row.resource,
                row.expires_at,
                row.grant_id,
            )
            problem = check(info)
            if problem:
                return Redeemed(REFUSED, grant_id=row.grant_id, user_id=row.user_id, detail=problem)
            if c.scalar(select(users.c.id).where(users.c.id == row.user_id)) is None:
                return Redeemed(UNKNOWN)
            tokens = self._issue(
                c, now, row.grant_id, row.client_id, row.user_id, row.scope, row.resource, access_ttl, refresh_ttl
            )
            c.execute(update(oauth_clients).where(oauth_clients.c.id == row.client_id).values(last_used_at=now))
        return Redeemed(OK, tokens=tokens, grant_id=row.grant_id, user_id=row.user_id)

    # ------------------------------------------------------------------ tokens

    def _issue(
        self,
        c: SAConnection,
        now: datetime,
        grant_id: str,
        client_id: str,
        user_id: int,
        scope: str,
        resource: str | None,
        access_ttl: float,
        refresh_ttl: float | None,
    ) -> IssuedTokens:
        def token_row(token: str, kind: str, ttl: float) -> dict[str, Any]:
            return dict(
                id=self.oauth_hash(token),
                kind=kind,
                grant_id=grant_id,
                client_id=client_id,
                user_id=user_id,
                scope=scope,
                resource=resource,
                created_at=now,
                expires_at=now + timedelta(seconds=ttl),
            )

        access = ACCESS_PREFIX + secrets.token_urlsafe(32)
        rows = [token_row(access, ACCESS, access_ttl)]
        refresh = None
        if refresh_ttl:
            refresh = REFRESH_PREFIX + secrets.token_urlsafe(32)
            rows.append(token_row(refresh, REFRESH, refresh_ttl))
        c.execute(insert(oauth_tokens), rows)
        return IssuedTokens(access, int(access_ttl), scope, refresh)

    def rotate_oauth_refresh_token(
        self,
        token: str,
        *,
        client_id: str,
        check: Callable[[str, str | None], str | None],
        access_ttl: float,
        refresh_ttl: float,
    ) -> Redeemed:
        """Use a refresh token once: a new access token and a new refresh token of the same grant.

        Unknown: `UNKNOWN`. Used before, or revoked: `REPLAYED`, and the whole grant is revoked
        (a stolen token was used by one of the two parties). Another client's: `WRONG_CLIENT`
        (not consumed). Expired: `EXPIRED`. `check(scope, resource)` refuses (`REFUSED`, not
        consumed) a request asking for more than the grant has."""
        if not isinstance(token, str) or not token.startswith(REFRESH_PREFIX) or len(token) > MAX_SECRET_LENGTH:
            return Redeemed(UNKNOWN)
        digest = self.oauth_hash(token)
        now = self._now()
        with self._tx(write=True) as c:
            row = c.execute(
                select(oauth_tokens).where(oauth_tokens.c.id == digest, oauth_tokens.c.kind == REFRESH)
            ).first()
            if row is None or not hmac.compare_digest(row.id, digest):
                return Redeemed(UNKNOWN)
            if row.client_id != client_id:
                return Redeemed(WRONG_CLIENT, grant_id=row.grant_id, user_id=row.user_id)
            if row.used_at is not None or row.revoked_at is not None:
                revoked = self._revoke_grant(c, row.grant_id, now)
                return Redeemed(REPLAYED, grant_id=row.grant_id, user_id=row.user_id, revoked=revoked)
            if row.expires_at <= now:
                return Redeemed(EXPIRED, grant_id=row.grant_id, user_id=row.user_id)
            problem = check(row.scope, row.resource)
            if problem:
                return Redeemed(REFUSED, grant_id=row.grant_id, user_id=row.user_id, detail=problem)
            used = c.execute(
                update(oauth_tokens)
                .where(
                    oauth_tokens.c.id == digest, oauth_tokens.c.used_at.is_(None), oauth_tokens.c.revoked_at.is_(None)
                )
                .values(used_at=now)
            ).rowcount
            if used != 1:
                revoked = self._revoke_grant(c, row.grant_id, now)
                return Redeemed(REPLAYED, grant_id=row.grant_id, user_id=row.user_id, revoked=revoked)
            if c.scalar(select(users.c.id).where(users.c.id == row.user_id)) is None:
                return Redeemed(UNKNOWN)
            tokens = self._issue(
                c, now, row.grant_id, row.client_id, row.user_id, row.scope, row.resource, access_ttl, refresh_ttl
            )
            c.execute(update(oauth_clients).where(oauth_clients.c.id == row.client_id).values(last_used_at=now))
            self._delete_expired_oauth(c, now)
        return Redeemed(OK, tokens=tokens, grant_id=row.grant_id, user_id=row.user_id)

    def verify_oauth_access_token(self, token: str) -> tuple[AccessToken, User] | None:
        """``(AccessToken, User)`` for a valid access token (known, not revoked, not expired, its
        user still there and not waiting for approval: `is_pending`), else None."""
        if not isinstance(token, str) or not token.startswith(ACCESS_PREFIX) or len(token) > MAX_SECRET_LENGTH:
            return None
        digest = self.oauth_hash(token)
        now = self._now()
        with self._tx() as c:
            row = c.execute(
                select(oauth_tokens).where(oauth_tokens.c.id == digest, oauth_tokens.c.kind == ACCESS)
            ).first()
            if (
                row is None
                or not hmac.compare_digest(row.id, digest)
                or row.revoked_at is not None
                or row.expires_at <= now
                or self._waits(c, row.user_id)
            ):
                return None
            try:
                user = self._get_user(c, row.user_id)
            except Exception:  # the user is gone (the cascade removes the token too)
                return None
        return AccessToken(row.grant_id, row.client_id, row.user_id, row.scope, row.resource, row.expires_at), user

    def revoke_oauth_token(self, token: str, *, client_id: str) -> tuple[str, int]:
        """RFC 7009: revoke `token` if client `client_id` holds it. A refresh token revokes its
        whole grant (every access and refresh token), an access token only itself. Returns
        (what happened: `OK`, `UNKNOWN` or `WRONG_CLIENT`, tokens revoked now)."""
        if (
            not isinstance(token, str)
            or len(token) > MAX_SECRET_LENGTH
            or not token.startswith((ACCESS_PREFIX, REFRESH_PREFIX))
        ):
            return UNKNOWN, 0
        digest = self.oauth_hash(token)
        now = self._now()
        with self._tx(write=True) as c:
            row = c.execute(select(oauth_tokens).where(oauth_tokens.c.id == digest)).first()
            if row is None or not hmac.compare_digest(row.id, digest):
                return UNKNOWN, 0
            if row.client_id != client_id:
                return WRONG_CLIENT, 0
            if row.kind == REFRESH:
                return OK, self._revoke_grant(c, row.grant_id, now)
            n = c.execute(
                update(oauth_tokens)
                .where(oauth_tokens.c.id == digest, oauth_tokens.c.revoked_at.is_(None))
                .values(revoked_at=now)
            ).rowcount
            return OK, n

    def revoke_oauth_grant(self, grant_id: str) -> int:
        """Revoke every token of a grant (and its code can no longer be redeemed)."""
        with self._tx(write=True) as c:
            return self._revoke_grant(c, grant_id, self._now())

    def list_connected_oauth_apps(self, user_id: int) -> list[ConnectedApp]:
        """The clients holding a live token of user `user_id` (see `ConnectedApp`), the most
        recently active first. Nothing secret is read: tokens are only counted and dated."""
        now = self._now()
        with self._tx() as c:
            rows = c.execute(select(*_TOKEN_LISTING).where(oauth_tokens.c.user_id == user_id)).all()
            live = {
                r.grant_id
                for r in rows
                if r.revoked_at is None and r.expires_at > now and (r.kind == ACCESS or r.used_at is None)
            }
            by_client: dict[str, list[AnyRow]] = {}
            for r in rows:
                if r.grant_id in live:
                    by_client.setdefault(r.client_id, []).append(r)
            clients = {
                row.id: row
                for row in c.execute(
                    select(oauth_clients.c.id, oauth_clients.c.name, oauth_clients.c.redirect_uris).where(
                        oauth_clients.c.id.in_(list(by_client))
                    )
                ).all()
            }
        apps = []
        for client_id, mine in by_client.items():
            client = clients.get(client_id)
            if client is None:
                continue
            scopes = dict.fromkeys(s for r in mine for s in r.scope.split())
            apps.append(
                ConnectedApp(
                    client_id,
                    client.name,
                    list(client.redirect_uris or []),
                    list(scopes),
                    min(r.created_at for r in mine),
                    max(r.created_at for r in mine),
                    len({r.grant_id for r in mine}),
                )
            )
        apps.sort(key=lambda a: a.last_issued_at, reverse=True)
        return apps

    def revoke_oauth_client_for_user(self, user_id: int, client_id: str) -> int:
        """Take back everything client `client_id` holds for user `user_id`: every access and
        refresh token is revoked, and a code not exchanged yet is deleted (it can no longer give
        tokens). Other users' grants to the same client are untouched. Returns the tokens revoked
        now."""
        with self._tx(write=True) as c:
            c.execute(
                delete(oauth_codes).where(
                    oauth_codes.c.user_id == user_id,
                    oauth_codes.c.client_id == client_id,
                    oauth_codes.c.used_at.is_(None),
                )
            )
            return c.execute(
                update(oauth_tokens)
                .where(
                    oauth_tokens.c.user_id == user_id,
                    oauth_tokens.c.client_id == client_id,
                    oauth_tokens.c.revoked_at.is_(None),
                )
                .values(revoked_at=self._now())
            ).rowcount

    def list_oauth_tokens(self, user_id: int) -> list[dict[str, Any]]:
        """The user's tokens, without secrets: kind, client, grant, times (for pages and tests)."""
        with self._tx() as c:
            rows = c.execute(
                select(*_TOKEN_LISTING).where(oauth_tokens.c.user_id == user_id).order_by(oauth_tokens.c.created_at)
            ).all()
        return [dict(r._mapping) for r in rows]

    def _revoke_grant(self, c: SAConnection, grant_id: str, now: datetime) -> int:
        # the code too, so that it cannot be redeemed later by whoever replayed it
        c.execute(
            update(oauth_codes)
            .where(oauth_codes.c.grant_id == grant_id, oauth_codes.c.used_at.is_(None))
            .values(used_at=now)
        )
        return c.execute(
            update(oauth_tokens)
            .where(oauth_tokens.c.grant_id == grant_id, oauth_tokens.c.revoked_at.is_(None))
            .values(revoked_at=now)
        ).rowcount

    def _delete_expired_oauth(self, c: SAConnection, now: datetime) -> None:
        """Housekeeping: codes a day past their expiry, tokens past theirs (a replay of those
        cannot be told from an unknown one any more, and needs no answer but `invalid_grant`)."""
        c.execute(delete(oauth_codes).where(oauth_codes.c.expires_at < now - timedelta(days=1)))
        c.execute(delete(oauth_tokens).where(or_(oauth_tokens.c.expires_at < now - timedelta(days=1))))
