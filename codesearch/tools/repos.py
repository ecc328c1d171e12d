"""Repositories as the API and the tools show them: `repo_json` (the ``GET /api/repos`` item),
`list_repos_item` (the `list_repos` tool's item, Sourcebot's agent shape), paging over the
repos a caller may see, and the `list_repos` and `list_language_models` tools."""

from __future__ import annotations

import json
import urllib.parse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from codesearch import permissions
from codesearch.app.context import ToolContext
from codesearch.permissions import Identity

if TYPE_CHECKING:
    from codesearch.store import Store
    from codesearch.store.models import Repo

#: The last page number any listing accepts: far beyond any real listing, and small enough that
#: the database's row offset (page × perPage) never overflows its 64-bit integers.
MAX_PAGE = 10_000_000


def iso(t: datetime | None) -> str | None:
    """A time as JavaScript's ``Date.toISOString`` prints it (UTC, milliseconds, ``Z``)."""
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    t = t.astimezone(UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _compact(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def repo_web_url(public_url: str, name: str) -> str:
    """The repo's page in this service: ``<public URL>/browse/<repo name>``."""
    return f"{public_url.rstrip('/')}/browse/{urllib.parse.quote(name)}"


def repo_json(repo: Repo, public_url: str) -> dict[str, Any]:
    return _compact(
        {
            "codeHostType": repo.code_host_type,
            "repoId": repo.id,
            "repoName": repo.name,
            "repoDisplayName": repo.display_name or None,
            "webUrl": repo_web_url(public_url, repo.name),
            "externalWebUrl": repo.web_url or None,
            "indexedAt": iso(repo.indexed_at),
            "pushedAt": iso(repo.pushed_at),
            "defaultBranch": repo.default_branch or None,
            "isFork": bool(repo.fork),
            "isArchived": bool(repo.archived),
        }
    )


def list_repos_item(repo: Repo, public_url: str) -> dict[str, Any]:
    """A repo as the `list_repos` tool shows it to agents: Sourcebot's ``{name, url, pushedAt,
    defaultBranch, isFork, isArchived}``, every key present (null when unknown). `url` is the
    repo's page in our web UI; `pushedAt` the newest commit of its default branch (recorded at
    indexing), so agents can tell active repositories from stale ones."""
    return {
        "name": repo.name,
        "url": repo_web_url(public_url, repo.name),
        "pushedAt": iso(repo.pushed_at),
        "defaultBranch": repo.default_branch or None,
        "isFork": bool(repo.fork),
        "isArchived": bool(repo.archived),
    }


def page_of_repos(
    store: Store,
    identity: Identity,
    *,
    page: int,
    per_page: int,
    sort: str,
    direction: str,
    query: str | None,
    connection: str | None = None,
) -> tuple[list[Repo], int]:
    """One page of the repos `identity` may see (those linked to `connection` when given), and how
    many there are."""
    allowed = permissions.visible_repos(identity)
    if allowed is None:
        return store.list_repos(
            page=page, per_page=per_page, sort=sort, direction=direction, query=query or None, connection=connection
        )
    # Restricted: filter every match, then page (the permissions work may push this into SQL).
    seen: list[Repo] = []
    n = 1
    while True:
        rows, total = store.list_repos(
            page=n, per_page=500, sort=sort, direction=direction, query=query or None, connection=connection
        )
        seen += [r for r in rows if r.id in allowed]
        if not rows or n * 500 >= total:
            break
        n += 1
    start = (page - 1) * per_page
    return seen[start : start + per_page], len(seen)


def list_repos(
    tc: ToolContext,
    query: str | None = None,
    page: int = 1,
    perPage: int = 30,  # noqa: N803
    sort: str = "name",
    direction: str = "asc",
) -> str:
    if tc.allowed_repos is None:
        rows, total = page_of_repos(
            tc.store, tc.identity, page=page, per_page=perPage, sort=sort, direction=direction, query=query or None
        )
    else:  # a restricted agent: the few repos it was given
        every, _ = page_of_repos(
            tc.store, tc.identity, page=1, per_page=10**6, sort=sort, direction=direction, query=query or None
        )
        every = [r for r in every if r.name in tc.allowed_repos]
        rows, total = every[(page - 1) * perPage : page * perPage], len(every)
    return json.dumps(
        {"repos": [list_repos_item(r, tc.public_url) for r in rows], "totalCount": total}, ensure_ascii=False
    )


def language_models(tc: ToolContext) -> list[dict[str, Any]]:
    """The configured models as callers may see them (provider, model, displayName; never tokens,
    headers or base URLs)."""
    out: list[dict[str, Any]] = []
    for entry in tc.store.list_language_models():
        item = {"provider": entry.get("provider"), "model": entry.get("model")}
        if entry.get("displayName"):
            item["displayName"] = entry["displayName"]
        out.append(item)
    return out


def list_language_models(tc: ToolContext) -> str:
    return json.dumps(language_models(tc), ensure_ascii=False)
