"""Sourcebot's public API, route by route, against `codesearch serve`: a client written for Sourcebot
works unchanged.

The facts are in tests/data/sourcebot_public_api.json, written down from Sourcebot's public OpenAPI
document (v5.1.9): its 19 paths (20 operations), each with the status codes it documents and the
schema of each response (required keys and their types, as JSON Schema). Each operation carries
requests as Sourcebot's docs and clients send them (the API key in ``X-Sourcebot-Api-Key`` or as a
Bearer token, JSON bodies with their content type) and the status Sourcebot documents for them.
Every case runs over real HTTP against a real `codesearch serve` process on one small repository;
its status must be the documented one and its body must match the documented schema (extra keys
are allowed, as in the document). The operations our app does not serve yet are skipped with the
branch they land with.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from jsonschema import Draft7Validator

from tests.corpus import git, make_local_repo
from tests.service.test_serve_cli import ONE_WORKER_EACH, Served, _cli

FACTS = json.loads((Path(__file__).parent.parent / "data" / "sourcebot_public_api.json").read_text())
OPERATIONS = {op["operationId"]: op for op in FACTS["operations"]}
#: Operations another branch is building: skipped while our app has no such route.
LANDS_WITH = {"createScopedAccessToken": "admin", "revokeScopedAccessToken": "admin", "getUser": "admin",
              "deleteUser": "admin", "listUsers": "admin"}

OWNER, MEMBER, DOOMED = "owner@example.com", "member@example.com", "leaving@example.com"
WIDGET = "class Widget:\n    def handler(self):\n        return 'foo widget'\n"
FILES = {"README.md": "# widgets\n\nfoo widgets\n", "src/widget.py": WIDGET,
         "src/use.py": "from widget import Widget\n\nWidget().handler()\n"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("sbtable")
    repo = make_local_repo(str(root / "repos" / "widgets"), FILES)
    git(repo, "checkout", "-q", "-b", "feature")
    Path(repo, "src", "widget.py").write_text(WIDGET.replace("foo widget", "foo feature"))
    git(repo, "commit", "-q", "-am", "feature: another answer")
    git(repo, "checkout", "-q", "main")
    config = root / "config.json"
    config.write_text(json.dumps({"settings": ONE_WORKER_EACH,
                                  "connections": {"local": {"type": "git", "url": f"file://{root / 'repos'}/*"}}}))
    (root / "data").mkdir()
    served = Served(root / "data", searchers=1, CONFIG_PATH=str(config))
    try:
        served.wait_healthy()
        for email in (OWNER, MEMBER, DOOMED):  # the first account is the owner
            subprocess.run([sys.executable, "-m", "codesearch.cli", "users", "create", email], env=served.env,
                           check=True, capture_output=True, timeout=60)
        owner_key = _cli("keys", "create", "--user", OWNER, env=served.env).strip()
        member_key = _cli("keys", "create", "--user", MEMBER, env=served.env).strip()
        http = httpx.Client(base_url=served.base, timeout=60)
        as_owner = {"X-Sourcebot-Api-Key": owner_key}
        repos = http.get("/api/repos", headers=as_owner).json()
        connections = http.get("/api/connections", headers=as_owner).json()
        ours = http.get("/api/openapi.json").json()["paths"]
        yield {"http": http, "owner_key": owner_key, "member_key": member_key, "repos": repos,
               "connections": connections, "served": served,
               "routes": {(m.upper(), re.sub(r"\{[^}]*\}", "{}", p)) for p, ms in ours.items() for m in ms}}
    finally:
        served.stop()


def _fill(value, values: dict[str, object]):
    """`value` with its ``{placeholders}`` filled (a string that is one placeholder becomes the value itself)."""
    if isinstance(value, str):
        m = re.fullmatch(r"\{(\w+)\}", value)
        if m and m.group(1) in values:
            return values[m.group(1)]
        return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), value)
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    return value


def _credentials(world, caller: str) -> dict[str, str]:
    return {"apiKey": {"X-Sourcebot-Api-Key": world["owner_key"]},
            "bearer": {"Authorization": f"Bearer {world['owner_key']}"},
            "member": {"X-Sourcebot-Api-Key": world["member_key"]},
            "anonymous": {}}[caller]


def _values(world, op_id: str) -> dict[str, object]:
    """What the placeholders of `op_id`'s cases stand for in this world."""
    repo = world["repos"][0]
    values: dict[str, object] = {"repo": repo["repoName"], "repoId": repo["repoId"],
                                 "connectionId": world["connections"][0]["id"]}
    if op_id in ("getUser", "deleteUser"):
        users = world["http"].get("/api/ee/users", headers=_credentials(world, "apiKey")).json()
        ids = {u.get("email"): u.get("id") for u in users}
        values.update(memberId=ids[MEMBER], doomedUserId=ids.get(DOOMED, "deleted-already"))
    if op_id == "revokeScopedAccessToken":
        created = world["http"].post("/api/ee/scoped_access_token", json={"repoIds": [repo["repoId"]]},
                                     headers=_credentials(world, "apiKey"))
        assert created.status_code == 201, created.text
        values["scopedTokenId"] = created.json()["id"]
    return values


def _schema(schema: dict) -> Draft7Validator:
    """A validator of `schema`, whose ``#/schemas/...`` references point into the facts' schemas."""
    return Draft7Validator({**copy.deepcopy(schema), "schemas": FACTS["schemas"]})


CASES = [(op["operationId"], case["name"]) for op in FACTS["operations"] for case in op["cases"]]


@pytest.mark.parametrize("op_id, case_name", CASES, ids=[f"{o}-{c}" for o, c in CASES])
def test_sourcebot_request_gets_sourcebots_answer(world, op_id, case_name):
    op = OPERATIONS[op_id]
    case = next(c for c in op["cases"] if c["name"] == case_name)
    if (op["method"], re.sub(r"\{[^}]*\}", "{}", op["path"])) not in world["routes"]:
        assert op_id in LANDS_WITH, f"{op['method']} {op['path']}: no such route"
        pytest.skip(f"route lands with branch {LANDS_WITH[op_id]}")
    values = _values(world, op_id)
    path = op["path"]
    for name, value in _fill(case.get("pathParams", {}), values).items():
        path = path.replace("{" + name + "}", str(value))
    headers = {**_credentials(world, case["caller"]), **case.get("headers", {})}
    kwargs: dict = {"params": _fill(case.get("query"), values), "headers": headers}
    if "json" in case:
        kwargs["content"] = json.dumps(_fill(case["json"], values))
    r = world["http"].request(op["method"], path, **kwargs)

    assert r.status_code == case["status"], (r.status_code, r.text[:500])
    fact = op["responses"][str(case["status"])]
    if fact["body"] is None:  # 204: nothing
        assert r.content == b""
    else:
        assert r.headers["content-type"].split(";")[0] == fact["body"]["contentType"]
        errors = sorted(_schema(fact["body"]["schema"]).iter_errors(r.json()), key=lambda e: list(e.absolute_path))
        assert not errors, [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]]
    for header in fact["headers"]:
        if header != "Link":  # only when there is more than one page (checked where the listings are tested)
            assert header.lower() in r.headers, header


def test_the_facts_cover_sourcebots_public_api():
    """The 19 paths of the document, each documented status of an operation with a case (but 500)."""
    assert len({op["path"] for op in FACTS["operations"]}) == 19 and len(OPERATIONS) == 20
    for op in FACTS["operations"]:
        tried = {str(c["status"]) for c in op["cases"]}
        assert tried <= set(op["responses"]), op["operationId"]
        assert any(s.startswith("2") for s in tried), op["operationId"]


def test_robots_txt_turns_crawlers_away(world):
    r = world["http"].get("/robots.txt")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    groups = [g.splitlines() for g in r.text.strip().split("\n\n")]
    assert groups[-1] == ["User-Agent: *", "Disallow: /"]
    assert "User-Agent: Slackbot" in groups[0] and groups[0][-1] == "Allow: /"
