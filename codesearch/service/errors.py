"""Errors in the shape of SPEC §5: ``{"statusCode": n, "errorCode": "…", "message": "…"}``.

Every error of every route goes through `error_response`, with the same HTTP status as
`statusCode`. Unexpected exceptions become 500 UNEXPECTED_ERROR with a generic message: no
stack trace, path or internal detail leaves the process (it is logged instead, the path without
its secrets: `observability.loggable_path`). A server-side
`CodesearchError` whose message is written for clients says so with ``expose = True`` (e.g. a
language model's endpoint failing: 502 ``MODEL_ERROR``).
"""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from codesearch.errors import CodesearchError, QueryParseError
from codesearch.service.observability import loggable_path

log = logging.getLogger(__name__)


def error_response(status: int, code: str, message: str, **extra) -> JSONResponse:
    return JSONResponse({"statusCode": status, "errorCode": code, "message": message, **extra}, status_code=status)


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
    while getattr(exc, "cause", None) is not None and seen < 5:
        exc, seen = exc.cause, seen + 1
    return exc


def install(app) -> None:
    """Register the handlers that give every error the SPEC §5 shape."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return error_response(400, "INVALID_REQUEST_BODY", _validation_message(exc))

    @app.exception_handler(CodesearchError)
    async def _ours(request: Request, exc: CodesearchError):
        exc = unwrap(exc)
        if exc.status_code >= 500 and not getattr(exc, "expose", False):
            log.error("%s %s failed: %s", request.method, loggable_path(request.url.path), exc)
            return error_response(500, "UNEXPECTED_ERROR", "an unexpected error occurred")
        # A query that does not parse also says where (0-based character offset in the query),
        # so that a page can put a caret under it; the three SPEC §5 fields are unchanged.
        extra = {"position": exc.position} if isinstance(exc, QueryParseError) else {}
        response = error_response(exc.status_code, exc.error_code, str(exc), **extra)
        if getattr(exc, "retry_after", None):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 404:
            return error_response(404, "NOT_FOUND", f"no route {request.method} {loggable_path(request.url.path)}")
        if exc.status_code == 405:
            return error_response(405, "METHOD_NOT_ALLOWED",
                                  f"{request.method} is not allowed on {loggable_path(request.url.path)}")
        return error_response(exc.status_code, "UNEXPECTED_ERROR", str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        cause = unwrap(exc)
        if isinstance(cause, CodesearchError):
            return await _ours(request, cause)
        log.exception("%s %s failed", request.method, loggable_path(request.url.path))
        return error_response(500, "UNEXPECTED_ERROR", "an unexpected error occurred")
