"""The engine of insights: one repository's counts of several queries at several points in time.

`count_repository` is the unit of work (a Ray task runs one per repository:
`codesearch.insights.dataset`; the scheduler's refresh runs it for saved insights:
`codesearch.insights.refresh`). Its steps, each in its own module:

1. the commit of the default branch at each point (`history.commits_at`: one ``git rev-list``
   per point), kept once per distinct commit;
2. the distinct (path, blob) pairs of those commits, read once each and written to one
   temporary index whose documents carry the commits they occur in (`snapshot.Snapshot`; a
   new index per 64 commits);
3. every query evaluated once over that index by the search engine, its matches summed per
   commit (`counting.count_plan`), then spread back over the points.

Nothing is re-indexed per commit and no file is read twice, so the cost grows with the
distinct content of the history asked about, not with the number of points. This module never
imports Ray: it runs the same in a notebook, a Ray task and the scheduler.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from codesearch import environment
from codesearch.git.process import Git
from codesearch.index.builder import IndexSettings
from codesearch.index.sources import RepoInfo
from codesearch.insights.counting import count_plan
from codesearch.insights.history import branch_of, commits_at, distinct_commits
from codesearch.insights.snapshot import MAX_COMMITS, Snapshot
from codesearch.insights.spec import InsightQuery, PointCount, check_queries
from codesearch.query import ast
from codesearch.redaction import Scrubber

__all__ = ["REPO_TIMEOUT_S", "RepoTarget", "count_repository", "default_settings"]

#: The time one repository's counts may take (every git call and the counting included).
REPO_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class RepoTarget:
    """A repository to count in: its name (as search results name it, e.g.
    ``github.com/org/repo``), where its git objects are (a bare mirror or a ``.git``
    directory), and the facts ``repo:``/``fork:``/``archived:``/``visibility:`` test. `branch`
    is the full ref to follow (default: what HEAD points to)."""

    name: str
    git_dir: str
    id: int = 0
    archived: bool = False
    fork: bool = False
    public: bool = True
    branch: str | None = None

    def info(self) -> RepoInfo:
        return RepoInfo(name=self.name, id=self.id, archived=self.archived, fork=self.fork, public=self.public)


def default_settings(environ: Mapping[str, str] | None = None) -> IndexSettings:
    """The indexing rules the service applies by default (``ALWAYS_INDEX_FILE_PATTERNS`` from
    `environ`), so that a count is what a search of the commit would find."""
    return IndexSettings(always_index=environment.always_index_patterns(environ))


def count_repository(
    target: RepoTarget,
    queries: Sequence[InsightQuery | str | Mapping[str, Any]],
    dates: Sequence[datetime],
    *,
    settings: IndexSettings | None = None,
    contexts: Mapping[str, set[str]] | None = None,
    timeout_s: float = REPO_TIMEOUT_S,
) -> list[PointCount]:
    """Each query's counts in `target` at each of `dates` (see `PointCount`): rows ordered by
    query, then date. `settings` are the indexing rules (default: `default_settings`);
    `contexts` resolve ``context:`` names. InvalidArgument for a bad query (before any git
    process); GitFailed when git fails or the `timeout_s` passes."""
    checked = check_queries(queries, contexts)
    plans = [q.plan(contexts) for q in checked]
    symbols = any(isinstance(n, ast.Symbol) for p in plans for n in ast.walk(p.query))
    base = settings or default_settings()
    rules = dataclasses.replace(base, ctags=base.ctags and symbols)
    deadline = time.monotonic() + timeout_s
    git = Git(
        git_dir=target.git_dir,
        scrubber=Scrubber.hiding({target.git_dir: "the repository"}),
        timeout_s=timeout_s,
        deadline=deadline,
    )
    branch = target.branch or branch_of(target.git_dir)
    at = commits_at(git, branch, dates) if branch else [None] * len(dates)
    commits = distinct_commits(at)
    found: dict[str, list[tuple[int, int]]] = {c: [] for c in commits}  # commit → (matches, files) per query
    for start in range(0, len(commits), MAX_COMMITS):
        group = commits[start : start + MAX_COMMITS]
        with Snapshot(git, target.info(), group, rules).build() as snap:
            for i, plan in enumerate(plans):
                counts = count_plan(snap.shards, plan, len(group), deadline, f"query {i + 1} in {target.name}")
                for bit, sha in enumerate(group):
                    found[sha].append((counts.matches[bit], counts.files[bit]))
    rows = []
    for i, q in enumerate(checked):
        for when, commit in zip(dates, at, strict=True):
            matches, files = found[commit][i] if commit is not None else (0, 0)
            rows.append(PointCount(i, q.query, target.name, when, commit, matches, files))
    return rows


def count_many(
    targets: Iterable[RepoTarget],
    queries: Sequence[InsightQuery | str | Mapping[str, Any]],
    dates: Sequence[datetime],
    **options: Any,
) -> list[PointCount]:
    """`count_repository` over several repositories, one after the other, in this process."""
    rows: list[PointCount] = []
    for target in targets:
        rows += count_repository(target, queries, dates, **options)
    return rows
