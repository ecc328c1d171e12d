"""Saved insights over HTTP: ``/api/insights`` (codesearch only).

``GET /api/insights``
    The insights the caller may see (a member their own, an owner everyone's), by name, without
    their points: ``[{id, name, userId, queries, repositories, repoFilter, step, since, createdAt,
    refreshedAt, error, points}]`` (``points``: how many are counted).
``POST /api/insights``
    Body ``{name, queries: [string | {query, isRegexEnabled?, isCaseSensitivityEnabled?}],
    repositories?: [full name], repoFilter?: regex, step: day|week|month|quarter|year, since}``.
    201 with the insight; its points are counted by the scheduler within a minute. Errors: 400
    ``INVALID_REQUEST_BODY`` (the body's shape) or ``INVALID_ARGUMENT`` (a query that does not
    parse, naming its position; a limit; a date), 403 ``INSUFFICIENT_PERMISSIONS`` (anonymous),
    404 ``REPOSITORY_NOT_FOUND`` (a repository unknown or hidden from the caller).
``GET /api/insights/{id}``
    The insight and its points: ``points: [{date, matchCounts, fileCounts, repositories:
    [{repository, commit, matchCounts, fileCounts}]}]``, one count per query, over the
    repositories the caller may see now. 404 ``NOT_FOUND`` for an insight the caller may not see.
``GET /api/insights/{id}.csv``
    The same counts as CSV, one row per (date, repository, query), with the columns of
    `codesearch.insights.run_insights`'s Dataset.
``DELETE /api/insights/{id}``
    204; its user or an owner only (404 for anyone else).

The rules (who sees what, the limits, counts over visible repositories) are
`codesearch.insights.saved`'s; this module only parses, shapes and audits.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from codesearch import audit
from codesearch.errors import ServiceUnavailable
from codesearch.insights import saved
from codesearch.search.engine import MAX_QUERY_LENGTH
from codesearch.service.deps import Caller, StoreDep
from codesearch.store import Store
from codesearch.store.models import Insight

router = APIRouter()


class QueryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: StrictStr = Field(min_length=1, max_length=MAX_QUERY_LENGTH)
    isRegexEnabled: StrictBool = False  # noqa: N815
    isCaseSensitivityEnabled: StrictBool = False  # noqa: N815


class CreateInsight(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(min_length=1, max_length=saved.MAX_NAME)
    queries: list[StrictStr | QueryBody] = Field(min_length=1, max_length=saved.MAX_QUERIES)
    repositories: list[StrictStr] = Field(default_factory=list, max_length=saved.MAX_REPOS)
    repoFilter: StrictStr | None = Field(None, max_length=1000)  # noqa: N815
    step: Literal["day", "week", "month", "quarter", "year"] = "month"
    since: StrictStr = Field(min_length=1, max_length=100)


def insight_json(insight: Insight, points: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": insight.id,
        "name": insight.name,
        "userId": insight.user_id,
        "queries": insight.queries,
        "repositories": insight.repos,
        "repoFilter": insight.repo_filter,
        "step": insight.step,
        "since": insight.since.isoformat(),
        "createdAt": insight.created_at.isoformat(),
        "refreshedAt": insight.refreshed_at.isoformat() if insight.refreshed_at else None,
        "error": insight.error,
    }
    if points is not None:
        out["points"] = points
    return out


def view_json(v: saved.InsightView) -> dict[str, Any]:
    return {
        **insight_json(v.insight),
        "points": [
            {
                "date": p.date.isoformat(),
                "matchCounts": p.match_counts,
                "fileCounts": p.file_counts,
                "repositories": [
                    {
                        "repository": r.repository,
                        "commit": r.commit,
                        "matchCounts": r.match_counts,
                        "fileCounts": r.file_counts,
                    }
                    for r in p.repositories
                ],
            }
            for p in v.points
        ],
    }


def _store(store: Store | None) -> Store:
    if store is None:
        raise ServiceUnavailable("this service has no state database: insights cannot be kept")
    return store


@router.get("/api/insights")
def list_insights(identity: Caller, store: StoreDep) -> list[dict[str, Any]]:
    if store is None:
        return []
    return [insight_json(i, len(store.insight_points(i.id))) for i in saved.list_for(store, identity)]


@router.post("/api/insights", status_code=201)
def create_insight(body: CreateInsight, request: Request, identity: Caller, store: StoreDep) -> dict[str, Any]:
    db = _store(store)
    contexts = {c.name: set(c.repo_names) for c in db.list_search_contexts()}
    insight = saved.create(
        db,
        identity,
        name=body.name,
        queries=[q if isinstance(q, str) else q.model_dump() for q in body.queries],
        step=body.step,
        since=body.since,
        repos=body.repositories,
        repo_filter=body.repoFilter,
        contexts=contexts,
    )
    audit.record(request, identity, "insight.create", str(insight.id), name=insight.name)
    return insight_json(insight, 0)


# Before ``/api/insights/{insight_id}``: that route would take "7.csv" for an id and refuse it.
@router.get("/api/insights/{insight_id:int}.csv")
def insight_csv(insight_id: int, request: Request, identity: Caller, store: StoreDep) -> Response:
    v = saved.view(_store(store), identity, insight_id)
    audit.record(request, identity, "insight.read", str(insight_id), format="csv")
    return Response(
        saved.csv_text(v),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="insight-{insight_id}.csv"'},
    )


@router.get("/api/insights/{insight_id:int}")
def get_insight(insight_id: int, request: Request, identity: Caller, store: StoreDep) -> dict[str, Any]:
    v = saved.view(_store(store), identity, insight_id)
    audit.record(request, identity, "insight.read", str(insight_id))
    return view_json(v)


@router.delete("/api/insights/{insight_id:int}", status_code=204)
def delete_insight(insight_id: int, request: Request, identity: Caller, store: StoreDep) -> Response:
    gone = saved.delete(_store(store), identity, insight_id)
    audit.record(request, identity, "insight.delete", str(insight_id), name=gone.name)
    return Response(status_code=204)
