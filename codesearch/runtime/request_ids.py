"""Request ids: one name for everything one HTTP request causes, in the logs of every process.

The HTTP layer (`codesearch.service.middleware.observability`) gives each request an id, the client's
``X-Request-Id`` when it is short and safe (`accept`), else a new one, and keeps it in a context
variable for as long as the request runs (threads the request hands work to get a copy of the
context). A `SearcherPool` sends it with every searcher call the request causes, where the
searcher names it in what it logs. In the API process, `RequestIdFilter` puts it into every log
record written while the request runs.

Why a client's id must be short and safe: it is written into logs and response headers, so an id
with line breaks, quotes or kilobytes of text would let a client forge log lines or bloat every
record; such an id is replaced, not trusted.

Plain Python (no Ray), so that the service, the searchers and tests without Ray share it.
"""

from __future__ import annotations

import contextvars
import logging
import re
import uuid

HEADER = "x-request-id"
#: What a client's request id may be: up to 64 letters, digits, dots, underscores and dashes.
SAFE = re.compile(r"[A-Za-z0-9._-]{1,64}")

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("codesearch_request_id", default=None)


def new() -> str:
    """A fresh request id (32 hex digits)."""
    return uuid.uuid4().hex


def accept(value: str | bytes | None) -> str | None:
    """`value` when it is a usable request id (see the module docstring), else None."""
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            return None
    return value if value is not None and SAFE.fullmatch(value) else None


def current() -> str | None:
    """The id of the request this code runs for (None outside a request)."""
    return _current.get()


def bind(request_id: str | None) -> contextvars.Token[str | None]:
    """Make `request_id` the current one (until `reset` with the returned token)."""
    return _current.set(request_id)


def reset(token: contextvars.Token[str | None]) -> None:
    _current.reset(token)


class RequestIdFilter(logging.Filter):
    """Gives each log record the current request id: as the attribute ``request_id`` ("-" outside
    a request), for formats that name it, and in front of the message (``[request <id>] …``), since
    the handlers of a Ray or Serve process have formats of their own that we do not set."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:  # once per record, however many handlers
            rid = _current.get()
            record.request_id = rid or "-"
            if rid:
                record.msg = f"[request {rid}] {record.msg}"
        return True


def install_log_filter(logger: logging.Logger | None = None) -> None:
    """Add a `RequestIdFilter` to every handler of `logger` (default: the root logger, which the
    records of codesearch's loggers reach) that has none yet."""
    logger = logger or logging.getLogger()
    for handler in logger.handlers:
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter())
