"""Fake identity providers on 127.0.0.1, with the documented endpoints of each kind.

* `FakeGitHubOAuth`: ``GET /login/oauth/authorize`` (redirects back at once with a code: the user
  "consents"), ``POST /login/oauth/access_token``, ``GET /api/v3/user``, ``GET /api/v3/user/emails``
  (GitHub Enterprise Server layout);
* `FakeGitLabOAuth`: ``GET /oauth/authorize``, ``POST /oauth/token``, ``GET /api/v4/user``;
* `FakeOIDC`: ``GET /.well-known/openid-configuration``, ``GET /jwks`` (a real RSA key),
  ``GET /authorize``, ``POST /token`` (a signed ID token carrying the nonce), ``GET /userinfo``;
* `FakeGiteaOAuth`: ``GET /login/oauth/authorize``, ``POST /login/oauth/access_token``,
  ``GET /api/v1/user``;
* `FakeBitbucketCloudOAuth`: ``GET /site/oauth2/authorize``, ``POST /site/oauth2/access_token``
  (client credentials in HTTP Basic only), ``GET /2.0/user``, ``GET /2.0/user/emails``;
* `FakeBitbucketServerOAuth`: ``GET /rest/oauth2/latest/authorize``,
  ``POST /rest/oauth2/latest/token``, ``GET /plugins/servlet/applinks/whoami`` (plain text),
  ``GET /rest/api/1.0/users/{slug}``;
* `FakeGiteaSSO`, `FakeBitbucketCloudSSO`, `FakeBitbucketServerSSO`: the REST fakes of
  `tests.fakehosts.gitea` / `.bitbucket` serving the same authorization server and user
  endpoints on their own address, for end-to-end permission syncing (see their section).

Every token endpoint checks the client id and secret (form fields or HTTP Basic), the
redirect URI, that the code is used once, and the PKCE verifier against the S256 challenge sent
to the authorize endpoint; `exchanges` records each exchange (``pkce_verified``…); refresh
tokens work once (rotated). The user who
"signs in" is `user` (set it between tests; ``verified: False`` makes its e-mail unverified, and
for GitHub ``public_email`` and ``emails`` set /user's e-mail and /user/emails); `denied` makes
the authorize endpoint answer ``error=access_denied``; `id_token_overrides` changes claims of
the next ID tokens (wrong nonce, audience, issuer, expiry …) and `userinfo_overrides` those of
userinfo (None removes a claim).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
import uuid
from urllib.parse import parse_qsl, urlencode, urlsplit

from tests.fakehosts.bitbucket import FakeBitbucketCloud, FakeBitbucketServer
from tests.fakehosts.gitea import FakeGitea
from tests.fakehosts.server import FakeServer, send


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


class OAuthEndpoints:
    """The authorization server of one provider kind, mixed into a `FakeServer`: a standalone fake
    (`_FakeOAuth`) or a fake code host (`FakeGiteaSSO` …), whose `handle` calls `oauth_handle` first.

    ``GET authorize_path`` redirects back at once (the user `user` "consents"); ``POST token_path``
    exchanges a code (``authorization_code``) or a refresh token (``refresh_token``; each one works
    once, as Gitea rotates them); `api` answers the user endpoints for the tokens issued here.
    `issue` turns the consenting `user` into what the user endpoints show (a fake code host
    completes it from its own users and lets its REST API accept the token as that user)."""

    authorize_path = ""
    token_path = ""
    #: how the token endpoint takes the client's credentials: ``any`` (form fields or HTTP Basic)
    #: or ``basic`` (HTTP Basic only, as Bitbucket Cloud documents it)
    client_auth = "any"

    def _init_oauth(self, client_id: str, client_secret: str) -> None:
        self.client_id, self.client_secret = client_id, client_secret
        self.user: dict = {}
        self.denied = False
        self.codes: dict[str, dict] = {}
        self.issued: dict[str, dict] = {}  # access token → the user it stands for
        self.refresh_tokens: dict[str, dict] = {}
        self.exchanges: list[dict] = []
        self.authorizations: list[dict] = []

    def oauth_handle(self, h) -> bool:
        """Answer `h` when it is for the authorization server or a user endpoint with a token issued
        here; False (nothing sent) for anything else."""
        url = urlsplit(h.path)
        if h.command == "GET" and url.path == self.authorize_path:
            self._authorize(h, dict(parse_qsl(url.query)))
            return True
        if h.command == "POST" and url.path == self.token_path:
            length = int(h.headers.get("Content-Length") or 0)
            self._token(h, dict(parse_qsl(h.rfile.read(length).decode())))
            return True
        token = (h.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        answer = self.api(url.path, self.issued[token]) if token in self.issued else None
        if answer is None:
            return False
        self._send_api(h, *answer)
        return True

    def _send_api(self, h, status: int, body) -> None:
        send(h, status, body, {"Content-Type": "text/plain;charset=UTF-8" if isinstance(body, bytes)
                               else "application/json"})

    def _authorize(self, h, q: dict):
        self.authorizations.append(q)
        back = q.get("redirect_uri", "")
        if q.get("client_id") != self.client_id or not back:
            return send(h, 400, b"unknown client", {"Content-Type": "text/plain"})
        if self.denied:
            params = {"error": "access_denied", "state": q.get("state", "")}
        else:
            code = secrets.token_urlsafe(16)
            self.codes[code] = {"q": q, "user": dict(self.user)}
            params = {"code": code, "state": q.get("state", "")}
        send(h, 302, b"", {"Location": back + ("&" if "?" in back else "?") + urlencode(params)})

    def _client_ok(self, h, form: dict) -> bool:
        auth = h.headers.get("Authorization") or ""
        if auth.startswith("Basic "):
            cid, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        elif self.client_auth == "basic":
            return False
        else:
            cid, secret = form.get("client_id"), form.get("client_secret")
        return cid == self.client_id and secret == self.client_secret

    def _token(self, h, form: dict):
        if form.get("grant_type") == "refresh_token":
            return self._refresh(h, form)
        code = self.codes.pop(form.get("code", ""), None)  # a code works once
        record = {"client_ok": self._client_ok(h, form), "code_ok": code is not None,
                  "verifier_sent": bool(form.get("code_verifier")), "pkce_verified": False}
        self.exchanges.append(record)
        if code is None or not record["client_ok"] or form.get("grant_type") != "authorization_code":
            return send(h, 400, {"error": "invalid_grant"}, {"Content-Type": "application/json"})
        q = code["q"]
        if form.get("redirect_uri") != q.get("redirect_uri"):
            return send(h, 400, {"error": "invalid_grant", "error_description": "redirect_uri"},
                        {"Content-Type": "application/json"})
        if q.get("code_challenge_method") != "S256" or s256(form.get("code_verifier", "")) != q.get("code_challenge"):
            return send(h, 400, {"error": "invalid_grant", "error_description": "PKCE"},
                        {"Content-Type": "application/json"})
        record["pkce_verified"] = True
        body = self._new_tokens(self.issue(code["user"]), q.get("scope", ""))
        body.update(self.extra_token_fields(code))
        send(h, 200, body, {"Content-Type": "application/json"})

    def _refresh(self, h, form: dict):
        held = self.refresh_tokens.pop(form.get("refresh_token", ""), None)  # rotated: works once
        self.exchanges.append({"refresh": True, "client_ok": self._client_ok(h, form), "code_ok": held is not None})
        if held is None or not self._client_ok(h, form):
            return send(h, 400, {"error": "invalid_grant"}, {"Content-Type": "application/json"})
        send(h, 200, self._new_tokens(held["user"], held["scope"]), {"Content-Type": "application/json"})

    def _new_tokens(self, user: dict, scope: str) -> dict:
        access, refresh = "at_" + secrets.token_urlsafe(16), "rt_" + secrets.token_urlsafe(16)
        self.issued[access] = user
        self.refresh_tokens[refresh] = {"user": user, "scope": scope}
        self.token_issued(access, user)
        return {"access_token": access, "token_type": "bearer", "scope": scope, "refresh_token": refresh,
                "expires_in": 7200}

    def issue(self, user: dict) -> dict:
        """What the user endpoints show of the consenting `user` (as given, here)."""
        return user

    def token_issued(self, access: str, user: dict) -> None:
        """A new access token of `user` (a fake code host lets its REST API accept it)."""

    def extra_token_fields(self, code: dict) -> dict:
        return {}

    def api(self, path: str, user: dict) -> tuple[int, object] | None:
        """The user endpoints: (status, body: JSON, or bytes as plain text); None: not one of them."""
        return None


class _FakeOAuth(OAuthEndpoints, FakeServer):
    methods = ("GET", "POST")

    def __init__(self, client_id: str = "client-id", client_secret: str = "client-secret-value"):
        self._init_oauth(client_id, client_secret)
        super().__init__()

    @property
    def tokens(self) -> dict[str, dict]:
        return self.issued

    def handle(self, h):
        url = urlsplit(h.path)
        self.requests.append((h.command, url.path, dict(h.headers)))
        if h.command == "GET" and url.path == self.authorize_path or h.command == "POST" and url.path == self.token_path:
            self.oauth_handle(h)
            return
        fault = self._fault(url.path)
        if fault:
            return send(h, fault[0], fault[2], {"Content-Type": "application/json"})
        token = (h.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        if token not in self.issued:
            return send(h, 401, {"message": "Bad credentials"}, {"Content-Type": "application/json"})
        answer = self.api(url.path, self.issued[token])
        self._send_api(h, *(answer or (404, {"message": "Not Found"})))


class FakeGitHubOAuth(_FakeOAuth):
    authorize_path = "/login/oauth/authorize"
    token_path = "/login/oauth/access_token"

    def api(self, path, user):
        if path == "/api/v3/user":  # the public e-mail: none unless the user set `public_email`
            return 200, {"id": user["id"], "login": user["login"], "name": user.get("name"),
                         "email": user.get("public_email")}
        if path == "/api/v3/user/emails":  # `emails` replaces the one primary entry
            return 200, user.get("emails", [{"email": user["email"], "primary": True,
                                             "verified": user.get("verified", True), "visibility": "private"}])
        return None


class FakeGitLabOAuth(_FakeOAuth):
    authorize_path = "/oauth/authorize"
    token_path = "/oauth/token"

    def api(self, path, user):
        if path == "/api/v4/user":
            return 200, {"id": user["id"], "username": user["login"], "name": user.get("name"), "email": user["email"],
                         "confirmed_at": "2024-01-01T00:00:00Z" if user.get("verified", True) else None}
        return None


class FakeOIDC(_FakeOAuth):
    """An OpenID Connect provider whose issuer is ``<base_url><issuer_path>``."""

    authorize_path = "/authorize"
    token_path = "/token"

    def __init__(self, *args, issuer_path: str = "", **kwargs):
        from cryptography.hazmat.primitives.asymmetric import rsa
        from joserfc.jwk import RSAKey

        self.issuer_path = issuer_path
        self.authorize_path = issuer_path + "/authorize"
        self.token_path = issuer_path + "/token"
        pem = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.key = RSAKey.import_key(pem)
        self.kid = "k1"
        self.id_token_overrides: dict = {}
        self.userinfo_overrides: dict = {}  # None values remove a claim
        self.sign_with = None  # another key: a forged signature
        super().__init__(*args, **kwargs)

    @property
    def issuer(self) -> str:
        return self.base_url + self.issuer_path

    def handle(self, h):
        path = urlsplit(h.path).path
        if h.command == "GET" and path == self.issuer_path + "/.well-known/openid-configuration":
            self.requests.append(("GET", path, dict(h.headers)))
            fault = self._fault(path)
            if fault:
                return send(h, fault[0], fault[2], {"Content-Type": "application/json"})
            i = self.issuer
            return send(h, 200, {"issuer": i, "authorization_endpoint": i + "/authorize", "token_endpoint": i + "/token",
                                 "userinfo_endpoint": i + "/userinfo", "jwks_uri": i + "/jwks",
                                 "response_types_supported": ["code"], "subject_types_supported": ["public"],
                                 "id_token_signing_alg_values_supported": ["RS256"],
                                 "code_challenge_methods_supported": ["S256"],
                                 "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"]},
                        {"Content-Type": "application/json"})
        if h.command == "GET" and path == self.issuer_path + "/jwks":
            self.requests.append(("GET", path, dict(h.headers)))
            public = self.key.as_dict(private=False)
            public.update(kid=self.kid, use="sig", alg="RS256")
            return send(h, 200, {"keys": [public]}, {"Content-Type": "application/json"})
        super().handle(h)

    def extra_token_fields(self, code: dict) -> dict:
        from joserfc import jwt

        q, user, now = code["q"], code["user"], int(time.time())
        claims = {"iss": self.issuer, "sub": str(user["id"]), "aud": self.client_id, "iat": now, "exp": now + 300,
                  "nonce": q.get("nonce"), "email": user["email"], "email_verified": user.get("verified", True),
                  "name": user.get("name"), "preferred_username": user["login"]}
        claims.update(self.id_token_overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        key = self.sign_with or self.key
        return {"id_token": jwt.encode({"alg": "RS256", "kid": self.kid}, claims, key)}

    def api(self, path, user):
        if path == self.issuer_path + "/userinfo":
            info = {"sub": str(user["id"]), "email": user["email"], "email_verified": user.get("verified", True),
                    "name": user.get("name")}
            info.update(self.userinfo_overrides)
            return 200, {k: v for k, v in info.items() if v is not None}
        return None


# ------------------------------------------------------------------ Gitea and Bitbucket

def cloud_uuid(login: str) -> str:
    """A Bitbucket Cloud user's ``uuid`` (braces and all), as `FakeBitbucketCloud.user_json` makes it."""
    return "{" + str(uuid.uuid5(uuid.NAMESPACE_OID, login)) + "}"


class GiteaOAuth(OAuthEndpoints):
    """Gitea: ``/login/oauth/authorize``, ``/login/oauth/access_token``, ``GET /api/v1/user``."""

    authorize_path = "/login/oauth/authorize"
    token_path = "/login/oauth/access_token"

    def api(self, path, user):
        if path == "/api/v1/user":
            return 200, {"id": user["id"], "login": user["login"], "login_name": "", "source_id": 0,
                         "full_name": user.get("name") or "", "email": user["email"], "language": "en-US",
                         "is_admin": False, "active": True, "prohibit_login": False, "restricted": False,
                         "visibility": "public", "username": user["login"]}
        return None


class BitbucketCloudOAuth(OAuthEndpoints):
    """Bitbucket Cloud: ``/site/oauth2/authorize``, ``/site/oauth2/access_token`` (client credentials
    in HTTP Basic only), ``GET /2.0/user`` and ``GET /2.0/user/emails`` (a page with an unconfirmed
    secondary address before the primary one, confirmed unless ``verified`` is false). Users are
    named by ``uuid`` (default: `cloud_uuid` of their login)."""

    authorize_path = "/site/oauth2/authorize"
    token_path = "/site/oauth2/access_token"
    client_auth = "basic"

    def api(self, path, user):
        uid = user.get("uuid") or cloud_uuid(user["login"])
        if path == "/2.0/user":
            return 200, {"type": "user", "uuid": uid, "account_id": f"712020:{uid.strip('{}')}",
                         "nickname": user["login"], "username": user["login"],
                         "display_name": user.get("name") or user["login"], "has_2fa_enabled": None,
                         "links": {"html": {"href": f"https://bitbucket.org/{uid}/"}}}
        if path == "/2.0/user/emails":
            values = [{"type": "email", "email": "other-" + user["email"], "is_primary": False, "is_confirmed": False},
                      {"type": "email", "email": user["email"], "is_primary": True,
                       "is_confirmed": user.get("verified", True)}]
            return 200, {"pagelen": 10, "size": len(values), "page": 1, "values": values}
        return None


class BitbucketServerOAuth(OAuthEndpoints):
    """Bitbucket Data Center 8+: ``/rest/oauth2/latest/authorize``, ``/rest/oauth2/latest/token``,
    ``GET /plugins/servlet/applinks/whoami`` (the user's slug, plain text) and
    ``GET /rest/api/1.0/users/{slug}``."""

    authorize_path = "/rest/oauth2/latest/authorize"
    token_path = "/rest/oauth2/latest/token"

    def api(self, path, user):
        slug = user.get("slug") or user["login"].lower()
        if path == "/plugins/servlet/applinks/whoami":
            return 200, slug.encode()
        if path == f"/rest/api/1.0/users/{slug}":
            return 200, {"name": user["login"], "emailAddress": user["email"], "active": True,
                         "displayName": user.get("name") or user["login"], "id": user["id"], "slug": slug,
                         "type": "NORMAL"}
        return None


class FakeGiteaOAuth(GiteaOAuth, _FakeOAuth):
    pass


class FakeBitbucketCloudOAuth(BitbucketCloudOAuth, _FakeOAuth):
    @property
    def api_url(self) -> str:
        return self.base_url + "/2.0"


class FakeBitbucketServerOAuth(BitbucketServerOAuth, _FakeOAuth):
    pass


# ------------------------------------------------------------------ on the fake code hosts
#
# For end-to-end permission syncing the provider and the REST API must be one address (the host
# key of a linked account and of the connection are both made from it), so these are the REST
# fakes of `tests.fakehosts.gitea` / `.bitbucket` with the kind's authorization server mixed in:
# `user` names a login of the host ({"login": "dave"}); the token issued for it is the host's
# token of that user (its REST API answers it as that user), and the user endpoints show the
# host's own id / uuid of that user.

class FakeGiteaSSO(GiteaOAuth, FakeGitea):
    def __init__(self, *args, client_id: str = "client-id", client_secret: str = "client-secret-value", **kwargs):
        self._init_oauth(client_id, client_secret)
        FakeGitea.__init__(self, *args, **kwargs)

    def handle(self, h):
        if not self.oauth_handle(h):
            FakeGitea.handle(self, h)

    def issue(self, user):
        login = user["login"]
        self.add_user(login)
        return {"id": self.user_id(login), "login": login, "name": login.title(), "email": f"{login.lower()}@example.com"}

    def token_issued(self, access, user):
        self.add_token(user["login"], access)


class FakeBitbucketCloudSSO(BitbucketCloudOAuth, FakeBitbucketCloud):
    methods = ("GET", "POST")

    def __init__(self, *args, client_id: str = "client-id", client_secret: str = "client-secret-value", **kwargs):
        self._init_oauth(client_id, client_secret)
        FakeBitbucketCloud.__init__(self, *args, **kwargs)

    def handle(self, h):
        if not self.oauth_handle(h):
            FakeBitbucketCloud.handle(self, h)

    def issue(self, user):
        login = user["login"]
        return {"uuid": self.user_uuid(login), "login": login, "name": login.title(), "email": f"{login}@example.com"}

    def token_issued(self, access, user):
        self.tokens[access] = user["login"]


class FakeBitbucketServerSSO(BitbucketServerOAuth, FakeBitbucketServer):
    methods = ("GET", "POST")

    def __init__(self, *args, client_id: str = "client-id", client_secret: str = "client-secret-value", **kwargs):
        self._init_oauth(client_id, client_secret)
        FakeBitbucketServer.__init__(self, *args, **kwargs)

    def handle(self, h):
        if not self.oauth_handle(h):
            FakeBitbucketServer.handle(self, h)

    def issue(self, user):
        u = self.user_json(user["login"])
        return {"id": u["id"], "login": u["name"], "slug": u["slug"], "name": u["displayName"],
                "email": u["emailAddress"]}

    def token_issued(self, access, user):
        self.tokens[access] = user["login"]
