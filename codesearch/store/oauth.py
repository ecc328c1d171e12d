"""OAuth 2.0 for MCP clients: registered clients, authorization codes, access and refresh tokens.

The protocol lives in `codesearch.oauth.server`; the store keeps its state, and makes
each step that must happen once happen once, in one transaction. This module holds what both
sides share (the prefixes, the outcomes, the records, `OAuthHashMixin`); the methods are
`codesearch.store.oauth_clients` (registered clients) and `codesearch.store.oauth_tokens`
(codes, tokens, grants):

- a code is redeemed at most once (`redeem_oauth_code`): a second presentation is a replay and
  revokes every token issued from that code (its *grant*);
- a refresh token is used at most once (`rotate_oauth_refresh_token`): each use gives a new
  access and refresh token of the same grant, and a second use of an old one revokes the grant.

A client that never completed an authorization (no token was ever issued to it: `last_used_at`
is None) is *pending*. Anyone may register a client, so pending clients are what an abuser can
pile up: they live at most `pending_ttl_seconds` (an expired one is unknown to
`get_oauth_client`, and removed), and at most `max_pending` are kept, the oldest removed to make
room (`create_oauth_client`, which does both in its transaction: the table grows only there).

Secrets are never stored. Codes, tokens and client secrets are random strings with a prefix
that says what they are (`CODE_PREFIX`, `ACCESS_PREFIX`, `REFRESH_PREFIX`, `CLIENT_SECRET_PREFIX`;
none starts with ``cs_``, the prefix of API keys, so the two never meet); the store keeps the
HMAC-SHA256 of each under a key derived from the server secret (as API keys), and compares in
constant time. A grant is a random id shared by the code and the tokens it led to.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from codesearch.store.base import StoreBase

CODE_PREFIX = "cso_ac_"
ACCESS_PREFIX = "cso_at_"
REFRESH_PREFIX = "cso_rt_"
CLIENT_SECRET_PREFIX = "cso_cs_"
ACCESS = "access"
REFRESH = "refresh"
#: the longest code, token or client secret looked up (anything longer is unknown)
MAX_SECRET_LENGTH = 256

# Outcomes of `redeem_oauth_code` and `rotate_oauth_refresh_token` (`Redeemed.status`).
OK = "ok"
UNKNOWN = "unknown"  # no such code or token (or not of this kind)
REPLAYED = "replayed"  # used before: the grant is revoked now
WRONG_CLIENT = "wrong_client"  # issued to another client (not consumed)
EXPIRED = "expired"
REFUSED = "refused"  # the caller's check said no (PKCE, redirect_uri, resource): consumed anyway
REVOKED = "revoked"


@dataclass
class OAuthClient:
    id: str
    name: str
    redirect_uris: list[str]
    metadata: dict[str, Any]
    has_secret: bool
    created_at: datetime
    last_used_at: datetime | None

    @property
    def pending(self) -> bool:
        """Whether the client never completed an authorization (no token was ever issued to it)."""
        return self.last_used_at is None

    @property
    def auth_method(self) -> str:
        return self.metadata.get("token_endpoint_auth_method") or ("client_secret_basic" if self.has_secret else "none")


@dataclass
class OAuthCode:
    client_id: str
    user_id: int
    redirect_uri: str
    code_challenge: str
    scope: str
    resource: str | None
    expires_at: datetime
    grant_id: str


@dataclass
class IssuedTokens:
    access_token: str
    expires_in: int
    scope: str
    refresh_token: str | None = None


@dataclass
class Redeemed:
    """What became of a code or refresh token presented at the token endpoint."""

    status: str
    tokens: IssuedTokens | None = None
    grant_id: str | None = None
    user_id: int | None = None
    detail: str = ""
    revoked: int = 0  # tokens revoked because of a replay


@dataclass
class AccessToken:
    """A valid access token as `verify_oauth_access_token` found it."""

    grant_id: str
    client_id: str
    user_id: int
    scope: str
    resource: str | None
    expires_at: datetime
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConnectedApp:
    """A client a user has allowed and that still holds a live token for them (an access token
    not expired, or a refresh token not used, revoked or expired): a row of the settings page
    where the user can take that access back (`list_connected_oauth_apps`)."""

    client_id: str
    name: str
    redirect_uris: list[str]
    scopes: list[str]
    authorized_at: datetime  # the first token of its live grants
    last_issued_at: datetime  # the newest token (an exchange or a refresh)
    grants: int  # live authorizations (each Allow that led to tokens)


class OAuthHashMixin(StoreBase):
    """The stored form of codes, tokens and client secrets, shared by the two OAuth mixins."""

    def _oauth_key(self) -> bytes:
        key = getattr(self, "_oauth_hmac_key", None)
        if key is None:
            key = self._oauth_hmac_key = self.derive_key("oauth 2.0 codes, tokens and client secrets")
        return key

    def oauth_hash(self, secret: str) -> str:
        """The stored form of a code, token or client secret (HMAC-SHA256, hex)."""
        return hmac.new(self._oauth_key(), secret.encode("utf-8"), hashlib.sha256).hexdigest()
