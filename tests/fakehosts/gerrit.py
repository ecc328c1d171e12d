"""A fake Gerrit: the project listing of the REST API and git over smart HTTP (HOSTS.md §4).

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

import base64
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.githttp import GitHttpServer, make_bare_repo

GIT_SUFFIXES = ("/info/refs", "/git-upload-pack", "/git-receive-pack", "/HEAD")


@dataclass
class GerritProject:
    name: str
    state: str = "ACTIVE"  # ACTIVE | READ_ONLY | HIDDEN
    description: str = ""
    parent: str = "All-Projects"
    files: dict[str, str] = field(default_factory=dict)
    default_branch: str = "master"


def proxy_git(handler: BaseHTTPRequestHandler, target_url: str) -> None:
    """Relay one git smart-HTTP request to `target_url` and its answer back (status, type, body)."""
    length = int(handler.headers.get("Content-Length") or 0)
    body = handler.rfile.read(length) if length else None
    req = urllib.request.Request(target_url, data=body, method=handler.command)
    for h in ("Content-Type", "Git-Protocol", "Content-Encoding", "Accept", "Authorization"):
        if handler.headers.get(h):
            req.add_header(h, handler.headers[h])
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, headers, payload = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, headers, payload = e.code, e.headers, e.read()
    handler.send_response(status)
    for h in ("Content-Type", "Cache-Control", "WWW-Authenticate"):
        if headers.get(h):
            handler.send_header(h, headers[h])
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


class FakeGerrit:
    def __init__(self, root: str, projects: list[GerritProject], *, users: set[tuple[str, str]] | None = None,
                 gitiles: bool = True, prefix: str = ""):
        self.root = root
        self.prefix = prefix.rstrip("/")  # a context path, e.g. "/r": the server lives at <host>/r/
        self.gitiles = gitiles
        self.users = users or set()
        self.requests: list[tuple[str, str, dict, str]] = []
        self.projects: dict[str, GerritProject] = {}
        for p in [GerritProject("All-Projects", parent=""), GerritProject("All-Users")] + list(projects):
            self.projects[p.name] = p
        self._limit = 0
        self._retry_after = "1"
        self._lock = threading.Lock()
        git_root = os.path.join(root, "gerrit-git")
        os.makedirs(git_root, exist_ok=True)
        for p in projects:
            make_bare_repo(git_root, p.name + ".git", p.files or {"README.md": f"# {p.name}\n"}, default=p.default_branch)
        self.git = GitHttpServer(git_root)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go in separate writes

            def log_message(self, *args):
                pass

            def do_GET(self):
                fake._handle(self)

            def do_POST(self):
                fake._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{self.prefix}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # -- control
    def limit_next(self, n: int, retry_after: str = "1") -> None:
        with self._lock:
            self._limit, self._retry_after = n, retry_after

    # -- plumbing
    def _user(self, h: BaseHTTPRequestHandler) -> str | None:
        auth = h.headers.get("Authorization", "")
        if not auth.startswith("Basic "):
            return None
        try:
            user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
        except ValueError:
            return None
        return user if (user, pw) in self.users else None

    def _text(self, h, status: int, text: str, extra: dict | None = None) -> None:
        data = text.encode()
        h.send_response(status)
        h.send_header("Content-Type", "text/plain;charset=utf-8")
        h.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)

    def _json(self, h, obj) -> None:
        data = (")]}'\n" + json.dumps(obj, separators=(",", ":"))).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json; charset=UTF-8")
        h.send_header("Content-Disposition", 'attachment')
        h.send_header("X-Content-Type-Options", "nosniff")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

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

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw_path, _, query = h.path.partition("?")
        if self.prefix:
            if not raw_path.startswith(self.prefix + "/"):
                self._text(h, 404, "Not Found")
                return
            raw_path = raw_path[len(self.prefix):]
        path = urllib.parse.unquote(raw_path)
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(query, keep_blank_values=True).items()}
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
        with self._lock:
            limited = self._limit > 0
            if limited:
                self._limit -= 1
        if limited:
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

    # -- lifecycle
    def __enter__(self) -> "FakeGerrit":
        self.git.start()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.git.stop()
