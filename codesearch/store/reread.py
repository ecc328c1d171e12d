"""A value of the state database that each replica re-reads at most once per TTL.

What several replicas share through the store and read on their pages (the owners' security
settings, anonymous access, whether a language model is configured) is read again at most every `ttl_s` seconds: a
page must not cost a store read each time, and a change made on one replica reaches the others
within that time. A failed read keeps the last value known (a page still renders while the store
is briefly unreadable), is logged, and is tried again after the next `ttl_s`. A read may block
(a database round trip): code on an event loop asks `stale()` first and reads in a thread then.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class Reread(Generic[T]):
    """`get()`: `read()`'s value, read again once `ttl_s` has passed; `initial` until a read succeeds."""

    def __init__(
        self,
        read: Callable[[], T],
        initial: T,
        ttl_s: float,
        what: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.read = read
        self.ttl_s = ttl_s
        self.what = what
        self.clock = clock
        self._value = initial
        self._read_at: float | None = None
        self._lock = threading.Lock()

    @property
    def last(self) -> T:
        """The last value known, without reading anything."""
        return self._value

    def stale(self) -> bool:
        """Whether `get()` would read (callers on an event loop go to a thread first)."""
        read_at = self._read_at
        return read_at is None or self.clock() - read_at >= self.ttl_s

    def get(self) -> T:
        if self.stale():
            with self._lock:
                if self.stale():
                    try:
                        self._value = self.read()
                    except Exception:  # noqa: BLE001 - keep the last value known; the next read tries again
                        log.warning("could not read %s; keeping the last known", self.what, exc_info=True)
                    self._read_at = self.clock()
        return self._value

    def set(self, value: T) -> None:
        """What this replica just stored: known here at once."""
        with self._lock:
            self._value, self._read_at = value, self.clock()
