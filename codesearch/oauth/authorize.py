"""The authorization request (``/oauth/authorize``): its checks, and where the browser goes after.

`parse_authorize`: response_type ``code`` with PKCE ``S256`` only (``plain`` and a missing method
are refused), ``state`` echoed as given, ``redirect_uri`` required and equal to a registered one,
``scope`` within `SCOPES_SUPPORTED`, ``resource`` (RFC 8707) absent or this server's MCP endpoint,
bound to the code. A refused request is a page that says what is wrong (`AuthorizeError`), never a
redirect to the client: clients register themselves, so a redirect before the user has done
anything would make this an open redirector (RFC 9700 §4.11.2). Only after the user answered does
the client hear back: a code (`code_redirect`), or ``access_denied`` (`error_redirect`).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from codesearch.oauth.server import SCOPE, SCOPES_SUPPORTED, resource_url, same_resource
from codesearch.store import oauth as st

MAX_STATE_LENGTH = 1000
_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url(sha256) without padding


class AuthorizeError(Exception):
    """An authorization request refused before the user approved anything: shown to the user as
    a page (400), never redirected to the client.

    RFC 6749 §4.1.2.1 would send most of these back to the redirect URI with ``error``. Anyone
    may register a client here, redirect URI included, so such a redirect, made before the user
    has done anything, would let ``/oauth/authorize`` bounce a browser to any site its author
    likes: an open redirector (RFC 9700 §4.11.2, which advises against redirecting
    automatically in that case). `error` is the RFC 6749 code, for logs and developers; `message`
    says in words what is wrong, for the page."""

    def __init__(self, error: str, message: str, client: st.OAuthClient | None = None):
        super().__init__(message)
        self.error = error
        self.message = message
        self.client = client  # the client, when the request named a registered one


@dataclass
class AuthorizeRequest:
    client: st.OAuthClient
    redirect_uri: str
    state: str | None
    code_challenge: str = ""
    scope: str = SCOPE
    resource: str | None = None
    # the parameters as received, for the consent form to send back
    params: dict[str, str] = field(default_factory=dict)


AUTHORIZE_PARAMS = (
    "response_type",
    "client_id",
    "redirect_uri",
    "state",
    "scope",
    "code_challenge",
    "code_challenge_method",
    "resource",
)


def parse_authorize(
    pairs: list[tuple[str, str]], get_client: Callable[[str], st.OAuthClient | None], base: str
) -> AuthorizeRequest:
    """Check an authorization request (the query of ``GET /oauth/authorize``, or the consent
    form sending it back): the request, or `AuthorizeError` saying what is wrong."""
    seen: dict[str, list[str]] = {}
    for k, v in pairs:
        if k in AUTHORIZE_PARAMS:
            seen.setdefault(k, []).append(v)
    for name in ("client_id", "redirect_uri"):
        if len(seen.get(name, ())) > 1:
            raise AuthorizeError(
                "invalid_request",
                f"The request gives {name} more than once, so it is not clear "
                "which application is asking, or where you would be sent back.",
            )
    client_id = (seen.get("client_id") or [""])[0]
    client = get_client(client_id) if client_id else None
    if client is None:
        raise AuthorizeError(
            "invalid_client",
            "The application that sent you here is not registered on this server "
            "(the request's client_id is missing or unknown). It may have registered with another "
            "server, or its registration was removed (one that does not finish connecting in time is "
            "forgotten): start the connection again from the application.",
        )
    redirect_uri = (seen.get("redirect_uri") or [""])[0]
    if not redirect_uri:
        raise AuthorizeError(
            "invalid_request",
            "The request does not say where to send you back afterwards (redirect_uri is missing).",
            client,
        )
    if not any(hmac.compare_digest(redirect_uri.encode(), r.encode()) for r in client.redirect_uris):
        raise AuthorizeError(
            "invalid_request",
            "The request would send you back to an address the application did "
            "not register (redirect_uri). This is how stolen authorizations look, so it was "
            "stopped.",
            client,
        )

    def refuse(error: str, message: str) -> AuthorizeError:
        return AuthorizeError(error, message, client)

    states = seen.get("state")
    req = AuthorizeRequest(client=client, redirect_uri=redirect_uri, state=states[0] if states else None)
    if req.state is not None and len(req.state) > MAX_STATE_LENGTH:
        raise refuse("invalid_request", f"The request's state is longer than {MAX_STATE_LENGTH} characters.")
    repeated = [k for k, v in seen.items() if len(v) > 1]
    if repeated:
        raise refuse("invalid_request", f"The request gives {repeated[0]} more than once.")
    p = {k: v[0] for k, v in seen.items()}
    req.params = p
    if p.get("response_type") != "code":
        raise refuse(
            "unsupported_response_type",
            "The application asked for a kind of answer this server does not "
            "give: only the authorization code flow is supported (response_type=code).",
        )
    method = p.get("code_challenge_method")
    challenge = p.get("code_challenge")
    if not challenge:
        raise refuse(
            "invalid_request",
            "The application did not protect the request with PKCE, which this server "
            "requires (code_challenge, with code_challenge_method=S256).",
        )
    if method != "S256":
        raise refuse(
            "invalid_request",
            "The application asked for PKCE with the plain method (or named none); "
            "this server accepts only S256 (code_challenge_method=S256).",
        )
    if not _CHALLENGE.match(challenge):
        raise refuse(
            "invalid_request",
            "The request's PKCE code_challenge is malformed: it must be the base64url "
            "SHA-256 of the verifier, 43 characters.",
        )
    req.code_challenge = challenge
    asked = (p.get("scope") or "").split()
    unknown = [s for s in asked if s not in SCOPES_SUPPORTED]
    if unknown:
        raise refuse(
            "invalid_scope",
            f"The application asked for a permission this server does not know "
            f"({unknown[0][:50]!r}); it may ask only for {' and '.join(SCOPES_SUPPORTED)}.",
        )
    req.scope = granted_scope(asked)
    resource = p.get("resource")
    if resource is not None:
        if not same_resource(resource, base):
            raise refuse(
                "invalid_target",
                "The application asked for access to another server (resource). This "
                f"server can only give access to its own MCP endpoint, {resource_url(base)}.",
            )
        req.resource = resource_url(base)
    return req


def granted_scope(asked: list[str]) -> str:
    """The scope of the tokens: what was asked (each within `SCOPES_SUPPORTED`, checked by the
    caller), ``mcp`` always included; nothing asked: ``mcp``."""
    return " ".join(dict.fromkeys([SCOPE, *asked]))


def redirect_to(redirect_uri: str, params: Mapping[str, str | None]) -> str:
    """`redirect_uri` with `params` added to its query (its own query kept)."""
    parts = urlsplit(redirect_uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [(k, v) for k, v in params.items() if v is not None]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query, quote_via=quote), ""))


def error_redirect(req: AuthorizeRequest, error: str, description: str, base: str) -> str:
    """Where to send the browser with `error`: only after the user took part (denied access),
    never for a request refused before (`AuthorizeError`)."""
    return redirect_to(
        req.redirect_uri, {"error": error, "error_description": description, "state": req.state, "iss": base}
    )


def code_redirect(req: AuthorizeRequest, code: str, base: str) -> str:
    return redirect_to(req.redirect_uri, {"code": code, "state": req.state, "iss": base})
