"""A fake Gerrit: the project listing of the REST API and git over smart HTTP.

    with FakeGerrit(tmp, [GerritProject("platform/build"), GerritProject("old", state="READ_ONLY")]) as g:
        g.url                      # http://127.0.0.1:<port>
        g.requests                 # [(method, path, query dict, user)]

What it does like the real server:
* ``GET /projects/`` answers ``)]}'`` + newline + a compact JSON object keyed by project name
  (sorted), entries without ``name``, ``id`` URL-encoded (``platform%2Fbuild``), ``state``,
  ``description`` only with ``d``, ``web_links`` with a *relative* gitiles URL; ``n`` (limit),
  ``S`` (skip), ``p`` (prefix) are honoured; HIDDEN projects only with ``all``; ``All-Projects``
  and ``All-Users`` always exist; no limit unless ``n`` is given.
* ``GET /projects/{name}`` (the name URL-encoded) answers one ProjectInfo, with ``name``.
* errors are plain text (``Not found: x``); ``/a/…`` needs Basic auth (HTTP password of
  `users`) and answers 401 with a Basic challenge otherwise.
* git: ``/{project}`` and ``/a/{project}`` (``.git`` optional) are served by a real
  `tests.githttp.GitHttpServer` behind this server (requests are proxied), over bare
  repositories made with `make_bare_repo`, so a clone of ``<url>/<project>`` works.
* `prefix` puts the whole server under a context path (``http://127.0.0.1:<port>/r``);
* rate limiting on demand: `limit_next(n, retry_after)` answers the next n API requests with 429.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.fakehosts.server import GIT_SUFFIXES, FakeServer, basic_credentials, proxy_git, send, split_query
from tests.githttp import GitHttpServer, make_bare_repo

__all__ = ["GIT_SUFFIXES", "FakeGerrit", "GerritProject", "proxy_git"]


@dataclass
class GerritProject:
    name: str
    state: str = "ACTIVE"  # ACTIVE | READ_ONLY | HIDDEN
    description: str = ""
    parent: str = "All-Projects"
    files: dict[str, str] = field(default_factory=dict)
    default_branch: str = "master"


class FakeGerrit(FakeServer):
    methods = ("GET", "POST")

    def __init__(self, root: str, projects: list[GerritProject], *, users: set[tuple[str, str]] | None = None,
                 gitiles: bool = True, prefix: str = ""):
        self.root = root
        self.prefix = prefix.rstrip("/")  # a context path, e.g. "/r": the server lives at <host>/r/
        self.gitiles = gitiles
        self.users = users or set()
        self.projects: dict[str, GerritProject] = {}
        for p in [GerritProject("All-Projects", parent=""), GerritProject("All-Users")] + list(projects):
            self.projects[p.name] = p
        self._retry_after = "1"
        git_root = os.path.join(root, "gerrit-git")
        os.makedirs(git_root, exist_ok=True)
        for p in projects:
            make_bare_repo(git_root, p.name + ".git", p.files or {"README.md": f"# {p.name}\n"}, default=p.default_branch)
        self.git = GitHttpServer(git_root)
        super().__init__(owned=(self.git,))  # requests: (method, path, query dict, user)
        self.url = f"{self.base_url}{self.prefix}"

    # -- control
    def limit_next(self, n: int, retry_after: str = "1") -> None:
        self._retry_after = retry_after
        super().limit_next(n)

    # -- plumbing
    def _user(self, h: BaseHTTPRequestHandler) -> str | None:
        creds = basic_credentials(h.headers.get("Authorization", ""))
        return creds[0] if creds in self.users else None

    def _text(self, h, status: int, text: str, extra: dict | None = None) -> None:
        send(h, status, text.encode(), {"Content-Type": "text/plain;charset=utf-8", **(extra or {})})

    def _json(self, h, obj) -> None:
        send(h, 200, (")]}'\n" + json.dumps(obj, separators=(",", ":"))).encode(),
             {"Content-Type": "application/json; charset=UTF-8", "Content-Disposition": "attachment",
              "X-Content-Type-Options": "nosniff"})

    def _info(self, p: GerritProject, with_name: bool, description: bool) -> dict:
        info: dict = {}
        if with_name:
            info["name"] = p.name
        info["id"] = urllib.parse.quote(p.name, safe="")
        if p.parent:
            info["parent"] = p.parent
        if description and p.description:
            info["description"] = p.description
        info["state"] = p.state
        if self.gitiles and not p.name.startswith("All-"):
            info["web_links"] = [{"name": "browse", "url": f"/plugins/gitiles/{p.name}", "target": "_blank"}]
        return info

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        raw_path, query, params = split_query(h.path)
        if self.prefix:
            if not raw_path.startswith(self.prefix + "/"):
                self._text(h, 404, "Not Found")
                return
            raw_path = raw_path[len(self.prefix):]
        path = urllib.parse.unquote(raw_path)
        user = self._user(h)
        self.requests.append((h.command, raw_path, params, user or ""))
        authed = path.startswith("/a/")
        if authed:
            if user is None:
                self._text(h, 401, "Unauthorized", {"WWW-Authenticate": 'Basic realm="Gerrit Code Review"'})
                return
            path = path[2:]
        if path.endswith(GIT_SUFFIXES):
            proxy_git(h, self.git.url(path) + (f"?{query}" if query else ""))
            return
        if self._limited():
            self._text(h, 429, "Too many requests", {"Retry-After": self._retry_after})
            return
        if h.command != "GET":
            self._text(h, 405, "Method Not Allowed")
            return
        if path in ("/projects/", "/projects"):
            self._list(h, params)
            return
        if path.startswith("/projects/"):
            name = urllib.parse.unquote(raw_path[len("/a") if authed else 0:][len("/projects/"):])
            p = self.projects.get(name)
            if p is None or (p.state == "HIDDEN"):
                self._text(h, 404, f"Not found: {name}")
                return
            self._json(h, self._info(p, True, True))
            return
        self._text(h, 404, "Not Found")

    def _list(self, h, params: dict) -> None:
        names = sorted(self.projects)
        if "all" not in params:
            names = [n for n in names if self.projects[n].state != "HIDDEN"]
        if params.get("p"):
            names = [n for n in names if n.startswith(params["p"])]
        if params.get("state"):
            names = [n for n in names if self.projects[n].state == params["state"]]
        try:
            skip = int(params.get("S") or 0)
            limit = int(params["n"]) if params.get("n") else None
        except ValueError:
            self._text(h, 400, "invalid value for n or S")
            return
        names = names[skip:]
        if limit is not None and limit > 0:
            names = names[:limit]
        self._json(h, {n: self._info(self.projects[n], False, "d" in params) for n in names})
