"""Wait for an audit event, for any test that drives the service and then reads its audit log.

    from tests.audited import audited

    assert audited(store, "member.remove", "a@example.com")
    assert audited(store, "search", details={"file": "demo:src/app.py"})

The service's audit log queues events and a writer thread stores them every 0.5 s
(`codesearch.audit.log.FLUSH_S`), so an event a request recorded is in the store a little after
its answer: reading the log at once is a race (CI lost it once). `audited` polls the store until
an event matches or `timeout_s` passes, and returns whether one did.
"""

from __future__ import annotations

import time
from typing import Any

POLL_S = 0.05


def audited(store, action: str, target: str | None = None, *, details: dict[str, Any] | None = None,
            timeout_s: float = 10.0) -> bool:
    """Whether an `action` event on `target` (any target when None) whose details include
    `details` is written within `timeout_s`."""
    want = (details or {}).items()
    deadline = time.monotonic() + timeout_s
    while True:
        for e in store.list_audit_events(action=action, per_page=200)[0]:
            if (target is None or e.target == target) and want <= e.details.items():
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
