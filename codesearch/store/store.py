"""`Store`: the one owner of the state database (see the package docstring for the overview).

`Store` itself opens the database, runs transactions (`_tx`), tells the time and derives keys
from the server secret; its methods on each kind of row come from one mixin per aggregate (the
package docstring lists them). Each mixin method is one whole transaction on its aggregate's
tables, which may read or clean up a neighbour's rows in the same transaction (deleting a
connection drops its sync jobs; whether a repo is due reads its index jobs).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection as SAConnection
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from codesearch import environment
from codesearch.errors import is_disk_full
from codesearch.store.api_keys import ApiKeysMixin
from codesearch.store.audit import AuditMixin
from codesearch.store.catalog import CatalogMixin
from codesearch.store.chat_sharing import ChatSharingMixin
from codesearch.store.chat_turns import ChatTurnsMixin
from codesearch.store.chats import ChatsMixin
from codesearch.store.connections import ConnectionsMixin
from codesearch.store.durability import warn_if_not_durable
from codesearch.store.email_codes import EmailCodesMixin
from codesearch.store.engine import describe_database, is_memory_sqlite, make_engine
from codesearch.store.errors import Conflict, StoreError
from codesearch.store.files import private_dir, tighten_sqlite
from codesearch.store.grants import GrantsMixin
from codesearch.store.identities import IdentitiesMixin
from codesearch.store.insights import InsightsMixin
from codesearch.store.jobs import JobsMixin
from codesearch.store.lockouts import LoginLockoutsMixin
from codesearch.store.members import MembersMixin
from codesearch.store.migrations import LATEST_VERSION, current_version, migrate
from codesearch.store.oauth_clients import OAuthClientsMixin
from codesearch.store.oauth_tokens import OAuthTokensMixin
from codesearch.store.offboarding import OffboardingMixin
from codesearch.store.repos import ReposMixin
from codesearch.store.scoped_tokens import ScopedTokensMixin
from codesearch.store.secret import load_server_secret, session_secret
from codesearch.store.settings import SettingsMixin
from codesearch.store.skills import SkillsMixin
from codesearch.store.users import UsersMixin
from codesearch.store.web_sessions import WebSessionsMixin

DB_FILE = "codesearch.db"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Store(
    ConnectionsMixin,
    ReposMixin,
    JobsMixin,
    UsersMixin,
    ApiKeysMixin,
    WebSessionsMixin,
    LoginLockoutsMixin,
    EmailCodesMixin,
    MembersMixin,
    OffboardingMixin,
    ScopedTokensMixin,
    IdentitiesMixin,
    GrantsMixin,
    SettingsMixin,
    OAuthClientsMixin,
    OAuthTokensMixin,
    AuditMixin,
    CatalogMixin,
    ChatsMixin,
    ChatTurnsMixin,
    ChatSharingMixin,
    InsightsMixin,
    SkillsMixin,
):
    """The state database: connections, repos and their links, jobs, users, API keys, contexts.

    Open with `Store.open(data_dir)`; every method is one short transaction and the object is
    safe to share between threads. Open one `Store` per process (engines do not survive
    `fork`); `close()` when done.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        secret: bytes,
        clock: Callable[[], datetime] | None = None,
        max_attempts: int = 3,
        retry_base_seconds: float = 10.0,
        retry_max_seconds: float = 600.0,
        last_used_resolution_seconds: float = 60.0,
        auth_secret: bytes | None = None,
        data_dir: str | None = None,
    ):
        self.engine = engine
        self.database = describe_database(engine.url)
        self._secret = secret
        #: keys the stored form of session cookies and the web UI's visitor CSRF tokens
        self._auth_secret = auth_secret if auth_secret is not None else session_secret(secret, {})
        #: folders that recorded errors name in data-directory terms (`public_error`)
        self._private_roots = _roots(data_dir)
        #: Returns "now" (aware UTC). Replace it in tests to move time.
        self.clock = clock or _utcnow
        self.max_attempts = max_attempts
        self.retry_base_seconds = retry_base_seconds
        self.retry_max_seconds = retry_max_seconds
        self.last_used_resolution_seconds = last_used_resolution_seconds

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        *,
        database_url: str | None = None,
        environ: Mapping[str, str] | None = None,
        secret: bytes | None = None,
        **options: Any,
    ) -> Store:
        """Open (creating and migrating as needed) the state database.

        The database is `database_url`, else `DATABASE_URL` from `environ` (default
        `os.environ`) or the URL Sourcebot's split ``DATABASE_*`` variables make
        (`codesearch.environment.database_url`), else the SQLite file `<data_dir>/codesearch.db`. The server secret is
        `secret`, else `load_server_secret(data_dir, environ)`; the sign-in secret is
        `AUTH_SECRET` from `environ`, else derived from it. `options` go to `Store()`.
        Raises `SchemaTooNew` when the database was migrated by a newer codesearch.

        The data directory is made private (0700) and a SQLite database file 0600, both
        tightened when an older release left them open to others (`codesearch.store.files`).
        A PostgreSQL server that runs with a durability setting off is named in a warning
        (`codesearch.store.durability`).
        """
        environ = os.environ if environ is None else environ
        data_dir = private_dir(data_dir)
        url = database_url or environment.database_url(environ) or f"sqlite:///{os.path.join(data_dir, DB_FILE)}"
        engine = make_engine(url)
        if engine.url.get_backend_name() == "sqlite" and engine.url.database and not is_memory_sqlite(engine.url):
            tighten_sqlite(engine.url.database)
        try:
            migrate(engine, database=describe_database(engine.url))
            warn_if_not_durable(engine, describe_database(engine.url))
        except DBAPIError as e:
            engine.dispose()
            raise StoreError(f"cannot open {describe_database(engine.url)}: {e.orig}") from None
        except BaseException:
            engine.dispose()
            raise
        if secret is None:
            secret = load_server_secret(data_dir, environ)
        options.setdefault("auth_secret", session_secret(secret, environ))
        return cls(engine, secret=secret, data_dir=data_dir, **options)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        with self._tx() as c:
            return current_version(c)

    latest_schema_version = LATEST_VERSION

    @contextmanager
    def _tx(self, write: bool = False) -> Iterator[SAConnection]:
        """One transaction; database errors become StoreError (IntegrityError: Conflict)."""
        try:
            with self.engine.connect() as conn:
                if write:
                    conn.execution_options(codesearch_write=True)
                with conn.begin():
                    yield conn
        except IntegrityError as e:
            raise Conflict(f"{self.database}: constraint violated: {e.orig}") from None
        except DBAPIError as e:
            if is_disk_full(e.orig):  # SQLite rolled the transaction back: what was stored is intact
                raise StoreError(
                    f"{self.database}: a write failed because its disk is full ({e.orig}); nothing was "
                    "changed: free space on the disk of the data directory, then retry"
                ) from None
            raise StoreError(f"{self.database}: {e.orig}") from None

    def _now(self) -> datetime:
        now = self.clock()
        return now if now.tzinfo else now.replace(tzinfo=UTC)

    def public_error(
        self, error: str | None, *, repo_name: str | None = None, local_path: str | None = None
    ) -> str | None:
        """`error` as the store records it for users (API answers, web pages), in repository
        terms: a local repository's folder written ``<its name>``, the data directory (as given
        or as resolved through links) ``<data dir>``. Workers record whatever their exception
        said, and an OS or git error names the folder it failed on."""
        if not error:
            return error
        if local_path and repo_name:
            for root in _roots(local_path):
                error = error.replace(root, f"<{repo_name}>")
        for root in self._private_roots:
            error = error.replace(root, "<data dir>")
        return error

    # ------------------------------------------------------------------ keys derived from the secrets

    def derive_key(self, purpose: str) -> bytes:
        """A key for `purpose`, derived from the server secret: the same in every process that
        opens this data directory."""
        return hmac.new(self._secret, b"codesearch derived key: " + purpose.encode("utf-8"), hashlib.sha256).digest()

    def auth_key(self, purpose: str) -> bytes:
        """A key for `purpose` of the web sign-in (e.g. signing the visitor CSRF cookie), derived
        from the sign-in secret (`AUTH_SECRET`): changing that secret changes it."""
        return hmac.new(
            self._auth_secret, b"codesearch sign-in key: " + purpose.encode("utf-8"), hashlib.sha256
        ).digest()


def _roots(data_dir: str | None) -> list[str]:
    """The data directory as given and as resolved (longest first, so that neither leaves a
    piece of the other behind when replaced)."""
    if not data_dir:
        return []
    given = os.path.abspath(data_dir)
    return sorted({given, os.path.realpath(given)}, key=len, reverse=True)
