"""Who is calling: API keys, anonymous access, and the one place repo visibility is decided
(docs/security-model.md#authentication).

API keys arrive as ``Authorization: Bearer <key>`` or ``X-Sourcebot-Api-Key: <key>`` and are
checked with `Store.verify_api_key` (HMAC under the server secret; revoked keys fail). A key that
is missing, malformed, unknown or revoked counts as *no key*: the caller is anonymous when
anonymous access is on, else the request is refused with 401 ``NOT_AUTHENTICATED`` (the shape
of docs/http-api.md#errors, plus ``WWW-Authenticate: Bearer``). Anonymous access is on when
``FORCE_ENABLE_ANONYMOUS_ACCESS=true`` (read when the app is built) or the deprecated
``settings.enablePublicAccess`` is passed in as true, else when an owner switched it on under
Settings → Access (`codesearch.service.anonymous`: stored in the state database, read by every
replica at most every few seconds).

OAuth 2.0 access tokens (`codesearch.oauth.server`, prefix ``cso_at_``) are accepted as
Bearer tokens by the MCP endpoint only (``/api/mcp``): they are issued for that resource (its
protected resource metadata names it, and the MCP authorization spec asks servers to accept only
tokens meant for them), and they carry a consent to "use codesearch from this MCP client", not
the owner-only switches of API keys. Presented anywhere else, an OAuth token counts as no key.
Only two methods accept them: `Authenticator.identify_mcp` (what the MCP endpoint calls) and
`Authenticator.identify_request` for a request whose path is ``/api/mcp``. Every other way to
identify a caller (`identify`: headers alone, as the chat pages use it; `identify_request` on
any other path: ``/api/*`` routes, pages, the chat JSON) never reads one, so a route added later
cannot take an OAuth token by accident.
A token that is unknown, expired or revoked counts as no key too; when that leaves the caller
refused, the refusal is `InvalidToken` (still 401 ``NOT_AUTHENTICATED``), so that the MCP
endpoint can answer ``error="invalid_token"`` (`Authenticator.challenge`: ``WWW-Authenticate:
Bearer resource_metadata="…"``, RFC 9728, which MCP clients follow to sign in with OAuth).

With ``DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS=true`` (read when the app is built) only owners'
keys work: a valid key of a MEMBER is refused with 403 ``INSUFFICIENT_PERMISSIONS``
(`ApiKeyNotAllowed`), as in Sourcebot, whatever anonymous access allows (the caller said who
they are, and that identity may not use keys). The member's web sign-in and OAuth tokens (a
sign-in of the user, through the consent page) are not affected.

The web UI's session cookie (``codesearch_session``, `codesearch.sessions`) is accepted too, by
`Authenticator.identify_request` (what the routes' dependency uses): API keys come first; a
cookie-authenticated POST/PUT/PATCH/DELETE must carry ``X-CSRF-Token`` equal to the session's
token, else the cookie counts as absent. `identify(headers)` looks at API keys only, and
`identify_mcp(headers)` (the MCP endpoint) at API keys and OAuth access tokens.
Behind Google Cloud IAP (a ``gcp-iap`` identity provider), the user IAP signed the request in as
(`codesearch.web.iap`) comes after API keys and before the cookie, under the same
``X-CSRF-Token`` rule.

Every ``/api/*`` route except ``/api/health``, ``/api/version`` and ``/api/openapi.json`` depends
on `codesearch.service.deps.require_identity` (which asks `Authenticator.require`; attached to the
protected router in `api.build_app`). Handlers receive the caller as an `Identity` (``deps.Caller``).

Repository-scoped access tokens (``sbst_``, ``POST /api/ee/scoped_access_token``,
`codesearch.store.scoped_tokens`) are Bearer tokens accepted only by repository reads
(`SCOPED_TOKEN_PATHS`: searches, files, trees, history, code navigation, the repository list,
the MCP endpoint); anywhere else they count as no key. Their identity carries the token's
repositories (`Identity.repo_scope`), which `codesearch.permissions.visible_repos` intersects
with what the user may see, so every route and tool that reads repositories honours the scope,
and it is never an owner's (`Identity.role`).

Every credential is checked against the state database on every request (no cache), so a key,
session, OAuth token or scoped token that an owner ends (removing or deactivating a member,
`codesearch.store.offboarding`) is refused at once by every replica.

Permissions live in `codesearch.permissions` (re-exported here): every repo access of every route,
MCP tool and page goes through them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPBearer

from codesearch import environment
from codesearch.errors import NotAuthenticated  # noqa: F401  (re-exported)
from codesearch.oauth import server as oauth_server
from codesearch.permissions import (  # noqa: F401  (re-exported: routes import them from here)
    UNRESTRICTED,
    VIA,
    Identity,
    PermissionPolicy,
    can_see,
    filter_repos,
    filter_search_response,
    visible_repos,
)
from codesearch.service.anonymous import AnonymousAccess
from codesearch.service.middleware.limits import MCP_PATH, route_path
from codesearch.sessions import csrf
from codesearch.sessions.cookies import SESSION_COOKIE
from codesearch.store.oauth import ACCESS_PREFIX as OAUTH_ACCESS_PREFIX
from codesearch.store.scoped_tokens import SCOPED_TOKEN_PREFIX

if TYPE_CHECKING:
    from starlette.types import Scope

    from codesearch.store import Store
    from codesearch.store.models import User, WebSession

ANONYMOUS_ENV = "FORCE_ENABLE_ANONYMOUS_ACCESS"
OWNER = "OWNER"
API_KEY_HEADER = "X-Sourcebot-Api-Key"
_MAX_KEY_LENGTH = 256
#: The routes that accept repository-scoped access tokens: reads of repositories, nothing else.
SCOPED_TOKEN_PATHS = frozenset(
    {
        "/api/search",
        "/api/stream_search",
        "/api/source",
        "/api/tree",
        "/api/blame",
        "/api/commit",
        "/api/commits",
        "/api/diff",
        "/api/repos",
        "/api/suggest",
        "/api/find_definitions",
        "/api/find_references",
        MCP_PATH,
    }
)

#: How the caller proved who they are (`Identity.via`, one of `codesearch.permissions.VIA`).
VIA_API_KEY, VIA_SCOPED, VIA_OAUTH, VIA_SESSION, VIA_IAP = VIA


class ApiKeyNotAllowed(NotAuthenticated):
    """A valid API key whose user may not use keys here (a MEMBER while
    ``DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS`` is on): 403, not 401, since asking again
    with the same identity cannot help. A `NotAuthenticated`, so that every place that refuses
    unauthenticated callers refuses it too."""

    status_code = 403
    error_code = "INSUFFICIENT_PERMISSIONS"


class InvalidToken(NotAuthenticated):
    """Credentials were presented, and none is valid (unknown, expired or revoked): the same 401,
    told apart only in the MCP endpoint's ``WWW-Authenticate`` (``error="invalid_token"``)."""


def anonymous_access_enabled(environ: Mapping[str, str] | None = None, enable_public_access: bool = False) -> bool:
    """``FORCE_ENABLE_ANONYMOUS_ACCESS=true`` (case-insensitive) or `enable_public_access`."""
    environ = os.environ if environ is None else environ
    return (environ.get(ANONYMOUS_ENV) or "").strip().lower() == "true" or bool(enable_public_access)


def keys_from_headers(headers: Mapping[str, str]) -> list[str]:
    """The API keys a request carries, in the order they are tried (Bearer first)."""
    keys = []
    auth = (headers.get("authorization") or "").strip()
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        keys.append(value.strip())
    header = (headers.get(API_KEY_HEADER.lower()) or headers.get(API_KEY_HEADER) or "").strip()
    if header and header not in keys:
        keys.append(header)
    return [k for k in keys if len(k) <= _MAX_KEY_LENGTH]


# Declared for the OpenAPI document (security schemes); the keys are read from the raw headers.
#: The two ways to send an API key, as the OpenAPI document declares them (`deps.require_identity`).
BEARER_SCHEME = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>`")
API_KEY_SCHEME = APIKeyHeader(name=API_KEY_HEADER, auto_error=False, description="An API key")


class Authenticator:
    """Turns a request (or its headers) into an `Identity` (see the module docstring).

    `get_store()` returns the `Store` holding the API keys, or None when the service has no state
    database (then only anonymous access is possible). It is called only when a key is present.
    `keys_owner_only` (default: ``DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS`` now) refuses the
    keys of members.
    """

    def __init__(
        self,
        get_store: Callable[[], Store | None],
        anonymous: bool,
        keys_owner_only: bool | None = None,
        policy: PermissionPolicy | None = None,
        oauth: oauth_server.OAuthSettings | None = None,
    ):
        self.get_store = get_store
        #: visitors without credentials: `anonymous` forces it on, else the owners' stored choice
        #: (`codesearch.service.anonymous`, read at most every few seconds)
        self.access = AnonymousAccess(get_store, forced=bool(anonymous))
        #: the permission rule every identity made here is bound to (None: everyone sees everything)
        self.policy = policy
        self.keys_owner_only = (
            environment.api_key_usage_owner_only() if keys_owner_only is None else bool(keys_owner_only)
        )
        #: where the MCP endpoint's 401 sends clients to sign in (the issuer, ``AUTH_URL``)
        self.oauth = oauth or oauth_server.OAuthSettings()
        #: called with every user identified here; may refuse them (`codesearch.sso.required`)
        self.gate: Callable[[User], None] | None = None

    @property
    def anonymous(self) -> bool:
        """Whether visitors without credentials may search now."""
        return self.access.enabled()

    def identify(self, headers: Mapping[str, str]) -> Identity:
        """The caller of a request with these headers, by API key only: an OAuth access token
        counts as no key here (see the module docstring; the MCP endpoint has `identify_mcp`)."""
        return self._identify_headers(headers, oauth=False)

    def identify_mcp(self, headers: Mapping[str, str]) -> Identity:
        """The caller of a request to the MCP endpoint (``/api/mcp``), by API key or OAuth access
        token: the one resource OAuth tokens are issued for. Nothing else may call this."""
        return self._identify_headers(headers, oauth=True)

    def _identify_headers(self, headers: Mapping[str, str], *, oauth: bool) -> Identity:
        found = self._key_user(headers, oauth=oauth, scoped=oauth)
        if found is not None:
            if self.gate is not None:
                self.gate(found[0])
            return self.identity(found[0], via=found[1], repo_scope=found[2])
        keys = keys_from_headers(headers)
        misplaced = not oauth and any(k.startswith(OAUTH_ACCESS_PREFIX) for k in keys)
        scoped_elsewhere = not oauth and any(k.startswith(SCOPED_TOKEN_PREFIX) for k in keys)
        return self._nobody(presented=bool(keys), oauth_elsewhere=misplaced, scoped_elsewhere=scoped_elsewhere)

    def challenge(self, scope: Scope, exc: NotAuthenticated | None = None) -> str:
        """The ``WWW-Authenticate`` of a 401 from the MCP endpoint: where its protected resource
        metadata is, and ``error="invalid_token"`` when the credentials presented were bad."""
        return oauth_server.www_authenticate(
            oauth_server.base_url(scope, self.oauth), invalid_token=isinstance(exc, InvalidToken)
        )

    def identify_request(self, request: Request) -> Identity:
        """The caller of `request`: an API key, else the web UI's session cookie (with
        ``X-CSRF-Token`` for unsafe methods), else anonymous or `NotAuthenticated`."""
        oauth = _is_mcp_request(request.scope)
        scoped = route_path(request.scope).rstrip("/") in SCOPED_TOKEN_PATHS
        found = self._key_user(request.headers, oauth=oauth, scoped=scoped)
        if found is None:
            iap_user = self._iap_user(request)
            if iap_user is not None:
                found = (iap_user, VIA_IAP, None)
            else:
                user = self._session_user(request)
                found = None if user is None else (user, VIA_SESSION, None)
        if found is not None:
            if self.gate is not None:
                self.gate(found[0])
            return self.identity(found[0], via=found[1], repo_scope=found[2])
        keys = keys_from_headers(request.headers)
        misplaced = not oauth and any(k.startswith(OAUTH_ACCESS_PREFIX) for k in keys)
        scoped_elsewhere = not scoped and any(k.startswith(SCOPED_TOKEN_PREFIX) for k in keys)
        return self._nobody(presented=bool(keys), oauth_elsewhere=misplaced, scoped_elsewhere=scoped_elsewhere)

    def identity(self, user: User | None, *, via: str = "", repo_scope: frozenset[int] | None = None) -> Identity:
        """`user` (None: anonymous) as an `Identity` bound to this service's permission rule;
        `via` and `repo_scope` as `Identity` documents them."""
        return Identity(user, self.policy, repo_scope, via=via)

    def anonymous_identity(self) -> Identity:
        return UNRESTRICTED if self.policy is None else Identity(None, self.policy)

    async def identify_request_async(self, request: Request) -> Identity:
        """`identify_request` for an event loop: in a thread when it reads the store (an API key
        to verify, a session cookie the session middleware did not resolve), else right here
        (anonymous or refused callers, a session resolved already): a trip to a thread costs
        more than the whole check."""
        if self._reads_store(request):
            return await anyio.to_thread.run_sync(self.identify_request, request)
        return self.identify_request(request)

    def _reads_store(self, request: Request) -> bool:
        if keys_from_headers(request.headers) or self.access.stale():
            return True
        state = request.scope.get("state") or {}
        return "web_session" not in state and bool(request.cookies.get(SESSION_COOKIE))

    def _key_user(
        self, headers: Mapping[str, str], *, oauth: bool, scoped: bool
    ) -> tuple[User, str, frozenset[int] | None] | None:
        """(user, how, repository scope) of the first valid key in `headers`; OAuth access
        tokens count only when `oauth` (a request to the MCP endpoint, the resource they are
        issued for), scoped access tokens only when `scoped` (a repository read)."""
        keys = keys_from_headers(headers)
        store = self.get_store() if keys else None
        if store is not None:
            for key in keys:
                if key.startswith(OAUTH_ACCESS_PREFIX):  # never an API key (those start with cs_)
                    found = store.verify_oauth_access_token(key) if oauth else None
                    if found is not None:
                        return found[1], VIA_OAUTH, None
                    continue
                if key.startswith(SCOPED_TOKEN_PREFIX):
                    token = store.verify_scoped_access_token(key) if scoped else None
                    if token is not None:
                        return token[1], VIA_SCOPED, frozenset(token[0].repo_ids)
                    continue
                user = store.verify_api_key(key)
                if user is not None:
                    if self.keys_owner_only and user.role != OWNER:
                        raise ApiKeyNotAllowed(
                            "API keys of members are disabled on this server: only owners may "
                            "use API keys (DISABLE_API_KEY_USAGE_FOR_NON_OWNER_USERS)"
                        )
                    return user, VIA_API_KEY, None
        return None

    def _iap_user(self, request: Request) -> User | None:
        """The user Google Cloud IAP signed this request in as (`codesearch.web.iap` checked the
        assertion and left the user in the request state), with ``X-CSRF-Token`` for unsafe
        methods as for a session cookie; None when there is none."""
        state = request.scope.get("state") or {}
        user: User | None = state.get("iap_user")  # set by codesearch.web.iap
        if user is None:
            return None
        if csrf.needs_token(request.method) and not csrf.header_matches(
            request.headers, str(state.get("iap_csrf_token") or "")
        ):
            return None
        return user

    def _session_user(self, request: Request) -> User | None:
        state = request.scope.get("state") or {}
        found: tuple[WebSession, User] | None
        if "web_session" in state:  # resolved by the session middleware already
            found = state["web_session"]
        else:
            value = request.cookies.get(SESSION_COOKIE)
            store = self.get_store() if value else None
            found = store.get_web_session(value) if store is not None and value else None
        if not found:
            return None
        session, user = found
        if csrf.needs_token(request.method) and not csrf.header_matches(request.headers, session.csrf_token):
            return None
        return user

    def _nobody(
        self, presented: bool = False, oauth_elsewhere: bool = False, scoped_elsewhere: bool = False
    ) -> Identity:
        if self.anonymous:
            return self.anonymous_identity()
        message = (
            f"not authenticated: send an API key (or, to {MCP_PATH}, an OAuth access token) as "
            "'Authorization: Bearer <key>' "
            f"or '{API_KEY_HEADER}: <key>'"
        )
        if oauth_elsewhere:
            raise InvalidToken(
                f"not authenticated: OAuth access tokens are accepted only by the MCP endpoint "
                f"({MCP_PATH}); send an API key as 'Authorization: Bearer <key>' here"
            )
        if scoped_elsewhere:
            raise InvalidToken(
                "not authenticated: scoped access tokens (sbst_) are accepted only by repository reads "
                f"({', '.join(sorted(SCOPED_TOKEN_PATHS))}); send an API key here"
            )
        if presented:
            raise InvalidToken(message + " (the one sent is unknown, expired or revoked)")
        raise NotAuthenticated(message)

    async def require(self, request: Request) -> Identity:
        """The caller's `Identity` (`NotAuthenticated` when there is none), kept on
        ``request.state.identity``: what the routes' dependency (`deps.require_identity`) returns."""
        # `limits.RequestLimits` identified callers of body-carrying requests already.
        identity = request.scope.get("state", {}).get("identity_checked") or await self.identify_request_async(request)
        request.state.identity = identity
        return identity


def _is_mcp_request(scope: Scope) -> bool:
    """Whether `scope` is a request to the MCP endpoint."""
    return route_path(scope).rstrip("/") == MCP_PATH


def install(app: FastAPI) -> None:
    """A 401 carries ``WWW-Authenticate: Bearer`` besides the error body (docs/http-api.md#errors); a refused key
    (`ApiKeyNotAllowed`) is a plain 403."""

    @app.exception_handler(NotAuthenticated)
    async def _not_authenticated(request: Request, exc: NotAuthenticated) -> JSONResponse:
        status = exc.status_code
        return JSONResponse(
            {"statusCode": status, "errorCode": exc.error_code, "message": str(exc)},
            status_code=status,
            headers={"WWW-Authenticate": "Bearer"} if status == 401 else None,
        )
