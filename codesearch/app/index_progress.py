"""What a search cannot see yet: repositories whose first index has not ended.

HTTP is up while the first sync runs (`codesearch.serving.bootstrap`), so a search may answer
from part of the code. It says so: while some repositories were never indexed, the stats of
``/api/search`` and the final event of ``/api/stream_search`` carry
``"indexing": {"repositories": <known>, "notYetIndexed": <waiting>}`` (absent once every
repository was indexed once, so a settled service answers exactly as before). A caller who may
see only some repositories gets no such entry (it counts every repository).

The count comes from the store (one query, `Store.index_progress`), read at most every
`TTL_S` seconds on a thread of its own: a search never waits for it, and may report a count up
to that old (the first search after a start reports nothing until the first read ended).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codesearch.store import Store

log = logging.getLogger(__name__)

#: Seconds a count is used before it is read again.
TTL_S = 2.0


class IndexProgress:
    def __init__(self, get_store: Callable[[], Store | None], ttl_s: float = TTL_S):
        self._get_store = get_store
        self._ttl_s = ttl_s
        self._value: dict[str, int] | None = None
        self._read_at = float("-inf")
        self._reading = False
        self._lock = threading.Lock()

    def stats(self) -> dict[str, int] | None:
        """The ``indexing`` stats to add to a search's answer, or None (all indexed, or unknown)."""
        now = time.monotonic()
        with self._lock:
            start = not self._reading and now - self._read_at >= self._ttl_s
            if start:
                self._reading = True
        if start:
            threading.Thread(target=self._read, name="codesearch-index-progress", daemon=True).start()
        return self._value

    def _read(self) -> None:
        value: dict[str, int] | None = None
        try:
            store = self._get_store()
            if store is not None:
                total, waiting = store.index_progress()
                value = {"repositories": total, "notYetIndexed": waiting} if waiting else None
        except Exception as e:  # noqa: BLE001 - the store is briefly unreadable: report nothing
            log.debug("index progress not read: %s", e)
        with self._lock:
            self._value, self._read_at, self._reading = value, time.monotonic(), False

    def add_to(self, stats: dict[str, Any]) -> dict[str, Any]:
        """`stats` with the ``indexing`` entry when some repositories are not indexed yet."""
        value = self.stats()
        if value is not None:
            stats["indexing"] = dict(value)
        return stats
