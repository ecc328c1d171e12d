"""The order of the results page (``sort`` in its URL): relevance, path or recency.

The page's search asks the searchers for that order (``sort``, `codesearch.search.sorting`); the
page links to the same search in each order (``_result_sort.html``), the other parameters of its URL
kept, so an order is a link one can share.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.requests import Request

from codesearch.search.sorting import PATH, RECENCY, RELEVANCE

#: the orders, as the page names them
LABELS = {RELEVANCE: "Relevance", PATH: "Path", RECENCY: "Recently changed"}


def sort_links(request: Request, root: str, current: str) -> list[dict[str, Any]]:
    """One link per order: the page's own URL with ``sort`` set (the default order: without it)."""
    out = []
    for key, label in LABELS.items():
        params = [(k, v) for k, v in request.query_params.multi_items() if k != "sort"]
        if key != RELEVANCE:
            params.append(("sort", key))
        href = f"{root}/search?{urllib.parse.urlencode(params)}"
        out.append({"key": key, "label": label, "href": href, "current": key == current})
    return out
