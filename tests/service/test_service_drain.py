"""Draining a Serve application: newcomers are refused in our JSON shape, running requests finish,
the wait is bounded, and every way we stop the application drains first.

Real Ray, real Serve, real HTTP on 127.0.0.1. A request is held "running" by sending its body in
two parts and keeping the second back (`Held`): it is inside the replica, counted, until we let
it finish. The searchers serve an empty index, so a finished search is a complete 200 with no files.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import httpx
import pytest

from codesearch.serving import drain

#: Routes a newcomer may call while the application drains: every one is refused alike.
NEWCOMERS = [
    ("GET", "/api/health", None),
    ("POST", "/api/search", {"query": "needle", "matches": 5}),
    ("POST", "/api/stream_search", {"query": "needle", "matches": 5}),
    ("GET", "/api/repos", None),
    ("POST", "/api/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ("GET", "/", None),
    ("GET", "/no/such/page", None),
]


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    base = tmp_path_factory.mktemp("drain")
    tag = uuid.uuid4().hex[:8]
    prefix = f"cs-drain-{tag}"
    pool = SearcherPool.create(str(base / "index"), 1, name_prefix=prefix, keep_empty=True)
    created: list[str] = []

    def deploy(name: str) -> str:
        """Deploy one application called `name` over the module's searchers; its base URL."""
        app = search_application(prefix, 1, anonymous_access=True, data_dir=str(base / "data"),
                                 limits={"body_timeout_s": 120})
        serve.run(app, name=name, route_prefix=f"/{name}")
        created.append(name)
        return f"{serve_url}/{name}"

    yield {"deploy": deploy, "tag": tag}
    for name in created:
        try:
            serve.delete(name)
        except Exception:
            pass
        drain.clear(name)
    pool.close()


@pytest.fixture(scope="module")
def app(world):
    """The application most tests drain (and then `clear`, so that it serves again)."""
    name = f"cs-drain-app-{world['tag']}"
    return name, world["deploy"](name)


class Held:
    """A search whose body is sent in two parts, the second only on `finish()`: meanwhile the
    request is running in the replica. `response` / `error` once it ended."""

    def __init__(self, url: str):
        self.url = url
        self.release = threading.Event()
        self.response: httpx.Response | None = None
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _body(self):
        yield b'{"query": "needle", '
        self.release.wait(120)
        yield b'"matches": 5}'

    def _run(self):
        try:
            self.response = httpx.post(f"{self.url}/api/search", content=self._body(),
                                       headers={"content-type": "application/json"}, timeout=150)
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def finish(self, timeout_s: float = 60) -> None:
        self.release.set()
        self.thread.join(timeout_s)
        assert not self.thread.is_alive(), "the held request never ended"


def _in_flight(name: str) -> int | None:
    """Requests the replicas of `name` report running (None: none reported yet)."""
    reports = drain.reports(name)
    return sum(r["inFlight"] for r in reports) if reports else None


def _wait(predicate, timeout_s: float = 20, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while not (got := predicate()):
        assert time.monotonic() < deadline, f"no {what} after {timeout_s}s"
        time.sleep(0.1)
    return got


def _resume(name: str, url: str) -> None:
    """Lower the flag and wait until the replica serves again (it reads the flag every POLL_S)."""
    drain.clear(name)
    _wait(lambda: _call(url, "GET", "/api/health", None).status_code == 200, what="service after clear")


def _is_refusal(r: httpx.Response) -> bool:
    return r.status_code == 503 and r.json()["errorCode"] == "SERVICE_UNAVAILABLE"


def _call(url: str, method: str, path: str, body) -> httpx.Response:
    return httpx.request(method, url + path, json=body, timeout=30)


def _draining(name: str, timeout_s: float, **kwargs):
    """Run `drain.drain` in a thread; returns (thread, result holder)."""
    out: dict = {}
    thread = threading.Thread(target=lambda: out.setdefault("result", drain.drain(name, timeout_s, **kwargs)),
                              daemon=True)
    thread.start()
    return thread, out


def test_newcomers_are_refused_and_running_requests_finish(app):
    name, url = app
    assert httpx.get(f"{url}/api/health", timeout=30).status_code == 200
    held = Held(url)
    try:
        time.sleep(1.0)  # the held request reaches the replica
        started = time.monotonic()
        thread, out = _draining(name, 60)
        _wait(lambda: _is_refusal(_call(url, "GET", "/api/health", None)), what="refusal")
        _wait(lambda: _in_flight(name) == 1, what="report of the held request alone")
        for method, path, body in NEWCOMERS:
            r = _call(url, method, path, body)
            assert r.status_code == 503, (path, r.status_code, r.text)
            assert r.headers["content-type"] == "application/json"
            assert r.json() == {"statusCode": 503, "errorCode": "SERVICE_UNAVAILABLE", "message": drain.REFUSAL_MESSAGE}
            assert r.headers["retry-after"] == str(drain.RETRY_AFTER_S) and r.headers["connection"] == "close"
        time.sleep(1.0)
        assert thread.is_alive(), f"the drain ended with a request still running: {out}"
    except BaseException:
        drain.clear(name)  # the module's other tests need the application serving
        raise
    finally:
        held.finish()
    assert held.error is None and held.response.status_code == 200, held.error or held.response.text
    answer = held.response.json()
    assert answer["files"] == [] and "stats" in answer
    thread.join(30)
    result = out["result"]
    assert (result.drained, result.replicas, result.reported, result.in_flight) == (True, 1, 1, 0)
    assert result.seconds < time.monotonic() - started + 0.5
    _resume(name, url)
    assert _call(url, "POST", "/api/search", {"query": "needle", "matches": 5}).status_code == 200


@pytest.mark.parametrize("stop", ["timeout", "abort"])
def test_a_drain_is_bounded(app, stop):
    """A request that does not end holds the drain for `timeout_s` at most (or until `abort`)."""
    name, url = app
    held = Held(url)
    try:
        time.sleep(1.0)
        abort = threading.Event()
        if stop == "abort":
            threading.Timer(1.5, abort.set).start()
        result = drain.drain(name, 1.5 if stop == "timeout" else 120, abort=abort)
        assert (result.drained, result.in_flight, result.reported) == (False, 1, 1), result
        assert 1.5 <= result.seconds < 6, result
        assert "1 request still running" in result.describe()
    finally:
        held.finish()
        _resume(name, url)
    assert held.response is not None and held.response.status_code == 200


@pytest.mark.parametrize("flag", [
    {"until": time.time() - 1},   # a drainer that died long ago
    "not a flag",                 # not ours
    {"since": 1},                 # no expiry
])
def test_a_flag_that_is_not_a_live_drain_is_ignored(app, flag):
    from codesearch.runtime import registry

    name, url = app
    registry._call("put", f"drain:{name}", flag, create=True)  # what a drainer would have written, or worse
    try:
        time.sleep(5 * drain.POLL_S)
        assert _call(url, "GET", "/api/health", None).status_code == 200
        assert _call(url, "POST", "/api/search", {"query": "needle", "matches": 5}).status_code == 200
        assert drain.reports(name) == []
    finally:
        drain.clear(name)


def test_drain_of_an_application_without_replicas_ends_at_once(world):
    result = drain.drain(f"cs-drain-none-{world['tag']}", 30)
    assert (result.drained, result.replicas, result.in_flight) == (True, 0, 0) and result.seconds < 5
    drain.clear(f"cs-drain-none-{world['tag']}")


def test_stop_drains_the_application_before_deleting_it(world):
    from ray import serve

    from codesearch.serving.stop import stop

    name = f"cs-drain-rt-{world['tag']}"
    url = world["deploy"](name)
    held = Held(url)
    try:
        time.sleep(1.0)
        out: dict = {}
        stopper = threading.Thread(target=lambda: out.setdefault("killed", stop(
            name, f"cs-drain-nothing-{world['tag']}", 60, gone_timeout_s=5)), daemon=True)
        stopper.start()
        _wait(lambda: _is_refusal(_call(url, "GET", "/api/health", None)), what="refusal")
        time.sleep(1.0)
        assert name in serve.status().applications, "deleted with a request still running"
    finally:
        held.finish()
    assert held.error is None and held.response.status_code == 200, held.error or held.response.text
    stopper.join(60)
    assert not stopper.is_alive() and out["killed"] == []
    assert name not in serve.status().applications
    assert drain.reports(name) == [] and not drain.flag_is_up(name)
