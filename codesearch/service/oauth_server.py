"""OAuth 2.0 for MCP clients: the protocol, as the MCP authorization spec asks (2025-06-18).

Written by hand, with each check spelled out here and tested (tests/test_oauth*.py), rather than
with Authlib's server classes: Authlib ships server integrations for Flask and Django only (a
Starlette one would have to be written against its request/response abstraction), its RFC 7591
endpoint and grant classes call back into models we would have to fake on top of our tables,
and the rules that matter most here (a replayed code revokes its grant, a reused refresh token
revokes its grant, PKCE S256 only, no redirect to the client before the user has answered) would live
in those callbacks anyway. What the service runs:

- **Metadata.** Protected resource metadata (RFC 9728) for ``<base>/api/mcp`` naming the
  authorization server, and authorization server metadata (RFC 8414). The issuer, and every
  endpoint URL, is `base_url`: ``AUTH_URL`` when set, else the request's own base URL (scheme,
  honouring ``X-Forwarded-Proto`` from a trusted proxy, host and the app's root path).
- **Registration** (RFC 7591, `validate_registration`): anyone may register (MCP clients do so
  on first contact). Redirect URIs: https; http only on a loopback host (127.0.0.1, localhost,
  [::1], any port: RFC 8252 §7.3); a private-use scheme for native apps (reverse domain name,
  RFC 8252 §7.1); never a fragment or user information; an ASCII host (a domain name in its
  IDNA form, ``xn--…``, so that a look-alike such as a Cyrillic ``і`` cannot pass for a Latin
  ``i`` on the consent page). ``token_endpoint_auth_method``:
  ``none`` (a public client, PKCE only), ``client_secret_post`` or ``client_secret_basic``
  (default, as RFC 7591 says): the secret is shown once. Errors: ``invalid_redirect_uri``,
  ``invalid_client_metadata``.
- **What a registration may cost** (anyone may register, so every limit is about abuse): a body
  of at most `MAX_REGISTRATION_BYTES` (413), at most `MAX_FIELDS` members, each field within its
  own limit (`MAX_NAME_LENGTH`, `MAX_REDIRECT_URIS`, `MAX_URI_LENGTH`; a member this server does
  not use is ignored, never stored, and refused above `MAX_UNKNOWN_FIELD_BYTES`); no character
  that hides or reorders text (`hidden_character`: control, bidi and other format characters,
  private-use, unassigned) in the name, the text fields or the redirect URIs, since the consent
  page shows them to the user. Per client address, `registration_backoff` (429 with
  ``Retry-After``); a client that never completes an authorization is *pending*, removed after
  ``OAuthSettings.pending_client_ttl`` and beyond ``max_pending_clients``
  (`codesearch.store.oauth`).
- **Authorization** (`parse_authorize`): response_type ``code`` with PKCE ``S256`` only (``plain``
  and a missing method are refused), ``state`` echoed as given, ``redirect_uri`` required and
  equal to a registered one, ``scope`` within `SCOPES_SUPPORTED`, ``resource`` (RFC 8707) absent
  or this server's MCP endpoint, bound to the code. A refused request is a page that says what
  is wrong (`AuthorizeError`), never a redirect to the client: clients register themselves, so a
  redirect before the user has done anything would make this an open redirector (RFC 9700
  §4.11.2). The signed-in user consents on a page (`routes_oauth`); only then does the client
  hear back: a code, or ``access_denied`` when the user said no.
- **Token** (`token_endpoint`): ``authorization_code`` (single use: a replay revokes the grant)
  and ``refresh_token`` (rotated: single use, a reuse revokes the grant). RFC 6749 errors, JSON,
  ``Cache-Control: no-store``.
- **Revocation** (RFC 7009, `revocation_endpoint`): 200 whatever the token, as the RFC says.

Codes and tokens are random, prefixed and stored hashed (`codesearch.store.oauth`). Nothing here
logs or audits a code, token, secret or PKCE verifier.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from codesearch import environment
from codesearch.service.forwarded import client_of
from codesearch.store import oauth as st
from codesearch.store.models import Backoff

MCP_PATH = "/api/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource"
AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REGISTER_PATH = "/oauth/register"
REVOKE_PATH = "/oauth/revoke"

SCOPE = "mcp"
OFFLINE = "offline_access"
#: What a token may be for: ``mcp`` (the MCP server, as the user; the rest of the HTTP API refuses OAuth tokens) and
#: ``offline_access`` (asked by clients that want refresh tokens; they get them anyway).
SCOPES_SUPPORTED = (SCOPE, OFFLINE)
AUTH_METHODS = ("none", "client_secret_post", "client_secret_basic")
GRANT_TYPES = ("authorization_code", "refresh_token")

#: Limits of a registration (see the module docstring).
MAX_REGISTRATION_BYTES = 16 * 1024
MAX_FIELDS = 32
MAX_UNKNOWN_FIELD_BYTES = 4096
MAX_REDIRECT_URIS = 10
MAX_URI_LENGTH = 2000
MAX_NAME_LENGTH = 200
MAX_STATE_LENGTH = 1000
#: Seconds an address that made too many registrations in a row waits (`registration_backoff`).
REGISTRATION_PAUSE_S = 3600.0
#: Registration fields kept as given (strings, checked for length); others are dropped.
_TEXT_FIELDS = (
    "client_name",
    "client_uri",
    "logo_uri",
    "tos_uri",
    "policy_uri",
    "software_id",
    "software_version",
    "application_type",
)

_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # base64url(sha256) without padding
_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")  # RFC 7636 §4.1
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_HOST = re.compile(r"^[a-z0-9._-]+$")  # an ASCII domain name (IDNA form) or IPv4 address; IPv6 apart
#: Unicode categories of the characters that can hide or reorder the text around them: control
#: (Cc), format (Cf: bidi overrides and isolates, zero-width characters), surrogate (Cs), private
#: use (Co), unassigned (Cn), line and paragraph separators (Zl, Zp).
HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_CATEGORY_WORDS = {
    "Cc": "a control",
    "Cf": "a format",
    "Cs": "a surrogate",
    "Co": "a private-use",
    "Cn": "an unassigned",
}


# ---------------------------------------------------------------------- settings and URLs


@dataclass(frozen=True)
class OAuthSettings:
    """Lifetimes (seconds) and the configured public base URL (``AUTH_URL``, None: per request)."""

    issuer: str | None = None
    access_ttl: int = environment.DEFAULT_OAUTH_ACCESS_TTL_S
    refresh_ttl: int = environment.DEFAULT_OAUTH_REFRESH_TTL_S
    code_ttl: int = environment.DEFAULT_OAUTH_CODE_TTL_S
    #: seconds a client that never completed an authorization is kept
    pending_client_ttl: int = environment.DEFAULT_OAUTH_PENDING_CLIENT_TTL_S
    #: the most such clients kept at once (past it, the oldest goes)
    max_pending_clients: int = environment.DEFAULT_OAUTH_MAX_PENDING_CLIENTS
    #: registrations one client address may make in a row (`registration_backoff`)
    registrations_per_address: int = environment.DEFAULT_OAUTH_REGISTRATIONS_PER_ADDRESS

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> OAuthSettings:
        return cls(
            issuer=environment.auth_url(environ),
            access_ttl=environment.oauth_access_token_ttl_seconds(environ),
            refresh_ttl=environment.oauth_refresh_token_ttl_seconds(environ),
            code_ttl=environment.oauth_code_ttl_seconds(environ),
            pending_client_ttl=environment.oauth_pending_client_ttl_seconds(environ),
            max_pending_clients=environment.oauth_max_pending_clients(environ),
            registrations_per_address=environment.oauth_registrations_per_address(environ),
        )


def request_base_url(scope) -> str:
    """The base URL of a request as the service sees it: scheme (https behind a trusted proxy that
    says so in ``X-Forwarded-Proto``: `forwarded.client_of`), ``Host`` (one of the allowed hosts:
    `allowed_hosts`) and the app's root path."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    scheme = client_of(scope).scheme
    host = headers.get("host")
    if not host:
        server = scope.get("server") or ("localhost", None)
        host = server[0] if server[1] in (None, 80, 443) else f"{server[0]}:{server[1]}"
    return f"{scheme}://{host}{(scope.get('root_path') or '').rstrip('/')}"


def base_url(scope, settings: OAuthSettings) -> str:
    """The issuer, and the base of every URL the metadata names (see the module docstring)."""
    return settings.issuer or request_base_url(scope)


def resource_url(base: str) -> str:
    return base + MCP_PATH


def resource_metadata_url(base: str) -> str:
    return base + PRM_PATH + MCP_PATH


def www_authenticate(base: str, *, invalid_token: bool) -> str:
    """The ``WWW-Authenticate`` of a 401 from the MCP endpoint (RFC 9728 §5.1, RFC 6750 §3)."""
    url = resource_metadata_url(base).replace("\\", "%5C").replace('"', "%22")  # a quoted-string, whatever Host said
    value = f'Bearer resource_metadata="{url}"'
    if invalid_token:
        value += ', error="invalid_token", error_description="the access token is invalid, expired or revoked"'
    return value


def protected_resource_metadata(base: str) -> dict:
    return {
        "resource": resource_url(base),
        "authorization_servers": [base],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "codesearch MCP server",
    }


def authorization_server_metadata(base: str) -> dict:
    return {
        "issuer": base,
        "authorization_endpoint": base + AUTHORIZE_PATH,
        "token_endpoint": base + TOKEN_PATH,
        "registration_endpoint": base + REGISTER_PATH,
        "revocation_endpoint": base + REVOKE_PATH,
        "scopes_supported": list(SCOPES_SUPPORTED),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": list(GRANT_TYPES),
        "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
        "revocation_endpoint_auth_methods_supported": list(AUTH_METHODS),
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": True,
    }


# ---------------------------------------------------------------------- registration (RFC 7591)


class RegistrationError(Exception):
    """A refused registration: RFC 7591 §3.2.2 (``error`` and ``error_description``; status 400,
    413 for a body too large, 429 for too many registrations, with `headers` such as ``Retry-After``)."""

    def __init__(self, error: str, description: str, status: int = 400, headers: dict[str, str] | None = None):
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": self.error, "error_description": self.description}


def registration_backoff(per_address: int) -> Backoff:
    """The per-address limit of registrations, as a counter of the sign-in lock-outs' kind
    (`codesearch.store.lockouts`, kept in the state store so that every replica counts alike):
    `per_address` registrations in a row, each less than `REGISTRATION_PAUSE_S` after the one
    before, go through; the next is refused and the address must pause that long, after which
    its count starts again."""
    pause = REGISTRATION_PAUSE_S
    return Backoff(free=per_address, base_seconds=pause, cap_seconds=pause, forget_seconds=pause)


def describe_character(ch: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: a character named so that a person can tell which it is."""
    name = unicodedata.name(ch, "") or f"({_CATEGORY_WORDS.get(unicodedata.category(ch), 'unnamed')} character)"
    return f"U+{ord(ch):04X} {name}"


def hidden_character(text: str) -> tuple[int, str] | None:
    """The first character of `text` that can hide or reorder the text around it
    (`HIDDEN_CATEGORIES`), as (its position from 1, `describe_character`), or None."""
    for i, ch in enumerate(text, 1):
        if unicodedata.category(ch) in HIDDEN_CATEGORIES:
            return i, describe_character(ch)
    return None


def _hidden_problem(text: str) -> str | None:
    found = hidden_character(text)
    if found is None:
        return None
    at, what = found
    return (
        f"contains {what} (character {at}): control characters, bidirectional and other invisible formatting "
        "characters, private-use and unassigned characters are not allowed"
    )


def _host_problem(host: str) -> str | None:
    """Why `host` (lower-case, brackets of IPv6 removed) cannot be the host of a redirect URI."""
    if not host.isascii():
        try:
            ascii_form = host.encode("idna").decode("ascii")
        except UnicodeError:
            ascii_form = ""
        example = f" ({ascii_form})" if ascii_form else ""
        return (
            f"the host {host!r} is not ASCII: register the IDNA (punycode, xn--...) form of the domain "
            f"name{example} instead, so that the consent page can show the host as it is"
        )
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "the host is not a valid IPv6 address"
        return None
    if not _HOST.match(host):
        return "the host may contain only letters, digits, dots, hyphens and underscores (or be an IP address)"
    return None


def redirect_uri_problem(uri: Any) -> str | None:
    """Why `uri` cannot be a redirect URI, or None when it can (see the module docstring)."""
    if not isinstance(uri, str) or not uri:
        return "a redirect URI must be a non-empty string"
    if len(uri) > MAX_URI_LENGTH:
        return f"a redirect URI has at most {MAX_URI_LENGTH} characters"
    hidden = _hidden_problem(uri)
    if hidden:
        return "the redirect URI " + hidden
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in uri) or "\\" in uri:
        return "a redirect URI may not contain spaces, control characters or backslashes"
    try:
        parts = urlsplit(uri)
    except ValueError:
        return "not a valid URI"
    scheme = parts.scheme
    if not scheme or not _SCHEME.match(scheme) or scheme != uri.split(":", 1)[0].lower():
        return "a redirect URI must be absolute (with a scheme)"
    if "#" in uri:
        return "a redirect URI may not contain a fragment"
    if scheme in ("http", "https"):
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            return "a redirect URI may not contain user information"
        try:
            host = (parts.hostname or "").lower()
            parts.port  # noqa: B018 - raises on a bad port
        except ValueError:
            return "a redirect URI has an invalid port"
        if not host:
            return "an http(s) redirect URI needs a host"
        bad_host = _host_problem(host)
        if bad_host:
            return bad_host
        if scheme == "http" and host not in _LOOPBACK:
            return "http redirect URIs are allowed only on a loopback host (127.0.0.1, localhost, [::1]); use https"
        if scheme == "https" and host in _LOOPBACK:
            return None
        return None
    # a private-use scheme (RFC 8252 §7.1): a reverse domain name such as com.example.app
    if "." not in scheme:
        return (
            "a redirect URI must use https, http on a loopback host, or a private-use scheme named after a "
            "domain (e.g. com.example.app:/callback)"
        )
    return None


def validate_registration(body: Any) -> tuple[str, list[str], dict[str, Any], bool]:
    """A registration request as accepted: (client name, redirect URIs, the metadata to keep and
    echo, whether the client gets a secret). `RegistrationError` when it cannot be accepted."""
    if not isinstance(body, dict):
        raise RegistrationError("invalid_client_metadata", "the registration must be a JSON object")
    if len(body) > MAX_FIELDS:
        raise RegistrationError(
            "invalid_client_metadata", f"the registration has {len(body)} fields; at most {MAX_FIELDS} are accepted"
        )
    known = {"redirect_uris", "token_endpoint_auth_method", "grant_types", "response_types", "scope", *_TEXT_FIELDS}
    for key, value in body.items():
        if key not in known and len(json.dumps(value)) > MAX_UNKNOWN_FIELD_BYTES:
            raise RegistrationError(
                "invalid_client_metadata",
                f"the field {str(key)[:100]!r} is larger than {MAX_UNKNOWN_FIELD_BYTES} bytes (this server does "
                "not use it: leave it out)",
            )
    uris = body.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        raise RegistrationError("invalid_redirect_uri", "redirect_uris must be a non-empty array of URIs")
    if len(uris) > MAX_REDIRECT_URIS:
        raise RegistrationError(
            "invalid_redirect_uri", f"redirect_uris has {len(uris)} URIs; at most {MAX_REDIRECT_URIS} are accepted"
        )
    for i, uri in enumerate(uris):
        problem = redirect_uri_problem(uri)
        if problem:
            raise RegistrationError("invalid_redirect_uri", f"redirect_uris[{i}]: {problem}: {str(uri)[:200]!r}")
    method = body.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        raise RegistrationError(
            "invalid_client_metadata", f"token_endpoint_auth_method must be one of {', '.join(AUTH_METHODS)}"
        )
    grant_types = body.get("grant_types", ["authorization_code"])
    if (
        not isinstance(grant_types, list)
        or not grant_types
        or "authorization_code" not in grant_types
        or any(g not in GRANT_TYPES for g in grant_types)
    ):
        raise RegistrationError(
            "invalid_client_metadata",
            "grant_types must include authorization_code and may add refresh_token, nothing else",
        )
    response_types = body.get("response_types", ["code"])
    if response_types != ["code"]:
        raise RegistrationError("invalid_client_metadata", 'response_types must be ["code"]')
    scope = body.get("scope")
    if scope is not None and (not isinstance(scope, str) or any(s not in SCOPES_SUPPORTED for s in scope.split())):
        raise RegistrationError("invalid_client_metadata", f"scope may contain only {' '.join(SCOPES_SUPPORTED)}")
    kept: dict[str, Any] = {
        "redirect_uris": list(uris),
        "token_endpoint_auth_method": method,
        "grant_types": list(dict.fromkeys(grant_types)),
        "response_types": ["code"],
    }
    if scope:
        kept["scope"] = " ".join(dict.fromkeys(scope.split()))
    for name in _TEXT_FIELDS:
        value = body.get(name)
        if value is None:
            continue
        limit = MAX_NAME_LENGTH if name == "client_name" else MAX_URI_LENGTH
        if not isinstance(value, str) or len(value) > limit:
            raise RegistrationError("invalid_client_metadata", f"{name} must be a string of at most {limit} characters")
        hidden = _hidden_problem(value)
        if hidden:
            raise RegistrationError("invalid_client_metadata", f"{name} {hidden}")
        if name.endswith("_uri") and not value.lower().startswith(("https://", "http://")):
            raise RegistrationError("invalid_client_metadata", f"{name} must be an http(s) URL")
        kept[name] = value
    name = (kept.get("client_name") or "").strip() or "Unnamed MCP client"
    return name, list(uris), kept, method != "none"


def registration_response(client: st.OAuthClient, secret: str | None) -> dict:
    out = dict(client.metadata)
    out.update(client_id=client.id, client_id_issued_at=int(client.created_at.timestamp()))
    if secret is not None:
        out.update(client_secret=secret, client_secret_expires_at=0)
    return out


# ---------------------------------------------------------------------- authorization


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

    states = seen.get("state") or [None]
    req = AuthorizeRequest(client=client, redirect_uri=redirect_uri, state=states[0])
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


def same_resource(resource: str, base: str) -> bool:
    """Whether `resource` (RFC 8707) names this server's MCP endpoint (a trailing slash aside)."""
    return isinstance(resource, str) and resource.rstrip("/") == resource_url(base)


def shown_plainly(text: str) -> str:
    """`text` chosen by a client (its name, a redirect URI) as a page draws it: each character
    that could hide or reorder the text around it (`HIDDEN_CATEGORIES`) replaced by its code
    point in brackets (``[U+202E]``). Registration refuses them; this keeps clients registered
    before that harmless too."""
    return "".join(f"[U+{ord(ch):04X}]" if unicodedata.category(ch) in HIDDEN_CATEGORIES else ch for ch in text)


def _ascii_host(host: str) -> str:
    """`host` as ASCII: its IDNA form (``xn--…``) when it has other characters (a client registered
    before they were refused), else each such character as ``[U+XXXX]``."""
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return "".join(ch if ch.isascii() else f"[U+{ord(ch):04X}]" for ch in host)


def redirect_host(uri: str) -> str:
    """Where a redirect URI sends the browser, as the consent page shows it on its own: the ASCII
    host (and port) of an http(s) URI, or the private-use scheme of a native app
    (``com.example.app:``); `shown_plainly` in any case."""
    try:
        parts = urlsplit(uri)
        host, port = parts.hostname, parts.port
    except ValueError:
        return shown_plainly(uri[:200])
    if not parts.netloc or host is None:
        return shown_plainly(f"{parts.scheme}:")
    host = _ascii_host(host)
    if ":" in host:
        host = f"[{host}]"
    return shown_plainly(host if port is None else f"{host}:{port}")


def redirect_display(uri: str) -> str:
    """A redirect URI as the consent page shows it: scheme, host and path (its query left out),
    `shown_plainly`, the host in ASCII."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return shown_plainly(uri[:MAX_URI_LENGTH])
    if not parts.netloc:
        return shown_plainly(f"{parts.scheme}:{parts.path}")
    return f"{parts.scheme}://{redirect_host(uri)}{shown_plainly(parts.path)}"


def redirect_origin(uri: str) -> str:
    """Where a redirect URI sends the browser, in short: ``scheme://host[:port]`` (the host as
    `redirect_host` shows it), or the private-use scheme of a native app (``com.example.app:``)."""
    try:
        parts = urlsplit(uri)
    except ValueError:
        return shown_plainly(uri[:200])
    return f"{parts.scheme}://{redirect_host(uri)}" if parts.netloc else shown_plainly(f"{parts.scheme}:")


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


# ---------------------------------------------------------------------- token endpoint (RFC 6749 §5)


class TokenError(Exception):
    """A refused token or revocation request: RFC 6749 §5.2."""

    def __init__(self, error: str, description: str, status: int = 400, *, basic: bool = False):
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status
        self.basic = basic  # the client tried HTTP Basic: answer with a Basic challenge

    def body(self) -> dict:
        return {"error": self.error, "error_description": self.description}


TOKEN_PARAMS = (
    "grant_type",
    "code",
    "redirect_uri",
    "code_verifier",
    "client_id",
    "client_secret",
    "refresh_token",
    "scope",
    "resource",
    "token",
    "token_type_hint",
)


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).decode().rstrip("=")


def parse_form(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The parameters of a token or revocation request, each at most once (RFC 6749 §3.2)."""
    out: dict[str, str] = {}
    for k, v in pairs:
        if k in TOKEN_PARAMS:
            if k in out:
                raise TokenError("invalid_request", f"the parameter {k} is repeated")
            out[k] = v
    return out


def _basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    scheme, _, value = (authorization or "").strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise TokenError("invalid_client", "malformed HTTP Basic credentials", 401, basic=True) from None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise TokenError("invalid_client", "malformed HTTP Basic credentials", 401, basic=True)
    return unquote(client_id), unquote(secret)


def authenticate_client(store, form: dict[str, str], authorization: str | None) -> st.OAuthClient:
    """The client making a token or revocation request (RFC 6749 §2.3): a public client by its
    ``client_id``, a confidential one by its secret, sent the way it registered. `TokenError`
    ``invalid_client`` (401) otherwise."""
    basic = _basic_credentials(authorization)
    if basic is not None:
        client_id, secret = basic
        if form.get("client_secret") is not None:
            raise TokenError("invalid_request", "send client credentials one way only", 400)
        if form.get("client_id") not in (None, client_id):
            raise TokenError("invalid_request", "client_id differs from the HTTP Basic user", 400)
        method = "client_secret_basic"
    else:
        client_id, secret = form.get("client_id"), form.get("client_secret")
        method = "client_secret_post" if secret is not None else "none"
    if not client_id:
        raise TokenError("invalid_client", "client authentication failed: no client_id", 401, basic=basic is not None)
    client = store.get_oauth_client(client_id)
    if client is None:
        raise TokenError("invalid_client", "client authentication failed: unknown client", 401, basic=basic is not None)
    if client.auth_method != method:
        raise TokenError(
            "invalid_client",
            f"client authentication failed: this client authenticates with {client.auth_method}",
            401,
            basic=basic is not None,
        )
    if method != "none" and not store.verify_oauth_client_secret(client.id, secret or ""):
        raise TokenError(
            "invalid_client", "client authentication failed: wrong client secret", 401, basic=basic is not None
        )
    return client


@dataclass
class TokenOutcome:
    """What the token endpoint answered, for the router to send and audit."""

    body: dict
    event: str  # the audit action
    client: st.OAuthClient
    user_id: int | None
    grant_id: str | None
    details: dict = field(default_factory=dict)


def token_endpoint(
    store,
    form: dict[str, str],
    authorization: str | None,
    settings: OAuthSettings,
    base: str,
    on_replay: Callable[[str, st.Redeemed, st.OAuthClient], None],
) -> TokenOutcome:
    """Answer one token request (`TokenError` when refused). `on_replay(kind, redeemed, client)`
    is told of a replayed code or refresh token (the grant is revoked already)."""
    grant_type = form.get("grant_type")
    if not grant_type:
        raise TokenError("invalid_request", "grant_type is required")
    if grant_type not in GRANT_TYPES:
        raise TokenError("unsupported_grant_type", f"grant_type must be one of {', '.join(GRANT_TYPES)}")
    client = authenticate_client(store, form, authorization)
    if grant_type not in client.metadata.get("grant_types", GRANT_TYPES):
        raise TokenError("unauthorized_client", f"this client did not register the {grant_type} grant")
    with_refresh = "refresh_token" in client.metadata.get("grant_types", ())
    resource = form.get("resource")
    if resource is not None and not same_resource(resource, base):
        raise TokenError("invalid_target", f"resource must be this server's MCP endpoint ({resource_url(base)})")

    if grant_type == "authorization_code":
        code, redirect_uri, verifier = form.get("code"), form.get("redirect_uri"), form.get("code_verifier")
        if not code:
            raise TokenError("invalid_request", "code is required")
        if not redirect_uri:
            raise TokenError("invalid_request", "redirect_uri is required (the one of the authorization request)")
        if not verifier:
            raise TokenError("invalid_request", "code_verifier is required (PKCE)")
        if not _VERIFIER.match(verifier):
            raise TokenError("invalid_request", "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~")

        def check(c: st.OAuthCode) -> str | None:
            if not hmac.compare_digest(redirect_uri.encode(), c.redirect_uri.encode()):
                return "redirect_uri differs from the authorization request's"
            if not hmac.compare_digest(s256(verifier).encode(), c.code_challenge.encode()):
                return "code_verifier does not match the code_challenge (PKCE)"
            if resource is not None and c.resource is not None and resource_url(base) != c.resource:
                return "resource differs from the authorization request's"
            return None

        done = store.redeem_oauth_code(
            code,
            client_id=client.id,
            check=check,
            access_ttl=settings.access_ttl,
            refresh_ttl=settings.refresh_ttl if with_refresh else None,
        )
        kind, event = "code", "oauth.token.issue"
    else:
        refresh = form.get("refresh_token")
        if not refresh:
            raise TokenError("invalid_request", "refresh_token is required")
        wanted = form.get("scope")

        def check(scope: str, bound: str | None) -> str | None:
            if wanted is not None and any(s not in scope.split() for s in wanted.split()):
                return "scope asks for more than the grant has"
            return None

        done = store.rotate_oauth_refresh_token(
            refresh, client_id=client.id, check=check, access_ttl=settings.access_ttl, refresh_ttl=settings.refresh_ttl
        )
        kind, event = "refresh_token", "oauth.token.refresh"

    if done.status == st.REPLAYED:
        on_replay(kind, done, client)
        raise TokenError(
            "invalid_grant", f"this {kind.replace('_', ' ')} was used already: every token it gave is revoked now"
        )
    if done.status == st.REFUSED and "scope" in done.detail:
        raise TokenError("invalid_scope", done.detail)
    if done.status != st.OK:
        reason = {
            st.UNKNOWN: f"unknown {kind.replace('_', ' ')}",
            st.WRONG_CLIENT: f"the {kind.replace('_', ' ')} was issued to another client",
            st.EXPIRED: f"the {kind.replace('_', ' ')} has expired",
            st.REFUSED: done.detail,
        }.get(done.status, "refused")
        raise TokenError("invalid_grant", reason)
    t = done.tokens
    body = {"access_token": t.access_token, "token_type": "Bearer", "expires_in": t.expires_in, "scope": t.scope}
    if t.refresh_token:
        body["refresh_token"] = t.refresh_token
    return TokenOutcome(body, event, client, done.user_id, done.grant_id)


def revocation_endpoint(store, form: dict[str, str], authorization: str | None) -> tuple[st.OAuthClient, str, int]:
    """RFC 7009: (client, outcome, tokens revoked). An unknown token, or another client's, is
    answered 200 like any other (§2.2); only a failed client authentication is an error."""
    client = authenticate_client(store, form, authorization)
    token = form.get("token")
    if not token:
        raise TokenError("invalid_request", "token is required")
    outcome, n = store.revoke_oauth_token(token, client_id=client.id)
    return client, outcome, n


def registration_too_large() -> RegistrationError:
    return RegistrationError(
        "invalid_client_metadata", f"the registration is larger than {MAX_REGISTRATION_BYTES} bytes", status=413
    )


def json_body(raw: bytes) -> Any:
    if len(raw) > MAX_REGISTRATION_BYTES:
        raise registration_too_large()
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise RegistrationError("invalid_client_metadata", "the registration is not valid JSON") from None
