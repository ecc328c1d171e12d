"""Whether visitors without an account may search: the environment forces it on, owners switch it.

Precedence (first that applies):

1. ``FORCE_ENABLE_ANONYMOUS_ACCESS=true`` in the service's environment, or the deprecated config
   ``settings.enablePublicAccess: true`` (mapped to it at start-up), or ``anonymous_access=True``
   given to `build_app`: **on**, whatever the web toggle says (as in Sourcebot, where the
   variable forces the organization's setting on). The settings page shows the switch locked.
2. The owners' choice on ``/settings/access``, stored in the state database as the service
   setting ``anonymousAccess`` (``{"enabled": bool}``): every API replica reads the same row.
3. Otherwise **off**.

Each replica keeps what it read for `TTL_S` seconds (a search must not cost a database read), so a
change made on one replica reaches the others within that time; the replica that stored the
change knows it at once. A failed read keeps the last value known (off before any), and is logged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from codesearch.store.reread import Reread

if TYPE_CHECKING:
    from codesearch.store import Store

#: the service setting (`Store.put_service_setting`) holding the owners' choice
SETTING_KEY = "anonymousAccess"
#: seconds a replica trusts what it read
TTL_S = 3.0


class AnonymousAccess:
    """The current answer to "may visitors search?" for one process (see the module docstring)."""

    def __init__(self, get_store: Callable[[], Store | None], forced: bool, ttl_s: float = TTL_S):
        self.get_store = get_store
        #: on by the environment (or the caller of `build_app`): the web toggle cannot turn it off
        self.forced = bool(forced)
        self.ttl_s = float(ttl_s)
        self._stored = Reread(self.stored, False, self.ttl_s, "the anonymous access setting")

    def stale(self) -> bool:
        """Whether `enabled()` would read the store (callers on an event loop go to a thread first)."""
        return not self.forced and self._stored.stale()

    def cached(self) -> bool:
        """The last value known, without reading anything."""
        return self.forced or self._stored.last

    def enabled(self) -> bool:
        """On or off now (reads the store at most once per `ttl_s`)."""
        return self.forced or self._stored.get()

    def stored(self) -> bool:
        """The owners' choice as stored (read now), whatever the environment forces."""
        store = self.get_store()
        value = store.service_setting(SETTING_KEY) if store is not None else None
        return bool(isinstance(value, dict) and value.get("enabled") is True)

    def set(self, enabled: bool) -> bool:
        """Store the owners' choice for every replica; this one knows it at once. True when it
        changed. `RuntimeError` without a state database (there is nowhere to keep it)."""
        store = self.get_store()
        if store is None:
            raise RuntimeError("this service runs without a state database: anonymous access cannot be switched")
        changed = store.put_service_setting(SETTING_KEY, {"enabled": bool(enabled)})
        self._stored.set(bool(enabled))
        return changed
