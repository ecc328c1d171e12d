"""Errors in the shape of docs/http-api.md#errors: ``{"statusCode": n, "errorCode": "…", "message": "…"}``.

Every error of every route goes through `error_response`, with the same HTTP status as
`statusCode`. Unexpected exceptions become 500 UNEXPECTED_ERROR with a generic message: no
stack trace, path or internal detail leaves the process (it is logged instead, the path without
its secrets: `observability.loggable_path`). A server-side
`CodesearchError` whose message is written for clients says so with ``expose = True`` (e.g. a
language model's endpoint failing: 502 ``MODEL_ERROR``).

A browser gets a page instead: when the request asks for HTML (``Accept: text/html``, which
browsers send for pages and forms and API clients do not) and its path is not one of the API's
(`is_api_path`: ``/api/…``, ``/oauth/…``, ``/.well-known/…``, whatever the client accepts),
the handlers call the app's ``error_page(request, status, code, message)`` (`deps.Services.error_page`,
set by the web UI: `codesearch.web.error_pages`) for the same status. Without it, or when it fails, JSON.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from codesearch.errors import CodesearchError, QueryParseError
from codesearch.runtime import request_ids
from codesearch.service.middleware.observability import loggable_path

if TYPE_CHECKING:
    from fastapi import FastAPI
    from starlette.responses import Response
    from starlette.types import Scope

log = logging.getLogger(__name__)


def error_response(status: int, code: str, message: str, **extra: object) -> JSONResponse:
    return JSONResponse({"statusCode": status, "errorCode": code, "message": message, **extra}, status_code=status)


#: Paths whose clients are programs: their errors are JSON even for a client that accepts HTML.
API_PREFIXES = ("/api/", "/oauth/", "/.well-known/")


def is_api_path(scope: Scope) -> bool:
    """Whether the request's path (without the app's root path) belongs to the API."""
    path, root = scope.get("path") or "/", (scope.get("root_path") or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :] or "/"
    return path == "/api" or path.startswith(API_PREFIXES)


def wants_html(request: Request) -> bool:
    """A browser asking for a page: ``text/html`` accepted, on a path outside the API."""
    return "text/html" in request.headers.get("accept", "").lower() and not is_api_path(request.scope)


def request_id(request: Request) -> str:
    """The request's id: bound while `ObserveRequests` runs, else (the server's error handler,
    outside it) the one it left in the scope."""
    return request_ids.current() or request.scope.get("state", {}).get("request_id") or ""


def respond(request: Request, status: int, code: str, message: str, **extra: object) -> Response:
    """The error as a page for a browser (`wants_html`), else as the JSON of docs/http-api.md#errors (plus `extra`
    fields, such as a parse error's ``position``)."""
    response: Response | None = None
    services = getattr(getattr(getattr(request, "app", None), "state", None), "services", None)
    page = getattr(services, "error_page", None)  # (an app without `deps.Services` answers JSON)
    if page is not None and wants_html(request):
        try:
            response = page(request, status, code, message)
        except Exception:  # noqa: BLE001 - the page itself failed: the JSON answer still says what happened
            log.exception("rendering the %d page of %s failed", status, request.url.path)
    if response is None:
        response = error_response(status, code, message, **extra)
    if request_ids.current() is None and request_id(request):  # outside ObserveRequests, which adds it
        response.headers[request_ids.HEADER] = request_id(request)
    return response


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {e.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request body"


def unwrap(exc: BaseException) -> BaseException:
    """The original error inside a Ray task error (whose own message carries a traceback, pid
    and paths that must not reach a client)."""
    seen = 0
    while (cause := getattr(exc, "cause", None)) is not None and seen < 5:
        exc, seen = cause, seen + 1
    return exc


def for_clients(exc: CodesearchError) -> bool:
    """Whether `exc`'s message may be shown to the client: a client error's, or a server error's
    written for clients (``expose``); any other is logged and answered "an unexpected error"."""
    return exc.status_code < 500 or bool(getattr(exc, "expose", False))


def install(app: FastAPI) -> None:
    """Register the handlers that give every error the shape of docs/http-api.md#errors."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return respond(request, 400, "INVALID_REQUEST_BODY", _validation_message(exc))

    @app.exception_handler(CodesearchError)
    async def _ours(request: Request, raised: CodesearchError) -> Response:
        exc = unwrap(raised)
        if not isinstance(exc, CodesearchError) or not for_clients(exc):
            log.error("%s %s failed: %s", request.method, loggable_path(request.url.path), exc)
            return respond(request, 500, "UNEXPECTED_ERROR", "an unexpected error occurred")
        # A query that does not parse also says where (0-based character offset in the query),
        # so that a page can put a caret under it; the three fields of the error body are unchanged.
        extra = {"position": exc.position} if isinstance(exc, QueryParseError) else {}
        response = respond(request, exc.status_code, exc.error_code, str(exc), **extra)
        retry_after = getattr(exc, "retry_after", None)  # ServiceUnavailable, GitBusy
        if retry_after:
            response.headers["Retry-After"] = str(retry_after)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            response = respond(
                request, 404, "NOT_FOUND", f"no route {request.method} {loggable_path(request.url.path)}"
            )
        elif exc.status_code == 405:
            response = respond(
                request,
                405,
                "METHOD_NOT_ALLOWED",
                f"{request.method} is not allowed on {loggable_path(request.url.path)}",
            )
        else:
            response = respond(request, exc.status_code, "UNEXPECTED_ERROR", str(exc.detail))
        for name, value in (exc.headers or {}).items():  # e.g. Allow on a 405
            response.headers.setdefault(name, value)
        return response

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        cause = unwrap(exc)
        if isinstance(cause, CodesearchError):
            return await _ours(request, cause)
        log.exception("%s %s failed", request.method, loggable_path(request.url.path))
        return respond(request, 500, "UNEXPECTED_ERROR", "an unexpected error occurred")
