"""Repositories: what the connections list, their links to connections, and their index status.

A repo's integer `id` is the API's `repositoryId`: it stays stable by name across syncs and is
never reused. `upsert_repos` applies one connection's listing (items with the `LISTING_FIELDS`
of `codesearch.hosts.base.HostRepo`); a repo that no connection lists any more is *orphaned*
(`orphaned_at`) and removed by the garbage collector after a grace period, unless a sync lists
it again first. The indexer records its outcome with `update_repo_index_status`; the scheduler
asks which repos are due (`repos_due_for_index`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import delete, exists, func, insert, or_, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.errors import Conflict, NotFound
from codesearch.store.models import Repo, RepoSyncResult
from codesearch.store.rows import AnyRow, from_row, get_one, inserted_id
from codesearch.store.tables import connections, jobs, repo_connections, repos

_CHUNK = 500  # ids per IN (...) list: well under every database's parameter limit

#: Fields a code-host listing provides (the attributes of `codesearch.hosts.base.HostRepo`).
LISTING_FIELDS: dict[str, Any] = {
    "name": None,
    "display_name": None,
    "code_host_type": None,
    "clone_url": None,
    "web_url": "",
    "file_url_template": "",
    "default_branch": None,
    "fork": False,
    "archived": False,
    "public": True,
    "topics": (),
    "size_bytes": None,
    "pushed_at": None,
    "stars": None,
    "external_id": "",
    "local_path": None,
}

T = TypeVar("T")


def _parse_time(value: object) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        t = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _chunks(items: list[T], n: int = _CHUNK) -> Iterator[list[T]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


class ReposMixin(StoreBase):
    """The `Store` methods for repos and their links to connections (mixed into `Store`)."""

    def _repo_error(self, c: SAConnection, repo_id: int | None, error: str | None) -> str | None:
        """`public_error` for an error of repo `repo_id` (None: no repo)."""
        row = (
            c.execute(select(repos.c.name, repos.c.local_path).where(repos.c.id == repo_id)).first()
            if repo_id is not None and error
            else None
        )
        return self.public_error(error, repo_name=row.name if row else None, local_path=row.local_path if row else None)

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
            existing: dict[str, AnyRow] = {}
            for chunk in _chunks([v["name"] for v in items]):
                for found in c.execute(select(repos).where(repos.c.name.in_(chunk))):
                    existing[found.name] = found
            for v in items:
                row = existing.get(v["name"])
                if row is None:
                    rid = inserted_id(
                        c.execute(
                            insert(repos).values(
                                **v,
                                created_at=now,
                                updated_at=now,
                                indexed_at=None,
                                indexed_revisions={},
                                index_status=m.INDEX_NEW,
                                last_error=None,
                                orphaned_at=None,
                            )
                        )
                    )
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
                        c.execute(
                            update(repos).where(repos.c.id == rid).values(**changed, updated_at=now, orphaned_at=None)
                        )
                result.ids[v["name"]] = rid
            linked = set(c.scalars(select(repo_connections.c.repo_id).where(repo_connections.c.connection_id == cid)))
            listed = set(result.ids.values())
            result.linked = sorted(listed - linked)
            if result.linked:
                c.execute(
                    insert(repo_connections),
                    [{"repo_id": r, "connection_id": cid, "created_at": now} for r in result.linked],
                )
            if prune:
                result.unlinked = sorted(linked - listed)
                for chunk in _chunks(result.unlinked):
                    c.execute(
                        delete(repo_connections).where(
                            repo_connections.c.connection_id == cid, repo_connections.c.repo_id.in_(chunk)
                        )
                    )
                result.orphaned = self._mark_orphans(c, result.unlinked, now)
        return result

    def link_repo(self, repo_id: int, connection: str) -> bool:
        """Link a repo to a connection (clears `orphaned_at`). False when already linked."""
        now = self._now()
        with self._tx(write=True) as c:
            cid = self._connection_id(c, connection)
            self._get_repo(c, repo_id)
            if c.scalar(
                select(func.count())
                .select_from(repo_connections)
                .where(repo_connections.c.repo_id == repo_id, repo_connections.c.connection_id == cid)
            ):
                return False
            c.execute(insert(repo_connections).values(repo_id=repo_id, connection_id=cid, created_at=now))
            c.execute(
                update(repos).where(repos.c.id == repo_id, repos.c.orphaned_at.is_not(None)).values(orphaned_at=None)
            )
            return True

    def unlink_repo(self, repo_id: int, connection: str) -> bool:
        """Unlink a repo from a connection. Returns True when the repo is now orphaned."""
        now = self._now()
        with self._tx(write=True) as c:
            cid = self._connection_id(c, connection)
            c.execute(
                delete(repo_connections).where(
                    repo_connections.c.repo_id == repo_id, repo_connections.c.connection_id == cid
                )
            )
            return bool(self._mark_orphans(c, [repo_id], now))

    def _mark_orphans(self, c: SAConnection, candidates: Iterable[int], now: datetime) -> list[int]:
        """Of `candidates`, the repos with no link left; sets their `orphaned_at` if unset."""
        orphans: list[int] = []
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)
        for chunk in _chunks(sorted(set(candidates))):
            ids = list(c.scalars(select(repos.c.id).where(repos.c.id.in_(chunk), ~linked)))
            if ids:
                c.execute(
                    update(repos).where(repos.c.id.in_(ids), repos.c.orphaned_at.is_(None)).values(orphaned_at=now)
                )
            orphans += ids
        return sorted(orphans)

    def get_repo(self, repo: int | str) -> Repo:
        """A repo by id or by name; NotFound (REPOSITORY_NOT_FOUND) when there is none."""
        with self._tx() as c:
            return self._get_repo(c, repo)

    def find_repo(self, name: str) -> Repo | None:
        with self._tx() as c:
            row = c.execute(select(repos).where(repos.c.name == name)).first()
            return from_row(Repo, row) if row else None

    def _get_repo(self, c: SAConnection, repo: int | str) -> Repo:
        return get_one(c, Repo, repos.c.name if isinstance(repo, str) else repos.c.id, repo, "repository")

    def list_repos(
        self,
        *,
        page: int = 1,
        per_page: int = 30,
        sort: str = "name",
        direction: str = "asc",
        query: str | None = None,
        connection: str | None = None,
    ) -> tuple[list[Repo], int]:
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
            conds.append(
                exists().where(
                    repo_connections.c.repo_id == repos.c.id,
                    repo_connections.c.connection_id == connections.c.id,
                    connections.c.name == connection,
                )
            )
        key = repos.c.name if sort == "name" else repos.c.pushed_at
        order = (
            [key.asc().nulls_last(), repos.c.id.asc()]
            if direction == "asc"
            else [key.desc().nulls_last(), repos.c.id.desc()]
        )
        with self._tx() as c:
            total = c.scalar(select(func.count()).select_from(repos).where(*conds))
            rows = c.execute(select(repos).where(*conds).order_by(*order).limit(per_page).offset((page - 1) * per_page))
            return [from_row(Repo, r) for r in rows], total or 0

    def repo_names(self) -> list[tuple[int, str]]:
        """``(id, name)`` of every repo, by name (ties by id): what name lists (search hints,
        ``/api/suggest``) need, without reading and decoding whole rows (18 ms for 600 repos
        through `list_repos`, under 1 ms here)."""
        with self._tx() as c:
            rows = c.execute(select(repos.c.id, repos.c.name).order_by(repos.c.name.asc(), repos.c.id.asc()))
            return [(int(r.id), str(r.name)) for r in rows]

    def repos_stamp(self) -> tuple[int, object, int]:
        """A cheap fingerprint of what search contexts are resolved from (repositories' names, topics
        and connections): it moves when a repository is added, changed by a sync or deleted, or a
        link is made or undone. Two aggregate queries, not a read of every row."""
        with self._tx() as c:
            count, newest = c.execute(select(func.count(), func.max(repos.c.updated_at)).select_from(repos)).one()
            links = c.scalar(select(func.count()).select_from(repo_connections))
            return int(count), newest, int(links or 0)

    def repos_for_connection(self, connection: str) -> list[Repo]:
        with self._tx() as c:
            cid = self._connection_id(c, connection)
            q = (
                select(repos)
                .join(repo_connections, repo_connections.c.repo_id == repos.c.id)
                .where(repo_connections.c.connection_id == cid)
                .order_by(repos.c.name)
            )
            return [from_row(Repo, r) for r in c.execute(q)]

    def connections_for_repo(self, repo_id: int) -> list[str]:
        """Names of the connections a repo is linked to."""
        with self._tx() as c:
            q = (
                select(connections.c.name)
                .join(repo_connections, repo_connections.c.connection_id == connections.c.id)
                .where(repo_connections.c.repo_id == repo_id)
                .order_by(connections.c.name)
            )
            return list(c.scalars(q))

    def index_progress(self) -> tuple[int, int]:
        """(repositories, those never indexed yet): what a search cannot see until their first
        index ends (a failed first attempt counts as done: it is reported, not awaited)."""
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)  # orphans wait for removal, not indexing
        with self._tx() as c:
            total = c.scalar(select(func.count()).select_from(repos).where(linked))
            waiting = c.scalar(
                select(func.count())
                .select_from(repos)
                .where(linked, repos.c.indexed_at.is_(None), repos.c.index_status != m.INDEX_FAILED)
            )
            return int(total or 0), int(waiting or 0)

    def linked_repo_states(self) -> list[m.RepoState]:
        """(id, name, index status) of every repository linked to a connection, by id: what the
        first sync's progress reads twice a second. Plain rows, not `Repo`s: building 6,457 of
        those took 150 ms a poll, a fifth of a core for the whole first sync."""
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)
        with self._tx() as c:
            q = select(repos.c.id, repos.c.name, repos.c.index_status).where(linked).order_by(repos.c.id)
            return [m.RepoState(int(i), name, status) for i, name, status in c.execute(q)]

    def repo_ids(self) -> set[int]:
        """Every repo id (start-up cleanup removes clones and shards of any other id)."""
        with self._tx() as c:
            return set(c.scalars(select(repos.c.id)))

    def orphaned_repos(self, grace_seconds: float = 0.0) -> list[Repo]:
        """Repos with no connection whose grace period has passed (orphaned at least
        `grace_seconds` ago): the garbage collector's work list."""
        cutoff = self._now() - timedelta(seconds=grace_seconds)
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)
        q = (
            select(repos)
            .where(~linked, or_(repos.c.orphaned_at.is_(None), repos.c.orphaned_at <= cutoff))
            .order_by(repos.c.id)
        )
        with self._tx() as c:
            return [from_row(Repo, r) for r in c.execute(q)]

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

    def update_repo_index_status(
        self,
        repo_id: int,
        status: str,
        *,
        error: str | None = None,
        revisions: Any = None,
        pushed_at: datetime | None = None,
    ) -> Repo:
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
        active = exists().where(
            jobs.c.repo_id == repos.c.id, jobs.c.kind == m.INDEX_JOB, jobs.c.state.in_((m.PENDING, m.IN_PROGRESS))
        )
        recent_failure = exists().where(
            jobs.c.repo_id == repos.c.id,
            jobs.c.kind == m.INDEX_JOB,
            jobs.c.state == m.FAILED,
            jobs.c.finished_at >= cutoff,
        )
        linked = exists().where(repo_connections.c.repo_id == repos.c.id)
        q = (
            select(repos)
            .where(linked, ~active, ~recent_failure, or_(repos.c.indexed_at.is_(None), repos.c.indexed_at < cutoff))
            .order_by(repos.c.id)
        )
        with self._tx() as c:
            return [from_row(Repo, r) for r in c.execute(q)]


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
