"""Whether a language model is configured, as the pages that offer search assist need to know.

The home and results pages show search assist (`_search_assist.html`) only when the config names a
language model, as Sourcebot does. The page used to learn it after loading, with a
``GET /api/models`` from every results page; the server now says so in the page. The answer is
read from the store at most once per `TTL_S` per replica (`codesearch.store.reread`: a config change
reaches the pages within that time, and a page costs no store read).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from codesearch.store.reread import Reread

if TYPE_CHECKING:
    from codesearch.store import Store

#: Seconds a replica trusts what it read (as `codesearch.web.security_settings` does).
TTL_S = 3.0


def model_presence(get_store: Callable[[], Store | None], ttl_s: float = TTL_S) -> Reread[bool]:
    """``.get()``: whether the store lists a language model (False without a store)."""

    def configured() -> bool:
        store = get_store()
        return bool(store is not None and store.list_language_models())

    return Reread(configured, False, ttl_s, "the configured language models")
