"""Refreshing a linked account's code-host token, for user-driven permission syncing.

GitLab's OAuth access tokens live two hours; GitHub's (OAuth apps) do not expire, and GitHub App
user tokens live eight hours; Gitea's and Bitbucket's (Cloud and Data Center) expire within
hours. A user-driven sync of an account whose token has expired (or that the host refuses with
401) refreshes it once with the stored refresh token at the provider's token endpoint (Authlib's
`AsyncOAuth2Client.refresh_token`), stores the new pair
sealed, and asks again. Without a refresh token, or when the provider refuses it, the account
has no valid token: its user-driven grants are revoked until its user signs in again.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx

from codesearch.errors import HostAuthError
from codesearch.sso.providers import HTTP_TIMEOUT_S, build_providers

if TYPE_CHECKING:
    from codesearch.config.models import Config
    from codesearch.store import Store
    from codesearch.store.models import LinkedAccount

#: A token that expires within this long is refreshed before it is used.
EARLY = timedelta(seconds=60)


def needs_refresh(expires_at: datetime | None, now: datetime) -> bool:
    return expires_at is not None and expires_at - EARLY <= now


def refresh_account_token(store: Store, config: Config, account: LinkedAccount) -> str:
    """A fresh access token for `account` (stored sealed); `HostAuthError` when there is none to be had."""
    tokens = store.account_tokens(account.id)
    if not tokens.refresh_token:
        raise HostAuthError("the account has no valid token and no refresh token: its user must sign in again")
    provider = build_providers(getattr(config, "identity_providers", None) or []).get(account.provider)
    if provider is None:
        raise HostAuthError(f"the identity provider {account.provider!r} of this account is no longer configured")

    async def go() -> dict[str, Any]:
        from authlib.integrations.httpx_client import AsyncOAuth2Client

        async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
            endpoints = await provider.endpoints(http)
        client_id, client_secret = provider.credentials()
        async with AsyncOAuth2Client(
            client_id=client_id,
            client_secret=client_secret,
            timeout=HTTP_TIMEOUT_S,
            token_endpoint_auth_method=endpoints.token_auth,
        ) as client:
            return dict(await client.refresh_token(endpoints.token, refresh_token=tokens.refresh_token))

    try:
        token = asyncio.run(go())
    except Exception as e:  # the provider refused or could not be reached: no valid token
        raise HostAuthError(
            f"refreshing the account's token failed ({type(e).__name__}): its user must sign in again"
        ) from None
    access: str | None = token.get("access_token")
    if not access:
        raise HostAuthError("the provider's refresh answer had no access token: its user must sign in again")
    expires_at = None
    if token.get("expires_in"):
        expires_at = datetime.now(UTC) + timedelta(seconds=float(token["expires_in"]))
    store.set_account_tokens(
        account.id, access_token=access, refresh_token=token.get("refresh_token"), expires_at=expires_at
    )
    return access
