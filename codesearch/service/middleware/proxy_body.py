"""Serve's HTTP proxy sends a small request body to the replica together with the request.

Why. Ray Serve's proxy sends a replica the request's head only; the replica asks the proxy for
the body with a call back to the proxy's actor once the request runs. For ``POST /api/search``
that round trip sits between the request's arrival and its search: on a busy node it was the
largest single wait inside the replica (bench/RESULTS.md, "The HTTP path").

What. `BodyAhead`, a middleware in Serve's proxies (installed with `proxy_errors.middlewares`),
reads the body of a ``POST`` to one of our body-carrying API routes (`ROUTES`, under any route
prefix) whose ``Content-Length`` is at most `MAX_BYTES`, for at most `WAIT_S`, and puts it into
the ASGI scope under `SCOPE_KEY`; Serve sends the scope to the replica with the request, where
`limits.RequestLimits` takes the body from it. A body that is larger, has no length, or has not
all arrived by then is left to the replica, which reads it as before (with its own size and time
limits). Nothing is lost either way: the messages read here are handed on to Serve unchanged, so
the replica's own reading sees them too (`RequestLimits` drops that copy when it has the body).

What it costs a client that sends its body slowly: at most `WAIT_S` before the replica sees the
request (credentials are still checked before the replica reads a body, and a slow body without
credentials is still refused at once after that). Replicas of other applications behind the same
proxies ignore the scope entry.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Where the body travels in the ASGI scope.
SCOPE_KEY = "codesearch.body"
#: Bodies up to this size are sent ahead (search, explain and MCP bodies are a few hundred bytes).
MAX_BYTES = 64 * 1024
#: How long the proxy waits for such a body (it normally arrives with the request's head).
WAIT_S = 0.05
#: Our routes that carry a JSON body, matched at the end of the path.
ROUTES = ("/api/search", "/api/stream_search", "/api/explain", "/api/mcp", "/api/chat/blocking")


class BodyAhead:
    """Pure ASGI middleware for Serve's proxies (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int = MAX_BYTES, wait_s: float = WAIT_S):
        self.app = app
        self.max_bytes = max_bytes
        self.wait_s = wait_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        length = _wanted_length(scope, self.max_bytes)
        if length is None:
            await self.app(scope, receive, send)
            return
        messages, body = await self._read(receive, length)
        if body is not None:
            scope = {**scope, SCOPE_KEY: body}
        await self.app(scope, _replay(messages, receive), send)

    async def _read(self, receive: Receive, length: int) -> tuple[list[Message], bytes | None]:
        """The messages read within `wait_s`, and the whole body if it came (else None)."""
        messages: list[Message] = []
        chunks: list[bytes] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while True:
            left = deadline - loop.time()
            if left <= 0:
                return messages, None
            try:
                message = await asyncio.wait_for(receive(), left)
            except TimeoutError:
                return messages, None
            messages.append(message)
            if message.get("type") != "http.request":
                return messages, None  # a disconnect: the replica will see it
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                body = b"".join(chunks)
                return messages, body if len(body) == length else None


def _wanted_length(scope: Scope, max_bytes: int) -> int | None:
    """The Content-Length of a request whose body is sent ahead, else None."""
    if scope.get("type") != "http" or scope.get("method") != "POST":
        return None
    path = (scope.get("path") or "").rstrip("/")
    if not path.endswith(ROUTES):
        return None
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return None
            return length if 0 <= length <= max_bytes else None
    return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """`receive` that first gives back `messages` (read here already)."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
