"""A fake GitHub Enterprise Server REST API (``/api/v3``) with GitHub's documented shapes.

Serves exactly what the `github` adapter calls, on ``http://127.0.0.1:<port>`` (GHES layout: the
web host and ``/api/v3`` on one address):

* ``GET /user`` (token required), ``GET /users/{u}/repos`` (public repos only),
  ``GET /orgs/{o}/repos`` (``type`` all/public/private/forks/sources), ``GET /repos/{o}/{r}``
  (the only answer with ``parent``/``source``), ``GET /user/repos`` (``affiliation``,
  ``visibility``; 422 when ``type`` is combined with them);
* pagination as GitHub does it: ``per_page`` default 30, silently capped at 100 and at this
  fake's `page_size` (set it small to force many pages); ``Link`` with ``next``/``last`` and, past
  page 1, ``first``/``prev``, no ``next`` on the last page and no Link at all for a single page;
  ``next`` URLs rewritten to numeric-id paths (``/organizations/{id}/repos``,
  ``/user/{id}/repos``), which are served too;
* auth: ``Authorization: Bearer <t>`` or ``token <t>``; a wrong token is 401 ``Bad credentials``
  on every endpoint; no token is anonymous (public repos only; ``/user`` and ``/user/repos`` 401);
* 404 ``Not Found`` for unknown owners and for private repos the caller cannot see (never 403);
* ``x-ratelimit-*`` headers on every answer; `rate_limit()` makes the next answers 403 (or 429)
  with ``x-ratelimit-remaining: 0`` and an epoch ``x-ratelimit-reset``; `fail()` queues any
  other answer (a 500, a 422 …) for matching paths.

Repositories are real when a `tests.githttp.GitHttpServer` is given: `add_repo` creates the bare
repository (default branch as described) and ``clone_url`` points at that server.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, urlencode, urlsplit

from tests.fakehosts.server import FakeServer
from tests.githttp import GitHttpServer, make_bare_repo

API = "/api/v3"
DOCS = "https://docs.github.com/rest"


class FakeGitHub(FakeServer):
    api_prefix = API
    content_type = "application/json; charset=utf-8"
    _next_id = 1000
    methods = ("GET", "POST")  # POST: the OAuth app's token endpoint (`oauth_app`)

    def __init__(self, token: str = "ghp_faketoken", token_user: str = "alice", *, page_size: int = 100,
                 git: GitHttpServer | None = None):
        self.token = token
        self.token_user = token_user
        #: every token this host accepts, and whose it is (`add_token`: one per linked account)
        self.tokens: dict[str, str] = {token: token_user}
        self.page_size = page_size
        self.git = git
        self.owners: dict[str, dict] = {}  # lower-cased login -> {login, id, type, members}
        self.repos: list[dict] = []
        self.add_user(token_user)
        super().__init__()  # requests: (method, raw path, headers)

    # -- data -------------------------------------------------------------------------------

    def add_user(self, login: str) -> None:
        self.owners.setdefault(login.lower(), {"login": login, "id": self._id(), "type": "User", "members": set()})

    def add_org(self, login: str, members: tuple[str, ...] = ()) -> None:
        self.owners[login.lower()] = {"login": login, "id": self._id(), "type": "Organization",
                                      "members": {m.lower() for m in members}}

    def add_repo(self, owner: str, name: str, *, private: bool = False, fork: bool = False, archived: bool = False,
                 topics: tuple[str, ...] = (), size_kb: int = 0, stars: int = 0, default_branch: str = "main",
                 pushed_at: str = "2024-05-01T12:00:00Z", collaborators: tuple[str, ...] = (),
                 parent: str | None = None) -> dict:
        if owner.lower() not in self.owners:
            self.add_user(owner)
        if self.git is not None:
            make_bare_repo(self.git.root, f"{owner}/{name}.git", {"README.md": f"# {owner}/{name}\n"}, default=default_branch)
        rec = {"owner": self.owners[owner.lower()]["login"], "name": name, "id": self._id(), "private": private,
               "fork": fork, "archived": archived, "topics": list(topics), "size": size_kb, "stars": stars,
               "default_branch": default_branch, "pushed_at": pushed_at,
               "collaborators": {c.lower() for c in collaborators}, "parent": parent}
        self.repos.append(rec)
        return rec

    def add_token(self, login: str, token: str) -> None:
        """`token` authenticates `login` (a user's own OAuth token, as single sign-on stores it)."""
        self.add_user(login)
        self.tokens[token] = login

    def oauth_app(self, client_id: str, client_secret: str) -> None:
        """Act as a GitHub OAuth app's host too (GitHub Enterprise layout, on this address):
        ``GET /login/oauth/authorize`` signs in `oauth_login` at once (302 back to the
        ``redirect_uri`` with a code and the state), ``POST /login/oauth/access_token`` trades a
        code (once, with its PKCE verifier and the client's secret) for a token of that user,
        which the REST API then accepts; ``GET /user/emails`` lists the user's verified e-mail."""
        self.oauth = (client_id, client_secret)
        self.oauth_login: str | None = None
        self.oauth_codes: dict[str, dict] = {}

    def _oauth(self, req: BaseHTTPRequestHandler):
        import base64
        import hashlib
        import secrets

        from tests.fakehosts.server import read_body

        split = urlsplit(req.path)
        self.requests.append((req.command, req.path, dict(req.headers)))
        if req.command == "GET" and split.path == "/login/oauth/authorize":
            q = dict(parse_qsl(split.query))
            if q.get("client_id") != self.oauth[0] or not q.get("redirect_uri") or self.oauth_login is None:
                return 400, {"Content-Type": "text/plain"}, b"bad authorize request"
            code = secrets.token_urlsafe(16)
            self.oauth_codes[code] = {"login": self.oauth_login, "q": q}
            sep = "&" if "?" in q["redirect_uri"] else "?"
            return 302, {"Location": q["redirect_uri"] + sep + urlencode({"code": code, "state": q.get("state", "")})}, b""
        if req.command == "POST" and split.path == "/login/oauth/access_token":
            form = dict(parse_qsl(read_body(req).decode()))
            auth = req.headers.get("Authorization") or ""
            if auth.startswith("Basic "):
                cid, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            else:
                cid, secret = form.get("client_id"), form.get("client_secret")
            grant = self.oauth_codes.pop(form.get("code", ""), None)
            challenge = base64.urlsafe_b64encode(hashlib.sha256(form.get("code_verifier", "").encode()).digest()
                                                 ).decode().rstrip("=")
            if (cid, secret) != self.oauth or grant is None or challenge != grant["q"].get("code_challenge") \
                    or form.get("redirect_uri") != grant["q"].get("redirect_uri"):
                return 200, {}, {"error": "bad_verification_code"}  # GitHub answers 200 with an error
            token = "gho_" + secrets.token_urlsafe(20)
            self.tokens[token] = grant["login"]
            return 200, {}, {"access_token": token, "token_type": "bearer", "scope": grant["q"].get("scope", "")}
        return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}

    def user_id(self, login: str) -> int:
        return self.owners[login.lower()]["id"]

    def rate_limit(self, times: int = 1, reset_in: float = 30, status: int = 403) -> None:
        """The next `times` answers are primary rate-limit answers resetting `reset_in` s from now."""
        headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000",
                   "x-ratelimit-reset": str(int(time.time() + reset_in)), "x-ratelimit-resource": "core"}
        body = {"message": "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, "
                           "please include the request ID.", "documentation_url": DOCS, "status": str(status)}
        self.fail(status, times=times, headers=headers, body=body)

    # -- serving ----------------------------------------------------------------------------

    def _answer(self, req: BaseHTTPRequestHandler):
        raw = req.path
        split = urlsplit(raw)
        if split.path.startswith("/login/oauth/") and getattr(self, "oauth", None):
            return self._oauth(req)
        if req.command != "GET":
            return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}
        query = dict(parse_qsl(split.query))
        self.requests.append(("GET", raw, dict(req.headers)))
        limits = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4999", "x-ratelimit-used": "1",
                  "x-ratelimit-reset": str(int(time.time() + 3600)), "x-ratelimit-resource": "core"}
        if not split.path.startswith(API + "/"):
            return 404, {}, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}
        path = split.path[len(API):]
        fault = self._fault(path)
        if fault:
            return fault
        auth = req.headers.get("Authorization", "")
        viewer = None
        if auth:
            scheme, _, value = auth.partition(" ")
            if scheme.lower() not in ("bearer", "token") or value.strip() not in self.tokens:
                return 401, limits, {"message": "Bad credentials", "documentation_url": DOCS, "status": "401"}
            viewer = self.tokens[value.strip()].lower()
        parts = [p for p in path.split("/") if p]
        try:
            status, headers, body = self._route(parts, query, viewer, split.path)
        except _NotFound:
            return 404, limits, {"message": "Not Found", "documentation_url": DOCS, "status": "404"}
        return status, {**limits, **headers}, body

    def _route(self, parts: list[str], query: dict, viewer: str | None, path: str):
        if parts == ["user"]:
            if viewer is None:
                return 401, {}, {"message": "Requires authentication", "documentation_url": DOCS, "status": "401"}
            me = self.owners[viewer]
            return 200, {}, {"login": me["login"], "id": me["id"], "type": "User"}
        if parts == ["user", "emails"]:
            if viewer is None:
                return 401, {}, {"message": "Requires authentication", "documentation_url": DOCS, "status": "401"}
            return 200, {}, [{"email": f"{viewer}@example.com", "primary": True, "verified": True,
                              "visibility": "private"}]
        if parts == ["user", "repos"]:
            if viewer is None:
                return 401, {}, {"message": "Requires authentication", "documentation_url": DOCS, "status": "401"}
            if "type" in query and ("visibility" in query or "affiliation" in query):
                return 422, {}, {"message": "Validation Failed", "documentation_url": DOCS, "status": "422",
                                 "errors": [{"resource": "Repository", "field": "type", "code": "invalid"}]}
            affiliation = set((query.get("affiliation") or "owner,collaborator,organization_member").split(","))
            visibility = query.get("visibility", "all")
            repos = [r for r in self._visible(viewer) if self._affiliated(r, viewer, affiliation)
                     and visibility in ("all", "private" if r["private"] else "public")]
            return self._page(repos, query, "/user/repos")
        if len(parts) == 3 and parts[0] in ("users", "user", "orgs", "organizations") and parts[2] == "repos":
            owner = self._owner(parts[0], parts[1])
            if parts[0] in ("orgs", "organizations"):
                if owner["type"] != "Organization":
                    raise _NotFound
                kind = query.get("type", "all")
                repos = [r for r in self._visible(viewer) if r["owner"].lower() == owner["login"].lower()
                         and (kind in ("all", "member") or (kind == "public" and not r["private"])
                              or (kind == "private" and r["private"]) or (kind == "forks" and r["fork"])
                              or (kind == "sources" and not r["fork"]))]
                return self._page(repos, query, f"/organizations/{owner['id']}/repos")
            repos = [r for r in self.repos if r["owner"].lower() == owner["login"].lower() and not r["private"]]
            return self._page(repos, query, f"/user/{owner['id']}/repos")
        if len(parts) == 4 and parts[0] == "repos" and parts[3] == "collaborators":
            # Everyone with access: the owning user, direct collaborators and the owning org's
            # members (GitHub's affiliation=all); only a viewer who can see the repository may ask.
            for r in self._visible(viewer):
                if r["owner"].lower() == parts[1].lower() and r["name"].lower() == parts[2].lower():
                    owner = self.owners[r["owner"].lower()]
                    logins = set(r["collaborators"]) | set(owner["members"])
                    if owner["type"] == "User":
                        logins.add(owner["login"].lower())
                    for login in logins:
                        self.add_user(login)
                    users = sorted((self.owners[x] for x in logins), key=lambda o: o["id"])
                    return self._plain_page([{"login": o["login"], "id": o["id"], "type": "User",
                                              "permissions": {"pull": True}} for o in users], query, path)
            raise _NotFound
        if len(parts) == 3 and parts[0] == "repos":
            for r in self._visible(viewer):
                if r["owner"].lower() == parts[1].lower() and r["name"].lower() == parts[2].lower():
                    return 200, {}, self._json(r, single=True)
            raise _NotFound
        raise _NotFound

    def _plain_page(self, items: list, query: dict, path: str):
        per_page = max(1, min(int(query.get("per_page") or 30), 100, self.page_size))
        page = max(1, int(query.get("page") or 1))
        chunk = items[(page - 1) * per_page: page * per_page]
        headers = {}
        if page * per_page < len(items):
            q = {k: v for k, v in query.items() if k != "page"}
            q["page"] = str(page + 1)
            headers["Link"] = f'<{self.api_url}{path[len(API):]}?{urlencode(q)}>; rel="next"'
        return 200, headers, chunk

    def _owner(self, kind: str, key: str) -> dict:
        for o in self.owners.values():
            if (kind in ("users", "orgs") and o["login"].lower() == key.lower()) or \
               (kind in ("user", "organizations") and str(o["id"]) == key):
                return o
        raise _NotFound

    def _visible(self, viewer: str | None) -> list[dict]:
        def sees(r):
            if not r["private"]:
                return True
            if viewer is None:
                return False
            owner = self.owners[r["owner"].lower()]
            return r["owner"].lower() == viewer or viewer in owner["members"] or viewer in r["collaborators"]
        return [r for r in self.repos if sees(r)]

    def _affiliated(self, r: dict, viewer: str, affiliation: set[str]) -> bool:
        owner = self.owners[r["owner"].lower()]
        return (("owner" in affiliation and r["owner"].lower() == viewer)
                or ("collaborator" in affiliation and viewer in r["collaborators"])
                or ("organization_member" in affiliation and viewer in owner["members"]))

    def _page(self, repos: list[dict], query: dict, canonical: str):
        repos = sorted(repos, key=lambda r: (r["owner"].lower(), r["name"].lower()))
        per_page = max(1, min(int(query.get("per_page") or 30), 100, self.page_size))
        page = max(1, int(query.get("page") or 1))
        last = max(1, -(-len(repos) // per_page))
        items = repos[(page - 1) * per_page: page * per_page]
        links = []

        def link(p: int, rel: str):
            q = {k: v for k, v in query.items() if k != "page"}
            q["page"] = str(p)
            links.append(f'<{self.api_url}{canonical}?{urlencode(q)}>; rel="{rel}"')

        if page > 1:
            link(page - 1, "prev")
        if page < last:
            link(page + 1, "next")
            link(last, "last")
        if page > 1:
            link(1, "first")
        return 200, ({"Link": ", ".join(links)} if links else {}), [self._json(r) for r in items]

    def _json(self, r: dict, single: bool = False) -> dict:
        owner = self.owners[r["owner"].lower()]
        full = f"{owner['login']}/{r['name']}"
        clone = self.git.url(f"{full}.git") if self.git is not None else f"{self.base_url}/{full}.git"
        out = {
            "id": r["id"], "node_id": f"R_{r['id']}", "name": r["name"], "full_name": full,
            "owner": {"login": owner["login"], "id": owner["id"], "type": owner["type"]},
            "private": r["private"], "visibility": "private" if r["private"] else "public",
            "html_url": f"{self.base_url}/{full}", "description": None, "fork": r["fork"],
            "url": f"{self.api_url}/repos/{full}", "clone_url": clone,
            "ssh_url": f"git@127.0.0.1:{full}.git", "git_url": f"git://127.0.0.1/{full}.git",
            "svn_url": f"{self.base_url}/{full}", "default_branch": r["default_branch"],
            "archived": r["archived"], "disabled": False, "topics": list(r["topics"]), "size": r["size"],
            "pushed_at": r["pushed_at"], "created_at": "2020-01-01T00:00:00Z", "updated_at": r["pushed_at"],
            "stargazers_count": r["stars"], "watchers_count": r["stars"], "forks_count": 0, "forks": 0,
            "open_issues_count": 0, "is_template": False, "mirror_url": None,
        }
        if single:
            out["subscribers_count"] = 1
            if r["fork"] and r["parent"]:
                p_owner, _, p_name = r["parent"].partition("/")
                out["parent"] = out["source"] = {"full_name": r["parent"], "name": p_name, "owner": {"login": p_owner}}
        return out


class _NotFound(Exception):
    pass
