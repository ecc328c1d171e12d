"""No answer carries a server path: every failing path of git reads, clones and the index, driven
through the real HTTP API, the MCP server and the web pages (Serve on 127.0.0.1).

The world is tests.mcpworld's, broken on purpose after indexing:
- ``git.local/demo`` (a local repository indexed in place): every blob of its object store is
  garbage, so reading a file, grepping or diffing makes git fail;
- ``github.com/acme/widgets`` (a mirror in the data directory): no longer a git repository;
- ``github.com/acme/gone``: listed, never cloned;
- ``git.local/moved``: a local repository whose folder is gone;
- then the index shards are overwritten with garbage;
- real index jobs of the broken and the moved repository fail, and their errors are recorded for
  the status routes.
Every answer (status, headers, body) is collected and searched for the world's folder, which holds
the data directory and the local repository; the failures must still say what failed.
"""

from __future__ import annotations

import glob
import os
import subprocess
import time

import httpx
import pytest

from tests.mcpclient import McpClient
from tests.mcpworld import DEMO, WIDGETS, build

PREFIX = "paths-test-searcher"
GONE = "github.com/acme/gone"
MOVED = "git.local/moved"


def _corrupt_blobs(git_dir: str) -> int:
    out = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch-all-objects", "--batch-check"],
                         capture_output=True, text=True, check=True).stdout
    n = 0
    for line in out.splitlines():
        sha, kind, _size = line.split()
        path = os.path.join(git_dir, "objects", sha[:2], sha[2:])
        if kind == "blob" and os.path.exists(path):
            os.chmod(path, 0o644)
            with open(path, "wb") as f:
                f.write(b"not zlib data")
            n += 1
    return n


@pytest.fixture(scope="module")
def broken(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    base = str(tmp_path_factory.mktemp("paths"))
    w = build(base)
    store = w["store"]
    store.upsert_repos("acme", [dict(name=WIDGETS, code_host_type="github", clone_url=f"https://{WIDGETS}.git"),
                                dict(name=GONE, code_host_type="github", clone_url=f"https://{GONE}.git")])
    moved = os.path.join(base, "src", "moved")
    store.upsert_repos("local", [dict(name=DEMO, code_host_type="genericGitHost", clone_url="file://" + w["demo"],
                                      local_path=w["demo"], default_branch="main"),
                                 dict(name=MOVED, code_host_type="genericGitHost", clone_url="file://" + moved,
                                      local_path=moved, default_branch="main")])
    assert _corrupt_blobs(w["git_dirs"][DEMO]) > 5
    for entry in os.listdir(w["mirror"]):  # the mirror's folder stays, its git data goes
        path = os.path.join(w["mirror"], entry)
        subprocess.run(["rm", "-rf", path], check=True)
    pool = SearcherPool.create(w["index"], 2, name_prefix=PREFIX)
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=False, data_dir=w["data"],
                                 public_url=f"{serve_url}/paths"), name="paths-test", route_prefix="/paths")
    owner = store.find_user_by_email("owner@example.com")
    cookie, _ = store.create_web_session(owner.id, ttl_seconds=3600)
    w.update(base=base, url=f"{serve_url}/paths", pool=pool, mcp=McpClient(f"{serve_url}/paths/api/mcp",
             {"Authorization": f"Bearer {w['key']}"}), cookie=cookie)
    yield w
    serve.delete("paths-test")
    pool.close()
    store.close()


def _api(w, method: str, path: str, **kwargs) -> httpx.Response:
    return httpx.request(method, w["url"] + path, headers={"Authorization": f"Bearer {w['key']}"}, timeout=60,
                         **kwargs)


def _clean(w, what: str, text: str) -> None:
    for secret_place in (w["base"], os.path.realpath(w["base"]), w["data"]):
        assert secret_place not in text, f"{what} carries a server path: {text[:2000]}"


# what a call must answer: (tool or route, arguments, the answer must be an error, words it must contain)
MCP_CASES = [
    ("grep", {"pattern": "feature", "repo": DEMO, "ref": "feature"}, True, ["git grep failed"]),  # not indexed
    ("get_diff", {"repo": DEMO, "base": "main", "head": "feature"}, True, ["git diff failed"]),
    ("read_file", {"repo": DEMO, "path": "src/app.py"}, True, ["src/app.py"]),
    ("list_tree", {"repo": WIDGETS}, True, ["not a git repository"]),
    ("read_file", {"repo": WIDGETS, "path": "README.md"}, True, ["not a git repository"]),
    ("list_commits", {"repo": WIDGETS}, True, ["not a git repository"]),
    ("glob", {"pattern": "*.py", "repo": WIDGETS}, True, ["not a git repository"]),
    ("grep", {"pattern": "Widget", "repo": WIDGETS, "ref": "main~1"}, True, ["not a git repository"]),
    ("read_file", {"repo": GONE, "path": "README.md"}, True, [GONE, "not been cloned"]),
    ("list_tree", {"repo": GONE}, True, [GONE, "not been cloned"]),
]


@pytest.mark.parametrize("tool,args,is_error,words", MCP_CASES, ids=[f"{c[0]}-{c[1]['repo']}" for c in MCP_CASES])
def test_mcp_tool_failures_name_no_server_path(broken, tool, args, is_error, words):
    res = broken["mcp"].call(tool, args)
    assert res.is_error is is_error, res.text
    _clean(broken, f"{tool}{args}", res.text)
    for word in words:
        assert word in res.text, res.text


HTTP_CASES = [
    ("GET", "/api/source", {"repo": DEMO, "path": "src/app.py"}),
    ("GET", "/api/source", {"repo": WIDGETS, "path": "README.md"}),
    ("GET", "/api/source", {"repo": GONE, "path": "README.md"}),
    ("GET", "/api/tree", {"repo": WIDGETS}),
    ("GET", "/api/tree", {"repo": GONE}),
    ("GET", "/api/commits", {"repo": WIDGETS}),
    ("GET", "/api/commits", {"repo": DEMO, "ref": "nope"}),
    ("GET", "/api/commits", {"repo": WIDGETS, "path": "src"}),
    ("GET", "/api/blame", {"repo": DEMO, "path": "src/app.py"}),
    ("GET", "/api/blame", {"repo": WIDGETS, "path": "README.md"}),
    ("GET", "/api/blame", {"repo": GONE, "path": "README.md"}),
    ("GET", "/api/commit", {"repo": DEMO, "ref": "main"}),
    ("GET", "/api/commit", {"repo": WIDGETS, "ref": "main"}),
    ("GET", "/api/diff", {"repo": DEMO, "base": "v1.0", "head": "main"}),
    ("GET", "/api/diff", {"repo": WIDGETS, "base": "main", "head": "main"}),
    ("GET", "/api/diff", {"repo": GONE, "base": "main", "head": "main"}),
]


@pytest.mark.parametrize("method,path,params", HTTP_CASES, ids=[f"{c[1]}-{c[2]['repo']}" for c in HTTP_CASES])
def test_http_failures_name_no_server_path(broken, method, path, params):
    r = _api(broken, method, path, params=params)
    assert r.status_code >= 400, r.text
    body = r.json()
    assert set(body) == {"statusCode", "errorCode", "message"} and body["statusCode"] == r.status_code
    _clean(broken, f"{path}{params}", r.text + str(r.headers))


@pytest.mark.parametrize("page", [
    f"/browse/{DEMO}@main/-/blob/src/app.py", f"/browse/{DEMO}@feature/-/tree/", f"/browse/{WIDGETS}",
    f"/browse/{WIDGETS}@main/-/blob/README.md", f"/browse/{GONE}",
    f"/browse/{DEMO}@main/-/blob/src/app.py?blame", f"/browse/{DEMO}/-/commit/main", f"/browse/{DEMO}@main/-/commits/src",
    f"/browse/{DEMO}/-/compare?base=v1.0&head=main", f"/browse/{WIDGETS}/-/commit/main", f"/browse/{GONE}/-/commits",
])
def test_web_pages_name_no_server_path(broken, page):
    r = httpx.get(broken["url"] + page, cookies={"codesearch_session": broken["cookie"]}, timeout=60)
    assert "<html" in r.text.lower()  # whatever the page could read
    _clean(broken, page, r.text)


@pytest.mark.parametrize("repo,says", [
    (DEMO, "is damaged in the object store"),  # git cannot read the blobs
    (MOVED, f"<{MOVED}>: not a git repository"),  # the folder, in repository terms
])
def test_a_failed_index_job_is_recorded_without_server_paths(broken, repo, says):
    """A real index job fails; its error, as the status routes and the repos page show it,
    names no server path but still says what failed."""
    from codesearch.runtime.workers import RepoIndexer

    store = broken["store"]
    row = store.find_repo(repo)
    job = store.enqueue_index_job(row.id, force=True, rebuild=True)  # read it all again, as an owner asks
    indexer = RepoIndexer(broken["data"], worker_id="paths-test-indexer")
    try:
        while store.get_job(job.id).state in ("PENDING", "IN_PROGRESS"):
            with store.engine.begin() as c:  # no backoff wait between attempts
                c.exec_driver_sql("UPDATE jobs SET next_attempt_at = created_at WHERE id = ?", (job.id,))
            assert indexer.run_once()
    finally:
        indexer.close()
    recorded = store.get_job(job.id).error
    assert says in recorded and store.find_repo(repo).last_error == recorded
    answers = {path: _api(broken, "GET", path) for path in ("/api/jobs?state=FAILED", "/api/repos/status")}
    assert all(recorded in r.text for r in answers.values())
    for path, r in answers.items():
        _clean(broken, path, r.text)
    page = httpx.get(broken["url"] + "/repos", cookies={"codesearch_session": broken["cookie"]}, timeout=60)
    assert says.replace("<", "&lt;").replace(">", "&gt;") in page.text
    _clean(broken, "/repos", page.text)


def test_an_unreadable_index_names_no_server_path(broken):
    for shard in glob.glob(os.path.join(broken["index"], "*.shard")):
        with open(shard, "r+b") as f:
            f.write(b"garbage!" * 8)
    broken["pool"].refresh(broken["index"])
    r = _api(broken, "POST", "/api/search", json={"query": "handle_request", "matches": 10})
    _clean(broken, "/api/search", r.text)
    res = broken["mcp"].call("grep", {"pattern": "handle_request"})
    _clean(broken, "grep", res.text)
    res = broken["mcp"].call("find_symbol_definitions", {"symbol": "Server", "repo": DEMO})
    _clean(broken, "find_symbol_definitions", res.text)


def test_git_output_in_mirror_errors_names_no_mirror_folder(tmp_path):
    """A mirror's git error keeps git's words (what failed) but writes the mirrors' folder
    ``<mirrors>``: these errors become the repository's last error, which users see."""
    from codesearch.git.mirror import MirrorStore, _Job
    from codesearch.git.process import GitFailed

    store = MirrorStore(str(tmp_path / "data" / "repos"))
    job = _Job("https://example.com/acme/widgets.git", None, None, deadline=time.monotonic() + 60, timeout_s=60,
               private=store.root)
    with pytest.raises(GitFailed) as info:  # a real git failure whose message names the folder
        job.run(["rev-parse", "--git-dir"], git_dir=store.path_for(7), network=False)
    error = job.error(info.value)
    assert str(tmp_path) not in str(error) and "<mirrors>/7" in str(error)
    assert str(error).startswith("https://example.com/acme/widgets.git: the local clone is damaged")
