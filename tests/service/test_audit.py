"""The audit log (`codesearch.audit`): who searched, read, created or revoked what.

Through the real service (Serve, a browser signed in as each account, API keys over HTTP): sign-ins,
a key created in the web UI, searches and reads are recorded with their actor and request id;
owners read the log (``GET /api/audit``, ``/settings/audit``), members may not; no secret (the key,
a password) is ever in it. Without Ray: the store's filters and paging, retention, the detail
scrubber and a store that fails."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from codesearch.environment import InvalidEnvironmentVariable
from codesearch import audit
from codesearch.audit.log import MAX_TEXT, _clean
from codesearch.service.routes.audit import event_json
from codesearch.store import Store
from tests.webworld import browser, login, page_for, web  # noqa: F401  (pytest fixtures)


def _events(store, deadline_s: float = 20.0, **filters) -> list:
    """The events matching `filters`, waiting for the service's writer (it flushes every 0.5 s)."""
    deadline = time.monotonic() + deadline_s
    while True:
        events, _ = store.list_audit_events(per_page=500, **filters)
        if events or time.monotonic() > deadline:
            return events
        time.sleep(0.2)


def _cookie(page, name: str) -> dict | None:
    return next((c for c in page.context.cookies() if c["name"] == name), None)


# ------------------------------------------------------------------------------ the real service

def test_the_service_records_who_did_what_and_owners_read_it(page_for, web):
    from codesearch import sessions

    store, member, owner = web["store"], web["member"], web["owner"]
    start = datetime.now(timezone.utc)
    # a refused sign-in, then the member signs in and makes a key in the web UI
    wrong = page_for()
    wrong.goto(web["url"] + "/login")
    wrong.fill("input[name=email]", member["email"])
    wrong.fill("input[name=password]", "not-the-password-9f3a")
    wrong.click("button[type=submit]")
    page = page_for(member)
    page.goto(web["url"] + "/settings/keys")
    page.fill("input[name=name]", "audit test key")
    page.click("form.row-form button[type=submit]")
    page.wait_for_selector("#new-key")
    secret = page.input_value("#new-key")
    # a search with that key, over HTTP
    r = httpx.post(f"{web['url']}/api/search", json={"query": "needle_for_audit", "matches": 5},
                   headers={"Authorization": f"Bearer {secret}", "X-Request-Id": "audit-test-req-1"}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["X-Request-Id"] == "audit-test-req-1"

    searched = _events(store, action="search", actor=member["email"], since=start)
    assert [(e.target, e.request_id, e.details.get("regex")) for e in searched] == [
        ("needle_for_audit", "audit-test-req-1", False)]
    assert [e.target for e in _events(store, action="login.failed", since=start)] == [member["email"]]
    assert [e.actor for e in _events(store, action="login", since=start)] == [member["email"]]
    created = _events(store, action="apikey.create", since=start)
    assert [(e.actor, e.details.get("name")) for e in created] == [(member["email"], "audit test key")]
    everything = json.dumps([event_json(e) for e in store.list_audit_events(per_page=500)[0]])
    assert secret not in everything and "not-the-password-9f3a" not in everything

    # owners read it, over HTTP and on a page; members may not
    owner_page = page_for(owner)
    c = _cookie(owner_page, sessions.SESSION_COOKIE)
    with httpx.Client(base_url=web["serve_url"], cookies={c["name"]: c["value"]}, timeout=30) as as_owner:
        got = as_owner.get("/web/api/audit", params={"action": "search", "actor": member["email"],
                                                     "since": start.isoformat()})
        assert got.status_code == 200, got.text
        assert [e["requestId"] for e in got.json()] == ["audit-test-req-1"] and got.headers["X-Total-Count"] == "1"
        paged = as_owner.get("/web/api/audit", params={"perPage": 1, "since": start.isoformat()})
        assert len(paged.json()) == 1 and int(paged.headers["X-Total-Count"]) >= 4
        bad = as_owner.get("/web/api/audit", params={"since": "yesterday"})
        assert bad.status_code == 400 and bad.json()["errorCode"] == "INVALID_ARGUMENT" and "since" in bad.json()["message"]
    denied = httpx.get(f"{web['url']}/api/audit", headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    assert denied.status_code == 403 and denied.json()["errorCode"] == "INSUFFICIENT_PERMISSIONS"
    assert httpx.get(f"{web['url']}/api/audit", timeout=30).status_code == 401

    owner_page.goto(web["url"] + f"/settings/audit?action=apikey.create")
    rows = owner_page.locator("table.audit tbody tr[data-action='apikey.create']")
    assert rows.count() >= 1 and member["email"] in rows.first.inner_text()
    assert owner_page.locator("nav.settings-tabs a[href$='/settings/audit']").count() == 1
    member_view = page.goto(web["url"] + "/settings/audit")
    assert member_view.status == 403


# ------------------------------------------------------------------------------ without Ray

@pytest.fixture()
def store(tmp_path):
    s = Store.open(tmp_path / "data")
    yield s
    s.close()


def test_filters_and_paging(store):
    now = datetime.now(timezone.utc)
    store.add_audit_events([
        {"at": now - timedelta(hours=3), "actor": "a@x", "action": "search", "target": "one"},
        {"at": now - timedelta(hours=2), "actor": "b@x", "action": "apikey.create", "target": "7"},
        {"at": now - timedelta(hours=1), "actor": "a@x", "action": "apikey.revoke", "target": "7"},
        {"at": now, "actor": "cli", "action": "user.create", "target": "c@x"},
    ])
    assert [e.target for e in store.list_audit_events()[0]] == ["c@x", "7", "7", "one"]  # newest first
    assert [e.action for e in store.list_audit_events(action="apikey.")[0]] == ["apikey.revoke", "apikey.create"]
    assert store.list_audit_events(action="apikey")[1] == 0  # an exact action, not a prefix
    assert [e.target for e in store.list_audit_events(actor="a@x")[0]] == ["7", "one"]
    window = store.list_audit_events(since=now - timedelta(hours=2, minutes=1), until=now)[0]
    assert [e.action for e in window] == ["apikey.revoke", "apikey.create"]
    page2, total = store.list_audit_events(page=2, per_page=3)
    assert total == 4 and [e.target for e in page2] == ["one"]
    with pytest.raises(ValueError):
        store.list_audit_events(page=0)


def test_retention_removes_old_events_and_a_failing_store_loses_no_request(store):
    now = datetime.now(timezone.utc)
    store.add_audit_events([{"at": now - timedelta(days=40), "actor": "a@x", "action": "search", "target": "old"}])
    log = audit.AuditLog(lambda: store, retention=30, flush_s=3600)
    log.record(None, "search", "new", regex=True)
    assert log.flush() == 1
    assert [(e.target, e.actor) for e in store.list_audit_events()[0]] == [("new", "anonymous")]

    def broken():
        raise RuntimeError("the database is down")

    failing = audit.AuditLog(broken, flush_s=3600)
    failing.record(None, "search", "lost")  # never raises
    assert failing.flush() == 0


@pytest.mark.parametrize("raw, days", [("", 90), ("0", 0), ("7", 7), (" 365 ", 365)])
def test_retention_from_the_environment(raw, days):
    assert audit.retention_days({audit.RETENTION_ENV: raw}) == days


@pytest.mark.parametrize("raw", ["-1", "1.5", "a week"])
def test_a_bad_retention_is_refused(raw):
    with pytest.raises(InvalidEnvironmentVariable, match=audit.RETENTION_ENV):
        audit.retention_days({audit.RETENTION_ENV: raw})


def test_details_never_carry_secret_looking_fields():
    cleaned = _clean({"query": "x" * 600, "token": "t", "api_key": "k", "password": "p", "authorization": "a",
                            "repo": "r", "count": 3, "nested": {"a": 1}})
    assert set(cleaned) == {"query", "repo", "count", "nested"}
    assert len(cleaned["query"]) == MAX_TEXT and cleaned["nested"] == "{'a': 1}"
