"""``/oauth/authorize``: the page where a signed-in user allows an MCP client, and their answer.

    GET  /oauth/authorize   the consent page (signed-in web user)
    POST /oauth/authorize   the consent decision (CSRF-checked)

The authorization endpoint of the OAuth 2.0 server (`codesearch.oauth.server`; its JSON
endpoints are `codesearch.service.routes.oauth`) is a page of the web UI: the session cookie says
who the user is, a visitor is sent to ``/login`` and comes back, and the consent form carries the
web UI's CSRF token. A request it refuses is a page saying what is wrong, never a redirect to the
client (RFC 9700 §4.11.2: clients register themselves, redirect URI included); the client hears
back only after the user answered: a code, or ``access_denied``. The page shows the redirect host
on its own, in ASCII and isolated from the text around it (`codesearch.oauth.redirects.redirect_host`), and
client-chosen text with hidden characters made visible (`redirects.shown_plainly`).

Audit events (`codesearch.audit`): ``oauth.consent.grant``, ``oauth.consent.deny``
(target: the client id).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from codesearch import audit, sessions
from codesearch.oauth import authorize as authz
from codesearch.oauth import redirects as shown
from codesearch.oauth.server import AUTHORIZE_PATH, OAuthSettings, base_url
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep
from codesearch.service.routes.oauth import NO_STORE, Settings, live_clients
from codesearch.web.templating import render

if TYPE_CHECKING:
    from codesearch.store import Store

log = logging.getLogger(__name__)

router = APIRouter(include_in_schema=False)


def _error_page(request: Request, message: str, status: int = 400, error: str | None = None) -> Response:
    return render(
        request, "oauth_error.html", status_code=status, title="Authorization failed", message=message, error=error
    )


def _refused(request: Request, e: authz.AuthorizeError) -> Response:
    """A refused authorization request: a page, never a redirect (see `authz.AuthorizeError`)."""
    log.info(
        "OAuth: authorization request refused (%s) for client %s", e.error, e.client.id if e.client else "(unknown)"
    )
    return _error_page(request, e.message, 400, e.error)


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303, headers=NO_STORE)


@router.get(AUTHORIZE_PATH)
def authorize(request: Request, store: StoreDep, settings: Settings) -> Response:
    if store is None:
        return _error_page(request, "This service runs without a state database, so nobody can sign in.", 503)
    try:
        req = authz.parse_authorize(
            list(request.query_params.multi_items()),
            live_clients(store, settings),
            base_url(request.scope, settings),
        )
    except authz.AuthorizeError as e:
        return _refused(request, e)
    user = sessions.current_user(request)
    if user is None:
        return sessions.login_redirect(request)
    return render(
        request,
        "oauth_consent.html",
        form_targets=[req.redirect_uri],  # the answer redirects there: the page's CSP must let the form go
        title="Allow access",
        client_name=shown.shown_plainly(req.client.name),
        redirect_host=shown.redirect_host(req.redirect_uri),
        redirect_display=shown.redirect_display(req.redirect_uri),
        params=[(k, v) for k, v in req.params.items()],
        refresh_days=settings.refresh_ttl // 86400,
    )


@router.post(AUTHORIZE_PATH)
async def consent(request: Request, store: StoreDep, settings: Settings) -> Response:
    form = await request.form()
    pairs = [(k, v) for k, v in form.multi_items() if isinstance(v, str)]
    return await anyio.to_thread.run_sync(_decide, request, store, settings, pairs)


def _decide(request: Request, store: Store | None, settings: OAuthSettings, pairs: list[tuple[str, str]]) -> Response:
    if store is None:
        return _error_page(request, "This service runs without a state database, so nobody can sign in.", 503)
    user = sessions.current_user(request)
    if user is None:
        return _error_page(
            request, "You are not signed in any more: start the connection again from your MCP client.", 401
        )
    fields = dict(pairs)
    sessions.require_csrf(request, fields.get("csrf_token"))  # CsrfFailed: the 403 page, nothing redirected
    b = base_url(request.scope, settings)
    try:  # checked again: the form came back from the browser (a changed form is a page, as on GET)
        req = authz.parse_authorize(
            [(k, v) for k, v in pairs if k in authz.AUTHORIZE_PARAMS], live_clients(store, settings), b
        )
    except authz.AuthorizeError as e:
        return _refused(request, e)
    identity = Identity(user)
    if fields.get("decision") != "allow":
        audit.record(request, identity, "oauth.consent.deny", req.client.id, name=req.client.name)
        return _redirect(authz.error_redirect(req, "access_denied", "the user denied access", b))
    code = store.create_oauth_code(
        client_id=req.client.id,
        user_id=user.id,
        redirect_uri=req.redirect_uri,
        code_challenge=req.code_challenge,
        scope=req.scope,
        resource=req.resource,
        ttl_seconds=settings.code_ttl,
    )
    audit.record(request, identity, "oauth.consent.grant", req.client.id, name=req.client.name, scope=req.scope)
    return _redirect(authz.code_redirect(req, code, b))
