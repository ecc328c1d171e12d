"""Repository grants from permission syncing, and the facts the permission rule reads.

Permission syncing (`codesearch.permission_sync`) writes what the code hosts said:
`replace_repo_grants` (repo-driven: who may read one repository) and `replace_account_grants`
(user-driven: which repositories one linked account may read), and their failures. The rule
itself lives in `codesearch.permissions`; it reads `repo_access_facts` (every repository, its
visibility and connections) and `user_grants` (one user's accounts, the grants that name them
and how fresh each is). A grant is never trusted beyond the sync that wrote it: each read
carries the time of its last successful sync, and the rule decides what is too old.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, insert, select, tuple_, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store.base import StoreBase
from codesearch.store.tables import linked_accounts, repo_connections, repo_grants, repo_permission_syncs, repos

REPO_DRIVEN = "repo"
USER_DRIVEN = "user"


@dataclass(frozen=True)
class RepoAccess:
    """What the rule needs to know about one repository."""

    id: int
    public: bool
    connection_ids: tuple[int, ...]


@dataclass
class UserGrants:
    """One user's permission data, as stored.

    `accounts`: ``(host, subject, user-driven synced_at)`` of each linked account on a code host;
    `grants`: ``(repo_id, source, host, subject)`` naming one of those accounts;
    `repo_synced`: the last successful repo-driven sync of each repository in `grants`."""

    accounts: list[tuple[str, str, datetime | None]] = field(default_factory=list)
    grants: list[tuple[int, str, str, str]] = field(default_factory=list)
    repo_synced: dict[int, datetime | None] = field(default_factory=dict)


@dataclass
class RepoPermissionSync:
    repo_id: int
    synced_at: datetime | None
    attempted_at: datetime | None
    error: str | None


class GrantsMixin(StoreBase):
    """The `Store` methods for permission grants (mixed into `Store`)."""

    # ------------------------------------------------------------------ writing what hosts said

    def replace_repo_grants(self, repo_id: int, host: str, subjects: Iterable[str]) -> int:
        """Repo-driven sync succeeded: exactly `subjects` (user ids on `host`) may read the
        repository. Returns how many grants it now has."""
        now = self._now()
        subjects = sorted({str(s) for s in subjects})
        with self._tx(write=True) as c:
            c.execute(delete(repo_grants).where(repo_grants.c.repo_id == repo_id, repo_grants.c.source == REPO_DRIVEN))
            if subjects:
                c.execute(
                    insert(repo_grants),
                    [
                        {"repo_id": repo_id, "host": host, "subject": s, "source": REPO_DRIVEN, "synced_at": now}
                        for s in subjects
                    ],
                )
            self._mark_repo_sync(c, repo_id, now, error=None, synced=True)
        return len(subjects)

    def record_repo_permission_failure(self, repo_id: int, error: str, *, revoke: bool) -> None:
        """Repo-driven sync failed. `revoke` (the host refused the token, or the repository is
        gone) drops its grants at once; otherwise (rate limit, 5xx) they stay until they are too old."""
        now = self._now()
        with self._tx(write=True) as c:
            if revoke:
                c.execute(
                    delete(repo_grants).where(repo_grants.c.repo_id == repo_id, repo_grants.c.source == REPO_DRIVEN)
                )
            self._mark_repo_sync(c, repo_id, now, error=error, synced=False, clear=revoke)

    def _mark_repo_sync(
        self, c: SAConnection, repo_id: int, now: datetime, *, error: str | None, synced: bool, clear: bool = False
    ) -> None:
        if not c.scalar(select(repos.c.id).where(repos.c.id == repo_id)):
            return  # deleted meanwhile
        values = {"attempted_at": now, "error": error}
        if synced:
            values["synced_at"] = now
        elif clear:
            values["synced_at"] = None
        if (
            c.execute(
                update(repo_permission_syncs).where(repo_permission_syncs.c.repo_id == repo_id).values(**values)
            ).rowcount
            == 0
        ):
            c.execute(insert(repo_permission_syncs).values(repo_id=repo_id, **{"synced_at": None, **values}))

    def replace_account_grants(self, account_id: int, repo_ids: Iterable[int]) -> int:
        """User-driven sync succeeded: the account may read exactly `repo_ids` (unknown ids are skipped)."""
        now = self._now()
        wanted = sorted({int(r) for r in repo_ids})
        with self._tx(write=True) as c:
            acc = c.execute(
                select(linked_accounts.c.host, linked_accounts.c.subject).where(linked_accounts.c.id == account_id)
            ).first()
            if acc is None or acc.host is None:
                return 0
            known = set()
            for i in range(0, len(wanted), 500):
                known |= set(c.execute(select(repos.c.id).where(repos.c.id.in_(wanted[i : i + 500]))).scalars())
            c.execute(
                delete(repo_grants).where(
                    repo_grants.c.host == acc.host,
                    repo_grants.c.subject == acc.subject,
                    repo_grants.c.source == USER_DRIVEN,
                )
            )
            rows = [
                {"repo_id": r, "host": acc.host, "subject": acc.subject, "source": USER_DRIVEN, "synced_at": now}
                for r in wanted
                if r in known
            ]
            if rows:
                c.execute(insert(repo_grants), rows)
            c.execute(
                update(linked_accounts)
                .where(linked_accounts.c.id == account_id)
                .values(permission_synced_at=now, permission_attempted_at=now, permission_error=None)
            )
            return len(rows)

    def record_account_permission_failure(self, account_id: int, error: str, *, revoke: bool) -> None:
        """User-driven sync failed; `revoke` (the host refused the account's token) drops its grants at once."""
        now = self._now()
        with self._tx(write=True) as c:
            acc = c.execute(
                select(linked_accounts.c.host, linked_accounts.c.subject).where(linked_accounts.c.id == account_id)
            ).first()
            if acc is None:
                return
            values = {"permission_attempted_at": now, "permission_error": error}
            if revoke:
                c.execute(
                    delete(repo_grants).where(
                        repo_grants.c.host == acc.host,
                        repo_grants.c.subject == acc.subject,
                        repo_grants.c.source == USER_DRIVEN,
                    )
                )
                values["permission_synced_at"] = None
            c.execute(update(linked_accounts).where(linked_accounts.c.id == account_id).values(**values))

    def request_account_permission_sync(self, account_id: int) -> None:
        """Ask for a user-driven sync of the account soon (after a sign-in or a new link): the
        scheduler takes accounts never attempted first."""
        with self._tx(write=True) as c:
            c.execute(
                update(linked_accounts).where(linked_accounts.c.id == account_id).values(permission_attempted_at=None)
            )

    # ------------------------------------------------------------------ reading for the rule and the scheduler

    def repo_access_facts(self) -> list[RepoAccess]:
        """Every repository: id, public, and the connections that list it (none: orphaned)."""
        links: dict[int, list[int]] = {}
        with self._tx() as c:
            for repo_id, conn_id in c.execute(select(repo_connections.c.repo_id, repo_connections.c.connection_id)):
                links.setdefault(repo_id, []).append(conn_id)
            rows = c.execute(select(repos.c.id, repos.c.public)).all()
        return [RepoAccess(r.id, bool(r.public), tuple(sorted(links.get(r.id, ())))) for r in rows]

    def user_grants(self, user_id: int) -> UserGrants:
        """The user's code-host accounts, the grants naming them and the freshness of each."""
        out = UserGrants()
        with self._tx() as c:
            accounts = c.execute(
                select(linked_accounts.c.host, linked_accounts.c.subject, linked_accounts.c.permission_synced_at).where(
                    linked_accounts.c.user_id == user_id, linked_accounts.c.host.is_not(None)
                )
            ).all()
            out.accounts = [(a.host, a.subject, a.permission_synced_at) for a in accounts]
            pairs = sorted({(a.host, a.subject) for a in accounts})
            for i in range(0, len(pairs), 200):
                out.grants += [
                    tuple(g)
                    for g in c.execute(
                        select(
                            repo_grants.c.repo_id, repo_grants.c.source, repo_grants.c.host, repo_grants.c.subject
                        ).where(tuple_(repo_grants.c.host, repo_grants.c.subject).in_(pairs[i : i + 200]))
                    )
                ]
            ids = sorted({g[0] for g in out.grants if g[1] == REPO_DRIVEN})
            for i in range(0, len(ids), 500):
                for r in c.execute(
                    select(repo_permission_syncs.c.repo_id, repo_permission_syncs.c.synced_at).where(
                        repo_permission_syncs.c.repo_id.in_(ids[i : i + 500])
                    )
                ):
                    out.repo_synced[r.repo_id] = r.synced_at
        return out

    def repo_permission_syncs(self) -> dict[int, RepoPermissionSync]:
        """The repo-driven sync state of every repository that had one."""
        with self._tx() as c:
            return {
                r.repo_id: RepoPermissionSync(r.repo_id, r.synced_at, r.attempted_at, r.error)
                for r in c.execute(select(repo_permission_syncs))
            }

    def repo_grant_subjects(self, repo_id: int, source: str = REPO_DRIVEN) -> list[tuple[str, str]]:
        """``(host, subject)`` of the grants of one repository (for status pages and tests)."""
        with self._tx() as c:
            return [
                tuple(r)
                for r in c.execute(
                    select(repo_grants.c.host, repo_grants.c.subject)
                    .where(repo_grants.c.repo_id == repo_id, repo_grants.c.source == source)
                    .order_by(repo_grants.c.host, repo_grants.c.subject)
                )
            ]
