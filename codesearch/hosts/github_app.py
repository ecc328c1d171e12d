"""GitHub App authentication: the config's `apps`, installation tokens, and whom they are for.

A GitHub App (the config's ``apps`` entries of ``type: "github"``: its ``id``, its ``privateKey``
as a token reference, its ``deploymentHostname``, ``github.com`` by default) authenticates as
itself with a JWT it signs (RS256 with the private key; ``iss`` the app id, ``iat`` 60 s in the
past against clock drift, ``exp`` 9 minutes later: GitHub refuses more than 10). With that JWT it
lists its installations (``GET /app/installations``: one per organization or user account that
installed it) and asks for an installation's access token (``POST
/app/installations/{id}/access_tokens``: a token and its ``expires_at``, one hour on GitHub).
The installation token then reads that account's repositories through the REST API (``GET
/installation/repositories``: the repositories the installation was granted) and clones them
over HTTPS as user ``x-access-token``.

Which account gets which token follows Sourcebot: an org, user or repository owner of a
`github` connection whose host name is an app's ``deploymentHostname`` is read with the token
of that app's installation on the account; an owner no app is installed on is read with the
connection's own token (or anonymously), and the listing says so in a warning.

The config's apps ride along in each matching connection's stored config under `APPS_KEY`
(`attach_apps`): references only, never a key, so the key is read where it is used, and a change
of the apps is a change of the connection (listed again). Tokens are kept per process in
`TOKENS` and asked for again `REFRESH_MARGIN_S` before they expire, so a long sync or an index
job never presents an expired one; an app's installations are listed again after
`INSTALLATIONS_TTL_S` (an app just installed on a new org is seen within that time).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from codesearch.errors import HostAuthError, HostError
from codesearch.hosts.http import HostHttp, next_link

#: The key of a github connection's stored config that carries the config's matching apps.
APPS_KEY = "#githubApps"
DEFAULT_HOSTNAME = "github.com"
#: An installation token is replaced this long before its ``expires_at``.
REFRESH_MARGIN_S = 300.0
#: How long an app's list of installations is trusted.
INSTALLATIONS_TTL_S = 300.0
#: GitHub refuses app JWTs that live longer than 10 minutes; 60 s back-dated against clock drift.
JWT_BACKDATE_S = 60
JWT_LIFETIME_S = 540
_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "codesearch"}


def connection_hostname(conn: Mapping[str, Any]) -> str:
    """The host name of a github connection's `url` (github.com by default), lower-cased."""
    return (urlsplit(conn.get("url") or "https://github.com").hostname or "").lower()


def attach_apps(conn: Mapping[str, Any], apps: list[Mapping[str, Any]] | None) -> dict[str, Any]:
    """`conn` (a connection's config) as it is stored: a github connection gets, under `APPS_KEY`,
    the github apps whose ``deploymentHostname`` is its host name (none: `conn` unchanged)."""
    out = dict(conn)
    if conn.get("type") != "github":
        return out
    host = connection_hostname(conn)
    mine = [
        {"id": str(a["id"]), "privateKey": a["privateKey"], "deploymentHostname": host}
        for a in apps or ()
        if a.get("type") == "github" and str(a.get("deploymentHostname") or DEFAULT_HOSTNAME).lower() == host
    ]
    if mine:
        out[APPS_KEY] = mine
    return out


def _read_private_key(app: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    from codesearch.config.tokens import resolve_reference

    pem = resolve_reference(
        app["privateKey"], source="config", path=f"apps (GitHub App {app['id']}).privateKey", environ=environ
    )
    if "\n" not in pem and "\\n" in pem:  # a PEM pasted into one line of an environment file
        pem = pem.replace("\\n", "\n")
    return pem


def app_jwt(app_id: str, pem: str, now: float) -> str:
    """The JWT app `app_id` authenticates with, signed with its private key `pem` (RS256)."""
    from joserfc import jwt
    from joserfc.jwk import RSAKey

    try:
        key = RSAKey.import_key(pem)
    except ValueError:
        raise HostAuthError(f"GitHub App {app_id}: its privateKey is not an RSA private key in PEM form") from None
    if not key.is_private:
        raise HostAuthError(f"GitHub App {app_id}: its privateKey is a public key; use the app's private key")
    claims = {"iss": app_id, "iat": int(now) - JWT_BACKDATE_S, "exp": int(now) + JWT_LIFETIME_S}
    return jwt.encode({"alg": "RS256", "typ": "JWT"}, claims, key)


def _expiry(value: Any, now: float) -> float:
    """Epoch seconds of an ``expires_at`` (ISO 8601); an hour from `now` when GitHub gives none."""
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return now + 3600.0


@dataclass(frozen=True)
class Installation:
    app_id: str
    id: int
    account: str  # the account's login as GitHub spells it


class InstallationTokens:
    """Installations and their tokens, per process (see the module docstring); thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self._lock = threading.Lock()
        self._installations: dict[tuple[str, str], tuple[float, dict[str, Installation]]] = {}
        self._tokens: dict[tuple[str, str, int], tuple[str, float]] = {}

    def clear(self) -> None:
        with self._lock:
            self._installations.clear()
            self._tokens.clear()

    def installation(
        self, api: str, apps: list[Mapping[str, Any]], owner: str, http: HostHttp, environ: Mapping[str, str]
    ) -> Installation | None:
        """The installation of one of `apps` on account `owner` at `api`, or None."""
        for app in apps:
            found = self._installations_of(api, app, http, environ).get(owner.lower())
            if found is not None:
                return found
        return None

    def token(
        self, api: str, app: Mapping[str, Any], inst: Installation, http: HostHttp, env: Mapping[str, str]
    ) -> str:
        """A token of installation `inst` valid for at least `REFRESH_MARGIN_S` more."""
        key = (api, inst.app_id, inst.id)
        now = self.clock()
        with self._lock:
            cached = self._tokens.get(key)
        if cached is not None and cached[1] - now > REFRESH_MARGIN_S:
            return cached[0]
        body = http.post_json(f"{api}/app/installations/{inst.id}/access_tokens", headers=self._app_headers(app, env))
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise HostError(f"{api}: GitHub App {inst.app_id} got no token for its installation on {inst.account}")
        with self._lock:
            self._tokens[key] = (token, _expiry(body.get("expires_at"), now))
        return token

    def token_for_owner(
        self, api: str, apps: list[Mapping[str, Any]], owner: str, http: HostHttp, environ: Mapping[str, str]
    ) -> str | None:
        """The installation token for `owner`'s repositories, or None when no app is installed there."""
        inst = self.installation(api, apps, owner, http, environ)
        if inst is None:
            return None
        app = next(a for a in apps if str(a["id"]) == inst.app_id)
        return self.token(api, app, inst, http, environ)

    def _app_headers(self, app: Mapping[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
        # the host checks the JWT's times against its clock: the wall clock, not `clock`
        jwt = app_jwt(str(app["id"]), _read_private_key(app, environ), time.time())
        return {**_HEADERS, "Authorization": f"Bearer {jwt}"}

    def _installations_of(
        self, api: str, app: Mapping[str, Any], http: HostHttp, environ: Mapping[str, str]
    ) -> dict[str, Installation]:
        key = (api, str(app["id"]))
        now = self.clock()
        with self._lock:
            cached = self._installations.get(key)
        if cached is not None and now - cached[0] < INSTALLATIONS_TTL_S:
            return cached[1]
        headers = self._app_headers(app, environ)
        found: dict[str, Installation] = {}
        url: str | None = f"{api}/app/installations"
        params: dict[str, Any] | None = {"per_page": 100}
        while url:
            try:
                r = http.get(url, params=params, headers=headers)
            except HostAuthError as e:
                raise HostAuthError(
                    f"GitHub App {app['id']} at {api}: the app's JWT was refused ({e.status}); check the app id "
                    "and that privateKey is this app's key",
                    url=e.url,
                    status=e.status,
                ) from None
            body = r.json()
            for item in body if isinstance(body, list) else ():
                login = (item.get("account") or {}).get("login") if isinstance(item, dict) else None
                if login and isinstance(item.get("id"), int):
                    found[login.lower()] = Installation(str(app["id"]), item["id"], login)
            url, params = next_link(r), None
        with self._lock:
            self._installations[key] = (now, found)
        return found


#: This process's installations and tokens (the adapters' and the indexers').
TOKENS = InstallationTokens()


def apps_of(conn: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The apps stored with a connection's config (`attach_apps`)."""
    apps = conn.get(APPS_KEY)
    return list(apps) if isinstance(apps, list) else []


def clone_token(
    conn: Mapping[str, Any], api: str, owner: str, *, environ: Mapping[str, str] | None = None
) -> str | None:
    """The installation token to clone `owner`'s repositories of github connection `conn` with,
    or None (no app, or none installed on `owner`): then the connection's own token is used."""
    apps = apps_of(conn)
    if not apps or not owner:
        return None
    with HostHttp() as http:
        return TOKENS.token_for_owner(api, apps, owner, http, os.environ if environ is None else environ)
