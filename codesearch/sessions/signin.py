"""Signing in and out of the web UI: a session per sign-in, and what the pages ask of it.

Signing in creates a row in the store's ``web_sessions`` table (`Store.create_web_session`): the
browser gets the random value in the ``codesearch_session`` cookie (`codesearch.sessions.cookies`;
``AUTH_SESSION_MAX_AGE_SECONDS``, default 30 days); the store keeps only its HMAC under the
sign-in secret (``AUTH_SECRET``, else derived from the server secret: changing it signs everybody
out), the user and a per-session random CSRF token. Signing out deletes the row. Passwords are
`codesearch.accounts`'; sign-in attempts are rate limited by `codesearch.web.throttle`.

For the pages: the signed-in user (`current_user`), the user who sent a form with its CSRF token
checked (`form_user`), where to go after signing in (`safe_next`: a local path only, never
another site) and the way to the sign-in page and back (`login_redirect`).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.responses import RedirectResponse

from codesearch.environment import DEFAULT_SESSION_MAX_AGE_S
from codesearch.sessions.cookies import SESSION_COOKIE, cookie_header, plausible, root_of
from codesearch.sessions.csrf import require_csrf
from codesearch.store.models import User

if TYPE_CHECKING:
    from codesearch.store import Store

log = logging.getLogger(__name__)

#: the default session lifetime; `WebContext.session_max_age_s` is what an app uses
SESSION_TTL = timedelta(seconds=DEFAULT_SESSION_MAX_AGE_S)


def start_session(
    request: Request, response: Response, store: Store, user: User, max_age_s: float = SESSION_TTL.total_seconds()
) -> str:
    """Sign `user` in for `max_age_s` seconds: a new session (the request's old one, if any,
    ends) and its cookie on `response`. Returns the session's CSRF token."""
    old = request.cookies.get(SESSION_COOKIE)
    if plausible(old):
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
    if store is not None and plausible(value):
        store.delete_web_session(value)
    response.headers.append("set-cookie", cookie_header(request.scope, SESSION_COOKIE, "", 0))


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
