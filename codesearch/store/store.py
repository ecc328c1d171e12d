"""`Store`: the one owner of the state database (see the package docstring for the overview)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import sqlite3
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator, Mapping

from sqlalchemy import and_, create_engine, delete, event, exists, func, insert, or_, select, update
from sqlalchemy.engine import Connection as SAConnection
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError
from sqlalchemy.pool import StaticPool

from codesearch.store import models as m
from codesearch.store.errors import Conflict, NotFound, StoreError
from codesearch.store.migrations import LATEST_VERSION, current_version, migrate
from codesearch.store.files import private_dir, tighten_sqlite
from codesearch.store.models import (
    ApiKey,
    Backoff,
    Chat,
    Connection,
    Job,
    Repo,
    RepoSyncResult,
    SearchContext,
    User,
    WebSession,
)
from codesearch.store.chat_turns import ChatTurnsMixin
from codesearch.store.grants import GrantsMixin
from codesearch.store.identities import IdentitiesMixin
from codesearch.store.members import MembersMixin
from codesearch.store.oauth import OAuthMixin
from codesearch.store.secret import load_server_secret, session_secret
from codesearch.store.tables import (
    api_keys,
    audit_events,
    chats,
    connections,
    jobs,
    language_models,
    login_failures,
    repo_connections,
    repos,
    search_contexts,
    users,
    web_sessions,
)

log = logging.getLogger(__name__)

DB_FILE = "codesearch.db"
#: the kinds of sign-in failure counters (`Store.begin_login_attempt`)
LOGIN_ACCOUNT = "account"
LOGIN_ADDRESS = "address"
API_KEY_PREFIX = "cs_"
#: SQLite waits this long for a lock before giving up ("database is locked").
BUSY_TIMEOUT_MS = 30_000
_CHUNK = 500  # ids per IN (...) list: well under every database's parameter limit

#: Fields a code-host listing provides (the attributes of `codesearch.hosts.base.HostRepo`).
LISTING_FIELDS: dict[str, Any] = {
    "name": None, "display_name": None, "code_host_type": None, "clone_url": None,
    "web_url": "", "file_url_template": "", "default_branch": None, "fork": False, "archived": False,
    "public": True, "topics": (), "size_bytes": None, "pushed_at": None, "stars": None, "external_id": "",
    "local_path": None,
}


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def config_hash(config: Mapping[str, Any]) -> str:
    """sha256 of the config as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _parse_time(value) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    try:
        t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _chunks(items: list, n: int = _CHUNK) -> Iterator[list]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def _row(cls, row):
    return cls(**row._mapping)


_API_KEY_COLUMNS = [api_keys.c.id, api_keys.c.user_id, api_keys.c.name, api_keys.c.created_at,
                    api_keys.c.last_used_at, api_keys.c.revoked_at]


def _is_memory_sqlite(url) -> bool:
    return url.get_backend_name() == "sqlite" and (url.database in (None, "", ":memory:")
                                                   or "mode=memory" in str(url.query.get("mode", "")))


def describe_database(url) -> str:
    """The database as messages name it: a SQLite file by its file name only (its folder is a
    server path, which no answer may carry), any other by its URL without the password."""
    if url.get_backend_name() == "sqlite":
        return "SQLite database " + (os.path.basename(url.database) if not _is_memory_sqlite(url) else ":memory:")
    return url.render_as_string(hide_password=True)


def _enable_wal(cur) -> None:
    """Put the database in WAL mode (a no-op once it is: the mode is stored in the file).

    Switching a new database to WAL needs its exclusive lock, and SQLite answers "database
    is locked" at once, without waiting on busy_timeout, when another process opening the
    same new file holds it. So wait here, for as long as busy_timeout would."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def make_engine(url: str) -> Engine:
    """An engine for `url`, with the SQLite settings of the package docstring when it is SQLite."""
    try:
        u = make_url(url)
    except ArgumentError:
        raise StoreError("the database URL (DATABASE_URL) is not a valid SQLAlchemy URL, "
                         "e.g. postgresql+psycopg://user:password@host/db") from None
    if u.get_backend_name() != "sqlite":
        try:
            return create_engine(u, pool_pre_ping=True)
        except (ImportError, NoSuchModuleError) as e:
            raise StoreError(f"database {u.render_as_string(hide_password=True)}: its driver is not installed "
                             f"({e}); install it (e.g. pip install psycopg) or use another DATABASE_URL") from None
    kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000}}
    if _is_memory_sqlite(u):
        kwargs["poolclass"] = StaticPool  # one shared connection: single-threaded use (tests) only
    engine = create_engine(u, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None  # SQLAlchemy emits BEGIN itself (below)
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _enable_wal(cur)
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.execute("PRAGMA foreign_keys = ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        # Write transactions take the write lock up front, so they queue on busy_timeout
        # instead of failing when a read transaction would have to be upgraded.
        write = conn.get_execution_options().get("codesearch_write")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


class Store(IdentitiesMixin, GrantsMixin, MembersMixin, OAuthMixin, ChatTurnsMixin):
    """The state database: connections, repos and their links, jobs, users, API keys, contexts.

    Open with `Store.open(data_dir)`; every method is one short transaction and the object is
    safe to share between threads. Open one `Store` per process (engines do not survive
    `fork`); `close()` when done.
    """

    def __init__(self, engine: Engine, *, secret: bytes, clock: Callable[[], datetime] | None = None,
                 max_attempts: int = 3, retry_base_seconds: float = 10.0, retry_max_seconds: float = 600.0,
                 last_used_resolution_seconds: float = 60.0, auth_secret: bytes | None = None,
                 data_dir: str | None = None):
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
    def open(cls, data_dir: str | os.PathLike, *, database_url: str | None = None,
             environ: Mapping[str, str] | None = None, secret: bytes | None = None, **options) -> "Store":
        """Open (creating and migrating as needed) the state database.

        The database is `database_url`, else `DATABASE_URL` from `environ` (default
        `os.environ`), else the SQLite file `<data_dir>/codesearch.db`. The server secret is
        `secret`, else `load_server_secret(data_dir, environ)`; the sign-in secret is
        `AUTH_SECRET` from `environ`, else derived from it. `options` go to `Store()`.
        Raises `SchemaTooNew` when the database was migrated by a newer codesearch.

        The data directory is made private (0700) and a SQLite database file 0600, both
        tightened when an older release left them open to others (`codesearch.store.files`).
        """
        environ = os.environ if environ is None else environ
        data_dir = private_dir(data_dir)
        url = database_url or (environ.get("DATABASE_URL") or "").strip() or f"sqlite:///{os.path.join(data_dir, DB_FILE)}"
        engine = make_engine(url)
        if engine.url.get_backend_name() == "sqlite" and not _is_memory_sqlite(engine.url):
            tighten_sqlite(engine.url.database)
        try:
            migrate(engine, database=describe_database(engine.url))
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

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
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
            raise StoreError(f"{self.database}: {e.orig}") from None

    def _now(self) -> datetime:
        now = self.clock()
        return now if now.tzinfo else now.replace(tzinfo=timezone.utc)

    def public_error(self, error: str | None, *, repo_name: str | None = None,
                     local_path: str | None = None) -> str | None:
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

    def _repo_error(self, c: SAConnection, repo_id: int | None, error: str | None) -> str | None:
        """`public_error` for an error of repo `repo_id` (None: no repo)."""
        row = c.execute(select(repos.c.name, repos.c.local_path).where(repos.c.id == repo_id)).first() \
            if repo_id is not None and error else None
        return self.public_error(error, repo_name=row.name if row else None, local_path=row.local_path if row else None)

    # ------------------------------------------------------------------ connections

    def upsert_connection(self, name: str, type: str, config: Mapping[str, Any],
                          listing_version: int = 1) -> tuple[Connection, bool]:
        """Create or update a connection by name. Returns (row, needs_sync): needs_sync is True
        when the connection is new or its config changed (its status is then SYNC_NEEDED).
        `listing_version` (`codesearch.hosts.base.listing_version` of its type) counts as part
        of the config: a new version of a kind's listing is a change of its connections."""
        h = config_hash(config if listing_version <= 1 else {**config, "#listing-version": listing_version})
        now = self._now()
        with self._tx(write=True) as c:
            row = c.execute(select(connections).where(connections.c.name == name)).first()
            if row is None:
                c.execute(insert(connections).values(
                    name=name, type=type, config=dict(config), config_hash=h, sync_status=m.SYNC_NEEDED,
                    sync_error=None, sync_warnings=[], created_at=now, updated_at=now, synced_at=None))
                changed = True
            elif row.config_hash != h or row.type != type:
                c.execute(update(connections).where(connections.c.id == row.id).values(
                    type=type, config=dict(config), config_hash=h, sync_status=m.SYNC_NEEDED, updated_at=now))
                changed = True
            else:
                changed = False
            return self._get_connection(c, name), changed

    def get_connection(self, name: str) -> Connection:
        with self._tx() as c:
            return self._get_connection(c, name)

    def list_connections(self) -> list[Connection]:
        with self._tx() as c:
            return [_row(Connection, r) for r in c.execute(select(connections).order_by(connections.c.name))]

    def delete_connection(self, name: str) -> list[int]:
        """Delete a connection (its links and sync jobs go with it). Returns the ids of the repos
        that now have no connection: they are marked orphaned (`orphaned_at` = now) for
        garbage collection after the grace period."""
        now = self._now()
        with self._tx(write=True) as c:
            cid = self._connection_id(c, name)
            linked = list(c.scalars(select(repo_connections.c.repo_id).where(repo_connections.c.connection_id == cid)))
            c.execute(delete(repo_connections).where(repo_connections.c.connection_id == cid))
            c.execute(delete(jobs).where(jobs.c.connection_id == cid))
            c.execute(delete(connections).where(connections.c.id == cid))
            return self._mark_orphans(c, linked, now)

    def update_connection_status(self, name: str, status: str, *, error: str | None = None,
                                 warnings: Iterable[str] | None = None, config_hash: str | None = None) -> Connection:
        """Set a connection's sync status. SYNCED / SYNCED_WITH_WARNINGS also set `synced_at`.
        Pass the `config_hash` the sync ran with: when the config changed meanwhile, the
        status stays SYNC_NEEDED so that the new config is synced too."""
        if status not in m.CONNECTION_STATUSES:
            raise ValueError(f"unknown connection status {status!r}")
        now = self._now()
        with self._tx(write=True) as c:
            row = c.execute(select(connections.c.id, connections.c.config_hash).where(connections.c.name == name)).first()
            if row is None:
                raise NotFound("connection", name)
            values: dict[str, Any] = {"sync_status": status, "sync_error": self.public_error(error), "updated_at": now}
            if warnings is not None:
                values["sync_warnings"] = list(warnings)
            if status in (m.SYNCED, m.SYNCED_WITH_WARNINGS):
                values["synced_at"] = now
            if config_hash is not None and config_hash != row.config_hash:
                values["sync_status"] = m.SYNC_NEEDED
            c.execute(update(connections).where(connections.c.id == row.id).values(**values))
            return self._get_connection(c, name)

    def connections_due_for_sync(self, interval_seconds: float) -> list[Connection]:
        """Connections to sync now: no sync job PENDING or IN_PROGRESS, and either SYNC_NEEDED,
        or never synced / last synced more than `interval_seconds` ago (a sync job that FAILED
        within the interval holds those back, so a failing host is retried once per interval).
        The sync worker sets the status (SYNCING, then SYNCED or FAILED) with
        `update_connection_status`: a connection left in SYNC_NEEDED is always due."""
        cutoff = self._now() - timedelta(seconds=interval_seconds)
        active = exists().where(jobs.c.connection_id == connections.c.id, jobs.c.kind == m.SYNC_JOB,
                                jobs.c.state.in_((m.PENDING, m.IN_PROGRESS)))
        recent_failure = exists().where(jobs.c.connection_id == connections.c.id, jobs.c.kind == m.SYNC_JOB,
                                        jobs.c.state == m.FAILED, jobs.c.finished_at >= cutoff)
        stale = or_(connections.c.synced_at.is_(None), connections.c.synced_at < cutoff)
        q = select(connections).where(~active, or_(connections.c.sync_status == m.SYNC_NEEDED,
                                                   and_(stale, ~recent_failure))).order_by(connections.c.id)
        with self._tx() as c:
            return [_row(Connection, r) for r in c.execute(q)]

    def _get_connection(self, c: SAConnection, name: str) -> Connection:
        row = c.execute(select(connections).where(connections.c.name == name)).first()
        if row is None:
            raise NotFound("connection", name)
        return _row(Connection, row)

    def _connection_id(self, c: SAConnection, name: str) -> int:
        cid = c.scalar(select(connections.c.id).where(connections.c.name == name))
        if cid is None:
            raise NotFound("connection", name)
        return cid

    # ------------------------------------------------------------------ repos

    def upsert_repos(self, connection: str, listing: Iterable[Any], *, prune: bool = True) -> RepoSyncResult:
        """Apply one connection's listing: upsert repos by name (ids stay stable), link them to
        the connection and, with `prune`, unlink the connection's repos that are no longer
        listed; repos left with no connection are marked orphaned. Re-listed orphans are
        revived. Items are `HostRepo`s, or any object or mapping with the `LISTING_FIELDS`."""
        items: dict[str, dict[str, Any]] = {}
        for item in listing:
            values = _listing_values(item)
            items[values["name"]] = values  # the last one of a duplicated name wins
        for attempt in range(3):
            try:
                return self._upsert_repos(connection, list(items.values()), prune)
            except Conflict:  # PostgreSQL: a concurrent sync inserted the same new repo; redo
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _upsert_repos(self, connection: str, items: list[dict[str, Any]], prune: bool) -> RepoSyncResult:
        now = self._now()
        result = RepoSyncResult()
        with self._tx(write=True) as c:
            cid = self._connection_id(c, connection)
            existing: dict[str, Any] = {}
            for chunk in _chunks([v["name"] for v in items]):
                for row in c.execute(select(repos).where(repos.c.name.in_(chunk))):
                    existing[row.name] = row
            for v in items:
                row = existing.get(v["name"])
                if row is None:
                    rid = c.execute(insert(repos).values(
                        **v, created_at=now, updated_at=now, indexed_at=None, indexed_revisions={},
                        index_status=m.INDEX_NEW, last_error=None, orphaned_at=None)).inserted_primary_key[0]
                    result.added.append(rid)
                else:
                    rid = row.id
                    changed = {k: val for k, val in v.items() if getattr(row, k) != val}
                    if row.indexed_at is not None:
                        # once indexed, pushed_at is the default branch's newest commit (recorded by the
                        # indexer): the host's date only says whether a push came after that index
                        host_pushed = changed.pop("pushed_at", None)
                        if host_pushed is not None and host_pushed > row.indexed_at:
                            result.updated.append(rid)
                    if changed and rid not in result.updated:
                        result.updated.append(rid)
                    if changed or row.orphaned_at is not None:
                        c.execute(update(repos).where(repos.c.id == rid).values(**changed, updated_at=now, orphaned_at=None))
                result.ids[v["name"]] = rid
            linked = set(c.scalars(select(repo_connections.c.repo_id).where(repo_connections.c.connection_id == cid)))
            listed = set(result.ids.values())
            result.linked = sorted(listed - linked)
            if result.linked:
                c.execute(insert(repo_connections), [{"repo_id": r, "connection_id": cid, "created_at": now}
                                                     for r in result.linked])
            if prune:
                result.unlinked = sorted(linked - listed)
                for chunk in _chunks(result.unlinked):
                    c.execute(delete(repo_connections).where(repo_connections.c.connection_id == cid,
                                                             repo_connections.c.repo_id.in_(chunk)))
                result.orphaned = self._mark_orphans(c, result.unlinked, now)
        return result

    def link_repo(self, repo_id: int, connection: str) -> bool:
        """Link a repo to a connection (clears `orphaned_at`). False when already linked."""
        now = self._now()
        with self._tx(write=True) as c:
            cid = self._connection_id(c, connection)
            self._get_repo(c, repo_id)
            if c.scalar(select(func.count()).select_from(repo_connections).where(
                    repo_connections.c.repo_id == repo_id, repo_connections.c.connection_id == cid)):
                return False
            c.execute(insert(repo_connections).values(repo_id=repo_id, connection_id=cid, created_at=now))
            c.execute(update(repos).where(repos.c.id == repo_id, repos.c.orphaned_at.is_not(None)).values(orphaned_at=None))
            return True

    def unlink_repo(self, repo_id: int, connection: str) -> bool:
        """Unlink a repo from a connection. Returns True when the repo is now orphaned."""
        now = self._now()
        with self._tx(write=True) as c:
            cid = self._connection_id(c, connection)
            c.execute(delete(repo_connections).where(repo_connections.c.repo_id == repo_id,
                                                     repo_connections.c.connection_id == cid))
            return bool(self._mark_orphans(c, [repo_id], now))

    def _mark_orphans(self, c: SAConnection, candidates: Iterable[int], now: datetime) -> list[int]:
        """Of `candidates`, the repos with no link left; sets their `orphaned_at` if unset."""
        orphans: list[int] = []
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)
        for chunk in _chunks(sorted(set(candidates))):
            ids = list(c.scalars(select(repos.c.id).where(repos.c.id.in_(chunk), ~linked)))
            if ids:
                c.execute(update(repos).where(repos.c.id.in_(ids), repos.c.orphaned_at.is_(None)).values(orphaned_at=now))
            orphans += ids
        return sorted(orphans)

    def get_repo(self, repo: int | str) -> Repo:
        """A repo by id or by name; NotFound (REPOSITORY_NOT_FOUND) when there is none."""
        with self._tx() as c:
            return self._get_repo(c, repo)

    def find_repo(self, name: str) -> Repo | None:
        with self._tx() as c:
            row = c.execute(select(repos).where(repos.c.name == name)).first()
            return _row(Repo, row) if row else None

    def _get_repo(self, c: SAConnection, repo: int | str) -> Repo:
        where = repos.c.name == repo if isinstance(repo, str) else repos.c.id == repo
        row = c.execute(select(repos).where(where)).first()
        if row is None:
            raise NotFound("repository", repo)
        return _row(Repo, row)

    def list_repos(self, *, page: int = 1, per_page: int = 30, sort: str = "name", direction: str = "asc",
                   query: str | None = None, connection: str | None = None) -> tuple[list[Repo], int]:
        """One page of repos and the total count of matching repos.

        `sort` is "name" or "pushed" (repos never pushed come last either way), `direction`
        "asc" or "desc", `query` a case-insensitive substring of the name, `connection` keeps
        the repos linked to that connection. Ties are broken by id."""
        if page < 1 or per_page < 1:
            raise ValueError("page and per_page start at 1")
        if sort not in ("name", "pushed") or direction not in ("asc", "desc"):
            raise ValueError(f"sort must be name|pushed and direction asc|desc, not {sort!r}/{direction!r}")
        conds = []
        if query:
            conds.append(repos.c.name.icontains(query, autoescape=True))
        if connection is not None:
            conds.append(exists().where(repo_connections.c.repo_id == repos.c.id,
                                        repo_connections.c.connection_id == connections.c.id,
                                        connections.c.name == connection))
        key = repos.c.name if sort == "name" else repos.c.pushed_at
        order = [key.asc().nulls_last(), repos.c.id.asc()] if direction == "asc" else \
            [key.desc().nulls_last(), repos.c.id.desc()]
        with self._tx() as c:
            total = c.scalar(select(func.count()).select_from(repos).where(*conds))
            rows = c.execute(select(repos).where(*conds).order_by(*order)
                             .limit(per_page).offset((page - 1) * per_page))
            return [_row(Repo, r) for r in rows], total

    def repos_for_connection(self, connection: str) -> list[Repo]:
        with self._tx() as c:
            cid = self._connection_id(c, connection)
            q = select(repos).join(repo_connections, repo_connections.c.repo_id == repos.c.id).where(
                repo_connections.c.connection_id == cid).order_by(repos.c.name)
            return [_row(Repo, r) for r in c.execute(q)]

    def connections_for_repo(self, repo_id: int) -> list[str]:
        """Names of the connections a repo is linked to."""
        with self._tx() as c:
            q = select(connections.c.name).join(repo_connections, repo_connections.c.connection_id == connections.c.id
                                                ).where(repo_connections.c.repo_id == repo_id).order_by(connections.c.name)
            return list(c.scalars(q))

    def index_progress(self) -> tuple[int, int]:
        """(repositories, those never indexed yet): what a search cannot see until their first
        index ends (a failed first attempt counts as done: it is reported, not awaited)."""
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)  # orphans wait for removal, not indexing
        with self._tx() as c:
            total = c.scalar(select(func.count()).select_from(repos).where(linked))
            waiting = c.scalar(select(func.count()).select_from(repos).where(
                linked, repos.c.indexed_at.is_(None), repos.c.index_status != m.INDEX_FAILED))
            return int(total or 0), int(waiting or 0)

    # -- audit log ---------------------------------------------------------------------------

    def add_audit_events(self, events: list[dict]) -> int:
        """Append events (``{at, actor_user_id, actor, action, target, details, request_id}``;
        `at` defaults to now) in one transaction; returns how many."""
        if not events:
            return 0
        now = self._now()
        rows = [{"at": e.get("at") or now, "actor_user_id": e.get("actor_user_id"), "actor": str(e["actor"])[:320],
                 "action": str(e["action"])[:64], "target": str(e.get("target") or ""),
                 "details": dict(e.get("details") or {}), "request_id": e.get("request_id")} for e in events]
        with self._tx(write=True) as c:
            c.execute(insert(audit_events), rows)
        return len(rows)

    def list_audit_events(self, *, action: str | None = None, actor: str | None = None, since: datetime | None = None,
                          until: datetime | None = None, page: int = 1, per_page: int = 50
                          ) -> tuple[list[m.AuditEvent], int]:
        """One page of the audit log, newest first, and the total count of matching events.
        `action` matches the action or, ending in ``.``, every action under it (``apikey.``);
        `actor` is an e-mail (or ``anonymous``, ``cli``); `since`/`until` bound `at` (inclusive,
        exclusive)."""
        if page < 1 or per_page < 1:
            raise ValueError("page and per_page start at 1")
        conds = []
        if action:
            conds.append(audit_events.c.action.startswith(action, autoescape=True) if action.endswith(".")
                         else audit_events.c.action == action)
        if actor:
            conds.append(audit_events.c.actor == actor)
        if since is not None:
            conds.append(audit_events.c.at >= since)
        if until is not None:
            conds.append(audit_events.c.at < until)
        with self._tx() as c:
            total = c.scalar(select(func.count()).select_from(audit_events).where(*conds))
            rows = c.execute(select(audit_events).where(*conds).order_by(audit_events.c.at.desc(), audit_events.c.id.desc())
                             .limit(per_page).offset((page - 1) * per_page))
            return [_row(m.AuditEvent, r) for r in rows], int(total or 0)

    def prune_audit_events(self, before: datetime) -> int:
        """Delete the events older than `before` (the retention); returns how many."""
        with self._tx(write=True) as c:
            return c.execute(delete(audit_events).where(audit_events.c.at < before)).rowcount or 0

    def repo_ids(self) -> set[int]:
        """Every repo id (start-up cleanup removes clones and shards of any other id)."""
        with self._tx() as c:
            return set(c.scalars(select(repos.c.id)))

    def orphaned_repos(self, grace_seconds: float = 0.0) -> list[Repo]:
        """Repos with no connection whose grace period has passed (orphaned at least
        `grace_seconds` ago): the garbage collector's work list."""
        cutoff = self._now() - timedelta(seconds=grace_seconds)
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)
        q = select(repos).where(~linked, or_(repos.c.orphaned_at.is_(None), repos.c.orphaned_at <= cutoff)
                                ).order_by(repos.c.id)
        with self._tx() as c:
            return [_row(Repo, r) for r in c.execute(q)]

    def delete_repo(self, repo_id: int, *, only_if_orphaned: bool = False) -> bool:
        """Delete a repo row (links and index jobs go with it). With `only_if_orphaned`, only
        when no connection links it (checked in the same transaction, so a sync that re-links
        the repo meanwhile wins). Returns whether a row was deleted."""
        with self._tx(write=True) as c:
            conds = [repos.c.id == repo_id]
            if only_if_orphaned:
                conds.append(~exists().where(repo_connections.c.repo_id == repos.c.id))
            if not c.scalar(select(func.count()).select_from(repos).where(*conds)):
                return False
            c.execute(delete(jobs).where(jobs.c.repo_id == repo_id))
            c.execute(delete(repo_connections).where(repo_connections.c.repo_id == repo_id))
            c.execute(delete(repos).where(repos.c.id == repo_id))
            return True

    def update_repo_index_status(self, repo_id: int, status: str, *, error: str | None = None,
                                 revisions: Any = None, pushed_at: datetime | None = None) -> Repo:
        """Set a repo's index status. INDEXED also sets `indexed_at` = now, the
        `indexed_revisions` and `pushed_at` (the newest commit of the default branch; each when
        given) and clears `last_error`; FAILED records `error`."""
        if status not in m.REPO_STATUSES:
            raise ValueError(f"unknown repo index status {status!r}")
        now = self._now()
        values: dict[str, Any] = {"index_status": status}
        if status == m.INDEXED:
            values.update(indexed_at=now, last_error=None)
            if revisions is not None:
                values["indexed_revisions"] = revisions
            if pushed_at is not None:
                values["pushed_at"] = _parse_time(pushed_at)
        with self._tx(write=True) as c:
            if status != m.INDEXED and error is not None:
                values["last_error"] = self._repo_error(c, repo_id, error)
            if not c.execute(update(repos).where(repos.c.id == repo_id).values(**values)).rowcount:
                raise NotFound("repository", repo_id)
            return self._get_repo(c, repo_id)

    def repos_due_for_index(self, interval_seconds: float) -> list[Repo]:
        """Linked repos to index now: no index job PENDING or IN_PROGRESS, and never indexed or
        indexed more than `interval_seconds` ago (an index job that FAILED within the interval
        holds a repo back, so a broken repo is retried once per interval)."""
        cutoff = self._now() - timedelta(seconds=interval_seconds)
        active = exists().where(jobs.c.repo_id == repos.c.id, jobs.c.kind == m.INDEX_JOB,
                                jobs.c.state.in_((m.PENDING, m.IN_PROGRESS)))
        recent_failure = exists().where(jobs.c.repo_id == repos.c.id, jobs.c.kind == m.INDEX_JOB,
                                        jobs.c.state == m.FAILED, jobs.c.finished_at >= cutoff)
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)
        q = select(repos).where(linked, ~active, ~recent_failure,
                                or_(repos.c.indexed_at.is_(None), repos.c.indexed_at < cutoff)).order_by(repos.c.id)
        with self._tx() as c:
            return [_row(Repo, r) for r in c.execute(q)]

    # ------------------------------------------------------------------ jobs

    def enqueue_sync_job(self, connection: str, *, force: bool = False) -> Job:
        """A PENDING sync job for the connection. An existing PENDING job (or IN_PROGRESS one,
        unless `force`) is returned instead of adding a duplicate."""
        with self._tx(write=True) as c:
            return self._enqueue(c, m.SYNC_JOB, jobs.c.connection_id, self._connection_id(c, connection), force)

    def request_connection_sync(self, connection: str) -> Job:
        """Sync the connection now (an owner's Resync): its PENDING sync job, due at once (one
        waiting for a retry after a failure is pulled forward), or a new one; a sync running
        already is returned as it is (it lists the host anew anyway)."""
        now = self._now()
        with self._tx(write=True) as c:
            job = self._enqueue(c, m.SYNC_JOB, jobs.c.connection_id, self._connection_id(c, connection), False)
            if job.state == m.PENDING and job.next_attempt_at is not None and job.next_attempt_at > now:
                c.execute(update(jobs).where(jobs.c.id == job.id).values(next_attempt_at=now))
                job = self._get_job(c, job.id)
            return job

    def enqueue_index_job(self, repo_id: int, *, force: bool = False) -> Job:
        """A PENDING index job for the repo, deduplicated like `enqueue_sync_job`."""
        with self._tx(write=True) as c:
            self._get_repo(c, repo_id)
            return self._enqueue(c, m.INDEX_JOB, jobs.c.repo_id, repo_id, force)

    def _enqueue(self, c: SAConnection, kind: str, column, target: int, force: bool) -> Job:
        states = (m.PENDING,) if force else (m.PENDING, m.IN_PROGRESS)
        row = c.execute(select(jobs).where(jobs.c.kind == kind, column == target, jobs.c.state.in_(states))
                        .order_by(jobs.c.id).limit(1)).first()
        if row is not None:
            return _row(Job, row)
        now = self._now()
        jid = c.execute(insert(jobs).values(
            kind=kind, connection_id=target if kind == m.SYNC_JOB else None,
            repo_id=target if kind == m.INDEX_JOB else None, state=m.PENDING, attempts=0,
            max_attempts=self.max_attempts, error=None, worker_id=None, created_at=now, started_at=None,
            finished_at=None, heartbeat_at=None, next_attempt_at=now)).inserted_primary_key[0]
        return self._get_job(c, jid)

    def claim_job(self, kind: str, worker_id: str) -> Job | None:
        """Atomically take the oldest claimable PENDING job of `kind` (its `next_attempt_at`
        has passed): it becomes IN_PROGRESS for `worker_id`, attempts + 1. None when there is
        none. The claim is a conditional UPDATE (... WHERE state = 'PENDING') whose row count
        is checked, so no job is ever claimed twice, across threads, processes or hosts."""
        if kind not in m.JOB_KINDS:
            raise ValueError(f"unknown job kind {kind!r}")
        now = self._now()
        with self._tx(write=True) as c:
            candidates = list(c.scalars(
                select(jobs.c.id).where(jobs.c.kind == kind, jobs.c.state == m.PENDING, jobs.c.next_attempt_at <= now)
                .order_by(jobs.c.next_attempt_at, jobs.c.id).limit(8)))
            for jid in candidates:
                won = c.execute(update(jobs).where(jobs.c.id == jid, jobs.c.state == m.PENDING).values(
                    state=m.IN_PROGRESS, worker_id=worker_id, attempts=jobs.c.attempts + 1, started_at=now,
                    heartbeat_at=now, finished_at=None)).rowcount
                if won == 1:
                    return self._get_job(c, jid)
            return None

    def heartbeat_job(self, job_id: int, worker_id: str) -> bool:
        """Record that `worker_id` is still working on the job (it is not stale). False when
        the job is no longer IN_PROGRESS for this worker: the worker should stop."""
        with self._tx(write=True) as c:
            return bool(c.execute(update(jobs).where(jobs.c.id == job_id, jobs.c.state == m.IN_PROGRESS,
                                                     jobs.c.worker_id == worker_id).values(heartbeat_at=self._now())).rowcount)

    def complete_job(self, job_id: int, worker_id: str | None = None) -> bool:
        """IN_PROGRESS → COMPLETED. False when the job is not IN_PROGRESS (for `worker_id`, when
        given): it was requeued or taken over, and this worker's result is stale."""
        conds = [jobs.c.id == job_id, jobs.c.state == m.IN_PROGRESS]
        if worker_id is not None:
            conds.append(jobs.c.worker_id == worker_id)
        with self._tx(write=True) as c:
            return bool(c.execute(update(jobs).where(*conds).values(
                state=m.COMPLETED, finished_at=self._now(), error=None)).rowcount)

    def fail_job(self, job_id: int, error: str, *, worker_id: str | None = None, retry: bool = True) -> Job | None:
        """An IN_PROGRESS job failed with `error`. With `retry` and attempts left it goes back
        to PENDING, claimable after the backoff `retry_delay(attempts)`; else it is FAILED.
        Returns the job, or None when it was not IN_PROGRESS (for `worker_id`)."""
        conds = [jobs.c.id == job_id, jobs.c.state == m.IN_PROGRESS]
        if worker_id is not None:
            conds.append(jobs.c.worker_id == worker_id)
        with self._tx(write=True) as c:
            row = c.execute(select(jobs).where(*conds)).first()
            if row is None:
                return None
            return self._retry_or_fail(c, _row(Job, row), error, retry)

    def requeue_stale_jobs(self, timeout_seconds: float, *, kind: str | None = None) -> list[Job]:
        """Crash recovery and timeouts: IN_PROGRESS jobs whose last heartbeat (or start) is
        more than `timeout_seconds` old are retried with backoff, or FAILED when out of
        attempts. `timeout_seconds=0` at start-up takes back every job of a dead service."""
        cutoff = self._now() - timedelta(seconds=timeout_seconds)
        conds = [jobs.c.state == m.IN_PROGRESS, jobs.c.heartbeat_at <= cutoff]
        if kind is not None:
            conds.append(jobs.c.kind == kind)
        return self._requeue_where(conds, lambda j: f"timed out: no progress from worker {j.worker_id} "
                                                    f"for {timeout_seconds:g}s")

    def release_worker_jobs(self, worker_id: str, error: str = "") -> list[Job]:
        """A worker died: its IN_PROGRESS jobs are retried with backoff (or FAILED)."""
        return self._requeue_where([jobs.c.state == m.IN_PROGRESS, jobs.c.worker_id == worker_id],
                                   lambda j: error or f"worker {worker_id} stopped")

    def _requeue_where(self, conds, message: Callable[[Job], str]) -> list[Job]:
        with self._tx(write=True) as c:
            stale = [_row(Job, r) for r in c.execute(select(jobs).where(*conds).order_by(jobs.c.id))]
            out = []
            for job in stale:
                done = self._retry_or_fail(c, job, message(job), True)
                if done is not None:
                    out.append(done)
            return out

    def retry_delay(self, attempts: int) -> float:
        """Backoff before the next attempt after `attempts` failed ones: base × 2^(attempts-1), capped."""
        return min(self.retry_base_seconds * (2 ** max(attempts - 1, 0)), self.retry_max_seconds)

    def _retry_or_fail(self, c: SAConnection, job: Job, error: str, retry: bool) -> Job | None:
        now = self._now()
        error = self._repo_error(c, job.repo_id, error)
        if retry and job.attempts < job.max_attempts:
            values = dict(state=m.PENDING, error=error, next_attempt_at=now + timedelta(seconds=self.retry_delay(job.attempts)))
        else:
            values = dict(state=m.FAILED, error=error, finished_at=now)
        if not c.execute(update(jobs).where(jobs.c.id == job.id, jobs.c.state == m.IN_PROGRESS).values(**values)).rowcount:
            return None
        return self._get_job(c, job.id)

    def get_job(self, job_id: int) -> Job:
        with self._tx() as c:
            return self._get_job(c, job_id)

    def _get_job(self, c: SAConnection, job_id: int) -> Job:
        row = c.execute(select(jobs).where(jobs.c.id == job_id)).first()
        if row is None:
            raise NotFound("job", job_id)
        return _row(Job, row)

    def list_jobs(self, *, kind: str | None = None, state: str | None = None, connection: str | None = None,
                  repo_id: int | None = None, limit: int = 100) -> list[Job]:
        """Jobs, newest first, filtered by kind, state, connection name or repo id."""
        conds = []
        if kind is not None:
            conds.append(jobs.c.kind == kind)
        if state is not None:
            conds.append(jobs.c.state == state)
        if repo_id is not None:
            conds.append(jobs.c.repo_id == repo_id)
        with self._tx() as c:
            if connection is not None:
                conds.append(jobs.c.connection_id == self._connection_id(c, connection))
            return [_row(Job, r) for r in c.execute(select(jobs).where(*conds).order_by(jobs.c.id.desc()).limit(limit))]

    def count_jobs(self, states: tuple[str, ...] = (m.PENDING, m.IN_PROGRESS)) -> dict[tuple[str, str], int]:
        """How many jobs are in each of `states`, per kind: ``{(kind, state): n}`` (pairs without
        a job left out). One grouped query, cheap enough for every scheduler tick."""
        q = select(jobs.c.kind, jobs.c.state, func.count()).where(jobs.c.state.in_(states)).group_by(jobs.c.kind,
                                                                                                      jobs.c.state)
        with self._tx() as c:
            return {(kind, state): int(n) for kind, state, n in c.execute(q)}

    def prune_jobs(self, older_than_seconds: float) -> int:
        """Delete COMPLETED and FAILED jobs finished more than `older_than_seconds` ago (keep it
        above the resync/reindex intervals: recent failures throttle the `*_due_*` queries)."""
        cutoff = self._now() - timedelta(seconds=older_than_seconds)
        with self._tx(write=True) as c:
            return c.execute(delete(jobs).where(jobs.c.state.in_((m.COMPLETED, m.FAILED)),
                                                jobs.c.finished_at < cutoff)).rowcount

    # ------------------------------------------------------------------ users

    def create_user(self, email: str, name: str = "", *, role: str = m.MEMBER,
                    password_hash: str | None = None, email_verified: bool = True) -> User:
        """Create a user (email is trimmed and lower-cased, and unique: Conflict otherwise).
        The first user ever created is OWNER whatever `role` says. This is how an owner adds
        someone (settings page, command line), so the address counts as verified unless
        `email_verified` says otherwise (people who join by themselves: `sign_up`)."""
        if role not in m.ROLES:
            raise ValueError(f"unknown role {role!r}")
        email = (email or "").strip().lower()
        if not email:
            raise ValueError("a user needs an email")
        with self._tx(write=True) as c:
            self._serialize_user_creation(c)
            if c.scalar(select(func.count()).select_from(users).where(users.c.email == email)):
                raise Conflict(f"a user with email {email!r} already exists")
            if not c.scalar(select(func.count()).select_from(users)):
                role = m.OWNER
            uid = c.execute(insert(users).values(email=email, name=name or "", password_hash=password_hash, role=role,
                                                 created_at=self._now(), email_verified=bool(email_verified))
                            ).inserted_primary_key[0]
            return self._get_user(c, uid)

    def get_user(self, user_id: int) -> User:
        with self._tx() as c:
            return self._get_user(c, user_id)

    def find_user_by_email(self, email: str) -> User | None:
        with self._tx() as c:
            row = c.execute(select(users).where(users.c.email == (email or "").strip().lower())).first()
            return _row(User, row) if row else None

    def list_users(self) -> list[User]:
        with self._tx() as c:
            return [_row(User, r) for r in c.execute(select(users).order_by(users.c.id))]

    def set_user_role(self, user_id: int, role: str) -> User:
        """Change a user's role; demoting the last OWNER is a Conflict."""
        if role not in m.ROLES:
            raise ValueError(f"unknown role {role!r}")
        with self._tx(write=True) as c:
            user = self._get_user(c, user_id)
            if user.role == m.OWNER and role != m.OWNER and c.scalar(
                    select(func.count()).select_from(users).where(users.c.role == m.OWNER)) <= 1:
                raise Conflict(f"user {user.email!r} is the last owner")
            c.execute(update(users).where(users.c.id == user_id).values(role=role))
            return self._get_user(c, user_id)

    def create_first_user(self, email: str, name: str = "", *, password_hash: str | None = None) -> User:
        """Create the first user (OWNER) in one transaction: Conflict when any user exists already
        (two simultaneous first-account setups cannot both succeed)."""
        email = (email or "").strip().lower()
        if not email:
            raise ValueError("a user needs an email")
        with self._tx(write=True) as c:
            self._serialize_user_creation(c)
            if c.scalar(select(func.count()).select_from(users)):
                raise Conflict("the first account exists already")
            uid = c.execute(insert(users).values(email=email, name=name or "", password_hash=password_hash,
                                                 role=m.OWNER, created_at=self._now())).inserted_primary_key[0]
            return self._get_user(c, uid)

    def has_users(self) -> bool:
        with self._tx() as c:
            return c.scalar(select(users.c.id).limit(1)) is not None

    def set_user_password(self, user_id: int, password_hash: str | None) -> User:
        """Set (or clear, with None) the user's password hash. NotFound when there is no such user.
        The caller hashes (`codesearch.web.sessions.hash_password`): the store never sees passwords.
        A new password also ends the account's sign-in lock-out (`begin_login_attempt`): the
        guesses it punished were aimed at the old one."""
        with self._tx(write=True) as c:
            user = self._get_user(c, user_id)
            c.execute(update(users).where(users.c.id == user_id).values(password_hash=password_hash))
            c.execute(delete(login_failures).where(login_failures.c.key == self._login_key(LOGIN_ACCOUNT, user.email)))
            return self._get_user(c, user_id)

    def _get_user(self, c: SAConnection, user_id: int) -> User:
        row = c.execute(select(users).where(users.c.id == user_id)).first()
        if row is None:
            raise NotFound("user", user_id)
        return _row(User, row)

    # ------------------------------------------------------------------ API keys

    def _key_hash(self, secret: str) -> str:
        return hmac.new(self._secret, secret.encode("utf-8"), hashlib.sha256).hexdigest()

    def create_api_key(self, user_id: int, name: str) -> tuple[int, str]:
        """A new API key for the user: (key id, secret). The secret (``cs_`` + 43 URL-safe
        characters, 256 random bits) is returned this once; only its HMAC-SHA256 under the
        server secret is stored."""
        name = (name or "").strip()
        if not name:
            raise ValueError("an API key needs a name")
        secret = API_KEY_PREFIX + secrets.token_urlsafe(32)
        with self._tx(write=True) as c:
            self._get_user(c, user_id)
            kid = c.execute(insert(api_keys).values(user_id=user_id, name=name, key_hash=self._key_hash(secret),
                                                    created_at=self._now())).inserted_primary_key[0]
        return kid, secret

    def verify_api_key(self, secret: str) -> User | None:
        """The owner of a valid, unrevoked key, or None; None too while the owner waits for
        approval (`is_pending`). Updates the key's `last_used_at` (at most once per
        `last_used_resolution_seconds`, so that busy keys cost no writes)."""
        if not isinstance(secret, str) or not secret.startswith(API_KEY_PREFIX) or len(secret) > 256:
            return None
        digest = self._key_hash(secret)
        now = self._now()
        with self._tx() as c:
            row = c.execute(select(api_keys.c.id, api_keys.c.key_hash, api_keys.c.last_used_at, api_keys.c.user_id)
                            .where(api_keys.c.key_hash == digest, api_keys.c.revoked_at.is_(None))).first()
            if row is None or not hmac.compare_digest(row.key_hash, digest) or self._waits(c, row.user_id):
                return None
            user = self._get_user(c, row.user_id)
        resolution = timedelta(seconds=self.last_used_resolution_seconds)
        if row.last_used_at is None or now - row.last_used_at >= resolution:
            with self._tx(write=True) as c:
                c.execute(update(api_keys).where(api_keys.c.id == row.id).values(last_used_at=now))
        return user

    def list_api_keys(self, user_id: int, *, include_revoked: bool = False) -> list[ApiKey]:
        """The user's keys (name, created, last used; never the secret or hash), oldest first."""
        conds = [api_keys.c.user_id == user_id]
        if not include_revoked:
            conds.append(api_keys.c.revoked_at.is_(None))
        with self._tx() as c:
            return [_row(ApiKey, r) for r in c.execute(select(*_API_KEY_COLUMNS).where(*conds).order_by(api_keys.c.id))]

    def revoke_api_key(self, user_id: int, key_id: int, *, own_only: bool = False) -> bool:
        """`user_id` revokes key `key_id`. Members may revoke only their own keys, owners any
        key (only their own with `own_only`, as on the settings page). True when revoked; False
        when there is no such active key *visible to this user* (another user's key looks the
        same to a member as a missing one). NotFound when `user_id` is not a user."""
        with self._tx(write=True) as c:
            actor = self._get_user(c, user_id)
            conds = [api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None)]
            if actor.role != m.OWNER or own_only:
                conds.append(api_keys.c.user_id == user_id)
            return bool(c.execute(update(api_keys).where(*conds).values(revoked_at=self._now())).rowcount)

    def get_api_key(self, user_id: int, key_id: int) -> ApiKey | None:
        """Key `key_id` if it belongs to `user_id` (revoked or not), else None."""
        with self._tx() as c:
            row = c.execute(select(*_API_KEY_COLUMNS).where(api_keys.c.id == key_id,
                                                            api_keys.c.user_id == user_id)).first()
            return _row(ApiKey, row) if row else None

    # ------------------------------------------------------------------ web sessions

    def derive_key(self, purpose: str) -> bytes:
        """A key for `purpose`, derived from the server secret: the same in every process that
        opens this data directory."""
        return hmac.new(self._secret, b"codesearch derived key: " + purpose.encode("utf-8"), hashlib.sha256).digest()

    def auth_key(self, purpose: str) -> bytes:
        """A key for `purpose` of the web sign-in (e.g. signing the visitor CSRF cookie), derived
        from the sign-in secret (`AUTH_SECRET`): changing that secret changes it."""
        return hmac.new(self._auth_secret, b"codesearch sign-in key: " + purpose.encode("utf-8"),
                        hashlib.sha256).digest()

    def web_session_id(self, cookie_value: str) -> str:
        """The stored id of a session cookie value: its HMAC-SHA256 under the sign-in secret,
        hex. A cookie is valid only while that secret is the one it was issued under."""
        return hmac.new(self._auth_secret, cookie_value.encode("utf-8"), hashlib.sha256).hexdigest()

    def create_web_session(self, user_id: int, *, ttl_seconds: float) -> tuple[str, WebSession]:
        """A new sign-in session for the user: (cookie value, session). The cookie value (256
        random bits, URL-safe) is returned this once; only its SHA-256 is stored. The session has
        its own random CSRF token. NotFound when `user_id` is not a user."""
        value = secrets.token_urlsafe(32)
        now = self._now()
        row = {"id": self.web_session_id(value), "user_id": user_id, "csrf_token": secrets.token_urlsafe(32),
               "created_at": now, "expires_at": now + timedelta(seconds=ttl_seconds), "last_seen_at": now}
        with self._tx(write=True) as c:
            self._get_user(c, user_id)
            c.execute(insert(web_sessions).values(**row))
        return value, WebSession(**row)

    def get_web_session(self, cookie_value: str, *, touch_resolution_seconds: float = 60.0
                        ) -> tuple[WebSession, User] | None:
        """The unexpired session of a cookie value and its user (one read), or None; None too
        while the user waits for approval (`is_pending`). Updates `last_seen_at` at most once
        per `touch_resolution_seconds`."""
        if not isinstance(cookie_value, str) or not cookie_value or len(cookie_value) > 256:
            return None
        now = self._now()
        sid = self.web_session_id(cookie_value)
        user_cols = list(users.columns)
        with self._tx() as c:
            row = c.execute(select(web_sessions, *[col.label(f"u_{col.name}") for col in user_cols])
                            .join(users, users.c.id == web_sessions.c.user_id)
                            .where(web_sessions.c.id == sid, web_sessions.c.expires_at > now,
                                   ~self._waiting(web_sessions.c.user_id))).first()
        if row is None:
            return None
        mp = row._mapping
        session = WebSession(**{col.name: mp[col.name] for col in web_sessions.columns})
        user = User(**{col.name: mp[f"u_{col.name}"] for col in user_cols})
        if now - session.last_seen_at >= timedelta(seconds=touch_resolution_seconds):
            with self._tx(write=True) as c:
                c.execute(update(web_sessions).where(web_sessions.c.id == sid).values(last_seen_at=now))
            session.last_seen_at = now
        return session, user

    def delete_web_session(self, cookie_value: str) -> bool:
        """End the session of a cookie value; True when there was one."""
        if not isinstance(cookie_value, str) or not cookie_value:
            return False
        with self._tx(write=True) as c:
            return bool(c.execute(delete(web_sessions).where(
                web_sessions.c.id == self.web_session_id(cookie_value))).rowcount)

    def delete_user_web_sessions(self, user_id: int, *, keep: str | None = None) -> int:
        """End every session of the user (but the one of cookie value `keep`); how many ended."""
        conds = [web_sessions.c.user_id == user_id]
        if keep:
            conds.append(web_sessions.c.id != self.web_session_id(keep))
        with self._tx(write=True) as c:
            return c.execute(delete(web_sessions).where(*conds)).rowcount

    def delete_expired_web_sessions(self) -> int:
        """Remove expired sessions; how many."""
        with self._tx(write=True) as c:
            return c.execute(delete(web_sessions).where(web_sessions.c.expires_at <= self._now())).rowcount

    # ------------------------------------------------------------------ sign-in lock-outs

    def _login_key(self, kind: str, value: str) -> str:
        return hmac.new(self._secret, f"sign-in {kind}\0{value}".encode("utf-8"), hashlib.sha256).hexdigest()

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
        limits = [(self._login_key(kind, value), backoff) for kind, value, backoff in limits]
        for attempt in range(3):
            try:
                return self._begin_login_attempt(limits)
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
                fresh = row is not None and now - row.last_failure_at < timedelta(seconds=backoff.forget_seconds)
                current[key] = (row is not None, row.failures if fresh else 0, row.locked_until if fresh else None)
            wait = max(((locked - now).total_seconds() for _, _, locked in current.values()
                        if locked is not None and locked > now), default=0.0)
            if wait > 0:
                return wait, 0.0
            lock_if_wrong = 0.0
            for key, backoff in limits:
                stored, failures, _ = current[key]
                lock = backoff.lock_seconds(failures + 1)
                lock_if_wrong = max(lock_if_wrong, lock)
                values = {"failures": failures + 1, "last_failure_at": now,
                          "locked_until": now + timedelta(seconds=lock) if lock else None}
                if stored:
                    c.execute(update(login_failures).where(login_failures.c.key == key).values(**values))
                else:
                    c.execute(insert(login_failures).values(key=key, **values))
            forget = max((b.forget_seconds for _, b in limits), default=0.0)
            c.execute(delete(login_failures).where(login_failures.c.last_failure_at < now - timedelta(seconds=forget)))
            return 0.0, lock_if_wrong

    def end_login_attempt(self, *, reset: Iterable[tuple[str, str]] = (),
                          uncount: Iterable[tuple[str, str]] = ()) -> None:
        """The attempt counted by `begin_login_attempt` succeeded: the `reset` counters start
        again from zero (the account's); the `uncount` counters forget this one attempt and the
        lock-out it set (the client address's: signing in to one's own account must not erase
        the failures it made against others). The attempt was let through, so no earlier
        lock-out was running: none is restored."""
        with self._tx(write=True) as c:
            for kind, value in reset:
                c.execute(delete(login_failures).where(login_failures.c.key == self._login_key(kind, value)))
            for kind, value in uncount:
                key = self._login_key(kind, value)
                c.execute(delete(login_failures).where(login_failures.c.key == key, login_failures.c.failures <= 1))
                c.execute(update(login_failures).where(login_failures.c.key == key).values(
                    failures=login_failures.c.failures - 1, locked_until=None))

    # ------------------------------------------------------------------ search contexts

    def replace_search_contexts(self, contexts: Iterable[SearchContext]) -> None:
        """Replace every search context at once (they come from the config file)."""
        now = self._now()
        rows = {}
        for ctx in contexts:
            rows[ctx.name] = {"name": ctx.name, "description": ctx.description or "",
                              "repo_names": sorted(set(ctx.repo_names)), "updated_at": now}
        with self._tx(write=True) as c:
            c.execute(delete(search_contexts))
            if rows:
                c.execute(insert(search_contexts), list(rows.values()))

    def find_search_context(self, name: str) -> SearchContext | None:
        with self._tx() as c:
            row = c.execute(select(search_contexts).where(search_contexts.c.name == name)).first()
            return SearchContext(row.name, list(row.repo_names), row.description) if row else None

    def list_search_contexts(self) -> list[SearchContext]:
        with self._tx() as c:
            return [SearchContext(r.name, list(r.repo_names), r.description)
                    for r in c.execute(select(search_contexts).order_by(search_contexts.c.name))]

    # ------------------------------------------------------------------ language models

    def replace_language_models(self, entries: Iterable[Mapping[str, Any]]) -> None:
        """Replace the configured models at once, in config order (the first is the default).
        Each entry is the raw `models` item (camelCase keys); it needs `provider` and `model`."""
        rows = []
        for i, entry in enumerate(entries):
            if not entry.get("provider") or not entry.get("model"):
                raise ValueError(f"models[{i}] needs a provider and a model")
            rows.append({"position": i, "provider": str(entry["provider"]), "model": str(entry["model"]),
                         "display_name": entry.get("displayName") or None, "config": dict(entry)})
        with self._tx(write=True) as c:
            c.execute(delete(language_models))
            if rows:
                c.execute(insert(language_models), rows)

    def list_language_models(self) -> list[dict[str, Any]]:
        """The raw model entries, in config order. They may hold token *references* and header
        values: show callers only provider, model and displayName."""
        with self._tx() as c:
            return [dict(r.config) for r in c.execute(select(language_models.c.config).order_by(language_models.c.position))]

    # ------------------------------------------------------------------ chats

    def create_chat(self, question: str, answer: str = "", *, user_id: int | None = None,
                    visibility: str = m.CHAT_PRIVATE, model: Mapping[str, Any] | None = None,
                    steps: Iterable[Mapping[str, Any]] | None = None, status: str = m.CHAT_COMPLETED,
                    error: str | None = None) -> Chat:
        """Record an `ask_codebase` answer (or failure) under a new random URL-safe id.
        NotFound when `user_id` is not a user."""
        if visibility not in m.CHAT_VISIBILITIES:
            raise ValueError(f"unknown chat visibility {visibility!r}")
        if status not in m.CHAT_STATUSES:
            raise ValueError(f"unknown chat status {status!r}")
        values = {"user_id": user_id, "visibility": visibility, "question": question or "", "answer": answer or "",
                  "model": dict(model or {}), "steps": [dict(s) for s in steps or ()], "status": status,
                  "error": error, "created_at": self._now()}
        with self._tx(write=True) as c:
            if user_id is not None:
                self._get_user(c, user_id)
            for _ in range(5):  # 96 random bits: a collision is practically impossible, but cheap to handle
                chat_id = secrets.token_urlsafe(12)
                if c.scalar(select(chats.c.id).where(chats.c.id == chat_id)) is None:
                    break
            c.execute(insert(chats).values(id=chat_id, **values))
            return self._get_chat(c, chat_id)

    def get_chat(self, chat_id: str) -> Chat:
        with self._tx() as c:
            return self._get_chat(c, chat_id)

    def list_chats(self, user_id: int | None = None, limit: int = 50) -> list[Chat]:
        """Chats, newest first: `user_id`'s, or everyone's when None."""
        q = select(chats)
        if user_id is not None:
            q = q.where(chats.c.user_id == user_id)
        with self._tx() as c:
            return [_row(Chat, r) for r in c.execute(q.order_by(chats.c.created_at.desc(), chats.c.id).limit(limit))]

    def _get_chat(self, c: SAConnection, chat_id: str) -> Chat:
        row = c.execute(select(chats).where(chats.c.id == chat_id)).first()
        if row is None:
            raise NotFound("chat", chat_id)
        return _row(Chat, row)


def _roots(data_dir: str | None) -> list[str]:
    """The data directory as given and as resolved (longest first, so that neither leaves a
    piece of the other behind when replaced)."""
    if not data_dir:
        return []
    given = os.path.abspath(data_dir)
    return sorted({given, os.path.realpath(given)}, key=len, reverse=True)


def _listing_values(item: Any) -> dict[str, Any]:
    get = item.get if isinstance(item, Mapping) else (lambda k, d=None: getattr(item, k, d))
    values = {k: get(k, d) for k, d in LISTING_FIELDS.items()}
    for required in ("name", "code_host_type", "clone_url"):
        if not values[required]:
            raise ValueError(f"a listed repo needs {required!r} (got {values['name']!r})")
    if values["display_name"] is None:
        values["display_name"] = values["name"].split("/", 1)[-1]
    for k in ("web_url", "file_url_template", "external_id"):
        values[k] = values[k] or ""
    for k in ("fork", "archived", "public"):
        values[k] = bool(values[k])
    values["topics"] = list(values["topics"] or ())
    values["pushed_at"] = _parse_time(values["pushed_at"])
    return values
