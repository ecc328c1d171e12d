"""The authorization-code flow, with state, nonce and PKCE, bound to the browser.

`begin` makes a random state (256 bits), a nonce (OIDC kinds) and a PKCE verifier (S256
challenge sent), and returns the provider's authorization URL and the flow's record. The record
travels in the ``codesearch_sso`` cookie (HttpOnly, SameSite=Lax, the app's path, `FLOW_TTL_S`
seconds), encrypted and authenticated with AES-GCM under a key derived from the sign-in secret
(`FlowSealer`): the browser cannot read the verifier nor change what the flow is for (sign-in,
or linking to which user, where to go next).

`finish` checks the callback against the record: the cookie must be there and unexpired, be for
this provider, and its state must equal the ``state`` parameter (constant time). A state is
used once: the callback deletes the cookie, and the process remembers used states until they
expire (another replica would still refuse the replay at the provider, which honours an
authorization code once). Then the code is exchanged with the verifier (Authlib's
`AsyncOAuth2Client`) and the identity read (`Provider.identity`, which checks the ID token and
its nonce).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx

from codesearch.sso.providers import HTTP_TIMEOUT_S, Endpoints, Provider, ProviderError, ProviderIdentity

if TYPE_CHECKING:
    # authlib ships no types (the config's mypy section): to mypy its client is Any
    from authlib.integrations.httpx_client import AsyncOAuth2Client

FLOW_COOKIE = "codesearch_sso"
FLOW_TTL_S = 600


class FlowError(Exception):
    """A flow that cannot go on. `kind`: ``state`` (missing, forged, reused or expired),
    ``denied`` (the user or provider said no), ``unreachable``, ``config``, ``identity``;
    `message` is for the error page and holds no secret."""

    def __init__(self, kind: str, message: str, status: int = 400):
        super().__init__(message)
        self.kind, self.status = kind, status


class FlowSealer:
    """Seals flow records into cookie values and opens them (see the module docstring)."""

    def __init__(self, key: bytes):
        self._key = hashlib.sha256(b"codesearch sso flow\0" + key).digest()
        self._used: dict[str, float] = {}
        self._lock = threading.Lock()

    def seal(self, record: Mapping[str, Any]) -> str:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = os.urandom(12)
        box = AESGCM(self._key).encrypt(nonce, json.dumps(record, separators=(",", ":")).encode(), b"sso flow")
        return base64.urlsafe_b64encode(nonce + box).decode().rstrip("=")

    def open(self, value: str | None) -> dict[str, Any] | None:
        """The record of a cookie value, or None (absent, altered, or expired)."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not value or len(value) > 4000:
            return None
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
            record = json.loads(AESGCM(self._key).decrypt(raw[:12], raw[12:], b"sso flow"))
        except Exception:
            return None
        if not isinstance(record, dict) or float(record.get("exp", 0)) < time.time():
            return None
        return record

    def use(self, state: str, expires: float) -> bool:
        """Mark a state used; False when it was used already (a replay)."""
        digest = hashlib.sha256(state.encode()).hexdigest()
        now = time.time()
        with self._lock:
            for k in [k for k, exp in self._used.items() if exp < now]:
                del self._used[k]
            if digest in self._used:
                return False
            self._used[digest] = expires
            return True


def _client(
    provider: Provider,
    redirect_uri: str,
    http: httpx.AsyncClient | None = None,
    *,
    auth_method: str = "client_secret_post",
) -> AsyncOAuth2Client:
    from authlib.integrations.httpx_client import AsyncOAuth2Client

    client_id, client_secret = provider.credentials()
    return AsyncOAuth2Client(
        client_id=client_id,
        client_secret=client_secret,
        scope=provider.scope,
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        token_endpoint_auth_method=auth_method,
        timeout=HTTP_TIMEOUT_S,
    )


async def begin(
    provider: Provider,
    *,
    redirect_uri: str,
    purpose: str,
    next_url: str,
    user_id: int | None = None,
    invite: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """(authorization URL, flow record). `purpose` is ``signin`` or ``link`` (of `user_id`)."""
    state = secrets.token_urlsafe(32)
    verifier = secrets.token_urlsafe(48)  # 64 characters: within RFC 7636's 43..128
    nonce = secrets.token_urlsafe(32) if provider.is_oidc else None
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
        ep = await _endpoints(provider, http)
    extra = {"nonce": nonce} if nonce else {}
    async with _client(provider, redirect_uri) as client:
        url, _ = client.create_authorization_url(ep.authorize, state=state, code_verifier=verifier, **extra)
    record = {
        "p": provider.id,
        "s": state,
        "v": verifier,
        "n": nonce,
        "for": purpose,
        "u": user_id,
        "next": next_url,
        "inv": invite,
        "exp": time.time() + FLOW_TTL_S,
    }
    return url, record


async def _endpoints(provider: Provider, http: httpx.AsyncClient) -> Endpoints:
    try:
        return await provider.endpoints(http)
    except ProviderError as e:
        raise FlowError(e.kind, str(e), 502 if e.kind == "unreachable" else 500) from None


def check_callback(
    sealer: FlowSealer, provider: Provider, record: dict[str, Any] | None, params: Mapping[str, str]
) -> dict[str, Any]:
    """The flow record when the callback's state matches it (once); `FlowError` otherwise."""
    if record is None:
        raise FlowError("state", "This sign-in link has expired or was not started in this browser. Start again.")
    state = params.get("state") or ""
    if record.get("p") != provider.id or not hmac.compare_digest(state.encode(), str(record.get("s", "")).encode()):
        raise FlowError(
            "state", "This sign-in answer does not belong to the sign-in this browser started. Start again."
        )
    if not sealer.use(state, float(record["exp"])):
        raise FlowError("state", "This sign-in answer was used already. Start again.")
    error = params.get("error")
    if error:
        if error == "access_denied":
            raise FlowError("denied", f"{provider.name} did not let you in: access was denied.", 403)
        raise FlowError("denied", f"{provider.name} refused the sign-in ({error[:64]}).", 403)
    if not params.get("code"):
        raise FlowError("state", f"{provider.name} sent no authorization code. Start again.")
    return record


async def finish(provider: Provider, record: dict[str, Any], code: str, *, redirect_uri: str) -> ProviderIdentity:
    """Exchange the code (with the PKCE verifier) and read the identity."""
    from authlib.integrations.base_client.errors import OAuthError

    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
        ep = await _endpoints(provider, http)
        try:
            async with _client(provider, redirect_uri, auth_method=ep.token_auth) as client:
                token = await client.fetch_token(
                    ep.token,
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=record["v"],
                    headers={"Accept": "application/json"},
                )
        except OAuthError as e:
            raise FlowError(
                "denied", f"{provider.name} refused the sign-in code ({(e.error or 'error')[:64]}).", 403
            ) from None
        except httpx.HTTPError as e:
            raise FlowError("unreachable", f"{provider.name} could not be reached ({type(e).__name__}).", 502) from None
        except ValueError:
            raise FlowError(
                "unreachable", f"{provider.name} answered the token request with something unexpected.", 502
            ) from None
        if not token.get("access_token"):
            raise FlowError("denied", f"{provider.name} sent no access token.", 403)
        try:
            return await provider.identity(http, token, record.get("n"))
        except ProviderError as e:
            raise FlowError(e.kind, str(e), 502 if e.kind == "unreachable" else 403) from None
