"""Schema migrations: an ordered list of functions, applied in one transaction at open.

The database records every applied migration in `schema_version` (version, description,
applied_at); its version is the highest row. `migrate(engine)` takes a write lock (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: a transaction-scoped advisory lock), creates
`schema_version` if needed, refuses a database newer than `LATEST_VERSION` (`SchemaTooNew`),
then runs the missing migrations in order and records them. SQLite and PostgreSQL both have
transactional DDL, so a failing migration leaves the database as it was, and several
processes opening the same database at once migrate it exactly once.

Rules for adding a migration:
  * append ``(N + 1, "what it does", function)`` to `MIGRATIONS`; never edit or reorder a
    released one: a migration is a frozen description of one step, so it must not import
    the current tables of `tables.py` (they describe the *latest* schema);
  * write portable DDL (SQLAlchemy constructs, or `text()` that both SQLite and PostgreSQL
    accept). SQLite's ALTER TABLE can add and rename columns only: anything else is done by
    creating the new table, copying the rows and renaming it;
  * update `tables.py` to the new shape; the tests check that both agree.

Alembic was not used: the schema is owned by this one module, migrations run in-process
at open (no command, no ini/env.py, no autogenerate needed), and the list below is all the
machinery required; the dependency would buy little.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine

from codesearch.store.errors import SchemaTooNew
from codesearch.store.migration_chats import v13_chat_names_usage_access
from codesearch.store.migration_skills import v12_skills
from codesearch.store.tables import NAMING_CONVENTION, UTCDateTime
from codesearch.store.tables import schema_version as _schema_version

#: Arbitrary constant for PostgreSQL's pg_advisory_xact_lock ("code" in ASCII).
_PG_LOCK_KEY = 0x636F6465


def _v1_initial(conn: Connection) -> None:
    """Connections, repos and their links, jobs, users, API keys, search contexts."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table(
        "connections",
        md,
        Column("id", Integer, primary_key=True),
        Column("name", String(255), nullable=False, unique=True),
        Column("type", String(32), nullable=False),
        Column("config", JSON, nullable=False),
        Column("config_hash", String(64), nullable=False),
        Column("sync_status", String(32), nullable=False),
        Column("sync_error", Text, nullable=True),
        Column("sync_warnings", JSON, nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("synced_at", UTCDateTime, nullable=True),
        sqlite_autoincrement=True,
    )
    Table(
        "repos",
        md,
        Column("id", Integer, primary_key=True),
        Column("name", String(512), nullable=False, unique=True),
        Column("display_name", String(512), nullable=False),
        Column("code_host_type", String(32), nullable=False),
        Column("clone_url", Text, nullable=False),
        Column("web_url", Text, nullable=False),
        Column("file_url_template", Text, nullable=False),
        Column("default_branch", String(255), nullable=True),
        Column("fork", Boolean, nullable=False),
        Column("archived", Boolean, nullable=False),
        Column("public", Boolean, nullable=False),
        Column("topics", JSON, nullable=False),
        Column("size_bytes", BigInteger, nullable=True),
        Column("pushed_at", UTCDateTime, nullable=True),
        Column("stars", Integer, nullable=True),
        Column("external_id", String(255), nullable=False),
        Column("local_path", Text, nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("indexed_at", UTCDateTime, nullable=True),
        Column("indexed_revisions", JSON, nullable=False),
        Column("index_status", String(32), nullable=False),
        Column("last_error", Text, nullable=True),
        Column("orphaned_at", UTCDateTime, nullable=True),
        sqlite_autoincrement=True,
    )
    Table(
        "repo_connections",
        md,
        Column("repo_id", Integer, ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True),
        Column("connection_id", Integer, ForeignKey("connections.id", ondelete="CASCADE"), primary_key=True),
        Column("created_at", UTCDateTime, nullable=False),
        Index(None, "connection_id"),
    )
    Table(
        "jobs",
        md,
        Column("id", Integer, primary_key=True),
        Column("kind", String(16), nullable=False),
        Column("connection_id", Integer, ForeignKey("connections.id", ondelete="CASCADE"), nullable=True),
        Column("repo_id", Integer, ForeignKey("repos.id", ondelete="CASCADE"), nullable=True),
        Column("state", String(16), nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("max_attempts", Integer, nullable=False),
        Column("error", Text, nullable=True),
        Column("worker_id", String(255), nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
        Column("started_at", UTCDateTime, nullable=True),
        Column("finished_at", UTCDateTime, nullable=True),
        Column("heartbeat_at", UTCDateTime, nullable=True),
        Column("next_attempt_at", UTCDateTime, nullable=False),
        Index(None, "kind", "state", "next_attempt_at"),
        Index(None, "connection_id"),
        Index(None, "repo_id"),
        sqlite_autoincrement=True,
    )
    Table(
        "users",
        md,
        Column("id", Integer, primary_key=True),
        Column("email", String(320), nullable=False, unique=True),
        Column("name", String(255), nullable=False),
        Column("password_hash", String(255), nullable=True),
        Column("role", String(16), nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        sqlite_autoincrement=True,
    )
    Table(
        "api_keys",
        md,
        Column("id", Integer, primary_key=True),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        Column("name", String(255), nullable=False),
        Column("key_hash", String(64), nullable=False, unique=True),
        Column("created_at", UTCDateTime, nullable=False),
        Column("last_used_at", UTCDateTime, nullable=True),
        Column("revoked_at", UTCDateTime, nullable=True),
        Index(None, "user_id"),
        sqlite_autoincrement=True,
    )
    Table(
        "search_contexts",
        md,
        Column("id", Integer, primary_key=True),
        Column("name", String(255), nullable=False, unique=True),
        Column("description", Text, nullable=False),
        Column("repo_names", JSON, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
    )
    md.create_all(conn)


def _v2_language_models_and_chats(conn: Connection) -> None:
    """The config's language models (in order) and the chats of `ask_codebase`."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table("users", md, Column("id", Integer, primary_key=True))  # only as the target of chats.user_id
    Table(
        "language_models",
        md,
        Column("position", Integer, primary_key=True, autoincrement=False),
        Column("provider", String(64), nullable=False),
        Column("model", String(255), nullable=False),
        Column("display_name", String(255), nullable=True),
        Column("config", JSON, nullable=False),
    )
    Table(
        "chats",
        md,
        Column("id", String(32), primary_key=True),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
        Column("visibility", String(16), nullable=False),
        Column("question", Text, nullable=False),
        Column("answer", Text, nullable=False),
        Column("model", JSON, nullable=False),
        Column("steps", JSON, nullable=False),
        Column("status", String(16), nullable=False),
        Column("error", Text, nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
        Index(None, "user_id", "created_at"),
        Index(None, "created_at"),
    )
    md.tables["language_models"].create(conn)
    md.tables["chats"].create(conn)


def _v3_web_sessions(conn: Connection) -> None:
    """Sign-in sessions of the web UI (the id is the SHA-256 of the cookie, never the cookie)."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table("users", md, Column("id", Integer, primary_key=True))  # only as the target of web_sessions.user_id
    Table(
        "web_sessions",
        md,
        Column("id", String(64), primary_key=True),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        Column("csrf_token", String(64), nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Column("last_seen_at", UTCDateTime, nullable=False),
        Index(None, "user_id"),
        Index(None, "expires_at"),
    )
    md.tables["web_sessions"].create(conn)


def _v4_login_failures(conn: Connection) -> None:
    """Failed sign-ins per account and per client address, for the sign-in lock-outs."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table(
        "login_failures",
        md,
        Column("key", String(64), primary_key=True),
        Column("failures", Integer, nullable=False),
        Column("locked_until", UTCDateTime, nullable=True),
        Column("last_failure_at", UTCDateTime, nullable=False),
        Index(None, "last_failure_at"),
    )
    md.tables["login_failures"].create(conn)


def _v5_audit_events(conn: Connection) -> None:
    """The audit log: who searched, read, created or revoked what."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table(
        "audit_events",
        md,
        Column("id", Integer, primary_key=True),
        Column("at", UTCDateTime, nullable=False),
        Column("actor_user_id", Integer, nullable=True),
        Column("actor", String(320), nullable=False),
        Column("action", String(64), nullable=False),
        Column("target", Text, nullable=False),
        Column("details", JSON, nullable=False),
        Column("request_id", String(64), nullable=True),
        Index(None, "at"),
        Index(None, "action", "at"),
        Index(None, "actor", "at"),
        sqlite_autoincrement=True,
    )
    md.tables["audit_events"].create(conn)


def _v6_identities_grants_oauth(conn: Connection) -> None:
    """Linked accounts (single sign-on identities and their host tokens), pending members and
    invites, repository grants from permission syncing, and OAuth 2.0 for MCP clients."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table("users", md, Column("id", Integer, primary_key=True))  # only as a foreign key target
    Table("repos", md, Column("id", Integer, primary_key=True))  # only as a foreign key target
    Table(
        "linked_accounts",
        md,
        Column("id", Integer, primary_key=True),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        Column("provider", String(255), nullable=False),
        Column("provider_type", String(32), nullable=False),
        Column("host", String(300), nullable=True),
        Column("subject", String(255), nullable=False),
        Column("login", String(255), nullable=True),
        Column("email", String(320), nullable=True),
        Column("access_token", Text, nullable=True),
        Column("refresh_token", Text, nullable=True),
        Column("token_expires_at", UTCDateTime, nullable=True),
        Column("scope", Text, nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
        Column("last_sign_in_at", UTCDateTime, nullable=True),
        Column("permission_synced_at", UTCDateTime, nullable=True),
        Column("permission_attempted_at", UTCDateTime, nullable=True),
        Column("permission_error", Text, nullable=True),
        UniqueConstraint("provider", "subject"),
        Index(None, "user_id"),
        Index(None, "host", "subject"),
        sqlite_autoincrement=True,
    )
    Table(
        "account_requests",
        md,
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        Column("created_at", UTCDateTime, nullable=False),
    )
    Table(
        "invites",
        md,
        Column("id", String(64), primary_key=True),
        Column("email", String(320), nullable=True),
        Column("role", String(16), nullable=False),
        Column("created_by", Integer, ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Column("accepted_at", UTCDateTime, nullable=True),
        Column("accepted_by", Integer, ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
    )
    Table(
        "repo_grants",
        md,
        Column("repo_id", Integer, ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True),
        Column("host", String(300), primary_key=True),
        Column("subject", String(255), primary_key=True),
        Column("source", String(8), primary_key=True),
        Column("synced_at", UTCDateTime, nullable=False),
        Index(None, "host", "subject"),
    )
    Table(
        "repo_permission_syncs",
        md,
        Column("repo_id", Integer, ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True),
        Column("synced_at", UTCDateTime, nullable=True),
        Column("attempted_at", UTCDateTime, nullable=True),
        Column("error", Text, nullable=True),
    )
    Table(
        "oauth_clients",
        md,
        Column("id", String(64), primary_key=True),
        Column("name", String(255), nullable=False),
        Column("redirect_uris", JSON, nullable=False),
        Column("metadata", JSON, nullable=False),
        Column("secret_hash", String(64), nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
        Column("last_used_at", UTCDateTime, nullable=True),
    )
    Table(
        "oauth_codes",
        md,
        Column("id", String(64), primary_key=True),
        Column("client_id", String(64), ForeignKey("oauth_clients.id", ondelete="CASCADE"), nullable=False),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        Column("redirect_uri", Text, nullable=False),
        Column("code_challenge", String(128), nullable=False),
        Column("scope", Text, nullable=False),
        Column("resource", Text, nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Column("used_at", UTCDateTime, nullable=True),
        Column("grant_id", String(64), nullable=True),
    )
    Table(
        "oauth_tokens",
        md,
        Column("id", String(64), primary_key=True),
        Column("kind", String(8), nullable=False),
        Column("grant_id", String(64), nullable=False),
        Column("client_id", String(64), ForeignKey("oauth_clients.id", ondelete="CASCADE"), nullable=False),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        Column("scope", Text, nullable=False),
        Column("resource", Text, nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Column("used_at", UTCDateTime, nullable=True),
        Column("revoked_at", UTCDateTime, nullable=True),
        Index(None, "grant_id"),
        Index(None, "user_id"),
        Index(None, "expires_at"),
    )
    Table(
        "service_settings",
        md,
        Column("key", String(64), primary_key=True),
        Column("value", JSON, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
    )
    for name in (
        "linked_accounts",
        "account_requests",
        "invites",
        "repo_grants",
        "repo_permission_syncs",
        "service_settings",
        "oauth_clients",
        "oauth_codes",
        "oauth_tokens",
    ):
        md.tables[name].create(conn)


def _v7_users_email_verified(conn: Connection) -> None:
    """``users.email_verified``: whether the address is known to be the user's (single sign-on
    finds users by e-mail only then). Existing users get it from what the store knows: true when
    one of their linked accounts carries the same address (linked accounts keep only addresses
    their provider verified), or when they never joined by themselves, i.e. no linked account
    and no accepted invite (made by an owner, ``/setup`` or the command line); false otherwise
    (a sign-up with an unverified address, an invite used with a password, or a user who linked
    only identities without a verified address: they link further providers while signed in)."""
    conn.execute(text("ALTER TABLE users ADD COLUMN email_verified BOOLEAN NOT NULL DEFAULT FALSE"))
    conn.execute(
        text(
            "UPDATE users SET email_verified = TRUE WHERE"
            " EXISTS (SELECT 1 FROM linked_accounts la WHERE la.user_id = users.id AND la.email = users.email)"
            " OR (NOT EXISTS (SELECT 1 FROM linked_accounts la WHERE la.user_id = users.id)"
            "     AND NOT EXISTS (SELECT 1 FROM invites i WHERE i.accepted_by = users.id))"
        )
    )


def _v8_chat_turns(conn: Connection) -> None:
    """Follow-up questions of a chat (the web UI's chat page): turns 1, 2, ... of a chat whose
    row holds turn 0. Existing chats have no follow-ups, so nothing is copied."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table("chats", md, Column("id", String(32), primary_key=True))  # only as the target of chat_turns.chat_id
    Table(
        "chat_turns",
        md,
        Column("chat_id", String(32), ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True),
        Column("position", Integer, primary_key=True, autoincrement=False),
        Column("question", Text, nullable=False),
        Column("answer", Text, nullable=False),
        Column("model", JSON, nullable=False),
        Column("steps", JSON, nullable=False),
        Column("status", String(16), nullable=False),
        Column("error", Text, nullable=True),
        Column("created_at", UTCDateTime, nullable=False),
    )
    md.tables["chat_turns"].create(conn)


def _v9_insights(conn: Connection) -> None:
    """Saved insights (`codesearch.insights`), their points and each point's counts."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table("users", md, Column("id", Integer, primary_key=True))  # only as the target of insights.user_id
    Table(
        "insights",
        md,
        Column("id", Integer, primary_key=True),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        Column("name", String(200), nullable=False),
        Column("queries", JSON, nullable=False),
        Column("repos", JSON, nullable=False),
        Column("repo_filter", Text, nullable=True),
        Column("step", String(16), nullable=False),
        Column("since", UTCDateTime, nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("refreshed_at", UTCDateTime, nullable=True),
        Column("error", Text, nullable=True),
        Index(None, "user_id"),
        sqlite_autoincrement=True,
    )
    Table(
        "insight_points",
        md,
        Column("insight_id", Integer, ForeignKey("insights.id", ondelete="CASCADE"), primary_key=True),
        Column("at", UTCDateTime, primary_key=True),
        Column("computed_at", UTCDateTime, nullable=False),
    )
    Table(
        "insight_counts",
        md,
        Column("insight_id", Integer, ForeignKey("insights.id", ondelete="CASCADE"), primary_key=True),
        Column("at", UTCDateTime, primary_key=True),
        Column("repo_id", Integer, primary_key=True, autoincrement=False),
        Column("query_index", Integer, primary_key=True, autoincrement=False),
        Column("repo_name", String(512), nullable=False),
        Column("commit_sha", String(64), nullable=True),
        Column("match_count", BigInteger, nullable=False),
        Column("file_count", Integer, nullable=False),
    )
    for name in ("insights", "insight_points", "insight_counts"):
        md.tables[name].create(conn)


def _v10_offboarding_service_accounts_scoped_tokens(conn: Connection) -> None:
    """Deactivated accounts (``users.suspended_at``), service accounts (``users.kind``) and
    repository-scoped access tokens. Existing users are active human accounts."""
    stamp = "TIMESTAMP WITH TIME ZONE" if conn.dialect.name == "postgresql" else "DATETIME"
    conn.execute(text(f"ALTER TABLE users ADD COLUMN suspended_at {stamp}"))
    conn.execute(text("ALTER TABLE users ADD COLUMN kind VARCHAR(16) NOT NULL DEFAULT 'human'"))
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table("users", md, Column("id", Integer, primary_key=True))  # only as the target of user_id
    Table(
        "scoped_access_tokens",
        md,
        Column("id", String(32), primary_key=True),
        Column("token_hash", String(64), nullable=False, unique=True),
        Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        Column("repo_ids", JSON, nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Index(None, "user_id"),
        Index(None, "expires_at"),
    )
    md.tables["scoped_access_tokens"].create(conn)


def _v11_email_codes(conn: Connection) -> None:
    """One-time sign-in codes sent by e-mail: hashed, short-lived, a few attempts each."""
    md = MetaData(naming_convention=NAMING_CONVENTION)
    Table(
        "email_codes",
        md,
        Column("key", String(64), primary_key=True),
        Column("code_hash", String(64), nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Index(None, "expires_at"),
    )
    md.tables["email_codes"].create(conn)


Migration = tuple[int, str, Callable[[Connection], None]]

#: Every migration, in order. Versions are 1, 2, 3, ... without gaps.
MIGRATIONS: list[Migration] = [
    (1, "initial schema: connections, repos, links, jobs, users, API keys, search contexts", _v1_initial),
    (2, "language models and chats", _v2_language_models_and_chats),
    (3, "web UI sign-in sessions", _v3_web_sessions),
    (4, "failed sign-ins per account and client address", _v4_login_failures),
    (5, "the audit log", _v5_audit_events),
    (6, "linked accounts, pending members, invites, repository grants, OAuth for MCP", _v6_identities_grants_oauth),
    (7, "users.email_verified: whether single sign-on may find the user by e-mail", _v7_users_email_verified),
    (8, "follow-up questions of chats", _v8_chat_turns),
    (9, "saved insights, their points and counts", _v9_insights),
    (
        10,
        "deactivated users, service accounts, repository-scoped access tokens",
        _v10_offboarding_service_accounts_scoped_tokens,
    ),
    (11, "one-time sign-in codes sent by e-mail", _v11_email_codes),
    (12, "Ask skills, personal and shared", v12_skills),
    (13, "chat names, token use per answer, chats shared with named members", v13_chat_names_usage_access),
]

LATEST_VERSION = MIGRATIONS[-1][0]

assert [m[0] for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1)), "migration versions must be 1..N"


def current_version(conn: Connection) -> int:
    """The schema version of the database on `conn` (0 for an empty database)."""
    if not conn.dialect.has_table(conn, _schema_version.name):
        return 0
    return conn.scalar(select(func.max(_schema_version.c.version))) or 0


def migrate(engine: Engine, *, database: str = "", migrations: list[Migration] | None = None) -> int:
    """Bring the database to the latest version; return that version.

    `database` names the database in errors (without its password). `migrations` replaces
    `MIGRATIONS` (for tests)."""
    migrations = MIGRATIONS if migrations is None else migrations
    latest = migrations[-1][0] if migrations else 0
    with engine.connect() as conn:
        conn.execution_options(codesearch_write=True)  # SQLite: BEGIN IMMEDIATE (see store.py)
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
            _schema_version.create(conn, checkfirst=True)
            found = current_version(conn)
            if found > latest:
                raise SchemaTooNew(database or str(engine.url.render_as_string(hide_password=True)), found, latest)
            for version, description, step in migrations:
                if version <= found:
                    continue
                step(conn)
                conn.execute(
                    insert(_schema_version).values(
                        version=version, description=description, applied_at=datetime.now(UTC)
                    )
                )
            return max(found, latest)
