"""The OAuth 2.0 routes of the MCP server (the protocol is `codesearch.oauth`; state is the store's).

    GET  /.well-known/oauth-protected-resource[/api/mcp]  RFC 9728 metadata of the MCP endpoint
    GET  /.well-known/oauth-authorization-server           RFC 8414 metadata
    POST /oauth/register                                   RFC 7591 dynamic client registration
    POST /oauth/token                                      authorization_code, refresh_token
    POST /oauth/revoke                                     RFC 7009

These machine endpoints answer JSON with ``Cache-Control: no-store`` and allow any origin (they
take no cookies), so browser-based MCP clients can use them. The authorization endpoint,
``/oauth/authorize``, is a page of the web UI (`codesearch.web.pages_oauth_authorize`: the consent
page and the decision); it looks clients up with `live_clients` and reads `Settings` from here.

Registration needs no credentials (MCP clients register on first contact), so it is bounded
(`codesearch.oauth.registration`): the body is read only up to
``MAX_REGISTRATION_BYTES`` (413 past it), each client address may register
``OAuthSettings.registrations_per_address`` clients in a row before it must pause an hour (429
with ``Retry-After``; counted in the state store, `codesearch.store.lockouts`, so every replica
sees the same count; only registrations that would be stored count), and every registration
first removes the clients that never completed an authorization within
``pending_client_ttl``, and the oldest of them beyond ``max_pending_clients``.

Audit events (`codesearch.audit`): ``oauth.client.register``, ``oauth.token.issue``,
``oauth.token.refresh``, ``oauth.token.revoke``, ``oauth.replay`` (target: the client id; details:
the grant id, never a code or token); the page records ``oauth.consent.grant`` and ``.deny``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated
from urllib.parse import parse_qsl, urlsplit

import anyio
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from codesearch import audit
from codesearch.forwarded import client_address
from codesearch.oauth import registration as reg
from codesearch.oauth import server as oa
from codesearch.oauth import tokens as tok
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep, app_services
from codesearch.store import OAUTH_REGISTRATION
from codesearch.store import oauth as st

if TYPE_CHECKING:
    from codesearch.store import Store

log = logging.getLogger(__name__)

NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, POST, OPTIONS",
    "Access-Control-Allow-Headers": "Authorization, Content-Type, MCP-Protocol-Version",
    "Access-Control-Max-Age": "600",
}


def _json(body: Mapping[str, object], status: int = 200, extra: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers={**NO_STORE, **CORS, **(extra or {})})


def _token_error(e: tok.TokenError) -> JSONResponse:
    extra = {"WWW-Authenticate": 'Basic realm="codesearch"'} if e.status == 401 and e.basic else None
    return _json(e.body(), e.status, extra)


def _identity_of(store: Store, user_id: int | None) -> Identity | None:
    if user_id is None:
        return None
    try:
        return Identity(store.get_user(user_id))
    except Exception:  # noqa: BLE001 - the user is gone: recorded as anonymous
        return None


router = APIRouter(include_in_schema=False)


async def oauth_settings(request: Request) -> oa.OAuthSettings:
    """The app's OAuth settings (``AUTH_URL`` and the lifetimes), those its authenticator checks tokens with."""
    return app_services(request).authenticator.oauth


Settings = Annotated[oa.OAuthSettings, Depends(oauth_settings)]

# ------------------------------------------------------------------ metadata


@router.get(oa.PRM_PATH)
@router.get(oa.PRM_PATH + oa.MCP_PATH)
async def protected_resource(request: Request, settings: Settings) -> JSONResponse:
    return _json(oa.protected_resource_metadata(oa.base_url(request.scope, settings)))


@router.get(oa.AS_METADATA_PATH)
async def authorization_server(request: Request, settings: Settings) -> JSONResponse:
    return _json(oa.authorization_server_metadata(oa.base_url(request.scope, settings)))


@router.options(oa.REGISTER_PATH)
@router.options(oa.TOKEN_PATH)
@router.options(oa.REVOKE_PATH)
@router.options(oa.PRM_PATH)
@router.options(oa.PRM_PATH + oa.MCP_PATH)
@router.options(oa.AS_METADATA_PATH)
async def preflight() -> Response:
    return Response(status_code=204, headers=CORS)


# ------------------------------------------------------------------ registration


async def _registration_body(request: Request) -> bytes:
    """The body of a registration, read only up to `reg.MAX_REGISTRATION_BYTES` (413 past it)."""
    declared = request.headers.get("content-length") or ""
    if declared.isdigit() and int(declared) > reg.MAX_REGISTRATION_BYTES:
        raise reg.registration_too_large()
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > reg.MAX_REGISTRATION_BYTES:
            raise reg.registration_too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def _count_registration(store: Store, address: str, settings: oa.OAuthSettings) -> None:
    """Count one registration from `address`; `RegistrationError` (429) when it is one too many."""
    backoff = reg.registration_backoff(settings.registrations_per_address)
    wait, over = store.begin_login_attempt([(OAUTH_REGISTRATION, address, backoff)])
    if wait > 0 or over > 0:
        retry = max(1, math.ceil(max(wait, over)))
        raise reg.RegistrationError(
            "temporarily_unavailable",
            f"too many client registrations from your address ({settings.registrations_per_address} in a row, "
            f"each less than an hour after the one before): try again in {retry} s",
            status=429,
            headers={"Retry-After": str(retry)},
        )


@router.post(oa.REGISTER_PATH)
async def register(request: Request, store: StoreDep, settings: Settings) -> JSONResponse:
    if store is None:
        return _json({"error": "temporarily_unavailable", "error_description": "no state database"}, 503)
    try:
        if "json" not in (request.headers.get("content-type") or "").lower():
            raise reg.RegistrationError("invalid_client_metadata", "send the registration as application/json")
        name, uris, metadata, with_secret = reg.validate_registration(reg.json_body(await _registration_body(request)))
        address = client_address(request)
        await anyio.to_thread.run_sync(_count_registration, store, address, settings)
    except reg.RegistrationError as e:
        if e.status == 429:
            log.info("OAuth: a client registration was refused: too many from one address")
        return _json(e.body(), e.status, e.headers)
    client, secret = await anyio.to_thread.run_sync(
        lambda: store.create_oauth_client(
            name,
            uris,
            metadata,
            with_secret=with_secret,
            pending_ttl_seconds=settings.pending_client_ttl,
            max_pending=settings.max_pending_clients,
        )
    )
    audit.record(
        request,
        None,
        "oauth.client.register",
        client.id,
        name=name,
        method=metadata["token_endpoint_auth_method"],
        redirects=" ".join(sorted({urlsplit(u).scheme + "://" + urlsplit(u).netloc for u in uris})),
    )
    return _json(reg.registration_response(client, secret), 201)


# ------------------------------------------------------------------ authorization (the page: web.pages_oauth_authorize)


def live_clients(store: Store, settings: oa.OAuthSettings) -> Callable[[str], st.OAuthClient | None]:
    """How the authorization endpoint looks a client up: a client that never completed an
    authorization within its pending lifetime is unknown, whether or not its row is gone yet."""
    return lambda client_id: store.get_oauth_client(client_id, pending_ttl_seconds=settings.pending_client_ttl)


# ------------------------------------------------------------------ token and revocation


async def _form_of(request: Request) -> dict[str, str]:
    if "application/x-www-form-urlencoded" not in (request.headers.get("content-type") or "").lower():
        raise tok.TokenError("invalid_request", "send the parameters as application/x-www-form-urlencoded")
    try:
        pairs = parse_qsl((await request.body()).decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise tok.TokenError("invalid_request", "the body is not UTF-8") from None
    return tok.parse_form(pairs)


@router.post(oa.TOKEN_PATH)
async def token(request: Request, store: StoreDep, settings: Settings) -> JSONResponse:
    if store is None:
        return _json({"error": "temporarily_unavailable", "error_description": "no state database"}, 503)
    b = oa.base_url(request.scope, settings)

    def on_replay(kind: str, done: st.Redeemed, client: st.OAuthClient) -> None:
        log.warning(
            "OAuth: a used %s was presented again by client %s: grant %s revoked (%d token(s))",
            kind.replace("_", " "),
            client.id,
            done.grant_id,
            done.revoked,
        )
        audit.record(
            request,
            _identity_of(store, done.user_id),
            "oauth.replay",
            client.id,
            kind=kind,
            grant=done.grant_id,
            revoked=done.revoked,
        )

    try:
        form = await _form_of(request)
        outcome = await anyio.to_thread.run_sync(
            lambda: tok.token_endpoint(store, form, request.headers.get("authorization"), settings, b, on_replay)
        )
    except tok.TokenError as e:
        return _token_error(e)
    identity = await anyio.to_thread.run_sync(_identity_of, store, outcome.user_id)
    audit.record(
        request, identity, outcome.event, outcome.client.id, grant=outcome.grant_id, scope=outcome.body.get("scope")
    )
    return _json(outcome.body)


@router.post(oa.REVOKE_PATH)
async def revoke(request: Request, store: StoreDep) -> Response:
    if store is None:
        return _json({"error": "temporarily_unavailable", "error_description": "no state database"}, 503)
    try:
        form = await _form_of(request)
        client, outcome, n = await anyio.to_thread.run_sync(
            lambda: tok.revocation_endpoint(store, form, request.headers.get("authorization"))
        )
    except tok.TokenError as e:
        return _token_error(e)
    audit.record(request, None, "oauth.token.revoke", client.id, outcome=outcome, revoked=n)
    return Response(status_code=200, headers={**NO_STORE, **CORS})
