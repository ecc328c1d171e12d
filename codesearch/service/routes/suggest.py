"""``GET /api/suggest?q=…&kind=…``: what the search bar offers as the user types.

Sourcebot's search bar builds its suggestions in the browser from its list of repositories, a
static list of languages and small searches (``file:`` and symbol searches); it has no
endpoint for them. We answer them in one small endpoint instead, so that the page needs one
request per keystroke pause and every answer is filtered by the caller's permissions on the
server (a repository the caller may not see is never suggested, nor its files or symbols).

``kind`` is one of:

- ``repo``: names of the repositories the caller may see that contain `q` (case-insensitive),
  those starting with it (or whose last path segment does) first;
- ``lang``: language names (`codesearch.search.hints.language_names`) starting with `q`, popular
  ones first, then those containing it;
- ``context``: search contexts whose name contains `q`;
- ``file``: paths of files whose path contains `q` (a ``file:`` search, as the caller);
- ``sym``: names of symbol definitions that start with `q` (a ``sym:`` search, as the caller).

The answer is ``{"kind", "query", "suggestions": [{"value", "label", "detail"}]}``, at most
`limit` (1–50, default 10) suggestions, each unique by value (files: by value and repository,
the detail). An unknown kind or a `q` longer
than 200 characters is a 400 ``INVALID_REQUEST_BODY`` that says which parameter is wrong.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from codesearch.app.search import visible_repo_names
from codesearch.errors import CodesearchError, InvalidRequestBody
from codesearch.permissions import Identity, filter_search_response, visible_repos
from codesearch.search.hints import POPULAR, language_names
from codesearch.search.options import SearchOptions
from codesearch.service.deps import Caller, Services, ServicesDep

KINDS = ("repo", "lang", "context", "file", "sym")
MAX_LIMIT = 50
MAX_Q = 200
#: A suggestion search gives up after this long: suggestions must keep up with typing.
SUGGEST_TIMEOUT_S = 2.0


def _rank_names(names: Iterable[str], q: str, limit: int, first: Sequence[str] = ()) -> list[str]:
    """Names containing `q`: those in `first` that start with it, then the others that start
    with it (or whose last segment does), then the rest; each group in the given order."""
    want = q.lower()
    buckets: list[list[str]] = [[], [], []]
    firsts = {f.lower() for f in first}
    for n in names:
        low = n.lower()
        if want not in low:
            continue
        tail = low.rsplit("/", 1)[-1]
        starts = low.startswith(want) or tail.startswith(want)
        if starts and low in firsts:
            buckets[0].append(n)
        elif starts:
            buckets[1].append(n)
        else:
            buckets[2].append(n)
    if first:
        order = {f.lower(): i for i, f in enumerate(first)}
        buckets[0].sort(key=lambda n: order[n.lower()])
    return (buckets[0] + buckets[1] + buckets[2])[:limit]


router = APIRouter()


def _search_as(services: Services, identity: Identity, query: str, limit: int) -> list[dict[str, Any]]:
    options = SearchOptions(
        matches=max(limit * 4, 20), context_lines=0, visible_repos=visible_repos(identity), timeout_s=SUGGEST_TIMEOUT_S
    )
    get_searcher = services.get_searcher
    assert get_searcher is not None, "api.build_app gives every app its get_searcher"
    try:
        resp: dict[str, Any] = get_searcher().search(query, options=options)
    except CodesearchError:
        return []
    files: list[dict[str, Any]] = filter_search_response(identity, resp).get("files", [])
    return files


def _suggest(services: Services, identity: Identity, kind: str, q: str, limit: int) -> list[dict[str, Any]]:
    get_store = services.get_store
    if kind == "repo":
        names = visible_repo_names(get_store, identity) or []
        return [{"value": n, "label": n, "detail": "repository"} for n in _rank_names(names, q, limit)]
    if kind == "lang":
        return [
            {"value": n, "label": n, "detail": "language"}
            for n in _rank_names(language_names(), q, limit, first=POPULAR)
        ]
    if kind == "context":
        context_names = set((services.contexts or {}).keys())
        store = get_store()
        described: dict[str, str] = {}
        if store is not None:
            for ctx in store.list_search_contexts():
                context_names.add(ctx.name)
                described[ctx.name] = ctx.description or ""
        return [
            {"value": n, "label": n, "detail": described.get(n) or "search context"}
            for n in _rank_names(sorted(context_names), q, limit)
        ]
    if not q:
        return []
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str] | str] = set()
    if kind == "file":
        for f in _search_as(services, identity, f"file:{_quoted_regex(re.escape(q))}", limit):
            path = f["fileName"]["text"]
            if (f["repository"], path) not in seen:
                seen.add((f["repository"], path))
                out.append({"value": path, "label": path, "detail": f["repository"]})
    else:  # sym
        for f in _search_as(services, identity, f"sym:{_quoted_regex('^' + re.escape(q))}", limit):
            for ch in f.get("chunks", []):
                for s in ch.get("symbols", []):
                    name = s.get("symbol") or ""
                    if name and name not in seen and name.lower().startswith(q.lower()):
                        seen.add(name)
                        out.append(
                            {
                                "value": name,
                                "label": name,
                                "detail": f"{s.get('kind') or 'symbol'} · {f['fileName']['text']}",
                            }
                        )
    return out[:limit]


@router.get("/api/suggest")
async def suggest_route(
    identity: Caller,
    services: ServicesDep,
    q: str = Query("", description="what the user typed after the prefix"),
    kind: str = Query(..., description="repo, lang, context, file or sym"),
    limit: int = Query(10, description="at most this many suggestions (1-50)"),
) -> dict[str, Any]:
    if kind not in KINDS:
        raise InvalidRequestBody(f"kind: must be one of {', '.join(KINDS)}, not {kind!r}")
    if len(q) > MAX_Q:
        raise InvalidRequestBody(f"q: at most {MAX_Q} characters, not {len(q)}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequestBody(f"limit: must be between 1 and {MAX_LIMIT}, not {limit}")
    started = time.perf_counter()
    items = await run_in_threadpool(_suggest, services, identity, kind, q, limit)
    return {
        "kind": kind,
        "query": q,
        "suggestions": items,
        "durationMs": round((time.perf_counter() - started) * 1000, 1),
    }


def _quoted_regex(pattern: str) -> str:
    """`pattern` as a quoted prefix value (so spaces and quotes in it stay part of it)."""
    return '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'
