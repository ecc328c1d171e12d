"""The insights pages: a user's saved insights, a form to make one, and each one's chart.

- ``GET /insights``: the insights the user may see (their own; an owner's: everyone's), and the
  form that makes one (name, queries one a line, regex and case switches, the repositories or a
  ``repo:`` filter, the step, the start).
- ``POST /insights``: the form (with its CSRF token); the rules and limits are
  `codesearch.insights.saved`'s, and a mistake answers the page again with its message (400) and
  what was typed, so nothing is lost. Success goes to the insight's page.
- ``GET /insights/<id>``: one line per query over the points (`insights_chart.line_chart`, drawn
  here as SVG), its legend, a table of the counts under it and a link to the CSV
  (``GET /api/insights/<id>.csv``, which the session cookie opens); the counts are over the
  repositories the viewer may see. Another user's insight is a 404 page, as a missing one.
- ``POST /insights/<id>/delete``: its user or an owner.

Only signed-in users have insights: a visitor is sent to sign in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Form, Request, Response
from fastapi.responses import RedirectResponse

from codesearch import audit, sessions
from codesearch.errors import CodesearchError
from codesearch.insights import saved
from codesearch.insights.spec import STEPS
from codesearch.permissions import Identity
from codesearch.service.deps import StoreDep
from codesearch.store import Store
from codesearch.web.deps import PageCaller
from codesearch.web.insights_chart import Series, date_label, line_chart, swatch
from codesearch.web.templating import render

router = APIRouter(include_in_schema=False)


@dataclass
class FormValues:
    """What the form holds (as typed, so a refused form comes back as it was)."""

    name: str = ""
    queries: str = ""
    regex: bool = False
    case: bool = False
    repositories: str = ""
    repo_filter: str = ""
    step: str = "month"
    since: str = field(default_factory=lambda: _a_year_ago())


def _a_year_ago() -> str:
    now = datetime.now(UTC)
    return f"{now.year - 1:04d}-{now.month:02d}-01"


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else ""


def _signed_in(request: Request, identity: Identity | None, store: Store | None) -> tuple[Identity, Store] | Response:
    if identity is None or identity.user_id is None or store is None:
        return sessions.login_redirect(request)
    return identity, store


def _list_page(
    request: Request, identity: Identity, store: Store, values: FormValues, error: str = "", status: int = 200
) -> Response:
    rows = []
    owners: dict[int, str] = {}
    for i in saved.list_for(store, identity):
        if i.user_id != identity.user_id and i.user_id not in owners:
            owners[i.user_id] = store.get_user(i.user_id).email
        rows.append(
            {
                "id": i.id,
                "name": i.name,
                "queries": ", ".join(str(q.get("query", "")) for q in i.queries),
                "step": i.step,
                "since": f"{i.since:%Y-%m-%d}",
                "points": len(store.insight_points(i.id)),
                "owner": owners.get(i.user_id, ""),
                "error": bool(i.error),
            }
        )
    return render(
        request,
        "insights.html",
        status_code=status,
        title="Insights",
        insights=rows,
        form=values,
        error=error,
        steps=STEPS,
        limits={"queries": saved.MAX_QUERIES, "repos": saved.MAX_REPOS, "points": saved.MAX_POINTS},
    )


@router.get("/insights")
def insights_page(request: Request, identity: PageCaller, store: StoreDep) -> Response:
    signed = _signed_in(request, identity, store)
    if isinstance(signed, Response):
        return signed
    return _list_page(request, *signed, FormValues())


@router.post("/insights")
def create_insight(
    request: Request,
    identity: PageCaller,
    store: StoreDep,
    csrf_token: str = Form(""),
    name: str = Form("", max_length=saved.MAX_NAME * 2),
    queries: str = Form("", max_length=50_000),
    regex: str = Form(""),
    case: str = Form(""),
    repositories: str = Form("", max_length=50_000),
    repo_filter: str = Form("", max_length=1000),
    step: str = Form("month", max_length=20),
    since: str = Form("", max_length=100),
) -> Response:
    signed = _signed_in(request, identity, store)
    if isinstance(signed, Response):
        return signed
    caller, db = signed
    sessions.require_csrf(request, csrf_token)
    values = FormValues(name, queries, bool(regex), bool(case), repositories, repo_filter.strip(), step, since)
    bodies = [
        {"query": q, "isRegexEnabled": values.regex, "isCaseSensitivityEnabled": values.case} for q in _lines(queries)
    ]
    try:
        insight = saved.create(
            db,
            caller,
            name=name,
            queries=bodies,
            step=step,
            since=since,
            repos=_lines(repositories),
            repo_filter=values.repo_filter or None,
            contexts={c.name: set(c.repo_names) for c in db.list_search_contexts()},
        )
    except CodesearchError as e:
        if e.status_code >= 500:
            raise
        return _list_page(request, caller, db, values, error=str(e), status=400)
    audit.record(request, caller, "insight.create", str(insight.id), name=insight.name)
    root = sessions.root_of(request.scope)
    return RedirectResponse(f"{root}/insights/{insight.id}", status_code=303)


@router.get("/insights/{insight_id:int}")
def insight_page(insight_id: int, request: Request, identity: PageCaller, store: StoreDep) -> Response:
    signed = _signed_in(request, identity, store)
    if isinstance(signed, Response):
        return signed
    caller, db = signed
    v = saved.view(db, caller, insight_id)  # NotFound: the 404 page, as for a missing insight
    audit.record(request, caller, "insight.read", str(insight_id))
    insight = v.insight
    dates = [p.date for p in v.points]
    labels = [_query_label(q) for q in insight.queries]
    series = [Series(labels[k], [p.match_counts[k] for p in v.points]) for k in range(len(labels))]
    chart = line_chart(dates, series, title=insight.name, step=insight.step, chart_id="insight-chart") if dates else ""
    owner = "" if insight.user_id == caller.user_id else db.get_user(insight.user_id).email
    context: dict[str, Any] = {
        "insight": insight,
        "chart": chart,
        "legend": [(swatch(k), label) for k, label in enumerate(labels)],
        "labels": labels,
        "rows": [
            {
                "date": date_label(p.date, insight.step),
                "iso": p.date.isoformat(),
                "counts": p.match_counts,
                "repos": len(p.repositories),
            }
            for p in v.points
        ],
        "owner": owner,
        "scope": ", ".join(insight.repos) if insight.repos else (insight.repo_filter or ""),
        "refreshed": _when(insight.refreshed_at),
    }
    return render(request, "insight.html", title=insight.name, **context)


def _query_label(q: dict[str, Any]) -> str:
    flags = [f for f, on in (("regex", q.get("isRegexEnabled")), ("case", q.get("isCaseSensitivityEnabled"))) if on]
    text = str(q.get("query", ""))
    return text + (f" ({', '.join(flags)})" if flags else "")


@router.post("/insights/{insight_id:int}/delete")
def delete_insight(
    insight_id: int, request: Request, identity: PageCaller, store: StoreDep, csrf_token: str = Form("")
) -> Response:
    signed = _signed_in(request, identity, store)
    if isinstance(signed, Response):
        return signed
    caller, db = signed
    sessions.require_csrf(request, csrf_token)
    gone = saved.delete(db, caller, insight_id)  # NotFound: the 404 page
    audit.record(request, caller, "insight.delete", str(insight_id), name=gone.name)
    return RedirectResponse(f"{sessions.root_of(request.scope)}/insights", status_code=303)
