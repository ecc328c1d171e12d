"""The token endpoint (RFC 6749 §5) and revocation (RFC 7009) of the OAuth 2.0 server.

``authorization_code`` (single use: a replay revokes the grant) and ``refresh_token`` (rotated:
single use, a reuse revokes the grant); clients authenticate as they registered
(`authenticate_client`). Errors are RFC 6749's (`TokenError`), sent as JSON with ``Cache-Control:
no-store``. Revocation answers 200 whatever the token, as RFC 7009 says. Nothing here logs a code,
token, secret or PKCE verifier.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote

from codesearch.oauth.server import GRANT_TYPES, OAuthSettings, resource_url, same_resource
from codesearch.store import oauth as st

if TYPE_CHECKING:
    from codesearch.store import Store

_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")  # RFC 7636 §4.1


class TokenError(Exception):
    """A refused token or revocation request: RFC 6749 §5.2."""

    def __init__(self, error: str, description: str, status: int = 400, *, basic: bool = False):
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status
        self.basic = basic  # the client tried HTTP Basic: answer with a Basic challenge

    def body(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}


TOKEN_PARAMS = (
    "grant_type",
    "code",
    "redirect_uri",
    "code_verifier",
    "client_id",
    "client_secret",
    "refresh_token",
    "scope",
    "resource",
    "token",
    "token_type_hint",
)


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).decode().rstrip("=")


def parse_form(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The parameters of a token or revocation request, each at most once (RFC 6749 §3.2)."""
    out: dict[str, str] = {}
    for k, v in pairs:
        if k in TOKEN_PARAMS:
            if k in out:
                raise TokenError("invalid_request", f"the parameter {k} is repeated")
            out[k] = v
    return out


def _basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    scheme, _, value = (authorization or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise TokenError("invalid_client", "malformed HTTP Basic credentials", 401, basic=True) from None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise TokenError("invalid_client", "malformed HTTP Basic credentials", 401, basic=True)
    return unquote(client_id), unquote(secret)


def authenticate_client(store: Store, form: dict[str, str], authorization: str | None) -> st.OAuthClient:
    """The client making a token or revocation request (RFC 6749 §2.3): a public client by its
    ``client_id``, a confidential one by its secret, sent the way it registered. `TokenError`
    ``invalid_client`` (401) otherwise."""
    basic = _basic_credentials(authorization)
    client_id: str | None
    secret: str | None
    if basic is not None:
        client_id, secret = basic
        if form.get("client_secret") is not None:
            raise TokenError("invalid_request", "send client credentials one way only", 400)
        if form.get("client_id") not in (None, client_id):
            raise TokenError("invalid_request", "client_id differs from the HTTP Basic user", 400)
        method = "client_secret_basic"
    else:
        client_id, secret = form.get("client_id"), form.get("client_secret")
        method = "client_secret_post" if secret is not None else "none"
    if not client_id:
        raise TokenError("invalid_client", "client authentication failed: no client_id", 401, basic=basic is not None)
    client = store.get_oauth_client(client_id)
    if client is None:
        raise TokenError("invalid_client", "client authentication failed: unknown client", 401, basic=basic is not None)
    if client.auth_method != method:
        raise TokenError(
            "invalid_client",
            f"client authentication failed: this client authenticates with {client.auth_method}",
            401,
            basic=basic is not None,
        )
    if method != "none" and not store.verify_oauth_client_secret(client.id, secret or ""):
        raise TokenError(
            "invalid_client", "client authentication failed: wrong client secret", 401, basic=basic is not None
        )
    return client


@dataclass
class TokenOutcome:
    """What the token endpoint answered, for the router to send and audit."""

    body: dict[str, str | int]
    event: str  # the audit action
    client: st.OAuthClient
    user_id: int | None
    grant_id: str | None
    details: dict[str, str] = field(default_factory=dict)


def token_endpoint(
    store: Store,
    form: dict[str, str],
    authorization: str | None,
    settings: OAuthSettings,
    base: str,
    on_replay: Callable[[str, st.Redeemed, st.OAuthClient], None],
) -> TokenOutcome:
    """Answer one token request (`TokenError` when refused). `on_replay(kind, redeemed, client)`
    is told of a replayed code or refresh token (the grant is revoked already)."""
    grant_type = form.get("grant_type")
    if not grant_type:
        raise TokenError("invalid_request", "grant_type is required")
    if grant_type not in GRANT_TYPES:
        raise TokenError("unsupported_grant_type", f"grant_type must be one of {', '.join(GRANT_TYPES)}")
    client = authenticate_client(store, form, authorization)
    if grant_type not in client.metadata.get("grant_types", GRANT_TYPES):
        raise TokenError("unauthorized_client", f"this client did not register the {grant_type} grant")
    with_refresh = "refresh_token" in client.metadata.get("grant_types", ())
    resource = form.get("resource")
    if resource is not None and not same_resource(resource, base):
        raise TokenError("invalid_target", f"resource must be this server's MCP endpoint ({resource_url(base)})")

    if grant_type == "authorization_code":
        code, redirect_uri, verifier = form.get("code"), form.get("redirect_uri"), form.get("code_verifier")
        if not code:
            raise TokenError("invalid_request", "code is required")
        if not redirect_uri:
            raise TokenError("invalid_request", "redirect_uri is required (the one of the authorization request)")
        if not verifier:
            raise TokenError("invalid_request", "code_verifier is required (PKCE)")
        if not _VERIFIER.match(verifier):
            raise TokenError("invalid_request", "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~")

        def check_code(c: st.OAuthCode) -> str | None:
            if not hmac.compare_digest(redirect_uri.encode(), c.redirect_uri.encode()):
                return "redirect_uri differs from the authorization request's"
            if not hmac.compare_digest(s256(verifier).encode(), c.code_challenge.encode()):
                return "code_verifier does not match the code_challenge (PKCE)"
            if resource is not None and c.resource is not None and resource_url(base) != c.resource:
                return "resource differs from the authorization request's"
            return None

        done = store.redeem_oauth_code(
            code,
            client_id=client.id,
            check=check_code,
            access_ttl=settings.access_ttl,
            refresh_ttl=settings.refresh_ttl if with_refresh else None,
        )
        kind, event = "code", "oauth.token.issue"
    else:
        refresh = form.get("refresh_token")
        if not refresh:
            raise TokenError("invalid_request", "refresh_token is required")
        wanted = form.get("scope")

        def check_scope(scope: str, bound: str | None) -> str | None:
            if wanted is not None and any(s not in scope.split() for s in wanted.split()):
                return "scope asks for more than the grant has"
            return None

        done = store.rotate_oauth_refresh_token(
            refresh,
            client_id=client.id,
            check=check_scope,
            access_ttl=settings.access_ttl,
            refresh_ttl=settings.refresh_ttl,
        )
        kind, event = "refresh_token", "oauth.token.refresh"

    if done.status == st.REPLAYED:
        on_replay(kind, done, client)
        raise TokenError(
            "invalid_grant", f"this {kind.replace('_', ' ')} was used already: every token it gave is revoked now"
        )
    if done.status == st.REFUSED and "scope" in done.detail:
        raise TokenError("invalid_scope", done.detail)
    if done.status != st.OK:
        reason = {
            st.UNKNOWN: f"unknown {kind.replace('_', ' ')}",
            st.WRONG_CLIENT: f"the {kind.replace('_', ' ')} was issued to another client",
            st.EXPIRED: f"the {kind.replace('_', ' ')} has expired",
            st.REFUSED: done.detail,
        }.get(done.status, "refused")
        raise TokenError("invalid_grant", reason)
    t = done.tokens
    assert t is not None  # an OK redemption always carries its tokens
    body: dict[str, str | int] = {
        "access_token": t.access_token,
        "token_type": "Bearer",
        "expires_in": t.expires_in,
        "scope": t.scope,
    }
    if t.refresh_token:
        body["refresh_token"] = t.refresh_token
    return TokenOutcome(body, event, client, done.user_id, done.grant_id)


def revocation_endpoint(
    store: Store, form: dict[str, str], authorization: str | None
) -> tuple[st.OAuthClient, str, int]:
    """RFC 7009: (client, outcome, tokens revoked). An unknown token, or another client's, is
    answered 200 like any other (§2.2); only a failed client authentication is an error."""
    client = authenticate_client(store, form, authorization)
    token = form.get("token")
    if not token:
        raise TokenError("invalid_request", "token is required")
    outcome, n = store.revoke_oauth_token(token, client_id=client.id)
    return client, outcome, n
