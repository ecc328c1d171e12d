"""The audit log of one process: events queued by `AuditLog.record`, written to the store by a thread.

Every event names the caller (their e-mail as it is now, ``anonymous``, or ``cli`` for the command
line: `actor_of`), the action (`codesearch.audit.actions.ACTIONS`), its target (a query,
``repo:path``, a key's id) and a few details, with the request's id
(`codesearch.runtime.request_ids`) and how the caller proved who they are (detail ``via``:
``apikey``, ``scoped``, ``oauth``, ``session``, ``iap``; `codesearch.permissions.Identity.via`). Secrets are
never recorded: no API key, password, token or cookie is passed in, and detail fields whose
names look like one are dropped (`_clean`).

Recording never makes a request wait or fail: events go into a bounded queue that a thread of
the process writes to the store in batches (every `FLUSH_S` seconds); if the store cannot take
them they are logged and dropped (a full queue drops new events, counted in the log). The same
thread removes events older than the retention (`codesearch.environment.audit_retention_days`:
``AUDIT_RETENTION_DAYS`` or Sourcebot's ``SOURCEBOT_EE_AUDIT_RETENTION_DAYS``, default 180; 0
keeps them forever) when it starts and then once an hour, 10,000 rows per transaction. With a
retention it is started with the app (`AuditLog.start`), so pruning runs on schedule even when
nothing is recorded.

With Sourcebot's ``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED=false``
(`codesearch.environment.audit_logging_enabled`) the log is off (`AuditLog.enabled`): `record`
keeps nothing and no thread is started, so nothing is written and, as Sourcebot, nothing pruned.
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

from codesearch import environment
from codesearch.runtime import request_ids

if TYPE_CHECKING:
    from codesearch.permissions import Identity
    from codesearch.store import Store

log = logging.getLogger(__name__)

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


def logging_enabled(environ: Mapping[str, str]) -> bool:
    """``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED`` (`codesearch.environment.audit_logging_enabled`)."""
    return environment.audit_logging_enabled(environ)


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
        self,
        get_store: Callable[[], Store | None],
        retention: int = DEFAULT_RETENTION_DAYS,
        flush_s: float = FLUSH_S,
        prune_every_s: float = PRUNE_EVERY_S,
        enabled: bool = True,
    ):
        self._get_store = get_store
        self.retention = retention
        #: False with ``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED=false``: nothing recorded, nothing pruned.
        self.enabled = enabled
        self.flush_s = flush_s
        self.prune_every_s = prune_every_s
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=QUEUE_MAX)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pruned_at = float("-inf")
        self.dropped = 0

    def record(self, identity: Identity | None, action: str, target: str = "", **details: Any) -> None:
        """Queue one event (never blocks, never raises); nothing when the log is off."""
        if not self.enabled:
            return
        try:
            user_id, actor = actor_of(identity)
            details = _clean(details)
            # how the caller signed in, from the identity only (never a detail a caller passed,
            # such as an MCP tool's argument): what the usage report counts API-key calls by
            details.pop("via", None)
            via = getattr(identity, "via", "")
            if via:
                details["via"] = via
            self._queue.put_nowait(
                {
                    "at": datetime.now(UTC),
                    "actor_user_id": user_id,
                    "actor": actor,
                    "action": action,
                    "target": str(target)[:MAX_TEXT],
                    "details": details,
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
            self.start()

    def start(self) -> None:
        """Start the writer thread (once): it writes what is queued and prunes on schedule. Not
        when the log is off: then there is nothing to write and nothing may be pruned."""
        with self._lock:
            if self._thread is None and self.enabled:
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
        prune = self.enabled and self.retention > 0 and time.monotonic() - self._pruned_at > self.prune_every_s
        if not batch and not prune:
            return 0  # nothing to do: the store is not even asked for (it may be down)
        if prune:
            self._pruned_at = time.monotonic()  # tried once per period, also when the store is down
        try:
            store = self._get_store()
            if store is None:
                return 0
            written = store.add_audit_events(batch) if batch else 0
        except Exception as e:  # noqa: BLE001 - the store is unavailable: these events are lost, say so
            if batch:
                log.error("audit log: %d event(s) not written: %s", len(batch), e)
            else:
                log.error("audit log: old events not removed: %s", e)
            return 0
        if prune:
            try:
                removed = store.prune_audit_events(datetime.now(UTC) - timedelta(days=self.retention))
            except Exception as e:  # noqa: BLE001
                log.error("audit log: old events not removed: %s", e)
            else:
                if removed:
                    log.info("audit log: %d event(s) older than %d days removed", removed, self.retention)
        return written
