"""The plumbing every fake host shares: a threaded HTTP server on ``127.0.0.1`` (port chosen by the
OS), request recording, queued faults and rate limits, and small answer helpers.

    class FakeThing(FakeServer):
        def handle(self, h):              # every request (GET, and POST when in `methods`)
            send(h, 200, {"ok": True}, {"Content-Type": "application/json"})

    with FakeThing() as fake:
        fake.base_url                     # http://127.0.0.1:<port>

A subclass either overrides `handle` or implements `_answer(h) -> (status, headers, body)`, which
the default `handle` sends with `content_type` unless the headers name one. Servers in `owned`
(a `tests.githttp.GitHttpServer` behind the fake) are started before it and stopped after it.
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: the paths of git's smart-HTTP protocol (and dumb HEAD)
GIT_SUFFIXES = ("/info/refs", "/git-upload-pack", "/git-receive-pack", "/HEAD")


class FakeServer:
    #: HTTP methods answered by `handle` (others get the standard library's 501)
    methods: tuple[str, ...] = ("GET",)
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    poll_interval = 0.05
    #: the REST API's path prefix (``/api/v3`` …) under `base_url`
    api_prefix = ""
    #: the last id handed out by `_id`
    _next_id = 0
    #: Content-Type of `_answer` results that do not set one
    content_type = "application/json"

    def __init__(self, owned: tuple = ()):
        self.owned = list(owned)
        self.requests: list[tuple] = []
        self._faults: list[dict] = []
        self._limit = 0
        self._lock = threading.Lock()
        server = self
        attrs = {"protocol_version": self.protocol_version, "disable_nagle_algorithm": self.disable_nagle_algorithm,
                 "log_message": lambda self, *args: None}
        for method in self.methods:
            attrs["do_" + method] = lambda self: server.handle(self)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (BaseHTTPRequestHandler,), attrs))
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": self.poll_interval},
                                       daemon=True)

    @property
    def base_url(self) -> str:
        """The host's web address (a connection's `url`)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return self.base_url + self.api_prefix

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    # -- answers ----------------------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        status, headers, body = self._answer(h)
        headers.setdefault("Content-Type", self.content_type)
        send(h, status, body, headers)

    def _answer(self, h: BaseHTTPRequestHandler) -> tuple[int, dict, object]:
        raise NotImplementedError

    # -- faults -----------------------------------------------------------------------------

    def fail(self, status: int, *, times: int = 1, path: str = "", headers: dict | None = None, body=None) -> None:
        """Answer the next `times` requests whose API path starts with `path` with `status`."""
        self._faults.append({"status": status, "times": times, "path": path, "headers": headers or {},
                             "body": body if body is not None else self._fault_body(status)})

    def _fault_body(self, status: int) -> object:
        """The body of a `fail()` answer given none."""
        return {"message": "Server Error", "status": str(status)}

    def _fault(self, path: str) -> tuple[int, dict, object] | None:
        """The queued fault for `path` (used up once), or None."""
        with self._lock:
            for f in self._faults:
                if f["times"] > 0 and path.startswith(f["path"]):
                    f["times"] -= 1
                    return f["status"], dict(f["headers"]), f["body"]
        return None

    def limit_next(self, n: int) -> None:
        """Rate-limit the next `n` requests (each fake says how it answers them)."""
        with self._lock:
            self._limit = n

    def _limited(self) -> bool:
        """True (and one fewer to go) while `limit_next` requests remain."""
        with self._lock:
            limited = self._limit > 0
            if limited:
                self._limit -= 1
        return limited

    def reset(self) -> None:
        """Forget recorded requests and pending faults (between tests sharing one fake)."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()

    def api_paths(self) -> list[str]:
        return [r[1] for r in self.requests]

    # -- lifecycle --------------------------------------------------------------------------

    def start(self):
        for s in self.owned:
            s.start()
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        for s in self.owned:
            s.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def send(h: BaseHTTPRequestHandler, status: int, body=b"", headers: dict | list[tuple[str, str]] | None = None) -> None:
    """Answer `status` with `headers` (a dict or (name, value) pairs) and `body` (bytes as they are,
    anything else as JSON), and a Content-Length."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    h.send_response(status)
    for k, v in (headers.items() if isinstance(headers, dict) else headers or ()):
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def split_query(path: str) -> tuple[str, str, dict[str, str]]:
    """(raw path, query string, {name: last value}) of a request path."""
    raw_path, _, query = path.partition("?")
    return raw_path, query, {k: v[-1] for k, v in urllib.parse.parse_qs(query, keep_blank_values=True).items()}


def basic_credentials(header: str) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic …`` header, None for anything else."""
    if not header.startswith("Basic "):
        return None
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return None
    return user, password


def read_body(h: BaseHTTPRequestHandler) -> bytes:
    """The request body, chunked or with Content-Length."""
    if h.headers.get("Transfer-Encoding", "").lower() != "chunked":
        return h.rfile.read(int(h.headers.get("Content-Length") or 0))
    data = b""
    while True:
        size = int(h.rfile.readline().strip().split(b";")[0], 16)
        if size == 0:
            h.rfile.readline()
            return data
        data += h.rfile.read(size)
        h.rfile.readline()


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
    send(handler, status, payload, {h: headers[h] for h in ("Content-Type", "Cache-Control", "WWW-Authenticate")
                                    if headers.get(h)})
