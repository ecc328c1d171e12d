"""Sign-in lock-outs: failed sign-ins in a row, per account and per client address.

Each counter's key is an HMAC of its kind and value under the server secret (no e-mail or
address is stored in clear). `begin_login_attempt` counts an attempt as a failure *before* its
password is checked, so parallel guesses cannot slip in; `end_login_attempt` takes it back when
the password was right. The lock-out lengths (`Backoff`) are the caller's (`codesearch.web.throttle`).

The same counters limit OAuth client registrations per client address (`OAUTH_REGISTRATION`,
`codesearch.service.routes.oauth`): each registration is an "attempt" that is never taken back.
Counters of every kind share one table, so the housekeeping in `begin_login_attempt` keeps each
row at least `KEEP_SECONDS` (a day, the longest memory of the sign-in counters) whatever the
calling counter's own `forget_seconds`: a counter that forgets after an hour must not erase the
sign-in counters of others (whether a counter has forgotten is decided when it is read).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from datetime import timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict
from codesearch.store.models import Backoff
from codesearch.store.tables import login_failures

#: the kinds of sign-in failure counters (`Store.begin_login_attempt`)
LOGIN_ACCOUNT = "account"
LOGIN_ADDRESS = "address"
#: client registrations at ``POST /oauth/register``, per client address
OAUTH_REGISTRATION = "oauth-registration"
#: Rows of the counters table are kept at least this long after their last count (see the module docstring).
KEEP_SECONDS = 86_400.0


class LoginLockoutsMixin(StoreBase):
    """The `Store` methods for sign-in lock-outs (mixed into `Store`)."""

    def _login_key(self, kind: str, value: str) -> str:
        return hmac.new(self._secret, f"sign-in {kind}\0{value}".encode(), hashlib.sha256).hexdigest()

    def _reset_login_counter(self, c: SAConnection, kind: str, value: str) -> None:
        """Forget the failures (and lock-out) of one counter, in transaction `c`."""
        c.execute(delete(login_failures).where(login_failures.c.key == self._login_key(kind, value)))

    def begin_login_attempt(self, limits: Iterable[tuple[str, str, Backoff]]) -> tuple[float, float]:
        """Count one sign-in attempt against each counter ``(kind, value, backoff)`` (e.g.
        ``("account", email, …)`` and ``("address", ip, …)``), in one transaction.

        Returns ``(wait, lock_if_wrong)``. When any counter is locked, `wait` is the seconds
        until the longest lock-out ends and nothing is counted: the attempt must be refused
        without checking its password, right or wrong. Otherwise `wait` is 0, the attempt is
        counted as a failure *before* its password is checked (so a burst of parallel guesses
        cannot all slip in before the first failure is recorded), and `lock_if_wrong` is the
        lock-out that now applies if the password turns out wrong; `end_login_attempt` takes the
        count back when it was right."""
        keyed = [(self._login_key(kind, value), backoff) for kind, value, backoff in limits]
        for attempt in range(3):
            try:
                return self._begin_login_attempt(keyed)
            except Conflict:  # two first failures of one counter at once (PostgreSQL): count again
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _begin_login_attempt(self, limits: list[tuple[str, Backoff]]) -> tuple[float, float]:
        now = self._now()
        with self._tx(write=True) as c:
            current = {}
            for key, backoff in limits:
                row = c.execute(select(login_failures).where(login_failures.c.key == key).with_for_update()).first()
                if row is not None and now - row.last_failure_at < timedelta(seconds=backoff.forget_seconds):
                    current[key] = (True, row.failures, row.locked_until)
                else:  # none yet, or forgotten
                    current[key] = (row is not None, 0, None)
            wait = max(
                (
                    (locked - now).total_seconds()
                    for _, _, locked in current.values()
                    if locked is not None and locked > now
                ),
                default=0.0,
            )
            if wait > 0:
                return wait, 0.0
            lock_if_wrong = 0.0
            for key, backoff in limits:
                stored, failures, _ = current[key]
                lock = backoff.lock_seconds(failures + 1)
                lock_if_wrong = max(lock_if_wrong, lock)
                values = {
                    "failures": failures + 1,
                    "last_failure_at": now,
                    "locked_until": now + timedelta(seconds=lock) if lock else None,
                }
                if stored:
                    c.execute(update(login_failures).where(login_failures.c.key == key).values(**values))
                else:
                    c.execute(insert(login_failures).values(key=key, **values))
            forget = max([KEEP_SECONDS, *(b.forget_seconds for _, b in limits)])
            c.execute(delete(login_failures).where(login_failures.c.last_failure_at < now - timedelta(seconds=forget)))
            return 0.0, lock_if_wrong

    def end_login_attempt(
        self, *, reset: Iterable[tuple[str, str]] = (), uncount: Iterable[tuple[str, str]] = ()
    ) -> None:
        """The attempt counted by `begin_login_attempt` succeeded: the `reset` counters start
        again from zero (the account's); the `uncount` counters forget this one attempt and the
        lock-out it set (the client address's: signing in to one's own account must not erase
        the failures it made against others). The attempt was let through, so no earlier
        lock-out was running: none is restored."""
        with self._tx(write=True) as c:
            for kind, value in reset:
                self._reset_login_counter(c, kind, value)
            for kind, value in uncount:
                key = self._login_key(kind, value)
                c.execute(delete(login_failures).where(login_failures.c.key == key, login_failures.c.failures <= 1))
                c.execute(
                    update(login_failures)
                    .where(login_failures.c.key == key)
                    .values(failures=login_failures.c.failures - 1, locked_until=None)
                )
