"""What one request may cost the replica before any route runs: a pure ASGI middleware.

A Serve replica serves a bounded number of requests at once (``max_ongoing_requests``). A
client that opens a request and never finishes its body holds one of those places for as long
as it likes, and a few dozen such clients used to stall every route, ``/api/health`` included.
So, for every request that carries a body:

1. **Credentials before the body.** On a protected API route (``/api/…`` except health,
   version and the OpenAPI document) the caller is identified from the headers alone (an API
   key, or the web session cookie with its CSRF header); without valid credentials, and with
   anonymous access off, the answer is 401 (or the 403 of a key that may not be used) at once,
   without reading a byte of the body. The
   identity found is left in ``scope["state"]["identity_checked"]`` for the route's dependency.
2. **A size limit.** A ``Content-Length`` above `RequestLimits.max_body_bytes` is answered 413
   at once; a chunked body is cut off (413) as soon as it passes the limit.
3. **A read timeout.** The whole body must arrive within `RequestLimits.body_timeout_s`
   seconds, else 408. The body is then handed to the route from memory.

``GET`` and ``DELETE`` on the MCP endpoint answer 405 at once: the server is stateless, so it
has no standalone stream for a ``GET`` to hold open, and no session for a ``DELETE`` to end.

Every refusal has the JSON error shape of every other error (``{statusCode, errorCode,
message}``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Protocol

import anyio

from codesearch.errors import NotAuthenticated
from codesearch.service.middleware.proxy_body import SCOPE_KEY as BODY_AHEAD

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from codesearch.permissions import Identity


class Authenticator(Protocol):
    """Who checks a request's credentials before its body is read (`codesearch.service.auth.Authenticator`)."""

    async def identify_request_async(self, request: Request) -> Identity:
        """The caller, or `NotAuthenticated`."""
        ...

    def challenge(self, scope: Scope, exc: NotAuthenticated | None = None) -> str:
        """The ``WWW-Authenticate`` value of a 401 at the MCP endpoint."""
        ...


#: Bodies larger than this are refused (bytes). Search, MCP and form bodies are a few KB.
MAX_BODY_BYTES = 1 << 20
#: Seconds the whole body may take to arrive.
BODY_TIMEOUT_S = 10.0
#: API routes anyone may call.
PUBLIC_API_PATHS = frozenset({"/api/health", "/api/version", "/api/openapi.json"})
#: API routes that authenticate by themselves: code hosts' webhooks carry a signature, not a key.
SELF_AUTHENTICATED_PREFIXES = ("/api/webhooks/",)
MCP_PATH = "/api/mcp"


async def send_error(send: Send, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
    """Send a complete JSON error response in the shape of docs/http-api.md#errors."""
    body = json.dumps({"statusCode": status, "errorCode": code, "message": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class _Refused(Exception):
    def __init__(self, status: int, code: str, message: str, challenge: str = "Bearer") -> None:
        self.status, self.code, self.message, self.challenge = status, code, message, challenge


class RequestLimits:
    """The middleware (see the module docstring). `authenticator` is the app's
    `auth.Authenticator` (None: no credentials are checked here)."""

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        body_timeout_s: float = BODY_TIMEOUT_S,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method: str = scope["method"].upper()
        path = route_path(scope)
        if path.rstrip("/") == MCP_PATH and method in ("GET", "DELETE"):
            await send_error(
                send,
                405,
                "METHOD_NOT_ALLOWED",
                f"{method} is not allowed on {MCP_PATH}: this MCP server is stateless, send POST requests",
                {"Allow": "POST"},
            )
            return
        if method in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        try:
            declared = _content_length(scope)
            if declared is not None and declared > self.max_body_bytes:
                raise _Refused(
                    413,
                    "REQUEST_BODY_TOO_LARGE",
                    f"the request body is {declared} bytes; at most {self.max_body_bytes} are accepted",
                )
            if (
                self.authenticator is not None
                and path.startswith("/api/")
                and path not in PUBLIC_API_PATHS
                and not path.startswith(SELF_AUTHENTICATED_PREFIXES)
            ):
                await self._identify(self.authenticator, scope)
            ahead = scope.get(BODY_AHEAD)
            if isinstance(ahead, bytes) and len(ahead) == declared:  # sent with the request by the proxy
                if len(ahead) > self.max_body_bytes:
                    raise _Refused(
                        413,
                        "REQUEST_BODY_TOO_LARGE",
                        f"the request body is {len(ahead)} bytes; at most {self.max_body_bytes} are accepted",
                    )
                body, receive = ahead, _without_body(receive)
            else:
                body = await self._read_body(receive)
        except _Refused as r:
            headers = {"WWW-Authenticate": r.challenge} if r.status == 401 else {"Connection": "close"}
            await send_error(send, r.status, r.code, r.message, headers)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _identify(self, authenticator: Authenticator, scope: Scope) -> None:
        from starlette.requests import Request

        request = Request(scope)
        try:
            identity = await authenticator.identify_request_async(request)
        except NotAuthenticated as e:
            # the MCP endpoint's 401 tells clients where to sign in with OAuth (RFC 9728)
            challenge = authenticator.challenge(scope, e) if route_path(scope).rstrip("/") == MCP_PATH else "Bearer"
            raise _Refused(e.status_code, e.error_code, str(e), challenge) from None
        scope.setdefault("state", {})["identity_checked"] = identity

    async def _read_body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + self.body_timeout_s
        while True:
            left = deadline - time.monotonic()
            message: Message | None = None
            if left > 0:
                with anyio.move_on_after(left):
                    message = await receive()
            if message is None:
                raise _Refused(
                    408, "REQUEST_TIMEOUT", f"the request body did not arrive within {self.body_timeout_s:g} seconds"
                )
            if message["type"] == "http.disconnect":
                raise _Refused(400, "INVALID_REQUEST_BODY", "the client disconnected before sending the whole body")
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _Refused(
                    413, "REQUEST_BODY_TOO_LARGE", f"the request body is larger than {self.max_body_bytes} bytes"
                )
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def route_path(scope: Scope) -> str:
    """The path the routes match: without the application's root (Serve's route prefix)."""
    path: str = scope.get("path") or "/"
    root: str = (scope.get("root_path") or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def _content_length(scope: Scope) -> int | None:
    for k, v in scope.get("headers") or ():
        if k == b"content-length":
            try:
                return int(v)
            except ValueError:
                raise _Refused(400, "INVALID_REQUEST_BODY", "the Content-Length header is not a number") from None
    return None


def _without_body(receive: Receive) -> Receive:
    """A `receive` for a request whose body came in its scope: the copy of the body that
    reaches the replica the usual way is dropped, what follows (the disconnect) passed on."""

    async def rest() -> Message:
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                return message

    return rest


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the app the body read already, then waits for the disconnect."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
