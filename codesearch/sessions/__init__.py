"""Browser sessions of the web UI and their CSRF tokens: the domain both the HTTP API and the pages
rely on, below both (`codesearch.service` and `codesearch.web` import it; it imports neither).

- `cookies`: the cookies' names (the session, the visitor's CSRF cookie, the CSRF header and form
  field) and how they are written (HttpOnly, SameSite=Lax, Path = the app's root, Secure over
  https) and read;
- `signin`: signing in and out (a session per sign-in, kept in the store), and what pages ask of
  it: the signed-in user, the user who sent a form, where to go after signing in, the way to the
  sign-in page;
- `csrf`: the tokens and their checks (`require_csrf` for forms, `CsrfFailed` a 403 page;
  ``X-CSRF-Token`` for the pages' own API calls, which `codesearch.service.auth` checks);
- `middleware`: `SessionMiddleware`, which resolves every request's session and token once, for
  the pages and the API alike.

The API accepts the session cookie too (`codesearch.service.auth`), but a cookie-only
POST/PUT/PATCH/DELETE needs ``X-CSRF-Token``. Passwords are `codesearch.accounts`'; sign-in
lock-outs `codesearch.web.throttle`'s; the pages that sign in are `codesearch.web.pages_account`
and `codesearch.web.pages_sso`.
"""

from __future__ import annotations

from codesearch.sessions.cookies import (
    CSRF_COOKIE,
    CSRF_FORM_FIELD,
    CSRF_HEADER,
    SAFE_METHODS,
    SESSION_COOKIE,
    cookie_header,
    root_of,
    route_path,
)
from codesearch.sessions.csrf import CsrfFailed, require_csrf
from codesearch.sessions.signin import (
    SESSION_TTL,
    current_user,
    end_session,
    form_user,
    login_redirect,
    safe_next,
    start_session,
)

__all__ = [
    "CSRF_COOKIE",
    "CSRF_FORM_FIELD",
    "CSRF_HEADER",
    "SAFE_METHODS",
    "SESSION_COOKIE",
    "SESSION_TTL",
    "CsrfFailed",
    "cookie_header",
    "current_user",
    "end_session",
    "form_user",
    "login_redirect",
    "require_csrf",
    "root_of",
    "route_path",
    "safe_next",
    "start_session",
]
