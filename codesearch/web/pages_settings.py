"""Settings pages for running the service: connections and their sync status, anonymous access,
and connecting MCP clients.

    GET  /settings/connections                   every connection: type, status (synced, syncing,
                                                 failed, …), last sync, repository count, errors and
                                                 warnings, its repositories (index status, last
                                                 error); signed-in users, read-only for members
    POST /settings/connections/{id}/sync         OWNER: sync the connection now
                                                 (`Store.request_connection_sync`: the sync workers
                                                 take it up; a retry waiting after a failure is
                                                 pulled forward)
    POST /settings/connections/repos/{id}/reindex
                                                 OWNER: re-index one repository now (what
                                                 ``POST /api/repos/{id}/reindex`` does)
    GET/POST /settings/access                    OWNER: anonymous access on or off
                                                 (`codesearch.service.anonymous` has the precedence)
    GET/POST /settings/mcp                       signed-in users: the MCP endpoint's URL and snippets
                                                 for Claude Code, Cursor and VS Code; POST creates an
                                                 API key (`api_keys`) and shows the snippets with it,
                                                 once

Who sees what. Repositories follow the permission rule (`codesearch.permissions`): a member sees
the repositories they may read, and counts of those only. Sync errors and warnings are written
by the store in repository terms (`Store.public_error`: no server path), but they may name
repositories of the connection's config; a member who does not see every repository gets their
number, not their text (owners always read them: they wrote the config). Every POST checks the
CSRF token; a member's POST is a 403 page. Every change leaves an audit event
(``connection.resync``, ``repo.reindex``, ``settings.access``, ``apikey.create``).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from codesearch import audit, permissions, sessions
from codesearch.markup.urls import browse_url
from codesearch.oauth import server as oauth_server
from codesearch.permissions import Identity
from codesearch.service.anonymous import SETTING_KEY
from codesearch.service.auth import ANONYMOUS_ENV
from codesearch.service.deps import StoreDep
from codesearch.store import OWNER, NotFound
from codesearch.store import models as m
from codesearch.web import api_keys
from codesearch.web.deps import WebDep
from codesearch.web.templating import WebContext, render

if TYPE_CHECKING:
    from codesearch.store import Store, User

#: repositories listed under one connection (the rest: on the Repos page)
REPOS_SHOWN = 100

STATUS_LABELS: dict[str, tuple[str, str]] = {
    m.SYNC_NEEDED: ("not synced yet", "pending"),
    m.SYNCING: ("syncing", "pending"),
    m.SYNCED: ("synced", "ok"),
    m.SYNCED_WITH_WARNINGS: ("synced with warnings", "warn"),
    m.SYNC_FAILED: ("failed", "failed"),
}
INDEX_LABELS: dict[str, str] = {
    m.INDEX_NEW: "not indexed yet",
    m.INDEXING: "indexing",
    m.INDEXED: "indexed",
    m.INDEX_FAILED: "failed",
}
#: the CSS class of an index status (the rest: "pending")
INDEX_CLASSES: dict[str, str] = {m.INDEXED: "ok", m.INDEX_FAILED: "failed"}


def when(t: datetime | None, never: str = "never") -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else never


@dataclass
class RepoView:
    id: int
    name: str
    url: str
    status: str
    status_class: str
    indexed_at: datetime | None
    error: str | None
    job: str | None  # "re-index queued" / "indexing now"


@dataclass
class ConnectionView:
    id: int
    name: str
    type: str
    status: str
    status_class: str
    synced_at: datetime | None
    repo_count: int
    job: str | None  # "sync queued" / "sync running" / "retry queued for …"
    error: str | None
    warnings: list[str]
    hidden_problems: int  # errors and warnings not shown to this caller
    repos: list[RepoView] = field(default_factory=list)


def _job_label(job: m.Job | None, kind: str) -> str | None:
    if job is None:
        return None
    if job.state == m.IN_PROGRESS:
        return f"{kind} running now"
    now = datetime.now(UTC)
    if job.attempts and job.next_attempt_at and job.next_attempt_at > now:
        return f"retry of the {kind} queued for {job.next_attempt_at.strftime('%H:%M:%S UTC')}"
    return f"{kind} queued"


def connection_views(store: Store, identity: Identity, root: str) -> list[ConnectionView]:
    """What the connections page shows `identity` (see the module docstring)."""
    # owners run the service: the problems of a sync are theirs to read (they wrote the config)
    shows_problems = identity.role == OWNER or permissions.visible_repos(identity) is None
    active_sync: dict[int | None, m.Job] = {}
    active_index: dict[int | None, m.Job] = {}
    for state in (m.IN_PROGRESS, m.PENDING):  # a running job wins over a queued one
        for job in store.list_jobs(kind=m.SYNC_JOB, state=state, limit=10_000):
            active_sync.setdefault(job.connection_id, job)
        for job in store.list_jobs(kind=m.INDEX_JOB, state=state, limit=10_000):
            active_index.setdefault(job.repo_id, job)
    views = []
    for c in store.list_connections():
        repos = [r for r in store.repos_for_connection(c.name) if permissions.can_see(identity, r)]
        repos.sort(key=lambda r: (r.index_status != m.INDEX_FAILED, r.name))
        label, cls = STATUS_LABELS.get(c.sync_status, (c.sync_status.lower(), "pending"))
        error = store.public_error(c.sync_error)
        warnings = [p for p in (store.public_error(w) for w in (c.sync_warnings or []) if w) if p is not None]
        hidden = 0
        if not shows_problems:
            hidden = (1 if error else 0) + len(warnings)
            error, warnings = None, []
        views.append(
            ConnectionView(
                id=c.id,
                name=c.name,
                type=c.type,
                status=label,
                status_class=cls,
                synced_at=c.synced_at,
                repo_count=len(repos),
                job=_job_label(active_sync.get(c.id), "sync"),
                error=error,
                warnings=warnings,
                hidden_problems=hidden,
                repos=[
                    RepoView(
                        id=r.id,
                        name=r.name,
                        url=browse_url(root, r.name),
                        status=INDEX_LABELS.get(r.index_status, r.index_status.lower()),
                        status_class=INDEX_CLASSES.get(r.index_status, "pending"),
                        indexed_at=r.indexed_at,
                        error=store.public_error(r.last_error, repo_name=r.name, local_path=r.local_path),
                        job=_job_label(active_index.get(r.id), "re-index"),
                    )
                    for r in repos[:REPOS_SHOWN]
                ],
            )
        )
    return views


def mcp_snippets(mcp_url: str, key: str | None) -> dict[str, str]:
    """Ready-to-paste client configurations for `mcp_url`: with ``Authorization: Bearer <key>``
    when a key is given, else for clients that sign in with OAuth (no header)."""
    server: dict[str, Any] = {"url": mcp_url}
    command = f"claude mcp add --transport http codesearch {shlex.quote(mcp_url)}"
    if key:
        server["headers"] = {"Authorization": f"Bearer {key}"}
        command += f' --header "Authorization: Bearer {key}"'
    # Codex reads a remote server's key from an environment variable only (no inline token);
    # OpenCode's remote servers are ``type: remote``; Windsurf names the URL ``serverUrl``
    codex = f"[mcp_servers.codesearch]\nurl = {json.dumps(mcp_url)}\n"
    if key:
        codex = f"export CODESEARCH_API_KEY={shlex.quote(key)}  # in your shell profile\n\n{codex}"
        codex += 'bearer_token_env_var = "CODESEARCH_API_KEY"\n'
    windsurf = {"serverUrl": mcp_url, **({"headers": server["headers"]} if key else {})}
    opencode = {"type": "remote", "url": mcp_url, "enabled": True, **({"headers": server["headers"]} if key else {})}
    return {
        "claude": command,
        "cursor": json.dumps({"mcpServers": {"codesearch": server}}, indent=2),
        "vscode": json.dumps({"servers": {"codesearch": {"type": "http", **server}}}, indent=2),
        "codex": codex,
        "opencode": json.dumps(
            {"$schema": "https://opencode.ai/config.json", "mcp": {"codesearch": opencode}}, indent=2
        ),
        "windsurf": json.dumps({"mcpServers": {"codesearch": windsurf}}, indent=2),
    }


router = APIRouter(include_in_schema=False)


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return render(request, template, status_code=status_code, when=when, **context)


def _message(request: Request, status_code: int, heading: str, text: str) -> HTMLResponse:
    return _page(request, "message.html", status_code=status_code, title=heading, heading=heading, message=text)


def _signed_in(request: Request, store: Store | None) -> tuple[User, Store] | Response:
    """(user, store), or the response to send: sign in first, or no database."""
    user = sessions.current_user(request)
    if user is None:
        return sessions.login_redirect(request)
    if store is None:
        return _message(request, 503, "Settings are unavailable", "This service runs without a state database.")
    return user, store


def _owner(request: Request, store: Store | None, what: str) -> tuple[User, Store] | Response:
    signed = _signed_in(request, store)
    if not isinstance(signed, Response) and signed[0].role != OWNER:
        return _message(request, 403, "Owners only", f"Only owners can {what}.")
    return signed


def _owner_form(request: Request, store: Store | None, what: str, csrf_token: str) -> tuple[User, Store] | Response:
    """`_owner` for a form sent by POST: its CSRF token is checked once the sender is known."""
    owner = _owner(request, store, what)
    if not isinstance(owner, Response):
        sessions.require_csrf(request, csrf_token)
    return owner


def _root(request: Request) -> str:
    return sessions.root_of(request.scope)


# ------------------------------------------------------------------ connections


@router.get("/settings/connections")
def connections_page(request: Request, store: StoreDep, resynced: str = "", reindexed: str = "") -> Response:
    signed = _signed_in(request, store)
    if isinstance(signed, Response):
        return signed
    _user, store = signed
    identity: Identity = request.state.identity
    views = connection_views(store, identity, _root(request))
    notice = None
    if resynced.isdigit():
        name = next((v.name for v in views if v.id == int(resynced)), None)
        if name is not None:
            notice = f"A sync of “{name}” is queued: the sync workers take it up in a moment."
    if reindexed.isdigit():
        try:
            row = store.get_repo(int(reindexed))
            if permissions.can_see(identity, row):
                notice = f"Re-indexing {row.name} is queued."
        except NotFound:
            pass
    return _page(
        request,
        "connections.html",
        title="Connections",
        section="connections",
        connections=views,
        notice=notice,
        repos_shown=REPOS_SHOWN,
    )


@router.post("/settings/connections/{connection_id}/sync")
def resync(request: Request, connection_id: str, store: StoreDep, csrf_token: str = Form("")) -> Response:
    owner = _owner_form(request, store, "sync connections", csrf_token)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    conn = next((c for c in store.list_connections() if str(c.id) == connection_id), None)
    if conn is None:
        return _message(
            request,
            404,
            "No such connection",
            "This connection does not exist (any more): it was removed from the config file.",
        )
    try:
        job = store.request_connection_sync(conn.name)
    except NotFound:
        return _message(request, 404, "No such connection", "This connection was removed meanwhile.")
    audit.record(request, Identity(user), "connection.resync", conn.name, job=job.id)
    return RedirectResponse(
        f"{_root(request)}/settings/connections?resynced={conn.id}#connection-{conn.id}", status_code=303
    )


@router.post("/settings/connections/repos/{repo_id}/reindex")
def reindex(request: Request, repo_id: str, store: StoreDep, csrf_token: str = Form("")) -> Response:
    owner = _owner_form(request, store, "re-index repositories", csrf_token)
    if isinstance(owner, Response):
        return owner
    user, store = owner
    row = None
    if repo_id.isdigit():
        try:
            row = store.get_repo(int(repo_id))
        except NotFound:
            row = None
    if row is None or not permissions.can_see(request.state.identity, row):
        return _message(request, 404, "No such repository", "This repository does not exist (any more).")
    job = store.enqueue_index_job(row.id, force=True, rebuild=True)  # asked for: rebuilt even if unchanged
    audit.record(request, Identity(user), "repo.reindex", row.name, job=job.id)
    return RedirectResponse(f"{_root(request)}/settings/connections?reindexed={row.id}", status_code=303)


# ------------------------------------------------------------------ access


def _access_page(request: Request, web: WebContext, status_code: int = 200, **context: Any) -> HTMLResponse:
    access = web.authenticator.access
    context.setdefault("error", None)
    context.setdefault("notice", None)
    return _page(
        request,
        "access.html",
        status_code=status_code,
        title="Access",
        section="access",
        forced=access.forced,
        stored=access.stored(),
        enabled=access.enabled(),
        env_name=ANONYMOUS_ENV,
        ttl=access.ttl_s,
        **context,
    )


@router.get("/settings/access")
def access(request: Request, web: WebDep, store: StoreDep) -> Response:
    owner = _owner(request, store, "change who may search")
    if isinstance(owner, Response):
        return owner
    return _access_page(request, web)


@router.post("/settings/access")
def set_access(
    request: Request, web: WebDep, store: StoreDep, anonymous: str = Form(""), csrf_token: str = Form("")
) -> Response:
    owner = _owner_form(request, store, "change who may search", csrf_token)
    if isinstance(owner, Response):
        return owner
    user, _store = owner
    if anonymous not in ("on", "off"):
        return _access_page(
            request, web, status_code=400, error=f"Anonymous access must be “on” or “off”, not {anonymous[:40]!r}."
        )
    access = web.authenticator.access
    enabled = anonymous == "on"
    if access.forced and not enabled:
        return _access_page(
            request,
            web,
            status_code=409,
            error=f"Anonymous access is forced on by {ANONYMOUS_ENV}=true in the service's "
            "environment (or settings.enablePublicAccess in the config file); remove it "
            "and restart the service to turn anonymous access off.",
        )
    changed = access.set(enabled)
    if changed:
        audit.record(request, Identity(user), "settings.access", SETTING_KEY, enabled=enabled)
    state = "on: visitors without an account may search" if enabled else "off: visitors must sign in"
    return _access_page(request, web, notice=f"Anonymous access is {state}.")


# ------------------------------------------------------------------ MCP


def _mcp_page(
    request: Request,
    web: WebContext,
    user: User,
    status_code: int = 200,
    created: dict[str, Any] | None = None,
    error: str | None = None,
) -> HTMLResponse:
    base = oauth_server.base_url(request.scope, web.authenticator.oauth)
    mcp_url = oauth_server.resource_url(base)
    return _page(
        request,
        "mcp.html",
        status_code=status_code,
        title="MCP",
        section="mcp",
        mcp_url=mcp_url,
        created=created,
        error=error,
        may_create=api_keys.may_create(web, user),
        oauth_snippets=mcp_snippets(mcp_url, None),
        key_snippets=mcp_snippets(mcp_url, created["secret"]) if created else None,
    )


@router.get("/settings/mcp")
def mcp(request: Request, web: WebDep, store: StoreDep) -> Response:
    signed = _signed_in(request, store)
    if isinstance(signed, Response):
        return signed
    user, _store = signed
    return _mcp_page(request, web, user)


@router.post("/settings/mcp")
def mcp_key(
    request: Request, web: WebDep, store: StoreDep, name: str = Form(""), csrf_token: str = Form("")
) -> Response:
    signed = _signed_in(request, store)
    if isinstance(signed, Response):
        return signed
    user, _store = signed
    sessions.require_csrf(request, csrf_token)
    outcome = api_keys.create(request, web, user, name)
    return _mcp_page(request, web, user, status_code=outcome.status, created=outcome.created, error=outcome.error)
