"""The further matches of one file of the results page:
``GET /search/file?q=…&regex=1&case=1&repo=<name>&path=<path>&branch=<ref>``.

The results page shows a few matches of each file (`pages_search.RESULT_FILE_MATCHES`) and says
how many more it has. Its script turns that line into "Show N more matches" (Sourcebot's control:
the rest of the file's matches revealed in the same list, ``static/more-matches.js``), which asks
this route for the file's matches and shows them in place of the first ones. The answer is the
file's ``section.file`` as an HTML fragment, drawn as the page draws its files
(`results_page.render_file`: the same template and snippet highlighter, a highlighting budget of
its own). The page's link to the file page stays the way there without JavaScript.

Permissions: the search is the page's own, `start_search` as the caller (the same parsing, only
the repositories the caller may see), its query narrowed to the one file by ``repo:`` and
``file:`` terms ANDed to it (`narrowed_query`, which checks that the narrowed query means exactly
that). A file of a repository the caller may not see is the 404 of a file without a match.
Audit: a ``search`` record naming the file. Bounded: one file; at most
`results_page.EXPANDED_FILE_MATCHES` match ranges sent (the file's further ones counted, linked to
the file page); highlighting within `snippets.SnippetBudget`; the query as long as the page's.
Signed out: the sign-in redirect, as every page.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.app.search import SearchRequest, start_search
from codesearch.errors import FileNotFound, InvalidArgument, QueryParseError, ServiceUnavailable
from codesearch.query.ast import And, Const, FileName, Node, Repo
from codesearch.query.parser import parse
from codesearch.service.deps import ServicesDep
from codesearch.service.middleware.security_headers import page_headers
from codesearch.sessions import login_redirect
from codesearch.web.deps import PageCaller, WebDep
from codesearch.web.pages_search import RESULT_CONTEXT_LINES
from codesearch.web.results_page import EXPANDED_FILE_MATCHES, MORE_MATCHES_PATH, Links, RepoNames, render_file
from codesearch.web.snippets import SnippetBudget

#: What a regular expression reads as an operator: escaped to match a name as written.
_REGEX_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def regex_literal(text: str) -> str:
    """A regular expression matching exactly `text`, anchored at both ends, written as one word of
    the query language: operators escaped with a backslash, whitespace and quotes as hexadecimal
    escapes (RE2's ``\\x20``), so that it needs no quotes and cannot end a word or open a string."""
    out = ["^"]
    for c in text:
        if c in _REGEX_SPECIAL:
            out.append("\\" + c)
        elif c.isspace() or c in "\"'":
            out.append(f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\x{{{ord(c):x}}}")
        else:
            out.append(c)
    return "".join(out) + "$"


def narrowed_query(query: str, repo: str, path: str, is_regex: bool, case: bool) -> str:
    """`query` ANDed with ``repo:`` and ``file:`` terms matching exactly `repo` and `path`.

    Written as ``query repo:^…$ file:^…$`` (or, for a query with a top-level ``or``,
    ``(query) repo:^…$ file:^…$``), and checked: parsed, it must be the query's own tree with the
    two terms added, so that no text of the query (an unbalanced bracket or quote, a trailing
    backslash) can change what it means. A query that does not parse raises its `QueryParseError`
    (the results page said so already); one that cannot be narrowed so raises `InvalidArgument`."""
    alone = parse(query, is_regex=is_regex, case_sensitive=case)
    repo_re, path_re = regex_literal(repo), regex_literal(path)
    terms = (Repo(repo_re), FileName(path_re, case))
    want: Node = alone if alone == Const(False) else And((*_conjuncts(alone), *terms))
    for written in (f"{query} repo:{repo_re} file:{path_re}", f"({query}) repo:{repo_re} file:{path_re}"):
        try:
            if parse(written, is_regex=is_regex, case_sensitive=case) == want:
                return written
        except QueryParseError:
            continue
    raise InvalidArgument("this query's matches cannot be narrowed to one file: open the file to see them all")


def _conjuncts(node: Node) -> tuple[Node, ...]:
    return node.children if isinstance(node, And) else (node,)


def _flag(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "yes", "on")


def _is_the_file(f: dict[str, Any], repo: str, path: str, branch: str) -> bool:
    """Whether a search result is the file asked for (the narrowed query matches paths without
    regard to case unless the search is case-sensitive; a file on several branches is one result
    per content)."""
    same = f.get("repository") == repo and (f.get("fileName") or {}).get("text") == path
    return same and (not branch or branch in (f.get("branches") or ()))


router = APIRouter(include_in_schema=False)


@router.get(MORE_MATCHES_PATH)
async def file_matches(
    request: Request,
    caller: PageCaller,
    web: WebDep,
    services: ServicesDep,
    q: str = Query(..., min_length=1, max_length=10_000),
    repo: str = Query(..., min_length=1, max_length=1000),
    path: str = Query(..., min_length=1, max_length=4096),
    branch: str = Query("", max_length=1000),
    regex: str | None = None,
    case: str | None = None,
) -> Response:
    """One file's matches for the results page's query, at most `EXPANDED_FILE_MATCHES` (see the
    module docstring)."""
    if caller is None:
        return login_redirect(request)
    is_regex, is_case = _flag(regex), _flag(case)
    query = narrowed_query(q, repo, path, is_regex, is_case)
    audit.record(request, caller, "search", q, regex=is_regex, caseSensitive=is_case, page=True, file=f"{repo}:{path}")
    if services.search is None:
        raise ServiceUnavailable("this service has no searchers")
    body = SearchRequest(
        query=query,
        matches=EXPANDED_FILE_MATCHES,
        contextLines=RESULT_CONTEXT_LINES,
        isRegexEnabled=is_regex,
        isCaseSensitivityEnabled=is_case,
    )
    started = await start_search(services.search, caller, body, file_matches=EXPANDED_FILE_MATCHES)
    names, found = RepoNames(), None
    try:
        async for event in started.events():
            if event.get("type") == "chunk":
                names.learn(event.get("repositoryInfo"))
                mine = [f for f in event.get("files") or () if _is_the_file(f, repo, path, branch)]
                found = found or (mine[0] if mine else None)
            elif event.get("type") == "error":
                message = (event.get("error") or {}).get("message") or "the search failed"
                raise ServiceUnavailable(f"the file's matches could not be searched: {message}")
    finally:
        started.abandon()
    if found is None:  # (also a file of a repository the caller may not see)
        raise FileNotFound("this search has no matches in that file")
    root = request.scope.get("root_path", "").rstrip("/")
    links = Links(root=root, public_url=web.public_url.rstrip("/"), query=q, regex=is_regex, case=is_case)
    html = await run_in_threadpool(render_file, found, links, names, SnippetBudget())
    return HTMLResponse(html, headers=page_headers())
