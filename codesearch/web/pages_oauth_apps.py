"""The "Connected apps" settings page: the OAuth clients (MCP clients) a user allowed, and a way
to take that access back.

    GET  /settings/apps                        the signed-in user's connected apps
    POST /settings/apps/{client_id}/revoke     revoke everything that client holds for the user (CSRF)

An app is listed while it holds a live token of the user (`Store.list_connected_oauth_apps`):
its name (chosen by the app when it registered itself, so shown as text, never trusted), where
it sends the browser back (its registered redirect URIs, in short), the scopes, when the user
allowed it and when it last got a token (an exchange or a refresh; using an access token is not
recorded). Revoking revokes every access and refresh token of that client for this user, and
deletes a code not exchanged yet (`Store.revoke_oauth_client_for_user`): the app's next call to
``/api/mcp`` is a 401 and its next refresh ``invalid_grant``, so it has to ask again. Other users'
access to the same app is untouched. Audit event: ``oauth.grant.revoke`` (target: the client id).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from codesearch import audit, sessions
from codesearch.oauth.redirects import redirect_origin, shown_plainly
from codesearch.oauth.server import OFFLINE, SCOPE
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep
from codesearch.web.templating import render

if TYPE_CHECKING:
    from codesearch.store import Store
    from codesearch.store.models import User
    from codesearch.store.oauth import ConnectedApp

#: What each scope lets an app do, in words (unknown scopes are shown as they are).
SCOPE_WORDS = {SCOPE: "search and read code as you (MCP)", OFFLINE: "stay connected (refresh tokens)"}


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else "never"


def _rows(apps: Iterable[ConnectedApp]) -> list[dict[str, Any]]:
    return [
        {
            "app": a,
            "name": shown_plainly(a.name),  # chosen by the app: hidden characters made visible
            "origins": list(dict.fromkeys(redirect_origin(u) for u in a.redirect_uris)),
            "scopes": [SCOPE_WORDS.get(s, s) for s in a.scopes],
        }
        for a in apps
    ]


router = APIRouter(include_in_schema=False)


def _page(
    request: Request, store: Store | None, user: User, status_code: int = 200, notice: str | None = None
) -> Response:
    if store is None:
        return render(
            request,
            "message.html",
            status_code=503,
            title="Connected apps",
            heading="Connected apps are unavailable",
            message="This service runs without a state database, so no app can connect.",
        )
    return render(
        request,
        "oauth_apps.html",
        status_code=status_code,
        title="Connected apps",
        section="apps",
        rows=_rows(store.list_connected_oauth_apps(user.id)),
        when=_when,
        notice=notice,
    )


@router.get("/settings/apps")
def apps(request: Request, store: StoreDep, revoked: str = "") -> Response:
    user = sessions.current_user(request)
    if user is None:
        return sessions.login_redirect(request)
    notice = None
    if revoked and store is not None:
        client = store.get_oauth_client(revoked)
        if client is not None:
            notice = f"“{shown_plainly(client.name)}” no longer has access: its tokens were revoked."
    return _page(request, store, user, notice=notice)


@router.post("/settings/apps/{client_id}/revoke")
def revoke(request: Request, client_id: str, store: StoreDep, csrf_token: str = Form("")) -> Response:
    user = sessions.form_user(request, csrf_token)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:
        return _page(request, store, user)
    client = store.get_oauth_client(client_id)
    if client is None or not any(a.client_id == client.id for a in store.list_connected_oauth_apps(user.id)):
        return render(
            request,
            "message.html",
            status_code=404,
            title="Not found",
            heading="Not found",
            message="That app has no access to your account (any more).",
        )
    n = store.revoke_oauth_client_for_user(user.id, client.id)
    audit.record(request, Identity(user), "oauth.grant.revoke", client.id, name=client.name, revoked=n)
    root = sessions.root_of(request.scope)
    return RedirectResponse(f"{root}/settings/apps?revoked={client.id}", status_code=303)
