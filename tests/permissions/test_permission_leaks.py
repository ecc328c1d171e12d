"""Not one file of a repository a caller may not read, on any path (issue 14, part 2).

Random users with random linked accounts and grants (repo-driven, user-driven, fresh, stale and
revoked) over eight indexed repositories in three connections: one that enforces permissions,
one that also enforces them for public repositories, and one that does not. For every caller
(anonymous included) the expected set of visible repositories comes from `expected_visible`, a
plain transcription of the rule written here from the rule's statement (it does not import
`codesearch.permissions`), and every path must agree with it:

* ``/api/search`` and ``/api/stream_search``: the files found are exactly what a brute-force scan
  of the visible repositories' files finds; counts, repositoryInfo and stats name nothing else;
* ``/api/repos``, ``/api/source``, ``/api/tree`` (GET and POST), ``/api/commits``, ``/api/blame``,
  ``/api/commit``, ``/api/diff``: a hidden repository answers exactly as a repository that does
  not exist (same status, same body but the name), whatever else the request asks for (a bad
  ref, a missing path);
* ``/api/find_definitions`` and ``/api/find_references``: exactly the definitions and whole-word
  occurrences in the visible repositories' files (brute force over the files written);
* the MCP tools (the real MCP client SDK over HTTP): `grep`, `list_repos`, `read_file`,
  `list_tree`, `list_commits`, `glob`;
* the web pages: search results, the repository list, the file browser, the results page's
  preview of a file and the history pages (blame, history, commit, compare).

Searches run on real Ray searchers (`SearcherPool`), so the filter is the searchers' own
(`SearchOptions.visible_repos`), not only a last look at the answer.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from codesearch import permissions
from codesearch.config import load_config
from codesearch.runtime.searchers import SearcherPool
from codesearch.runtime.workers import RepoIndexer, RuntimeOptions
from codesearch.serving.api import build_app
from codesearch.store import Store
from codesearch.sessions import SESSION_COOKIE
from tests.asgiserver import serving
from tests.conftest import TEST_LLM_TOKEN, TEST_LLM_TOKEN_ENV
from tests.fakellm import FakeModelServer, tool_outputs
from tests.mcpclient import McpClient

GHE = "https://ghe.example.com"
STRICT = "https://strict.example.com"
HOST_GHE = "github:" + GHE
HOST_STRICT = "github:" + STRICT
CONFIG = {
    "connections": {
        "ghe": {"type": "github", "url": GHE, "orgs": ["acme"]},
        "strict": {"type": "github", "url": STRICT, "orgs": ["corp"], "enforcePermissionsForPublicRepos": True},
        "open": {"type": "github", "url": "https://open.example.com", "orgs": ["free"], "enforcePermissions": False},
    },
    "settings": {"repoDrivenPermissionSyncIntervalMs": 3600000, "userDrivenPermissionSyncIntervalMs": 3600000},
}
#: name -> (connection, public)
REPOS = {
    "ghe.example.com/acme/pub": ("ghe", True),
    "ghe.example.com/acme/priv1": ("ghe", False),
    "ghe.example.com/acme/priv2": ("ghe", False),
    "ghe.example.com/acme/priv3": ("ghe", False),
    "strict.example.com/corp/spub": ("strict", True),
    "strict.example.com/corp/spriv": ("strict", False),
    "open.example.com/free/opub": ("open", True),
    "open.example.com/free/opriv": ("open", False),
}
MISSING = "ghe.example.com/acme/does-not-exist"
WORDS = ["needle", "haystack", "lantern", "copper"]
QUERIES = ["needle", "haystack", "lantern", "copper", "marker", "needle haystack", "def "]
FRESH_AGE = timedelta(minutes=5)
STALE_AGE = timedelta(hours=3)  # older than twice the interval (2 h): denies


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.com",
                        "GIT_COMMITTER_NAME": "A", "GIT_COMMITTER_EMAIL": "a@example.com"})


def _make_repo(root: str, index: int, rng: random.Random) -> dict[str, str]:
    os.makedirs(root)
    files = {}
    for k in range(3):
        words = rng.sample(WORDS, 2)
        files[f"src/f{k}.py"] = f"def fn_{index}_{k}():\n    return '{words[0]} {words[1]} marker{index}'\n"
    files["README.md"] = f"repo {index} {rng.choice(WORDS)}\n"
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", f"repo {index}")
    return files


def expected_visible(user: dict | None, world: dict) -> set[str]:
    """The rule, transcribed from its statement (independent of codesearch.permissions)."""
    out = set()
    now = world["now"]
    for name, (conn, public) in REPOS.items():
        enforce = conn in ("ghe", "strict")
        strict = conn == "strict"
        host = HOST_STRICT if strict else HOST_GHE
        if not enforce:
            if public or user is not None:
                out.add(name)
            continue
        if public and not strict:
            out.add(name)
            continue
        if user is None:
            continue
        accounts = user["accounts"]  # host -> subject
        if public and strict:
            if host in accounts:
                out.add(name)
            continue
        subject = accounts.get(host)
        if subject is None:
            continue
        for g in world["grants"]:
            if g["repo"] == name and g["subject"] == subject and g["host"] == host and not g["revoked"] \
                    and now - g["synced"] <= timedelta(hours=2):
                out.add(name)
    return out


@pytest.fixture(scope="module")
def world(ray_session, tmp_path_factory):
    rng = random.Random(1414)
    base = str(tmp_path_factory.mktemp("leaks"))
    data = os.path.join(base, "data")
    store = Store.open(data)
    owner = store.create_user("owner@example.com", "Owner")
    contents: dict[str, dict[str, str]] = {}
    ids: dict[str, int] = {}
    cfg = load_config(json.dumps(CONFIG).encode(), environ={"PERMISSION_SYNC_ENABLED": "true"})
    for name, conn in CONFIG["connections"].items():
        store.upsert_connection(name, conn["type"], conn)
    for i, (name, (conn, public)) in enumerate(REPOS.items()):
        root = os.path.join(base, "src", f"r{i}")
        contents[name] = _make_repo(root, i, rng)
        ids.update(store.upsert_repos(conn, [dict(name=name, display_name=name.split("/", 1)[1], code_host_type="github",
                                                  clone_url="file://" + root, local_path=root, default_branch="main",
                                                  public=public, external_id=str(9000 + i))], prune=False).ids)
    # one run per repository: each gets shards of its own, spread over both searchers, so that
    # each searcher applies the rule to repositories of its own (one run would build them all
    # into one shard, `codesearch.runtime.index_batch`, and leave the second searcher out)
    indexer = RepoIndexer(data, "leaks-indexer", RuntimeOptions(heartbeat_s=0.05))
    try:
        for name in REPOS:
            store.enqueue_index_job(ids[name])
            while indexer.run_once():
                pass
    finally:
        indexer.close()
    permissions.write_settings(store, permissions.settings_from_config(cfg))

    # Users: random accounts and grants, written as permission syncing writes them.
    now = datetime.now(timezone.utc)
    users, grants = [], []
    private = [n for n, (c, p) in REPOS.items() if c in ("ghe", "strict") and not p]
    for u in range(6):
        row = store.create_user(f"user{u}@example.com", f"User {u}")
        accounts = {}
        for host in (HOST_GHE, HOST_STRICT):
            if rng.random() < 0.7:
                subject = f"{u}{host[-3:]}"
                acc = store.link_account(row.id, provider=host, provider_type="github", host=host, subject=subject,
                                         login=f"user{u}", access_token=f"tok-{u}")
                accounts[host] = subject
                # user-driven grants for some accounts
                if rng.random() < 0.5:
                    mine = [n for n in private if rng.random() < 0.4 and (REPOS[n][0] == "strict") == (host == HOST_STRICT)]
                    age = rng.choice([FRESH_AGE, STALE_AGE])
                    store.clock = lambda age=age: now - age
                    store.replace_account_grants(acc.id, [ids[n] for n in mine])
                    store.clock = lambda: datetime.now(timezone.utc)
                    grants += [{"repo": n, "host": host, "subject": subject, "synced": now - age, "revoked": False,
                                "source": "user"} for n in mine]
        _kid, key = store.create_api_key(row.id, "leaks")
        cookie, _ = store.create_web_session(row.id, ttl_seconds=3600)
        users.append({"row": row, "accounts": accounts, "key": key, "cookie": cookie})
    # repo-driven grants: each private repo names random subjects (some of nobody we know)
    for name in private:
        host = HOST_STRICT if REPOS[name][0] == "strict" else HOST_GHE
        subjects = {u["accounts"][host] for u in users if host in u["accounts"] and rng.random() < 0.4} | {"stranger"}
        age = rng.choice([FRESH_AGE, FRESH_AGE, STALE_AGE])
        store.clock = lambda age=age: now - age
        store.replace_repo_grants(ids[name], host, subjects)
        store.clock = lambda: datetime.now(timezone.utc)
        revoked = rng.random() < 0.2
        if revoked:
            store.record_repo_permission_failure(ids[name], "401 from the host", revoke=True)
        grants += [{"repo": name, "host": host, "subject": s, "synced": now - age, "revoked": revoked, "source": "repo"}
                   for s in subjects]

    owner_key = store.create_api_key(owner.id, "owner")[1]
    users.append({"row": owner, "accounts": {}, "key": owner_key,
                  "cookie": store.create_web_session(owner.id, ttl_seconds=3600)[0]})
    fake_llm = FakeModelServer(api_key=TEST_LLM_TOKEN).start()
    store.replace_language_models([{"provider": "openai-compatible", "model": "scripted-1", "displayName": "Scripted",
                                     "baseUrl": fake_llm.base_url + "/v1", "token": {"env": TEST_LLM_TOKEN_ENV}}])
    pool = SearcherPool.create(os.path.join(data, "index"), 2, name_prefix="leaks-searcher")
    app = build_app(lambda: pool, get_store=lambda: store, anonymous_access=True, data_dir=data,
                    environ={"PERMISSION_SYNC_ENABLED": "true"})
    w = {"store": store, "ids": ids, "contents": contents, "users": users, "grants": grants, "now": now,
         "data": data, "llm": fake_llm}
    with serving(app, lifespan="on") as url:
        w["url"] = url
        yield w
    fake_llm.stop()
    pool.close()
    store.close()


def _callers(world):
    yield "anonymous", None, {}
    for u in world["users"]:
        yield u["row"].email, u, {"Authorization": f"Bearer {u['key']}"}


def _brute(world, visible: set[str], query: str) -> set[tuple[str, str]]:
    terms = query.split()
    return {(repo, path) for repo in visible for path, text in world["contents"][repo].items()
            if all(t.lower() in text.lower() or t.lower() in path.lower() for t in terms)}


def test_the_rule_is_not_trivial(world):
    """The random world has callers who see different, proper subsets (else the test proves nothing)."""
    seen = {frozenset(expected_visible(u, world)) for _, u, _ in _callers(world)}
    assert len(seen) >= 4
    assert all(len(s) < len(REPOS) for s in seen)


def test_search_and_stream_search_find_exactly_the_visible_files(world):
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        for who, user, headers in _callers(world):
            visible = expected_visible(user, world)
            hidden_ids = {world["ids"][n] for n in REPOS if n not in visible}
            for query in QUERIES:
                want = _brute(world, visible, query)
                body = {"query": query, "matches": 1000, "contextLines": 0}
                r = http.post("/api/search", json=body, headers=headers)
                assert r.status_code == 200, (who, query, r.text)
                resp = r.json()
                got = {(f["repository"], f["fileName"]["text"]) for f in resp["files"]}
                assert got == want, (who, query)
                assert {f["repositoryId"] for f in resp["files"]}.isdisjoint(hidden_ids)
                assert {ri["id"] for ri in resp["repositoryInfo"]}.isdisjoint(hidden_ids), (who, query)
                assert resp["stats"]["fileCount"] == len(want)
                text = r.text
                for name in REPOS:
                    if name not in visible:
                        assert name not in text, (who, query, name)
                s = http.post("/api/stream_search", json=body, headers=headers)
                assert s.status_code == 200
                streamed = set()
                for line in s.text.splitlines():
                    if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                        event = json.loads(line[5:])
                        streamed |= {(f["repository"], f["fileName"]["text"]) for f in event.get("files", [])}
                assert streamed == want, (who, query)
                for name in REPOS:
                    if name not in visible:
                        assert name not in s.text, (who, query, name)


def test_status_listings_and_explain_name_no_hidden_repository(world):
    """The operators' listings (repos/status, jobs, connections) and `/api/explain`."""
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        for who, user, headers in _callers(world):
            visible = expected_visible(user, world)
            hidden_ids = {world["ids"][n] for n in REPOS if n not in visible}
            status = http.get("/api/repos/status", params={"perPage": 100}, headers=headers)
            assert status.status_code == 200
            assert {r["repoName"] for r in status.json()} == visible, who
            jobs = http.get("/api/jobs", params={"state": "COMPLETED"}, headers=headers).json()
            assert {j.get("repoId") for j in jobs}.isdisjoint(hidden_ids), who
            conns = http.get("/api/connections/status", headers=headers).json()["connections"]
            counts = {c["name"]: c["repoCount"] for c in conns}
            for conn in ("ghe", "strict", "open"):
                assert counts[conn] == sum(1 for n in visible if REPOS[n][0] == conn), (who, conn)
            # Sourcebot's listing: only the connections of repositories the caller may see
            listed = http.get("/api/connections", headers=headers).json()
            assert {c["name"] for c in listed} == {REPOS[n][0] for n in visible}, who
            explained = http.post("/api/explain", json={"query": "marker"}, headers=headers)
            assert explained.status_code == 200
            for name in REPOS:
                if name not in visible:
                    assert name not in status.text and name not in explained.text, (who, name)


HINT_QUERIES = ["marker repo:priv", "marker repo:acme/prv", "marker r:spriv", "needle repo:corp zzznothing",
                "fn_ file:nothing_here"]


def test_suggestions_and_hints_name_no_hidden_repository(world):
    """`/api/suggest` (repositories, files, symbols) and the hints of empty searches: exactly the
    visible repositories' names, files and symbols, never a hidden one, not even as a "did you mean"."""
    index_of = {name: i for i, name in enumerate(REPOS)}
    hinted = 0  # hints seen: the empty searches asked for them (``withHints``)
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        for who, user, headers in _callers(world):
            visible = expected_visible(user, world)
            hidden = [n for n in REPOS if n not in visible]

            def suggest(kind, q):
                r = http.get("/api/suggest", params={"kind": kind, "q": q, "limit": 50}, headers=headers)
                assert r.status_code == 200, (who, r.text)
                for name in hidden:
                    assert name not in r.text, (who, kind, name)
                return {x["value"] for x in r.json()["suggestions"]}

            got_repos = suggest("repo", "")
            assert got_repos == visible, (who, got_repos, http.get("/api/repos/status", params={"perPage": 100}, headers=headers).text)
            assert suggest("repo", "priv") == {n for n in visible if "priv" in n}, who
            assert suggest("sym", "fn_") == {f"fn_{index_of[n]}_{k}" for n in visible for k in range(3)}, who
            files = http.get("/api/suggest", params={"kind": "file", "q": "src/f", "limit": 50}, headers=headers).json()
            assert {x["detail"] for x in files["suggestions"]} == visible, who
            for query in HINT_QUERIES:
                r = http.post("/api/search", json={"query": query, "matches": 10, "withHints": True}, headers=headers)
                assert r.status_code == 200, (who, query, r.text)
                for name in hidden:
                    assert name not in r.text, (who, query, name)
                hinted += len(r.json().get("hints", []))
                for hint in r.json().get("hints", []):
                    for sug in hint["suggestions"]:
                        if hint["kind"] == "unknownRepository":
                            assert sug["label"] in visible, (who, query, hint)
    assert hinted, "no empty search of the table had a hint: the test checked nothing"


def _same_as_missing(a: httpx.Response, b: httpx.Response, name: str) -> None:
    assert a.status_code == b.status_code, (name, a.status_code, b.status_code)
    assert a.text.replace(name, "X") == b.text.replace(MISSING, "X"), name


#: (route, params, whether a visible repository answers 200): every route that takes a repository
REPO_ROUTES = [
    ("/api/source", {"path": "README.md"}, True), ("/api/tree", {}, True), ("/api/commits", {}, True),
    ("/api/commits", {"path": "src"}, True), ("/api/blame", {"path": "README.md"}, True),
    ("/api/commit", {"ref": "main"}, True), ("/api/diff", {"base": "main", "head": "main"}, True),
    ("/api/blame", {"path": "nope.md"}, False), ("/api/blame", {"path": "README.md", "ref": "nope"}, False),
    ("/api/commit", {"ref": "nope"}, False), ("/api/diff", {"base": "main", "head": "nope"}, False),
]


def test_repository_routes_answer_a_hidden_repository_as_a_missing_one(world):
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        for who, user, headers in _callers(world):
            visible = expected_visible(user, world)
            listed = {r["repoName"] for r in http.get("/api/repos", params={"perPage": 100}, headers=headers).json()}
            assert listed == visible, who
            for name in REPOS:
                for route, extra, found in REPO_ROUTES:
                    params = {"repo": name, **extra}
                    r = http.get(route, params=params, headers=headers)
                    if name in visible:
                        assert (r.status_code == 200) is found, (who, route, params, r.text)
                        assert r.status_code != 404 or "REPOSITORY_NOT_FOUND" not in r.text, (who, route, r.text)
                    else:
                        missing = http.get(route, params={**params, "repo": MISSING}, headers=headers)
                        _same_as_missing(r, missing, name)
                body = {"repoName": name, "revisionName": "main", "paths": ["src"]}
                r = http.post("/api/tree", json=body, headers=headers)
                if name in visible:
                    assert r.status_code == 200, (who, name, r.text)
                    assert {c["name"] for c in r.json()["tree"]["children"]} == {"src", "README.md"}
                else:
                    _same_as_missing(r, http.post("/api/tree", json={**body, "repoName": MISSING}, headers=headers), name)


def test_insights_name_only_repositories_the_caller_may_see(world):
    """``POST /api/insights`` with a repository: saved when the caller sees it, else the answer of
    a repository that does not exist (anonymous callers may not save insights at all)."""
    body = {"name": "leak check", "queries": ["needle"], "step": "month", "since": "2024-01-01"}
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        for who, user, headers in _callers(world):
            visible = expected_visible(user, world)
            for name in REPOS:
                r = http.post("/api/insights", json={**body, "repositories": [name]}, headers=headers)
                if user is None:
                    assert r.status_code == 403, (who, r.text)
                elif name in visible:
                    assert r.status_code == 201, (who, name, r.text)
                    assert http.delete(f"/api/insights/{r.json()['id']}", headers=headers).status_code == 204
                else:
                    missing = http.post("/api/insights", json={**body, "repositories": [MISSING]}, headers=headers)
                    _same_as_missing(r, missing, name)


def test_code_navigation_finds_only_what_the_caller_may_see(world):
    """Definitions (``def fn_<repo>_<k>``, one per repository file) and references (the words)
    for every caller: exactly the visible repositories' share, scoped or not."""
    import re

    symbols = [f"fn_{i}_{k}" for i in range(len(REPOS)) for k in (0, 2)]
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        for who, user, headers in _callers(world):
            visible = expected_visible(user, world)
            for name in symbols + WORDS:
                rx = re.compile(r"\b" + name + r"\b")
                for route in ("/api/find_definitions", "/api/find_references"):
                    for scope in ({}, {"repoName": "ghe.example.com/acme/priv1"}):
                        r = http.post(route, json={"symbolName": name, **scope}, headers=headers)
                        assert r.status_code == 200, (who, route, r.text)
                        want = set()
                        for repo in visible:
                            if scope and repo != scope["repoName"]:
                                continue
                            for path, text in world["contents"][repo].items():
                                for n, line in enumerate(text.split("\n"), 1):
                                    found = rx.search(line) if route.endswith("references") else line.startswith(f"def {name}(")
                                    if found:
                                        want.add((repo, path, n))
                        got = {(f["repository"], f["fileName"], m["range"]["start"]["lineNumber"])
                               for f in r.json()["files"] for m in f["matches"]}
                        assert got == want, (who, route, name, scope)
                        for hidden in REPOS:
                            if hidden not in visible:
                                assert hidden not in r.text, (who, route, name, hidden)


def test_mcp_tools_show_only_visible_repositories(world):
    for who, user, headers in list(_callers(world))[:4]:
        visible = expected_visible(user, world)
        mcp = McpClient(world["url"] + "/api/mcp", headers)
        per_repo_tools = (("read_file", {"path": "README.md"}), ("list_tree", {}), ("list_commits", {}),
                          ("list_branches", {}), ("get_diff", {"base": "main", "head": "main"}),
                          ("find_symbol_definitions", {"symbol": "fn_0_0"}),
                          ("find_symbol_references", {"symbol": "fn_0_0"}), ("grep", {"pattern": "marker"}),
                          ("glob", {"pattern": "**"}))
        out = mcp.calls([("grep", {"pattern": "marker", "limit": 200}), ("list_repos", {}),
                         ("glob", {"pattern": "**/*.py", "limit": 500})]
                        + [(tool, {"repo": name, **extra}) for name in REPOS for tool, extra in per_repo_tools])
        grep, repos, glob = out[0], out[1], out[2]
        for name in REPOS:
            if name in visible:
                assert name in grep.text and name in repos.text and name in glob.text, (who, name)
            else:
                assert name not in grep.text and name not in repos.text and name not in glob.text, (who, name)
        per_repo = out[3:]
        k = len(per_repo_tools)
        missing_answers = dict(zip([t for t, _ in per_repo_tools],
                                   mcp.calls([(t, {"repo": MISSING, **extra}) for t, extra in per_repo_tools])))
        for i, name in enumerate(REPOS):
            for (tool, _), res in zip(per_repo_tools, per_repo[k * i: k * i + k]):
                if name in visible:
                    assert not res.is_error, (who, name, tool, res.text)
                else:  # exactly what a repository that does not exist answers
                    missing = missing_answers[tool]
                    assert res.is_error and res.text.replace(name, "X") == missing.text.replace(MISSING, "X"), \
                        (who, name, tool, res.text, missing.text)


def test_web_pages_show_only_visible_repositories(world):
    for u in world["users"][:4]:
        visible = expected_visible(u, world)
        with httpx.Client(base_url=world["url"], timeout=60, cookies={SESSION_COOKIE: u["cookie"]}) as http:
            page = http.get("/search", params={"q": "marker"})
            assert page.status_code == 200
            # the results the server writes into the page: those of the API for this user (tested
            # against a brute-force scan above), never a repository the user may not see
            shown = set(re.findall(r'<section class="file" data-lang="[^"]*" data-repo="([^"]*)"', page.text))
            api = http.post("/api/search", json={"query": "marker", "matches": 100, "contextLines": 1},
                            headers={"Authorization": f"Bearer {u['key']}"}).json()
            assert shown <= set(visible), (u["row"].email, shown - set(visible))
            if api["isSearchExhaustive"]:
                assert shown == {f["repository"] for f in api["files"]}, u["row"].email
            repos_page = http.get("/repos")
            assert repos_page.status_code == 200
            for name in REPOS:
                if name in visible:
                    assert name in repos_page.text, (u["row"].email, name)
                else:
                    assert name not in page.text and name not in repos_page.text, (u["row"].email, name)
                # a result's further matches ("Show N more matches"): the page's search as the caller
                more = http.get("/search/file", params={"q": "marker", "repo": name, "path": "src/f0.py"})
                if name in visible:
                    assert more.status_code == 200 and f'data-repo="{name}"' in more.text, (name, more.text)
                    assert 'data-path="src/f0.py"' in more.text and "<mark>" in more.text, name
                else:
                    _same_as_missing(more, http.get("/search/file", params={"q": "marker", "repo": MISSING,
                                                                            "path": "src/f0.py"}), name)
                for rest in ("@main/-/blob/README.md", "@main/-/blob/README.md?blame", "@main/-/commits/src",
                             "@main/-/blob/README.md?preview&line=1",  # the results page's preview panel
                             "/-/commits", "/-/commit/main", "/-/compare?base=main&head=main", "/-/compare"):
                    browse = http.get(f"/browse/{name}{rest}")
                    if name in visible:
                        assert browse.status_code == 200, (name, rest, browse.status_code)
                    else:
                        missing = http.get(f"/browse/{MISSING}{rest}")
                        _same_as_missing(browse, missing, name)


def test_a_revoked_grant_stops_working_after_the_cache(world):
    """Access removed by a sync disappears within the rule's cache time, on every replica."""
    store = world["store"]
    enforced_private = [n for n, (c, p) in REPOS.items() if c != "open" and not p]
    pairs = [(u, n) for u in world["users"] for n in enforced_private if n in expected_visible(u, world)]
    assert pairs, "the random world granted nobody a private repository"
    user, name = pairs[0]
    headers = {"Authorization": f"Bearer {user['key']}"}
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        assert http.get("/api/source", params={"repo": name, "path": "README.md"}, headers=headers).status_code == 200
        store.record_repo_permission_failure(world["ids"][name], "403 from the host", revoke=True)
        for acc in store.list_linked_accounts(user_id=user["row"].id):
            store.record_account_permission_failure(acc.id, "401 from the host", revoke=True)
        for g in world["grants"]:  # the oracle learns what was revoked, for the tests after this one
            if (g["source"] == "repo" and g["repo"] == name) or \
                    (g["source"] == "user" and user["accounts"].get(g["host"]) == g["subject"]):
                g["revoked"] = True
        import time
        deadline = time.monotonic() + permissions.CACHE_TTL_S + 5
        while time.monotonic() < deadline:
            if http.get("/api/source", params={"repo": name, "path": "README.md"}, headers=headers).status_code == 404:
                break
            time.sleep(0.25)
        else:
            raise AssertionError("revoked access still works")
    time.sleep(permissions.CACHE_TTL_S)  # every caller's cached view has caught up before the next test


def test_the_python_client_over_ray_applies_the_same_rule(world):
    """`Client.ray(..., api_key=...)`: searches on the same searchers, repos, files and history,
    restricted as over HTTP (anonymous without a key)."""
    from codesearch.client import Client
    from codesearch.client.backends import RayBackend
    from codesearch.errors import CodesearchError, NotAuthenticated

    for user in [None] + world["users"][:3]:
        visible = expected_visible(user, world)
        backend = RayBackend("leaks-searcher", world["data"], searchers=2, api_key=user["key"] if user else None)
        client = Client(backend)
        try:
            for query in ("marker", "needle haystack"):
                got = {(f.repo, f.path) for f in client.search(query, matches=1000).files}
                assert got == _brute(world, visible, query), (user and user["row"].email, query)
                streamed = set()
                for part in client.search(query, matches=1000, stream=True):
                    streamed |= {(f.repo, f.path) for f in part.files}
                assert streamed == got
            assert {r.name for r in client.repos(per_page=100)} == visible
            for name in REPOS:
                if name in visible:
                    assert client.read_file(name, "README.md").text
                else:
                    with pytest.raises(CodesearchError):
                        client.read_file(name, "README.md")
        finally:
            client.close()
    with pytest.raises(NotAuthenticated):
        RayBackend("leaks-searcher", world["data"], searchers=2, api_key="cs_not-a-key")


def test_the_python_client_over_ray_refuses_what_it_cannot_check(world, tmp_path):
    """Over Ray the client applies the rule from the service's state database, so it refuses,
    with an error that says why, whenever it cannot be sure it reads that database: another
    database (the published instance differs), a database the service never ran on (no
    settings), a data directory this machine cannot reach (unless the service said it has no
    rule, and then without a key: search only)."""
    from codesearch.client.backends import RayBackend
    from codesearch.errors import CodesearchError
    from codesearch.runtime import registry
    from codesearch.runtime.searchers import publish_deployment

    key = world["users"][0]["key"]
    other = tmp_path / "other"
    other.mkdir()
    cases = [  # (published deployment, permissions flag, data_dir, api key, error fragment or None)
        (dict(data_dir=world["data"], instance="not-this-one"), True, None, key, "not the service's state database"),
        (dict(data_dir=str(other)), True, None, key, "holds no permission settings"),
        (dict(data_dir=str(other)), False, None, None, "holds no permission settings"),
        (dict(data_dir=str(tmp_path / "missing")), True, None, None, "not reachable"),
        (dict(data_dir=str(tmp_path / "missing")), None, None, None, "not reachable"),
        (dict(data_dir=str(tmp_path / "missing")), False, None, key, "not reachable"),
        (dict(data_dir=str(tmp_path / "missing")), False, None, None, None),
        (dict(data_dir=str(tmp_path / "missing"), instance=world["store"].instance_id()), True, world["data"], key, None),
    ]
    prefix = "leaks-searcher"
    for published, flag, data_dir, api_key, error in cases:
        publish_deployment(prefix, searchers=2, **published)
        registry.put_permissions_enabled(prefix, flag)
        if error is None:
            RayBackend(prefix, data_dir, api_key=api_key).close()
        else:
            with pytest.raises(CodesearchError, match=error):
                RayBackend(prefix, data_dir, api_key=api_key)
    publish_deployment(prefix, searchers=2, data_dir=world["data"], instance=world["store"].instance_id())
    registry.put_permissions_enabled(prefix, True)


def test_ask_codebase_researches_only_visible_repositories_and_its_sessions_follow_the_rule(world):
    """The agent's tools run as the asker: the model never receives a hidden repository, and a
    shared (PUBLIC) session that names repositories a viewer may not read is not shown to them."""
    fake = world["llm"]
    asker = max(world["users"][:-1], key=lambda u: len(expected_visible(u, world)))
    visible = expected_visible(asker, world)
    assert visible - expected_visible(None, world), "the asker sees nothing the anonymous visitor does not"
    fake.reset()
    fake.script.clear()
    fake.add([("grep", {"pattern": "marker", "limit": 200})], [("list_repos", {})],
             lambda messages: "Found:\n" + "\n".join(tool_outputs(messages)))
    mcp = McpClient(world["url"] + "/api/mcp", {"Authorization": f"Bearer {asker['key']}"})
    res = mcp.call("ask_codebase", {"query": "Where are the markers?", "visibility": "PUBLIC"})
    assert not res.is_error, res.text
    sent = json.dumps(fake.bodies)
    for name in REPOS:
        if name in visible:
            assert name in res.text
        else:
            assert name not in sent and name not in res.text, name
    chat_url = res.text.split("Research session: ", 1)[1].split()[0]
    path = "/chat/" + chat_url.rsplit("/chat/", 1)[1]
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        mine = http.get(path, headers={"Authorization": f"Bearer {asker['key']}", "Accept": "text/html"})
        assert mine.status_code == 200
        anonymous = http.get(path, headers={"Accept": "text/html"})
        assert anonymous.status_code == 404
        assert not any(name in anonymous.text for name in REPOS)


def test_owners_read_where_permission_syncing_stands(world):
    owner = world["users"][-1]
    member = world["users"][0]
    with httpx.Client(base_url=world["url"], timeout=60) as http:
        r = http.get("/api/permission_sync", headers={"Authorization": f"Bearer {owner['key']}"})
        assert r.status_code == 200
        body = r.json()
        assert body["enabled"] is True
        private = {n for n, (c, p) in REPOS.items() if c != "open" and not p}
        assert {x["repoName"] for x in body["repos"]} == private & expected_visible(owner, world)
        assert all("tok-" not in json.dumps(a) for a in body["accounts"]) and body["accounts"]
        refused = http.get("/api/permission_sync", headers={"Authorization": f"Bearer {member['key']}"})
        assert refused.status_code == 403 and "INSUFFICIENT_PERMISSIONS" in refused.text
