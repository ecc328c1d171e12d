"""gzip for what is worth compressing, never for what must arrive as it is written.

Pages, JSON answers, stylesheets and scripts shrink five to ten times (a file page is mostly
markup around each line), so responses of at least `MINIMUM_SIZE` bytes are gzipped for
clients that accept it (Starlette's `GZipMiddleware`, at a moderate level: the CPU is shared
with the searchers). Streams are left alone: a compressor holds bytes back until it has enough
to compress, and a search stream (``POST /api/stream_search``) or an MCP session
(``/api/mcp``, whose answers may be Server-Sent Events) must reach the client as each part is
sent. Those paths, and any ``text/event-stream`` response, pass through untouched.
"""

from __future__ import annotations

from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

#: Smaller bodies are sent as they are (the headers would cost more than gzip saves).
MINIMUM_SIZE = 1024
#: zlib level: 6 compresses within a few percent of 9 at a fraction of its time.
LEVEL = 6
#: Route paths (below the app's root path) whose responses are streams.
STREAMED_PATHS = ("/api/stream_search", "/api/mcp")
#: Already compressed (images, archives; our icon holds PNGs) or streamed (text/event-stream).
EXCLUDED_TYPES = (*DEFAULT_EXCLUDED_CONTENT_TYPES, "image/vnd.microsoft.icon", "image/x-icon")


def _route_path(scope: Scope) -> str:
    path, root = scope.get("path") or "/", (scope.get("root_path") or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def is_streamed(scope: Scope) -> bool:
    """Whether the request's answer is a stream that must not be held back by a compressor."""
    path = _route_path(scope).rstrip("/")
    return any(path == p or path.startswith(p + "/") for p in STREAMED_PATHS)


class Compress:
    """Pure ASGI: `GZipMiddleware` except on `STREAMED_PATHS` (text/event-stream is excluded by
    `GZipMiddleware` itself, whatever the path)."""

    def __init__(self, app: ASGIApp, minimum_size: int = MINIMUM_SIZE, level: int = LEVEL):
        self.app = app
        self.gzip = GZipMiddleware(
            app, minimum_size=minimum_size, compresslevel=level, exclude_content_types=EXCLUDED_TYPES
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_streamed(scope):
            await self.app(scope, receive, send)
            return
        await self.gzip(scope, receive, send)
