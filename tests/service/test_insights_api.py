"""``/api/insights``: saved insights over HTTP, with the permissions and limits of any other route.

In process (the app of `build_app`, no searcher: insights read git and the store), over the world of
tests/insightworld.py: Ann (owner), Bob and Carol (members); alpha is visible to every signed-in
user, beta only to Bob. Points are counted by the refresh the scheduler runs (`refresh_all`), whose
counts are checked against brute force in tests/insights/.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from codesearch.insights.refresh import refresh_all
from codesearch.serving.api import build_app
from tests.conftest import LOCAL
from tests.insightworld import ALPHA_NAME, BETA_NAME, make_service_world

NOW = datetime(2024, 5, 15, tzinfo=UTC)
BODY = {"name": "client migration", "queries": ["oldclient", {"query": r"new\w+", "isRegexEnabled": True}],
        "repositories": [ALPHA_NAME, BETA_NAME], "step": "month", "since": "2024-01-01"}


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    w = make_service_world(str(tmp_path_factory.mktemp("insights-api")))
    store = w["store"]
    app = build_app(lambda: None, get_store=lambda: store, anonymous_access=False, data_dir=w["data"])
    clients = {}
    for who in ("ann", "bob", "carol"):
        _, key = store.create_api_key(w[who].id, "insights")
        clients[who] = TestClient(app, base_url=LOCAL, headers={"Authorization": f"Bearer {key}"})
    w.update(app=app, clients=clients, raw=TestClient(app, base_url=LOCAL))
    yield w
    store.close()


def _made(svc, who="bob", **changes):
    r = svc["clients"][who].post("/api/insights", json={**BODY, **changes})
    assert r.status_code == 201, r.text
    return r.json()


def _refresh(svc):
    refresh_all(svc["store"], svc["data"], now=NOW)


def test_a_member_creates_and_reads_an_insight(svc):
    bob = svc["clients"]["bob"]
    made = _made(svc)
    assert (made["name"], made["step"], made["points"], made["repositories"]) == (
        "client migration", "month", 0, [ALPHA_NAME, BETA_NAME])
    assert made["queries"][1] == {"query": r"new\w+", "isRegexEnabled": True, "isCaseSensitivityEnabled": False}
    _refresh(svc)
    got = bob.get(f"/api/insights/{made['id']}").json()
    assert [p["date"][:10] for p in got["points"]] == ["2024-01-01", "2024-02-01", "2024-03-01", "2024-04-01",
                                                        "2024-05-01"]
    for p in got["points"]:  # totals are the sums of the repositories' counts
        assert p["matchCounts"] == [sum(r["matchCounts"][q] for r in p["repositories"]) for q in range(2)]
    assert {r["repository"] for r in got["points"][-1]["repositories"]} == {ALPHA_NAME, BETA_NAME}
    listed = bob.get("/api/insights").json()
    assert [(i["id"], i["points"]) for i in listed if i["id"] == made["id"]] == [(made["id"], 5)]


def test_another_members_insight_does_not_exist_for_them_and_owners_see_all(svc):
    made = _made(svc, name="bob's")
    carol, ann = svc["clients"]["carol"], svc["clients"]["ann"]
    assert made["id"] not in [i["id"] for i in carol.get("/api/insights").json()]
    for method, path in (("get", ""), ("get", ".csv"), ("delete", "")):
        r = getattr(carol, method)(f"/api/insights/{made['id']}{path}")
        assert (r.status_code, r.json()["errorCode"]) == (404, "NOT_FOUND"), (method, path)
        assert r.json()["message"] == getattr(carol, method)(f"/api/insights/999999{path}").json()["message"].replace(
            "999999", str(made["id"]))
    assert made["id"] in [i["id"] for i in ann.get("/api/insights").json()]
    assert ann.get(f"/api/insights/{made['id']}").status_code == 200


def test_a_repository_the_reader_cannot_see_contributes_nothing(svc):
    made = _made(svc, name="visibility")
    _refresh(svc)
    bob = svc["clients"]["bob"].get(f"/api/insights/{made['id']}").json()
    ann = svc["clients"]["ann"].get(f"/api/insights/{made['id']}").json()  # an owner, without beta's grant
    for pb, pa in zip(bob["points"], ann["points"], strict=True):
        alpha = [r for r in pb["repositories"] if r["repository"] == ALPHA_NAME]
        assert [r["repository"] for r in pa["repositories"]] == [ALPHA_NAME]
        assert pa["matchCounts"] == (alpha[0]["matchCounts"] if alpha else [0, 0])
    assert sum(p["matchCounts"][0] for p in bob["points"]) > sum(p["matchCounts"][0] for p in ann["points"])
    text = svc["clients"]["ann"].get(f"/api/insights/{made['id']}.csv").text
    assert BETA_NAME not in text and ALPHA_NAME in text


def test_the_csv_holds_one_row_per_date_repository_and_query(svc):
    made = _made(svc, name="csv")
    _refresh(svc)
    r = svc["clients"]["bob"].get(f"/api/insights/{made['id']}.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert f'filename="insight-{made["id"]}.csv"' in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert list(rows[0]) == ["query_id", "query", "repository", "date", "commit", "match_count", "file_count"]
    assert len(rows) == 5 * 2 * 2
    got = svc["clients"]["bob"].get(f"/api/insights/{made['id']}").json()
    for row in rows:
        point = next(p for p in got["points"] if p["date"] == row["date"])
        repo = next(x for x in point["repositories"] if x["repository"] == row["repository"])
        assert int(row["match_count"]) == repo["matchCounts"][int(row["query_id"])]
        assert row["commit"] == (repo["commit"] or "")


def test_delete(svc):
    mine = _made(svc, name="to delete")
    theirs = _made(svc, name="owner deletes")
    bob, ann = svc["clients"]["bob"], svc["clients"]["ann"]
    assert bob.delete(f"/api/insights/{mine['id']}").status_code == 204
    assert bob.get(f"/api/insights/{mine['id']}").status_code == 404
    assert ann.delete(f"/api/insights/{theirs['id']}").status_code == 204


@pytest.mark.parametrize(
    "who, changes, status, code, message",
    [
        ("bob", {"queries": ["q"] * 11}, 400, "INVALID_REQUEST_BODY", "queries"),
        ("bob", {"queries": ["ok", "file:"]}, 400, "INVALID_ARGUMENT", "query 2: missing value after file:"),
        ("bob", {"queries": ["ok rev:main"]}, 400, "INVALID_ARGUMENT", "query 1: an insight counts"),
        ("bob", {"queries": [{"query": "(", "isRegexEnabled": True}]}, 400, "INVALID_ARGUMENT", "query 1:"),
        ("bob", {"step": "fortnight"}, 400, "INVALID_REQUEST_BODY", "step"),
        ("bob", {"since": "last tuesday"}, 400, "INVALID_ARGUMENT", "since: cannot read 'last tuesday'"),
        ("bob", {"since": "2099-01-01"}, 400, "INVALID_ARGUMENT", "is in the future"),
        ("bob", {"since": "2019-01-01", "step": "week"}, 400, "INVALID_ARGUMENT", "more than 60 points"),
        ("bob", {"repoFilter": "acme"}, 400, "INVALID_ARGUMENT", "repositories or a repository filter, not both"),
        ("bob", {"repositories": [], "repoFilter": "("}, 400, "INVALID_ARGUMENT", "repository filter '('"),
        ("carol", {}, 404, "REPOSITORY_NOT_FOUND", f"repository '{BETA_NAME}' not found"),
        ("carol", {"repositories": ["example.com/nope"]}, 404, "REPOSITORY_NOT_FOUND", "'example.com/nope' not found"),
        ("bob", {"extra": 1}, 400, "INVALID_REQUEST_BODY", "extra"),
    ],
)
def test_mistakes_are_clear_4xx_errors(svc, who, changes, status, code, message):
    before = len(svc["store"].list_insights())
    r = svc["clients"][who].post("/api/insights", json={**BODY, **changes})
    assert (r.status_code, r.json()["errorCode"]) == (status, code), r.text
    assert message in r.json()["message"]
    assert len(svc["store"].list_insights()) == before


def test_a_hidden_repository_answers_as_an_unknown_one(svc):
    carol = svc["clients"]["carol"]
    hidden = carol.post("/api/insights", json={**BODY, "repositories": [BETA_NAME]}).json()["message"]
    unknown = carol.post("/api/insights", json={**BODY, "repositories": ["example.com/acme/gamma"]}).json()["message"]
    assert hidden.replace(BETA_NAME, "X") == unknown.replace("example.com/acme/gamma", "X")


def test_a_caller_needs_credentials(svc):
    assert svc["raw"].get("/api/insights").status_code == 401
    assert svc["raw"].post("/api/insights", json=BODY).status_code == 401


def test_anonymous_visitors_may_not_create(svc):
    app = build_app(lambda: None, get_store=lambda: svc["store"], anonymous_access=True, data_dir=svc["data"])
    anon = TestClient(app, base_url=LOCAL)
    assert anon.get("/api/insights").json() == []
    r = anon.post("/api/insights", json=BODY)
    assert (r.status_code, r.json()["errorCode"]) == (403, "INSUFFICIENT_PERMISSIONS")


def test_changes_and_reads_are_audited(svc):
    made = _made(svc, name="audited")
    svc["clients"]["bob"].get(f"/api/insights/{made['id']}")
    svc["app"].state.services.audit.flush()
    events = {e.action: e for e in svc["store"].list_audit_events(per_page=500)[0] if e.target == str(made["id"])}
    assert {"insight.create", "insight.read"} <= set(events)
    assert events["insight.create"].actor == "bob@example.com"


def test_the_openapi_document_describes_the_routes(svc):
    paths = svc["clients"]["bob"].get("/api/openapi.json").json()["paths"]
    assert {"/api/insights", "/api/insights/{insight_id}", "/api/insights/{insight_id}.csv"} <= set(paths)
