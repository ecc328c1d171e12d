"""Rows of the state database as plain dataclasses, and the status values they use.

Every time is a timezone-aware UTC `datetime` (or None). The API layer formats them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Required, TypedDict

from codesearch.statuses import ChatStatus, IndexStatus, JobKind, JobState, SyncStatus

# --- statuses: the enums of `codesearch.statuses`, under the names the store has always used
# (unpacked in the enums' order, which tests/store/test_statuses.py pins)
SYNC_NEEDED, SYNCING, SYNCED, SYNCED_WITH_WARNINGS, SYNC_FAILED = CONNECTION_STATUSES = tuple(SyncStatus)
INDEX_NEW, INDEXING, INDEXED, INDEX_FAILED = REPO_STATUSES = tuple(IndexStatus)
SYNC_JOB, INDEX_JOB = JOB_KINDS = tuple(JobKind)
PENDING, IN_PROGRESS, COMPLETED, FAILED = JOB_STATES = tuple(JobState)

# --- users
OWNER = "OWNER"
MEMBER = "MEMBER"
ROLES = (OWNER, MEMBER)
#: `User.kind` of a service account (a non-human member owning API keys)
SERVICE = "service"
HUMAN = "human"

# --- chats (ask_codebase answers)
CHAT_PRIVATE = "PRIVATE"  # its user (and owners) only
CHAT_PUBLIC = "PUBLIC"  # anyone with the link
CHAT_VISIBILITIES = (CHAT_PRIVATE, CHAT_PUBLIC)
CHAT_COMPLETED, CHAT_FAILED = CHAT_STATUSES = tuple(ChatStatus)


@dataclass
class Connection:
    id: int
    name: str
    type: str
    config: dict[str, Any]
    config_hash: str  # sha256 of the config as canonical JSON
    sync_status: str  # a `SyncStatus` value
    sync_error: str | None
    sync_warnings: list[str]
    created_at: datetime
    updated_at: datetime
    synced_at: datetime | None


@dataclass
class Repo:
    id: int  # the API's repositoryId; never reused
    name: str  # "<host>/<path>", unique
    display_name: str
    code_host_type: str
    clone_url: str
    web_url: str
    file_url_template: str
    default_branch: str | None
    fork: bool
    archived: bool
    public: bool
    topics: list[str]
    size_bytes: int | None
    pushed_at: datetime | None
    stars: int | None
    external_id: str
    local_path: str | None  # set for local git repos indexed in place
    created_at: datetime
    updated_at: datetime
    indexed_at: datetime | None  # last successful index
    indexed_revisions: Any  # JSON, by convention {full ref name: commit sha}
    index_status: str  # an `IndexStatus` value
    last_error: str | None
    orphaned_at: datetime | None  # when its last connection link went away (None while linked)


class RepoState(NamedTuple):
    """A repository's id, name and index status (`Store.linked_repo_states`)."""

    id: int
    name: str
    index_status: str  # an `IndexStatus` value


@dataclass
class RepoSyncResult:
    """What `Store.upsert_repos` did for one connection's listing."""

    ids: dict[str, int] = field(default_factory=dict)  # repo name → id, for every listed repo
    added: list[int] = field(default_factory=list)  # new repo rows
    updated: list[int] = field(default_factory=list)  # existing rows whose metadata changed
    linked: list[int] = field(default_factory=list)  # newly linked to the connection
    unlinked: list[int] = field(default_factory=list)  # no longer listed by the connection
    orphaned: list[int] = field(default_factory=list)  # unlinked and now without any connection


@dataclass
class Job:
    id: int
    kind: str  # a `JobKind` value
    connection_id: int | None  # sync jobs
    repo_id: int | None  # index jobs
    state: str  # a `JobState` value
    attempts: int  # how many times it was claimed
    max_attempts: int
    error: str | None  # the last failure
    worker_id: str | None  # who holds it (IN_PROGRESS) or held it last
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    next_attempt_at: datetime  # not claimable before this (retry backoff)


@dataclass
class User:
    id: int
    email: str  # lower-cased
    name: str
    role: str  # OWNER or MEMBER
    created_at: datetime
    password_hash: str | None = field(default=None, repr=False)
    #: the address is known to be theirs (an owner entered it, or a provider vouched for it)
    email_verified: bool = False
    #: when an owner deactivated the account (None: active)
    suspended_at: datetime | None = None
    #: ``human``, or ``service`` for a service account (API keys only, no interactive sign-in)
    kind: str = "human"

    @property
    def is_service(self) -> bool:
        return self.kind == SERVICE


@dataclass
class ApiKey:
    """An API key as listed: never its secret, never its hash."""

    id: int
    user_id: int
    name: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


@dataclass
class WebSession:
    """A web UI sign-in session: `id` is the HMAC-SHA256 of the cookie value under the sign-in
    secret (`codesearch.store.secret.session_secret`), never the value."""

    id: str
    user_id: int
    csrf_token: str = field(repr=False)
    created_at: datetime
    expires_at: datetime
    last_seen_at: datetime


@dataclass(frozen=True)
class Backoff:
    """How failed sign-ins lock out: `free` failures cost nothing; failure number `free + n`
    (n ≥ 1) locks for ``base_seconds × 2^(n-1)``, at most `cap_seconds`; a counter with no new
    failure for `forget_seconds` starts again from zero."""

    free: int
    base_seconds: float
    cap_seconds: float
    forget_seconds: float

    def lock_seconds(self, failures: int) -> float:
        """The lock-out after `failures` failures in a row (0 while they are free)."""
        over = failures - self.free
        if over <= 0:
            return 0.0
        return min(self.base_seconds * 2.0 ** min(over - 1, 64), self.cap_seconds)


@dataclass
class SearchContext:
    name: str
    repo_names: list[str]
    description: str = ""


@dataclass
class Chat:
    """One `ask_codebase` question and its answer."""

    id: str  # random, URL-safe
    user_id: int | None  # None: asked anonymously, or the user was deleted
    visibility: str  # one of CHAT_VISIBILITIES
    question: str
    answer: str  # markdown ("" when FAILED)
    model: dict[str, Any]  # the model's public info: {"provider", "model", "displayName"}
    steps: list[dict[str, Any]]  # the agent's tool calls: {"tool", "arguments", "output", "is_error"}
    status: str  # a `ChatStatus` value
    error: str | None  # why it FAILED
    created_at: datetime
    name: str | None = None  # set by renaming; None: the question names it (`title`)
    usage: dict[str, Any] | None = None  # the model's token use: {"input_tokens", "output_tokens", "requests"}

    @property
    def title(self) -> str:
        return self.name or self.question


@dataclass
class ChatTurn:
    """One follow-up question of a chat and its answer (turn 0 is the `Chat` itself)."""

    chat_id: str
    position: int  # 1, 2, ...
    question: str
    answer: str
    model: dict[str, Any]
    steps: list[dict[str, Any]]
    status: str  # a `ChatStatus` value
    error: str | None
    created_at: datetime
    usage: dict[str, Any] | None = None  # as `Chat.usage`


@dataclass
class Insight:
    """A saved insight (`codesearch.insights`): `queries` are search request bodies; the scope is
    `repos` (full names) or, when empty, `repo_filter` (a ``repo:`` regex; None: every repository)."""

    id: int
    user_id: int
    name: str
    queries: list[dict[str, Any]]
    repos: list[str]
    repo_filter: str | None
    step: str  # day, week, month, quarter or year
    since: datetime
    created_at: datetime
    updated_at: datetime
    refreshed_at: datetime | None  # the last refresh that added points
    error: str | None  # the last refresh's failure (None when it went well)


@dataclass
class InsightCount:
    """One count of an insight's point: query `query_index` in repository `repo_id` at `at`."""

    at: datetime
    repo_id: int
    repo_name: str
    query_index: int
    commit_sha: str | None  # None: the default branch had no commit that old
    match_count: int
    file_count: int


@dataclass
class AuditEvent:
    """One entry of the audit log (`codesearch.audit`)."""

    id: int
    at: datetime
    actor_user_id: int | None  # None: anonymous, the CLI, or a user deleted since
    actor: str  # the user's e-mail then, "anonymous" or "cli"
    action: str  # e.g. "search", "source.read", "apikey.create" (see `audit.ACTIONS`)
    target: str  # what was acted on: a query, "repo:path", a key's id
    details: dict[str, Any]
    request_id: str | None


# --- linked accounts (`codesearch.store.identities`)


@dataclass
class LinkedAccount:
    """A linked account as listed: never its tokens."""

    id: int
    user_id: int
    provider: str  # the identity provider's id (`codesearch.sso` names them)
    provider_type: str  # github, gitlab, google, okta, keycloak, microsoft-entra-id, oidc, ...
    host: str | None  # the code host it belongs to (`hosts.keys.host_key`), None if none
    subject: str  # the provider's stable user id
    login: str | None
    email: str | None
    token_expires_at: datetime | None
    scope: str | None
    created_at: datetime
    last_sign_in_at: datetime | None
    permission_synced_at: datetime | None
    permission_attempted_at: datetime | None
    permission_error: str | None


class LinkedIdentity(TypedDict, total=False):
    """An identity as `link_account` and `sign_up` take it: which account of which provider
    (`provider`, its `provider_type`, the account's `subject`), and what its link stores or
    refreshes (the defaults of `_link_account`)."""

    provider: Required[str]
    provider_type: Required[str]
    subject: Required[str]
    host: str | None
    login: str | None
    email: str | None
    access_token: str | None
    refresh_token: str | None
    token_expires_at: datetime | None
    scope: str | None
    signed_in: bool


SKILL_PERSONAL = "personal"
SKILL_SHARED = "shared"
SKILL_SCOPES = (SKILL_PERSONAL, SKILL_SHARED)


@dataclass
class Skill:
    """An Ask skill: instructions a question starting with ``/slug`` runs with."""

    id: int
    user_id: int  # who created it (a personal skill's owner)
    scope: str  # one of SKILL_SCOPES
    owner_key: str  # ``u<user_id>`` (personal) or ``shared``: a slug is unique per owner_key
    slug: str
    name: str
    description: str
    instructions: str
    created_at: datetime
    updated_at: datetime
