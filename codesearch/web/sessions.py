"""Sign-in for the web UI: local accounts, server-side sessions, CSRF tokens.

Passwords: `codesearch.accounts` (shared with the ``codesearch users`` command); its functions
are importable from here too, as the pages have always used them.

Sessions. Signing in creates a row in the store's ``web_sessions`` table (`Store.create_web_session`):
the browser gets the random value in the ``codesearch_session`` cookie (HttpOnly, SameSite=Lax,
Path = the app's root, Secure over https, ``AUTH_SESSION_MAX_AGE_SECONDS``, default 30 days);
the store keeps only its HMAC under the sign-in secret (``AUTH_SECRET``, else derived from the
server secret: changing it signs everybody out), the user and a per-session random CSRF token.
Signing out deletes the row. Sign-in attempts are rate limited: `codesearch.web.throttle`.

The middleware (`install`) runs for every request and fills ``request.state``:

- ``identity``: the signed-in user's `Identity`, or None (a visitor);
- ``csrf_token``: the token forms and the pages' own API calls must send back: the session's
  token when signed in, else one bound to the visitor's ``codesearch_csrf`` cookie (random,
  HttpOnly; the token is its HMAC under a key derived from the sign-in secret), so the sign-in
  and setup forms are protected too;
- ``anonymous_access``: whether visitors may search;
- ``web_session``: ``(WebSession, User)`` or None, which `Authenticator.identify_request` reuses so
  that the API costs no second lookup.

A request without cookies costs nothing (no store access); a request with a session cookie costs
one read. `require_csrf(request, token)` checks a form's token in constant time; a failure is
`CsrfFailed`, answered with a 403 page. The API accepts the session cookie too, but a cookie-only
POST/PUT/PATCH/DELETE needs ``X-CSRF-Token`` (`codesearch.service.auth`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import TYPE_CHECKING, TypeGuard
from urllib.parse import quote

import anyio
from fastapi import FastAPI, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codesearch.accounts import (  # noqa: F401  (the pages' and the tests' names for them)
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    WeakPassword,
    authenticate,
    hash_password,
    needs_rehash,
    password_problem,
    verify_password,
)
from codesearch.environment import DEFAULT_SESSION_MAX_AGE_S
from codesearch.forwarded import client_of
from codesearch.service.session_cookies import (  # noqa: F401  (the pages' names for them)
    CSRF_COOKIE,
    CSRF_FORM_FIELD,
    CSRF_HEADER,
    SAFE_METHODS,
    SESSION_COOKIE,
)
from codesearch.store.models import User

if TYPE_CHECKING:
    from codesearch.store import Store
    from codesearch.store.models import WebSession
    from codesearch.web.templating import WebContext

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FORM_FIELD",
    "CSRF_HEADER",
    "MAX_PASSWORD_LENGTH",
    "MIN_PASSWORD_LENGTH",
    "SAFE_METHODS",
    "SESSION_COOKIE",
    "SESSION_TTL",
    "CsrfFailed",
    "SessionMiddleware",
    "WeakPassword",
    "authenticate",
    "cookie_header",
    "current_user",
    "end_session",
    "form_user",
    "hash_password",
    "install",
    "login_redirect",
    "needs_rehash",
    "password_problem",
    "require_csrf",
    "root_of",
    "route_path",
    "safe_next",
    "start_session",
    "verify_password",
]

log = logging.getLogger(__name__)

#: the default session lifetime; `WebContext.session_max_age_s` is what an app uses
SESSION_TTL = timedelta(seconds=DEFAULT_SESSION_MAX_AGE_S)

_COOKIE_VALUE = re.compile(r"^[A-Za-z0-9_-]{20,128}$")


# ----------------------------------------------------------------------------- cookies


def root_of(scope: Scope) -> str:
    """The path the app is mounted under ("" at the top)."""
    root: str = scope.get("root_path") or ""
    return root.rstrip("/")


def route_path(scope: Scope) -> str:
    """The request path without the root (what the routes match)."""
    path: str = scope.get("path") or "/"
    root = root_of(scope)
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def _is_https(scope: Scope) -> bool:
    """Over https: the scheme the client used (``X-Forwarded-Proto`` only from a trusted proxy,
    `codesearch.forwarded`)."""
    return client_of(scope).https


def cookie_header(scope: Scope, name: str, value: str, max_age: int | None) -> str:
    """A ``Set-Cookie`` value: HttpOnly, SameSite=Lax, Path = the root, Secure over https;
    `max_age` 0 deletes the cookie, None makes it last the browser session."""
    parts = [f"{name}={value}", f"Path={root_of(scope) or '/'}", "HttpOnly", "SameSite=Lax"]
    if max_age is not None:
        expires = datetime.now(UTC) + timedelta(seconds=max_age)
        parts += [f"Max-Age={max_age}", f"Expires={format_datetime(expires, usegmt=True)}"]
    if _is_https(scope):
        parts.append("Secure")
    return "; ".join(parts)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _cookies(headers: dict[str, str]) -> dict[str, str]:
    raw = headers.get("cookie")
    return cookie_parser(raw) if raw else {}


def _plausible(value: str | None) -> TypeGuard[str]:
    return bool(value and _COOKIE_VALUE.match(value))


# ----------------------------------------------------------------------------- sessions


def start_session(
    request: Request, response: Response, store: Store, user: User, max_age_s: float = SESSION_TTL.total_seconds()
) -> str:
    """Sign `user` in for `max_age_s` seconds: a new session (the request's old one, if any,
    ends) and its cookie on `response`. Returns the session's CSRF token."""
    old = request.cookies.get(SESSION_COOKIE)
    if _plausible(old):
        store.delete_web_session(old)
    try:
        store.delete_expired_web_sessions()
    except Exception:  # housekeeping only
        log.debug("could not delete expired sessions", exc_info=True)
    value, session = store.create_web_session(user.id, ttl_seconds=max_age_s)
    response.headers.append("set-cookie", cookie_header(request.scope, SESSION_COOKIE, value, int(max_age_s)))
    return session.csrf_token


def end_session(request: Request, response: Response, store: Store | None) -> None:
    """Sign out: delete the request's session and its cookie."""
    value = request.cookies.get(SESSION_COOKIE)
    if store is not None and _plausible(value):
        store.delete_web_session(value)
    response.headers.append("set-cookie", cookie_header(request.scope, SESSION_COOKIE, "", 0))


# ----------------------------------------------------------------------------- CSRF


class CsrfFailed(Exception):
    """A state-changing form arrived without the right CSRF token (403)."""


def require_csrf(request: Request, form_token: str | None, *, allow_visitor: bool = False) -> None:
    """`CsrfFailed` unless `form_token` is the request's CSRF token (constant-time comparison).
    With `allow_visitor` (sign-in, setup) the visitor cookie's token is accepted as well, so a
    form opened before signing in elsewhere still works."""
    token = (form_token or "").encode("utf-8")
    state = request.state
    expected = [getattr(state, "csrf_token", "") or ""]
    if allow_visitor:
        expected.append(getattr(state, "visitor_csrf_token", "") or "")
    ok = False
    for e in expected:
        if e and hmac.compare_digest(token, e.encode("utf-8")):
            ok = True
    if not ok:
        raise CsrfFailed("the form's security token is missing or wrong")


# ----------------------------------------------------------------------------- helpers for pages


def current_user(request: Request) -> User | None:
    """The signed-in `User`, or None."""
    user = getattr(getattr(request.state, "identity", None), "user", None)
    return user if isinstance(user, User) else None


def form_user(request: Request, csrf_token: str | None) -> User | None:
    """The signed-in `User` who sent a form, its CSRF token checked (`require_csrf`); None for a
    visitor, whom the page sends to sign in (`login_redirect`)."""
    user = current_user(request)
    if user is not None:
        require_csrf(request, csrf_token)
    return user


def safe_next(value: str | None, root: str) -> str:
    """Where to go after signing in: `value` when it is a local path (``/…``, not ``//…``),
    prefixed with the root when it lacks it; else the home page."""
    home = f"{root}/"
    if not value or not isinstance(value, str) or len(value) > 2000:
        return home
    if not value.startswith("/") or value.startswith("//") or "\\" in value or any(ord(ch) < 0x20 for ch in value):
        return home
    if root and not (value == root or value.startswith((root + "/", root + "?"))):
        value = root + value
    return value


def login_redirect(request: Request) -> RedirectResponse:
    """A redirect to the sign-in page that comes back to this page afterwards."""
    root = root_of(request.scope)
    here: str = request.scope.get("path") or "/"
    if root and not here.startswith(root):
        here = root + here
    query: str = request.scope.get("query_string", b"").decode("latin-1")
    if query:
        here += "?" + query
    return RedirectResponse(f"{root}/login?next={quote(here, safe='/')}", status_code=303)


# ----------------------------------------------------------------------------- middleware


class SessionMiddleware:
    """Pure ASGI: resolves the session cookie and the CSRF token (see the module docstring)."""

    def __init__(self, app: ASGIApp, web: WebContext) -> None:
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
        headers = _headers(scope)
        cookies = _cookies(headers)
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
        if _plausible(value):
            found = await anyio.to_thread.run_sync(self._lookup, value)
        if value and found is None:  # expired, signed out elsewhere, or garbage: forget it
            set_cookies.append(cookie_header(scope, SESSION_COOKIE, "", 0))
        state["web_session"] = found

        visitor = cookies.get(CSRF_COOKIE)
        if not _plausible(visitor):
            visitor = None
            if found is None and is_page:
                visitor = secrets.token_urlsafe(32)
                set_cookies.append(cookie_header(scope, CSRF_COOKIE, visitor, int(self.web.session_max_age_s)))
        if visitor is not None and is_page:
            key = await anyio.to_thread.run_sync(self._csrf_key) if self._key is None else self._key
            state["visitor_csrf_token"] = hmac.new(key, visitor.encode(), hashlib.sha256).hexdigest()
        else:
            state["visitor_csrf_token"] = ""

        if found is not None:
            session, user = found
            state["identity"] = self.web.authenticator.identity(user)
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


def install(app: FastAPI, web: WebContext) -> None:
    """Add the session middleware and the 403 page for CSRF failures to `app`."""
    from codesearch.web.templating import render

    app.add_middleware(SessionMiddleware, web=web)

    @app.exception_handler(CsrfFailed)
    async def _csrf_failed(request: Request, exc: CsrfFailed) -> HTMLResponse:
        return render(
            request,
            "message.html",
            status_code=403,
            title="Forbidden",
            heading="This form has expired",
            message="The page's security token is missing or does not match. Reload the page and try again.",
        )
