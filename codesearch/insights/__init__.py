"""Insights over history: how often queries match, per repository, at points in time.

"How has the use of the old client library fallen, repository by repository, month by month
since January?" An insight answers with counts: for each query, each repository and each point
(``since``, then one ``step`` after another), the query's matches on the commit the
repository's default branch was at, at that date. Nothing is re-indexed per commit: the
distinct files of all the points are indexed once, in a temporary index whose documents know
the commits they occur in, and each query is evaluated once over it by the search engine.

Layout, bottom up:

* `spec`: the queries (`InsightQuery`), steps and points, the rows (`PointCount`);
* `history`: the commit of the default branch at each date (``git rev-list -1 --before``);
* `snapshot`: the distinct (path, blob) pairs of several commits as one temporary index;
* `counting`: each query evaluated over that index, summed per commit;
* `engine`: `count_repository`, the unit of work (one repository, every query and point);
* `scope`: which repositories of the state store an insight counts in, and their git objects;
* `dataset`: the Ray layer, `run_insights` → a lazy ``ray.data.Dataset`` (one task per
  repository); the only module that imports Ray;
* `refresh`: saved insights (`codesearch.store.insights`) get their missing points, from the
  scheduler's tick.

The HTTP API (``/api/insights``) and the pages (``/insights``) are the service's and the web
UI's; they read what `refresh` stored.
"""

from codesearch.insights.dataset import COLUMNS, run_insights
from codesearch.insights.engine import RepoTarget, count_repository
from codesearch.insights.spec import InsightQuery, PointCount, points

__all__ = ["COLUMNS", "InsightQuery", "PointCount", "RepoTarget", "count_repository", "points", "run_insights"]
