"""The current schema, as SQLAlchemy Core tables (what the queries of `Store` use).

Portable types only (Integer, BigInteger, String, Text, Boolean, JSON, timestamps), so the same
tables work on SQLite and PostgreSQL. Times are stored in UTC and always come back as
timezone-aware `datetime`s (`UTCDateTime`).

This file describes the schema *after* the last migration in `migrations.py`. Changing it
means adding a migration that brings an existing database to the same shape;
`tests/store/test_store.py` checks that a migrated database and these tables agree.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

#: Constraint names, so that later migrations can refer to them on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp kept in UTC: naive values are taken as UTC, results are always aware UTC.

    SQLite has no time zone support, so the value is stored as a naive UTC string (fixed width,
    so comparisons in SQL order correctly); PostgreSQL gets a `timestamptz`.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: object, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData(naming_convention=NAMING_CONVENTION)

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", String(200), nullable=False),
    Column("applied_at", UTCDateTime, nullable=False),
)

connections = Table(
    "connections",
    metadata,
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

repos = Table(
    "repos",
    metadata,
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
    sqlite_autoincrement=True,  # ids are never reused: an id names a clone folder and index shards
)

repo_connections = Table(
    "repo_connections",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True),
    Column("connection_id", Integer, ForeignKey("connections.id", ondelete="CASCADE"), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Index(None, "connection_id"),
)

jobs = Table(
    "jobs",
    metadata,
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

users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("email", String(320), nullable=False, unique=True),
    Column("name", String(255), nullable=False),
    Column("password_hash", String(255), nullable=True),
    Column("role", String(16), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    #: whether the address is known to be the user's: an owner entered it, or an identity provider
    #: vouched for it (`codesearch.sso.accounts`); only such users are found by e-mail at sign-in
    Column("email_verified", Boolean, nullable=False, server_default=false()),
    #: when an owner deactivated the account (None: active): every credential of it is refused
    Column("suspended_at", UTCDateTime, nullable=True),
    #: ``human`` or ``service`` (a service account: owns API keys, never signs in interactively)
    Column("kind", String(16), nullable=False, server_default="human"),
    sqlite_autoincrement=True,
)

api_keys = Table(
    "api_keys",
    metadata,
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

search_contexts = Table(
    "search_contexts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(255), nullable=False, unique=True),
    Column("description", Text, nullable=False),
    Column("repo_names", JSON, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

#: The config's `models`, in order (position 0 is the default model). `config` is the entry as
#: written in the file: tokens there are references (an env variable's name), not secrets.
language_models = Table(
    "language_models",
    metadata,
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("provider", String(64), nullable=False),
    Column("model", String(255), nullable=False),
    Column("display_name", String(255), nullable=True),
    Column("config", JSON, nullable=False),
)

#: `ask_codebase` answers. A chat outlives its user (user_id becomes NULL when the user is deleted).
chats = Table(
    "chats",
    metadata,
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
    Column("name", String(200), nullable=True),  # NULL: the first question names the chat
    Column("usage", JSON, nullable=True),  # the model's token use: {"input_tokens", "output_tokens", "requests"}
    Index(None, "user_id", "created_at"),
    Index(None, "created_at"),
)

#: Follow-up questions of a chat: turn 0 is the `chats` row itself (its question, answer and
#: steps), so `ask_codebase` sessions need nothing here; turns 1, 2, ... are the follow-ups asked
#: from the web UI, in order.
chat_turns = Table(
    "chat_turns",
    metadata,
    Column("chat_id", String(32), ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True, autoincrement=False),
    Column("question", Text, nullable=False),
    Column("answer", Text, nullable=False),
    Column("model", JSON, nullable=False),
    Column("steps", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("error", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("usage", JSON, nullable=True),
)

#: The members a chat is shared with (besides its user): they may read it, nothing more.
chat_access = Table(
    "chat_access",
    metadata,
    Column("chat_id", String(32), ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
    Index(None, "user_id"),
)

#: Sign-in sessions of the web UI. `id` is the HMAC-SHA256 (hex) of the random cookie value under
#: the sign-in secret: the cookie itself is never stored. `csrf_token` is the session's token for
#: forms and the pages' API calls.
web_sessions = Table(
    "web_sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("csrf_token", String(64), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("last_seen_at", UTCDateTime, nullable=False),
    Index(None, "user_id"),
    Index(None, "expires_at"),
)

#: Failed sign-ins in a row, per account and per client address (`Store.begin_login_attempt`).
#: `key` is the HMAC-SHA256 (hex) of the kind and the email or address under the server secret:
#: what someone typed into the sign-in form is never stored.
login_failures = Table(
    "login_failures",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("locked_until", UTCDateTime, nullable=True),
    Column("last_failure_at", UTCDateTime, nullable=False),
    Index(None, "last_failure_at"),
)

#: One-time sign-in codes sent by e-mail (`codesearch.store.email_codes`): one row per address, keyed
#: by the HMAC of the address; `code_hash` is the HMAC of the code, never the code.
email_codes = Table(
    "email_codes",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("code_hash", String(64), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Index(None, "expires_at"),
)

#: Who searched, read, created or revoked what (`codesearch.audit`). `actor` is the
#: user's e-mail as it was then (or ``anonymous``, ``cli``); `target` what was acted on (a query,
#: ``repo:path``, a key's id); never a secret: API keys and passwords are not recorded.
audit_events = Table(
    "audit_events",
    metadata,
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

#: Identities a user signed in with (single sign-on) or linked to their account. `provider` is the
#: config's `identityProviders` entry (its id), `subject` the provider's stable user id. `host` is
#: the code host the account belongs to, as permission syncing names it
#: (`codesearch.hosts.keys.host_key`, e.g. ``github:https://github.com``), None for
#: providers that are not code hosts (Google, Okta, ...). Tokens are encrypted under a key derived
#: from the server secret (`Store.seal`); they let user-driven permission syncing ask the host
#: which repositories this account can read.
linked_accounts = Table(
    "linked_accounts",
    metadata,
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

#: Users who signed up while ``REQUIRE_APPROVAL_NEW_MEMBERS`` is on and wait for an owner: a user
#: with a row here cannot sign in; approving deletes the row, declining deletes the user.
account_requests = Table(
    "account_requests",
    metadata,
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    Column("created_at", UTCDateTime, nullable=False),
)

#: Invitations to join (no approval needed). `id` is the HMAC-SHA256 of the invite token, never the token.
invites = Table(
    "invites",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("email", String(320), nullable=True),
    Column("role", String(16), nullable=False),
    Column("created_by", Integer, ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Column("accepted_at", UTCDateTime, nullable=True),
    Column("accepted_by", Integer, ForeignKey("users.id", ondelete="SET NULL"), nullable=True),
)

#: Who may read a repository, as the code host said: the account `subject` on `host` (see
#: `linked_accounts`). `source` is ``repo`` (repo-driven sync: the repository's collaborators,
#: asked with the connection's token) or ``user`` (user-driven: the repositories a linked
#: account's own token can read). A grant counts only while the sync that wrote it is fresh
#: (`codesearch.permission_sync`): stale or failed data denies.
repo_grants = Table(
    "repo_grants",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True),
    Column("host", String(300), primary_key=True),
    Column("subject", String(255), primary_key=True),
    Column("source", String(8), primary_key=True),
    Column("synced_at", UTCDateTime, nullable=False),
    Index(None, "host", "subject"),
)

#: The last repo-driven permission sync of each repository: when it last succeeded and last ran.
repo_permission_syncs = Table(
    "repo_permission_syncs",
    metadata,
    Column("repo_id", Integer, ForeignKey("repos.id", ondelete="CASCADE"), primary_key=True),
    Column("synced_at", UTCDateTime, nullable=True),
    Column("attempted_at", UTCDateTime, nullable=True),
    Column("error", Text, nullable=True),
)

#: Settings the process that applies the config writes for every other process of the service
#: (API replicas do not read the config file): ``permissions`` is the permission rule's input
#: (`codesearch.permissions.PermissionSettings`).
service_settings = Table(
    "service_settings",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", JSON, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

#: OAuth 2.0 clients of the MCP server, registered dynamically (RFC 7591). `metadata` is the
#: registration as accepted; `secret_hash` the HMAC of the client secret (None: a public client).
oauth_clients = Table(
    "oauth_clients",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("redirect_uris", JSON, nullable=False),
    Column("metadata", JSON, nullable=False),
    Column("secret_hash", String(64), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_used_at", UTCDateTime, nullable=True),
)

#: Authorization codes (single use, short-lived). `id` is the HMAC of the code, never the code.
oauth_codes = Table(
    "oauth_codes",
    metadata,
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

#: Access and refresh tokens (`kind`), stored as the HMAC of the token. Tokens of one
#: authorization share a `grant_id`: a refresh token used twice revokes the whole grant.
oauth_tokens = Table(
    "oauth_tokens",
    metadata,
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

#: Saved insights (`codesearch.insights`): a user's queries counted per repository at points in
#: time, `step` apart from `since`. `queries` holds search request bodies (``query``,
#: ``isRegexEnabled``, ``isCaseSensitivityEnabled``); the scope is `repos` (full names) or, when
#: that is empty, `repo_filter` (a ``repo:`` regular expression; NULL: every repository).
#: `refreshed_at` / `error`: the last refresh that added points, and the last one's failure.
insights = Table(
    "insights",
    metadata,
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

#: The points of an insight that were counted (one row per date, even when no repository was in
#: scope then), and when.
insight_points = Table(
    "insight_points",
    metadata,
    Column("insight_id", Integer, ForeignKey("insights.id", ondelete="CASCADE"), primary_key=True),
    Column("at", UTCDateTime, primary_key=True),
    Column("computed_at", UTCDateTime, nullable=False),
)

#: The counts of a point: per repository (its id and name then: a repository removed later keeps
#: its history) and query (its position in the insight's list).
insight_counts = Table(
    "insight_counts",
    metadata,
    Column("insight_id", Integer, ForeignKey("insights.id", ondelete="CASCADE"), primary_key=True),
    Column("at", UTCDateTime, primary_key=True),
    Column("repo_id", Integer, primary_key=True, autoincrement=False),
    Column("query_index", Integer, primary_key=True, autoincrement=False),
    Column("repo_name", String(512), nullable=False),
    Column("commit_sha", String(64), nullable=True),
    Column("match_count", BigInteger, nullable=False),
    Column("file_count", Integer, nullable=False),
)

#: Repository-scoped access tokens (``POST /api/ee/scoped_access_token``): short-lived bearer
#: tokens limited to `repo_ids`; only their HMAC-SHA256 (`token_hash`) is kept. Revoking deletes.
scoped_access_tokens = Table(
    "scoped_access_tokens",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("repo_ids", JSON, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
    Index(None, "user_id"),
    Index(None, "expires_at"),
)

#: Ask skills (`codesearch.store.skills`): reusable instructions invoked as ``/slug`` in Ask.
#: `scope` is ``personal`` (its user's only) or ``shared`` (every member's); `owner_key` is
#: ``u<user_id>`` for a personal skill and ``shared`` for a shared one, so that a slug is unique
#: among one user's personal skills and among the shared ones. `user_id` is the creator.
skills = Table(
    "skills",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("owner_key", String(32), nullable=False),
    Column("slug", String(64), nullable=False),
    Column("name", String(80), nullable=False),
    Column("description", Text, nullable=False),
    Column("instructions", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    UniqueConstraint("owner_key", "slug"),
    Index(None, "user_id"),
)
