"""A search that sees only some repositories: the filter at the searchers.

A caller who may read only some repositories (`codesearch.permissions.visible_repos`) must get
answers computed as if the others were not in the index at all: not filtered out of a result
afterwards, where a ``matches`` cap could fill with hidden files and the stats (candidates, files
considered, total matches) would still count them. So each searcher restricts its shards before
it evaluates anything (`visible_shards`): the hidden repositories of a shard are tombstoned for
this search (`Shard.with_dead`, the mechanism that hides the old documents of a re-indexed
repository), and a shard that holds hidden repositories only is left out, counted nowhere.

The views are cached per shard and set of hidden repositories (a few per shard, held weakly), so
the document sets of a user's restricted view are computed once, not on every search.
"""

from __future__ import annotations

import threading
import weakref

from codesearch.index.shard import Shard

#: Restricted views kept per shard (the most recent ones).
VIEWS_PER_SHARD = 8

_views: weakref.WeakKeyDictionary[Shard, dict[frozenset[int], Shard]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def visible_shards(shards: list[Shard], visible: frozenset[int] | None) -> list[Shard]:
    """`shards` as a caller who may see only the repositories `visible` (ids) sees them; None:
    every repository, `shards` unchanged."""
    if visible is None:
        return shards
    out = []
    for shard in shards:
        live = {r.id for r in shard.live_repos}
        hidden = frozenset(live - visible)
        if not hidden:
            out.append(shard)
        elif hidden != live:
            out.append(_restricted(shard, hidden))
    return out


def _restricted(shard: Shard, hidden: frozenset[int]) -> Shard:
    with _lock:
        views = _views.setdefault(shard, {})
        view = views.pop(hidden, None)
        if view is None:
            view = shard.with_dead(shard.dead | hidden)
        views[hidden] = view  # most recent last
        while len(views) > VIEWS_PER_SHARD:
            del views[next(iter(views))]
        return view
