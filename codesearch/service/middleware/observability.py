"""Every HTTP request measured and named: a pure ASGI middleware, the outermost of the app's own.

For each request `ObserveRequests`:

* gives it a request id (`codesearch.runtime.request_ids`): the client's ``X-Request-Id`` when it
  is short and safe, else a new one; the id is current while the request runs (so the searcher
  calls it causes carry it, and the process's log records name it) and is sent back as the
  response's ``X-Request-Id``;
* records ``codesearch_http_requests`` and ``codesearch_http_request_seconds``
  (`codesearch.runtime.metrics`) by route template, method and status, once the app has sent the
  last byte: a streamed search is timed to its end, not to its first chunk.

Why a pure ASGI middleware (as `limits.py` and `drain.py` are), not Starlette's
``BaseHTTPMiddleware``: that one runs the app in a task of its own and passes the response
through a stream of its own, which changes how a streamed answer and a client's disconnect
travel; a plain ``send`` wrapper changes nothing but the response's headers.

Paths in logs. No line of ours names a request's raw path: where one is logged (an error, the
proxy's failures) it goes through `loggable_path`, which hides the secrets some paths carry (the
token of an invite link, ``/invite/<token>``). Serve's own access log (``SOURCEBOT_LOG_LEVEL=debug``)
names the route template the request matched (``/invite/{token}``), never the raw path.

Why route *templates*: a label per raw path (``/browse/<every file>``) would make one time series
per URL anyone ever asked for. The template is the route Starlette matched (``scope["route"]``);
a request refused before routing (401, 413 of `limits.RequestLimits`) is matched against the
app's routes here, and a path that no route serves is ``unmatched``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from codesearch.runtime import metrics, request_ids

if TYPE_CHECKING:
    from starlette.routing import BaseRoute
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"
#: Methods counted under their own name; any other is ``OTHER``.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: The ``status`` of a request that ended without a response (the client went away first).
NO_RESPONSE = "none"
_HEADER = request_ids.HEADER.encode()
#: What routes match a request on (kept as the request arrived).
_MATCHED_ON = ("type", "path", "root_path", "method", "headers")
#: Path segments that are secrets: the part after ``/invite/`` (an invite token).
_SECRET_SEGMENTS = re.compile(r"(/invite/)[^/?#]+")
REDACTED = "<redacted>"


def loggable_path(path: str | None) -> str:
    """`path` fit for a log line or an error message: secrets in it (an invite token) replaced by
    ``<redacted>``."""
    return _SECRET_SEGMENTS.sub(r"\1" + REDACTED, path or "")


class ObserveRequests:
    """The middleware (see the module docstring). `routes()` returns the app's routes (Starlette
    `BaseRoute`s), used only for requests that were answered before routing."""

    def __init__(self, app: ASGIApp, routes: Callable[[], Iterable[BaseRoute]] | None = None) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_ids.accept(_header(scope, _HEADER)) or request_ids.new()
        arrived = {k: scope[k] for k in _MATCHED_ON if k in scope}  # routing rewrites some (a mount's root_path)
        token = request_ids.bind(rid)
        # kept in the scope too: the server's error handler, outside this middleware, answers an
        # error raised in a middleware after the id is unbound (`errors.respond` names it there)
        scope.setdefault("state", {})["request_id"] = rid
        started = time.perf_counter()
        status: int | None = None

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [(k, v) for k, v in message.get("headers") or () if k.lower() != _HEADER]
                message = {**message, "headers": headers + [(_HEADER, rid.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except BaseException:
            if status is None:
                status = 500  # what the server's error handler outside this middleware answers
            raise
        finally:
            request_ids.reset(token)
            metrics.http_request(
                route_template(scope, self.routes, arrived),
                method_label(scope.get("method", "")),
                NO_RESPONSE if status is None else status,
                time.perf_counter() - started,
            )


class ProxyRequestIds:
    """Request ids in Serve's HTTP proxy (one of `proxy_errors.middlewares`): one id per request,
    one ``X-Request-Id`` per response.

    Serve's proxy has a request-id middleware of its own, inside ours: it keeps whatever id a
    client sent (unchecked) or makes one, and appends ``X-Request-ID`` to every response, after
    the one our app sent. So here, before it: a client's id that `request_ids.accept` refuses is
    replaced by a new one (Serve's logs, the replica and the response then agree on a safe id);
    and on the way back, only the first ``X-Request-Id`` of the response is kept (the app's; the
    two carry the same id)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = _header(scope, _HEADER)
        if given is not None and request_ids.accept(given) is None:
            headers = [(k, v) for k, v in scope.get("headers") or () if k.lower() != _HEADER]
            scope = {**scope, "headers": headers + [(_HEADER, request_ids.new().encode())]}

        async def send_one_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers: list[tuple[bytes, bytes]] = []
                seen = False
                for k, v in message.get("headers") or ():
                    if k.lower() == _HEADER:
                        if seen:
                            continue
                        seen = True
                    headers.append((k, v))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_one_id)


def route_template(
    scope: Scope,
    routes: Callable[[], Iterable[BaseRoute]] | None = None,
    arrived: Scope | None = None,
) -> str:
    """The route template of a request (see the module docstring): the route Starlette matched,
    else the first of `routes()` that matches the request as it `arrived` (its scope before
    routing; default `scope`), else `UNMATCHED`."""
    route = scope.get("route")
    if route is None and routes is not None:
        route = _match(arrived if arrived is not None else scope, routes())
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED


def _match(scope: Scope, routes: Iterable[BaseRoute]) -> BaseRoute | None:
    from starlette.routing import Match

    partial: BaseRoute | None = None
    for route in _flat(routes):
        try:
            match, _ = route.matches(scope)
        except Exception:  # noqa: BLE001 - a route that cannot judge this scope does not match it
            continue
        if match == Match.FULL:
            return route
        if match == Match.PARTIAL and partial is None:
            partial = route  # the path is served, not with this method (a 405)
    return partial


def _flat(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes themselves: newer FastAPI releases keep a router included with
    ``include_router`` as one entry that holds its routes (``effective_route_contexts``), older
    ones copy its routes into the app's list. (Our routers have no path prefix, so a route's own
    pattern is the one the app serves.)"""
    for route in routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if callable(contexts):
            for context in contexts():
                yield getattr(context, "original_route", context)
        else:
            yield route


def method_label(method: str) -> str:
    method = (method or "").upper()
    return method if method in METHODS else "OTHER"


def _header(scope: Scope, name: bytes) -> bytes | None:
    k: bytes
    v: bytes
    for k, v in scope.get("headers") or ():
        if k.lower() == name:
            return v
    return None
