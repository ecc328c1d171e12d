"""One-time sign-in codes sent by e-mail: short-lived, single-use, stored hashed, few attempts.

An address has at most one code: asking again replaces it. The code is 6 digits (Sourcebot's
shape), drawn by `secrets`; the store keeps the HMAC-SHA256 of ``address + code`` under a key
derived from the server secret, and the row's key is the HMAC of the address, so the table names
no address and no code. Checking a code (`use_email_code`) is one write transaction: an expired
code is deleted; a right code (compared in constant time) is deleted too (it works once); a wrong
one counts, and the code is deleted at `MAX_ATTEMPTS` wrong tries (one in 200,000 chances to guess
a live code; the sign-in lock-outs of `codesearch.web.throttle` bound the tries per address and
per client besides). How often a code may be *sent* is the pages' business (`codesearch.web.throttle`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from sqlalchemy import delete, insert, select, update

from codesearch.store.base import StoreBase
from codesearch.store.tables import email_codes

#: how long a code works
CODE_TTL = timedelta(minutes=10)
#: wrong tries a code survives
MAX_ATTEMPTS = 5
CODE_DIGITS = 6


def _address(email: str) -> str:
    return (email or "").strip().lower()


class EmailCodesMixin(StoreBase):
    """The `Store` methods for e-mail sign-in codes (mixed into `Store`)."""

    def _code_key(self, email: str) -> str:
        return hmac.new(self.derive_key("email codes"), _address(email).encode(), hashlib.sha256).hexdigest()

    def _code_hash(self, email: str, code: str) -> str:
        msg = f"{_address(email)}\0{code}".encode()
        return hmac.new(self.derive_key("email code values"), msg, hashlib.sha256).hexdigest()

    def issue_email_code(self, email: str, ttl: timedelta = CODE_TTL) -> str:
        """A new code for `email` (any code it had stops working); returned this once."""
        code = f"{secrets.randbelow(10**CODE_DIGITS):0{CODE_DIGITS}d}"
        now = self._now()
        key = self._code_key(email)
        with self._tx(write=True) as c:
            c.execute(delete(email_codes).where((email_codes.c.key == key) | (email_codes.c.expires_at <= now)))
            c.execute(
                insert(email_codes).values(
                    key=key, code_hash=self._code_hash(email, code), attempts=0, created_at=now, expires_at=now + ttl
                )
            )
        return code

    def use_email_code(self, email: str, code: str) -> bool:
        """Whether `code` is `email`'s live code; a right code is used up, a wrong one counts."""
        code = (code or "").strip().replace(" ", "")
        key = self._code_key(email)
        now = self._now()
        given = self._code_hash(email, code[:32])
        with self._tx(write=True) as c:
            row = c.execute(select(email_codes).where(email_codes.c.key == key).with_for_update()).first()
            if row is None:
                return False
            if row.expires_at <= now:
                c.execute(delete(email_codes).where(email_codes.c.key == key))
                return False
            if hmac.compare_digest(row.code_hash, given):
                c.execute(delete(email_codes).where(email_codes.c.key == key))
                return True
            if row.attempts + 1 >= MAX_ATTEMPTS:
                c.execute(delete(email_codes).where(email_codes.c.key == key))
            else:
                c.execute(update(email_codes).where(email_codes.c.key == key).values(attempts=row.attempts + 1))
            return False
