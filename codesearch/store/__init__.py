"""The state database: the one module that owns connections, repos, jobs, users, API keys, contexts.

    from codesearch.store import Store
    store = Store.open(data_dir)              # migrates to the latest schema
    conn, needs_sync = store.upsert_connection("gh", "github", {...})
    result = store.upsert_repos("gh", listing.repos)          # ids stay stable by name
    job = store.claim_job("index", worker_id="indexer-3")      # None when nothing to do

Layout. `Store` (`codesearch.store.store`) opens the database and runs its transactions; its
methods come from one mixin module per aggregate, each owning its tables: `connections`, `repos`,
`jobs`, `users`, `api_keys`, `web_sessions`, `lockouts` (sign-in lock-outs), `members`
(sign-ups, approvals, invites), `identities` (linked accounts), `grants` (permission syncing),
`settings` (service settings), `oauth_clients` and `oauth_tokens` (OAuth 2.0; what they share is
`oauth`), `audit`, `catalog` (search contexts, language models), `chats`, `chat_turns`, `insights`
(saved insights over history) and `skills` (Ask skills). The
engine and its SQLite settings are `codesearch.store.engine`; rows become models through
`codesearch.store.rows`.

Where the database is. `DATABASE_URL` (any SQLAlchemy URL; PostgreSQL works with a driver
installed, e.g. ``postgresql+psycopg://...``), else the SQLite file `<data_dir>/codesearch.db`.
SQLite connections run with ``journal_mode=WAL`` (readers never block the writer and vice
versa), ``foreign_keys=ON``, ``busy_timeout=30000`` and ``synchronous=NORMAL`` (durable
across process crashes; a power loss may lose the last transactions, never corrupt). On
PostgreSQL durability is the server's: `Store.open` warns when it runs with
``synchronous_commit``, ``fsync`` or ``full_page_writes`` off (`codesearch.store.durability`).

Concurrency. Every `Store` method is one short transaction; a `Store` may be shared by the
threads of a process, and any number of processes (Ray actors, CLI commands) may open the same
database, each with its own `Store` (do not carry one across ``fork``). On SQLite, write
transactions begin with ``BEGIN IMMEDIATE``: they take the single write lock first and wait up
to the busy timeout for it, so they never fail half-way with "database is locked" on a lock
upgrade; reads see a consistent snapshot. Job claims are conditional UPDATEs
(``... WHERE id = ? AND state = 'PENDING'``) whose row count is checked, which is also what
makes them exclusive on PostgreSQL (READ COMMITTED re-checks the WHERE after a row lock); so
is using an invite. Creating users takes a transaction-scoped advisory lock on PostgreSQL
(SQLite's ``BEGIN IMMEDIATE`` serializes them already), so that two first sign-ups cannot both
see an empty table and both become OWNER.

Schema. Tables `schema_version`, `connections`, `repos` (integer `id` = the API's
`repositoryId`, never reused), `repo_connections` (many-to-many), `jobs` (sync jobs per
connection and index jobs per repo: PENDING → IN_PROGRESS → COMPLETED | FAILED, with attempts,
backoff via `next_attempt_at`, `worker_id`, heartbeats), `users` (OWNER | MEMBER; since
version 7 `email_verified`: whether single sign-on may find the user by e-mail),
`api_keys` (HMAC-SHA256 hex of the key under the server secret, never the key) and
`search_contexts`, `web_sessions` (sign-in sessions of the web UI: the HMAC of the cookie,
never the cookie; a CSRF token each), `login_failures` (failed sign-ins in a row per account and
per client address, with their lock-outs: `Store.begin_login_attempt`), `chats` and, since
version 8, `chat_turns` (a chat's follow-up questions), since version 9 `insights`, `insight_points` and
`insight_counts` (saved insights, their points and each point's counts). Migrations:
`codesearch.store.migrations`.

Server secret. `SOURCEBOT_ENCRYPTION_KEY`, else `<data_dir>/.secret` (generated once, 0600):
`codesearch.store.secret`, which also gives the sign-in secret (`AUTH_SECRET`, else derived).

Private data at rest. The data directory is 0700 and the SQLite database and the secret 0600,
whatever the umask, and an older data directory is tightened when opened
(`codesearch.store.files`). Messages name the database without its folder, and errors recorded
for users (a failed job, sync or index) name the data directory ``<data dir>``
(`Store.public_error`): no answer carries a server path.

Backup and restore. `codesearch.store.backup` writes the whole database to one portable file from
a snapshot, while writers go on; `codesearch.store.restore` loads one into an empty database of
either backend and migrates it forward (docs/operations.md#backup-restore-and-upgrade).

Errors. `StoreError` (a `CodesearchError`) and its `NotFound` (404; REPOSITORY_NOT_FOUND for
repos), `Conflict` (409) and `SchemaTooNew`. Bad arguments (an unknown status, page 0) are
`ValueError`s: programming errors, validated earlier by the API layer.
"""

from codesearch.store.api_keys import API_KEY_PREFIX
from codesearch.store.connections import config_hash
from codesearch.store.engine import make_engine
from codesearch.store.errors import Conflict, NotFound, SchemaTooNew, StoreError
from codesearch.store.lockouts import LOGIN_ACCOUNT, LOGIN_ADDRESS, OAUTH_REGISTRATION
from codesearch.store.migrations import LATEST_VERSION, MIGRATIONS, migrate
from codesearch.store.models import (
    CHAT_COMPLETED,
    CHAT_FAILED,
    CHAT_PRIVATE,
    CHAT_PUBLIC,
    CHAT_STATUSES,
    CHAT_VISIBILITIES,
    COMPLETED,
    CONNECTION_STATUSES,
    FAILED,
    IN_PROGRESS,
    INDEX_FAILED,
    INDEX_JOB,
    INDEX_NEW,
    INDEXED,
    INDEXING,
    JOB_KINDS,
    JOB_STATES,
    MEMBER,
    OWNER,
    PENDING,
    REPO_STATUSES,
    ROLES,
    SYNC_FAILED,
    SYNC_JOB,
    SYNC_NEEDED,
    SYNCED,
    SYNCED_WITH_WARNINGS,
    SYNCING,
    ApiKey,
    Backoff,
    Chat,
    Connection,
    Insight,
    InsightCount,
    Job,
    Repo,
    RepoSyncResult,
    SearchContext,
    User,
    WebSession,
)
from codesearch.store.repos import LISTING_FIELDS
from codesearch.store.secret import load_server_secret
from codesearch.store.store import DB_FILE, Store

__all__ = [
    "API_KEY_PREFIX",
    "CHAT_COMPLETED",
    "CHAT_FAILED",
    "CHAT_PRIVATE",
    "CHAT_PUBLIC",
    "CHAT_STATUSES",
    "CHAT_VISIBILITIES",
    "COMPLETED",
    "CONNECTION_STATUSES",
    "DB_FILE",
    "FAILED",
    "INDEXED",
    "INDEXING",
    "INDEX_FAILED",
    "INDEX_JOB",
    "INDEX_NEW",
    "IN_PROGRESS",
    "JOB_KINDS",
    "JOB_STATES",
    "LATEST_VERSION",
    "LISTING_FIELDS",
    "LOGIN_ACCOUNT",
    "LOGIN_ADDRESS",
    "OAUTH_REGISTRATION",
    "MEMBER",
    "MIGRATIONS",
    "OWNER",
    "PENDING",
    "REPO_STATUSES",
    "ROLES",
    "SYNCED",
    "SYNCED_WITH_WARNINGS",
    "SYNCING",
    "SYNC_FAILED",
    "SYNC_JOB",
    "SYNC_NEEDED",
    "ApiKey",
    "Backoff",
    "Chat",
    "Conflict",
    "Connection",
    "Insight",
    "InsightCount",
    "Job",
    "NotFound",
    "Repo",
    "RepoSyncResult",
    "SchemaTooNew",
    "SearchContext",
    "Store",
    "StoreError",
    "User",
    "WebSession",
    "config_hash",
    "load_server_secret",
    "make_engine",
    "migrate",
]
