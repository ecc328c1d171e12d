"""The cookies a browser session travels under, and how they are written and read.

The names are shared by the API's authentication (`codesearch.service.auth`, which accepts the
session cookie and checks CSRF on every request), the session middleware (`codesearch.sessions.middleware`,
which resolves them) and the pages (which set them when a user signs in or out): they must agree.

Every cookie is HttpOnly, SameSite=Lax, Path = the app's root (Serve's route prefix, e.g. ``/cs``),
and Secure when the client came over https (`codesearch.forwarded.client_of`: ``X-Forwarded-Proto``
only from a trusted proxy).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import TypeGuard

from starlette.requests import cookie_parser
from starlette.types import Scope

from codesearch.forwarded import client_of

#: the session cookie (an opaque random id; the session itself is a row of the store)
SESSION_COOKIE = "codesearch_session"
#: the double-submit CSRF cookie, echoed in `CSRF_HEADER` (API calls) or `CSRF_FORM_FIELD` (forms)
CSRF_COOKIE = "codesearch_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FORM_FIELD = "csrf_token"
#: methods that change nothing: CSRF is not checked for them
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})

_COOKIE_VALUE = re.compile(r"^[A-Za-z0-9_-]{20,128}$")


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


def scope_cookies(scope: Scope) -> dict[str, str]:
    """The cookies of a request, read from its ASGI scope (for middleware, before any `Request`)."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    raw = headers.get("cookie")
    return cookie_parser(raw) if raw else {}


def plausible(value: str | None) -> TypeGuard[str]:
    """Whether a cookie's value could be one we set (random URL-safe text of a sane length): anything
    else is never looked up."""
    return bool(value and _COOKIE_VALUE.match(value))
