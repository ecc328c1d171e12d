"""The usage report over HTTP, for owners' scripts (`codesearch.audit.usage` says what it counts).

``GET /api/usage?days=&from=&to=``
    ``{from, to, timeZone: "UTC", days: [{date, activeUsers, searches, askQuestions, mcpCalls,
    apiKeyCalls}], totals: {...}, retentionDays, oldestEventAt}``: every UTC day of the range, the
    last `days` days (default 30) or ``from``..``to`` (dates, inclusive), at most 366 days.
``GET /api/usage.csv?days=&from=&to=``
    The same days as CSV, one row per day.

Owners only (403 ``INSUFFICIENT_PERMISSIONS`` for anyone else); 400 ``INVALID_ARGUMENT`` naming
the parameter for a bad range; 503 without a state database. Each read is an audit event
(``usage.read``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request, Response

from codesearch import audit
from codesearch.audit import usage
from codesearch.errors import NotAnOwner, ServiceUnavailable
from codesearch.permissions import Identity
from codesearch.service.deps import Caller, ServicesDep, StoreDep
from codesearch.store import Store

router = APIRouter()


def _report(
    request: Request, identity: Identity, store: Store | None, days: str | None, first: str | None, last: str | None
) -> usage.UsageReport:
    if identity.role != "OWNER":
        raise NotAnOwner("only owners may read the usage report")
    if store is None:
        raise ServiceUnavailable("this service has no state database: there is no audit log to count")
    r = usage.parse_range(days, first, last)
    report = usage.usage_report(store, r)
    audit.record(request, identity, "usage.read", f"{r.first.isoformat()}..{r.last.isoformat()}")
    return report


# (What the routes do is in the module docstring: a docstring here would be published by FastAPI.)
@router.get("/api/usage.csv")
def usage_csv(
    request: Request,
    identity: Caller,
    store: StoreDep,
    days: str | None = None,
    first: str | None = Query(None, alias="from"),
    last: str | None = Query(None, alias="to"),
) -> Response:
    report = _report(request, identity, store, days, first, last)
    name = f"usage-{report.range.first.isoformat()}-{report.range.last.isoformat()}.csv"
    return Response(
        report.csv(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@router.get("/api/usage")
def usage_json(
    request: Request,
    identity: Caller,
    store: StoreDep,
    services: ServicesDep,
    days: str | None = None,
    first: str | None = Query(None, alias="from"),
    last: str | None = Query(None, alias="to"),
) -> dict[str, Any]:
    report = _report(request, identity, store, days, first, last)
    log_ = services.audit
    return report.json(log_.retention if log_ is not None else 0, log_ is not None and log_.enabled)
