"""The usage page for owners: ``GET /settings/usage?days=&from=&to=``.

Active users, searches, Ask questions, MCP calls and API-key calls per UTC day over a range (the
last 7, 30, 90 or 365 days, or two dates), counted from the audit log by
`codesearch.audit.usage` (which says what each column counts). Two charts drawn on the server
(`insights_chart.line_chart`: one of the active users, one of the calls, whose numbers are of
another size), the table of every day with the range's totals, and the same numbers as CSV
(``GET /api/usage.csv``, which the session cookie opens) and JSON (``GET /api/usage``). Nothing is
sent anywhere else: the page loads no script and no resource from another site.

Owners only: a member sees a 403 page, a visitor is sent to sign in. A bad range answers the page
with its message (400) and the form as typed. Each view is an audit event (``usage.read``).
With audit logging off (``SOURCEBOT_EE_AUDIT_LOGGING_ENABLED=false``) the page says so above the
numbers: nothing new is counted, only the events recorded before it was turned off.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response

from codesearch import audit, sessions
from codesearch.audit import usage
from codesearch.errors import InvalidArgument
from codesearch.service.deps import ServicesDep, StoreDep
from codesearch.web.deps import PageCaller
from codesearch.web.insights_chart import Series, line_chart, swatch
from codesearch.web.templating import render

router = APIRouter(include_in_schema=False)

#: The columns drawn on the calls chart (the active users have a chart of their own).
CALLS = tuple(c.name for c in usage.COLUMNS)


def _message(request: Request, status_code: int, heading: str, text: str) -> Response:
    return render(request, "message.html", status_code=status_code, title=heading, heading=heading, message=text)


@router.get("/settings/usage")
def usage_page(
    request: Request,
    identity: PageCaller,
    store: StoreDep,
    services: ServicesDep,
    days: str = "",
    first: str = Query("", alias="from"),
    last: str = Query("", alias="to"),
) -> Response:
    user = sessions.current_user(request)
    if user is None or identity is None or identity.user is None:
        return sessions.login_redirect(request)
    if user.role != "OWNER":
        return _message(request, 403, "Owners only", "Only owners can read the usage report.")
    if store is None:
        return _message(request, 503, "Usage is unavailable", "This service runs without a state database.")
    form = {"days": days, "from": first, "to": last}
    try:
        r = usage.parse_range(days or None, first or None, last or None)
    except InvalidArgument as e:
        return render(
            request, "usage.html", status_code=400, title="Usage", section="usage", error=str(e), form=form, **_empty()
        )
    report = usage.usage_report(store, r)
    audit.record(request, identity, "usage.read", f"{r.first.isoformat()}..{r.last.isoformat()}")
    retention = services.audit.retention if services.audit is not None else 0
    context = _context(report, retention)
    context["logging_off"] = services.audit is None or not services.audit.enabled
    return render(request, "usage.html", title="Usage", section="usage", error=None, form=form, **context)


def _empty() -> dict[str, Any]:
    return {
        "presets": usage.PRESETS,
        "labels": usage.LABELS,
        "report": None,
        "users_chart": "",
        "calls_chart": "",
        "legend": [],
        "query": "",
        "retention": "",
        "oldest": "",
        "preset": 0,
        "logging_off": False,
    }


def _context(report: usage.UsageReport, retention: int) -> dict[str, Any]:
    r = report.range
    dates = [datetime.fromisoformat(d["date"]).replace(tzinfo=UTC) for d in report.days]
    span = f"{r.first.isoformat()} to {r.last.isoformat()} (UTC)"
    users_chart = line_chart(
        dates,
        [Series(usage.LABELS["activeUsers"], [d["activeUsers"] for d in report.days])],
        title=f"Active users per day, {span}",
        step="day",
        y_label="Users",
        chart_id="users-chart",
        per="measure",
    )
    calls_chart = line_chart(
        dates,
        [Series(usage.LABELS[k], [d[k] for d in report.days]) for k in CALLS],
        title=f"Calls per day, {span}",
        step="day",
        y_label="Calls",
        chart_id="calls-chart",
        per="kind of call",
    )
    preset = r.days if r.last == usage.today() and r.days in usage.PRESETS else 0
    return {
        **_empty(),
        "report": report,
        "users_chart": users_chart,
        "calls_chart": calls_chart,
        "legend": [(swatch(k), usage.LABELS[name]) for k, name in enumerate(CALLS)],
        "query": urlencode({"from": r.first.isoformat(), "to": r.last.isoformat()}),
        "retention": f"{retention} days" if retention else "forever",
        "oldest": report.oldest_event_at.strftime("%Y-%m-%d %H:%M UTC") if report.oldest_event_at else "",
        "preset": preset,
    }
