"""The HTTP path around a search does no avoidable work (issue 12).

* `proxy_body.BodyAhead` (Serve's proxies): a small body of a search, MCP or explain request
  travels in the ASGI scope with the request, over real HTTP on 127.0.0.1 (uvicorn, as in Serve's
  proxy); nothing is lost when it does not, and `limits.RequestLimits` hands the app the body once;
* the API answers a search, and identifies a caller who needs no store lookup, without a worker
  thread: with every worker thread of the app's loop taken, those requests are still answered
  (a real `SearcherPool` on Ray behind the app);
* `serve_settings`: what Serve's proxies and the replicas are given.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import warnings

import anyio
import httpx
import pytest

from codesearch.runtime.searchers import SearcherPool
from codesearch.serving import serve_settings
from codesearch.serving.api import build_app
from codesearch.service.auth import UNRESTRICTED, Authenticator
from codesearch.service.middleware.limits import RequestLimits
from codesearch.service.middleware.proxy_body import MAX_BYTES, SCOPE_KEY, WAIT_S, BodyAhead
from codesearch.store import Store
from codesearch.sessions import SESSION_COOKIE
from tests.asgiserver import serving
from tests.conftest import LOCAL

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient


# ------------------------------------------------------------------ a body sent ahead by the proxy


async def _echo(scope, receive, send):
    """What the app behind the proxy's middleware saw: the body in the scope, the body read
    through `receive`, and the next message after it (none: the client still waits)."""
    ahead = scope.get(SCOPE_KEY)
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        more = message.get("more_body", False)
    try:
        after = (await asyncio.wait_for(receive(), 0.2))["type"]
    except asyncio.TimeoutError:
        after = None
    payload = json.dumps({"ahead": None if ahead is None else ahead.decode(), "body": body.decode(),
                          "after": after}).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


@pytest.fixture(scope="module")
def proxies():
    """Two servers on 127.0.0.1: ``proxy``, `BodyAhead` in front of the echo (what a replica's
    app sees through Serve), and ``chain``, `BodyAhead` in front of `RequestLimits` in front of
    the echo (both halves in one process, so the copy of the body Serve would forward comes
    through too)."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(serving(app))
               for name, app in (("proxy", BodyAhead(_echo)), ("chain", BodyAhead(RequestLimits(_echo))))}


def _slow_post(url: str, path: str, body: bytes, pause_s: float) -> dict:
    """POST whose body's second half comes `pause_s` after the first."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                  + body[: len(body) // 2])
        time.sleep(pause_s)
        s.sendall(body[len(body) // 2:])
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


SEARCH = json.dumps({"query": "needle", "matches": 5}).encode()
BIG = json.dumps({"query": "x" * (MAX_BYTES + 1), "matches": 5}).encode()


@pytest.mark.parametrize("name,method,path,body,chunked,ahead", [
    ("a search, sent at once", "POST", "/api/search", SEARCH, False, True),
    ("under a route prefix", "POST", "/anon/api/search", SEARCH, False, True),
    ("a stream search", "POST", "/api/stream_search", SEARCH, False, True),
    ("an MCP call", "POST", "/x/api/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', False, True),
    ("an empty body", "POST", "/api/explain", b"", False, True),
    ("another route", "POST", "/api/other", SEARCH, False, False),
    ("a body over the size", "POST", "/api/search", BIG, False, False),
    ("a body without a length (chunked)", "POST", "/api/search", SEARCH, True, False),
    ("a GET", "GET", "/api/search", b"", False, False),
])
def test_the_proxy_sends_small_bodies_ahead_and_loses_nothing(proxies, name, method, path, body, chunked, ahead):
    with httpx.Client(base_url=proxies["proxy"], timeout=10) as c:
        seen = c.request(method, path, content=iter([body]) if chunked else body or None).json()
    assert seen["body"] == body.decode(), name  # read through `receive` as ever
    assert seen["ahead"] == (body.decode() if ahead else None), name
    assert seen["after"] is None, name


def test_a_body_that_is_late_is_left_to_the_replica(proxies):
    seen = _slow_post(proxies["proxy"], "/api/search", SEARCH, pause_s=WAIT_S * 4)
    assert seen == {"ahead": None, "body": SEARCH.decode(), "after": None}


@pytest.mark.parametrize("name,send", [
    ("sent ahead", lambda url: httpx.post(f"{url}/api/search", content=SEARCH, timeout=10).json()),
    ("read by the replica", lambda url: _slow_post(url, "/api/search", SEARCH, pause_s=WAIT_S * 4)),
    ("chunked", lambda url: httpx.post(f"{url}/api/search", content=iter([SEARCH]), timeout=10).json()),
])
def test_the_app_gets_the_body_once(proxies, name, send):
    """Behind `RequestLimits`, the app reads the body once, however it came; the copy that also
    reaches it through `receive` when the proxy sent it ahead is not read a second time."""
    seen = send(proxies["chain"])
    assert seen["body"] == SEARCH.decode() and seen["after"] is None, name


# ------------------------------------------------------------------ no worker thread where none is needed


async def _take_every_worker_thread() -> list:
    limiter = anyio.to_thread.current_default_thread_limiter()
    holders = [object() for _ in range(int(limiter.total_tokens))]
    for holder in holders:
        await limiter.acquire_on_behalf_of(holder)
    return holders


async def _give_back(holders: list) -> None:
    limiter = anyio.to_thread.current_default_thread_limiter()
    for holder in holders:
        limiter.release_on_behalf_of(holder)


def _answers_within(call, seconds: float):
    """`call()`'s result, or None when it has not returned within `seconds`."""
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("r", call()), daemon=True)
    thread.start()
    thread.join(seconds)
    return out.get("r")


@pytest.fixture(scope="module")
def pool(ray_session, indexed_corpus):
    p = SearcherPool.create(indexed_corpus["index"], 2)
    yield p
    p.close()


def test_a_search_needs_no_worker_thread(pool, tmp_path):
    """With every worker thread of the app's event loop taken (slow sync routes, say), a search
    for a short query without a search context, by a caller with no credentials (anonymous
    access on), is still answered, streamed or not; a route that does need a thread waits (so
    the threads really were all taken)."""
    store = Store.open(tmp_path / "data")
    app = build_app(lambda: pool, get_store=lambda: store, anonymous_access=True)
    body = {"query": "foo", "matches": 10}
    with TestClient(app, base_url=LOCAL) as client:
        want = client.post("/api/search", json=body).json()  # the first one attaches to the searchers
        assert want["files"]
        holders = client.portal.call(_take_every_worker_thread)
        try:
            r = _answers_within(lambda: client.post("/api/search", json=body), 20)
            assert r is not None and r.status_code == 200 and r.json()["files"] == want["files"]
            r = _answers_within(lambda: client.post("/api/stream_search", json=body), 20)
            assert r is not None and r.status_code == 200 and '"type":"final"' in r.text
            waiting = threading.Thread(target=lambda: client.get("/api/repos"), daemon=True)
            waiting.start()
            waiting.join(1.0)
            assert waiting.is_alive()  # a sync route: it waits for a thread
        finally:
            client.portal.call(_give_back, holders)
        waiting.join(20)
        assert not waiting.is_alive()
    store.close()


class _Recorded:
    """The engine's `Searcher`, with the options of every search it was asked for kept."""

    def __init__(self, searcher):
        self.searcher = searcher
        self.options = []

    async def start(self, query, options, request_id=None):
        self.options.append(options)
        return await self.searcher.start(query, options, request_id)

    def search(self, query, *, options):
        self.options.append(options)
        return self.searcher.search(query, options=options)


#: query → the search contexts that travel with it to the searchers
CONTEXTS_SENT = [
    ("handler", set()),
    ("Handler1 lang:python", set()),
    ("context:backend handler", {"backend", "web-ui"}),
]


@pytest.mark.parametrize("query,sent", CONTEXTS_SENT)
def test_only_a_search_that_names_a_context_carries_the_contexts(indexed_corpus, tmp_path, query, sent):
    """The configuration's search contexts (here one of 5,000 repositories) go to the searchers
    with a search only when its query names one: otherwise they are pickled and sent for nothing."""
    recorded = _Recorded(indexed_corpus["searcher"])
    contexts = {"backend": {indexed_corpus["repo_name"]}, "web-ui": {f"git.example.com/r{i}" for i in range(5000)}}
    app = build_app(lambda: recorded, anonymous_access=True, contexts=contexts)
    with TestClient(app, base_url=LOCAL) as client:
        r = client.post("/api/search", json={"query": query, "matches": 10})
        assert r.status_code == 200 and r.json()["files"], r.text
    assert [set(o.contexts) for o in recorded.options] == [sent]


@pytest.mark.parametrize("name,headers,cookie_resolved,needs_thread", [
    ("no credentials", {}, False, False),
    ("a session the session middleware resolved", {"cookie": f"{SESSION_COOKIE}=x"}, True, False),
    ("an API key", {"authorization": "Bearer cs_somekey"}, False, True),
    ("a session cookie nobody resolved yet", {"cookie": f"{SESSION_COOKIE}=x"}, False, True),
])
def test_identifying_a_caller_takes_a_thread_only_for_a_store_lookup(tmp_path, name, headers, cookie_resolved,
                                                                    needs_thread):
    from starlette.requests import Request

    store = Store.open(tmp_path / "data")
    authenticator = Authenticator(lambda: store, anonymous=True)
    scope = {"type": "http", "method": "GET", "path": "/api/repos", "query_string": b"",
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
             "state": {"web_session": None} if cookie_resolved else {}}

    async def identify():
        holders = await _take_every_worker_thread()
        try:
            with anyio.move_on_after(1.0):
                return await authenticator.identify_request_async(Request(scope))
            return "waited for a thread"
        finally:
            await _give_back(holders)

    got = anyio.run(identify)
    assert got == ("waited for a thread" if needs_thread else UNRESTRICTED), name
    store.close()


# ------------------------------------------------------------------ what Serve's processes are given


@pytest.mark.parametrize("level,access_log", [(None, False), ("info", False), ("warn", False), ("debug", True)])
def test_serve_writes_access_logs_only_at_debug(level, access_log):
    environ = {} if level is None else {"SOURCEBOT_LOG_LEVEL": level}
    assert serve_settings.logging_config(environ) == {"enable_access_log": access_log}


def test_serve_settings_keep_what_the_environment_says():
    environ = {"RAY_SERVE_PROXY_USE_GRPC": "0"}
    serve_settings.install_proxy_env(environ)
    assert environ == {"RAY_SERVE_PROXY_USE_GRPC": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
                       "RAY_SERVE_PROXY_HEALTH_CHECK_PERIOD_S": "2", "RAY_task_events_max_num_task_in_gcs": "10000",
                       "RAY_task_events_max_dropped_task_attempts_tracked_per_job_in_gcs": "10000",
                       "FORWARDED_ALLOW_IPS": "none"}
    assert serve_settings.replica_env({}) == {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "MALLOC_ARENA_MAX": "2"}
    assert serve_settings.replica_env({"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "1", "MALLOC_ARENA_MAX": "8"}) == \
        {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "1", "MALLOC_ARENA_MAX": "8"}


def test_the_proxy_answers_in_json_when_reading_a_body_ahead_fails():
    """Serve wraps its proxy in our middlewares in list order (the last outermost): a failure
    while the body is read ahead is answered like any other, in our JSON shape."""
    from ray.serve._private.http_util import _apply_middlewares

    from codesearch.serving import proxy_errors

    async def serve_proxy(scope, receive, send):  # never reached
        raise AssertionError("the request went on")

    async def broken_receive():
        raise ConnectionResetError("the client's connection broke")

    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    app = _apply_middlewares(serve_proxy, proxy_errors.middlewares())
    scope = {"type": "http", "method": "POST", "path": "/api/search", "headers": [(b"content-length", b"20")],
             "query_string": b"", "root_path": ""}
    asyncio.run(app(scope, broken_receive, send))
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 500
    assert json.loads(sent[1]["body"])["errorCode"] == "UNEXPECTED_ERROR"
