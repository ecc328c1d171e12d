"""The audit log (`codesearch.audit`) over HTTP, for owners only, newest first, in two shapes.

``GET /api/audit?action=&actor=&since=&until=&page=&perPage=``
    Ours: our action names (`codesearch.audit.ACTIONS`), filters by action and actor;
    ``X-Total-Count`` as ``/api/repos``; ``until`` is exclusive.

``GET /api/ee/audit?since=&until=&page=&perPage=``
    Sourcebot's: ``[{id, timestamp, action, actorId, actorType, targetId, targetType,
    sourcebotVersion, metadata, orgId}]`` with Sourcebot's action names
    (`codesearch.audit.sourcebot`); ``since`` and ``until`` are ISO 8601 and inclusive, ``since``
    must be before ``until``; ``perPage`` 1..100 (default 50); ``X-Total-Count`` and ``Link``.

Reading the log is itself recorded (``audit.read``, Sourcebot's ``audit.fetch``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse

from codesearch import audit as audit_log
from codesearch import version
from codesearch.audit.sourcebot import sourcebot_record
from codesearch.errors import InvalidArgument, NotAnOwner
from codesearch.service.deps import Caller, StoreDep
from codesearch.service.routes.repos import link_header

if TYPE_CHECKING:
    from codesearch.permissions import Identity
    from codesearch.store.models import AuditEvent


def _when(value: str | None, name: str) -> datetime | None:
    if not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{name}: not an ISO 8601 date or time: {value!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def event_json(e: AuditEvent) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": e.at.isoformat(),
        "actor": e.actor,
        "actorUserId": e.actor_user_id,
        "action": e.action,
        "target": e.target,
        "details": e.details,
        "requestId": e.request_id,
    }


def _owner_only(identity: Identity) -> None:
    if identity.role != "OWNER":
        raise NotAnOwner("only owners may read the audit log")


router = APIRouter()


# ``GET /api/audit?action=&actor=&since=&until=&page=&perPage=``: the log, newest first (owners
# only; ``X-Total-Count`` as ``/api/repos``). A comment, not a docstring: FastAPI would publish it.
@router.get("/api/audit")
def audit(
    request: Request,
    response: Response,
    identity: Caller,
    store: StoreDep,
    action: str | None = None,
    actor: str | None = None,
    since: str | None = None,
    until: str | None = None,
    page: int = Query(1, ge=1),
    perPage: int = Query(50, ge=1, le=500),
) -> list[dict[str, Any]]:  # noqa: N803
    _owner_only(identity)
    if store is None:
        return []
    events, total = store.list_audit_events(
        action=action,
        actor=actor,
        since=_when(since, "since"),
        until=_when(until, "until"),
        page=page,
        per_page=perPage,
    )
    audit_log.record(request, identity, "audit.read", filter=action or "", page=page)
    response.headers["X-Total-Count"] = str(total)
    return [event_json(e) for e in events]


# ``GET /api/ee/audit?since=&until=&page=&perPage=``: Sourcebot's audit API (module docstring).
@router.get("/api/ee/audit")
def sourcebot_audit(
    request: Request,
    identity: Caller,
    store: StoreDep,
    since: str | None = Query(None, description="Records at or after this time (ISO 8601)"),
    until: str | None = Query(None, description="Records at or before this time (ISO 8601)"),
    page: int = Query(1, ge=1, le=1_000_000),
    perPage: int = Query(50, ge=1, le=100),  # noqa: N803
) -> JSONResponse:
    _owner_only(identity)
    start, end = _when(since, "since"), _when(until, "until")
    if start is not None and end is not None and start >= end:
        raise InvalidArgument("since: must be before until")
    events: list[AuditEvent] = []
    total = 0
    if store is not None:
        events, total = store.list_audit_events(
            since=start,
            until=None if end is None else end + timedelta(microseconds=1),  # inclusive, as Sourcebot's
            page=page,
            per_page=perPage,
        )
    audit_log.record(request, identity, "audit.read", page=page)
    headers = {"X-Total-Count": str(total)}
    u = request.url
    link = link_header(f"{u.scheme}://{u.netloc}{u.path}", page, perPage, total, {"since": since, "until": until})
    if link:
        headers["Link"] = link
    v = version()
    return JSONResponse([sourcebot_record(e, v) for e in events], headers=headers)
