"""Fake identity providers on 127.0.0.1, with the documented endpoints of each kind.

* `FakeGitHubOAuth`: ``GET /login/oauth/authorize`` (redirects back at once with a code: the user
  "consents"), ``POST /login/oauth/access_token``, ``GET /api/v3/user``, ``GET /api/v3/user/emails``
  (GitHub Enterprise Server layout);
* `FakeGitLabOAuth`: ``GET /oauth/authorize``, ``POST /oauth/token``, ``GET /api/v4/user``;
* `FakeOIDC`: ``GET /.well-known/openid-configuration``, ``GET /jwks`` (a real RSA key),
  ``GET /authorize``, ``POST /token`` (a signed ID token carrying the nonce), ``GET /userinfo``.

Every token endpoint checks the client id and secret (form fields or HTTP Basic), the
redirect URI, that the code is used once, and the PKCE verifier against the S256 challenge sent
to the authorize endpoint; `exchanges` records each exchange (``pkce_verified``…). The user who
"signs in" is `user` (set it between tests); `denied` makes the authorize endpoint answer
``error=access_denied``; `id_token_overrides` changes claims of the next ID tokens (wrong nonce,
audience, issuer, expiry …).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from urllib.parse import parse_qsl, urlencode, urlsplit

from tests.fakehosts.server import FakeServer, send


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


class _FakeOAuth(FakeServer):
    methods = ("GET", "POST")
    authorize_path = ""
    token_path = ""

    def __init__(self, client_id: str = "client-id", client_secret: str = "client-secret-value"):
        self.client_id, self.client_secret = client_id, client_secret
        self.user: dict = {}
        self.denied = False
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.exchanges: list[dict] = []
        self.authorizations: list[dict] = []
        super().__init__()

    def handle(self, h):
        url = urlsplit(h.path)
        query = dict(parse_qsl(url.query))
        self.requests.append((h.command, url.path, dict(h.headers)))
        if h.command == "GET" and url.path == self.authorize_path:
            return self._authorize(h, query)
        if h.command == "POST" and url.path == self.token_path:
            length = int(h.headers.get("Content-Length") or 0)
            return self._token(h, dict(parse_qsl(h.rfile.read(length).decode())))
        fault = self._fault(url.path)
        if fault:
            return send(h, fault[0], fault[2], {"Content-Type": "application/json"})
        token = (h.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        if token not in self.tokens:
            return send(h, 401, {"message": "Bad credentials"}, {"Content-Type": "application/json"})
        status, body = self.api(url.path, self.tokens[token])
        send(h, status, body, {"Content-Type": "application/json"})

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
        else:
            cid, secret = form.get("client_id"), form.get("client_secret")
        return cid == self.client_id and secret == self.client_secret

    def _token(self, h, form: dict):
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
        access = "at_" + secrets.token_urlsafe(16)
        self.tokens[access] = code["user"]
        body = {"access_token": access, "token_type": "bearer", "scope": q.get("scope", ""),
                "refresh_token": "rt_" + secrets.token_urlsafe(16), "expires_in": 7200}
        body.update(self.extra_token_fields(code))
        send(h, 200, body, {"Content-Type": "application/json"})

    def extra_token_fields(self, code: dict) -> dict:
        return {}

    def api(self, path: str, user: dict) -> tuple[int, object]:
        return 404, {"message": "Not Found"}


class FakeGitHubOAuth(_FakeOAuth):
    authorize_path = "/login/oauth/authorize"
    token_path = "/login/oauth/access_token"

    def api(self, path, user):
        if path == "/api/v3/user":
            return 200, {"id": user["id"], "login": user["login"], "name": user.get("name"), "email": None}
        if path == "/api/v3/user/emails":
            return 200, [{"email": user["email"], "primary": True, "verified": user.get("verified", True),
                          "visibility": "private"}]
        return 404, {"message": "Not Found"}


class FakeGitLabOAuth(_FakeOAuth):
    authorize_path = "/oauth/authorize"
    token_path = "/oauth/token"

    def api(self, path, user):
        if path == "/api/v4/user":
            return 200, {"id": user["id"], "username": user["login"], "name": user.get("name"), "email": user["email"],
                         "confirmed_at": "2024-01-01T00:00:00Z" if user.get("verified", True) else None}
        return 404, {"message": "404 Not Found"}


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
            return 200, {"sub": str(user["id"]), "email": user["email"], "email_verified": user.get("verified", True),
                         "name": user.get("name")}
        return 404, {"error": "not_found"}
