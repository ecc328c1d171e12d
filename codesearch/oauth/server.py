"""The OAuth 2.0 server's metadata and settings: the endpoints' paths, the scopes, `OAuthSettings`
(``AUTH_URL``, lifetimes, registration limits) and the issuer's URL (`base_url`), from which the
protected resource metadata (RFC 9728) and the authorization server metadata (RFC 8414) are
written. The protocol as a whole: `codesearch.oauth`.

The issuer, and every endpoint URL, is `base_url`: ``AUTH_URL`` when set, else the request's own
base URL (scheme, honouring ``X-Forwarded-Proto`` from a trusted proxy, host and the app's root
path).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codesearch import environment
from codesearch.forwarded import client_of

if TYPE_CHECKING:
    from starlette.types import Scope

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


def request_base_url(scope: Scope) -> str:
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


def base_url(scope: Scope, settings: OAuthSettings) -> str:
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


def protected_resource_metadata(base: str) -> dict[str, object]:
    return {
        "resource": resource_url(base),
        "authorization_servers": [base],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "codesearch MCP server",
    }


def authorization_server_metadata(base: str) -> dict[str, object]:
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


def same_resource(resource: str, base: str) -> bool:
    """Whether `resource` (RFC 8707) names this server's MCP endpoint (a trailing slash aside)."""
    return isinstance(resource, str) and resource.rstrip("/") == resource_url(base)
