"""gzip for what is worth compressing, never for what must arrive as it is written.

Pages, JSON answers, stylesheets and scripts shrink five to ten times (a file page is mostly
markup around each line), so responses of at least `MINIMUM_SIZE` bytes are gzipped for
clients that accept it (Starlette's `GZipMiddleware`, at a moderate level: the CPU is shared
with the searchers). Streams are left alone: a compressor holds bytes back until it has enough
to compress, and a search stream (``POST /api/stream_search``) or an MCP session
(``/api/mcp``, whose answers may be Server-Sent Events) must reach the client as each part is
sent. Those paths, and any ``text/event-stream`` response, pass through untouched.

The search results page (``GET /search``) is both: a page worth compressing, written while the
searchers answer (`codesearch.web.results_page`). It is gzipped by `FlushingGzip`, which sends
each part as soon as it is written (a zlib sync flush after each: a few bytes per part).
"""

from __future__ import annotations

import zlib

from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Smaller bodies are sent as they are (the headers would cost more than gzip saves).
MINIMUM_SIZE = 1024
#: zlib level: 6 compresses within a few percent of 9 at a fraction of its time.
LEVEL = 6
#: Route paths (below the app's root path) whose responses are streams.
STREAMED_PATHS = ("/api/stream_search", "/api/mcp")
#: Route paths of pages written part by part: gzipped with a flush after each part.
FLUSHED_PATHS = ("/search",)
#: Already compressed (images, archives; our icon holds PNGs) or streamed (text/event-stream).
EXCLUDED_TYPES = (*DEFAULT_EXCLUDED_CONTENT_TYPES, "image/vnd.microsoft.icon", "image/x-icon")


def _route_path(scope: Scope) -> str:
    path, root = scope.get("path") or "/", (scope.get("root_path") or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path


def _under(scope: Scope, paths: tuple[str, ...]) -> bool:
    path = _route_path(scope).rstrip("/")
    return any(path == p or path.startswith(p + "/") for p in paths)


def is_streamed(scope: Scope) -> bool:
    """Whether the request's answer is a stream that must not be held back by a compressor."""
    return _under(scope, STREAMED_PATHS)


class FlushingGzip:
    """Pure ASGI: gzip whose every body part goes out whole as soon as it is written (each is
    compressed, then sync-flushed), for pages written part by part. Only text/html answers
    without an encoding of their own are compressed, for clients that accept gzip."""

    def __init__(self, app: ASGIApp, level: int = LEVEL):
        self.app = app
        self.level = level

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if "gzip" not in Headers(scope=scope).get("accept-encoding", ""):
            await self.app(scope, receive, send)
            return
        z: list[zlib._Compress] = []  # the compressor, once the answer turns out to be compressible

        async def gzip_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                html = headers.get("content-type", "").startswith("text/html")
                if html and "content-encoding" not in headers:
                    z.append(zlib.compressobj(self.level, zlib.DEFLATED, 16 + zlib.MAX_WBITS))
                    headers["Content-Encoding"] = "gzip"
                    headers.add_vary_header("Accept-Encoding")
                    if "content-length" in headers:
                        del headers["content-length"]
            elif message["type"] == "http.response.body" and z:
                more = message.get("more_body", False)
                body = z[0].compress(message.get("body", b""))
                body += z[0].flush(zlib.Z_SYNC_FLUSH if more else zlib.Z_FINISH)
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, receive, gzip_send)


class Compress:
    """Pure ASGI: `GZipMiddleware`, except on `STREAMED_PATHS` (text/event-stream is excluded by
    `GZipMiddleware` itself, whatever the path) and `FLUSHED_PATHS` (`FlushingGzip`)."""

    def __init__(self, app: ASGIApp, minimum_size: int = MINIMUM_SIZE, level: int = LEVEL):
        self.app = app
        self.gzip = GZipMiddleware(
            app, minimum_size=minimum_size, compresslevel=level, exclude_content_types=EXCLUDED_TYPES
        )
        self.flushing = FlushingGzip(app, level)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_streamed(scope):
            await self.app(scope, receive, send)
        elif _under(scope, FLUSHED_PATHS):
            await self.flushing(scope, receive, send)
        else:
            await self.gzip(scope, receive, send)
