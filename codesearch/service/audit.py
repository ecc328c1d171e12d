"""The audit log: who searched, read, created or revoked what, for owners to query.

Every HTTP route, MCP tool and page that reads code or changes access records one event
(`AuditLog.record`): the caller (their e-mail as it is now, ``anonymous``, or ``cli`` for the
command line), the action (`ACTIONS`), its target (a query, ``repo:path``, a key's id) and a few
details, with the request's id (`codesearch.runtime.request_ids`). Secrets are never recorded:
no API key, password, token or cookie is passed in, and detail fields whose names look like one
are dropped (`_clean`).

Recording never makes a request wait or fail: events go into a bounded queue that a thread of
the process writes to the store in batches (every `FLUSH_S` seconds); if the store cannot take
them they are logged and dropped (a full queue drops new events, counted in the log). The same
thread removes events older than the retention, ``AUDIT_RETENTION_DAYS`` (default 90; 0 keeps
them forever), once an hour.

Owners read the log through ``GET /api/audit`` (`router`) and the ``/settings/audit`` page.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request, Response

from codesearch import environment
from codesearch.errors import InvalidArgument, NotAnOwner
from codesearch.runtime import request_ids
from codesearch.service.deps import Caller, StoreDep, app_services

if TYPE_CHECKING:
    from codesearch.permissions import Identity
    from codesearch.store import Store
    from codesearch.store.models import AuditEvent

log = logging.getLogger(__name__)

#: What is recorded, and when.
ACTIONS = {
    "search": "a search (POST /api/search, /api/stream_search, the search page, an agent's search tool, "
    "POST /api/find_definitions and /api/find_references: target the symbol)",
    "source.read": "a file read (GET /api/source, a file page, an agent's read tool)",
    "tree.read": "a directory listed (GET or POST /api/tree, a directory page)",
    "commits.read": "a history read (GET /api/commits, a history page)",
    "blame.read": "a file's blame read (GET /api/blame, a blame page)",
    "commit.read": "one commit and its changes read (GET /api/commit, a commit page)",
    "diff.read": "two refs compared (GET /api/diff, a compare page)",
    "mcp.tool": "an MCP tool called (target: the tool's name)",
    "chat.ask": "a question to ask_codebase over REST or from the web UI's chat (target: the question; details: "
    "the chat's id)",
    "chat.read": "a research session page opened (target: the chat's id)",
    "chat.share": "a chat made PUBLIC or PRIVATE by its user (target: the chat's id)",
    "login": "a web sign-in",
    "login.failed": "a refused web sign-in (target: the e-mail typed)",
    "apikey.create": "an API key created (target: its id; never the key)",
    "apikey.revoke": "an API key revoked (target: its id)",
    "user.create": "an account created (target: its e-mail)",
    "user.role": "an account's role changed (target: its e-mail)",
    "oauth.client.register": "an OAuth client registered itself (target: its client id; never its secret)",
    "oauth.consent.grant": "a user allowed an OAuth client (target: the client id)",
    "oauth.consent.deny": "a user denied an OAuth client (target: the client id)",
    "oauth.token.issue": "OAuth tokens issued for an authorization code (target: the client id; never a token)",
    "oauth.token.refresh": "OAuth tokens refreshed (target: the client id)",
    "oauth.token.revoke": "an OAuth token revoked by its client (target: the client id)",
    "oauth.grant.revoke": "a user took back an OAuth client's access on the settings page: every token of that "
    "client for the user revoked (target: the client id)",
    "oauth.replay": "a used OAuth code or refresh token presented again: its grant revoked (target: the client id)",
    "login.sso": "a web sign-in through an identity provider (target: the e-mail; detail: the provider id)",
    "account.link": "an identity linked to an account (target: <provider id>:<login>)",
    "account.unlink": "an identity unlinked from an account (target: <provider id>:<login>)",
    "member.request": "a sign-up that waits for an owner's approval (target: its e-mail)",
    "member.approve": "a waiting sign-up approved (target: its e-mail)",
    "member.decline": "a waiting sign-up declined, the account deleted (target: its e-mail)",
    "invite.create": "an invite created (target: the e-mail it is for; never its token)",
    "invite.revoke": "an invite revoked (target: the start of its id)",
    "invite.accept": "an invite used to join (target: the new account's e-mail)",
    "connection.resync": "an owner asked for a connection to be synced now (target: the connection's name)",
    "repo.reindex": "an owner asked for a repository to be re-indexed from the settings page (target: its name)",
    "settings.access": "an owner switched anonymous access (target: the setting; detail: enabled)",
    "insight.create": "an insight saved (target: its id; detail: its name)",
    "insight.read": "an insight's counts read (GET /api/insights/<id>, its CSV, its page; target: its id)",
    "insight.delete": "an insight deleted by its user or an owner (target: its id; detail: its name)",
}

RETENTION_ENV = environment.AUDIT_RETENTION_ENV
DEFAULT_RETENTION_DAYS = environment.DEFAULT_AUDIT_RETENTION_DAYS
#: Seconds between two writes of the queued events.
FLUSH_S = 0.5
#: Events waiting to be written at most (beyond: dropped and logged).
QUEUE_MAX = 10_000
#: Seconds between two removals of events past the retention.
PRUNE_EVERY_S = 3600.0
#: Characters of a target or a detail value kept.
MAX_TEXT = 500

_SECRET_NAME = re.compile(r"(?i)(pass|secret|token|key|cookie|authorization|credential)")


def retention_days(environ: Mapping[str, str]) -> int:
    """``AUDIT_RETENTION_DAYS`` (`codesearch.environment.audit_retention_days`)."""
    return environment.audit_retention_days(environ)


def _clean(details: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in details.items():
        if _SECRET_NAME.search(k):
            continue
        if isinstance(v, str):
            v = v[:MAX_TEXT]
        elif not isinstance(v, (bool, int, float, type(None))):
            v = str(v)[:MAX_TEXT]
        out[k] = v
    return out


def actor_of(identity: Identity | None) -> tuple[int | None, str]:
    user = getattr(identity, "user", None)
    if user is None:
        return None, "anonymous"
    return getattr(user, "id", None), str(getattr(user, "email", "") or f"user {getattr(user, 'id', '?')}")


class AuditLog:
    """The audit log of one process (see the module docstring)."""

    def __init__(
        self, get_store: Callable[[], Store | None], retention: int = DEFAULT_RETENTION_DAYS, flush_s: float = FLUSH_S
    ):
        self._get_store = get_store
        self.retention = retention
        self.flush_s = flush_s
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=QUEUE_MAX)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pruned_at = float("-inf")
        self.dropped = 0

    def record(self, identity: Identity | None, action: str, target: str = "", **details: Any) -> None:
        """Queue one event (never blocks, never raises)."""
        try:
            user_id, actor = actor_of(identity)
            self._queue.put_nowait(
                {
                    "at": datetime.now(UTC),
                    "actor_user_id": user_id,
                    "actor": actor,
                    "action": action,
                    "target": str(target)[:MAX_TEXT],
                    "details": _clean(details),
                    "request_id": request_ids.current(),
                }
            )
        except queue.Full:
            self.dropped += 1
            if self.dropped in (1, 10, 100) or self.dropped % 1000 == 0:
                log.error("audit log: %d event(s) dropped (the store does not keep up)", self.dropped)
            return
        except Exception as e:  # noqa: BLE001 - recording must never fail a request
            log.error("audit log: event not recorded: %s", e)
            return
        if self._thread is None:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="codesearch-audit", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.flush_s)
            self.flush()

    def flush(self) -> int:
        """Write what is queued now (and prune when due); returns how many events were written."""
        batch: list[dict[str, Any]] = []
        while len(batch) < 1000:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        store = None
        try:
            store = self._get_store()
            if store is None:
                return 0
            written = store.add_audit_events(batch) if batch else 0
        except Exception as e:  # noqa: BLE001 - the store is unavailable: these events are lost, say so
            log.error("audit log: %d event(s) not written: %s", len(batch), e)
            return 0
        if self.retention and time.monotonic() - self._pruned_at > PRUNE_EVERY_S:
            self._pruned_at = time.monotonic()
            try:
                store.prune_audit_events(datetime.now(UTC) - timedelta(days=self.retention))
            except Exception as e:  # noqa: BLE001
                log.error("audit log: old events not removed: %s", e)
        return written


def audit_of(request: Request) -> AuditLog | None:
    """The audit log of the app serving `request` (`deps.Services.audit`)."""
    return app_services(request).audit


def record(request: Request, identity: Identity | None, action: str, target: str = "", **details: Any) -> None:
    """Record through the app's audit log, if it has one."""
    log_ = audit_of(request)
    if log_ is not None:
        log_.record(identity, action, target, **details)


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
    if getattr(identity.user, "role", None) != "OWNER":
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
