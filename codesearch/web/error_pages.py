"""Error pages for browsers: the HTML a person sees where an API client gets the JSON of docs/http-api.md#errors.

`codesearch.service.errors` decides who gets which (a request that accepts ``text/html`` on a
path outside the API gets a page) and calls `error_page` through the app's `Services.error_page`; this
module only says it in words, in the site's layout, with the same HTTP status. The words for
404 and 405 name the page's path (the JSON names the route); a 500 never says more than that
something failed, with the request id a person can quote to whoever runs the service (the
server's log has the details under it).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from codesearch.service.errors import request_id

#: Headings by status; others fall back to the status class.
HEADINGS = {
    400: "Bad request",
    401: "Sign-in required",
    403: "Forbidden",
    404: "Page not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request too large",
    429: "Too many requests",
    500: "Something went wrong",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Timed out",
}


def heading(status: int) -> str:
    if status in HEADINGS:
        return HEADINGS[status]
    return "Something went wrong" if status >= 500 else "This request could not be answered"


def explanation(request: Request, status: int, code: str, message: str) -> str:
    """What to tell a person: the API's message, said for a page where the API's names a route."""
    path = request.url.path
    if code == "NOT_FOUND" and status == 404:
        return f"There is no page at {path}. Check the address, or search for what you were looking for."
    if status == 405:
        return f"The page at {path} cannot be opened with a {request.method} request."
    if status >= 500 and code in ("UNEXPECTED_ERROR", "INTERNAL_ERROR"):
        return (
            "The service failed to answer this request. "
            "Try again in a moment; if it keeps failing, tell whoever runs it."
        )
    if message and message[0].islower():
        message = message[0].upper() + message[1:]
    return message if message.endswith((".", "!", "?")) else f"{message}."


async def csrf_failed(request: Request, exc: Exception) -> Response:
    """The 403 page of a form that arrived without its CSRF token (`codesearch.sessions.CsrfFailed`)."""
    from codesearch.web.templating import render

    return render(
        request,
        "message.html",
        status_code=403,
        title="Forbidden",
        heading="This form has expired",
        message="The page's security token is missing or does not match. Reload the page and try again.",
    )


def error_page(request: Request, status: int, code: str, message: str) -> Response:
    """The page for one error (`codesearch.service.errors.respond` calls it)."""
    from codesearch.web.templating import render

    return render(  # with the site's security headers, as every page (`security_headers`)
        request,
        "error.html",
        status_code=status,
        title=heading(status),
        heading=heading(status),
        status=status,
        code=code,
        message=explanation(request, status, code, message),
        request_id=request_id(request),
    )
