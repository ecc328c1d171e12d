"""A repository's tree and history as JSON, at any branch, tag or commit (for the web UI and
`codesearch.Client` over HTTP; the MCP tools `list_tree` / `list_commits` give the same data as
text for agents).

``GET /api/tree?repo&path&ref&depth&maxEntries&includeFiles&includeDirectories``
    ``{repo, ref, path, entries: [{path, name, type: "tree"|"blob", depth}], truncated}``: a
    pre-order walk with directories before files at each level, `depth` 1-10 (default 1),
    `maxEntries` 1-10000 (default 1000; `truncated` says more existed).

``GET /api/commits?repo&ref&path&query&since&until&author&page&perPage``
    Sourcebot's shape: a bare array ``[{hash, date, message, refs, body, authorName,
    authorEmail}]``, newest first, the total in ``X-Total-Count``; ``refs`` is the refs pointing
    at the commit as ``git log`` decorates it (``"HEAD -> main, tag: v1.0"``, empty for none);
    `path` keeps the commits that changed that file or something below that directory
    (Sourcebot's parameter; it need not exist at `ref`); `query` filters messages and
    `author` names or e-mails (case-insensitive), `since`/`until` take ISO 8601 or relative
    dates (``30 days ago``); `perPage` 1-100 (50). Headers ``X-Total-Count`` and, when there is
    more than one page, ``Link`` (as ``/api/repos``; Sourcebot sends them too).

``GET /api/commits/authors?repo&ref&path&page&perPage``
    Sourcebot's ``[{name, email, commitCount}]``: who committed to `ref` (default branch), or
    changed `path`, most commits first (``git shortlog -sne``, the repository's mailmap applied);
    `perPage` 1-100 (50); ``X-Total-Count`` and ``Link`` as above.

Repos go through the tools' `ToolContext` (the caller's visibility); errors (docs/http-api.md#errors):
404 ``REPOSITORY_NOT_FOUND`` / ``FILE_NOT_FOUND``, 400 ``INVALID_GIT_REF`` / ``INVALID_ARGUMENT``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.app.git_reads import list_commit_authors, list_commits, list_tree
from codesearch.service.deps import Caller, ServicesDep
from codesearch.service.routes.repos import _base_url, link_header
from codesearch.tools.repos import MAX_PAGE


def commit_summary_json(c: Any) -> dict[str, Any]:
    """A commit as ``GET /api/commits`` lists it (Sourcebot's fields); ``GET /api/commit`` adds
    the parents and the committer (`history.commit_json`)."""
    return {
        "hash": c.hash,
        "date": c.date,
        "message": c.message,
        "refs": c.decoration,
        "body": c.body,
        "authorName": c.author_name,
        "authorEmail": c.author_email,
    }


router = APIRouter()


@router.get("/api/tree")
async def tree(
    request: Request,
    identity: Caller,
    services: ServicesDep,
    repo: str = Query(..., min_length=1, max_length=1000),
    path: str = Query("", max_length=4096),
    ref: str | None = Query(None, max_length=1024),
    depth: int = Query(1, ge=1, le=10),
    maxEntries: int = Query(1000, ge=1, le=10000),
    includeFiles: bool = True,  # noqa: N803
    includeDirectories: bool = True,
) -> dict[str, Any]:  # noqa: N803
    audit.record(request, identity, "tree.read", f"{repo}:{path}", ref=ref)

    def run() -> dict[str, Any]:
        tree = list_tree(
            services.make_context(identity),
            repo,
            path,
            ref,
            depth=depth,
            max_entries=maxEntries,
            include_files=includeFiles,
            include_dirs=includeDirectories,
        )
        return {
            "repo": tree.repo.name,
            "ref": tree.ref,
            "path": tree.path,
            "truncated": tree.truncated,
            "entries": [
                {"path": e.path, "name": e.name, "type": "tree" if e.is_dir else "blob", "depth": e.depth}
                for e in tree.entries
            ],
        }

    return await run_in_threadpool(run)


@router.get("/api/commits")
async def commits(
    request: Request,
    identity: Caller,
    services: ServicesDep,
    repo: str = Query(..., min_length=1, max_length=1000),
    ref: str | None = Query(None, max_length=1024),
    query: str | None = Query(None, max_length=1000),
    since: str | None = Query(None, max_length=100),
    until: str | None = Query(None, max_length=100),
    author: str | None = Query(None, max_length=500),
    page: int = Query(1, ge=1, le=MAX_PAGE),
    perPage: int = Query(50, ge=1, le=100),  # noqa: N803
    path: str | None = Query(None, max_length=4096),
    *,
    response: Response,
) -> list[dict[str, Any]]:
    audit.record(request, identity, "commits.read", f"{repo}:{path}" if path else repo, ref=ref, query=query)

    def run() -> list[dict[str, Any]]:
        tc = services.make_context(identity)
        found, total = list_commits(
            tc, repo, ref, query=query, since=since, until=until, author=author, path=path, page=page, per_page=perPage
        )
        response.headers["X-Total-Count"] = str(total)
        link = link_header(
            _base_url(request),
            page,
            perPage,
            total,
            {
                "repo": repo,
                "ref": ref,
                "path": path or None,
                "query": query or None,
                "since": since or None,
                "until": until or None,
                "author": author or None,
            },
        )
        if link:
            response.headers["Link"] = link
        return [commit_summary_json(c) for c in found]

    return await run_in_threadpool(run)


@router.get("/api/commits/authors")
async def commit_authors(
    request: Request,
    identity: Caller,
    services: ServicesDep,
    repo: str = Query(..., min_length=1, max_length=1000),
    ref: str | None = Query(None, max_length=1024),
    path: str | None = Query(None, max_length=4096),
    page: int = Query(1, ge=1, le=MAX_PAGE),
    perPage: int = Query(50, ge=1, le=100),  # noqa: N803
    *,
    response: Response,
) -> list[dict[str, Any]]:
    audit.record(request, identity, "commits.read", f"{repo}:{path}" if path else repo, ref=ref, authors=True)

    def run() -> list[dict[str, Any]]:
        found, total = list_commit_authors(
            services.make_context(identity), repo, ref, path=path, page=page, per_page=perPage
        )
        response.headers["X-Total-Count"] = str(total)
        link = link_header(_base_url(request), page, perPage, total, {"repo": repo, "ref": ref, "path": path or None})
        if link:
            response.headers["Link"] = link
        return [{"name": a.name, "email": a.email, "commitCount": a.commit_count} for a in found]

    return await run_in_threadpool(run)
