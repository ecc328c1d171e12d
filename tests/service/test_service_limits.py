"""A service that slow searchers, dead searchers and hostile clients cannot stall or break.

Real Ray, real Serve, real HTTP on 127.0.0.1, real sockets for the slow clients. One small
index of two repositories (two shards, so two searcher partitions):

* ``alpha``: files with ``needle`` and files whose long runs of ``a`` make the backtracking
  regex `SLOW_REGEX` (a back-reference: the `regex` fallback, not RE2) run out of its per-file
  budget on every one of them;
* ``beta``: files with ``needle``.

Applications (each over its own named searchers): ``/lim`` (API keys required), ``/lim-anon``
(anonymous access on), ``/stall`` (partition 1 is a searcher that sleeps far past every
deadline), ``/kill`` (searchers we kill with SIGKILL). Each app answers a search after
`SEARCH_TIMEOUT_S` and gives a body `BODY_TIMEOUT_S` to arrive, so that these tests stay short.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import httpx
import pytest

from codesearch.runtime import NAMESPACE
from codesearch.runtime.published import balance, publish_layout, shard_files
from codesearch.runtime.searchers import SearcherPool
from codesearch.runtime.shard_searcher import ShardSearcher
from codesearch.search.engine import Searcher
from codesearch.search.options import SearchOptions
from codesearch.store import Store
from tests.corpus import make_local_repo
from tests.oracle import engine_spans
from tests.conftest import LOCAL

SEARCH_TIMEOUT_S = 3.0
BODY_TIMEOUT_S = 6.0  # long enough that a loaded CI machine answers a search inside it
SLOW_REGEX = r"((?:a|aa)+)\1b"
SLOW_FILES = 10
LIMITS = {"body_timeout_s": BODY_TIMEOUT_S, "max_body_bytes": 64 * 1024}


def _repo_files(name: str) -> dict[str, str]:
    files = {f"src/{name}_{i}.py": f"def needle_{name}_{i}():\n    return 'needle {name}'\n" for i in range(6)}
    if name == "alpha":
        files.update({f"runs/run_{i}.txt": ("a" * 40 + "!\n") * 3 for i in range(SLOW_FILES)})
    return files


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    import ray
    from ray import serve

    from codesearch.index.builder import index_source
    from codesearch.index.sources import GitSource, RepoInfo
    from codesearch.serving.deployment import search_application
    from tests.conftest import test_settings as index_settings

    base = tmp_path_factory.mktemp("limits")
    data_dir = str(base / "data")
    store = Store.open(data_dir)
    owner = store.create_user("owner@example.com", "Owner")
    _, key = store.create_api_key(owner.id, "tests")
    index_dir = str(base / "index")
    for i, name in enumerate(("alpha", "beta")):
        repo = make_local_repo(str(base / name), _repo_files(name))
        index_source(GitSource(repo, repo=RepoInfo(name=f"git.example.com/t/{name}", id=i + 1)), index_dir, index_settings())
    groups = balance(shard_files(index_dir), 2)
    assert all(groups), "two shards, one per searcher"

    # A searcher that stalls far past every deadline (defined here, so that Ray ships it by value).
    class StallingSearcher(ShardSearcher):
        def search(self, query, options, deadline_wall, version=None, request_id=None):
            time.sleep(max(0.0, deadline_wall - time.time()) + 20)
            return super().search(query, options, deadline_wall, version, request_id)

    stall = [ray.remote(cls).options(name=f"cs-stall-{i}", namespace=NAMESPACE, num_cpus=0, max_concurrency=8)
             .remote(groups[i], origin=i) for i, cls in enumerate((ShardSearcher, StallingSearcher))]
    publish_layout("cs-stall", partitions=2, copies=1)
    SearcherPool(stall, version_key="cs-stall").assign(groups)

    pools = {name: SearcherPool.create(index_dir, 2, name_prefix=f"cs-{name}") for name in ("lim", "kill")}
    common = dict(data_dir=data_dir, search_timeout_s=SEARCH_TIMEOUT_S, limits=LIMITS)
    apps = {"lim": ("cs-lim", False), "lim-anon": ("cs-lim", True), "stall": ("cs-stall", False), "kill": ("cs-kill", False),
            "dying": ("cs-stall", False)}
    serve.run_many([serve.RunTarget(search_application(prefix, 2, anonymous_access=anonymous, **common),
                                    name=f"codesearch-{route}", route_prefix=f"/{route}")
                    for route, (prefix, anonymous) in apps.items()])
    searcher = Searcher(index_dir)
    with httpx.Client(base_url=serve_url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as api:
        yield {"api": api, "url": serve_url, "key": key, "pools": pools, "searcher": searcher, "index": index_dir}
    for route in apps:
        serve.delete(f"codesearch-{route}")
    searcher.close()
    for pool in pools.values():
        pool.close()
    for actor in stall:
        ray.kill(actor, no_restart=True)
    store.close()


def _search(api, prefix: str, query: str, **body):
    r = api.post(f"/{prefix}/api/search", json={"query": query, "matches": 1000, **body})
    assert r.status_code == 200, r.text
    return r.json()


# ------------------------------------------------------------------ searchers that stall or die


def test_a_stalled_searcher_gives_a_partial_answer_not_a_500(world):
    """Partition 1 sleeps past the deadline: the answer comes at the deadline (plus the grace)
    with partition 0's files, `crashes: 1`, its shards as skipped, and not exhaustive."""
    resp = _search(world["api"], "stall", "needle")
    repos = {f["repository"] for f in resp["files"]}
    full = world["searcher"].search("needle", matches=1000)
    assert len(repos) == 1 and repos < {f["repository"] for f in full["files"]}
    assert resp["isSearchExhaustive"] is False
    stats = resp["stats"]
    assert stats["crashes"] == 1 and stats["shardsSkipped"] >= 1
    assert stats["flushReason"] == "FLUSH_REASON_TIMER_EXPIRED"
    # the streamed form says the same in its final event
    r = world["api"].post("/stall/api/stream_search", json={"query": "needle", "matches": 1000})
    events = [json.loads(line[6:]) for line in r.text.split("\n") if line.startswith("data: {")]
    final = events[-1]
    assert final["type"] == "final" and final["isSearchExhaustive"] is False
    assert final["accumulatedStats"]["crashes"] == 1


def _pid_of(actor_name: str) -> int:
    import ray

    actor = ray.get_actor(actor_name, namespace=NAMESPACE)
    return ray.get(actor.__ray_call__.remote(lambda self: os.getpid()), timeout=30)


def test_a_killed_searcher_is_replaced_and_serves_its_partition_again(world):
    """SIGKILL one searcher: Ray restarts it, it loads its partition of the published index
    version by itself, and full answers come back within seconds (and stay after a refresh)."""
    api, pool = world["api"], world["pools"]["kill"]
    want = engine_spans(world["searcher"].search("needle", matches=1000))
    assert engine_spans(_search(api, "kill", "needle")) == want
    pid = _pid_of("cs-kill-1")
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    seen_crash, recovered_after = False, None
    while time.monotonic() - killed_at < 60:
        resp = _search(api, "kill", "needle")
        seen_crash |= resp["stats"]["crashes"] > 0
        if resp["stats"]["crashes"] == 0 and engine_spans(resp) == want:
            recovered_after = time.monotonic() - killed_at
            break
        time.sleep(0.2)
    assert recovered_after is not None, "the killed searcher never came back"
    assert _pid_of("cs-kill-1") != pid
    print(f"searcher replaced: full answers {recovered_after:.1f}s after SIGKILL (a crash seen: {seen_crash})")
    pool.refresh(world["index"])  # a re-index after the restart reaches the new process too
    assert engine_spans(_search(api, "kill", "needle")) == want
    assert _search(api, "kill", "needle")["stats"]["crashes"] == 0


def test_a_heavy_query_does_not_hold_up_the_others(world):
    """A backtracking regex keeps one searcher busy until the deadline; a cheap query sent while
    it runs is answered before it (searchers serve queries concurrently)."""
    api = world["api"]
    finished: dict[str, float] = {}

    def slow():
        resp = _search(api, "lim", SLOW_REGEX, isRegexEnabled=True)
        finished["slow"] = time.monotonic()
        finished["slow_exhaustive"] = resp["isSearchExhaustive"]

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.5)  # the slow query is at work in the searcher now
    resp = _search(api, "lim", "needle")
    finished["fast"] = time.monotonic()
    t.join(timeout=SEARCH_TIMEOUT_S + 30)
    assert engine_spans(resp) == engine_spans(world["searcher"].search("needle", matches=1000))
    assert "slow" in finished, "the heavy query never answered"
    assert finished["fast"] < finished["slow"], "the cheap query waited for the heavy one"
    assert finished["slow_exhaustive"] is False  # it ran out of time on the long runs


def test_a_replica_that_dies_mid_request_answers_in_json(world):
    """The replica answering a (slow) search is killed: Serve's proxy answers the request in our
    JSON error shape (`codesearch.serving.proxy_errors`), not uvicorn's plain text."""
    import ray

    result: dict = {}

    def slow():
        result["r"] = world["api"].post("/dying/api/search", json={"query": "needle", "matches": 5})

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(1.0)  # the request is in the replica now, waiting for the stalled searcher
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
             if a["namespace"] == "serve" and "codesearch-dying" in a["name"] and "REPLICA" in a["name"]]
    assert len(names) == 1, names
    replica = ray.get_actor(names[0], namespace="serve")
    os.kill(ray.get(replica.__ray_call__.remote(lambda self: os.getpid()), timeout=30), signal.SIGKILL)
    t.join(timeout=60)
    r = result["r"]
    assert r.status_code == 500 and r.headers["content-type"] == "application/json", (r.status_code, r.text)
    assert r.json()["errorCode"] == "UNEXPECTED_ERROR" and "retry" in r.json()["message"]


# ------------------------------------------------------------------ per-query stats and bad input


def test_stats_are_per_query(world):
    api = world["api"]
    first = _search(api, "lim", "needle")["stats"]
    for _ in range(3):
        again = _search(api, "lim", "needle")["stats"]
        for k in ("contentBytesLoaded", "indexBytesLoaded", "filesLoaded", "ngramLookups", "filesConsidered"):
            assert again[k] == first[k], k
    assert first["contentBytesLoaded"] > 0 and first["indexBytesLoaded"] > 0


@pytest.mark.parametrize("name,request_kwargs,status,code", [
    ("1000 nested negated groups", {"json": {"query": "-(" * 1000 + "x" + ")" * 1000, "matches": 5}}, 400,
     "FAILED_TO_PARSE_QUERY"),
    ("a query longer than 16 KiB", {"json": {"query": "needle " * 3000, "matches": 5}}, 400, "FAILED_TO_PARSE_QUERY"),
    ("invalid UTF-8", {"content": b'{"query": "\xff\xfe", "matches": 5}'}, 400, "INVALID_REQUEST_BODY"),
    ("not JSON", {"content": b"query=needle"}, 400, "INVALID_REQUEST_BODY"),
    ("a wrong type still counts", {"json": {"query": "needle", "matches": "5"}}, 400, "INVALID_REQUEST_BODY"),
    ("a body over the limit", {"json": {"query": "x" * (LIMITS["max_body_bytes"] + 10), "matches": 5}}, 413,
     "REQUEST_BODY_TOO_LARGE"),
])
def test_bad_requests_are_4xx_with_the_right_code(world, name, request_kwargs, status, code):
    for route in ("/lim/api/search", "/lim/api/stream_search"):
        r = world["api"].post(route, **request_kwargs)
        assert r.status_code == status, (name, r.text)
        assert r.json()["errorCode"] == code and r.json()["statusCode"] == status


def test_repos_page_far_beyond_the_end_is_a_400(world):
    r = world["api"].get("/lim/api/repos", params={"page": 10**18})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_REQUEST_BODY", r.text
    r = world["api"].get("/lim/api/repos", params={"page": 10**6})
    assert r.status_code == 200 and r.json() == []


def test_bodies_are_read_as_sourcebot_reads_them(world):
    """JSON without a JSON content type, and fields we do not know, are accepted."""
    api = world["api"]
    want = engine_spans(world["searcher"].search("needle", matches=1000))
    body = json.dumps({"query": "needle", "matches": 1000})
    for headers in ({}, {"content-type": "text/plain"}, {"content-type": "application/x-www-form-urlencoded"}):
        r = api.post("/lim/api/search", content=body, headers=headers)
        assert r.status_code == 200 and engine_spans(r.json()) == want, r.text
    r = api.post("/lim/api/search", json={"query": "needle", "matches": 1000, "isArchivedExcluded": True,
                                          "source": "sourcebot-web-client", "somethingNew": {"x": 1}})
    assert r.status_code == 200 and engine_spans(r.json()) == want


def test_matches_is_capped_at_the_server_maximum(world, monkeypatch):
    from codesearch.serving.api import build_app
    from codesearch.app.search import max_match_count

    assert max_match_count({}) == 10_000
    assert max_match_count({"DEFAULT_MAX_MATCH_COUNT": "3"}) == 3
    with pytest.raises(ValueError, match="DEFAULT_MAX_MATCH_COUNT"):
        max_match_count({"DEFAULT_MAX_MATCH_COUNT": "lots"})
    # in process: an app built with DEFAULT_MAX_MATCH_COUNT=3 answers 3 of the many matches
    from starlette.testclient import TestClient

    searcher = world["searcher"]
    app = build_app(lambda: searcher, anonymous_access=True, environ={"DEFAULT_MAX_MATCH_COUNT": "3"})
    with TestClient(app, base_url=LOCAL) as client:
        resp = client.post("/api/search", json={"query": "needle", "matches": 1_000_000}).json()
    assert resp["stats"]["actualMatchCount"] == 3 and resp["isSearchExhaustive"] is False


# ------------------------------------------------------------------ slow and idle clients


def _open_slow_posts(url: str, path: str, n: int, headers: str = "") -> list[socket.socket]:
    """`n` connections that send a request's headers and the start of its body, then nothing."""
    host, port = url.removeprefix("http://").split(":")
    socks = []
    for _ in range(n):
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall((f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n{headers}"
                   f"Content-Length: 200\r\n\r\n").encode() + b'{"query": "nee')
        socks.append(s)
    return socks


def _status_of(s: socket.socket, timeout: float) -> int | None:
    s.settimeout(timeout)
    try:
        head = s.recv(4096)
    except (socket.timeout, OSError):
        return None
    finally:
        s.close()
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else None


def test_slow_bodies_without_credentials_are_refused_before_the_body(world):
    socks = _open_slow_posts(world["url"], "/lim/api/search", 70)
    statuses = [_status_of(s, 10) for s in socks]
    assert statuses == [401] * 70


def test_health_answers_while_slow_clients_hold_connections(world):
    """70 slow bodies that pass authentication (anonymous access on) hold their requests until
    the body timeout; meanwhile health and searches are answered; then each slow one gets 408."""
    socks = _open_slow_posts(world["url"], "/lim-anon/api/search", 70)
    try:
        with httpx.Client(base_url=world["url"], timeout=BODY_TIMEOUT_S * 2 / 3) as c:
            assert c.get("/lim-anon/api/health").json() == {"status": "ok"}
            assert c.post("/lim-anon/api/search", json={"query": "needle", "matches": 5}).status_code == 200
    finally:
        statuses = [_status_of(s, BODY_TIMEOUT_S + 15) for s in socks]
    assert statuses == [408] * 70


def test_mcp_get_and_delete_answer_405_at_once(world):
    host, port = world["url"].removeprefix("http://").split(":")
    socks = []
    for _ in range(64):  # idle GETs used to open streams that never closed
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(f"GET /lim-anon/api/mcp HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode())
        socks.append(s)
    assert [_status_of(s, 10) for s in socks] == [405] * 64
    with httpx.Client(base_url=world["url"], timeout=5) as c:
        r = c.delete("/lim-anon/api/mcp")
        assert r.status_code == 405 and r.json()["errorCode"] == "METHOD_NOT_ALLOWED"
        assert r.headers["allow"] == "POST"
        assert c.get("/lim-anon/api/health").status_code == 200
