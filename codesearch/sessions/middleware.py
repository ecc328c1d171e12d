"""The session middleware: every request's browser session and CSRF token, resolved once.

It runs for every request (the web UI adds it, `codesearch.web.mount`) and fills ``request.state``:

- ``identity``: the signed-in user's `Identity`, or None (a visitor);
- ``csrf_token``: the token forms and the pages' own API calls must send back
  (`codesearch.sessions.csrf`): the session's token when signed in, else one bound to the
  visitor's ``codesearch_csrf`` cookie (random, HttpOnly; set here when a page is asked for without one);
- ``visitor_csrf_token``: the visitor cookie's token (sign-in and setup forms accept it too);
- ``anonymous_access``: whether visitors may search (the owners' switch, as the API sees it);
- ``web_session``: ``(WebSession, User)`` or None, which `Authenticator.identify_request`
  (`codesearch.service.auth`) reuses so that the API costs no second lookup.

A request without cookies costs nothing (no store access); a request with a session cookie costs
one read, on a worker thread. A session cookie the store does not know (expired, signed out
elsewhere, or garbage) is deleted. Static files and the favicon are served without any of this.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codesearch.sessions.cookies import CSRF_COOKIE, SESSION_COOKIE, cookie_header, plausible, route_path, scope_cookies
from codesearch.sessions.csrf import visitor_token

if TYPE_CHECKING:
    from codesearch.permissions import Identity
    from codesearch.store import Store
    from codesearch.store.models import User, WebSession

log = logging.getLogger(__name__)


class IdentityMaker(Protocol):
    """Who a signed-in user is to the rest of the app (`codesearch.service.auth.Authenticator`)."""

    def identity(self, user: User | None, *, via: str = "", repo_scope: frozenset[int] | None = None) -> Identity: ...


class SessionHost(Protocol):
    """What the middleware reads from the web UI's context (`codesearch.web.templating.WebContext`,
    which sits above this package): the store, the authenticator, and two settings."""

    @property
    def get_store(self) -> Callable[[], Store | None]: ...

    @property
    def authenticator(self) -> IdentityMaker: ...

    @property
    def anonymous_access(self) -> bool: ...

    @property
    def session_max_age_s(self) -> int: ...


class SessionMiddleware:
    """Pure ASGI: resolves the session cookie and the CSRF token (see the module docstring); `web` is
    the web UI's context (`codesearch.web.templating.WebContext`)."""

    def __init__(self, app: ASGIApp, web: SessionHost) -> None:
        self.app = app
        self.web = web
        self._key: bytes | None = None

    def _csrf_key(self) -> bytes:
        if self._key is None:
            store = self.web.get_store()
            # Without a store nobody can sign in; a per-process key keeps the visitor forms consistent.
            self._key = store.auth_key("web csrf") if store is not None else secrets.token_bytes(32)
        return self._key

    def _lookup(self, value: str) -> tuple[WebSession, User] | None:
        store = self.web.get_store()
        if store is None:
            return None
        try:
            return store.get_web_session(value)
        except Exception:
            log.warning("session lookup failed", exc_info=True)
            return None

    async def _anonymous_access(self) -> bool:
        """Whether visitors may search now (`codesearch.service.anonymous`: the store is read at
        most every few seconds, then on a worker thread)."""
        access = getattr(self.web.authenticator, "access", None)
        if access is None:
            return bool(self.web.anonymous_access)
        if access.stale():
            enabled: bool = await anyio.to_thread.run_sync(access.enabled)
            return enabled
        cached: bool = access.cached()
        return cached

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cookies = scope_cookies(scope)
        state = scope.setdefault("state", {})
        state["anonymous_access"] = bool(self.web.anonymous_access)
        path = route_path(scope)
        if (
            path.startswith("/static/") or path == "/favicon.ico"
        ):  # stylesheets, scripts, icons: nobody needs to be known
            state.update(web_session=None, identity=None, csrf_token="", visitor_csrf_token="")
            await self.app(scope, receive, send)
            return
        state["anonymous_access"] = await self._anonymous_access()  # the owners' switch, as the API sees it
        is_page = not (path.startswith("/api/") or path == "/api")
        set_cookies: list[str] = []

        value = cookies.get(SESSION_COOKIE)
        found = None
        if plausible(value):
            found = await anyio.to_thread.run_sync(self._lookup, value)
        if value and found is None:  # expired, signed out elsewhere, or garbage: forget it
            set_cookies.append(cookie_header(scope, SESSION_COOKIE, "", 0))
        state["web_session"] = found

        visitor = cookies.get(CSRF_COOKIE)
        if not plausible(visitor):
            visitor = None
            if found is None and is_page:
                visitor = secrets.token_urlsafe(32)
                set_cookies.append(cookie_header(scope, CSRF_COOKIE, visitor, int(self.web.session_max_age_s)))
        if visitor is not None and is_page:
            key = await anyio.to_thread.run_sync(self._csrf_key) if self._key is None else self._key
            state["visitor_csrf_token"] = visitor_token(key, visitor)
        else:
            state["visitor_csrf_token"] = ""

        if found is not None:
            session, user = found
            state["identity"] = self.web.authenticator.identity(user, via="session")
            state["csrf_token"] = session.csrf_token
        else:
            state["identity"] = None
            state["csrf_token"] = state["visitor_csrf_token"]

        # (the pages' X-Frame-Options and Content-Security-Policy: `security_headers`)
        extra = [(b"set-cookie", c.encode("latin-1")) for c in set_cookies]
        if not extra:
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message, headers=list(message.get("headers", [])) + extra)
            await send(message)

        await self.app(scope, receive, send_with_headers)
