"""``GET /api/audit?action=&actor=&since=&until=&page=&perPage=``: the audit log (`codesearch.audit`),
newest first, for owners only; ``X-Total-Count`` as ``/api/repos``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Response

from codesearch.errors import InvalidArgument, NotAnOwner
from codesearch.service.deps import Caller, StoreDep

if TYPE_CHECKING:
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


router = APIRouter()


# ``GET /api/audit?action=&actor=&since=&until=&page=&perPage=``: the log, newest first (owners
# only; ``X-Total-Count`` as ``/api/repos``). A comment, not a docstring: FastAPI would publish it.
@router.get("/api/audit")
def audit(
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
    if identity.role != "OWNER":  # (a scoped token is never an owner's)
        raise NotAnOwner("only owners may read the audit log")
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
    response.headers["X-Total-Count"] = str(total)
    return [event_json(e) for e in events]
