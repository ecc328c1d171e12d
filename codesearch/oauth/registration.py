"""Dynamic client registration (RFC 7591) and what a registration may cost.

Anyone may register (MCP clients do so on first contact), so every limit is about abuse: a body of
at most `MAX_REGISTRATION_BYTES` (413), at most `MAX_FIELDS` members, each field within its own
limit (`MAX_NAME_LENGTH`, `MAX_REDIRECT_URIS`, `redirects.MAX_URI_LENGTH`; a member this
server does not use is ignored, never stored, and refused above `MAX_UNKNOWN_FIELD_BYTES`); redirect
URIs and text fields as `codesearch.oauth.redirects` accepts them. Per client address,
`registration_backoff` (429 with ``Retry-After``). ``token_endpoint_auth_method``: ``none`` (a
public client, PKCE only), ``client_secret_post`` or ``client_secret_basic`` (default, as RFC 7591
says): the secret is shown once. Errors: ``invalid_redirect_uri``, ``invalid_client_metadata``.
"""

from __future__ import annotations

import json
from typing import Any

from codesearch.oauth.redirects import MAX_URI_LENGTH, hidden_problem, redirect_uri_problem
from codesearch.oauth.server import AUTH_METHODS, GRANT_TYPES, SCOPES_SUPPORTED
from codesearch.store import oauth as st
from codesearch.store.models import Backoff

#: Limits of a registration (see the module docstring).
MAX_REGISTRATION_BYTES = 16 * 1024
MAX_FIELDS = 32
MAX_UNKNOWN_FIELD_BYTES = 4096
MAX_REDIRECT_URIS = 10
MAX_NAME_LENGTH = 200
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


class RegistrationError(Exception):
    """A refused registration: RFC 7591 §3.2.2 (``error`` and ``error_description``; status 400,
    413 for a body too large, 429 for too many registrations, with `headers` such as ``Retry-After``)."""

    def __init__(self, error: str, description: str, status: int = 400, headers: dict[str, str] | None = None):
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status
        self.headers = headers or {}

    def body(self) -> dict[str, str]:
        return {"error": self.error, "error_description": self.description}


def registration_backoff(per_address: int) -> Backoff:
    """The per-address limit of registrations, as a counter of the sign-in lock-outs' kind
    (`codesearch.store.lockouts`, kept in the state store so that every replica counts alike):
    `per_address` registrations in a row, each less than `REGISTRATION_PAUSE_S` after the one
    before, go through; the next is refused and the address must pause that long, after which
    its count starts again."""
    pause = REGISTRATION_PAUSE_S
    return Backoff(free=per_address, base_seconds=pause, cap_seconds=pause, forget_seconds=pause)


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
        hidden = hidden_problem(value)
        if hidden:
            raise RegistrationError("invalid_client_metadata", f"{name} {hidden}")
        if name.endswith("_uri") and not value.lower().startswith(("https://", "http://")):
            raise RegistrationError("invalid_client_metadata", f"{name} must be an http(s) URL")
        kept[name] = value
    name = (kept.get("client_name") or "").strip() or "Unnamed MCP client"
    return name, list(uris), kept, method != "none"


def registration_response(client: st.OAuthClient, secret: str | None) -> dict[str, Any]:
    out = dict(client.metadata)
    out.update(client_id=client.id, client_id_issued_at=int(client.created_at.timestamp()))
    if secret is not None:
        out.update(client_secret=secret, client_secret_expires_at=0)
    return out


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
