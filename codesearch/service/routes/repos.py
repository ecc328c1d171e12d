"""Repos and the sync/index status the UI shows (docs/http-api.md#routes), read from the store.

``GET /api/repos``
    Query ``page`` (≥1, default 1), ``perPage`` (1..100, default 30; ``per_page`` accepted too),
    ``sort`` (``name`` | ``pushed``), ``direction`` (``asc`` | ``desc``), ``query`` (a
    case-insensitive substring of the name), ``connectionId`` (≥1: only the repos linked to that
    connection, an id from ``GET /api/connections``; an id no connection has lists none). An
    array of ``{codeHostType, repoId, repoName, repoDisplayName, webUrl, externalWebUrl, indexedAt,
    pushedAt, defaultBranch, isFork, isArchived}`` (``webUrl`` is the repo's page in this
    service, ``externalWebUrl`` its page on the code host; fields without a value are left out;
    times are ISO 8601 UTC with
    milliseconds, as JavaScript prints them). Headers ``X-Total-Count`` and, when there is more
    than one page, ``Link`` with ``first``, ``prev``, ``next`` and ``last`` (RFC 8288). Bad
    parameters are 400 ``INVALID_REQUEST_BODY``.

``GET /api/repos/status``
    Same paging and headers; per repo ``{repoId, repoName, repoDisplayName, indexStatus (NEW | INDEXING | INDEXED |
    FAILED), indexedAt, lastError, orphanedAt, indexedRevisions, connections, job}`` where ``job``
    is the repo's queued or running index job, if any.

``GET /api/connections``
    Sourcebot's public shape: a bare array ``[{id, name, connectionType}]`` of the connections
    linked to at least one repository the caller may see, by name (then id); no paging (the
    connections are those of the config file). ``connectionType`` is the config's ``type``. The
    connection's config is never shown (it may name secrets).

``GET /api/connections/status``
    What the web UI's status table reads: query ``page`` (≥1, default 1) and ``perPage`` (1..100,
    default 50); ``{"connections": [{id, name, connectionType, isDeclarative, syncedAt, createdAt,
    updatedAt, repoCount, inFlightJobCount, latestJob, type, syncStatus, syncError, syncWarnings,
    job}]}`` by name, every connection (also those with no repository yet), with ``X-Total-Count``
    and ``Link``. ``isDeclarative`` is always true (connections come from the config file);
    ``repoCount`` counts the repos the caller may see; ``inFlightJobCount`` its queued and running
    sync jobs; ``latestJob`` its newest sync job ``{id, status, createdAt, completedAt,
    errorMessage}`` or null; ``job`` its queued or running sync job, when there is one.

``GET /api/jobs``
    Sync and index jobs, newest first: by default the queued and running ones (``state`` =
    PENDING | IN_PROGRESS | COMPLETED | FAILED, ``kind`` = sync | index, ``limit`` ≤ 1000).

``POST /api/repos/{repoId}/reindex``
    Owners only: queue an index job for the repo now (forced: even when one is running), 202
    with the job. 403 ``INSUFFICIENT_PERMISSIONS`` for members, 404 ``REPOSITORY_NOT_FOUND`` for
    a repo that does not exist or that the caller may not see.

Every repo goes through `codesearch.permissions` (`visible_repos` / `can_see`).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from codesearch import audit, permissions
from codesearch.errors import InsufficientPermissions, RepositoryNotFound
from codesearch.permissions import Identity
from codesearch.service.deps import Caller, ServicesDep, StoreDep
from codesearch.statuses import JobKind, JobState
from codesearch.store.errors import NotFound
from codesearch.tools.repos import MAX_PAGE, _compact, iso, page_of_repos, repo_json, repo_web_url  # noqa: F401

if TYPE_CHECKING:
    from codesearch.store import Connection, Job, Repo, Store

MAX_PER_PAGE = 100
_ACTIVE = JobState.active()


def job_json(job: Job, connection_names: dict[int, str] | None = None) -> dict[str, Any]:
    return _compact(
        {
            "id": job.id,
            "kind": job.kind,
            "state": job.state,
            "connection": (connection_names or {}).get(job.connection_id) if job.connection_id is not None else None,
            "connectionId": job.connection_id,
            "repoId": job.repo_id,
            "attempts": job.attempts,
            "maxAttempts": job.max_attempts,
            "error": job.error,
            "createdAt": iso(job.created_at),
            "startedAt": iso(job.started_at),
            "finishedAt": iso(job.finished_at),
            "heartbeatAt": iso(job.heartbeat_at),
            "nextAttemptAt": iso(job.next_attempt_at),
        }
    )


def link_header(base_url: str, page: int, per_page: int, total: int, params: dict[str, str | None]) -> str | None:
    """RFC 8288 ``Link`` for a paged listing (None when everything fits on one page)."""
    last = max(1, -(-total // per_page))
    if last <= 1:
        return None

    def url(p: int) -> str:
        q = {**{k: v for k, v in params.items() if v is not None}, "page": str(p), "perPage": str(per_page)}
        return f"{base_url}?{urllib.parse.urlencode(q)}"

    links = [f'<{url(1)}>; rel="first"']
    if page > 1:
        links.append(f'<{url(min(page - 1, last))}>; rel="prev"')
    if page < last:
        links.append(f'<{url(page + 1)}>; rel="next"')
    links.append(f'<{url(last)}>; rel="last"')
    return ", ".join(links)


def _base_url(request: Request) -> str:
    u = request.url
    return f"{u.scheme}://{u.netloc}{u.path}"


router = APIRouter()


def paging(
    page: int = Query(1, ge=1, le=MAX_PAGE, description="Page number, from 1"),
    perPage: int | None = Query(None, ge=1, le=MAX_PER_PAGE, description="Repos per page (default 30)"),  # noqa: N803
    per_page: int | None = Query(None, ge=1, le=MAX_PER_PAGE, include_in_schema=False),
    sort: Literal["name", "pushed"] = Query("name"),
    direction: Literal["asc", "desc"] = Query("asc"),
    query: str | None = Query(None, max_length=1000, description="Substring of the repo name"),
    connectionId: int | None = Query(  # noqa: N803
        None, ge=1, le=2**63 - 1, description="Only the repos of this connection (an id from GET /api/connections)"
    ),
) -> dict[str, Any]:
    """The paging parameters of the repo listings."""
    return {
        "page": page,
        "per_page": perPage or per_page or 30,
        "sort": sort,
        "direction": direction,
        "query": query,
        "connection_id": connectionId,
    }


Paging = Annotated[dict[str, Any], Depends(paging)]


def _paged(
    request: Request,
    store: Store | None,
    identity: Identity,
    p: dict[str, Any],
    render: Callable[[Store | None, list[Repo]], list[dict[str, Any]]],
) -> JSONResponse:
    """One page of the repos `identity` may see, as `render(store, rows)` shows them, with the
    ``X-Total-Count`` and ``Link`` headers."""
    rows: list[Repo]
    connection: str | None = None
    if store is not None and p["connection_id"] is not None:
        connection = next((c.name for c in store.list_connections() if c.id == p["connection_id"]), None)
    if store is None or (p["connection_id"] is not None and connection is None):
        rows, total = [], 0  # no state database, or a connection id no connection has
    else:
        rows, total = page_of_repos(
            store,
            identity,
            page=p["page"],
            per_page=p["per_page"],
            sort=p["sort"],
            direction=p["direction"],
            query=p["query"],
            connection=connection,
        )
    headers = {"X-Total-Count": str(total)}
    link = link_header(
        _base_url(request),
        p["page"],
        p["per_page"],
        total,
        {
            "sort": p["sort"],
            "direction": p["direction"],
            "query": p["query"] or None,
            "connectionId": None if p["connection_id"] is None else str(p["connection_id"]),
        },
    )
    if link:
        headers["Link"] = link
    return JSONResponse(render(store, rows), headers=headers)


@router.get("/api/repos")
def list_repos(request: Request, p: Paging, identity: Caller, store: StoreDep, services: ServicesDep) -> JSONResponse:
    public_url = services.public_url
    details = {} if p["connection_id"] is None else {"connectionId": p["connection_id"]}
    audit.record(request, identity, "repos.list", p["query"] or "", **details)
    return _paged(request, store, identity, p, lambda store, rows: [repo_json(x, public_url) for x in rows])


def _status_of(store: Store | None, rows: list[Repo]) -> list[dict[str, Any]]:
    """`GET /api/repos/status`'s items: each repo's index status and queued or running index job."""
    if store is None:  # an app without a state database lists no repos
        return []
    active: dict[int | None, Job] = {}
    for state in _ACTIVE:
        for job in store.list_jobs(kind="index", state=state, limit=10_000):
            active.setdefault(job.repo_id, job)
    out: list[dict[str, Any]] = []
    for x in rows:
        queued = active.get(x.id)
        out.append(
            _compact(
                {
                    "repoId": x.id,
                    "repoName": x.name,
                    "repoDisplayName": x.display_name or x.name,
                    "indexStatus": x.index_status,
                    "indexedAt": iso(x.indexed_at),
                    "lastError": x.last_error,
                    "orphanedAt": iso(x.orphaned_at),
                    "indexedRevisions": x.indexed_revisions or {},
                    "connections": store.connections_for_repo(x.id),
                    "job": job_json(queued) if queued is not None else None,
                }
            )
        )
    return out


@router.get("/api/repos/status")
def repos_status(request: Request, p: Paging, identity: Caller, store: StoreDep) -> JSONResponse:
    return _paged(request, store, identity, p, _status_of)


@router.get("/api/connections")
def list_connections(identity: Caller, store: StoreDep) -> list[dict[str, Any]]:
    if store is None:
        return []
    allowed = permissions.visible_repos(identity)
    out = []
    for c in store.list_connections():
        if allowed is None:
            seen = store.list_repos(per_page=1, connection=c.name)[1] > 0
        else:
            seen = any(x.id in allowed for x in store.repos_for_connection(c.name))
        if seen:
            out.append({"id": c.id, "name": c.name, "connectionType": c.type})
    return sorted(out, key=lambda c: (c["name"], c["id"]))


@router.get("/api/connections/status")
def connections_status(
    request: Request,
    identity: Caller,
    store: StoreDep,
    page: int = Query(1, ge=1, le=MAX_PAGE, description="Page number, from 1"),
    perPage: int = Query(
        50,
        ge=1,
        le=MAX_PER_PAGE,  # noqa: N803
        description="Connections per page",
    ),
) -> JSONResponse:
    every = sorted(store.list_connections(), key=lambda c: c.name) if store is not None else []
    rows = every[(page - 1) * perPage : page * perPage]
    out = _connection_items(store, identity, rows) if store is not None and rows else []
    headers = {"X-Total-Count": str(len(every))}
    link = link_header(_base_url(request), page, perPage, len(every), {})
    if link:
        headers["Link"] = link
    return JSONResponse({"connections": out}, headers=headers)


def _connection_items(store: Store, identity: Identity, rows: list[Connection]) -> list[dict[str, Any]]:
    """`GET /api/connections/status`' items: `rows` with their repo counts and sync jobs."""
    active: dict[int | None, list[Job]] = {}
    for state in _ACTIVE:
        for job in store.list_jobs(kind="sync", state=state, limit=10_000):
            active.setdefault(job.connection_id, []).append(job)
    out: list[dict[str, Any]] = []
    for c in rows:
        if permissions.visible_repos(identity) is None:
            _, count = store.list_repos(per_page=1, connection=c.name)
        else:
            count = sum(1 for x in store.repos_for_connection(c.name) if permissions.can_see(identity, x))
        latest = next(iter(store.list_jobs(kind="sync", connection=c.name, limit=1)), None)
        running = active.get(c.id, [])  # queued ones first, newest first: the UI's `job`
        out.append(
            {
                "id": c.id,
                "name": c.name,
                "connectionType": c.type,
                "isDeclarative": True,
                "syncedAt": iso(c.synced_at),
                "createdAt": iso(c.created_at),
                "updatedAt": iso(c.updated_at),
                "repoCount": count,
                "inFlightJobCount": len(running),
                "latestJob": None
                if latest is None
                else {
                    "id": latest.id,
                    "status": latest.state,
                    "createdAt": iso(latest.created_at),
                    "completedAt": iso(latest.finished_at),
                    "errorMessage": latest.error,
                },
                # for our web UI's status table
                **_compact(
                    {
                        "type": c.type,
                        "syncStatus": c.sync_status,
                        "syncError": c.sync_error,
                        "syncWarnings": list(c.sync_warnings or []),
                        "job": job_json(running[0], {c.id: c.name}) if running else None,
                    }
                ),
            }
        )
    return out


@router.get("/api/jobs")
def list_jobs(
    identity: Caller,
    store: StoreDep,
    state: JobState | None = Query(None),
    kind: JobKind | None = Query(None),
    limit: int = Query(100, ge=1, le=1000),
) -> list[dict[str, Any]]:
    if store is None:
        return []
    states = (state,) if state else _ACTIVE
    jobs: list[Job] = []
    for s in states:
        jobs += store.list_jobs(kind=kind, state=s, limit=limit)
    allowed = permissions.visible_repos(identity)
    if allowed is not None:
        jobs = [j for j in jobs if j.repo_id is None or j.repo_id in allowed]
    jobs.sort(key=lambda j: -j.id)
    names = {c.id: c.name for c in store.list_connections()}
    return [job_json(j, names) for j in jobs[:limit]]


@router.post("/api/repos/{repo_id}/reindex", status_code=202)
def reindex(repo_id: int, identity: Caller, store: StoreDep) -> JSONResponse:
    if identity.role != "OWNER":
        raise InsufficientPermissions("only owners can re-index repositories")
    row = None
    if store is not None:
        try:
            row = store.get_repo(repo_id)
        except NotFound:
            row = None
    if store is None or row is None or not permissions.can_see(identity, row):
        raise RepositoryNotFound(f"repository {repo_id} not found")
    job = store.enqueue_index_job(row.id, force=True, rebuild=True)  # asked for: rebuilt even if unchanged
    return JSONResponse(job_json(job), status_code=202)
