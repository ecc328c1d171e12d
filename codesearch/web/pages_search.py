"""The search pages: home (search box and sync status), search results, file and tree views,
the repos table, and the highlighting stylesheet.

- ``GET /``: the search form (regex and case toggles, a syntax reference) and the sync status
  (connections, repos, queued and running jobs) that ``static/home-page.js`` polls from
  ``/api/connections/status``, ``/api/repos/status`` and ``/api/jobs``.
- ``GET /search?q=&regex=1&case=1&matches=&lang=&repo=``: the results page, its results written
  into the HTML as the searchers answer (`codesearch.web.results_page`; repository text only
  through autoescaping); ``static/search-page.js`` ranks them, adds the facets, the summary and
  the hints. The search runs as the API's (`codesearch.app.search.start_search`: the same parsing,
  permissions, hints and audit record). Sourcebot's own search links work too:
  ``?query=…&matches=…&isRegexEnabled=true&isCaseSensitivityEnabled=true`` (its UI,
  docs and bookmarks write them so), under ``/search`` or under its single-tenant prefix ``/~/``
  (every ``/~/<page>`` redirects to ``/<page>``).
- ``GET /browse/<repo>@<rev>/-/blob/<path>``: one file (the ``webUrl`` of docs/http-api.md#search), highlighted with
  Pygments on the server, one element ``#L<n>`` per line; ``#L12``, ``#L12-L14`` or ``?line=12``
  highlight a range and scroll it into view. ``?preview&line=12``: the lines around line 12 as a
  fragment, for the results page's preview panel (`codesearch.web.preview`).
  The file page navigates code (`codesearch.web.codenav`, ``static/codenav.js``): symbols link
  to their definitions and references, a file-tree sidebar, a file finder (``t``), a branch and
  tag selector, and the terms of ``?q=`` (with ``regex``/``case``) highlighted.
  ``GET /browse/<repo>[@<rev>][/-/tree/<dir>]``: a directory listing, directories first.
  Blame (``/-/blob/<path>?blame``), history (``/-/commits/<path>``), commit (``/-/commit/<sha>``)
  and compare (``/-/compare?base=&head=``) pages are `codesearch.web.pages_history`'s.
  The parts of the URL are percent-encoded as `codesearch.search.present.web_url` writes them:
  the revision with ``safe=''`` (no ``/`` or ``@`` in it), so the revision is what follows the
  last ``@`` before ``/-/``; the page reads the raw (still encoded) path to tell them apart.
  The revision is a branch or tag by its short name (``main``, ``-dash``, ``release/1.0``), a full
  ref name or a commit: `resolve_rev` turns a short name into its full ref, so that every legal
  git ref name opens, even one that starts with ``-`` (which git would read as an option).
- ``GET /repos?query=&page=``: the repos the caller may see, paged, with status, branches
  indexed, last error; owners get a Re-index button (``POST /api/repos/{id}/reindex``).
- ``GET /highlight.css``: the Pygments token colours for light and dark mode (the pages have
  them in ``style.css``; this serves links made before).

Who is asking: ``request.state.identity`` (the session, set by `codesearch.sessions`);
without one, the visitor is anonymous when anonymous access is on, else sent to the sign-in
page. Repos go through the tools' `ToolContext` (`web.make_context(identity)`), so a repo the
caller may not see is a 404 page exactly like an unknown one.
"""

from __future__ import annotations

import logging
import urllib.parse
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.app import git_reads
from codesearch.app.search import SearchRequest, start_search, unwrap
from codesearch.errors import (
    CodesearchError,
    FileNotFound,
    InvalidGitRef,
    MalformedGitRef,
    RepositoryNotFound,
    ServiceUnavailable,
)
from codesearch.git.objects import resolve_commit
from codesearch.git.paths import check_dir, check_path, check_ref
from codesearch.markup.urls import browse_url
from codesearch.permissions import Identity
from codesearch.search.present import external_url, short_ref
from codesearch.search.sorting import sort_named
from codesearch.service.deps import Services, ServicesDep, StoreDep
from codesearch.service.errors import for_clients
from codesearch.service.middleware.security_headers import page_headers
from codesearch.sessions import login_redirect
from codesearch.statuses import JobKind, JobState
from codesearch.sync import repo_info
from codesearch.tools.repos import iso, page_of_repos
from codesearch.web import codenav, first_results, highlight, pages_history, preview
from codesearch.web.deps import PageCaller, WebDep
from codesearch.web.result_sort import sort_links
from codesearch.web.results_page import OUTCOME_SLOT, RESULTS_SLOT, Links, outcome_script, page_stream
from codesearch.web.templating import WebContext, render, render_text

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.store.models import Repo

log = logging.getLogger(__name__)

#: Lines of context around each match on the results page.
RESULT_CONTEXT_LINES = 1
#: The most match ranges the results page shows per file (`SearchOptions.file_matches`): the
#: page's `matches` budget lists many files with a few matches each, and says how many more
#: each file has ("N more matches in this file", a link to the file page).
RESULT_FILE_MATCHES = 5
REPOS_PER_PAGE = 50
MAX_TREE_ENTRIES = 5000
DEFAULT_MATCHES = 100
MAX_MATCHES = 100_000


# ---------------------------------------------------------------------- URLs


def parse_browse(raw: str) -> tuple[str, str | None, str, str]:
    """(repo, rev or None, kind ``tree`` | ``blob``, path) of the part of a ``/browse/`` URL after
    ``/browse/``, still percent-encoded. FileNotFound when it makes no sense."""
    unq = urllib.parse.unquote
    head, sep, tail = raw.partition("/-/")
    if not sep:
        head, kind, path = raw.rstrip("/"), "tree", ""
    else:
        kind, _, path = tail.partition("/")
        if kind not in ("tree", "blob", *pages_history.KINDS):
            raise FileNotFound(f"no page at {unq(raw)!r}")
        path = path if kind == "blob" else path.rstrip("/")
    rev = None
    if "@" in head:
        head, rev = head.rsplit("@", 1)
        rev = unq(rev) or None
    repo = unq(head).strip("/")
    if not repo:
        raise RepositoryNotFound("no repository named in the URL")
    return repo, rev, kind, unq(path)


def _raw_after(request: Request, prefix: str) -> str | None:
    """What follows `prefix` in the request's path as the client sent it (percent-encoded), or
    None when the server did not keep the raw path."""
    raw: bytes | None = request.scope.get("raw_path")
    if raw:
        text = raw.decode("latin-1").split("?", 1)[0]
        root: str = request.scope.get("root_path", "")
        if root and text.startswith(root):
            text = text[len(root) :]
        i = text.find(prefix)
        if i >= 0:
            return text[i + len(prefix) :]
    return None


def _raw_rest(request: Request, rest: str) -> str:
    """What follows ``/browse/`` in the request's path as the client sent it (percent-encoded)."""
    raw = _raw_after(request, "/browse/")
    return raw if raw is not None else urllib.parse.quote(rest, safe="/@")  # the decoded one, re-encoded


def resolve_rev(git_dir: str, row: Repo, rev: str) -> str:
    """The ref to read for the revision of a page URL: the full name of the branch or tag
    `rev` names (``-dash`` → ``refs/heads/-dash``; a branch wins over a tag of the same name, as
    `webUrl` names branches), else `rev` itself (a full ref, a commit, ``HEAD``).
    MalformedGitRef when `rev` is outside the grammar of `paths.parse_ref` (``^{/…}``, ``@{…}``,
    a leading ``^`` …), InvalidGitRef when it names no commit."""
    if rev.startswith("refs/") or rev == "HEAD":
        return check_ref(rev)
    indexed = [ref for ref in (row.indexed_revisions or {}) if ref.startswith(("refs/heads/", "refs/tags/"))]
    for prefix in ("refs/heads/", "refs/tags/"):
        if prefix + rev in indexed:
            return prefix + rev
    for prefix in ("refs/heads/", "refs/tags/"):
        try:
            resolve_commit(git_dir, prefix + rev)
            return prefix + rev
        except MalformedGitRef:
            return check_ref(rev)  # (then `rev` is malformed too: refused, saying why)
        except InvalidGitRef:
            continue
    if rev.startswith("-"):  # a legal branch name that names no branch: not found, like any other
        raise InvalidGitRef(f"git ref {rev!r} not found in the repository")
    return check_ref(rev)


def _root(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


# ---------------------------------------------------------------------- small helpers


def _page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    return render(request, template, status_code=status_code, **context)


def _not_found(request: Request, message: str, status_code: int = 404) -> Response:
    return _page(request, "notfound.html", status_code=status_code, title="Not found", message=message)


def _time(t: datetime | None) -> str:
    """A store time as the pages show it (UTC, to the minute)."""
    s = iso(t)
    return s[:16].replace("T", " ") + " UTC" if s else ""


def _crumbs(root: str, repo: str, rev: str, path: str, display: str = "") -> list[dict[str, Any]]:
    """The breadcrumb of a path: the repo root (by its display name, the full name as its
    title), then each directory."""
    out = [{"name": display or repo, "title": repo, "url": browse_url(root, repo, rev, "tree", "")}]
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        sub = "/".join(parts[: i + 1])
        out.append({"name": part, "url": browse_url(root, repo, rev, "tree", sub)})
    return out


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes", "on")


# ---------------------------------------------------------------------- the router


router = APIRouter(include_in_schema=False)


@router.get("/highlight.css")
def highlight_css() -> Response:
    return Response(
        highlight.stylesheet(),
        media_type="text/css",
        headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"},
    )


@router.get("/")
def home(request: Request, caller: PageCaller, web: WebDep) -> Response:
    if caller is None:
        return login_redirect(request)
    return _page(
        request, "home.html", title="codesearch", q="", regex=False, case=False, search_assist=web.models.get()
    )


@router.get("/search")
async def search(
    request: Request,
    caller: PageCaller,
    web: WebDep,
    services: ServicesDep,
    q: str = Query("", max_length=10_000),
    regex: str | None = None,
    case: str | None = None,
    matches: str | None = None,
    sort: str | None = None,
    query: str = Query("", max_length=10_000, description="Sourcebot's name for q"),
    isRegexEnabled: str | None = None,
    isCaseSensitivityEnabled: str | None = None,
) -> Response:  # noqa: N803
    """The results page, its results written into it as the searchers answer
    (`codesearch.web.results_page`)."""
    if caller is None:
        return login_redirect(request)
    q = q or query
    is_regex, is_case = _flag(regex or isRegexEnabled), _flag(case or isCaseSensitivityEnabled)
    try:
        n = max(1, min(int(matches), MAX_MATCHES)) if matches else DEFAULT_MATCHES
    except ValueError:
        n = DEFAULT_MATCHES
    if not q.strip():
        return RedirectResponse(f"{_root(request)}/", status_code=303)
    # from here until its first result is sent, this page goes before the rest of other pages
    # (`codesearch.web.first_results`); the page's stream reports it done, or this handler does
    waiting = first_results.gate().enter()
    try:
        return await _results_page(request, caller, web, services, q, is_regex, is_case, n, sort, waiting)
    except BaseException:
        waiting.done()
        raise


async def _results_page(
    request: Request,
    caller: Identity,
    web: WebContext,
    services: Services,
    q: str,
    is_regex: bool,
    is_case: bool,
    n: int,
    sort: str | None,
    waiting: first_results.Waiting,
) -> Response:
    """`search`'s page once its query is read: the error page, or the stream of the results."""
    order = sort_named(sort)  # an unknown order is the default one
    root, public_url = _root(request), web.public_url.rstrip("/")
    config = {
        "query": q,
        "regex": is_regex,
        "case": is_case,
        "matches": n,
        "maxMatches": MAX_MATCHES,
        "sort": order,
    }
    body = SearchRequest(
        query=q,
        matches=n,
        contextLines=RESULT_CONTEXT_LINES,
        isRegexEnabled=is_regex,
        isCaseSensitivityEnabled=is_case,
        withHints=True,  # the page shows why an empty search found nothing
        sort=order,
        foldDuplicates=True,  # copies show folded under their first file: they do not use up the page
    )
    audit.record(request, caller, "search", q, regex=is_regex, caseSensitive=is_case, page=True)
    failed: CodesearchError | None = None
    try:
        if services.search is None:
            raise ServiceUnavailable("this service has no searchers")
        started = await start_search(services.search, caller, body, file_matches=RESULT_FILE_MATCHES)
    except CodesearchError as e:
        cause = unwrap(e)  # (a CodesearchError: Ray's wrapper of one is caught as one)
        failed = cause if isinstance(cause, CodesearchError) else e
    sorts = sort_links(request, _root(request), order)
    # (a store read at most every few seconds: in a thread then, not on the event loop)
    assist = await run_in_threadpool(web.models.get) if web.models.stale() else web.models.get()
    page = dict(title=q[:80], q=q, regex=is_regex, case=is_case, config=config, sorts=sorts, search_assist=assist)
    headers = page_headers()
    if failed is not None:  # the query does not parse, names an unknown context…: known before any result
        if not for_clients(failed):
            log.error("search page: %s: %s", type(failed).__name__, failed)
        message = str(failed) if for_clients(failed) else "an unexpected error occurred"
        error = {"message": message, "position": getattr(failed, "position", None)}
        html = render_text(request, "search.html", error=error, outcome=outcome_script({"error": error}), **page)
        waiting.done()
        return HTMLResponse(html, status_code=failed.status_code, headers=headers)
    html = render_text(request, "search.html", results=Markup(RESULTS_SLOT), outcome=Markup(OUTCOME_SLOT), **page)
    links = Links(root=root, public_url=public_url, query=q, regex=is_regex, case=is_case)
    stream = page_stream(html, started.events(), links, on_close=started.abandon, waiting=waiting)
    # as /api/stream_search: no proxy may hold the parts back (buffering) or re-encode them
    headers |= {"Cache-Control": "no-store, no-transform", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream, media_type="text/html; charset=utf-8", headers=headers)


@router.get("/~/{rest:path}")
def sourcebot_prefix(request: Request, rest: str) -> Response:
    """Sourcebot's single-tenant URLs (``/~/search?query=…``) are ours without the ``/~``."""
    raw = _raw_after(request, "/~/") or urllib.parse.quote(rest, safe="/@")
    raw = raw.lstrip("/\\")  # never "//host" or "/\\host": those leave the site
    query = request.scope.get("query_string", b"").decode("latin-1")
    return RedirectResponse(f"{_root(request)}/{raw}" + (f"?{query}" if query else ""), status_code=308)


@router.get("/repos")
def repos(
    request: Request,
    identity: PageCaller,
    store: StoreDep,
    query: str = Query("", max_length=1000),
    page: str | None = None,
) -> Response:
    if identity is None:
        return login_redirect(request)
    try:
        n = max(1, int(page or 1))
    except ValueError:
        n = 1
    rows, total = (
        ([], 0)
        if store is None
        else page_of_repos(
            store, identity, page=n, per_page=REPOS_PER_PAGE, sort="name", direction="asc", query=query.strip() or None
        )
    )
    active: dict[int | None, str] = {}
    if store is not None and rows:
        for state in (JobState.IN_PROGRESS, JobState.PENDING):
            for job in store.list_jobs(kind=JobKind.INDEX, state=state, limit=10_000):
                active.setdefault(job.repo_id, state)
    root = _root(request)
    items = []
    for row in rows:
        revs = sorted(short_ref(ref) for ref in (row.indexed_revisions or {}))
        items.append(
            {
                "id": row.id,
                "name": row.name,
                "display": row.display_name or row.name,
                "host": row.code_host_type,
                "url": browse_url(root, row.name),
                "external": row.web_url or "",
                "branches": revs,
                "indexed_at": _time(row.indexed_at),
                "indexed_iso": iso(row.indexed_at) or "",
                "status": row.index_status,
                "job": active.get(row.id),
                "error": row.last_error or "",
            }
        )
    last = max(1, -(-total // REPOS_PER_PAGE))

    def page_url(p: int) -> str:
        params = {"page": str(p)}
        if query.strip():
            params["query"] = query.strip()
        return f"{root}/repos?{urllib.parse.urlencode(params)}"

    return _page(
        request,
        "repos.html",
        title="Repositories",
        repos=items,
        total=total,
        page=n,
        last=last,
        query=query,
        prev_url=page_url(n - 1) if n > 1 else None,
        next_url=page_url(n + 1) if n < last else None,
    )


@router.get("/browse/{rest:path}")
def browse(request: Request, rest: str, identity: PageCaller, web: WebDep) -> Response:
    if identity is None:
        return login_redirect(request)
    root = _root(request)
    try:
        repo_name, rev, kind, path = parse_browse(_raw_rest(request, rest))
        tc = web.make_context(identity)
        row = tc.repo(repo_name)
        git_dir = tc.git_dir(row)
        ref = resolve_rev(git_dir, row, rev or tc.default_ref(row))
        if kind == "commits":
            return pages_history.history_page(_page, request, identity, root, tc, row, ref, path)
        if kind == "commit":
            return pages_history.commit_page(_page, request, identity, root, tc, row, resolve_rev(git_dir, row, path))
        if kind == "compare":
            return pages_history.compare_page(
                _page, request, identity, root, tc, row, ref, lambda r: resolve_rev(git_dir, row, r)
            )
        if kind == "blob" and "preview" in request.query_params:  # the results page's preview panel
            return preview.preview_fragment(request, identity, tc, row, ref, path)
        if kind == "blob" and "blame" in request.query_params:
            return pages_history.blame_page(_page, request, identity, root, tc, row, ref, path)
        audit.record(request, identity, "source.read" if kind == "blob" else "tree.read", f"{row.name}:{path}", ref=ref)
        if kind == "blob":
            return _file_page(request, root, tc, row, ref, path)
        return _tree_page(request, root, tc, row, ref, path)
    except RepositoryNotFound as e:
        return _not_found(request, str(e).split(":")[0])
    except MalformedGitRef as e:  # not a ref at all: the address is wrong, not missing
        return _page(
            request,
            "error.html",
            status_code=400,
            title="Bad request",
            status=400,
            heading="Not a revision",
            message=str(e),
        )
    except (FileNotFound, InvalidGitRef) as e:
        return _not_found(request, str(e).split(": use ")[0])
    except CodesearchError as e:
        log.error("browse %s failed: %s", rest, e)
        return _not_found(request, "This page could not be read.", status_code=500)


def _file_page(request: Request, root: str, tc: ToolContext, row: Repo, ref: str, path: str) -> Response:
    check_path(path)
    try:
        f = git_reads.read_file(tc, row, path, ref)
    except FileNotFound:
        if git_reads.path_kind(tc, row, ref, path) == "tree":
            return RedirectResponse(browse_url(root, row.name, ref, "tree", path), status_code=303)
        raise
    data, commit = f.data, f.commit
    info = repo_info(row)
    params = request.query_params
    nav = codenav.nav_config(
        root=root,
        repo=row.name,
        rev=short_ref(ref),
        ref=ref,
        path=path,
        language=f.language,
        git_dir=tc.git_dir(row),
        indexed=row.indexed_revisions,
        q=params.get("q", "")[:2000],
        regex=_flag(params.get("regex")),
        case=_flag(params.get("case")),
    )
    ctx: dict[str, Any] = {
        "nav": nav,
        "title": f"{path} · {row.display_name or row.name}",  # the path whole: files of one name differ
        "repo": row.name,
        "rev": short_ref(ref),
        "commit": commit,
        "path": path,
        "crumbs": _crumbs(root, row.name, ref, path, row.display_name or ""),
        "external": external_url(info, ref, path),
        "repo_url": browse_url(root, row.name, ref),
        "size": len(data),
        "binary": f.is_binary,
        "blame_url": browse_url(root, row.name, ref, "blob", path) + "?blame",
        "history_url": browse_url(root, row.name, ref, "commits", path),
    }
    if ctx["binary"]:
        return _page(request, "file.html", **ctx, lines=[], language="", highlighted=False, total_lines=0)
    text, language = f.text, f.language
    lines, highlighted = highlight.highlight_lines(path, language, text)
    total = len(highlight.split_lines(text.replace("\r\n", "\n")))
    return _page(
        request,
        "file.html",
        **ctx,
        language=language,
        highlighted=highlighted,
        total_lines=total,
        big=len(data) > highlight.MAX_HIGHLIGHT_BYTES or total > highlight.MAX_HIGHLIGHT_LINES,
        lines=[Markup(x) for x in lines],
    )  # escaped by Pygments / markupsafe


def _tree_page(request: Request, root: str, tc: ToolContext, row: Repo, ref: str, path: str) -> Response:
    under = check_dir(path)
    try:
        tree = git_reads.list_tree(tc, row, under, ref, depth=1, max_entries=MAX_TREE_ENTRIES)
    except FileNotFound:
        if under and git_reads.path_kind(tc, row, ref, under) == "blob":
            return RedirectResponse(browse_url(root, row.name, ref, "blob", under), status_code=303)
        raise
    entries, truncated = tree.entries, tree.truncated
    items = [
        {
            "name": e.name,
            "dir": e.is_dir,
            "url": browse_url(root, row.name, ref, "tree" if e.is_dir else "blob", e.path),
        }
        for e in entries
    ]
    items.sort(key=lambda x: (not x["dir"],))  # directories first (list_tree already does; keep it so)
    parent = None
    if under:
        parent = browse_url(root, row.name, ref, "tree", under.rsplit("/", 1)[0] if "/" in under else "")
    branches = sorted(short_ref(x) for x in (row.indexed_revisions or {}))
    display = row.display_name or row.name
    return _page(
        request,
        "tree.html",
        title=f"{under} · {display}" if under else display,
        repo=row.name,
        display=display,
        rev=short_ref(ref),
        path=under,
        crumbs=_crumbs(root, row.name, ref, under, display),
        entries=items,
        truncated=truncated,
        parent=parent,
        external=row.web_url or "",
        branches=branches,
        history_url=browse_url(root, row.name, ref, "commits", under).rstrip("/"),
        compare_url=browse_url(root, row.name, None, "compare", "").rstrip("/"),
        branch_urls=[{"name": b, "url": browse_url(root, row.name, b, "tree", under)} for b in branches],
    )
