"""`StoreBase`: what every aggregate mixin may use of the `Store` it is mixed into.

Each mixin (`codesearch.store.connections`, `.users`, ...) is only ever a base of `Store`, whose
`__init__` sets the attributes below and which defines the transaction (`_tx`), the clock
(`_now`) and the derived keys; a few helpers of one aggregate are used by another in the same
transaction (`_get_user`, `_connection_id`, ...). Declaring them here lets each mixin be checked
on its own: a misspelt name or a changed signature is a type error in the mixin that uses it,
and `Store`'s (or the owning mixin's) definition must match the declaration.

The methods are declared for the type checker only (`TYPE_CHECKING`): at run time this class is
empty, so nothing here can shadow the real definitions whatever the order of `Store`'s bases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Unpack

from sqlalchemy.engine import Connection as SAConnection
from sqlalchemy.engine import Engine
from sqlalchemy.sql import ColumnElement

if TYPE_CHECKING:
    from codesearch.store.models import Chat, LinkedAccount, LinkedIdentity, Repo, User


class StoreBase:
    """The attributes and cross-aggregate methods of `Store` that its mixins use (see the module)."""

    engine: Engine
    #: the database as messages name it (`describe_database`)
    database: str
    #: the server secret: keys hashes of API keys, sign-in counters and the derived keys
    _secret: bytes
    #: the sign-in secret (`AUTH_SECRET`): keys the stored form of session cookies
    _auth_secret: bytes
    clock: Callable[[], datetime]
    max_attempts: int
    retry_base_seconds: float
    retry_max_seconds: float
    last_used_resolution_seconds: float

    if TYPE_CHECKING:
        # --- Store (store.py)
        def _tx(self, write: bool = False) -> AbstractContextManager[SAConnection]: ...

        def _now(self) -> datetime: ...

        def derive_key(self, purpose: str) -> bytes: ...

        def public_error(
            self, error: str | None, *, repo_name: str | None = None, local_path: str | None = None
        ) -> str | None: ...

        # --- helpers one aggregate lends another, inside the caller's transaction `c`
        def _get_user(self, c: SAConnection, user_id: int) -> User: ...

        def _connection_id(self, c: SAConnection, name: str) -> int: ...

        def _get_repo(self, c: SAConnection, repo: int | str) -> Repo: ...

        def _repo_error(self, c: SAConnection, repo_id: int | None, error: str | None) -> str | None: ...

        def _mark_orphans(self, c: SAConnection, candidates: Iterable[int], now: datetime) -> list[int]: ...

        def _get_chat(self, c: SAConnection, chat_id: str) -> Chat: ...

        def _reset_login_counter(self, c: SAConnection, kind: str, value: str) -> None: ...

        def _serialize_user_creation(self, c: SAConnection) -> None: ...

        @staticmethod
        def _waiting(user_id_column: ColumnElement[Any]) -> ColumnElement[bool]: ...

        def _waits(self, c: SAConnection, user_id: int) -> bool: ...

        def _link_account(self, c: SAConnection, user_id: int, **identity: Unpack[LinkedIdentity]) -> LinkedAccount: ...
