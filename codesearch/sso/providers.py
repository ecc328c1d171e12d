"""The identity providers of the config, ready to run flows.

GitHub (``github.com`` or Enterprise Server at `baseUrl`): ``<base>/login/oauth/authorize``,
``<base>/login/oauth/access_token``, then ``GET <api>/user`` and ``GET <api>/user/emails`` (the
primary address; verified when that same entry says ``verified: true``, /user's public e-mail
never counts as verified) where ``<api>`` is ``https://api.github.com`` or ``<base>/api/v3``.
Scopes ``read:user user:email repo``.

GitLab (``gitlab.com`` or self-managed at `baseUrl`): ``<base>/oauth/authorize``,
``<base>/oauth/token``, ``GET <base>/api/v4/user`` (its e-mail counts as verified when the user
has ``confirmed_at``). Scopes ``read_user read_api``.

Gitea (``gitea.com`` or self-hosted at `baseUrl`; codesearch only): ``<base>/login/oauth/authorize``,
``<base>/login/oauth/access_token``, ``GET <base>/api/v1/user``. The subject is the user's ``id``.
Its e-mail never counts as verified: ``/user`` does not say whether it was confirmed, and whether
``/user/emails``' ``verified`` means anything depends on the server's settings (with
``REGISTER_EMAIL_CONFIRM`` off, the default, every address is "activated" unconfirmed), so a
Gitea identity signs up a new user or signs in one it is linked to, never one found by e-mail.
Scopes ``read:user read:repository``.

Bitbucket Cloud (``bitbucket.org``): ``<base>/site/oauth2/authorize``,
``<base>/site/oauth2/access_token`` (client credentials in HTTP Basic, as Bitbucket documents),
``GET <api>/user`` and ``GET <api>/user/emails`` (the primary address; verified when
``is_confirmed``), where ``<api>`` is the entry's ``apiUrl`` (default
``https://api.bitbucket.org/2.0``; for another `baseUrl`, ``<baseUrl>/2.0``). The subject is
the user's ``uuid`` with its braces, as the API writes it (what repo-driven syncing stores of
each reader). The host key is made from ``<api>``, as a Bitbucket Cloud connection's is from its
`url` (an API address): ``bitbucketCloud:https://bitbucket.org`` for the real service, and equal
to a connection's whose `url` is the same ``<api>`` elsewhere. Scopes ``account email repository``
(Bitbucket grants what the consumer's permissions allow: tick Account read, Email and
Repositories read).

Bitbucket Server / Data Center 8+ (incoming application link at `baseUrl`, required):
``<base>/rest/oauth2/latest/authorize``, ``<base>/rest/oauth2/latest/token``, then
``GET <base>/plugins/servlet/applinks/whoami`` (the user's slug, plain text) and
``GET <base>/rest/api/1.0/users/<slug>``. The subject is the user's numeric ``id``. Its
``emailAddress`` never counts as verified (Bitbucket does not confirm addresses). Scopes
``PUBLIC_REPOS REPO_READ``.

Every code-host provider's linked account carries the host key
(`codesearch.hosts.keys.host_key`) of its kind and address, and its tokens.

OpenID Connect (google, okta, keycloak, microsoft-entra-id, authentik, jumpcloud, oidc): the
discovery document ``<issuer>/.well-known/openid-configuration`` (its ``issuer`` must be the
configured one), the JWKS it names, scopes ``openid email profile``. The ID token is checked
with joserfc: signature (RS/PS/ES algorithms, the provider's keys; an unknown key id re-reads
the JWKS once), ``iss``, ``aud`` (and ``azp`` with several audiences), ``exp``/``iat`` (60 s of
leeway), ``sub`` and the flow's ``nonce``. The e-mail counts as verified only when the claims
that name it say ``email_verified: true``: the ID token's, or userinfo's when the ID token names
no address (userinfo's ``email_verified`` counts for the ID token's address only when userinfo
names the same one). Microsoft Entra ID never says so: its users are matched by linked identity
only. Discovery documents and key sets are cached for an hour per process.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from codesearch.config.loader import resolve_provider_token
from codesearch.config.models import IdentityProvider
from codesearch.hosts.keys import host_key

if TYPE_CHECKING:
    from collections.abc import Iterable

    from joserfc.jwk import KeySet

log = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 10.0
CACHE_TTL_S = 3600.0
#: Seconds of clock skew allowed on ID token times.
LEEWAY_S = 60
ID_TOKEN_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]
SCOPES = {
    "github": "read:user user:email repo",
    "gitlab": "read_user read_api",
    "gitea": "read:user read:repository",
    "bitbucket-cloud": "account email repository",
    "bitbucket-server": "PUBLIC_REPOS REPO_READ",
}
#: The host key kind (a connection's `code_host_type`) of each code-host provider kind.
HOST_KINDS = {
    "github": "github",
    "gitlab": "gitlab",
    "gitea": "gitea",
    "bitbucket-cloud": "bitbucketCloud",
    "bitbucket-server": "bitbucketServer",
}
#: Pages of Bitbucket Cloud's ``/user/emails`` read at most.
MAX_EMAIL_PAGES = 10
OIDC_SCOPES = "openid email profile"


@dataclass
class ProviderIdentity:
    """Who the provider says signed in, and the tokens it gave (never logged)."""

    subject: str
    login: str | None
    email: str | None
    email_verified: bool
    name: str | None
    access_token: str | None
    refresh_token: str | None
    expires_at: datetime | None
    scope: str | None

    def __repr__(self) -> str:  # no tokens
        return f"ProviderIdentity(subject={self.subject!r}, login={self.login!r}, email={self.email!r})"


@dataclass
class Endpoints:
    authorize: str
    token: str
    userinfo: str | None = None
    jwks_uri: str | None = None
    issuer: str | None = None
    token_auth: str = "client_secret_post"


class ProviderError(Exception):
    """The provider could not be used: unreachable, an unexpected answer, a bad token. `kind` is
    ``unreachable``, ``config`` or ``identity``; the message is fit for the error page (no secret)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Provider:
    """One supported `identityProviders` entry (see the module docstring)."""

    def __init__(self, config: IdentityProvider, environ: Mapping[str, str] | None = None):
        self.config = config
        self.environ = os.environ if environ is None else environ
        self._cache: dict[str, tuple[float, Any]] = {}

    # ------------------------------------------------------------------ what it is

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def kind(self) -> str:
        return self.config.provider

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def signs_in(self) -> bool:
        return self.config.signs_in

    @property
    def is_gateway(self) -> bool:
        """Whether every request reaches the service through this provider (Google Cloud IAP):
        then nobody, owners included, can sign in any other way to link it from their account
        page, and a verified address joins any account by e-mail (`accounts._may_join_by_email`)."""
        return self.kind == "gcp-iap"

    @property
    def is_oidc(self) -> bool:
        return not self.config.is_code_host

    @property
    def host(self) -> str | None:
        """The code host key of a code-host provider (`hosts.keys.host_key`); None for OIDC.
        Bitbucket Cloud's is made from its API address, as its connections' are."""
        if not self.config.is_code_host:
            return None
        url = self.config.api_url if self.kind == "bitbucket-cloud" else self.config.base_url
        return host_key(HOST_KINDS[self.kind], url)

    @property
    def scope(self) -> str:
        return SCOPES.get(self.kind, OIDC_SCOPES)

    def credentials(self) -> tuple[str, str]:
        """(client id, client secret), read now (`ConfigError` names the variable, never a value)."""
        c = self.config
        return (
            resolve_provider_token(c.client_id, provider=c, field="clientId", environ=self.environ),
            resolve_provider_token(c.client_secret, provider=c, field="clientSecret", environ=self.environ),
        )

    def issuer(self) -> str:
        value = self.config.issuer
        if value is None:
            raise ProviderError("config", "no issuer is configured")
        if not isinstance(value, str):
            value = resolve_provider_token(value, provider=self.config, field="issuer", environ=self.environ)
        return value.rstrip("/")

    # ------------------------------------------------------------------ endpoints

    def _base(self) -> str:
        return (self.config.base_url or "").rstrip("/")

    def _api(self) -> str:
        base = self._base()
        if self.kind == "github":
            return (
                "https://api.github.com"
                if base in ("https://github.com", "https://www.github.com")
                else base + "/api/v3"
            )
        if self.kind == "gitea":
            return base + "/api/v1"
        if self.kind == "bitbucket-cloud":
            return (self.config.api_url or "https://api.bitbucket.org/2.0").rstrip("/")
        if self.kind == "bitbucket-server":
            return base + "/rest/api/1.0"
        return base + "/api/v4"

    async def endpoints(self, http: httpx.AsyncClient) -> Endpoints:
        base = self._base()
        if self.kind in ("github", "gitea"):
            return Endpoints(base + "/login/oauth/authorize", base + "/login/oauth/access_token")
        if self.kind == "gitlab":
            return Endpoints(base + "/oauth/authorize", base + "/oauth/token")
        if self.kind == "bitbucket-cloud":
            return Endpoints(
                base + "/site/oauth2/authorize", base + "/site/oauth2/access_token", token_auth="client_secret_basic"
            )
        if self.kind == "bitbucket-server":
            return Endpoints(base + "/rest/oauth2/latest/authorize", base + "/rest/oauth2/latest/token")
        doc = await self._discovery(http)
        methods = doc.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        return Endpoints(
            doc["authorization_endpoint"],
            doc["token_endpoint"],
            doc.get("userinfo_endpoint"),
            doc["jwks_uri"],
            doc["issuer"],
            "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post",
        )

    def form_targets(self) -> list[str]:
        """Where a sign-in form's redirect to this provider may go (the page's CSP
        ``form-action``, `codesearch.service.middleware.security_headers`): a code host's address; an OIDC
        provider's issuer and its discovered authorization endpoint, or any https address while
        discovery has not run in this process (the endpoint may be on another origin)."""
        if self.config.is_code_host:
            return [self._base()]
        try:
            targets = [self.issuer()]
        except Exception:  # noqa: BLE001 - not configured: its sign-in fails on its own
            return []
        doc = self._cached("discovery")
        targets.append(doc["authorization_endpoint"] if doc else "https:")
        return targets

    def _cached(self, key: str) -> Any:
        hit = self._cache.get(key)
        return hit[1] if hit and time.monotonic() - hit[0] < CACHE_TTL_S else None

    async def _get(
        self, http: httpx.AsyncClient, url: str, what: str, token: str | None, accept: str
    ) -> httpx.Response:
        headers = {"Accept": accept}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            r = await http.get(url, headers=headers)
        except httpx.HTTPError as e:
            raise ProviderError(
                "unreachable", f"{self.name} could not be reached ({what}: {type(e).__name__})"
            ) from None
        if r.status_code >= 400:
            raise ProviderError("unreachable", f"{self.name} answered {r.status_code} to the {what} request")
        return r

    async def _get_json(self, http: httpx.AsyncClient, url: str, what: str, token: str | None = None) -> Any:
        r = await self._get(http, url, what, token, "application/json")
        try:
            return r.json()
        except ValueError:
            raise ProviderError("unreachable", f"{self.name} did not answer the {what} request with JSON") from None

    async def _get_user(
        self, http: httpx.AsyncClient, url: str, what: str, token: str | None, *keys: str
    ) -> dict[str, Any]:
        """A JSON object that has `keys` (an answer without them is no identity)."""
        user = await self._get_json(http, url, what, token)
        if not isinstance(user, dict) or any(user.get(k) in (None, "") for k in keys):
            raise ProviderError("identity", f"{self.name}'s {what} answer does not say who you are")
        return user

    async def _discovery(self, http: httpx.AsyncClient) -> dict[str, Any]:
        doc: dict[str, Any] | None = self._cached("discovery")
        if doc is None:
            issuer = self.issuer()
            doc = await self._get_json(http, issuer + "/.well-known/openid-configuration", "discovery")
            if not isinstance(doc, dict) or not all(
                isinstance(doc.get(k), str) for k in ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")
            ):
                raise ProviderError("config", f"{self.name}'s discovery document lacks required endpoints")
            if doc["issuer"].rstrip("/") != issuer:
                raise ProviderError(
                    "config", f"{self.name}'s discovery document names another issuer than the configured one"
                )
            self._cache["discovery"] = (time.monotonic(), doc)
        return doc

    async def _jwks(self, http: httpx.AsyncClient, refresh: bool = False) -> KeySet:
        from joserfc.jwk import KeySet

        keys: KeySet | None = None if refresh else self._cached("jwks")
        if keys is None:
            ep = await self.endpoints(http)
            assert ep.jwks_uri is not None  # OIDC kinds only, whose discovery names it (`_discovery`)
            data = await self._get_json(http, ep.jwks_uri, "key set")
            try:
                keys = KeySet.import_key_set(data)
            except Exception:
                raise ProviderError("identity", f"{self.name}'s key set (JWKS) could not be read") from None
            self._cache["jwks"] = (time.monotonic(), keys)
        return keys

    # ------------------------------------------------------------------ who signed in

    async def identity(self, http: httpx.AsyncClient, token: Mapping[str, Any], nonce: str | None) -> ProviderIdentity:
        """The identity behind a token response (ID token checked for OIDC kinds)."""
        access = token.get("access_token")
        expires_at = None
        if token.get("expires_at"):
            expires_at = datetime.fromtimestamp(int(token["expires_at"]), UTC)
        elif token.get("expires_in"):
            expires_at = datetime.now(UTC) + timedelta(seconds=int(token["expires_in"]))
        common: dict[str, Any] = {
            "access_token": access,
            "refresh_token": token.get("refresh_token"),
            "expires_at": expires_at,
            "scope": token.get("scope"),
        }
        if self.kind == "github":
            user = await self._get_json(http, self._api() + "/user", "user", access)
            emails = await self._get_json(http, self._api() + "/user/emails", "e-mail", access)
            primary = (
                next(
                    (
                        e
                        for e in emails
                        if isinstance(e, dict) and e.get("primary") and isinstance(e.get("email"), str) and e["email"]
                    ),
                    None,
                )
                if isinstance(emails, list)
                else None
            )
            # The address and whether it is verified come from the same entry of /user/emails;
            # /user's public e-mail says nothing about verification.
            if primary is not None:
                email, verified = primary["email"], primary.get("verified") is True
            else:
                email, verified = user.get("email") or None, False
            return ProviderIdentity(
                subject=str(user["id"]),
                login=user.get("login"),
                email=email,
                email_verified=verified,
                name=user.get("name") or user.get("login"),
                **common,
            )
        if self.kind == "gitlab":
            user = await self._get_json(http, self._api() + "/user", "user", access)
            return ProviderIdentity(
                subject=str(user["id"]),
                login=user.get("username"),
                email=user.get("email"),
                email_verified=bool(user.get("email") and user.get("confirmed_at")),
                name=user.get("name") or user.get("username"),
                **common,
            )
        if self.kind == "gitea":
            user = await self._get_user(http, self._api() + "/user", "user", access, "id")
            return ProviderIdentity(
                subject=str(user["id"]),
                login=user.get("login"),
                email=user.get("email") or None,
                email_verified=False,  # see the module docstring
                name=user.get("full_name") or user.get("login"),
                **common,
            )
        if self.kind == "bitbucket-cloud":
            user = await self._get_user(http, self._api() + "/user", "user", access, "uuid")
            primary = await self._bitbucket_cloud_primary_email(http, access)
            login = user.get("username") or user.get("nickname")
            return ProviderIdentity(
                subject=str(user["uuid"]),
                login=login,
                email=(primary or {}).get("email"),
                email_verified=bool(primary and primary.get("is_confirmed") is True),
                name=user.get("display_name") or login,
                **common,
            )
        if self.kind == "bitbucket-server":
            r = await self._get(http, self._base() + "/plugins/servlet/applinks/whoami", "user", access, "text/plain")
            slug = r.text.strip()
            if not slug or len(slug) > 255 or "\n" in slug:
                raise ProviderError("identity", f"{self.name} did not say who you are (an anonymous token?)")
            user = await self._get_user(http, f"{self._api()}/users/{quote(slug, safe='')}", "user", access, "id")
            return ProviderIdentity(
                subject=str(user["id"]),
                login=user.get("name") or user.get("slug"),
                email=user.get("emailAddress") or None,
                email_verified=False,  # Bitbucket does not confirm addresses
                name=user.get("displayName") or user.get("name"),
                **common,
            )
        claims = await self._check_id_token(http, token.get("id_token"), nonce)
        ep = await self.endpoints(http)
        email, verified = _oidc_email(claims)
        if (email is None or "email_verified" not in claims) and ep.userinfo and access:
            info = await self._get_json(http, ep.userinfo, "userinfo", access)
            if isinstance(info, dict) and str(info.get("sub")) == str(claims["sub"]):
                claims = {**info, **claims}
                if email is None:  # the ID token names no address: userinfo's, with userinfo's verification
                    email, verified = _oidc_email(info)
                elif "email_verified" in info and _oidc_email(info)[0] == email:
                    verified = _oidc_email(info)[1]  # userinfo vouches for the same address
        return ProviderIdentity(
            subject=str(claims["sub"]),
            login=claims.get("preferred_username"),
            email=email,
            email_verified=verified,
            name=claims.get("name") or claims.get("preferred_username"),
            **common,
        )

    async def _bitbucket_cloud_primary_email(
        self, http: httpx.AsyncClient, access: str | None
    ) -> dict[str, Any] | None:
        """The primary entry of Bitbucket Cloud's ``/user/emails`` (pages followed on the API's host)."""
        url = self._api() + "/user/emails"
        api_host = httpx.URL(url).host
        for _ in range(MAX_EMAIL_PAGES):
            page = await self._get_json(http, url, "e-mail", access)
            values = page.get("values") if isinstance(page, dict) else None
            for e in values or ():
                if isinstance(e, dict) and e.get("is_primary") and isinstance(e.get("email"), str):
                    return e
            nxt = page.get("next") if isinstance(page, dict) else None
            if not isinstance(nxt, str) or httpx.URL(nxt).host != api_host:
                return None  # no further page, or one elsewhere: the token goes nowhere else
            url = nxt
        return None

    async def _check_id_token(self, http: httpx.AsyncClient, id_token: str | None, nonce: str | None) -> dict[str, Any]:
        from joserfc import jwt
        from joserfc.errors import JoseError

        if not id_token or not isinstance(id_token, str):
            raise ProviderError("identity", f"{self.name} sent no ID token")
        client_id, _ = self.credentials()
        ep = await self.endpoints(http)
        decoded = None
        for refresh in (False, True):
            keys = await self._jwks(http, refresh=refresh)
            try:
                decoded = jwt.decode(id_token, keys, algorithms=ID_TOKEN_ALGORITHMS)
                break
            except (JoseError, ValueError, KeyError, TypeError) as e:
                if refresh:
                    log.info("provider %s: ID token refused: %s", self.id, type(e).__name__)
                    raise ProviderError("identity", f"{self.name}'s ID token has no valid signature") from None
        assert decoded is not None  # the second attempt decodes or raises
        assert ep.issuer is not None  # OIDC kinds only, whose discovery names it (`_discovery`)
        claims: dict[str, Any] = decoded.claims
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY_S,
            iss={"essential": True, "value": ep.issuer},
            aud={"essential": True, "value": client_id},
            exp={"essential": True},
            iat={"essential": True},
            sub={"essential": True},
            nonce={"essential": True, "value": nonce or ""},
        )
        try:
            registry.validate(claims)
        except JoseError as e:
            log.info("provider %s: ID token refused: %s", self.id, getattr(e, "description", type(e).__name__))
            raise ProviderError(
                "identity",
                f"{self.name}'s ID token is not valid for this sign-in "
                f"({getattr(e, 'description', None) or type(e).__name__})",
            ) from None
        aud = claims.get("aud")
        if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != client_id:
            raise ProviderError("identity", f"{self.name}'s ID token was issued to another client")
        return claims


def _oidc_email(claims: Mapping[str, Any]) -> tuple[str | None, bool]:
    """(e-mail, verified) of one set of claims (an ID token's, or a userinfo answer): verified
    only when the same claims say ``email_verified: true`` of that address."""
    email = claims.get("email")
    if not isinstance(email, str) or not email.strip():
        return None, False
    return email, claims.get("email_verified") in (True, "true")


def build_providers(
    entries: Iterable[IdentityProvider] | None, environ: Mapping[str, str] | None = None
) -> dict[str, Provider]:
    """`Provider`s by id, in file order, from typed config entries: those with a flow (buttons,
    callbacks, linking). A gcp-iap entry has none: `codesearch.sso.iap.build_iap`."""
    return {e.id: Provider(e, environ) for e in entries or () if not e.is_proxy}
