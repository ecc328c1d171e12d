"""Serve's HTTP proxy answers in our JSON error shape when a replica dies mid-request.

When a replica process dies while it answers (killed for memory, a crash, its node lost), Serve's
proxy gives up on the request and writes no response of its own (it does only for 408, 429 and
503); the HTTP server under it (uvicorn) then fills in ``500 Internal Server Error`` as plain
text, which a client of an API that promises ``{"statusCode", "errorCode", "message"}`` on every
error cannot read. `JsonErrors` wraps the proxy's ASGI app: a request the proxy finished without
starting a response, or failed before starting one, gets ``500 {"errorCode":
"UNEXPECTED_ERROR", …}`` instead. A response already started is left alone (its client sees the
connection end).

How it gets into the proxy: Ray Serve calls the function named by the environment variable
``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`` in each proxy process and adds the Starlette
middlewares it returns (`middlewares` here). That variable must be in the proxies' environment
when Ray starts them: `codesearch serve` sets it before it starts its own Ray instance
(`install_for_own_ray`); on a cluster of your own, set
``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=codesearch.serving.proxy_errors:middlewares`` in the
environment of ``ray start`` on every node (``cluster.yaml`` does). It acts on every application
of those proxies, and only on requests that got no response at all, so other applications keep
their own answers. The same list carries `proxy_body.BodyAhead`,
`observability.ProxyRequestIds` (one safe ``X-Request-Id`` per response) and
`forwarded.PeerStamp` (the proxy vouches for the client's TCP address).
"""

from __future__ import annotations

import logging
import os
from collections.abc import MutableMapping
from typing import TYPE_CHECKING

from codesearch.service.middleware.limits import send_error

if TYPE_CHECKING:
    from starlette.middleware import Middleware
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

CALLBACK_ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
CALLBACK = "codesearch.serving.proxy_errors:middlewares"
MESSAGE = "the server process answering this request stopped before it could answer; retry the request"


class JsonErrors:
    """Pure ASGI middleware for Serve's proxy (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:  # noqa: BLE001 - answered below when nothing was sent yet
            if started:
                raise
            from codesearch.service.middleware.observability import loggable_path

            log.exception("the proxy failed %s %s", scope.get("method"), loggable_path(scope.get("path")))
        if not started:
            await send_error(send, 500, "UNEXPECTED_ERROR", MESSAGE)


def middlewares() -> list[Middleware]:
    """What Serve's proxy calls (``RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH``)."""
    from starlette.middleware import Middleware

    from codesearch.forwarded import PeerStamp
    from codesearch.service.middleware.observability import ProxyRequestIds
    from codesearch.service.middleware.proxy_body import BodyAhead

    # Serve wraps its proxy in these in list order, so the last is the outermost: JsonErrors
    # answers whatever fails inside it, BodyAhead included. ProxyRequestIds must sit right
    # outside Serve's own request-id middleware (which Serve applies first, innermost).
    return [Middleware(ProxyRequestIds), Middleware(PeerStamp), Middleware(BodyAhead), Middleware(JsonErrors)]


def install_for_own_ray(environ: MutableMapping[str, str] | None = None) -> None:
    """Prepare the proxies of a Ray instance this process is about to start (they inherit its
    environment): name `middlewares` for them, and give them `serve_settings.PROXY_ENV`; values
    already set are kept."""
    from codesearch.serving.serve_settings import install_proxy_env

    environ = os.environ if environ is None else environ
    environ.setdefault(CALLBACK_ENV, CALLBACK)
    install_proxy_env(environ)
