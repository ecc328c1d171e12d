"""Local accounts' passwords: the policy, the hash, and signing in with one.

One module for everything that touches a password, so the web's sign-in, setup, sign-up and
account pages and the ``codesearch users`` command hash and check passwords the same way (and
the command line does not import the web stack to do it). The store only ever sees hashes.

`hash_password` / `verify_password` use argon2id (argon2-cffi's `PasswordHasher`, its default
parameters); `authenticate` replaces a hash made with older parameters at the next sign-in.
A password has at least `MIN_PASSWORD_LENGTH` characters and at most `MAX_PASSWORD_LENGTH`
(`password_problem` says why not, in words for the user).
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

if TYPE_CHECKING:  # for the annotations only: hashing a password does not load the store
    from codesearch.store import Store
    from codesearch.store.models import User

log = logging.getLogger(__name__)

MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024  # argon2 hashes anything, but megabyte "passwords" are a cheap DoS

_hasher = PasswordHasher()
_dummy_hash: list[str] = []


class WeakPassword(ValueError):
    """The password does not meet the policy (the message says why, for the user)."""


def password_problem(password: str) -> str | None:
    """Why `password` cannot be used, or None when it can."""
    if not isinstance(password, str) or len(password) < MIN_PASSWORD_LENGTH:
        return f"The password must have at least {MIN_PASSWORD_LENGTH} characters."
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"The password must have at most {MAX_PASSWORD_LENGTH} characters."
    return None


def hash_password(password: str) -> str:
    """The argon2id hash of `password` (`WeakPassword` when it is too short or too long)."""
    problem = password_problem(password)
    if problem:
        raise WeakPassword(problem)
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """Whether `password` matches `password_hash` (False for no hash or a malformed one)."""
    if not password_hash or not isinstance(password, str) or len(password) > MAX_PASSWORD_LENGTH:
        return False
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """Whether the hash was made with other parameters than today's (or is not a hash)."""
    try:
        return _hasher.check_needs_rehash(password_hash)
    except (InvalidHashError, ValueError):
        return True


def _burn_time(password: str) -> None:
    """Verify against a throwaway hash, so an unknown email costs as long as a wrong password."""
    if not _dummy_hash:
        _dummy_hash.append(_hasher.hash(secrets.token_urlsafe(16)))
    verify_password(_dummy_hash[0], password or "x")


def authenticate(store: Store, email: str, password: str) -> User | None:
    """The user with this email and password, or None (the same for an unknown email, a wrong
    password or an account without a password). Upgrades an outdated hash."""
    user = store.find_user_by_email(email or "") if email else None
    if user is None or not user.password_hash:
        _burn_time(password)
        return None
    if not verify_password(user.password_hash, password):
        return None
    if needs_rehash(user.password_hash):
        try:
            store.set_user_password(user.id, _hasher.hash(password))
        except Exception:  # the sign-in still succeeds with the old hash
            log.warning("could not upgrade the password hash of user %s", user.id, exc_info=True)
    return user
