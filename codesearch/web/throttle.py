"""Sign-in lock-outs: failed passwords cost time, per account and per client address.

Without them, anyone can try passwords as fast as argon2 answers (several a second). Every
sign-in attempt is counted on two counters kept in the state store (so every Serve replica, and
the service after a restart, sees the same counts):

* the **account** (the email as typed, trimmed and lower-cased, known or not: an unknown email
  is treated exactly like a known one, so lock-outs reveal nothing): `ACCOUNT`, 5 free failures,
  then lock-outs of 1 s, 2 s, 4 s, … doubling up to 15 minutes. A successful sign-in resets it;
* the **client address** (`codesearch.forwarded.client_address`: the TCP peer, or behind a
  reverse proxy named in ``CODESEARCH_TRUSTED_PROXIES`` the address that proxy saw; a client's own
  ``X-Forwarded-For`` never counts): `ADDRESS`, 20 free failures, then the same doubling. It
  stops one address from trying a few passwords on many accounts; a success takes back only its
  own attempt, so signing in to one's own account does not buy more guesses against others.

Counters forget failures a day after the last one. During a lock-out an attempt is refused
without looking at its password (a right password is refused too, and the refused attempt does
not extend the lock-out); the page says "Too many sign-in attempts: try again in N s" with HTTP
429 and ``Retry-After: N``. The effect on the attack measured before (120 guesses at 4.5 per
second): 15 guesses in the first 17 minutes, then 4 an hour.

Checking the current password on ``/settings/password`` (`check_password`) is an attempt like a
sign-in, on the same two counters: whoever holds a session (a stolen cookie, a computer left
signed in) cannot guess the account's password faster there than on the sign-in page.

The CLI (`codesearch users set-password`) is an operator's tool and is not limited; setting a
password there (or on the settings page) also ends the account's lock-out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codesearch import accounts
from codesearch.store import LOGIN_ACCOUNT, LOGIN_ADDRESS, Backoff

if TYPE_CHECKING:
    from codesearch.store import Store
    from codesearch.store.models import User

DAY = 86_400.0
ACCOUNT = Backoff(free=5, base_seconds=1.0, cap_seconds=900.0, forget_seconds=DAY)
ADDRESS = Backoff(free=20, base_seconds=1.0, cap_seconds=900.0, forget_seconds=DAY)


@dataclass
class SignIn:
    """The outcome of one attempt: the user when the password was right; otherwise
    `retry_after` is the seconds the caller must wait (0 when it may try again at once) and
    `refused` says whether the password was not even looked at (a lock-out was running)."""

    user: User | None = None
    retry_after: int = 0
    refused: bool = False

    def message(self) -> str:
        if self.refused:
            return f"Too many sign-in attempts: try again in {self.retry_after} s."
        if self.retry_after:
            return f"Incorrect email or password. Too many attempts: try again in {self.retry_after} s."
        return "Incorrect email or password."


def account_of(email: str) -> str:
    return (email or "").strip().lower()


def _attempt(store: Store, email: str, address: str, check: Callable[[], User | None]) -> SignIn:
    """One password check under the lock-outs of `email`'s account and of `address`: refused
    without calling `check` during a lock-out, else counted, and taken back when `check` finds the user."""
    account = account_of(email)
    counters = [(LOGIN_ACCOUNT, account, ACCOUNT), (LOGIN_ADDRESS, address, ADDRESS)]
    wait, lock_if_wrong = store.begin_login_attempt(counters)
    if wait > 0:
        return SignIn(retry_after=max(1, math.ceil(wait)), refused=True)
    user = check()
    if user is None:
        return SignIn(retry_after=math.ceil(lock_if_wrong))
    store.end_login_attempt(reset=[(LOGIN_ACCOUNT, account)], uncount=[(LOGIN_ADDRESS, address)])
    return SignIn(user=user)


def sign_in(store: Store, email: str, password: str, address: str) -> SignIn:
    """Check `email` and `password` under the lock-outs (see the module docstring)."""
    return _attempt(store, email, address, lambda: accounts.authenticate(store, email, password))


def check_password(store: Store, user: User, password: str, address: str) -> SignIn:
    """Check the signed-in `user`'s current `password` (``/settings/password``) under the same lock-outs."""
    return _attempt(
        store, user.email, address, lambda: user if accounts.verify_password(user.password_hash, password) else None
    )


# ---------------------------------------------------------------------- e-mail codes

#: sending a sign-in code, per address typed: 3 free, then 30 s, 60 s, … up to 15 minutes
CODE_SEND_ACCOUNT = Backoff(free=3, base_seconds=30.0, cap_seconds=900.0, forget_seconds=3600.0)
#: … and per client address (a whole office may share one): 50 free, then 1 s, 2 s, … up to 15 minutes
CODE_SEND_ADDRESS = Backoff(free=50, base_seconds=1.0, cap_seconds=900.0, forget_seconds=3600.0)


def may_send_code(store: Store, email: str, address: str) -> int:
    """Count one request for a sign-in code (for `email`, from `address`); the seconds to wait
    when it must be refused, else 0. Every request counts, sent or not (whether an address has an
    account shows neither in the answer nor in the limits)."""
    wait, _ = store.begin_login_attempt(
        [("code-send-account", account_of(email), CODE_SEND_ACCOUNT), ("code-send-address", address, CODE_SEND_ADDRESS)]
    )
    return max(1, math.ceil(wait)) if wait > 0 else 0


def sign_in_with_code(store: Store, email: str, code: str, address: str, user_for: Callable[[], User | None]) -> SignIn:
    """Check `email`'s sign-in `code` under the sign-in lock-outs (the same counters as a
    password); when it is right, the user is `user_for()` (found, or signed up)."""
    return _attempt(store, email, address, lambda: user_for() if store.use_email_code(email, code) else None)
