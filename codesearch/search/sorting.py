"""The orders a search's files can come in (``sort``: docs/http-api.md#sorting).

``relevance`` (the default) is the ranking (`codesearch.search.ranking`): best score first, ties in
index order. ``recency``: the file whose last commit is newest first (`codesearch.index.recency`; a
file whose time is unknown, from an older shard or beyond a walk's bound, comes after every known
one), ties by relevance. ``path``: by repository name, then path (code point order), ties by
relevance. The order is applied before the ``matches`` budget, so the files kept are the first in it
among those found. A search in another order than relevance looks at `options.SORT_WINDOW` matches
(10,000) before it stops early, or at ``matches`` if that is more (`SearchOptions.search_budget`):
when even that is not exhaustive, files it did not reach may come before those kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

if TYPE_CHECKING:
    from codesearch.search.document import FileMatch


class Presented(Protocol):
    """A presented file as the merge sorts it (`codesearch.search.engine.PresentedFile`)."""

    @property
    def score(self) -> int: ...

    @property
    def order(self) -> tuple[int, ...]: ...

    @property
    def file(self) -> dict[str, Any]: ...

    @property
    def time(self) -> int: ...


#: the orders, by the name a request gives them
Sort = Literal["relevance", "path", "recency"]
RELEVANCE: Sort = "relevance"
PATH: Sort = "path"
RECENCY: Sort = "recency"
SORTS: tuple[Sort, ...] = get_args(Sort)


def sort_named(name: str | None) -> Sort:
    """The order called `name`; the default one (relevance) for anything else."""
    for s in SORTS:
        if s == name:
            return s
    return RELEVANCE


def match_key(sort: str) -> Callable[[FileMatch], tuple[Any, ...]]:
    """The sort key of a searcher's matching files (before presentation)."""
    if sort == RECENCY:
        return lambda f: (-f.shard.commit_time(f.doc), -f.score, f.order)
    if sort == PATH:
        return lambda f: (f.shard.repo(f.doc).name, f.shard.doc_path(f.doc), -f.score, f.order)
    return lambda f: (-f.score, f.order)


def presented_key(sort: str) -> Callable[[Presented], tuple[Any, ...]]:
    """The same order over presented files (what the merge of many searchers sorts)."""
    if sort == RECENCY:
        return lambda f: (-f.time, -f.score, f.order)
    if sort == PATH:
        return lambda f: (f.file["repository"], f.file["fileName"]["text"], -f.score, f.order)
    return lambda f: (-f.score, f.order)
