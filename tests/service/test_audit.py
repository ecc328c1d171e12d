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
from codesearch import audit, environment
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
    page = page_for(member, sign_in=True)
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

    asked = []
    idle = audit.AuditLog(lambda: asked.append(1), retention=30, flush_s=3600, prune_every_s=3600)
    assert idle.flush() == 0 and asked == [1]  # the first flush prunes
    assert idle.flush() == 0 and idle.flush() == 0 and asked == [1]  # then, with nothing queued, the store is left alone


SB_RETENTION = "SOURCEBOT_EE_AUDIT_RETENTION_DAYS"


@pytest.mark.parametrize("environ, days", [
    ({}, 180),  # Sourcebot's default
    ({audit.RETENTION_ENV: ""}, 180),
    ({audit.RETENTION_ENV: "0"}, 0),
    ({audit.RETENTION_ENV: "7"}, 7),
    ({audit.RETENTION_ENV: " 365 "}, 365),
    ({SB_RETENTION: "30"}, 30),  # Sourcebot's variable
    ({SB_RETENTION: "0"}, 0),  # Sourcebot: 0 turns pruning off
    ({SB_RETENTION: "30", audit.RETENTION_ENV: "60"}, 60),  # ours wins when both are set
])
def test_retention_from_the_environment(environ, days):
    assert audit.retention_days(environ) == days


@pytest.mark.parametrize("name", [audit.RETENTION_ENV, SB_RETENTION])
@pytest.mark.parametrize("raw", ["-1", "1.5", "a week"])
def test_a_bad_retention_is_refused(name, raw):
    with pytest.raises(InvalidEnvironmentVariable, match=name):
        audit.retention_days({name: raw})


SB_LOGGING = "SOURCEBOT_EE_AUDIT_LOGGING_ENABLED"


@pytest.mark.parametrize("environ, enabled", [
    ({}, True),  # Sourcebot's default: on
    ({SB_LOGGING: ""}, True),
    ({SB_LOGGING: "true"}, True),
    ({SB_LOGGING: " TRUE "}, True),
    ({SB_LOGGING: "false"}, False),
    ({SB_LOGGING: "False"}, False),
])
def test_audit_logging_switch_from_the_environment(environ, enabled):
    assert audit.logging_enabled(environ) is enabled


@pytest.mark.parametrize("raw", ["0", "no", "off", "yes", "flase"])
def test_a_bad_audit_logging_switch_is_refused(raw):
    """On by default: a typo must stop start-up, not silently end the audit trail."""
    with pytest.raises(InvalidEnvironmentVariable, match=f"{SB_LOGGING}={raw!r}: use true"):
        audit.logging_enabled({SB_LOGGING: raw})
    with pytest.raises(InvalidEnvironmentVariable, match=SB_LOGGING):
        environment.check({SB_LOGGING: raw})


def test_with_audit_logging_off_nothing_is_recorded_or_pruned(store):
    now = datetime.now(timezone.utc)
    store.add_audit_events([{"at": now - timedelta(days=400), "actor": "a@x", "action": "search", "target": "old"}])
    off = audit.AuditLog(lambda: store, retention=30, flush_s=3600, prune_every_s=0, enabled=False)
    off.record(None, "search", "new")
    off.start()
    assert off._thread is None  # no writer: nothing to write, nothing may be pruned
    assert off.flush() == 0
    assert [e.target for e in store.list_audit_events()[0]] == ["old"]  # as Sourcebot: kept

    on = audit.AuditLog(lambda: store, retention=30, flush_s=3600, prune_every_s=0)
    on.record(None, "search", "new")
    assert on.flush() == 1
    assert [e.target for e in store.list_audit_events()[0]] == ["new"]  # recorded; the old one pruned


@pytest.mark.parametrize("retention, kept", [
    (30, ["new", "29 days"]),
    (0, ["new", "29 days", "31 days", "400 days"]),  # 0: nothing is ever deleted
])
def test_the_scheduled_prune_removes_old_events_with_nothing_recorded(store, retention, kept):
    """Old rows go on schedule, from the writer thread alone: no event is recorded meanwhile."""
    now = datetime.now(timezone.utc)
    store.add_audit_events([{"at": now - timedelta(days=d), "actor": "a@x", "action": "search", "target": t}
                            for d, t in ((0, "new"), (29, "29 days"), (31, "31 days"), (400, "400 days"))])
    log = audit.AuditLog(lambda: store, retention=retention, flush_s=0.05, prune_every_s=0.1)
    log.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if retention == 0 or len(store.list_audit_events()[0]) == len(kept):
            break
        time.sleep(0.05)
    if retention == 0:
        time.sleep(0.3)  # three prune periods: still all there
    assert [e.target for e in store.list_audit_events()[0]] == kept


def test_pruning_goes_in_batches(store):
    now = datetime.now(timezone.utc)
    store.add_audit_events([{"at": now - timedelta(days=100), "actor": "a@x", "action": "search", "target": str(i)}
                            for i in range(25)] + [{"actor": "a@x", "action": "search", "target": "today"}])
    assert store.prune_audit_events(now - timedelta(days=1), batch=10) == 25
    assert [e.target for e in store.list_audit_events()[0]] == ["today"]


def test_details_never_carry_secret_looking_fields():
    cleaned = _clean({"query": "x" * 600, "token": "t", "api_key": "k", "password": "p", "authorization": "a",
                            "repo": "r", "count": 3, "nested": {"a": 1}})
    assert set(cleaned) == {"query", "repo", "count", "nested"}
    assert len(cleaned["query"]) == MAX_TEXT and cleaned["nested"] == "{'a': 1}"


# ---------------------------------------------------------------- Sourcebot's names (GET /api/ee/audit)

SB_RECORD_KEYS = ["id", "timestamp", "action", "actorId", "actorType", "targetId", "targetType", "sourcebotVersion",
                  "metadata", "orgId"]


@pytest.mark.parametrize("action, target, details, user_id, expected", [
    # (ours, target, details, actor's user id) -> (Sourcebot's action, actorType, targetId, targetType, message)
    ("search", "render branch:HEAD", {"regex": False}, 7,
     ("user.performed_code_search", "user", "1", "org", "render branch:HEAD")),
    ("search", "Widget", {"symbols": "definitions"}, 7, ("user.performed_goto_definition", "user", "1", "org", "Widget")),
    ("search", "Widget", {"symbols": "references"}, 7, ("user.performed_find_references", "user", "1", "org", "Widget")),
    ("source.read", "r:README.md", {}, 7, ("user.fetched_file_source", "user", "1", "org", "r:README.md")),
    ("tree.read", "r:src", {}, 7, ("user.fetched_file_tree", "user", "1", "org", "r:src")),
    ("blame.read", "r:a.py", {}, 7, ("user.fetched_file_blame", "user", "1", "org", "r:a.py")),
    ("repos.list", "", {}, 7, ("user.listed_repos", "user", "1", "org", None)),
    ("chat.ask", "why?", {"chat": "c1"}, 7, ("user.created_ask_chat", "user", "1", "org", "why?")),
    ("login", "a@x", {}, 7, ("user.signed_in", "user", "a@x", "user", None)),
    ("login.sso", "a@x", {"provider": "okta"}, 7, ("user.signed_in", "user", "a@x", "user", None)),
    ("logout", "a@x", {}, 7, ("user.signed_out", "user", "a@x", "user", None)),
    ("apikey.create", "12", {"name": "ci"}, 7, ("api_key.created", "user", "12", "api_key", None)),
    ("apikey.revoke", "12", {}, 7, ("api_key.deleted", "user", "12", "api_key", None)),
    ("user.role", "b@x", {"role": "OWNER"}, 7, ("org.member_promoted_to_owner", "user", "b@x", "user", None)),
    ("user.role", "b@x", {"role": "MEMBER"}, 7, ("org.owner_demoted_to_member", "user", "b@x", "user", None)),
    ("audit.read", "", {}, 7, ("audit.fetch", "user", "1", "org", None)),
    ("mcp.tool", "search_code", {}, None, ("mcp.tool", "anonymous", "search_code", "other", None)),  # no Sourcebot name
])
def test_events_in_sourcebots_words(action, target, details, user_id, expected):
    from codesearch.audit.sourcebot import sourcebot_record
    from codesearch.store.models import AuditEvent

    at = datetime(2025, 6, 17, 22, 48, 8, 914123, tzinfo=timezone.utc)
    event = AuditEvent(id=5, at=at, actor_user_id=user_id, actor="a@x" if user_id else "anonymous", action=action,
                       target=target, details=details, request_id="req-1")
    got = sourcebot_record(event, "9.9.9")
    assert list(got) == SB_RECORD_KEYS
    assert (got["action"], got["actorType"], got["targetId"], got["targetType"], got["metadata"].get("message")) == expected
    assert got["timestamp"] == "2025-06-17T22:48:08.914Z" and got["id"] == "5" and got["orgId"] == 1
    assert got["actorId"] == (str(user_id) if user_id else "anonymous") and got["sourcebotVersion"] == "9.9.9"
    assert got["metadata"]["requestId"] == "req-1" and all(got["metadata"][k] == v for k, v in details.items())


def test_every_action_is_documented():
    from codesearch.audit.sourcebot import SOURCEBOT_ACTIONS

    assert set(SOURCEBOT_ACTIONS) <= set(audit.ACTIONS)
