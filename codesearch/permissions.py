"""Who may see which repository: the one place repo visibility is decided.

Every repo access goes through `visible_repos(identity)` / `can_see(identity, repo)`: the HTTP
routes, the MCP tools (`codesearch.tools`), `ask_codebase` and the web pages alike. Searches carry
`visible_repos(identity)` to the searchers (`SearchOptions.visible_repos`), which search as if
the other repositories were not indexed (`codesearch.search.visibility`: no cap fills with hidden
files, no stat counts them); `filter_search_response` checks the answer once more on its way out.

The rule (`PermissionPolicy`), when permission syncing is on (``PERMISSION_SYNC_ENABLED``):

* a repository none of whose connections enforces permissions (``enforcePermissions: false``)
  is visible to every signed-in user;
* a public repository is visible to everyone, unless a connection of it enforces permissions
  for public repositories (``enforcePermissionsForPublicRepos``): then to users with a linked
  account on that code host;
* any other repository is visible to a user when the code host granted one of the user's linked
  accounts read access, by repo-driven syncing (the repository's collaborators) or user-driven
  syncing (the repositories the account's token can read), and the sync that said so is fresh:
  no older than twice its interval. Stale or failed permission data denies, never allows;
* anonymous visitors (``FORCE_ENABLE_ANONYMOUS_ACCESS``) have no linked accounts and see public
  repositories only;
* a repository no connection lists any more (waiting for garbage collection) is visible only
  when public.

With permission syncing off, every caller sees every repository (the rule of earlier releases).
The rule's input is written by the process that applies the config (`write_settings`, from the
scheduler) into the state database, so API replicas that never read the config file apply the
same rule. Owners are not exempt: an owner sees what the code hosts let them see.

An `Identity` made by the service is bound to its app's policy (`PermissionPolicy.identity`); an
unbound identity sees everything, which is right only for processes without permission data
(tests of the engine, the CLI on a data directory it owns).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from codesearch.config.models import Config
    from codesearch.store import Store
    from codesearch.store.grants import RepoAccess

SETTINGS_KEY = "permissions"
#: How long computed visibility is reused (per user, and the repository facts for everyone):
#: a revoked grant stops working at most this long after the sync that revoked it.
CACHE_TTL_S = 5.0
_MAX_CACHED_USERS = 4096


#: How a caller proved who they are (`Identity.via`): an API key, a repository-scoped access
#: token, an OAuth access token (MCP clients), the web UI's session cookie, Google Cloud IAP.
VIA = ("apikey", "scoped", "oauth", "session", "iap")


@dataclass(frozen=True)
class Identity:
    """The caller: a user (API key, OAuth token or web session) or anonymous (`user` is None),
    bound to the permission rule of the app that identified it (`policy`). `via` says how the
    caller proved who they are (`VIA`; "" when not told): the audit log keeps it with each event,
    so that owners can count the calls made with API keys (`codesearch.audit.usage`)."""

    user: object | None = None  # codesearch.store.User
    policy: PermissionPolicy | None = field(default=None, compare=False, repr=False)
    #: a repository-scoped access token's repositories: the caller sees at most these (and never
    #: more than `user` may see); None for every other credential
    repo_scope: frozenset[int] | None = None
    via: str = field(default="", compare=False)

    @property
    def anonymous(self) -> bool:
        return self.user is None

    @property
    def user_id(self) -> int | None:
        return getattr(self.user, "id", None)

    @property
    def role(self) -> str | None:
        """The user's role; a scoped token is never an owner's (it reads repositories, nothing more)."""
        role = getattr(self.user, "role", None)
        return "MEMBER" if role is not None and self.repo_scope is not None else role


#: An anonymous identity bound to no rule: it sees every repository. For callers that own the
#: data outright (`Client.local` over one's own data directory) and services built without a
#: state database; every identity of a service with a rule comes from `PermissionPolicy.identity`.
UNRESTRICTED = Identity(None)


def visible_repos(identity: Identity) -> frozenset[int] | None:
    """The ids of the repos `identity` may see, or None for "every repo": what the permission
    rule allows, narrowed to a scoped token's repositories (`Identity.repo_scope`)."""
    policy = identity.policy
    allowed = None if policy is None else policy.visible(identity)
    scope = identity.repo_scope
    if scope is None:
        return allowed
    return scope if allowed is None else allowed & scope


class HasId(Protocol):
    """A repository row, or anything with a repository id."""

    @property
    def id(self) -> int: ...


_R = TypeVar("_R", bound=HasId)


def can_see(identity: Identity, repo: HasId) -> bool:
    """Whether `identity` may see `repo` (a `Repo` row, or anything with an `id`)."""
    allowed = visible_repos(identity)
    return allowed is None or repo.id in allowed


def filter_repos(identity: Identity, repos: Iterable[_R]) -> list[_R]:
    allowed = visible_repos(identity)
    return list(repos) if allowed is None else [r for r in repos if r.id in allowed]


def filter_search_response(identity: Identity, response: dict[str, Any]) -> dict[str, Any]:
    """Drop files (and their repositoryInfo) of repos `identity` may not see, fixing the counts."""
    allowed = visible_repos(identity)
    if allowed is None:
        return response
    files = [f for f in response.get("files", []) if f.get("repositoryId") in allowed]
    infos = response.get("repositoryInfo", [])
    missing = response.get("missingRepositories", [])
    if (
        len(files) == len(response.get("files", []))
        and all(r.get("id") in allowed for r in infos)
        and all(r.get("id") in allowed for r in missing)
    ):
        return response
    out = dict(response)
    out["files"] = files
    out["repositoryInfo"] = [r for r in infos if r.get("id") in allowed]
    if "missingRepositories" in response:  # an unreadable shard: only the names the caller may see
        out["missingRepositories"] = [r for r in missing if r.get("id") in allowed]
    stats = dict(response.get("stats") or {})
    if stats:
        stats["fileCount"] = len(files)
        stats["actualMatchCount"] = sum(
            len(f["fileName"]["matchRanges"]) + sum(len(c["matchRanges"]) for c in f["chunks"]) for f in files
        )
        # Hidden repos' matches must not show in the counts: only "there is more" survives.
        exhaustive = bool(response.get("isSearchExhaustive", True))
        stats["totalMatchCount"] = stats["actualMatchCount"] + (0 if exhaustive else 1)
        out["stats"] = stats
    return out


# ---------------------------------------------------------------------------- the rule's input


@dataclass(frozen=True)
class ConnectionRule:
    """One connection's part of the rule."""

    enforce: bool  # enforcePermissions (effective)
    enforce_public: bool  # enforcePermissionsForPublicRepos
    host: str | None  # `hosts.keys.host_key`, None for kinds that cannot be synced


@dataclass(frozen=True)
class PermissionSettings:
    """The rule's input, from the config (written to the store by `write_settings`)."""

    enabled: bool = False
    repo_max_age_s: float = 2 * 86400.0
    user_max_age_s: float = 2 * 86400.0
    connections: Mapping[str, ConnectionRule] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "repoMaxAgeS": self.repo_max_age_s,
            "userMaxAgeS": self.user_max_age_s,
            "connections": {
                name: {"enforce": r.enforce, "enforcePublic": r.enforce_public, "host": r.host}
                for name, r in sorted(self.connections.items())
            },
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PermissionSettings:
        return cls(
            enabled=bool(doc.get("enabled")),
            repo_max_age_s=float(doc.get("repoMaxAgeS", 2 * 86400.0)),
            user_max_age_s=float(doc.get("userMaxAgeS", 2 * 86400.0)),
            connections={
                name: ConnectionRule(bool(c.get("enforce")), bool(c.get("enforcePublic")), c.get("host"))
                for name, c in (doc.get("connections") or {}).items()
            },
        )


def settings_from_config(config: Config) -> PermissionSettings:
    """The rule's input for a loaded config (`codesearch.config.Config`)."""
    from codesearch.hosts.keys import SYNCABLE_KINDS, host_key

    s = config.settings
    rules = {}
    for name, conn in config.connections.items():
        kind = conn.code_host_type
        host = None
        if kind in SYNCABLE_KINDS:
            try:
                host = host_key(kind, conn.web_address)
            except ValueError:
                host = None
        rules[name] = ConnectionRule(
            bool(conn.enforce_permissions), bool(conn.enforce_permissions_for_public_repos), host
        )
    enabled = bool(config.permission_sync) or any(r.enforce for r in rules.values())
    return PermissionSettings(
        enabled=enabled,
        repo_max_age_s=2 * float(s.repo_driven_permission_sync_interval_ms) / 1000.0,
        user_max_age_s=2 * float(s.user_driven_permission_sync_interval_ms) / 1000.0,
        connections=rules,
    )


def write_settings(store: Store, settings: PermissionSettings) -> bool:
    """Publish the rule's input to every process of the service (True when it changed)."""
    return store.put_service_setting(SETTINGS_KEY, settings.to_json())


# ---------------------------------------------------------------------------- the rule


def _utcnow() -> datetime:
    return datetime.now(UTC)


class _Facts:
    """What the rule knows about every repository, for one settings snapshot: computed once and
    shared by every user until the cache expires."""

    def __init__(self, settings: PermissionSettings, repos: Iterable[RepoAccess], connection_names: Mapping[int, str]):
        self.open: set[int] = set()  # every signed-in user
        self.public: set[int] = set()  # everyone, anonymous visitors included
        self.public_hosts: dict[int, frozenset[str]] = {}  # users with an account on one of these hosts
        self.enforced_hosts: dict[int, frozenset[str]] = {}  # users with a fresh grant from one of these hosts
        for repo in repos:
            rules = [
                settings.connections.get(connection_names.get(cid, ""), ConnectionRule(True, False, None))
                for cid in repo.connection_ids
            ]
            if not rules:  # orphaned: about to be collected
                if repo.public:
                    self.public.add(repo.id)
                continue
            enforcing = [r for r in rules if r.enforce]
            if not enforcing:
                self.open.add(repo.id)
                if repo.public:
                    self.public.add(repo.id)
                continue
            if repo.public:
                strict = [r for r in enforcing if r.enforce_public]
                if not strict:
                    self.public.add(repo.id)
                    continue
                self.public_hosts[repo.id] = frozenset(r.host for r in strict if r.host)
            self.enforced_hosts[repo.id] = frozenset(r.host for r in enforcing if r.host)


class PermissionPolicy:
    """The rule of the module docstring, over the state database `get_store()` returns.

    `environ` is read once: ``PERMISSION_SYNC_ENABLED`` turns the rule on even before the
    scheduler has published its settings (then every connection counts as enforcing and
    nothing private is visible until grants arrive). `clock` returns aware UTC now (tests)."""

    def __init__(
        self,
        get_store: Callable[[], Any],
        *,
        environ: Mapping[str, str] | None = None,
        ttl_s: float = CACHE_TTL_S,
        clock: Callable[[], datetime] = _utcnow,
    ):
        import os

        env = os.environ if environ is None else environ
        self.get_store = get_store
        self.env_enabled = (env.get("PERMISSION_SYNC_ENABLED") or "").strip().lower() == "true"
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._facts: tuple[float, PermissionSettings | None, _Facts | None] | None = None
        self._users: dict[int, tuple[float, frozenset[int]]] = {}

    def identity(self, user: object | None, via: str = "") -> Identity:
        """`user` (None: anonymous) as an identity bound to this policy."""
        return Identity(user, self, via=via)

    # -------------------------------------------------------------- computing

    def _snapshot(self) -> tuple[PermissionSettings | None, _Facts | None]:
        now = time.monotonic()
        with self._lock:
            if self._facts is not None and now - self._facts[0] < self.ttl_s:
                return self._facts[1], self._facts[2]
        store = self.get_store()
        settings = None
        facts = None
        if store is not None:
            doc = store.service_setting(SETTINGS_KEY)
            settings = PermissionSettings.from_json(doc) if doc else None
            if settings is None and self.env_enabled:
                settings = PermissionSettings(enabled=True)  # not published yet: every connection enforces
            if settings is not None and settings.enabled:
                names = {c.id: c.name for c in store.list_connections()}
                facts = _Facts(settings, store.repo_access_facts(), names)
        elif self.env_enabled:
            settings, facts = PermissionSettings(enabled=True), _Facts(PermissionSettings(enabled=True), [], {})
        with self._lock:
            self._facts = (now, settings, facts)
            if len(self._users) > _MAX_CACHED_USERS:
                self._users.clear()
        return settings, facts

    def enabled(self) -> bool:
        settings, _ = self._snapshot()
        return bool(settings and settings.enabled)

    def visible(self, identity: Identity) -> frozenset[int] | None:
        """The repository ids `identity` may see, or None (permission syncing is off)."""
        settings, facts = self._snapshot()
        if settings is None or not settings.enabled or facts is None:
            return None
        uid = identity.user_id
        if uid is None:
            return frozenset(facts.public)
        now = time.monotonic()
        with self._lock:
            hit = self._users.get(uid)
            if hit is not None and now - hit[0] < self.ttl_s and (self._facts or (0,))[0] <= hit[0]:
                return hit[1]
        result = self._for_user(uid, settings, facts)
        with self._lock:
            self._users[uid] = (now, result)
        return result

    def _for_user(self, user_id: int, settings: PermissionSettings, facts: _Facts) -> frozenset[int]:
        store = self.get_store()
        data = store.user_grants(user_id)
        now = self.clock()
        hosts = {host for host, _, _ in data.accounts}
        fresh_user = {
            (host, subject)
            for host, subject, synced in data.accounts
            if synced is not None and now - synced <= timedelta(seconds=settings.user_max_age_s)
        }
        out = set(facts.open) | facts.public
        out.update(rid for rid, need in facts.public_hosts.items() if need & hosts)
        for repo_id, source, host, subject in data.grants:
            allowed_hosts = facts.enforced_hosts.get(repo_id)
            if allowed_hosts is None or host not in allowed_hosts:
                continue  # not enforced (visible anyway), or a grant from a host that does not list it
            if source == "user":
                ok = (host, subject) in fresh_user
            else:
                synced = data.repo_synced.get(repo_id)
                ok = synced is not None and now - synced <= timedelta(seconds=settings.repo_max_age_s)
            if ok:
                out.add(repo_id)
        return frozenset(out)
