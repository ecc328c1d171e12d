"""A fake Gitea server: REST API (``/api/v1``) with Gitea's documented shapes, and git over HTTP.

Serves exactly what the `gitea` adapter calls, on ``http://127.0.0.1:<port>``:

* ``GET /orgs/{o}/repos``, ``GET /users/{u}/repos``, ``GET /repos/{o}/{r}``;
* what permission syncing asks: ``GET /repos/{o}/{r}/collaborators`` (the explicit collaborators
  as Gitea ``User`` objects ``{id, login, …}``; neither the owner nor organization members are
  listed; the caller must read the repository, else 404) and ``GET /user/repos`` (the token's
  user's repositories: owned, collaborations, and those of organizations it is a member of;
  401 without a token);
* pagination as Gitea does it: ``page`` (1-based) and ``limit``, default 30, **silently clamped**
  to `max_items` (``MAX_RESPONSE_ITEMS``, 50 on a stock server; set it small to force many
  pages); ``X-Total-Count`` and a ``Link`` header whose URLs echo the *requested* limit (as
  Forgejo does), so "a page shorter than asked is the last one" is wrong here;
* auth: ``Authorization: token <t>`` (lowercase ``token``) or ``Bearer <t>``; `tokens` maps each
  token to its user (`token` → `token_user` is one of them; `add_token` adds more, deleting one
  from `tokens` revokes it); a wrong token is 401 ``{"message": "token is required", "url": …}``;
  no token is anonymous (public repos only);
* visibility: ``private`` (the owner, the owning organization's members and the repository's
  `collaborators`), ``internal`` (visible to any signed-in user), public;
* 404s: ``{"message": "The target couldn't be found.", …}`` for repos, and for a missing org or
  user the Go function name as ``message`` (``GetOrgByName``, ``GetUserByName``) with the text in
  ``errors``;
* ``clone_url`` and ``html_url`` are built from `root_url` (Gitea's ``ROOT_URL``), which defaults to
  this server's address; set it to another host to model a server that does not know the address
  it is reached at;
* `fail()` queues any answer (a 500, a 429 from a proxy …) for matching API paths.

Every path outside ``/api/`` is git smart HTTP, relayed to the given `tests.githttp.GitHttpServer`
(where `add_repo` creates the bare repository), so the rewritten clone URLs really clone.
"""

from __future__ import annotations

import http.client
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from tests.fakehosts.server import FakeServer, read_body, send
from tests.githttp import GitHttpServer, make_bare_repo

API = "/api/v1"


class FakeGitea(FakeServer):
    methods = ("GET", "POST")
    api_prefix = API
    content_type = "application/json;charset=utf-8"
    _next_id = 1

    def __init__(self, token: str = "gitea-faketoken", token_user: str = "carol", *, max_items: int = 50,
                 git: GitHttpServer | None = None, root_url: str | None = None):
        self.token = token
        self.token_user = token_user
        self.tokens: dict[str, str] = {token: token_user.lower()}
        self.max_items = max_items
        self.git = git
        self._root_url = root_url
        self.owners: dict[str, dict] = {}
        self.repos: list[dict] = []
        self.add_user(token_user)
        super().__init__()

    # -- data -------------------------------------------------------------------------------

    @property
    def root_url(self) -> str:
        return (self._root_url or self.base_url).rstrip("/")

    def add_user(self, login: str) -> None:
        self.owners.setdefault(login.lower(), {"login": login, "id": self._id(), "type": "user", "members": {login.lower()}})

    def add_token(self, login: str, token: str) -> None:
        """A token of user `login` (created if new)."""
        self.add_user(login)
        self.tokens[token] = login.lower()

    def user_id(self, login: str) -> int:
        return self.owners[login.lower()]["id"]

    def add_org(self, login: str, members: tuple[str, ...] = (), *, team_units: bool = False) -> None:
        """An organization whose `members` read every repository of it, through one team (of
        Gitea 1.17+ shape, access in ``units_map``, when `team_units`)."""
        for m in members:
            self.add_user(m)
        self.owners[login.lower()] = {"login": login, "id": self._id(), "type": "org",
                                      "members": {m.lower() for m in members}, "team": self._id(),
                                      "team_units": team_units}

    def add_repo(self, owner: str, name: str, *, private: bool = False, internal: bool = False, fork: bool = False,
                 archived: bool = False, topics: tuple[str, ...] = (), size_kb: int = 0, stars: int = 0,
                 default_branch: str = "main", updated_at: str = "2024-05-01T12:00:00Z",
                 collaborators: tuple[str, ...] = ()) -> dict:
        if owner.lower() not in self.owners:
            self.add_user(owner)
        for login in collaborators:
            self.add_user(login)
        if self.git is not None:
            make_bare_repo(self.git.root, f"{owner}/{name}.git", {"README.md": f"# {owner}/{name}\n"}, default=default_branch)
        rec = {"owner": owner.lower(), "name": name, "id": self._id(), "private": private, "internal": internal,
               "fork": fork, "archived": archived, "topics": list(topics), "size": size_kb, "stars": stars,
               "default_branch": default_branch, "updated_at": updated_at,
               "collaborators": {c.lower() for c in collaborators}}
        self.repos.append(rec)
        return rec

    def _fault_body(self, status: int) -> dict:
        return {"message": "internal error", "url": ""}

    # -- serving ----------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        if not h.path.startswith("/api/"):
            self._relay_git(h)
        elif h.command != "GET":
            send(h, 405)
        else:
            super().handle(h)

    def _error(self, status: int, message: str, errors: list[str] | None = None) -> tuple[int, dict, dict]:
        body = {"message": message, "url": f"{self.root_url}/api/swagger"}
        if errors is not None:
            body["errors"] = errors
        return status, {}, body

    def _answer(self, req: BaseHTTPRequestHandler):
        split = urlsplit(req.path)
        query = dict(parse_qsl(split.query))
        self.requests.append((req.command, req.path, dict(req.headers)))
        if not split.path.startswith(API + "/"):
            return self._error(404, "404 page not found")
        path = split.path[len(API):]
        fault = self._fault(path)
        if fault:
            return fault
        viewer = None
        auth = req.headers.get("Authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme == "token" or scheme.lower() == "bearer":
            viewer = self.tokens.get(value.strip())
            if viewer is None:
                return self._error(401, "token is required")
        parts = [unquote(p) for p in path.split("/") if p]
        if len(parts) == 3 and parts[0] in ("orgs", "users") and parts[2] == "repos":
            owner = self.owners.get(parts[1].lower())
            if parts[0] == "orgs" and (owner is None or owner["type"] != "org"):
                return self._error(404, "GetOrgByName", [f"org does not exist [id: 0, name: {parts[1]}]"])
            if owner is None:
                return self._error(404, "GetUserByName", [f"user redirect does not exist [name: {parts[1].lower()}]"])
            repos = [r for r in self.repos if r["owner"] == owner["login"].lower() and self._sees(r, viewer)]
            return self._page(repos, query, split.path)
        if parts == ["user", "repos"]:
            if viewer is None:
                return self._error(401, "token is required")
            repos = [r for r in self.repos if viewer in self.owners[r["owner"]]["members"] or viewer in r["collaborators"]]
            return self._page(repos, query, split.path)
        if len(parts) == 3 and parts[0] == "teams" and parts[2] == "members":
            org = next((o for o in self.owners.values() if str(o.get("team")) == parts[1]), None)
            if org is None:
                return self._error(404, "The target couldn't be found.", [])
            users = sorted((self.owners[m] for m in org["members"]), key=lambda u: u["login"].lower())
            return self._page(users, query, split.path, self._user_json)
        if len(parts) in (3, 4) and parts[0] == "repos" and parts[3:] in ([], ["collaborators"], ["teams"]):
            for r in self.repos:
                if r["owner"] == parts[1].lower() and r["name"].lower() == parts[2].lower() and self._sees(r, viewer):
                    if len(parts) == 3:
                        return 200, {}, self._json(r)
                    if parts[3] == "teams":
                        owner = self.owners[r["owner"]]
                        if owner["type"] != "org":
                            return self._error(405, "repo is not owned by an organization")
                        team = ({"id": owner["team"], "name": "Readers", "permission": "none",
                                 "units_map": {"repo.code": "read", "repo.issues": "read"}} if owner["team_units"]
                                else {"id": owner["team"], "name": "Readers", "permission": "read"})
                        return 200, {}, [team]
                    users = sorted((self.owners[c] for c in r["collaborators"]), key=lambda u: u["login"].lower())
                    return self._page(users, query, split.path, self._user_json)
            return self._error(404, "The target couldn't be found.", [])
        return self._error(404, "404 page not found")

    def _sees(self, r: dict, viewer: str | None) -> bool:
        if not r["private"] and not r["internal"]:
            return True
        if viewer is None:
            return False
        return (r["internal"] and not r["private"] or viewer in self.owners[r["owner"]]["members"]
                or viewer in r["collaborators"])

    def _page(self, repos: list[dict], query: dict, path: str, render=None):
        """One page of `repos` (sorted by name), or of any list `render` turns into JSON (as given)."""
        if render is None:
            repos, render = sorted(repos, key=lambda r: r["name"].lower()), self._json
        asked = int(query.get("limit") or 30)
        limit = max(1, min(asked, self.max_items))
        page = max(1, int(query.get("page") or 1))
        items = repos[(page - 1) * limit: page * limit]
        last = max(1, -(-len(repos) // limit))

        def url(n: int) -> str:
            q = {k: v for k, v in query.items() if k not in ("page", "limit")}
            q.update(page=str(n), limit=str(asked))  # echoes the requested limit, not the clamped one
            return f"{self.base_url}{path}?{urlencode(q)}"

        links = []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(1)}>; rel="first"', f'<{url(page - 1)}>; rel="prev"']
        headers = {"X-Total-Count": str(len(repos)), "Access-Control-Expose-Headers": "X-Total-Count, Link"}
        if links:
            headers["Link"] = ",".join(links)
        return 200, headers, [render(r) for r in items]

    def _user_json(self, owner: dict) -> dict:
        """A Gitea ``User`` (no field tells a user from an organization)."""
        login = owner["login"]
        return {"id": owner["id"], "login": login, "login_name": "", "source_id": 0, "full_name": login.title(),
                "email": f"{login.lower()}@noreply.localhost", "avatar_url": f"{self.root_url}/avatars/{owner['id']}",
                "html_url": f"{self.root_url}/{login}", "language": "", "is_admin": False,
                "last_login": "0001-01-01T00:00:00Z", "created": "2020-01-01T00:00:00Z", "restricted": False,
                "active": True, "prohibit_login": False, "location": "", "website": "", "description": "",
                "visibility": "public", "followers_count": 0, "following_count": 0, "starred_repos_count": 0,
                "username": login}

    def _json(self, r: dict) -> dict:
        owner = self.owners[r["owner"]]
        full = f"{owner['login']}/{r['name']}"
        out = {
            "id": r["id"], "owner": self._user_json(owner),
            "name": r["name"], "full_name": full, "description": "", "empty": False, "private": r["private"],
            "fork": r["fork"], "template": False, "parent": None, "mirror": False, "size": r["size"],
            "language": "", "html_url": f"{self.root_url}/{full}", "url": f"{self.root_url}/api/v1/repos/{full}",
            "ssh_url": f"git@127.0.0.1:{full}.git", "clone_url": f"{self.root_url}/{full}.git",
            "website": "", "stars_count": r["stars"], "forks_count": 0, "watchers_count": 1,
            "open_issues_count": 0, "default_branch": r["default_branch"], "archived": r["archived"],
            "created_at": "2020-01-01T00:00:00Z", "updated_at": r["updated_at"], "internal": r["internal"],
            "topics": list(r["topics"]),
        }
        if r["fork"]:
            out["parent"] = {"id": 1, "full_name": "upstream/" + r["name"], "name": r["name"]}
        return out

    def _relay_git(self, req: BaseHTTPRequestHandler) -> None:
        """Pass a git smart-HTTP request to the git server and its answer back, unchanged."""
        self.requests.append((req.command, req.path, dict(req.headers)))
        if self.git is None:
            send(req, 404)
            return
        body = read_body(req)
        headers = {k: v for k, v in req.headers.items()
                   if k.lower() in ("authorization", "content-type", "git-protocol", "content-encoding", "accept")}
        conn = http.client.HTTPConnection("127.0.0.1", self.git.port, timeout=60)
        try:
            conn.request(req.command, req.path, body=body or None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            hop = ("content-length", "connection", "transfer-encoding", "server", "date")
            send(req, resp.status, data, [(k, v) for k, v in resp.getheaders() if k.lower() not in hop])
        finally:
            conn.close()
