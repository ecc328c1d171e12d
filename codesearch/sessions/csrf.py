"""CSRF tokens: what a form or an API call that changes something must send back, and the checks.

A signed-in browser's token is its session's (a random value kept with the session in the store);
a visitor's is bound to the ``codesearch_csrf`` cookie (`visitor_token`: the cookie's HMAC under a
key derived from the sign-in secret), so the sign-in and setup forms are protected too; a request
IAP signed in carries a token bound to its user (`codesearch.web.iap`). The session middleware
(`codesearch.sessions.middleware`) leaves the request's token in ``request.state.csrf_token``
(`token_of`), where the pages put it into every form.

Forms send it back as the ``csrf_token`` field (`require_csrf`, `CsrfFailed`: a 403 page); the
pages' own API calls send it as ``X-CSRF-Token``, which the API's authentication requires before
it accepts a cookie (or IAP) sign-in for a method that changes something (`needs_token`,
`header_matches`). Every comparison takes constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from fastapi import Request

from codesearch.sessions.cookies import CSRF_HEADER, SAFE_METHODS


class CsrfFailed(Exception):
    """A state-changing form arrived without the right CSRF token (403)."""


def token_of(request: Request) -> str:
    """The CSRF token of `request` ("" when it has none), as the session middleware left it."""
    token: str = getattr(request.state, "csrf_token", "")
    return token


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


def visitor_token(key: bytes, visitor: str) -> str:
    """The CSRF token of a visitor whose ``codesearch_csrf`` cookie is `visitor`."""
    return hmac.new(key, visitor.encode(), hashlib.sha256).hexdigest()


def needs_token(method: str) -> bool:
    """Whether a request with this method must carry the CSRF token (it may change something)."""
    return method.upper() not in SAFE_METHODS


def header_matches(headers: Mapping[str, str], expected: str) -> bool:
    """Whether the request's ``X-CSRF-Token`` is `expected` (never when either is empty)."""
    token = (headers.get(CSRF_HEADER) or "").encode("utf-8")
    return bool(token) and bool(expected) and hmac.compare_digest(token, expected.encode("utf-8"))
