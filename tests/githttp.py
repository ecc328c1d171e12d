"""A real git smart-HTTP server for tests: `git http-backend` behind a small threaded server.

Serves every bare repository under `root` at ``http://127.0.0.1:<port>/<path>`` (``.git``
optional in URLs, as on real hosts). With `users` set, every request needs HTTP Basic auth
with one of the (user, password) pairs, and a request without it gets 401 with
``WWW-Authenticate: Basic`` so git's askpass / credential helpers are exercised for real;
wrong credentials get 401 too. `requests` records (method, path, user) for assertions.

    with GitHttpServer(root, users={("x-access-token", "tok")}) as srv:
        srv.url("acme/widgets.git")
"""

from __future__ import annotations

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler

from tests.fakehosts.server import GIT_SUFFIXES, FakeServer, basic_credentials, read_body


class GitHttpServer(FakeServer):
    methods = ("GET", "POST")
    protocol_version = "HTTP/1.0"
    disable_nagle_algorithm = False
    poll_interval = 0.5

    def __init__(self, root: str, users: set[tuple[str, str]] | None = None):
        self.root = root
        self.users = users
        super().__init__()  # requests: (method, path, user)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        user = self._authenticate(h.headers.get("Authorization", ""))
        path, _, query = h.path.partition("?")
        self.requests.append((h.command, path, user or ""))
        if self.users is not None and user is None:
            h.send_response(401)
            h.send_header("WWW-Authenticate", 'Basic realm="git"')
            h.send_header("Content-Type", "text/plain")
            h.end_headers()
            h.wfile.write(b"authentication required\n")
            return
        path = self._map_path(path)
        body = read_body(h)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": h.command,
            "CONTENT_TYPE": h.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user or "",
            "REMOTE_ADDR": h.client_address[0],
            "GIT_PROTOCOL": h.headers.get("Git-Protocol", ""),
            "HTTP_CONTENT_ENCODING": h.headers.get("Content-Encoding", ""),
            "SERVER_PROTOCOL": "HTTP/1.0",
            "GATEWAY_INTERFACE": "CGI/1.1",
        }
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.strip().split()[0])
            elif k:
                headers.append((k, v.strip()))
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)

    def _authenticate(self, header: str) -> str | None:
        creds = basic_credentials(header)
        if creds is not None and (self.users is None or creds in self.users):
            return creds[0]
        return None

    def _map_path(self, path: str) -> str:
        """Accept /owner/repo and /owner/repo.git for a bare repo stored as owner/repo.git."""
        for suffix in GIT_SUFFIXES:
            if path.endswith(suffix):
                repo = path[: -len(suffix)]
                if not repo.endswith(".git") and os.path.isdir(os.path.join(self.root, repo.lstrip("/") + ".git")):
                    return repo + ".git" + suffix
        return path

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"


class GatedGitHttp(GitHttpServer):
    """Git smart HTTP that answers nothing until `gate` is set (then everything, as usual): a
    slow clone or fetch that the test, not a race, decides the end of. A request waits at most
    `gate_s` seconds."""

    def __init__(self, root: str, gate_s: float = 240.0):
        self.gate = threading.Event()
        self.gate_s = gate_s
        super().__init__(root)

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        self.gate.wait(self.gate_s)
        super().handle(h)


def make_bare_repo(root: str, path: str, files: dict[str, str], branches: dict[str, dict[str, str]] | None = None,
                   tags: list[str] = (), default: str = "main") -> str:
    """Create `root/path` (a bare repo) with a first commit of `files` on `default`, extra branches
    (each: files changed on top of the first commit) and lightweight tags on the first commit."""
    import tempfile

    from tests.corpus import git

    bare = os.path.join(root, path)
    with tempfile.TemporaryDirectory() as work:
        git(work, "init", "-q", "-b", default)
        _write(work, files)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", "initial")
        for t in tags:
            git(work, "tag", t)
        for branch, changes in (branches or {}).items():
            git(work, "checkout", "-q", "-b", branch, default)
            _write(work, changes)
            git(work, "add", "-A")
            git(work, "commit", "-q", "-m", f"on {branch}")
        git(work, "checkout", "-q", default)
        os.makedirs(os.path.dirname(bare), exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--bare", work, bare], check=True, capture_output=True)
    return bare


def _write(work: str, files: dict[str, str]) -> None:
    for name, text in files.items():
        full = os.path.join(work, name)
        os.makedirs(os.path.dirname(full) or work, exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
