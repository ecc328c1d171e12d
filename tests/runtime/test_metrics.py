"""Metrics and request ids (issue 13, part 2).

* On a real Ray instance: searches through real searcher actors, real HTTP requests through
  Serve's proxy to the app in a replica, and real sync and index jobs (one of them failing its
  fetch) make codesearch's metrics appear in Ray's Prometheus export of the node, read over HTTP,
  with our tags and non-zero values; a request's id reaches the searchers it causes.
* Without Ray: route templates, which request ids a client may set, the log filter, Serve's
  proxy keeping one ``X-Request-Id``, and that recording outside Ray does nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import time
import urllib.request
import warnings

import httpx
import pytest

from codesearch.runtime import metrics, request_ids
from codesearch.runtime.shard_searcher import ShardSearcher
from codesearch.search.options import SearchOptions
from codesearch.service.middleware import observability
from codesearch.serving.api import build_app
from tests.conftest import LOCAL

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

#: How long Ray may take to show a recorded value in its export (it reports every few seconds).
EXPORT_DEADLINE_S = 90.0


# ================================================================== without Ray


@pytest.mark.parametrize("value,accepted", [
    ("abc-123", True),
    ("A.b_c-9", True),
    ("x" * 64, True),
    ("x" * 65, False),
    ("", False),
    ("has space", False),
    ("line\nbreak", False),
    ('quote"', False),
    ("ümlaut", False),
    (b"bytes-ok", True),
    (b"\xff\xfe", False),
    (None, False),
])
def test_which_request_ids_a_client_may_set(value, accepted):
    got = request_ids.accept(value)
    assert (got is not None) == accepted
    if accepted:
        assert got == (value.decode() if isinstance(value, bytes) else value)


@pytest.fixture
def recorded(monkeypatch):
    """The HTTP metrics `ObserveRequests` records, captured (not sent to Ray)."""
    calls: list[tuple] = []
    monkeypatch.setattr(metrics, "http_request", lambda *a: calls.append(a))
    return calls


@pytest.fixture
def app(tmp_path):
    from codesearch.store import Store

    store = Store.open(tmp_path / "data")
    yield build_app(lambda: None, get_store=lambda: store, anonymous_access=False, limits={"max_body_bytes": 100})
    store.close()


@pytest.mark.parametrize("method,path,body,route,status", [
    ("GET", "/api/health", None, "/api/health", 200),
    ("GET", "/api/health?x=1", None, "/api/health", 200),
    ("POST", "/api/repos/17/reindex", None, "/api/repos/{repo_id}/reindex", 401),
    ("POST", "/api/search", {"query": "x" * 200}, "/api/search", 413),  # refused before routing
    ("POST", "/api/search", {"query": "foo"}, "/api/search", 401),
    ("GET", "/api/search", None, "/api/search", 405),  # served, not with this method
    ("GET", "/static/style.css", None, "/static", 200),
    ("GET", "/browse/some/repo/-/blob/a.py", None, "/browse/{rest:path}", None),
    ("GET", "/no/such/page/123", None, "unmatched", 404),
    ("PROPFIND", "/api/health", None, "/api/health", 405),
])
def test_requests_are_labelled_by_route_template(app, recorded, method, path, body, route, status):
    with TestClient(app, base_url=LOCAL) as client:
        r = client.request(method, path, json=body, follow_redirects=False)
    if status is not None:
        assert r.status_code == status
    [(got_route, got_method, got_status, seconds)] = recorded
    assert got_route == route
    assert got_method == (method if method != "PROPFIND" else "OTHER")
    assert got_status == r.status_code and seconds >= 0


@pytest.mark.parametrize("sent,kept", [("client-id.1", True), ("x" * 65, False), ("a b", False), (None, False)])
def test_every_response_has_one_request_id(app, recorded, sent, kept):
    with TestClient(app, base_url=LOCAL) as client:
        r = client.get("/api/health", headers={"X-Request-Id": sent} if sent is not None else {})
    ids = r.headers.get_list("x-request-id")
    assert len(ids) == 1
    assert ids[0] == sent if kept else re.fullmatch(r"[0-9a-f]{32}", ids[0])


def test_the_log_filter_names_the_request():
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    logger = logging.getLogger("codesearch.test_metrics")
    handler = Keep()
    handler.addFilter(request_ids.RequestIdFilter())
    logger.addHandler(handler)
    try:
        logger.warning("outside %s", "any request")
        token = request_ids.bind("req-77")
        try:
            logger.warning("inside %s", "a request")
        finally:
            request_ids.reset(token)
    finally:
        logger.removeHandler(handler)
    assert [(r.request_id, r.getMessage()) for r in records] == [
        ("-", "outside any request"), ("req-77", "[request req-77] inside a request")]


def test_install_log_filter_adds_one_filter_per_handler():
    logger = logging.getLogger("codesearch.test_metrics.install")
    handler = logging.NullHandler()
    logger.addHandler(handler)
    try:
        request_ids.install_log_filter(logger)
        request_ids.install_log_filter(logger)
        assert sum(isinstance(f, request_ids.RequestIdFilter) for f in handler.filters) == 1
    finally:
        logger.removeHandler(handler)


def test_a_searcher_logs_a_failed_search_with_its_request_id(caplog):
    searcher = ShardSearcher([])
    with caplog.at_level(logging.WARNING, logger="codesearch.runtime.shard_searcher"):
        with pytest.raises(Exception, match="invalid regular expression"):
            searcher.search("foo(", SearchOptions(is_regex=True), time.time() + 10, request_id="req-bad-1")
    assert any("request req-bad-1" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("sent,kept", [("client-id.1", True), ("bad id", False), (None, False)])
def test_serve_proxy_sends_back_one_request_id(sent, kept):
    """Serve's proxy, with our middlewares, around a replica that answers with the id it got (as
    `ObserveRequests` does): an unsafe client id is replaced before Serve's own request-id
    middleware sees it, and the response carries one ``X-Request-Id``, the one the replica used."""
    from ray.serve._private.http_util import _apply_middlewares

    from codesearch.serving import proxy_errors

    seen = {}

    async def replica(scope, receive, send):
        rid = dict(scope["headers"])[b"x-request-id"]
        seen["rid"] = rid
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-request-id", rid)]})
        await send({"type": "http.response.body", "body": b"{}"})

    sent_messages: list[dict] = []

    async def send(message):
        sent_messages.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    headers = [(b"x-request-id", sent.encode())] if sent is not None else []
    scope = {"type": "http", "method": "GET", "path": "/api/health", "headers": headers, "query_string": b"",
             "root_path": ""}
    asyncio.run(_apply_middlewares(replica, proxy_errors.middlewares())(scope, receive, send))
    ids = [v.decode() for k, v in sent_messages[0]["headers"] if k.lower() == b"x-request-id"]
    assert len(ids) == 1 and ids[0] == seen["rid"].decode() and request_ids.accept(ids[0])
    if kept:
        assert ids[0] == sent


def test_recording_without_ray_does_nothing():
    """In a process without Ray every recording function returns quietly, makes no metric and does
    not import Ray (a process that never imported it cannot be connected)."""
    code = """
import sys
from codesearch.runtime import metrics
from codesearch.search.options import Stats
metrics.http_request("/api/search", "POST", 200, 0.1)
metrics.searcher_query(0, 0.1, Stats(ngramMatches=3, contentBytesLoaded=10))
metrics.searcher_shards(0, 2, 100)
metrics.job_queue({"sync": 1}, {"index": 1}, ("sync", "index"))
metrics.job_finished("index", "completed", 3.0)
metrics.mirror_fetch_error("github")
assert metrics._made == {} and not metrics.ray_ready()
assert "ray" not in sys.modules, "recording imported ray"
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_an_unknown_job_outcome_is_refused():
    with pytest.raises(ValueError, match="unknown job outcome 'weird'"):
        metrics.job_finished("index", "weird", 1.0)


def test_every_metric_is_named_for_prometheus():
    for name, (kind, description, tags, buckets) in metrics.SPECS.items():
        assert re.fullmatch(r"codesearch_[a-z_]+", name) and kind in ("Counter", "Gauge", "Histogram") and description
        assert (buckets is not None) == (kind == "Histogram")
        assert buckets is None or buckets == sorted(buckets)


def _exported(name: str, kind: str) -> str:
    """The name Ray's export gives metric `name` (as the Ray tests below find it)."""
    return {"Counter": f"ray_{name}_total", "Histogram": f"ray_{name}_bucket", "Gauge": f"ray_{name}"}[kind]


def test_the_dashboard_and_the_docs_chart_every_metric_by_its_exported_name():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "grafana-dashboard.json")) as f:
        dashboard = json.load(f)
    with open(os.path.join(root, "docs", "metrics.md")) as f:
        doc = f.read()
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p.get("targets", []))
    assert {v["name"] for v in dashboard["templating"]["list"]} >= {"datasource"}
    for name, (kind, *_rest) in metrics.SPECS.items():
        assert _exported(name, kind) in exprs, name
        assert f"`ray_{name}" in doc, name
    known = {_exported(n, k) for n, (k, *_r) in metrics.SPECS.items()}
    known |= {f"ray_{n}_{suffix}" for n, (k, *_r) in metrics.SPECS.items() if k == "Histogram" for suffix in ("sum", "count")}
    assert set(re.findall(r"ray_codesearch_\w+", exprs)) <= known


# ================================================================== on Ray: the Prometheus export

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _scrape(port: int) -> list[tuple[str, dict, float]]:
    """Ray's Prometheus export of the node, as (name, labels, value) samples."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def _total(samples, name: str, **labels) -> float:
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == want for k, want in labels.items()))


def _export_port(ray) -> int:
    node = next(n for n in ray.nodes() if n["Alive"])
    port = int(node["MetricsExportPort"])
    assert port > 0, node
    return port


def _wait_for_export(ray, checks: dict) -> list:
    """Scrape until every check (name → predicate over the samples) holds, at most
    `EXPORT_DEADLINE_S`; the assertion names those that never did."""
    port = _export_port(ray)
    deadline = time.monotonic() + EXPORT_DEADLINE_S
    while True:
        samples = _scrape(port)
        failing = [what for what, check in checks.items() if not check(samples)]
        if not failing:
            return samples
        assert time.monotonic() < deadline, f"not in Ray's export after {EXPORT_DEADLINE_S:g}s: {failing}"
        time.sleep(1.0)


def _worker_id(actor) -> str:
    import ray

    return ray.get(actor.__ray_call__.remote(lambda self: ray.get_runtime_context().get_worker_id()))


@pytest.fixture(scope="module")
def served(ray_session, serve_url, indexed_corpus):
    """Two searchers and the API behind Serve's proxy (anonymous access), under /metrics-test."""
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    pool = SearcherPool.create(indexed_corpus["index"], 2, name_prefix="cs-metrics")
    serve.run(search_application("cs-metrics", len(pool.actors), anonymous_access=True),
              name="codesearch-metrics", route_prefix="/metrics-test")
    try:
        yield {"url": f"{serve_url}/metrics-test", "pool": pool, "index": indexed_corpus["index"]}
    finally:
        serve.delete("codesearch-metrics")
        pool.close()


def test_searches_and_http_requests_reach_rays_prometheus_export(ray_session, served):
    ray = ray_session
    pool = served["pool"]
    searchers = {_worker_id(a): str(i) for i, a in enumerate(pool.actors)}
    body = {"query": "foo", "matches": 100}
    with httpx.Client(base_url=served["url"], timeout=60) as api:
        r = api.post("/api/search", json=body, headers={"X-Request-Id": "metrics-test-1"})
        assert r.status_code == 200 and r.json()["files"], r.text
        assert r.headers.get_list("x-request-id") == ["metrics-test-1"]  # one header, through Serve's proxy
        r = api.post("/api/stream_search", json=body, headers={"X-Request-Id": "x" * 65})
        assert r.status_code == 200 and '"type":"final"' in r.text
        [rid] = r.headers.get_list("x-request-id")
        assert rid != "x" * 65 and request_ids.accept(rid)
        assert api.get("/api/health").status_code == 200
        assert api.get("/no/such/page/metrics-test").status_code == 404
    pool.search("foo", SearchOptions(matches=100))  # and one search straight from this driver

    def searcher_total(name):
        return lambda s: sum(_total(s, name, WorkerId=w, origin=o) for w, o in searchers.items())

    samples = _wait_for_export(ray, {
        "search requests": lambda s: _total(s, "ray_codesearch_http_requests_total", route="/api/search",
                                            method="POST", status="200") >= 1,
        "streamed searches, timed": lambda s: _total(s, "ray_codesearch_http_request_seconds_count",
                                                     route="/api/stream_search", method="POST", status="200") >= 1,
        "health": lambda s: _total(s, "ray_codesearch_http_request_seconds_bucket", route="/api/health",
                                   method="GET", status="200", le="+Inf") >= 1,
        "unmatched": lambda s: _total(s, "ray_codesearch_http_requests_total", route="unmatched", status="404") >= 1,
        "query seconds": lambda s: searcher_total("ray_codesearch_searcher_query_seconds_count")(s) >= 3,
        "candidates": lambda s: searcher_total("ray_codesearch_searcher_candidate_files_total")(s) > 0,
        "verified bytes": lambda s: searcher_total("ray_codesearch_searcher_verified_bytes_total")(s) > 0,
        "shards": lambda s: all(_total(s, "ray_codesearch_searcher_shards", WorkerId=w, origin=o) >= 1
                                for w, o in searchers.items()),
        "shard bytes": lambda s: all(_total(s, "ray_codesearch_searcher_shard_bytes", WorkerId=w, origin=o) > 0
                                     for w, o in searchers.items()),
    })
    # the searchers' shards are the whole index, and their bytes its files' sizes
    from codesearch.runtime.published import shard_files, shard_spec

    files = [shard_spec(s)[0] for s in shard_files(served["index"])]
    assert sum(_total(samples, "ray_codesearch_searcher_shards", WorkerId=w) for w in searchers) == len(files)
    assert sum(_total(samples, "ray_codesearch_searcher_shard_bytes", WorkerId=w) for w in searchers) == \
        sum(os.path.getsize(f) for f in files)


def test_a_request_id_reaches_the_searchers(ray_session, indexed_corpus, tmp_path):
    """The id of an HTTP request (the client's) is what the searcher actors it causes are told,
    searched and streamed alike; a search outside any request sends none."""
    import ray

    from codesearch.runtime.published import balance, shard_files
    from codesearch.runtime.searchers import SearcherPool
    from codesearch.store import Store

    class RecordingSearcher(ShardSearcher):  # defined here, so that Ray ships it by value
        seen: list = []

        def search(self, query, options, deadline_wall, version=None, request_id=None):
            self.seen.append(request_id)
            return super().search(query, options, deadline_wall, version, request_id)

        def ids(self):
            return list(self.seen)

    groups = balance(shard_files(indexed_corpus["index"]), 2)
    actors = [ray.remote(RecordingSearcher).options(num_cpus=0, max_concurrency=4).remote(g, origin=i)
              for i, g in enumerate(groups)]
    pool = SearcherPool(actors)
    store = Store.open(tmp_path / "data")
    try:
        app = build_app(lambda: pool, get_store=lambda: store, anonymous_access=True)
        with TestClient(app, base_url=LOCAL) as client:
            body = {"query": "foo", "matches": 10}
            assert client.post("/api/search", json=body, headers={"X-Request-Id": "trace-42"}).status_code == 200
            assert client.post("/api/stream_search", json=body, headers={"X-Request-Id": "trace-43"}).status_code == 200
        pool.search("foo", SearchOptions(matches=10))
        pool.search("foo", SearchOptions(matches=10), request_id="given-44")
        for actor in actors:
            assert ray.get(actor.ids.remote()) == ["trace-42", "trace-43", None, "given-44"]
    finally:
        store.close()
        for actor in actors:
            ray.kill(actor, no_restart=True)
        pool.version_watch.close()


def test_jobs_reach_rays_prometheus_export(ray_session, tmp_path):
    """A scheduler tick and real workers in this driver: two sync jobs and two index jobs, one of
    which fails to fetch its repository (nothing listens on its host's port)."""
    import ray

    from codesearch.runtime.scheduler import Scheduler
    from codesearch.runtime.workers import ConnectionSyncer, RepoIndexer, RuntimeOptions
    from codesearch.store import models as m
    from tests.corpus import make_local_repo

    local = tmp_path / "local"
    make_local_repo(str(local / "alpha"), {"alpha.py": "def alpha():\n    return 1\n"})
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"connections": {
        "local": {"type": "git", "url": f"file://{local}/*"},
        "broken": {"type": "git", "url": "https://127.0.0.1:9/nobody/nothing.git"}}}))
    data = str(tmp_path / "data")
    options = RuntimeOptions(poll_s=0.05, heartbeat_s=0.1)
    scheduler = Scheduler(str(config), data, options)
    syncer, indexer = ConnectionSyncer(data, "sync-metrics", options), RepoIndexer(data, "index-metrics", options)
    try:
        out = scheduler.tick()
        assert sorted(out["synced"]) == ["broken", "local"]
        assert scheduler.store.count_jobs() == {(m.SYNC_JOB, m.PENDING): 2}
        while syncer.run_once():
            pass
        while indexer.run_once():
            pass
        assert (syncer.done, indexer.done, indexer.failed) == (2, 1, 1)
        scheduler.tick()  # the failed index job waits for its retry: queued
        assert scheduler.store.count_jobs() == {(m.INDEX_JOB, m.PENDING): 1}
    finally:
        syncer.close()
        indexer.close()
        scheduler.close()

    me = ray.get_runtime_context().get_worker_id()
    _wait_for_export(ray, {
        "index queued": lambda s: _total(s, "ray_codesearch_jobs_queued", WorkerId=me, kind="index") == 1,
        "sync queued": lambda s: any(n == "ray_codesearch_jobs_queued" and l.get("WorkerId") == me
                                     and l.get("kind") == "sync" and v == 0 for n, l, v in s),
        "running": lambda s: any(n == "ray_codesearch_jobs_running" and l.get("WorkerId") == me
                                 for n, l, v in s),
        "syncs completed": lambda s: _total(s, "ray_codesearch_jobs_finished_total", WorkerId=me, kind="sync",
                                            outcome="completed") >= 2,
        "index completed": lambda s: _total(s, "ray_codesearch_jobs_finished_total", WorkerId=me, kind="index",
                                            outcome="completed") >= 1,
        "index failed": lambda s: _total(s, "ray_codesearch_jobs_finished_total", WorkerId=me, kind="index",
                                         outcome="failed") >= 1,
        "durations": lambda s: _total(s, "ray_codesearch_job_seconds_count", WorkerId=me, kind="index",
                                      outcome="failed") >= 1
        and _total(s, "ray_codesearch_job_seconds_sum", WorkerId=me, kind="index") > 0,
        "fetch errors": lambda s: _total(s, "ray_codesearch_mirror_fetch_errors_total", WorkerId=me,
                                         host="git") >= 1,
    })
