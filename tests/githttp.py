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

import base64
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class GitHttpServer:
    def __init__(self, root: str, users: set[tuple[str, str]] | None = None):
        self.root = root
        self.users = users
        self.requests: list[tuple[str, str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                self._serve()

            def do_POST(self):
                self._serve()

            def _serve(self):
                user = server._authenticate(self.headers.get("Authorization", ""))
                path, _, query = self.path.partition("?")
                server.requests.append((self.command, path, user or ""))
                if server.users is not None and user is None:
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Type", "text/plain")
                    self.end_headers()
                    self.wfile.write(b"authentication required\n")
                    return
                path = server._map_path(path)
                length = int(self.headers.get("Content-Length") or 0)
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    body = self._read_chunked()
                else:
                    body = self.rfile.read(length) if length else b""
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GIT_PROJECT_ROOT": server.root,
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "REQUEST_METHOD": self.command,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "REMOTE_USER": user or "",
                    "REMOTE_ADDR": self.client_address[0],
                    "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                    "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
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
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)

            def _read_chunked(self) -> bytes:
                data = b""
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def _authenticate(self, header: str) -> str | None:
        if not header.startswith("Basic "):
            return None
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return None
        if self.users is None or (user, password) in self.users:
            return user
        return None

    def _map_path(self, path: str) -> str:
        """Accept /owner/repo and /owner/repo.git for a bare repo stored as owner/repo.git."""
        for suffix in ("/info/refs", "/git-upload-pack", "/git-receive-pack", "/HEAD"):
            if path.endswith(suffix):
                repo = path[: -len(suffix)]
                if not repo.endswith(".git") and os.path.isdir(os.path.join(self.root, repo.lstrip("/") + ".git")):
                    return repo + ".git" + suffix
        return path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base_url}/{path.lstrip('/')}"

    def start(self) -> "GitHttpServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def make_bare_repo(root: str, path: str, files: dict[str, str], branches: dict[str, dict[str, str]] | None = None,
                   tags: list[str] = (), default: str = "main") -> str:
    """Create `root/path` (a bare repo) with a first commit of `files` on `default`, extra branches
    (each: files changed on top of the first commit) and lightweight tags on the first commit."""
    import tempfile

    from tests.corpus import git

    bare = os.path.join(root, path)
    with tempfile.TemporaryDirectory() as work:
        git(work, "init", "-q", "-b", default)
        for name, text in files.items():
            full = os.path.join(work, name)
            os.makedirs(os.path.dirname(full) or work, exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", "initial")
        for t in tags:
            git(work, "tag", t)
        for branch, changes in (branches or {}).items():
            git(work, "checkout", "-q", "-b", branch, default)
            for name, text in changes.items():
                full = os.path.join(work, name)
                os.makedirs(os.path.dirname(full) or work, exist_ok=True)
                with open(full, "w") as f:
                    f.write(text)
            git(work, "add", "-A")
            git(work, "commit", "-q", "-m", f"on {branch}")
        git(work, "checkout", "-q", default)
        os.makedirs(os.path.dirname(bare), exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--bare", work, bare], check=True, capture_output=True)
    return bare
