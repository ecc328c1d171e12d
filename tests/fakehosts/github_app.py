"""A fake GitHub Enterprise Server that also speaks GitHub's App endpoints, with GitHub's rules.

On top of `FakeGitHub` (the REST API a personal token reads):

* app authentication: ``Authorization: Bearer <JWT>``, an RS256 JWT verified with the app's
  *public* key; ``iss`` must be the app id, ``exp`` in the future and at most 10 minutes after
  ``iat``, ``iat`` not in the future (60 s of drift allowed). Anything else is 401 "A JSON web
  token could not be decoded" (GitHub's words), as is a JWT on an installation endpoint;
* ``GET /app/installations`` (paged, ``Link``), one installation per account (`install`);
* ``POST /app/installations/{id}/access_tokens``: 201 with ``token`` (``ghs_…``) and
  ``expires_at`` (`token_ttl_s` from now, an hour by default), ``permissions`` and
  ``repository_selection``; 404 for an unknown installation;
* installation tokens: ``GET /installation/repositories`` (``{"total_count", "repositories"}``,
  paged with ``Link``: the repositories granted, private ones included), ``GET /repos/{o}/{r}``
  (granted ones only, else 404); ``GET /user`` is 403 "Resource not accessible by integration"
  as on GitHub; an expired token (`expire_tokens`, or past its ``expires_at``) is 401 "Bad
  credentials" on every endpoint and is refused by the git server too;
* the git server (a `tests.githttp.GitHttpServer` with ``users`` set) accepts exactly the
  installation tokens still valid, as ``x-access-token:<token>``, plus what the test adds.
"""

from __future__ import annotations

import secrets
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, urlencode, urlsplit

from tests.fakehosts.github import API, DOCS, FakeGitHub

BAD_JWT = {"message": "A JSON web token could not be decoded", "documentation_url": DOCS, "status": "401"}
BAD_CREDENTIALS = {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"}


class FakeGitHubApp(FakeGitHub):
    def __init__(self, app_id: str, public_key_pem: bytes | str, *, token_ttl_s: float = 3600, **kw):
        super().__init__(**kw)
        from joserfc.jwk import RSAKey

        self.app_id = app_id
        self.public_key = RSAKey.import_key(public_key_pem)
        self.token_ttl_s = token_ttl_s
        self.installations: dict[int, dict] = {}  # id -> {"account": login, "repos": None (all) | {full names}}
        self.installation_tokens: dict[str, dict] = {}  # token -> {"installation": id, "expires": epoch}
        self.jwt_claims: list[dict] = []  # the claims of every JWT accepted

    def install(self, account: str, repos: tuple[str, ...] | None = None) -> int:
        """Install the app on `account` (an org or user), on all its repositories or on `repos` (names)."""
        login = self.owners[account.lower()]["login"]
        inst_id = self._id()
        grant = None if repos is None else {f"{login}/{r}".lower() for r in repos}
        self.installations[inst_id] = {"account": login, "repos": grant}
        return inst_id

    def expire_tokens(self) -> None:
        """Every installation token issued so far expires now (the git server refuses them too)."""
        for tok, rec in self.installation_tokens.items():
            rec["expires"] = 0
            if self.git is not None and self.git.users is not None:
                self.git.users.discard(("x-access-token", tok))

    def tokens_issued(self) -> int:
        return len(self.installation_tokens)

    # -- serving ----------------------------------------------------------------------------

    def _answer(self, req: BaseHTTPRequestHandler):
        split = urlsplit(req.path)
        path = split.path[len(API):] if split.path.startswith(API + "/") else ""
        scheme, _, value = req.headers.get("Authorization", "").partition(" ")
        value = value.strip()
        if path.startswith("/app/") or path == "/app":
            self.requests.append((req.command, req.path, dict(req.headers)))
            if scheme.lower() != "bearer" or not self._jwt_ok(value):
                return 401, {}, BAD_JWT
            return self._app_route(req.command, path, dict(parse_qsl(split.query)))
        if value in self.installation_tokens:
            self.requests.append((req.command, req.path, dict(req.headers)))
            rec = self.installation_tokens[value]
            if rec["expires"] <= time.time():
                return 401, {}, BAD_CREDENTIALS
            return self._installation_route(req.command, path, dict(parse_qsl(split.query)), rec["installation"])
        return super()._answer(req)

    def _jwt_ok(self, token: str) -> bool:
        from joserfc import jwt
        from joserfc.errors import JoseError

        try:
            t = jwt.decode(token, self.public_key, algorithms=["RS256"])
        except (JoseError, ValueError):
            return False
        c, now = t.claims, time.time()
        ok = (str(c.get("iss")) == self.app_id and isinstance(c.get("iat"), int) and isinstance(c.get("exp"), int)
              and c["iat"] <= now + 60 and c["exp"] > now and c["exp"] - c["iat"] <= 600)
        if ok:
            self.jwt_claims.append(dict(c))
        return ok

    def _app_route(self, method: str, path: str, query: dict):
        if method == "GET" and path == "/app/installations":
            items = [{"id": i, "app_id": int(self.app_id), "target_type": self.owners[rec["account"].lower()]["type"],
                      "account": {"login": rec["account"], "id": self.owners[rec["account"].lower()]["id"],
                                  "type": self.owners[rec["account"].lower()]["type"]},
                      "repository_selection": "all" if rec["repos"] is None else "selected"}
                     for i, rec in sorted(self.installations.items())]
            return self._plain_page(items, query, API + "/app/installations")
        parts = path.strip("/").split("/")
        if method == "POST" and len(parts) == 4 and parts[:2] == ["app", "installations"] and parts[3] == "access_tokens":
            inst = self.installations.get(int(parts[2])) if parts[2].isdigit() else None
            if inst is None:
                return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}
            token = "ghs_" + secrets.token_urlsafe(27)
            expires = time.time() + self.token_ttl_s
            self.installation_tokens[token] = {"installation": int(parts[2]), "expires": expires}
            if self.git is not None and self.git.users is not None:
                self.git.users.add(("x-access-token", token))
            stamp = datetime.fromtimestamp(expires, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            return 201, {}, {"token": token, "expires_at": stamp, "permissions": {"contents": "read",
                             "metadata": "read"}, "repository_selection": "all" if inst["repos"] is None else "selected"}
        return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}

    def _granted(self, inst_id: int) -> list[dict]:
        inst = self.installations[inst_id]
        return [r for r in self.repos if r["owner"].lower() == inst["account"].lower()
                and (inst["repos"] is None or f"{r['owner']}/{r['name']}".lower() in inst["repos"])]

    def _installation_route(self, method: str, path: str, query: dict, inst_id: int):
        if method != "GET":
            return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}
        if path == "/user":
            return 403, {}, {"message": "Resource not accessible by integration", "documentation_url": DOCS,
                             "status": "403"}
        if path == "/installation/repositories":
            repos = sorted(self._granted(inst_id), key=lambda r: r["name"].lower())
            per_page = max(1, min(int(query.get("per_page") or 30), 100, self.page_size))
            page = max(1, int(query.get("page") or 1))
            headers = {}
            if page * per_page < len(repos):
                q = {**query, "page": str(page + 1)}
                headers["Link"] = f'<{self.api_url}/installation/repositories?{urlencode(q)}>; rel="next"'
            chunk = repos[(page - 1) * per_page: page * per_page]
            return 200, headers, {"total_count": len(repos), "repositories": [self._json(r) for r in chunk]}
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "repos":
            for r in self._granted(inst_id):
                if r["owner"].lower() == parts[1].lower() and r["name"].lower() == parts[2].lower():
                    return 200, {}, self._json(r, single=True)
        return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}
