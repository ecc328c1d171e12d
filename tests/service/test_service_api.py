"""The HTTP API on real Ray Serve, over real HTTP on 127.0.0.1 (docs/http-api.md, docs/security-model.md).

One data directory for the module: a state store (users, API keys, two connections, repos, jobs,
a search context), a bare mirror at `MirrorStore.path_for(id)` plus a local repository indexed in
place, and an index built with the store's repo ids. Two Serve applications over it: ``/`` with
anonymous access off, ``/anon`` with it on.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess

import httpx
import pytest

from codesearch.runtime import NAMESPACE
from codesearch.errors import CodesearchError, QueryError
from codesearch.git.mirror import MirrorStore
from codesearch.index.builder import index_source
from codesearch.index.sources import GitSource, RepoInfo
from codesearch.runtime.searchers import SearcherPool
from codesearch.search.engine import Searcher
from codesearch.search.options import DEFAULT_PUBLIC_URL, SearchOptions
from codesearch.service.auth import UNRESTRICTED
from codesearch.service.routes.search import stream_events
from codesearch.store import INDEXED, SYNCED, SearchContext, Store
from tests.conftest import BRANCH_GLOBS, TAG_GLOBS
from tests.conftest import test_settings as index_settings
from tests.githttp import make_bare_repo
from tests.oracle import engine_spans

PREFIX = "cs-api-searcher"
WIDGETS = "git.example.com/acme/widgets"
WIDGET_FILES = {
    "README.md": "# widgets\n\nfoo widgets\n",
    "src/widget.py": "class Widget:\n    def handler(self):\n        return 'foo widget'\n",
    "src/deep/nested/util.go": "package nested\n\nfunc Foo() int { return 1 }\n",
    "assets/logo.bin": "PNG\0\0\x01\x02binary foo\0",
}
FEATURE_WIDGET = "class Widget:\n    def handler(self):\n        return 'foo feature'\n"
EXTRA = [("github.com/acme/alpha", "2023-01-01T00:00:00Z"), ("github.com/acme/beta", "2025-03-01T12:30:00Z"),
         ("github.com/acme/gamma", None)]


@pytest.fixture(scope="module")
def svc(serve_url, indexed_corpus, tmp_path_factory):
    from ray import serve

    from codesearch.serving.deployment import search_application

    base = tmp_path_factory.mktemp("svc")
    data_dir = str(base / "data")
    store = Store.open(data_dir)
    owner = store.create_user("owner@example.com", "Owner")
    _, key = store.create_api_key(owner.id, "tests")
    member = store.create_user("member@example.com")
    revoked_id, revoked = store.create_api_key(member.id, "old")
    assert store.revoke_api_key(member.id, revoked_id)

    corpus_repo, corpus_name = indexed_corpus["repo"], indexed_corpus["repo_name"]
    store.upsert_connection("local", "git", {"type": "git", "url": "file://" + corpus_repo})
    store.upsert_connection("acme", "github", {"type": "github", "orgs": ["acme"]})
    ids = store.upsert_repos("local", [dict(name=corpus_name, code_host_type="genericGitHost", clone_url="file://" + corpus_repo,
                                            local_path=corpus_repo, default_branch="main")]).ids
    ids.update(store.upsert_repos("acme", [
        dict(name=WIDGETS, display_name="acme/widgets", code_host_type="github", clone_url=f"https://{WIDGETS}.git",
             web_url=f"https://{WIDGETS}", file_url_template=f"https://{WIDGETS}/blob/{{branch}}/{{path}}",
             default_branch="main", pushed_at="2024-05-01T00:00:00Z"),
        *[dict(name=n, code_host_type="github", clone_url=f"https://{n}.git", pushed_at=p, fork=True, archived=i == 0)
          for i, (n, p) in enumerate(EXTRA)],
    ]).ids)
    mirror = make_bare_repo(MirrorStore(os.path.join(data_dir, "repos")).root, str(ids[WIDGETS]), WIDGET_FILES,
                            branches={"feature": {"src/widget.py": FEATURE_WIDGET}}, tags=["v1"])
    assert mirror == MirrorStore(os.path.join(data_dir, "repos")).path_for(ids[WIDGETS])

    index_dir = str(base / "index")
    index_source(GitSource(corpus_repo, repo=RepoInfo(name=corpus_name, id=ids[corpus_name]), branch_globs=BRANCH_GLOBS,
                           tag_globs=TAG_GLOBS), index_dir, index_settings())
    index_source(GitSource(mirror, repo=RepoInfo(name=WIDGETS, id=ids[WIDGETS], code_host_type="github",
                                                 web_url=f"https://{WIDGETS}",
                                                 file_url_template=f"https://{WIDGETS}/blob/{{branch}}/{{path}}"),
                           branch_globs=["feature"], tag_globs=["v*"]), index_dir, index_settings())
    store.update_repo_index_status(ids[corpus_name], INDEXED, revisions={"refs/heads/main": "x"})
    store.update_repo_index_status(ids[WIDGETS], INDEXED)
    store.update_connection_status("local", SYNCED)
    store.replace_search_contexts([SearchContext("widgets", [WIDGETS], "the widgets")])
    store.enqueue_sync_job("acme")
    store.enqueue_index_job(ids["github.com/acme/alpha"])
    assert store.claim_job("index", "worker-1").repo_id == ids["github.com/acme/alpha"]
    store.enqueue_index_job(ids["github.com/acme/beta"])

    pool = SearcherPool.create(index_dir, 2, name_prefix=PREFIX)
    common = dict(data_dir=data_dir, contexts={"corpus": {corpus_name}})
    serve.run(search_application(PREFIX, len(pool.actors), replicas=2, anonymous_access=False, **common),
              name="codesearch", route_prefix="/")
    serve.run(search_application(PREFIX, len(pool.actors), replicas=1, enable_public_access=True, **common),
              name="codesearch-anon", route_prefix="/anon")
    searcher = Searcher(index_dir)
    url = serve_url
    with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as api, \
            httpx.Client(base_url=url, timeout=30) as raw:
        yield {"api": api, "raw": raw, "store": store, "key": key, "revoked": revoked, "member": member, "ids": ids,
               "searcher": searcher, "pool": pool, "corpus_repo": corpus_repo, "corpus_name": corpus_name,
               "data_dir": data_dir}
    serve.delete("codesearch-anon")
    serve.delete("codesearch")
    searcher.close()
    pool.close()
    store.close()


@pytest.fixture(scope="module")
def api(svc):
    return svc["api"]


def _want(svc, body):
    return svc["searcher"].search(body["query"], matches=body["matches"], context_lines=body.get("contextLines", 0),
                                  whole=body.get("whole", False), is_regex=body.get("isRegexEnabled", False),
                                  case_sensitive=body.get("isCaseSensitivityEnabled", False))


def _events(text: str) -> list:
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        data = block[len("data: "):]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _key(f: dict) -> str:
    return json.dumps(f, sort_keys=True)


# ------------------------------------------------------------------ search


@pytest.mark.parametrize("body", [
    {"query": "foo", "matches": 1000000},
    {"query": "rev:* handler", "matches": 1000000, "contextLines": 2},
    {"query": r"def \w+", "matches": 5, "isRegexEnabled": True},
    {"query": "Foo", "matches": 1000000, "isCaseSensitivityEnabled": True, "whole": True},
    {"query": "sym:Handler", "matches": 1000000, "source": "sourcebot-web-client"},
])
def test_search_equals_engine(svc, api, body):
    r = api.post("/api/search", json=body)
    assert r.status_code == 200, r.text
    got, want = r.json(), _want(svc, body)
    assert got["stats"]["actualMatchCount"] == want["stats"]["actualMatchCount"]
    assert got["isSearchExhaustive"] == want["isSearchExhaustive"]
    if body["matches"] > 1000:
        assert engine_spans(got) == engine_spans(want)
        assert sorted(f["webUrl"] for f in got["files"]) == sorted(f["webUrl"] for f in want["files"])


def test_search_contexts_from_store_then_argument(svc, api):
    only = lambda body: {f["repository"] for f in api.post("/api/search", json=body).json()["files"]}  # noqa: E731
    assert only({"query": "foo", "matches": 100000}) == {WIDGETS, svc["corpus_name"]}
    assert only({"query": "context:widgets foo", "matches": 100000}) == {WIDGETS}  # the store's context
    assert only({"query": "context:corpus foo", "matches": 100000}) == {svc["corpus_name"]}  # the app's argument


# ------------------------------------------------------------------ stream_search


@pytest.mark.parametrize("body", [
    {"query": "foo", "matches": 1000000},
    {"query": "rev:* handler", "matches": 1000000, "contextLines": 2},
    {"query": "sym:Handler", "matches": 1000000, "whole": True},
])
def test_stream_search_equals_search(svc, api, body):
    r = api.post("/api/stream_search", json=body)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    types = [e if e == "[DONE]" else e["type"] for e in events]
    assert types == ["chunk"] * len(svc["pool"].actors) + ["final", "[DONE]"]
    chunks, final = events[:-2], events[-2]
    want = api.post("/api/search", json=body).json()
    # `duplicateOf` is the whole answer's (docs/http-api.md#duplicates): chunks carry only `contentHash`
    want["files"] = [{k: v for k, v in f.items() if k != "duplicateOf"} for f in want["files"]]
    scores = {_key({k: v for k, v in f.items() if k not in ("score", "order")}): f["score"] for c in chunks for f in c["files"]}
    orders = {_key({k: v for k, v in f.items() if k not in ("score", "order")}): f["order"] for c in chunks for f in c["files"]}
    assert sorted(scores) == sorted(_key(f) for f in want["files"])
    # each streamed file carries its score; /api/search is in that rank order
    ranked = [scores[_key(f)] for f in want["files"]]
    assert ranked == sorted(ranked, reverse=True)
    # and ties in the order of their `order` (searcher, shard, document): the page can rebuild /api/search's order
    keys = [(-scores[_key(f)], orders[_key(f)]) for f in want["files"]]
    assert keys == sorted(keys)
    assert {r["id"] for c in chunks for r in c["repositoryInfo"]} == {r["id"] for r in want["repositoryInfo"]}
    for c in chunks:
        assert set(c) == {"type", "stats", "files", "repositoryInfo"}
        assert c["stats"]["fileCount"] == len(c["files"])
    acc = final["accumulatedStats"]
    assert set(acc) == set(want["stats"])
    for k in ("actualMatchCount", "totalMatchCount", "fileCount", "crashes"):
        assert acc[k] == want["stats"][k], k
    assert acc["actualMatchCount"] == sum(c["stats"]["actualMatchCount"] for c in chunks)
    assert final["isSearchExhaustive"] is want["isSearchExhaustive"] is True


@pytest.mark.parametrize("matches", [1, 3, 7])
def test_stream_search_keeps_the_cap_across_chunks(svc, api, matches):
    body = {"query": "foo", "matches": matches}
    events = _events(api.post("/api/stream_search", json=body).text)
    chunks, final = events[:-2], events[-2]
    sent = sum(len(f["fileName"]["matchRanges"]) + sum(len(c["matchRanges"]) for c in f["chunks"])
               for ch in chunks for f in ch["files"])
    assert sent == matches == final["accumulatedStats"]["actualMatchCount"]
    assert final["accumulatedStats"]["totalMatchCount"] > matches
    assert final["isSearchExhaustive"] is False and events[-1] == "[DONE]"


def test_stream_search_counts_a_dead_searcher_and_reports_errors_in_stream(svc):
    """In process, over real actors: a dead searcher is a crash; a searcher error is an error event."""
    import ray

    @ray.remote(num_cpus=0)
    class Failing:
        def __init__(self, error):
            self.error = error

        def search(self, query, options, deadline_wall, version=None):
            raise self.error

    async def collect(actors, query="foo"):
        pool = SearcherPool(actors)
        options = SearchOptions(matches=1000, timeout_s=10)
        return [e async for e in stream_events(await pool.start(query, options), options, UNRESTRICTED)]

    dead = Failing.remote(None)
    ray.kill(dead)
    events = _events(b"".join(asyncio.run(collect([ray.get_actor(f"{PREFIX}-0", namespace=NAMESPACE), dead]))).decode())
    assert [e if e == "[DONE]" else e["type"] for e in events] == ["chunk", "final", "[DONE]"]
    assert events[1]["accumulatedStats"]["crashes"] == 1 and events[1]["isSearchExhaustive"] is False

    for error, want in ((QueryError("bad query: boom"), {"statusCode": 400, "errorCode": "FAILED_TO_PARSE_QUERY",
                                                         "message": "bad query: boom"}),
                        (CodesearchError("/secret/internal/path"), {"statusCode": 500, "errorCode": "UNEXPECTED_ERROR",
                                                                    "message": "an unexpected error occurred"})):
        failing = Failing.remote(error)
        events = _events(b"".join(asyncio.run(collect([failing]))).decode())
        assert events == [{"type": "error", "error": want}, "[DONE]"]
        ray.kill(failing)


# ------------------------------------------------------------------ repos


def _links(header: str) -> dict[str, str]:
    return {m.group(2): m.group(1) for m in re.finditer(r'<([^>]+)>; rel="(\w+)"', header or "")}


def test_repos_listing(svc, api):
    r = api.get("/api/repos")
    assert r.status_code == 200 and r.headers["x-total-count"] == "5" and "link" not in r.headers
    repos = r.json()
    assert [x["repoName"] for x in repos] == sorted(x["repoName"] for x in repos)
    w = next(x for x in repos if x["repoName"] == WIDGETS)
    indexed_at = w.pop("indexedAt")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", indexed_at)
    assert w == {"codeHostType": "github", "repoId": svc["ids"][WIDGETS], "repoName": WIDGETS,
                 "repoDisplayName": "acme/widgets", "webUrl": f"{DEFAULT_PUBLIC_URL}/browse/{WIDGETS}",
                 "externalWebUrl": f"https://{WIDGETS}", "pushedAt": "2024-05-01T00:00:00.000Z",
                 "defaultBranch": "main", "isFork": False, "isArchived": False}
    alpha = next(x for x in repos if x["repoName"] == "github.com/acme/alpha")
    assert alpha["isFork"] and alpha["isArchived"] and "indexedAt" not in alpha and "externalWebUrl" not in alpha


def test_repos_paging_sorting_and_query(svc, api):
    r = api.get("/api/repos", params={"perPage": 2, "page": 2, "sort": "name"})
    assert r.headers["x-total-count"] == "5" and len(r.json()) == 2
    links = _links(r.headers["link"])
    assert set(links) == {"first", "prev", "next", "last"}
    for rel, page in (("first", "1"), ("prev", "1"), ("next", "3"), ("last", "3")):
        assert f"page={page}" in links[rel] and "perPage=2" in links[rel] and "sort=name" in links[rel]
    last = httpx.get(links["next"], headers=api.headers)
    assert len(last.json()) == 1 and set(_links(last.headers["link"])) == {"first", "prev", "last"}
    everything = [x["repoName"] for x in api.get("/api/repos", params={"per_page": 100}).json()]
    paged = []
    for page in (1, 2, 3):
        paged += [x["repoName"] for x in api.get("/api/repos", params={"perPage": 2, "page": page}).json()]
    assert paged == everything and len(everything) == 5

    pushed = [x["repoName"] for x in api.get("/api/repos", params={"sort": "pushed", "direction": "desc"}).json()]
    assert pushed[:3] == ["github.com/acme/beta", WIDGETS, "github.com/acme/alpha"]
    r = api.get("/api/repos", params={"query": "ACME"})
    assert r.headers["x-total-count"] == "4" and all("acme" in x["repoName"] for x in r.json())
    assert api.get("/api/repos", params={"page": 9}).json() == []
    # behind a route prefix, the links keep it
    links = _links(svc["raw"].get("/anon/api/repos", params={"perPage": 2, "query": "acme"}).headers["link"])
    assert links["next"].startswith(str(svc["raw"].base_url).rstrip("/") + "/anon/api/repos?")
    assert "query=acme" in links["next"] and "page=2" in links["next"]


CONNECTION_KEYS = ["id", "name", "connectionType", "isDeclarative", "syncedAt", "createdAt", "updatedAt", "repoCount",
                   "inFlightJobCount", "latestJob"]
ISO_MS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def test_connections_in_sourcebots_shape(svc, api):
    """A bare array of the connections of visible repos, by name; paging parameters change nothing."""
    conns = {c.name: c for c in svc["store"].list_connections()}
    expected = [{"id": conns[n].id, "name": n, "connectionType": t} for n, t in (("acme", "github"), ("local", "git"))]
    for params in ({}, {"page": 2, "perPage": 1}):
        r = api.get("/api/connections", params=params)
        assert r.status_code == 200 and r.json() == expected


@pytest.mark.parametrize("connection, names", [
    ("acme", [WIDGETS, *[n for n, _ in EXTRA]]),
    ("local", None),  # the corpus repo
    (None, []),  # an id no connection has
])
def test_repos_of_one_connection(svc, api, connection, names):
    cid = next(c.id for c in svc["store"].list_connections() if c.name == connection) if connection else 99999
    r = api.get("/api/repos", params={"connectionId": cid, "perPage": 100})
    assert r.status_code == 200, r.text
    expected = [svc["corpus_name"]] if connection == "local" else names
    assert sorted(x["repoName"] for x in r.json()) == sorted(expected)
    assert r.headers["x-total-count"] == str(len(expected))
    paged = api.get("/api/repos", params={"connectionId": cid, "perPage": 1})
    if len(expected) > 1:
        assert f"connectionId={cid}" in paged.headers["link"]


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5"])
def test_repos_bad_connection_id(svc, api, value):
    r = api.get("/api/repos", params={"connectionId": value})
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_REQUEST_BODY" and "connectionId" in r.json()["message"]


def test_connection_status_for_the_web_ui(svc, api):
    r = api.get("/api/connections/status")
    assert r.status_code == 200 and r.headers["x-total-count"] == "2" and "link" not in r.headers
    assert list(r.json()) == ["connections"]
    conns = r.json()["connections"]
    assert [c["name"] for c in conns] == ["acme", "local"]  # by name
    for c in conns:
        assert list(c)[:len(CONNECTION_KEYS)] == CONNECTION_KEYS  # Sourcebot's keys, then ours for the web UI
        assert c["isDeclarative"] is True and re.fullmatch(ISO_MS, c["createdAt"]) and re.fullmatch(ISO_MS, c["updatedAt"])
        assert "config" not in c
    acme, local = conns
    job = svc["store"].list_jobs(kind="sync", connection="acme")[0]
    assert (acme["connectionType"], acme["syncedAt"], acme["repoCount"], acme["inFlightJobCount"]) == ("github", None, 4, 1)
    assert acme["latestJob"] == {"id": job.id, "status": "PENDING", "createdAt": acme["latestJob"]["createdAt"],
                                 "completedAt": None, "errorMessage": None}
    assert re.fullmatch(ISO_MS, acme["latestJob"]["createdAt"])
    assert (local["connectionType"], local["repoCount"], local["inFlightJobCount"], local["latestJob"]) == ("git", 1, 0, None)
    assert re.fullmatch(ISO_MS, local["syncedAt"])
    # what the web UI's status table reads
    assert local["syncStatus"] == "SYNCED" and "job" not in local
    assert acme["syncStatus"] == "SYNC_NEEDED" and (acme["job"]["kind"], acme["job"]["state"]) == ("sync", "PENDING")


@pytest.mark.parametrize("params, names, rels", [
    ({"perPage": 1}, ["acme"], {"first", "next", "last"}),
    ({"perPage": 1, "page": 2}, ["local"], {"first", "prev", "last"}),
    ({"perPage": 1, "page": 3}, [], {"first", "prev", "last"}),
    ({"page": 1, "perPage": 100}, ["acme", "local"], None),
])
def test_connections_paging(svc, api, params, names, rels):
    r = api.get("/api/connections/status", params=params)
    assert [c["name"] for c in r.json()["connections"]] == names and r.headers["x-total-count"] == "2"
    assert (set(_links(r.headers["link"])) if "link" in r.headers else None) == rels


@pytest.mark.parametrize("params", [{"perPage": 101}, {"perPage": 0}, {"page": "abc"}, {"page": 0}])
def test_connections_bad_paging(svc, api, params):
    r = api.get("/api/connections/status", params=params)
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_REQUEST_BODY"


def test_status_routes(svc, api):
    ids = svc["ids"]
    conns = {c["name"]: c for c in api.get("/api/connections/status").json()["connections"]}
    assert set(conns) == {"acme", "local"}
    assert conns["local"]["syncStatus"] == "SYNCED" and conns["local"]["repoCount"] == 1 and "job" not in conns["local"]
    assert conns["acme"]["syncStatus"] == "SYNC_NEEDED" and conns["acme"]["repoCount"] == 4
    assert conns["acme"]["job"]["kind"] == "sync" and conns["acme"]["job"]["state"] == "PENDING"
    assert all("config" not in c for c in conns.values())

    status = {x["repoName"]: x for x in api.get("/api/repos/status", params={"perPage": 100}).json()}
    assert status[WIDGETS]["indexStatus"] == "INDEXED" and status[WIDGETS]["connections"] == ["acme"]
    assert status["github.com/acme/alpha"]["job"]["state"] == "IN_PROGRESS"
    assert status["github.com/acme/beta"]["job"]["state"] == "PENDING"
    assert status["github.com/acme/gamma"]["indexStatus"] == "NEW" and "job" not in status["github.com/acme/gamma"]

    jobs = api.get("/api/jobs").json()
    assert sorted((j["kind"], j["state"], j.get("repoId"), j.get("connection")) for j in jobs) == sorted([
        ("sync", "PENDING", None, "acme"), ("index", "IN_PROGRESS", ids["github.com/acme/alpha"], None),
        ("index", "PENDING", ids["github.com/acme/beta"], None)])
    assert [j["state"] for j in api.get("/api/jobs", params={"state": "IN_PROGRESS"}).json()] == ["IN_PROGRESS"]
    assert api.get("/api/jobs", params={"state": "COMPLETED"}).json() == []


# ------------------------------------------------------------------ source


@pytest.mark.parametrize("ref,text", [(None, WIDGET_FILES["src/widget.py"]), ("main", WIDGET_FILES["src/widget.py"]),
                                      ("feature", FEATURE_WIDGET), ("refs/heads/feature", FEATURE_WIDGET),
                                      ("v1", WIDGET_FILES["src/widget.py"])])
def test_source_from_the_mirror(api, ref, text):
    params = {"repo": WIDGETS, "path": "src/widget.py", **({"ref": ref} if ref else {})}
    r = api.get("/api/source", params=params)
    assert r.status_code == 200, r.text
    shown = ref.removeprefix("refs/heads/") if ref else "main"
    assert r.json() == {"source": text, "language": "Python", "path": "src/widget.py", "repo": WIDGETS,
                        "repoCodeHostType": "github", "repoDisplayName": "acme/widgets",
                        "repoExternalWebUrl": f"https://{WIDGETS}",
                        "webUrl": f"{DEFAULT_PUBLIC_URL}/browse/{WIDGETS}@{shown}/-/blob/src/widget.py",
                        "externalWebUrl": f"https://{WIDGETS}/blob/{shown}/src/widget.py", "ref": ref or "main"}


def test_source_from_a_local_repo_binary_and_non_utf8(svc, api):
    repo, name = svc["corpus_repo"], svc["corpus_name"]
    show = lambda ref, path: subprocess.run(["git", "-C", repo, "show", f"{ref}:{path}"], capture_output=True,  # noqa: E731
                                            check=True).stdout
    for ref, path in (("main", "src/app.py"), ("dev", "src/util.py"), ("v1.0", "README.md")):
        got = api.get("/api/source", params={"repo": name, "path": path, "ref": ref}).json()
        assert got["source"] == show(ref, path).decode() and got["repo"] == name and got["ref"] == ref
        assert "externalWebUrl" not in got
    got = api.get("/api/source", params={"repo": name, "path": "data/latin1.txt"}).json()
    assert got["source"] == show("main", "data/latin1.txt").decode("utf-8", "replace")
    got = api.get("/api/source", params={"repo": name, "path": "data/blob.bin"}).json()
    assert "source" not in got and got["isBinary"] is True and got["size"] == len(show("main", "data/blob.bin"))
    got = api.get("/api/source", params={"repo": WIDGETS, "path": "assets/logo.bin"}).json()
    assert "source" not in got and got["isBinary"] is True


# ------------------------------------------------------------------ auth


PROTECTED = [("post", "/api/search", {"json": {"query": "foo", "matches": 5}}),
             ("post", "/api/stream_search", {"json": {"query": "foo", "matches": 5}}),
             ("get", "/api/repos", {}), ("get", "/api/repos/status", {}), ("get", "/api/connections", {}),
             ("get", "/api/connections/status", {}),
             ("get", "/api/jobs", {}), ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "README.md"}})]


@pytest.mark.parametrize("method,path,kwargs", PROTECTED)
def test_every_api_route_needs_a_key(svc, method, path, kwargs):
    r = getattr(svc["raw"], method)(path, **kwargs)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json() == {"statusCode": 401, "errorCode": "NOT_AUTHENTICATED", "message": r.json()["message"]}
    r = getattr(svc["raw"], method)("/anon" + path, **kwargs)  # anonymous access on
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path", ["/api/health", "/api/version", "/api/openapi.json"])
def test_public_routes_need_no_key(svc, path):
    assert svc["raw"].get(path).status_code == 200


@pytest.mark.parametrize("headers,status", [
    (lambda s: {}, 401),
    (lambda s: {"Authorization": "Bearer cs_not-a-real-key"}, 401),
    (lambda s: {"Authorization": "Bearer"}, 401),
    (lambda s: {"Authorization": f"Bearer {s['revoked']}"}, 401),
    (lambda s: {"X-Sourcebot-Api-Key": s["revoked"]}, 401),
    (lambda s: {"Authorization": f"Basic {s['key']}"}, 401),
    (lambda s: {"Authorization": s["key"]}, 401),
    (lambda s: {"Authorization": f"Bearer {s['key']}"}, 200),
    (lambda s: {"Authorization": f"bearer  {s['key']}"}, 200),
    (lambda s: {"X-Sourcebot-Api-Key": s["key"]}, 200),
    (lambda s: {"Authorization": "Bearer cs_wrong", "X-Sourcebot-Api-Key": s["key"]}, 200),
])
def test_api_keys(svc, headers, status):
    h = headers(svc)
    r = svc["raw"].get("/api/repos", headers=h)
    assert r.status_code == status, r.text
    # an invalid key counts as no key: with anonymous access on, every one of these gets in
    assert svc["raw"].get("/anon/api/repos", headers=h).status_code == 200


def test_a_revoked_key_stops_working_at_once(svc):
    store = svc["store"]
    kid, key = store.create_api_key(svc["member"].id, "short-lived")
    assert svc["raw"].get("/api/connections", headers={"X-Sourcebot-Api-Key": key}).status_code == 200
    assert store.revoke_api_key(svc["member"].id, kid)
    assert svc["raw"].get("/api/connections", headers={"X-Sourcebot-Api-Key": key}).status_code == 401


# ------------------------------------------------- every error, in the shape of docs/http-api.md#errors


@pytest.mark.parametrize("method,path,kwargs,status,code", [
    ("post", "/api/search", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "x"}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "x", "matches": "10"}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": 5, "matches": 10}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "x", "matches": 0}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/search", {"json": {"query": "archived:maybe", "matches": 10}}, 400, "FAILED_TO_PARSE_QUERY"),
    ("post", "/api/search", {"json": {"query": "a(", "matches": 10, "isRegexEnabled": True}}, 400, "FAILED_TO_PARSE_QUERY"),
    ("post", "/api/search", {"json": {"query": "context:nope foo", "matches": 10}}, 404, "SEARCH_CONTEXT_NOT_FOUND"),
    ("post", "/api/stream_search", {"content": b"[", "headers": {"content-type": "application/json"}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/stream_search", {"json": {"query": "x", "matches": -1}}, 400, "INVALID_REQUEST_BODY"),
    ("post", "/api/stream_search", {"json": {"query": "archived:maybe", "matches": 10}}, 400, "FAILED_TO_PARSE_QUERY"),
    ("post", "/api/stream_search", {"json": {"query": "context:nope foo", "matches": 10}}, 404, "SEARCH_CONTEXT_NOT_FOUND"),
    ("get", "/api/repos", {"params": {"page": 0}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/repos", {"params": {"page": "two"}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/repos", {"params": {"page": 10**18}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/connections/status", {"params": {"page": 10**18}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/repos", {"params": {"perPage": 101}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/repos", {"params": {"perPage": 0}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/repos", {"params": {"sort": "stars"}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/repos", {"params": {"direction": "up"}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/repos/status", {"params": {"perPage": 1000}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/jobs", {"params": {"state": "DONE"}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/source", {"params": {"repo": WIDGETS}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/source", {"params": {"path": "README.md"}}, 400, "INVALID_REQUEST_BODY"),
    ("get", "/api/source", {"params": {"repo": "github.com/nobody/nothing", "path": "README.md"}}, 404, "REPOSITORY_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": "github.com/acme/alpha", "path": "README.md"}}, 404, "REPOSITORY_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "nope.txt"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "src"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "src/deep"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": ""}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "../../../etc/passwd"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "src/../README.md"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "./README.md"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "/etc/passwd"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "README.md\0x"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "src//widget.py"}}, 404, "FILE_NOT_FOUND"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "README.md", "ref": "-h"}}, 400, "INVALID_GIT_REF"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "README.md", "ref": "--output=x"}}, 400, "INVALID_GIT_REF"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "README.md", "ref": "nope"}}, 400, "INVALID_GIT_REF"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "README.md", "ref": "main:README.md"}}, 400, "INVALID_GIT_REF"),
    ("get", "/api/source", {"params": {"repo": WIDGETS, "path": "README.md", "ref": ""}}, 400, "INVALID_GIT_REF"),
    ("get", "/api/nope", {}, 404, "NOT_FOUND"),
    ("delete", "/api/repos", {}, 405, "METHOD_NOT_ALLOWED"),
])
def test_errors_have_the_spec_shape(api, method, path, kwargs, status, code):
    r = getattr(api, method)(path, **kwargs)
    assert r.status_code == status, r.text
    body = r.json()
    # a query that does not parse also says where: `position`, the 0-based character of the query
    extra = {"position": body.get("position")} if code == "FAILED_TO_PARSE_QUERY" else {}
    assert body == {"statusCode": status, "errorCode": code, "message": body["message"], **extra} and body["message"]
    if extra:
        assert isinstance(body["position"], int) and 0 <= body["position"] <= len(kwargs["json"]["query"])
    assert "Traceback" not in body["message"] and "/work/" not in body["message"] and "/tmp/" not in body["message"]


def test_health_version_openapi(api):
    assert api.get("/api/health").json() == {"status": "ok"}
    assert api.get("/api/version").json()["version"]
    spec = api.get("/api/openapi.json").json()
    for path in ("/api/search", "/api/stream_search", "/api/repos", "/api/source", "/api/connections",
                 "/api/connections/status", "/api/repos/status", "/api/jobs", "/api/ee/audit", "/api/commits/authors"):
        assert path in spec["paths"], path
