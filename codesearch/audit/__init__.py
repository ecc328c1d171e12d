"""The audit log: who searched, read, created or revoked what, for owners to query.

Every HTTP route, MCP tool and page that reads code or changes access records one event: a route
or a page with `record` (its request names the app, whose `AuditLog` takes the event), the MCP
server with `AuditLog.record` (the command line writes its few events to the store itself,
`codesearch.cli.common`). What is recorded, and when: `ACTIONS` (`codesearch.audit.actions`); the
log itself, its queue, its writer thread and its retention: `codesearch.audit.log`. No key,
password, token or cookie is ever recorded.

Owners read the log through ``GET /api/audit`` (`codesearch.service.routes.audit`) and the
``/settings/audit`` page. This package sits below the HTTP service and the web UI, which both
record through it; it imports neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codesearch.audit.actions import ACTIONS
from codesearch.audit.log import (
    DEFAULT_RETENTION_DAYS,
    RETENTION_ENV,
    AuditLog,
    actor_of,
    logging_enabled,
    retention_days,
)

if TYPE_CHECKING:
    from fastapi import Request

    from codesearch.permissions import Identity


def audit_of(request: Request) -> AuditLog | None:
    """The audit log of the app serving `request`: the ``audit`` of the app's one state container
    (`codesearch.service.deps.Services`, kept as ``app.state.services``), read by name since that
    container sits above this package."""
    audit: AuditLog | None = request.app.state.services.audit
    return audit


def record(request: Request, identity: Identity | None, action: str, target: str = "", **details: Any) -> None:
    """Record through the app's audit log, if it has one."""
    log_ = audit_of(request)
    if log_ is not None:
        log_.record(identity, action, target, **details)


__all__ = [
    "ACTIONS",
    "DEFAULT_RETENTION_DAYS",
    "RETENTION_ENV",
    "AuditLog",
    "actor_of",
    "audit_of",
    "logging_enabled",
    "record",
    "retention_days",
]
