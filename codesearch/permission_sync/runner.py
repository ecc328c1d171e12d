"""Running permission syncs: which repositories and accounts are due, and one sync of each.

`PermissionSyncer(store, config)` is a plain object; `run_due()` syncs everything due once (on a
small thread pool bounded by ``maxRepoPermissionSyncJobConcurrency`` /
``maxAccountPermissionSyncJobConcurrency``) and returns a summary. The scheduler calls `kick()`
each tick, which runs `run_due` on a background thread unless one is running, so a slow host
never delays indexing.

Due means:

* repo-driven: every *private* repository of a connection that enforces permissions and whose
  kind can be synced (`hosts.SYNCABLE_KINDS`), never synced, or last attempted
  ``repoDrivenPermissionSyncIntervalMs`` ago (a failed attempt is retried after at most
  `RETRY_S`);
* user-driven: every linked account on such a host, never attempted (a new sign-in or link asks
  for this: `Store.request_account_permission_sync`) or attempted
  ``userDrivenPermissionSyncIntervalMs`` ago (failures: `RETRY_S`).

What a host answer means for stored grants (`Store.replace_*` / `record_*_failure`): success
replaces them; 401/403/404 (the token lost access, the repository is gone) revokes them at once;
anything else (rate limit, 5xx after retries) keeps them until they are too old for the rule
(`codesearch.permissions`: twice the interval), so stale data denies.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from codesearch.errors import HostAuthError, HostError, HostNotFound
from codesearch.hosts.http import HostHttp
from codesearch.hosts.keys import SYNCABLE_KINDS, host_key
from codesearch.permission_sync import fetch

if TYPE_CHECKING:
    from codesearch.config.models import Config, Connection
    from codesearch.store import Store
    from codesearch.store.models import LinkedAccount, Repo

log = logging.getLogger(__name__)

#: A failed sync is tried again after this long at most (or its interval, if shorter).
RETRY_S = 300.0


def split_host_key(key: str) -> tuple[str, str]:
    """(kind, web URL) of a `host_key`."""
    kind, _, url = key.partition(":")
    return kind, url


def _revokes(error: Exception) -> bool:
    return isinstance(error, (HostAuthError, HostNotFound))


class PermissionSyncer:
    def __init__(
        self,
        store: Store,
        config: Config,
        *,
        environ: Mapping[str, str] | None = None,
        http_factory: Callable[[], HostHttp] = HostHttp,
        clock: Callable[[], datetime] | None = None,
    ):
        self.store = store
        self.config = config
        self.environ = environ
        self.http_factory = http_factory
        self.clock = clock or (lambda: datetime.now(UTC))
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.last: dict[str, Any] = {}
        #: whether the scheduler should kick it (permission syncing on in the config)
        self.enabled = True

    # -------------------------------------------------------------- what is due

    def _enforcing(self) -> dict[str, Connection]:
        """The config's connections that enforce permissions and can be synced, by name."""
        return {
            name: conn
            for name, conn in self.config.connections.items()
            if conn.enforce_permissions and conn.code_host_type in SYNCABLE_KINDS
        }

    def _due(self, attempted: datetime | None, failed: bool, interval_s: float, now: datetime) -> bool:
        if attempted is None:
            return True
        wait = min(interval_s, RETRY_S) if failed else interval_s
        return now - attempted >= timedelta(seconds=wait)

    def due_repos(self) -> list[tuple[Repo, Connection]]:
        """(repo, connection) of every repository whose repo-driven sync is due."""
        now = self.clock()
        interval = float(self.config.settings.repo_driven_permission_sync_interval_ms) / 1000.0
        state = self.store.repo_permission_syncs()
        out: list[tuple[Repo, Connection]] = []
        seen: set[int] = set()
        for name, conn in self._enforcing().items():
            for repo in self.store.repos_for_connection(name):
                if repo.public or repo.id in seen:
                    continue
                seen.add(repo.id)
                s = state.get(repo.id)
                if s is None or self._due(s.attempted_at, bool(s.error), interval, now):
                    out.append((repo, conn))
        return out

    def due_accounts(self) -> list[LinkedAccount]:
        now = self.clock()
        interval = float(self.config.settings.user_driven_permission_sync_interval_ms) / 1000.0
        hosts = {host_key(c.code_host_type, c.web_address) for c in self._enforcing().values()}
        return [
            a
            for a in self.store.list_linked_accounts(with_host=True)
            if a.host in hosts and self._due(a.permission_attempted_at, bool(a.permission_error), interval, now)
        ]

    # -------------------------------------------------------------- one sync

    def sync_repo(self, repo: Repo, conn: Connection) -> int | None:
        """Repo-driven sync of one repository; the number of readers, None when it failed."""
        from codesearch.sync import resolve_connection_token

        kind = conn.code_host_type
        try:
            token = resolve_connection_token(conn.name, conn.raw, self.environ)
            with self.http_factory() as http:
                readers = fetch.repo_readers(kind, conn.raw, token, repo, http)
        except Exception as e:  # every failure is recorded; none stops the others
            revoke = _revokes(e)
            self.store.record_repo_permission_failure(repo.id, _message(e), revoke=revoke)
            log.warning(
                "permission sync of %s failed (%s): %s",
                repo.name,
                "access revoked" if revoke else "last known access kept",
                _message(e),
            )
            return None
        return self.store.replace_repo_grants(repo.id, host_key(kind, conn.web_address), readers)

    def sync_account(self, account: LinkedAccount) -> int | None:
        """User-driven sync of one linked account; the number of repositories granted, None when it failed.
        An expired token (or one the host refuses) is refreshed once first (`codesearch.sso.refresh`)."""
        from codesearch.sso.refresh import needs_refresh, refresh_account_token

        if account.host is None:  # `due_accounts` lists only accounts on a code host
            raise ValueError(f"linked account {account.id} is on no code host: it has no permissions to sync")
        kind, web = split_host_key(account.host)
        try:
            tokens = self.store.account_tokens(account.id)
            token = tokens.access_token
            refreshed = False
            if not token or needs_refresh(tokens.expires_at, self.clock()):
                token, refreshed = refresh_account_token(self.store, self.config, account), True
            try:
                with self.http_factory() as http:
                    external = fetch.readable_repos(kind, fetch.api_url(kind, web), token, http)
            except HostAuthError:
                if refreshed or not tokens.refresh_token:
                    raise
                token = refresh_account_token(self.store, self.config, account)
                with self.http_factory() as http:
                    external = fetch.readable_repos(kind, fetch.api_url(kind, web), token, http)
        except Exception as e:  # recorded, like the repo-driven ones
            revoke = _revokes(e) or not isinstance(e, HostError)
            self.store.record_account_permission_failure(account.id, _message(e), revoke=revoke)
            log.warning(
                "permission sync of linked account %s on %s failed (%s): %s",
                account.id,
                account.host,
                "access revoked" if revoke else "last known access kept",
                _message(e),
            )
            return None
        ids: list[int] = []
        for name, conn in self._enforcing().items():
            if host_key(conn.code_host_type, conn.web_address) != account.host:
                continue
            ids += [r.id for r in self.store.repos_for_connection(name) if r.external_id in external]
        return self.store.replace_account_grants(account.id, ids)

    # -------------------------------------------------------------- running

    def run_due(self) -> dict[str, Any]:
        """Sync every due repository and account once; a summary of what happened."""
        s = self.config.settings
        repos = self.due_repos()
        accounts = self.due_accounts()
        out: dict[str, Any] = {"repos": len(repos), "accounts": len(accounts), "failed": 0}
        if repos:
            with ThreadPoolExecutor(max(1, int(s.max_repo_permission_sync_job_concurrency))) as pool:
                results = list(pool.map(lambda rc: self.sync_repo(*rc), repos))
            out["failed"] += sum(r is None for r in results)
        if accounts:
            with ThreadPoolExecutor(max(1, int(s.max_account_permission_sync_job_concurrency))) as pool:
                results = list(pool.map(self.sync_account, accounts))
            out["failed"] += sum(r is None for r in results)
        self.last = out
        return out

    def kick(self) -> bool:
        """Run `run_due` on a background thread unless one is running; True when started."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            self._thread = threading.Thread(target=self._run_logged, name="permission-sync", daemon=True)
            self._thread.start()
            return True

    def _run_logged(self) -> None:
        try:
            self.run_due()
        except Exception:  # the next tick tries again
            log.exception("permission sync")

    def join(self, timeout: float | None = None) -> None:
        t = self._thread
        if t is not None:
            t.join(timeout)


def _message(e: Exception) -> str:
    return str(e) or type(e).__name__
