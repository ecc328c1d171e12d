"""Web pages of a user who has not linked a required identity provider go to the account page.

With an `identityProviders` entry that says ``accountLinkingRequired`` (`codesearch.sso.required`),
a signed-in user without an account of that provider linked is sent (303) from any page to
``/settings/account``, whose banner names what to link. Open to them still: that page and its
link and unlink forms (``/settings/account/…``), ``/logout``, the static files; ``/api/*`` is not
a page (the provider's callback ``/api/auth/callback/<id>`` must come through, and API callers
are refused with a 403 that names the provider by `codesearch.sso.required.RequiredLinks`).

A pure ASGI middleware, installed inside the session and IAP middlewares (it reads the user
they resolved). Without a required provider it is not installed at all; with one, it costs each page
request of a signed-in user one read of their linked accounts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio
from starlette.responses import RedirectResponse

from codesearch.sessions import root_of, route_path
from codesearch.sso import required

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.types import ASGIApp, Receive, Scope, Send

    from codesearch.web.templating import WebContext

#: Paths (and the paths under them) a user who must link may still open.
OPEN_PATHS = ("/settings/account", "/logout", "/static")


def _open(path: str) -> bool:
    return path.startswith("/api/") or path == "/api" or any(path == p or path.startswith(p + "/") for p in OPEN_PATHS)


class RequireLinks:
    """The middleware (see the module docstring); `web` is the app's `WebContext`."""

    def __init__(self, app: ASGIApp, web: WebContext) -> None:
        self.app = app
        self.web = web

    def _lacking(self, user_id: int) -> list[Any]:
        store = self.web.get_store()
        return required.missing(store, user_id, self.web.identity_providers.values()) if store is not None else []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _open(route_path(scope)):
            await self.app(scope, receive, send)
            return
        state = scope.get("state") or {}
        found = state.get("web_session")
        user = found[1] if found else state.get("iap_user")  # a session's user, or the one IAP signed in
        lacking = await anyio.to_thread.run_sync(self._lacking, user.id) if user is not None else []
        if lacking:
            await RedirectResponse(f"{root_of(scope)}/settings/account", status_code=303)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def install(app: FastAPI, web: WebContext) -> None:
    """Add the middleware when some provider is required. Call before the session middleware is
    added (Starlette runs the last added first: this one must run after it)."""
    if required.required(web.identity_providers.values()):
        app.add_middleware(RequireLinks, web=web)
