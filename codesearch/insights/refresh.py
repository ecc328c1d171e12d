"""Saved insights get their points: the missing ones of every insight, counted and stored.

An insight's due points are those from its `since` to now, one step apart (the newest
`saved.MAX_POINTS` of them); a refresh counts the ones not stored yet, in one engine call per
repository (so a new insight's whole backlog shares one index of distinct files), and stores
each point with all its counts in one transaction (`Store.add_insight_point`).

The repositories are the insight's scope among those its owner may see now
(`codesearch.insights.scope`), at most `saved.MAX_REPOS`. A repository that fails (its git
objects damaged, its count out of time) is left out of the points counted then, and the
insight's `error` says which and why; a repository without a clone yet is left out silently
(it has no history to count yet).

`InsightRefresher.kick` is what the scheduler's tick calls: it starts one refresh on a thread
of its own unless one is running, so a long count never delays the tick. Without Ray the counts
run on that thread; with Ray (the scheduler actor, which asks for no CPU of its own) each
repository is a Ray task (`codesearch.insights.dataset.counter`), placed where a CPU is free.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from codesearch.index.builder import IndexSettings
from codesearch.insights.dataset import Counter, counter
from codesearch.insights.engine import RepoTarget, count_repository, default_settings
from codesearch.insights.saved import MAX_POINTS, MAX_REPOS
from codesearch.insights.scope import resolve_scope
from codesearch.insights.spec import PointCount, points
from codesearch.permissions import PermissionPolicy, visible_repos
from codesearch.store.models import Insight, InsightCount

if TYPE_CHECKING:
    from codesearch.config.models import Settings
    from codesearch.store import Store

log = logging.getLogger(__name__)

__all__ = ["InsightRefresher", "due_points", "index_settings", "refresh_all", "refresh_insight"]


def index_settings(rules: Settings | None) -> IndexSettings:
    """The indexing rules of the config's `rules` (defaults without), with this process's
    ``ALWAYS_INDEX_FILE_PATTERNS``, as the index workers apply them."""
    base = default_settings()
    if rules is None:
        return base
    return dataclasses.replace(
        base, max_file_size=int(rules.max_file_size), max_trigram_count=int(rules.max_trigram_count)
    )


def due_points(insight: Insight, now: datetime) -> list[datetime]:
    """The points the insight should have by `now`: the newest `MAX_POINTS` from its `since`."""
    if insight.since > now:
        return []
    return points(insight.since, now, insight.step)[-MAX_POINTS:]


def refresh_insight(
    store: Store,
    insight: Insight,
    data_dir: str | None,
    *,
    now: datetime | None = None,
    settings: IndexSettings | None = None,
    contexts: Mapping[str, set[str]] | None = None,
    count: Counter = count_repository,
) -> int:
    """Count and store the insight's missing points; returns how many were added."""
    now = now or store.clock()
    stored = set(store.insight_points(insight.id))
    missing = [d for d in due_points(insight, now) if d not in stored]
    if not missing:
        return 0
    owner = PermissionPolicy(lambda: store).identity(store.get_user(insight.user_id))
    scope = resolve_scope(
        store,
        data_dir,
        names=insight.repos,
        repo_filter=insight.repo_filter,
        visible=visible_repos(owner),
        limit=MAX_REPOS,
    )
    by_date: dict[datetime, list[InsightCount]] = {d: [] for d in missing}
    failures: list[str] = []
    for target in scope.targets:
        try:
            rows = count(target, insight.queries, missing, settings=settings, contexts=contexts)
        except Exception as e:  # noqa: BLE001 - one repository's failure must not stop the others
            failures.append(f"{target.name}: {e}")
            log.warning("insight %d: %s: %s", insight.id, target.name, e)
            continue
        for r in rows:
            by_date[r.date].append(_stored(target, r))
    added = sum(store.add_insight_point(insight.id, d, by_date[d]) for d in missing)
    if failures:
        store.record_insight_error(insight.id, "; ".join(failures)[:2000])
    return added


def _stored(target: RepoTarget, r: PointCount) -> InsightCount:
    return InsightCount(r.date, target.id, target.name, r.query_id, r.commit, r.match_count, r.file_count)


def refresh_all(
    store: Store,
    data_dir: str | None,
    *,
    now: datetime | None = None,
    settings: IndexSettings | None = None,
    count: Counter = count_repository,
    stop: threading.Event | None = None,
) -> dict[int, int]:
    """Refresh every insight (oldest first); returns insight id → points added (those with
    any). An insight whose refresh fails is logged, its error recorded, the others go on."""
    contexts = {c.name: set(c.repo_names) for c in store.list_search_contexts()}
    added: dict[int, int] = {}
    for insight in sorted(store.list_insights(), key=lambda i: i.id):
        if stop is not None and stop.is_set():
            break
        try:
            n = refresh_insight(store, insight, data_dir, now=now, settings=settings, contexts=contexts, count=count)
        except Exception as e:  # noqa: BLE001 - a bad insight must not stop the others
            log.error("insight %d: refresh failed: %s", insight.id, e)
            store.record_insight_error(insight.id, f"refresh failed: {e}"[:2000])
            continue
        if n:
            added[insight.id] = n
    return added


class InsightRefresher:
    """Runs `refresh_all` on a thread of its own, one at a time, at most every `interval_s`
    seconds (see the module docstring). `rules()` returns the config's settings (the index's
    ``maxFileSize`` and ``maxTrigramCount``, so a count is what a search would find)."""

    def __init__(
        self,
        store: Store,
        data_dir: str | None,
        *,
        rules: Callable[[], Settings | None] = lambda: None,
        count: Counter | None = None,
        interval_s: float = 30.0,
    ):
        self.store = store
        self.data_dir = data_dir
        self.rules = rules
        self.count = count
        self.interval_s = interval_s
        self.last: dict[int, int] = {}
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._started = -math.inf
        self._stop = threading.Event()

    def kick(self) -> bool:
        """Start a refresh unless one is running or the last started less than `interval_s`
        ago; True when one started."""
        if self._thread is not None and self._thread.is_alive() or self._stop.is_set():
            return False
        if time.monotonic() - self._started < self.interval_s:
            return False
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="insights-refresh", daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        try:
            self.last = refresh_all(
                self.store,
                self.data_dir,
                settings=index_settings(self.rules()),
                count=self.count or counter(),
                stop=self._stop,
            )
            self.error = None
        except Exception as e:  # noqa: BLE001 - the next tick tries again
            self.error = str(e)
            log.error("insights refresh failed: %s", e)

    def join(self, timeout: float | None = None) -> None:
        """Wait for the running refresh (if any) to end."""
        if self._thread is not None:
            self._thread.join(timeout)

    def close(self, timeout: float | None = 30) -> None:
        """Stop after the insight being counted, and wait for that."""
        self._stop.set()
        self.join(timeout)
