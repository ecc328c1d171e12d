"""A fake self-managed GitLab REST API (``/api/v4``) with GitLab's documented shapes.

Serves exactly what the `gitlab` adapter calls, on ``http://127.0.0.1:<port>``:

* ``GET /projects`` (everything the caller can see: public, internal when authenticated, private
  when a member), offset pagination or keyset (``pagination=keyset&order_by=id``; ``Link`` only,
  no totals, no Link on the last page);
* ``GET /groups/{id | encoded path}/projects`` (``include_subgroups`` default **false**,
  ``with_shared`` default **true**), ``GET /users/{id | username}/projects`` (personal namespace
  only), ``GET /projects/{id | encoded path}``;
* path parameters are split on raw ``/`` *before* ``%2F`` is decoded, so ``acme%2Fplatform`` names
  a subgroup and ``/groups/acme/platform/projects`` is an unknown route (404 ``{"error": …}``);
* offset pages: ``per_page`` default 20, max 100 and this fake's `page_size`; headers ``x-page``,
  ``x-per-page``, ``x-next-page`` (present and **empty** on the last page), ``x-prev-page``,
  ``x-total``, ``x-total-pages`` and ``Link``;
* ``forked_from_project`` is a key present only on forks whose upstream the caller can see, never
  ``null``; ``visibility`` private/internal/public; ``star_count``; ``last_activity_at``;
* auth: ``PRIVATE-TOKEN: <t>`` or ``Authorization: Bearer <t>``; a wrong token is 401
  ``{"message": "401 Unauthorized"}``; no token is anonymous (public projects only);
* 404 ``{"message": "404 Group Not Found"}`` (User, Project) for unknown or invisible entities;
* `rate_limit()` answers 429 with ``Retry-After`` and ``RateLimit-*`` headers and the plain-text
  body ``Retry later``; `fail()` queues any other answer (a 500 …).

Projects are real when a `tests.githttp.GitHttpServer` is given: `add_project` creates the bare
repository and ``http_url_to_repo`` points at that server.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from tests.fakehosts.server import FakeServer
from tests.githttp import GitHttpServer, make_bare_repo

API = "/api/v4"


class FakeGitLab(FakeServer):
    api_prefix = API
    _next_id = 100
    methods = ("GET", "POST")  # POST: the OAuth token endpoint's refresh grant (`oauth_client`)

    def __init__(self, token: str = "glpat-faketoken", token_user: str = "alice", *, page_size: int = 100,
                 git: GitHttpServer | None = None):
        self.token = token
        self.token_user = token_user
        #: every token this host accepts, and whose it is (`add_token`)
        self.tokens: dict[str, str] = {token: token_user}
        self.page_size = page_size
        self.git = git
        self.namespaces: dict[str, dict] = {}  # lower-cased full path -> namespace
        self.projects: list[dict] = []
        self.add_user(token_user)
        super().__init__()

    # -- data -------------------------------------------------------------------------------

    def add_user(self, username: str) -> dict:
        key = username.lower()
        if key not in self.namespaces:
            self.namespaces[key] = {"id": self._id(), "name": username, "path": username, "kind": "user",
                                    "full_path": username, "parent_id": None, "members": {key}, "user_id": self._id()}
        return self.namespaces[key]

    def add_group(self, full_path: str, members: tuple[str, ...] = ()) -> dict:
        key = full_path.lower()
        parent, _, path = full_path.rpartition("/")
        parent_ns = self.add_group(parent) if parent else None
        if key not in self.namespaces:
            self.namespaces[key] = {"id": self._id(), "name": path.title(), "path": path, "kind": "group",
                                    "full_path": full_path, "parent_id": parent_ns["id"] if parent_ns else None,
                                    "members": set()}
        self.namespaces[key]["members"] |= {m.lower() for m in members}
        return self.namespaces[key]

    def add_project(self, full_path: str, *, visibility: str = "public", archived: bool = False,
                    topics: tuple[str, ...] = (), stars: int = 0, default_branch: str = "main",
                    forked_from: str | None = None, members: tuple[str, ...] = (),
                    shared_with: tuple[str, ...] = (), last_activity_at: str = "2024-05-01T12:00:00.000Z") -> dict:
        namespace, _, path = full_path.rpartition("/")
        if namespace.lower() not in self.namespaces:
            self.add_group(namespace)
        if self.git is not None:
            make_bare_repo(self.git.root, f"{full_path}.git", {"README.md": f"# {full_path}\n"}, default=default_branch)
        rec = {"id": self._id(), "path": path, "namespace": namespace.lower(), "visibility": visibility,
               "archived": archived, "topics": list(topics), "stars": stars, "default_branch": default_branch,
               "forked_from": forked_from, "members": {m.lower() for m in members},
               "shared_with": {s.lower() for s in shared_with}, "last_activity_at": last_activity_at}
        self.projects.append(rec)
        return rec

    def add_token(self, username: str, token: str) -> None:
        self.add_user(username)
        self.tokens[token] = username

    def oauth_client(self, client_id: str, client_secret: str) -> None:
        """Serve ``POST /oauth/token`` with ``grant_type=refresh_token`` for this OAuth application:
        `refresh_tokens` maps a refresh token to its user; each use issues a new access token
        (two hours) and a new refresh token, and the old refresh token stops working."""
        self.oauth = (client_id, client_secret)
        self.refresh_tokens: dict[str, str] = {}
        self.refreshes = 0

    def _refresh(self, req: BaseHTTPRequestHandler):
        from tests.fakehosts.server import read_body

        form = dict(parse_qsl(read_body(req).decode()))
        self.requests.append(("POST", req.path, dict(req.headers)))
        auth = req.headers.get("Authorization") or ""
        if auth.startswith("Basic "):
            import base64

            cid, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        else:
            cid, secret = form.get("client_id"), form.get("client_secret")
        if (cid, secret) != getattr(self, "oauth", None):
            return 401, {}, {"error": "invalid_client"}
        user = self.refresh_tokens.pop(form.get("refresh_token", ""), None)
        if form.get("grant_type") != "refresh_token" or user is None:
            return 400, {}, {"error": "invalid_grant", "error_description": "The provided authorization grant is invalid"}
        self.refreshes += 1
        access, refresh = f"glpat-r{self.refreshes}-{user}", f"rt-{self.refreshes}-{user}"
        self.tokens[access] = user
        self.refresh_tokens[refresh] = user
        return 200, {}, {"access_token": access, "token_type": "Bearer", "expires_in": 7200,
                         "refresh_token": refresh, "created_at": int(time.time())}

    def user_id(self, username: str) -> int:
        return self.namespaces[username.lower()]["user_id"]

    def rate_limit(self, times: int = 1, retry_after: int = 7) -> None:
        reset = int(time.time() + retry_after)
        headers = {"Retry-After": str(retry_after), "RateLimit-Name": "throttle_authenticated_api",
                   "RateLimit-Limit": "60", "RateLimit-Observed": "61", "RateLimit-Remaining": "0",
                   "RateLimit-Reset": str(reset), "Content-Type": "text/plain"}
        self.fail(429, times=times, headers=headers, body=b"Retry later\n")

    def _fault_body(self, status: int) -> dict:
        return {"message": "500 Internal Server Error"}

    # -- serving ----------------------------------------------------------------------------

    def _answer(self, req: BaseHTTPRequestHandler):
        if req.command == "POST":
            if urlsplit(req.path).path == "/oauth/token":
                return self._refresh(req)
            return 404, {}, {"error": "404 Not Found"}
        split = urlsplit(req.path)
        query = dict(parse_qsl(split.query))
        self.requests.append(("GET", req.path, dict(req.headers)))
        if not split.path.startswith(API + "/"):
            return 404, {}, {"error": "404 Not Found"}
        path = split.path[len(API):]
        fault = self._fault(path)
        if fault:
            return fault
        viewer = None
        token = req.headers.get("PRIVATE-TOKEN")
        auth = req.headers.get("Authorization", "")
        if token is None and auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        if token is not None:
            if token not in self.tokens:
                return 401, {}, {"message": "401 Unauthorized"}
            viewer = self.tokens[token].lower()
        raw_parts = [p for p in path.split("/") if p]  # split before decoding: %2F stays inside a segment
        parts = [unquote(p) for p in raw_parts]
        if parts == ["projects"]:
            listed = [p for p in self.projects if self._sees(p, viewer)]
            if query.get("membership") == "true":
                listed = [p for p in listed if viewer is not None and viewer in self._members(p)]
            return self._list(listed, query, viewer, "/projects")
        if len(parts) == 4 and parts[0] == "projects" and parts[2:] == ["members", "all"]:
            p = self._project(parts[1], viewer)
            if p is None:
                return 404, {}, {"message": "404 Project Not Found"}
            for name in self._members(p):
                self.add_user(name)
            members = [{"id": self.namespaces[m]["user_id"], "username": self.namespaces[m]["name"],
                        "state": "active", "access_level": 30} for m in sorted(self._members(p))]
            return 200, {"x-next-page": ""}, members
        if len(parts) == 2 and parts[0] == "projects":
            p = self._project(parts[1], viewer)
            return (200, {}, self._json(p, viewer)) if p else (404, {}, {"message": "404 Project Not Found"})
        if len(parts) == 3 and parts[0] == "groups" and parts[2] == "projects":
            g = self._namespace(parts[1], "group")
            if g is None:
                return 404, {}, {"message": "404 Group Not Found"}
            subgroups = query.get("include_subgroups", "false") == "true"
            with_shared = query.get("with_shared", "true") == "true"
            spaces = {g["full_path"].lower()}
            if subgroups:
                spaces |= {k for k in self.namespaces if k.startswith(g["full_path"].lower() + "/")}
            projects = [p for p in self.projects if self._sees(p, viewer) and
                        (p["namespace"] in spaces or (with_shared and p["shared_with"] & spaces))]
            return self._list(projects, query, viewer, f"/groups/{raw_parts[1]}/projects")
        if len(parts) == 3 and parts[0] == "users" and parts[2] == "projects":
            u = self._namespace(parts[1], "user")
            if u is None:
                return 404, {}, {"message": "404 User Not Found"}
            projects = [p for p in self.projects if p["namespace"] == u["full_path"].lower() and self._sees(p, viewer)]
            return self._list(projects, query, viewer, f"/users/{raw_parts[1]}/projects")
        return 404, {}, {"error": "404 Not Found"}

    def _members(self, p: dict) -> set[str]:
        """Direct and inherited members of a project (lower-cased usernames)."""
        out = set(p["members"])
        ns = p["namespace"]
        while ns:
            if ns in self.namespaces:
                out |= self.namespaces[ns]["members"]
            ns = ns.rpartition("/")[0]
        return out

    def _namespace(self, key: str, kind: str) -> dict | None:
        for ns in self.namespaces.values():
            if ns["kind"] == kind and (ns["full_path"].lower() == key.lower() or str(ns["id"]) == key
                                       or str(ns.get("user_id")) == key):
                return ns
        return None

    def _project(self, key: str, viewer: str | None) -> dict | None:
        for p in self.projects:
            if (str(p["id"]) == key or self._full_path(p).lower() == key.lower()) and self._sees(p, viewer):
                return p
        return None

    def _full_path(self, p: dict) -> str:
        return f"{self.namespaces[p['namespace']]['full_path']}/{p['path']}"

    def _sees(self, p: dict, viewer: str | None) -> bool:
        if p["visibility"] == "public":
            return True
        if viewer is None:
            return False
        if p["visibility"] == "internal" or viewer in p["members"]:
            return True
        ns = p["namespace"]
        spaces = {ns} | {s for s in p["shared_with"]}
        while ns:  # membership is inherited from ancestor groups
            spaces.add(ns)
            ns = ns.rpartition("/")[0]
        return any(viewer in self.namespaces[s]["members"] for s in spaces if s in self.namespaces)

    def _list(self, projects: list[dict], query: dict, viewer: str | None, route: str):
        per_page = max(1, min(int(query.get("per_page") or 20), 100, self.page_size))
        if query.get("pagination") == "keyset":
            if query.get("order_by") != "id":
                return 405, {}, {"error": "Keyset pagination is not yet available for this type of request"}
            after = int(query.get("id_after") or 0)
            rest = sorted((p for p in projects if p["id"] > after), key=lambda p: p["id"])
            items = rest[:per_page]
            headers = {}
            if len(rest) > per_page:
                q = {k: v for k, v in query.items() if k != "id_after"}
                q["id_after"] = str(items[-1]["id"])
                headers["Link"] = f'<{self.api_url}{route}?{urlencode(q)}>; rel="next"'
            return 200, headers, [self._json(p, viewer) for p in items]
        projects = sorted(projects, key=lambda p: -p["id"])  # order_by=created_at, sort=desc
        page = max(1, int(query.get("page") or 1))
        total_pages = max(1, -(-len(projects) // per_page))
        items = projects[(page - 1) * per_page: page * per_page]

        def url(n: int) -> str:
            q = {k: v for k, v in query.items() if k != "page"}
            q["page"] = str(n)
            return f"{self.api_url}{route}?{urlencode(q)}"

        links = []
        if page > 1:
            links.append(f'<{url(page - 1)}>; rel="prev"')
        if page < total_pages:
            links.append(f'<{url(page + 1)}>; rel="next"')
        links.append(f'<{url(1)}>; rel="first"')
        links.append(f'<{url(total_pages)}>; rel="last"')
        headers = {"x-page": str(page), "x-per-page": str(per_page),
                   "x-next-page": str(page + 1) if page < total_pages else "",
                   "x-prev-page": str(page - 1) if page > 1 else "", "x-total": str(len(projects)),
                   "x-total-pages": str(total_pages), "Link": ", ".join(links)}
        return 200, headers, [self._json(p, viewer) for p in items]

    def _json(self, p: dict, viewer: str | None) -> dict:
        ns = self.namespaces[p["namespace"]]
        full = self._full_path(p)
        clone = self.git.url(f"{full}.git") if self.git is not None else f"{self.base_url}/{full}.git"
        out = {
            "id": p["id"], "description": None, "name": p["path"].replace("-", " ").title(),
            "name_with_namespace": f"{ns['name']} / {p['path']}", "path": p["path"], "path_with_namespace": full,
            "created_at": "2020-01-01T00:00:00.000Z", "default_branch": p["default_branch"],
            "tag_list": list(p["topics"]), "topics": list(p["topics"]),
            "ssh_url_to_repo": f"git@127.0.0.1:{full}.git", "http_url_to_repo": clone,
            "web_url": f"{self.base_url}/{full}", "readme_url": f"{self.base_url}/{full}/-/blob/{p['default_branch']}/README.md",
            "forks_count": 0, "star_count": p["stars"], "last_activity_at": p["last_activity_at"],
            "namespace": {"id": ns["id"], "name": ns["name"], "path": ns["path"], "kind": ns["kind"],
                          "full_path": ns["full_path"], "parent_id": ns["parent_id"]},
            "empty_repo": False, "archived": p["archived"], "visibility": p["visibility"],
        }
        if p["forked_from"]:
            upstream = self._project(p["forked_from"], viewer)
            if upstream is not None:  # the key is absent when the upstream is not visible
                out["forked_from_project"] = {"id": upstream["id"], "path_with_namespace": self._full_path(upstream),
                                              "web_url": f"{self.base_url}/{self._full_path(upstream)}"}
        return out
