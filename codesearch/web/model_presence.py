"""Whether a language model is configured, as the pages that offer search assist need to know.

The home and results pages show search assist (`_search_assist.html`) only when the config names a
language model, as Sourcebot does. The page used to learn it after loading, with a
``GET /api/models`` from every results page; the server now says so in the page. The answer is
read from the store at most once per `TTL_S` per replica (a config change reaches the pages
within that time), so a page costs no store read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codesearch.store import Store

#: Seconds a replica trusts what it read (as `codesearch.web.security_settings` does).
TTL_S = 3.0


class ModelPresence:
    """`configured()`: whether the store lists a language model, re-read once `ttl_s` has passed."""

    def __init__(
        self,
        get_store: Callable[[], Store | None],
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.get_store = get_store
        self.ttl_s = ttl_s
        self.clock = clock
        self._value = False
        self._read_at: float | None = None

    def configured(self) -> bool:
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.ttl_s:
            store = self.get_store()
            self._value = bool(store is not None and store.list_language_models())
            self._read_at = now
        return self._value
