"""Fake Bitbucket Cloud (API 2.0) and Bitbucket Server / Data Center (REST 1.0).

Each fake runs its own `tests.githttp.GitHttpServer` over real bare repositories (made with
`make_bare_repo`) and puts that server's URLs in the repositories' clone links, so a listed
repository can be cloned for real.

Cloud (`FakeBitbucketCloud`, API under ``<url>/2.0``):
* ``GET /2.0/repositories/{ws}`` (``pagelen``, ``page``, ``q=project.key="KEY"``) and
  ``GET /2.0/repositories/{ws}/{slug}``; body ``{pagelen, size, page, values, next?}`` with
  ``next`` an absolute URL, **absent on the last page**; ``pagelen`` is capped at `page_size`.
* repository objects as the API writes them: ``uuid`` in braces, ``full_name``, ``is_private``,
  ``parent`` **only for forks**, ``project{key,…}``, ``mainbranch`` (absent for an empty repo),
  ``links.html``, ``links.clone`` (``https`` with the caller's user name, and ``ssh``), ``size``
  in bytes, no archived flag.
* permissions (what permission syncing asks): a repository's explicit user permissions
  (`CloudRepo.users`: name → ``read``/``write``/``admin``);
  ``GET /2.0/repositories/{ws}/{slug}/permissions-config/users`` lists them as
  ``{"values": [{"type": "repository_user_permission", "user": {"uuid", "account_id",
  "display_name", …}, "permission", …}], "next"?}`` (only for an admin: a token without a user, a
  user in `admins`, or one with ``admin`` on the repository; others get 403);
  ``GET /2.0/user/permissions/repositories`` lists the caller's own
  ``{"values": [{"repository": {"uuid", "full_name", …}, "permission"}], "next"?}`` (401
  anonymous). Both page like the listings.
* auth: ``Bearer <token>`` (`tokens`: a set, or a dict token → user name) or Basic
  ``user:token`` (`basic`); anything else → 401 with
  ``WWW-Authenticate: Basic realm="Bitbucket.org HTTP"``; anonymous callers see public
  repositories only, and a private repository answers **403**; unknown workspace or repository
  → 404; errors are ``{"type":"error","error":{"message":…}}``. Users (`users`, made on first
  mention, `user_json`) have a ``uuid`` in braces, an ``account_id`` and a ``display_name``.
* rate limit on demand: 429 with ``X-RateLimit-*`` style headers (Bitbucket Cloud does not
  document ``Retry-After``; pass `retry_after` to add one).

Server (`FakeBitbucketServer`, API under ``<url>/rest/api/1.0``):
* ``GET /repos`` (``archived``=ACTIVE (default)|ARCHIVED|ALL, anonymous = public repositories),
  ``GET /projects/{KEY}/repos``, ``GET /projects/{KEY}/repos/{slug}``; pages
  ``{size, limit, isLastPage, start, values, nextPageStart?}`` with ``nextPageStart`` only when
  not the last page; ``limit`` capped at `page_size`.
* repository objects: ``id``, ``slug``, ``name``, ``project{key,…,type}``, ``public``,
  ``archived``, ``origin`` **only for forks**, ``links.clone`` (``http`` and ``ssh``),
  ``links.self`` ending in ``/browse``; no ``defaultBranch``.
* permissions (what permission syncing asks): project readers (`ServerProject.readers`, ``*``
  for any credential) and a repository's explicit user permissions (`ServerRepo.users`: name →
  ``REPO_READ``/``REPO_WRITE``/``REPO_ADMIN``);
  ``GET /projects/{KEY}/repos/{slug}/permissions/users`` pages the explicit ones as
  ``{"values": [{"user": {"name", "id", "slug", "displayName", …}, "permission"}]}`` (only for
  a token without a user, a user in `admins` or one with ``REPO_ADMIN``; others get 401);
  ``GET /repos?permission=REPO_READ|REPO_WRITE|REPO_ADMIN`` lists what the caller has at least
  that permission on (project readers count as ``REPO_READ``).
* auth: Bearer (`tokens`: a set, or a dict token → user name) or Basic (`basic`); bad
  credentials → 401; reading a project or repository without permission → **401**; unknown project or repository → 404; errors
  ``{"errors":[{"context":null,"message":…,"exceptionName":…}]}``.
* rate limit on demand: 429 with ``Retry-After``.

Both: `fail()` queues any answer for requests whose path starts with the given one.
"""

from __future__ import annotations

import os
import re
import urllib.parse
import uuid
from dataclasses import dataclass, field

from tests.fakehosts.server import FakeServer, basic_credentials, send, split_query
from tests.githttp import GitHttpServer, make_bare_repo


class _Base(FakeServer):
    """A fake that hands every GET to `route` and records the requests."""

    def __init__(self, root: str, tokens, basic: set[tuple[str, str]], page_size: int, admins=()):
        self.root = root
        #: token → its user's name (None: a token of no user, e.g. a workspace or project token)
        self.tokens: dict[str, str | None] = dict(tokens) if isinstance(tokens, dict) else dict.fromkeys(tokens)
        self.admins = set(admins)
        self.users: dict[str, dict] = {}
        self.basic = set(basic)
        self.page_size = page_size
        self._limit_headers: dict[str, str] = {}
        os.makedirs(os.path.join(root, "git"), exist_ok=True)
        self.git = GitHttpServer(os.path.join(root, "git"))
        super().__init__(owned=(self.git,))  # requests: (method, path, query, auth kind)
        self.base = self.base_url

    def limit_next(self, n: int, headers: dict[str, str] | None = None) -> None:
        self._limit_headers = dict(headers or {})
        super().limit_next(n)

    def _send(self, h, status: int, obj, headers: dict | None = None) -> None:
        send(h, status, obj, {"Content-Type": "application/json; charset=utf-8", **(headers or {})})

    def _auth(self, h) -> tuple[str, str | None]:
        """("anonymous" | "bearer" | "basic" | "bad", basic user)."""
        auth = h.headers.get("Authorization", "")
        if not auth:
            return "anonymous", None
        if auth.startswith("Bearer "):
            return ("bearer", self.tokens[auth[7:]]) if auth[7:] in self.tokens else ("bad", None)
        creds = basic_credentials(auth)
        return ("basic", creds[0]) if creds in self.basic else ("bad", None)

    def handle(self, h) -> None:
        raw_path, _, params = split_query(h.path)
        kind, user = self._auth(h)
        self.requests.append((h.command, raw_path, params, kind))
        if self._limited():
            self._rate_limited(h)
            return
        fault = self._fault(raw_path)  # `fail(status, path=…)`: `path` is the request path (``/2.0/…``, ``/rest/…``)
        if fault:
            status, headers, body = fault
            self._send(h, status, body, headers)
            return
        self.route(h, raw_path, params, kind, user)


# ------------------------------------------------------------------------------------------------ cloud

@dataclass
class CloudRepo:
    workspace: str
    slug: str
    project: str  # project key
    private: bool = False
    fork_of: str | None = None  # "workspace/slug" of the parent
    size: int = 1000
    mainbranch: str | None = "main"  # None: an empty repository (no mainbranch key)
    files: dict[str, str] = field(default_factory=dict)
    uuid: str = ""
    users: dict[str, str] = field(default_factory=dict)  # explicit permissions: user name → read|write|admin


class FakeBitbucketCloud(_Base):
    def __init__(self, root: str, repos: list[CloudRepo], *, workspaces: list[str] = (), tokens=(), basic=(),
                 page_size: int = 2, admins=()):
        super().__init__(root, tokens, set(basic), page_size, admins)
        self.url = f"{self.base}/2.0"
        self.workspaces = set(workspaces) | {r.workspace for r in repos}
        self.repos = {(r.workspace, r.slug): r for r in repos}
        for r in repos:
            r.uuid = r.uuid or "{" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"{r.workspace}/{r.slug}")) + "}"
            make_bare_repo(self.git.root, f"{r.workspace}/{r.slug}.git", r.files or {"README.md": f"# {r.slug}\n"},
                           default=r.mainbranch or "main")
            for name in r.users:
                self.user_json(name)
        for name in self.tokens.values():
            if name:
                self.user_json(name)

    def user_json(self, name: str) -> dict:
        """The API's user object of `name` (made on first use)."""
        if name not in self.users:
            self.users[name] = {
                "type": "user", "uuid": "{" + str(uuid.uuid5(uuid.NAMESPACE_OID, name)) + "}",
                "account_id": f"712020:{uuid.uuid5(uuid.NAMESPACE_X500, name)}", "nickname": name,
                "display_name": name.title(),
                "links": {"html": {"href": f"{self.base}/%7B{uuid.uuid5(uuid.NAMESPACE_OID, name)}%7D/"}}}
        return self.users[name]

    def user_uuid(self, name: str) -> str:
        return self.user_json(name)["uuid"]

    def _brief(self, r: CloudRepo) -> dict:
        return {"type": "repository", "full_name": f"{r.workspace}/{r.slug}", "name": r.slug.replace("-", " ").title(),
                "uuid": r.uuid, "links": {"self": {"href": f"{self.url}/repositories/{r.workspace}/{r.slug}"},
                                          "html": {"href": f"{self.base}/{r.workspace}/{r.slug}"}}}

    def _rate_limited(self, h) -> None:
        headers = {"X-RateLimit-Limit": "1000", "X-RateLimit-Resource": "api-repositories", "X-RateLimit-NearLimit": "true"}
        headers.update(self._limit_headers)
        self._send(h, 429, {"type": "error", "error": {"message": "Rate limit for this resource has been exceeded"}}, headers)

    def _error(self, h, status: int, message: str, headers: dict | None = None) -> None:
        self._send(h, status, {"type": "error", "error": {"message": message}}, headers)

    def repo_json(self, r: CloudRepo, user: str | None, with_parent: bool = True) -> dict:
        who = f"{user.split('@')[0]}@" if user else ""
        git_host = f"127.0.0.1:{self.git.port}"
        d = {
            "type": "repository",
            "uuid": r.uuid,
            "full_name": f"{r.workspace}/{r.slug}",
            "name": r.slug.replace("-", " ").title(),
            "slug": r.slug,
            "is_private": r.private,
            "scm": "git",
            "project": {"type": "project", "key": r.project, "name": r.project.title(), "uuid": "{" + str(uuid.uuid5(uuid.NAMESPACE_DNS, r.project)) + "}"},
            "workspace": {"type": "workspace", "slug": r.workspace, "name": r.workspace.title(), "uuid": "{" + str(uuid.uuid5(uuid.NAMESPACE_DNS, r.workspace)) + "}"},
            "owner": {"display_name": r.workspace.title(), "type": "team"},
            "links": {
                "self": {"href": f"{self.url}/repositories/{r.workspace}/{r.slug}"},
                "html": {"href": f"{self.base}/{r.workspace}/{r.slug}"},
                "clone": [
                    {"name": "https", "href": f"http://{who}{git_host}/{r.workspace}/{r.slug}.git"},
                    {"name": "ssh", "href": f"git@{git_host.split(':')[0]}:{r.workspace}/{r.slug}.git"},
                ],
            },
            "size": r.size,
            "language": "python",
            "created_on": "2024-01-01T00:00:00.000000+00:00",
            "updated_on": "2024-06-01T12:00:00.000000+00:00",
            "fork_policy": "allow_forks",
            "has_issues": False,
            "has_wiki": False,
        }
        if r.mainbranch:
            d["mainbranch"] = {"name": r.mainbranch, "type": "branch"}
        if r.fork_of and with_parent:
            pws, pslug = r.fork_of.split("/")
            parent = self.repos.get((pws, pslug))
            d["parent"] = {"type": "repository", "full_name": r.fork_of, "name": pslug,
                           "uuid": parent.uuid if parent else "{00000000-0000-0000-0000-000000000000}",
                           "links": {"html": {"href": f"{self.base}/{r.fork_of}"}}}
        return d

    def route(self, h, path: str, params: dict, kind: str, user: str | None) -> None:
        if kind == "bad":
            self._error(h, 401, "Invalid credentials", {"WWW-Authenticate": 'Basic realm="Bitbucket.org HTTP"'})
            return
        parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
        if parts == ["2.0", "user", "permissions", "repositories"]:
            if kind == "anonymous":
                self._error(h, 401, "Authentication required")
                return
            if user is None:
                self._error(h, 403, "This API is not accessible with a token of no user")
                return
            mine = [(r, r.users[user]) for _, r in sorted(self.repos.items()) if user in r.users]
            self._cloud_page(h, path, params, mine, lambda rp: {
                "type": "repository_permission", "user": self.user_json(user), "repository": self._brief(rp[0]),
                "permission": rp[1]})
            return
        if len(parts) == 6 and parts[:2] == ["2.0", "repositories"] and parts[4:] == ["permissions-config", "users"]:
            r = self.repos.get((parts[2], parts[3]))
            if r is None or (r.private and kind == "anonymous"):
                self._error(h, 404 if r is None else 403, f"Repository {parts[2]}/{parts[3]} not found")
                return
            if kind == "anonymous" or (user is not None and user not in self.admins and r.users.get(user) != "admin"):
                self._error(h, 403, "You do not have admin access to this repository")
                return
            self._cloud_page(h, path, params, sorted(r.users.items()), lambda up: {
                "type": "repository_user_permission", "permission": up[1], "user": self.user_json(up[0]),
                "repository": self._brief(r),
                "links": {"self": {"href": f"{self.url}/repositories/{r.workspace}/{r.slug}/permissions-config/users/"
                                           + urllib.parse.quote(self.user_json(up[0])["uuid"])}}})
            return
        if len(parts) < 3 or parts[:2] != ["2.0", "repositories"] or len(parts) > 4:
            self._error(h, 404, "Resource not found")
            return
        ws = parts[2]
        if ws not in self.workspaces:
            self._error(h, 404, f"No workspace with identifier '{ws}'.")
            return
        if len(parts) == 4:
            r = self.repos.get((ws, parts[3]))
            if r is None:
                self._error(h, 404, f"Repository {ws}/{parts[3]} not found")
            elif r.private and kind == "anonymous":
                self._error(h, 403, "Access denied. You must have read access to this repository.")
            else:
                self._send(h, 200, self.repo_json(r, user))
            return
        visible = [r for (w, _), r in sorted(self.repos.items()) if w == ws and (kind != "anonymous" or not r.private)]
        q = params.get("q", "")
        if q:
            m = re.fullmatch(r'\s*project\.key\s*=\s*"([^"]*)"\s*', q)
            if not m:
                self._error(h, 400, f"Invalid query: {q}")
                return
            visible = [r for r in visible if r.project == m.group(1)]
        self._cloud_page(h, path, params, visible, lambda r: self.repo_json(r, user))

    def _cloud_page(self, h, path: str, params: dict, visible: list, render) -> None:
        """One page (``page``, ``pagelen``) of `visible`, each item as `render` makes it."""
        try:
            pagelen = min(int(params.get("pagelen") or 10), 100, self.page_size)
            page = int(params.get("page") or 1)
        except ValueError:
            self._error(h, 400, "Invalid pagination parameter")
            return
        chunk = visible[(page - 1) * pagelen: page * pagelen]
        body = {"pagelen": pagelen, "size": len(visible), "page": page,
                "values": [render(r) for r in chunk]}
        if page * pagelen < len(visible):
            nq = {**params, "page": str(page + 1), "pagelen": str(pagelen)}
            body["next"] = f"{self.base}{path}?{urllib.parse.urlencode(nq)}"
        if page > 1:
            pq = {**params, "page": str(page - 1)}
            body["previous"] = f"{self.base}{path}?{urllib.parse.urlencode(pq)}"
        self._send(h, 200, body)


# ----------------------------------------------------------------------------------------------- server

@dataclass
class ServerRepo:
    project: str  # project key, "~ALICE" for a personal project
    slug: str
    public: bool = False
    archived: bool = False
    fork_of: str | None = None  # "KEY/slug"
    files: dict[str, str] = field(default_factory=dict)
    default_branch: str = "master"
    id: int = 0
    users: dict[str, str] = field(default_factory=dict)  # explicit permissions: user name → REPO_READ|REPO_WRITE|REPO_ADMIN
    groups: dict[str, str] = field(default_factory=dict)  # group permissions: group name → REPO_READ|…


@dataclass
class ServerProject:
    key: str
    public: bool = False
    readers: set[str] = field(default_factory=lambda: {"*"})  # basic users (or "*" any credential) that may read
    groups: dict[str, str] = field(default_factory=dict)  # group permissions: group name → PROJECT_READ|…


class FakeBitbucketServer(_Base):
    def __init__(self, root: str, projects: list[ServerProject], repos: list[ServerRepo], *, tokens=(), basic=(),
                 page_size: int = 2, admins=(), group_members: dict[str, set[str]] | None = None):
        super().__init__(root, tokens, set(basic), page_size, admins)
        self.url = self.base
        self.group_members = {g: set(m) for g, m in (group_members or {}).items()}
        self.projects = {p.key: p for p in projects}
        self.repos: dict[tuple[str, str], ServerRepo] = {}
        for i, r in enumerate(repos, start=1):
            r.id = r.id or i
            self.repos[(r.project, r.slug)] = r
            make_bare_repo(self.git.root, f"scm/{r.project.lower()}/{r.slug}.git", r.files or {"README.md": f"# {r.slug}\n"},
                           default=r.default_branch)
            for name in r.users:
                self.user_json(name)
        for name in self.tokens.values():
            if name:
                self.user_json(name)

    def user_json(self, name: str) -> dict:
        """The REST API's user object of `name` (made on first use; ids from 101)."""
        if name not in self.users:
            slug = name.lower()
            self.users[name] = {"name": name, "emailAddress": f"{slug}@example.com", "active": True,
                                "displayName": name.title(), "id": 101 + len(self.users), "slug": slug, "type": "NORMAL",
                                "links": {"self": [{"href": f"{self.base}/users/{slug}"}]}}
        return self.users[name]

    def user_id(self, name: str) -> int:
        return self.user_json(name)["id"]

    @property
    def users_by_id(self) -> dict[int, str]:
        return {u["id"]: name for name, u in self.users.items()}

    def _rate_limited(self, h) -> None:
        headers = {"Retry-After": "2", "X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0",
                   "X-RateLimit-Interval-Seconds": "1", "X-RateLimit-FillRate": "1"}
        headers.update(self._limit_headers)
        self._error(h, 429, "You have been rate limited.", "com.atlassian.bitbucket.ratelimit.RateLimitedException", headers)

    def _error(self, h, status: int, message: str, exception: str, headers: dict | None = None) -> None:
        self._send(h, status, {"errors": [{"context": None, "message": message, "exceptionName": exception}]}, headers)

    def _can_read(self, r: ServerRepo, kind: str, user: str | None) -> bool:
        p = self.projects.get(r.project)
        if r.public or (p and p.public):
            return True
        if kind == "anonymous":
            return False
        readers = p.readers if p else {"*"}
        groups = set(r.groups) | set(p.groups if p else ())
        return "*" in readers or (user is not None and (user in readers or user in r.users or any(
            user in self.group_members.get(g, ()) for g in groups)))

    _LEVELS = ("REPO_READ", "REPO_WRITE", "REPO_ADMIN")

    def _has(self, r: ServerRepo, kind: str, user: str | None, permission: str) -> bool:
        """Whether the caller has at least `permission` on `r` (a token of no user: every one)."""
        if permission == "REPO_READ":
            return self._can_read(r, kind, user)
        if kind == "anonymous":
            return False
        if user is None or user in self.admins:
            return True
        have = r.users.get(user)
        return have in self._LEVELS and self._LEVELS.index(have) >= self._LEVELS.index(permission)

    def repo_json(self, r: ServerRepo, with_origin: bool = True) -> dict:
        p = self.projects.get(r.project) or ServerProject(r.project)
        personal = r.project.startswith("~")
        d = {
            "slug": r.slug,
            "id": r.id,
            "name": r.slug.replace("-", " ").title(),
            "hierarchyId": f"{r.id:020x}",
            "scmId": "git",
            "state": "AVAILABLE",
            "statusMessage": "Available",
            "forkable": True,
            "project": {"key": r.project, "id": abs(hash(r.project)) % 1000, "name": r.project.strip("~").title(),
                        "public": p.public, "type": "PERSONAL" if personal else "NORMAL",
                        "links": {"self": [{"href": f"{self.base}/{'users/' + r.project[1:].lower() if personal else 'projects/' + r.project}"}]}},
            "public": r.public,
            "archived": r.archived,
            "links": {
                "clone": [
                    {"href": f"http://127.0.0.1:{self.git.port}/scm/{r.project.lower()}/{r.slug}.git", "name": "http"},
                    {"href": f"ssh://git@127.0.0.1:7999/{r.project.lower()}/{r.slug}.git", "name": "ssh"},
                ],
                "self": [{"href": f"{self.base}/{'users/' + r.project[1:].lower() if personal else 'projects/' + r.project}/repos/{r.slug}/browse"}],
            },
        }
        if r.fork_of and with_origin:
            key, slug = r.fork_of.split("/")
            upstream = self.repos.get((key, slug))
            if upstream is not None:
                d["origin"] = self.repo_json(upstream, with_origin=False)
        return d

    def _page(self, h, items: list, params: dict, render=None) -> None:
        try:
            start = int(params.get("start") or 0)
            limit = min(int(params.get("limit") or 25), self.page_size)
        except ValueError:
            self._error(h, 400, "Invalid start or limit", "com.atlassian.bitbucket.rest.BadRequestException")
            return
        chunk = items[start:start + limit]
        last = start + limit >= len(items)
        body = {"size": len(chunk), "limit": limit, "isLastPage": last, "start": start,
                "values": [(render or self.repo_json)(r) for r in chunk]}
        if not last:
            body["nextPageStart"] = start + len(chunk)
        self._send(h, 200, body)

    def route(self, h, path: str, params: dict, kind: str, user: str | None) -> None:
        if kind == "bad":
            self._error(h, 401, "Authentication failed. Please check your credentials and try again.",
                        "com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException")
            return
        parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
        if parts[:3] != ["rest", "api", "1.0"]:
            self._error(h, 404, "Not found", "com.atlassian.bitbucket.NotFoundException")
            return
        parts = parts[3:]
        if parts == ["repos"]:
            archived = params.get("archived", "ACTIVE")
            permission = params.get("permission", "REPO_READ")
            if permission not in self._LEVELS:
                self._error(h, 400, f"Invalid permission {permission}", "com.atlassian.bitbucket.rest.BadRequestException")
                return
            items = [r for _, r in sorted(self.repos.items()) if self._has(r, kind, user, permission)
                     and (archived == "ALL" or r.archived == (archived == "ARCHIVED"))]
            self._page(h, items, params)
            return
        if (len(parts) == 6 and parts[0] == "projects" and parts[2] == "repos" and parts[4] == "permissions"
                and parts[5] in ("users", "groups")):
            r = self.repos.get((parts[1], parts[3]))
            if r is None:
                self._error(h, 404, f"Repository {parts[1]}/{parts[3]} does not exist.",
                            "com.atlassian.bitbucket.repository.NoSuchRepositoryException")
            elif not self._has(r, kind, user, "REPO_ADMIN"):
                self._error(h, 401, "You are not permitted to access this resource",
                            "com.atlassian.bitbucket.AuthorisationException")
            elif parts[5] == "users":
                self._page(h, sorted(r.users.items()), params,
                           lambda up: {"user": self.user_json(up[0]), "permission": up[1]})
            else:
                self._page(h, sorted(r.groups.items()), params, lambda gp: {"group": {"name": gp[0]}, "permission": gp[1]})
            return
        if len(parts) == 4 and parts[0] == "projects" and parts[2] == "permissions" and parts[3] in ("users", "groups"):
            p = self.projects.get(parts[1])
            if p is None:
                self._error(h, 404, f"Project {parts[1]} does not exist.", "com.atlassian.bitbucket.project.NoSuchProjectException")
            elif kind == "anonymous" or (user is not None and user not in self.admins):
                self._error(h, 401, "You are not permitted to access this resource",
                            "com.atlassian.bitbucket.AuthorisationException")
            elif parts[3] == "users":
                self._page(h, sorted(n for n in p.readers if n != "*"), params,
                           lambda n: {"user": self.user_json(n), "permission": "PROJECT_READ"})
            else:
                self._page(h, sorted(p.groups.items()), params, lambda gp: {"group": {"name": gp[0]}, "permission": gp[1]})
            return
        if parts == ["admin", "groups", "more-members"]:
            group = params.get("context") or ""
            if kind == "anonymous":
                self._error(h, 401, "You are not permitted to access this resource",
                            "com.atlassian.bitbucket.AuthorisationException")
            elif group not in self.group_members:
                self._error(h, 404, f"Group {group} does not exist.", "com.atlassian.bitbucket.user.NoSuchGroupException")
            else:
                self._page(h, sorted(self.group_members[group]), params, self.user_json)
            return
        if len(parts) in (3, 4) and parts[0] == "projects" and parts[2] == "repos":
            key = parts[1]
            if key not in self.projects:
                self._error(h, 404, f"Project {key} does not exist.", "com.atlassian.bitbucket.project.NoSuchProjectException")
                return
            if len(parts) == 4:
                r = self.repos.get((key, parts[3]))
                if r is None:
                    self._error(h, 404, f"Repository {key}/{parts[3]} does not exist.",
                                "com.atlassian.bitbucket.repository.NoSuchRepositoryException")
                elif not self._can_read(r, kind, user):
                    self._error(h, 401, "You are not permitted to access this resource",
                                "com.atlassian.bitbucket.AuthorisationException")
                else:
                    self._send(h, 200, self.repo_json(r))
                return
            p = self.projects[key]
            repos = [r for (k, _), r in sorted(self.repos.items()) if k == key]
            visible = [r for r in repos if self._can_read(r, kind, user)]
            if not visible and not p.public and (kind == "anonymous" or not ("*" in p.readers or user in p.readers)):
                self._error(h, 401, "You are not permitted to access this resource",
                            "com.atlassian.bitbucket.AuthorisationException")
                return
            self._page(h, visible, params)
            return
        self._error(h, 404, "Not found", "com.atlassian.bitbucket.NotFoundException")
