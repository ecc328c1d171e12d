"""The HTTP API on real Ray Serve, over real HTTP on 127.0.0.1: results equal the engine's,
and every error has the SPEC §5 shape."""

from __future__ import annotations

import socket

import httpx
import pytest

from codesearch.runtime.searchers import SearcherPool
from tests.oracle import engine_spans


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def api(ray_session, indexed_corpus):
    from ray import serve

    from codesearch.service.deployment import search_application

    pool = SearcherPool.create(indexed_corpus["index"], 2, name_prefix="cs-api-searcher")
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(search_application("cs-api-searcher", len(pool.actors), replicas=2), name="codesearch", route_prefix="/")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        yield client
    serve.delete("codesearch")
    pool.close()


@pytest.mark.parametrize("body", [
    {"query": "foo", "matches": 1000000},
    {"query": "rev:* handler", "matches": 1000000, "contextLines": 2},
    {"query": r"def \w+", "matches": 5, "isRegexEnabled": True},
    {"query": "Foo", "matches": 1000000, "isCaseSensitivityEnabled": True, "whole": True},
    {"query": "sym:Handler", "matches": 1000000},
])
def test_search_equals_engine(api, indexed_corpus, body):
    r = api.post("/api/search", json=body)
    assert r.status_code == 200, r.text
    got = r.json()
    want = indexed_corpus["searcher"].search(body["query"], matches=body["matches"], context_lines=body.get("contextLines", 0),
                                             whole=body.get("whole", False), is_regex=body.get("isRegexEnabled", False),
                                             case_sensitive=body.get("isCaseSensitivityEnabled", False))
    assert got["stats"]["actualMatchCount"] == want["stats"]["actualMatchCount"]
    assert got["isSearchExhaustive"] == want["isSearchExhaustive"]
    if body["matches"] > 1000:
        assert engine_spans(got) == engine_spans(want)
        assert sorted(f["webUrl"] for f in got["files"]) == sorted(f["webUrl"] for f in want["files"])


@pytest.mark.parametrize("method,path,kwargs,status,code", [
    ("post", "/api/search", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "x"}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "x", "matches": "10"}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": 5, "matches": 10}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "x", "matches": 10, "bogus": 1}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "x", "matches": 0}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "archived:maybe", "matches": 10}}, 400, "FAILED_TO_PARSE_QUERY"),
    ("post", "/api/search", {"json": {"query": "a(", "matches": 10, "isRegexEnabled": True}}, 400, "FAILED_TO_PARSE_QUERY"),
    ("post", "/api/search", {"json": {"query": "context:nope foo", "matches": 10}}, 404, "SEARCH_CONTEXT_NOT_FOUND"),
    ("get", "/api/nope", {}, 404, "NOT_FOUND"),
])
def test_errors_have_the_spec_shape(api, method, path, kwargs, status, code):
    r = getattr(api, method)(path, **kwargs)
    assert r.status_code == status, r.text
    body = r.json()
    assert body == {"statusCode": status, "errorCode": code, "message": body["message"]} and body["message"]
    assert "Traceback" not in body["message"] and "/work/" not in body["message"]


def test_health_version_openapi(api):
    assert api.get("/api/health").json() == {"status": "ok"}
    assert api.get("/api/version").json()["version"]
    spec = api.get("/api/openapi.json").json()
    assert "/api/search" in spec["paths"]
