"""Google Cloud IAP (the ``gcp-iap`` identity provider): the user the proxy in front vouches for.

Behind Identity-Aware Proxy every request that reaches the service carries
``x-goog-iap-jwt-assertion``, a JWT that Google signs with ES256 (P-256 keys published as a JWK
set at `GOOGLE_JWKS_URL`). There is no flow of ours: IAP signed the person in before the request
got here, so each request is signed in by its own assertion (`codesearch.web.iap` applies this to
every request). An assertion is accepted when

* it is a compact JWS whose header says ``alg: ES256`` (anything else, ``none`` included, is
  refused before any key is looked at) and names a key id (``kid``) of Google's key set;
* its signature verifies with that key;
* ``iss`` is ``https://cloud.google.com/iap``, ``aud`` the entry's `audience`, ``exp`` in the
  future and ``iat`` not in the future (`LEEWAY_S` of clock skew either way);
* it names a subject (``sub``, e.g. ``accounts.google.com:1234``) and an ``email``.

Anything else is `IapRefused`, whose message says what is wrong and never holds the token.

Keys (`IapKeys`). The key set is fetched with httpx and kept `KEYS_TTL_S`; a key id not in it
re-reads it, at most once per `REFRESH_INTERVAL_S` (Google rotates its keys; a flood of made-up
key ids must not become a flood of requests to Google). When the set cannot be fetched, the last
one read is used; without any, the assertion cannot be checked: `IapUnavailable` (503), never a
sign-in and never anonymous. ``CODESEARCH_GCP_IAP_JWKS_URL`` replaces Google's address (tests
serve their own key set; nothing else should need it).

Users (`IapSignIn.sign_in`). The linked identity ``(provider id, sub)`` names the user; the first
time a subject is seen, `codesearch.sso.accounts.sign_in` runs with the e-mail counted as
verified (IAP let the person in under that address): an existing user with the address gets the
identity linked, else a new user is signed up under the usual rules (the first user is OWNER,
``REQUIRE_APPROVAL_NEW_MEMBERS`` makes MEMBERs wait). After that a request costs three reads
(linked identity, user, pending approval) and no write.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from codesearch.errors import ConfigError
from codesearch.sso.flow import FlowError
from codesearch.sso.providers import Provider, ProviderIdentity

if TYPE_CHECKING:
    from collections.abc import Iterable

    from joserfc.jwk import ECKey

    from codesearch.config.models import IdentityProvider
    from codesearch.sso.accounts import Outcome
    from codesearch.store import Store
    from codesearch.store.models import User

log = logging.getLogger(__name__)

ASSERTION_HEADER = "x-goog-iap-jwt-assertion"
ISSUER = "https://cloud.google.com/iap"
ALGORITHM = "ES256"
GOOGLE_JWKS_URL = "https://www.gstatic.com/iap/verify/public_key-jwk"
JWKS_URL_ENV = "CODESEARCH_GCP_IAP_JWKS_URL"
#: Seconds of clock skew allowed on ``exp`` and ``iat``.
LEEWAY_S = 60
#: How long a fetched key set is used before it is read again.
KEYS_TTL_S = 3600.0
#: An unknown key id re-reads the key set at most once per this many seconds.
REFRESH_INTERVAL_S = 30.0
HTTP_TIMEOUT_S = 10.0
#: Longer assertions are refused unread (Google's are about 1 KB).
MAX_ASSERTION_CHARS = 8192
MAX_JWKS_BYTES = 256 * 1024
MAX_EMAIL_CHARS = 320
MAX_SUBJECT_CHARS = 255

_WHAT = f"Google Cloud IAP's signed header ({ASSERTION_HEADER})"


class IapRefused(Exception):
    """The request's assertion does not check out (401). The message says why; no token in it."""

    def __init__(self, why: str):
        super().__init__(f"{_WHAT} was refused: {why}")
        self.why = why


class IapUnavailable(Exception):
    """The assertion cannot be checked now (503): Google's keys cannot be read, or the entry's
    audience cannot be resolved. Nobody is signed in meanwhile."""


def jwks_url(environ: Mapping[str, str] | None = None) -> str:
    """``CODESEARCH_GCP_IAP_JWKS_URL``, else Google's key set."""
    environ = os.environ if environ is None else environ
    return (environ.get(JWKS_URL_ENV) or "").strip() or GOOGLE_JWKS_URL


@dataclass(frozen=True)
class IapClaims:
    """Who a valid assertion names."""

    subject: str
    email: str
    name: str | None = None


class IapKeys:
    """Google's IAP public keys by key id, cached (see the module docstring). Thread-safe."""

    def __init__(
        self,
        url: str,
        *,
        ttl_s: float = KEYS_TTL_S,
        refresh_interval_s: float = REFRESH_INTERVAL_S,
        timeout_s: float = HTTP_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.url = url
        self.ttl_s, self.refresh_interval_s, self.timeout_s = ttl_s, refresh_interval_s, timeout_s
        self._clock = clock
        self._keys: dict[str, ECKey] | None = None
        self._fetched_at = float("-inf")
        self._failed: tuple[float, str] | None = None  # when a fetch without any key set to fall back on failed, why
        self._lock = threading.Lock()
        #: how many times the key set was requested (what the refresh bound is about)
        self.fetches = 0

    def key(self, kid: str) -> ECKey | None:
        """The key `kid`, or None when Google's set (read again if allowed) does not have it."""
        with self._lock:
            now = self._clock()
            age = now - self._fetched_at
            if self._keys is None or age >= self.ttl_s or (kid not in self._keys and age >= self.refresh_interval_s):
                self._refresh(now)
            assert self._keys is not None  # `_refresh` reads a key set or raises
            return self._keys.get(kid)

    def _refresh(self, now: float) -> None:
        if self._keys is None and self._failed is not None and now - self._failed[0] < self.refresh_interval_s:
            raise IapUnavailable(self._failed[1])  # asked again too soon: the same answer, no request
        try:
            keys = self._fetch()
        except IapUnavailable as e:
            if self._keys is None:
                self._failed = (now, str(e))
                raise
            log.warning("gcp-iap: the key set could not be read again; the last one read is used")
            self._fetched_at = now  # not again before the refresh interval
            return
        self._keys, self._fetched_at, self._failed = keys, now, None

    def _fetch(self) -> dict[str, ECKey]:
        from joserfc.jwk import ECKey

        self.fetches += 1
        try:
            with (
                httpx.Client(timeout=self.timeout_s, follow_redirects=False) as http,
                http.stream("GET", self.url, headers={"Accept": "application/json"}) as r,
            ):
                if r.status_code != 200:
                    raise IapUnavailable(f"Google Cloud IAP's key set answered HTTP {r.status_code} ({self.url})")
                body = b""
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) > MAX_JWKS_BYTES:
                        raise IapUnavailable(f"Google Cloud IAP's key set is larger than {MAX_JWKS_BYTES} bytes")
        except httpx.HTTPError as e:
            raise IapUnavailable(
                f"Google Cloud IAP's key set could not be read ({type(e).__name__}, {self.url})"
            ) from None
        try:
            entries = json.loads(body)["keys"]
        except (ValueError, KeyError, TypeError):
            raise IapUnavailable(f"Google Cloud IAP's key set is not a JWK set ({self.url})") from None
        keys: dict[str, ECKey] = {}
        for entry in entries if isinstance(entries, list) else ():
            if not (
                isinstance(entry, dict)
                and entry.get("kty") == "EC"
                and entry.get("crv") == "P-256"
                and isinstance(entry.get("kid"), str)
                and entry.get("use", "sig") == "sig"
            ):
                continue  # IAP signs with P-256 only: anything else could never verify an ES256 signature
            try:
                keys.setdefault(entry["kid"], ECKey.import_key({k: v for k, v in entry.items() if k != "d"}))
            except Exception:  # noqa: BLE001 - one malformed key does not spoil the others
                log.warning("gcp-iap: a key of the key set could not be read; it is skipped")
        if not keys:
            raise IapUnavailable(f"Google Cloud IAP's key set holds no P-256 key ({self.url})")
        return keys


def _b64json(segment: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


class IapVerifier:
    """Checks assertions against the keys and one audience (see the module docstring)."""

    def __init__(
        self,
        keys: IapKeys,
        audience: Callable[[], str],
        *,
        leeway_s: int = LEEWAY_S,
        now: Callable[[], float] = time.time,
    ):
        self.keys = keys
        self._audience = audience
        self.leeway_s = leeway_s
        self._now = now

    def verify(self, assertion: str) -> IapClaims:
        from joserfc import jwt
        from joserfc.errors import ClaimError, ExpiredTokenError, JoseError, MissingClaimError

        if not assertion or len(assertion) > MAX_ASSERTION_CHARS:
            raise IapRefused(f"it is longer than {MAX_ASSERTION_CHARS} characters" if assertion else "it is empty")
        parts = assertion.split(".")
        if len(parts) != 3:
            raise IapRefused("it is not a signed JWT (three dot-separated parts)")
        try:
            header = _b64json(parts[0])
        except (ValueError, TypeError):
            raise IapRefused("its header is not base64url-encoded JSON") from None
        if not isinstance(header, dict):
            raise IapRefused("its header is not a JSON object")
        alg = header.get("alg")
        if alg != ALGORITHM:
            if isinstance(alg, str) and alg.lower() == "none":
                raise IapRefused("it is unsigned (alg none); IAP signs with ES256")
            raise IapRefused(f"it is not signed with {ALGORITHM}, the algorithm IAP uses")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise IapRefused("its header names no key (kid)")
        audience = self._audience()
        key = self.keys.key(kid)
        if key is None:
            raise IapRefused("it is signed with a key that is not one of Google Cloud IAP's")
        try:
            token = jwt.decode(assertion, key, algorithms=[ALGORITHM])
        except JoseError as e:
            what = (
                "its signature does not verify"
                if type(e).__name__ == "BadSignatureError"
                else (f"it cannot be read ({type(e).__name__})")
            )
            raise IapRefused(what) from None
        except (ValueError, TypeError):
            raise IapRefused("it cannot be read") from None
        claims = token.claims
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self._now()),
            leeway=self.leeway_s,
            iss={"essential": True, "value": ISSUER},
            aud={"essential": True, "value": audience},
            exp={"essential": True},
            iat={"essential": True},
            sub={"essential": True},
            email={"essential": True},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise IapRefused("it has expired (exp)") from None
        except MissingClaimError as e:
            raise IapRefused(f"it lacks the claim(s) {e.claim}") from None
        except ClaimError as e:
            raise IapRefused(_claim_problem(e.claim)) from None
        subject, email = claims["sub"], claims["email"]
        if not isinstance(subject, str) or len(subject) > MAX_SUBJECT_CHARS:
            raise IapRefused("its subject (sub) is not a string of at most 255 characters")
        if (
            not isinstance(email, str)
            or len(email) > MAX_EMAIL_CHARS
            or email.count("@") != 1
            or any(ch.isspace() or ord(ch) < 0x20 for ch in email)
            or email.startswith("@")
            or email.endswith("@")
        ):
            raise IapRefused("its email claim is not an e-mail address")
        name = claims.get("name")
        return IapClaims(
            subject=subject,
            email=email.strip().lower(),
            name=name[:255] if isinstance(name, str) and name.strip() else None,
        )


def _claim_problem(claim: str) -> str:
    return {
        "iss": f"it was not issued by Google Cloud IAP (iss is not {ISSUER})",
        "aud": "it is meant for another application (aud is not this server's configured audience)",
        "iat": "it was issued in the future (iat)",
        "exp": "its expiry (exp) is not a time",
        "sub": "its subject (sub) is not valid",
        "email": "its email claim is not valid",
    }.get(claim, f"its claim {claim} is not valid")


class IapSignIn:
    """The config's gcp-iap entry at work: checks a request's assertion (`verify`) and finds or
    signs up its user (`sign_in`). `keys` defaults to `jwks_url(environ)`'s key set."""

    def __init__(self, config: IdentityProvider, environ: Mapping[str, str] | None = None, keys: IapKeys | None = None):
        self.config = config
        self.environ = os.environ if environ is None else environ
        #: what `accounts.sign_in` links identities under (id, kind, name; no host, no tokens)
        self.provider = Provider(config, self.environ)
        self.keys = keys or IapKeys(jwks_url(self.environ))
        self._audience: str | None = None
        self.verifier = IapVerifier(self.keys, self.audience)

    @property
    def id(self) -> str:
        return self.config.id

    def audience(self) -> str:
        """The entry's audience, resolved once (`IapUnavailable` names the variable, never a value)."""
        if self._audience is None:
            from codesearch.config.loader import resolve_provider_token

            try:
                value = resolve_provider_token(
                    self.config.audience, provider=self.config, field="audience", environ=self.environ
                ).strip()
            except ConfigError as e:
                raise IapUnavailable(f"the gcp-iap identity provider is not configured correctly: {e}") from None
            if not value:
                raise IapUnavailable("the gcp-iap identity provider's audience is empty")
            self._audience = value
        return self._audience

    def verify(self, assertion: str) -> IapClaims:
        return self.verifier.verify(assertion)

    def sign_in(self, store: Store, claims: IapClaims, *, require_approval: bool) -> Outcome:
        """The `accounts.Outcome` of a verified assertion (see the module docstring); `FlowError`
        when the identity cannot sign in (e.g. an invite-only rule of `Store.sign_up`)."""
        from codesearch.sso import accounts
        from codesearch.store import NotFound

        found = store.find_linked_account(self.provider.id, claims.subject)
        if found is not None:
            try:
                user = store.get_user(found.user_id)
            except NotFound:
                user = None
            if user is not None:
                return accounts.Outcome(user, found, pending=store.is_pending(user.id))
        who = ProviderIdentity(
            subject=claims.subject,
            login=claims.email,
            email=claims.email,
            email_verified=True,
            name=claims.name,
            access_token=None,
            refresh_token=None,
            expires_at=None,
            scope=None,
        )
        try:
            return accounts.sign_in(store, self.provider, who, require_approval=require_approval)
        except FlowError as e:
            if e.status != 409:
                raise
            # Two first requests of one person at once (a page and its API calls): one signed up,
            # the other found the address taken; now the identity or the address is there.
            return accounts.sign_in(store, self.provider, who, require_approval=require_approval)

    def csrf_token(self, store: Store, user: User, claims: IapClaims) -> str:
        """The CSRF token of a user IAP signed in (forms, ``X-CSRF-Token``): stateless, bound to the
        user and subject, keyed by the sign-in secret (`Store.auth_key`)."""
        key = store.auth_key("gcp-iap csrf")
        return hmac.new(key, f"{self.provider.id}\0{claims.subject}\0{user.id}".encode(), hashlib.sha256).hexdigest()


def build_iap(entries: Iterable[IdentityProvider] | None, environ: Mapping[str, str] | None = None) -> IapSignIn | None:
    """The `IapSignIn` of the config's gcp-iap entry (the loader keeps only the first), or None."""
    for e in entries or ():
        if getattr(e, "provider", None) == "gcp-iap":
            return IapSignIn(e, environ)
    return None
