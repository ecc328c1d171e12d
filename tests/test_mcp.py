"""The MCP server at /api/mcp, through real HTTP against the Serve app (2 replicas) with the
MCP SDK's own client: every tool, checked against the repositories' real git data and a
brute-force grep; bad input; authentication."""

from __future__ import annotations

import json
import re
import subprocess

import httpx
import pytest

from tests.mcpclient import McpClient
from tests.mcpworld import (
    DEMO,
    WIDGETS,
    brute_grep,
    build,
    git_files,
    git_show,
    parse_grep,
)

PREFIX = "mcp-test-searcher"
TOOLS = {"grep", "list_repos", "read_file", "list_tree", "list_commits", "glob", "get_diff",
         "find_symbol_definitions", "find_symbol_references", "list_language_models"}


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.service.deployment import search_application

    w = build(str(tmp_path_factory.mktemp("mcp")))
    pool = SearcherPool.create(w["index"], 2, name_prefix=PREFIX)
    serve.run(search_application(PREFIX, len(pool.actors), replicas=2, anonymous_access=False, data_dir=w["data"]),
              name="mcp-auth", route_prefix="/mcp-auth")
    serve.run(search_application(PREFIX, len(pool.actors), replicas=1, anonymous_access=True, data_dir=w["data"]),
              name="mcp-anon", route_prefix="/mcp-anon")
    w["url"] = f"{serve_url}/mcp-auth/api/mcp"
    w["anon_url"] = f"{serve_url}/mcp-anon/api/mcp"
    w["mcp"] = McpClient(w["url"], {"Authorization": f"Bearer {w['key']}"})
    yield w
    serve.delete("mcp-anon")
    serve.delete("mcp-auth")
    pool.close()
    w["store"].close()


def ok(world, tool: str, **args) -> str:
    res = world["mcp"].call(tool, args)
    assert not res.is_error, f"{tool}{args}: {res.text}"
    return res.text


def err(world, tool: str, **args) -> str:
    res = world["mcp"].call(tool, args)
    assert res.is_error, f"{tool}{args} should fail: {res.text}"
    assert "Traceback" not in res.text and world["data"] not in res.text
    return res.text


# ---------------------------------------------------------------------- protocol


def test_initialize_and_tool_list(world):
    init = world["mcp"].initialize()
    assert init.server_info.name == "codesearch"
    tools = {t.name: t for t in world["mcp"].list_tools()}
    assert set(tools) == TOOLS  # ask_codebase only with a language model configured
    grep = tools["grep"]
    schema = grep.input_schema
    assert schema["required"] == ["pattern"]
    assert schema["properties"]["limit"]["default"] == 100
    assert grep.annotations.read_only_hint is True
    assert tools["read_file"].input_schema["properties"]["limit"]["anyOf"][0]["maximum"] == 500
    depth = tools["list_tree"].input_schema["properties"]["depth"]
    assert (depth["minimum"], depth["maximum"], depth["default"]) == (1, 10, 1)
    assert tools["list_tree"].input_schema["properties"]["maxEntries"]["maximum"] == 10000
    assert tools["list_commits"].input_schema["properties"]["perPage"]["default"] == 50
    assert set(tools["list_repos"].input_schema["properties"]["sort"]["enum"]) == {"name", "pushed"}
    assert all(len(t.description) > 40 for t in tools.values())


def test_every_call_succeeds_across_two_stateless_replicas(world):
    results = [world["mcp"].call("list_repos", {}) for _ in range(8)]
    assert all(not r.is_error and json.loads(r.text)["totalCount"] == 2 for r in results)
    many = world["mcp"].calls([("grep", {"pattern": "Widget"}), ("list_language_models", {}), ("glob", {"pattern": "*.go"})])
    assert [r.is_error for r in many] == [False, False, False]


# ---------------------------------------------------------------------- grep


@pytest.mark.parametrize("pattern", [r"def \w+", "return", "handle_request", r"^class ", "upper|lower", r"shout\(",
                                     "Widget", r"line 11\d\d "])
def test_grep_equals_brute_force(world, pattern):
    text = ok(world, "grep", pattern=pattern, limit=1000)
    want = brute_grep(world["git_dirs"], pattern)
    files = {(r, p) for r, p, _ in want}
    # at most 50 lines shown per file (the first ones), the rest counted in a note
    shown = set()
    for f in files:
        lines = sorted(w for w in want if (w[0], w[1]) == f)
        shown |= set(lines[:50])
        if len(lines) > 50:
            assert f"  … {len(lines) - 50} more matching line(s) in this file" in text
    assert parse_grep(text) == shown
    header = text.split("\n")[0]
    assert header == f"Found {len(want)} match{'es' if len(want) != 1 else ''} in {len(files)} file{'s' if len(files) != 1 else ''}"


def test_grep_scopes(world):
    assert parse_grep(ok(world, "grep", pattern="upper", repo=DEMO)) == brute_grep({DEMO: world["git_dirs"][DEMO]}, "upper")
    assert parse_grep(ok(world, "grep", pattern="upper", path="src/util")) == brute_grep(
        world["git_dirs"], "upper", path_filter=lambda p: p.startswith("src/util/"))
    assert parse_grep(ok(world, "grep", pattern="widget", include="*.ts")) == {(WIDGETS, "web/index.ts", 1)}
    assert parse_grep(ok(world, "grep", pattern="return", include="src/**/*.go")) == {
        (WIDGETS, "src/deep/nested/util.go", 3)}
    assert ok(world, "grep", pattern="Handle_Request") == "No files found"  # always case-sensitive
    assert parse_grep(ok(world, "grep", pattern="(?i)Handle_Request", repo=WIDGETS)) == {(WIDGETS, "src/widget.py", 4)}


def test_grep_limit_counts_files(world):
    text = ok(world, "grep", pattern="e", limit=2)
    files = {(r, p) for r, p, _ in parse_grep(text)}
    assert len(files) == 2
    assert "Results truncated" in text and "limit" in text


def test_grep_at_refs_the_index_does_not_hold(world):
    # the feature branch is not indexed: git answers
    assert parse_grep(ok(world, "grep", pattern="feature_only_marker", repo=DEMO, ref="feature")) == {
        (DEMO, "src/feature.py", 1)}
    assert ok(world, "grep", pattern="feature_only_marker", repo=DEMO) == "No files found"
    # the v1.0 tag: the old app.py, and the guide deleted since
    at_tag = parse_grep(ok(world, "grep", pattern="return|Guide", repo=DEMO, ref="v1.0"))
    assert at_tag == brute_grep({DEMO: world["git_dirs"][DEMO]}, "return|Guide", ref="v1.0")
    assert (DEMO, "docs/guide.md", 1) in at_tag
    # the indexed default branch by name and by commit
    sha = subprocess.run(["git", "--git-dir", world["git_dirs"][DEMO], "rev-parse", "main"], capture_output=True,
                         text=True, check=True).stdout.strip()
    for ref in ("main", "refs/heads/main", sha[:10]):
        assert parse_grep(ok(world, "grep", pattern="VALUE", repo=DEMO, ref=ref)) == {(DEMO, "src/new.py", 3)}


@pytest.mark.parametrize("args, message", [
    ({"pattern": "(unclosed"}, "regular expression"),
    ({"pattern": "x", "repo": "github.com/nope/nope"}, "list_repos"),
    ({"pattern": "x", "repo": DEMO, "ref": "-rf"}, "ref"),
    ({"pattern": "x", "repo": DEMO, "ref": "no-such-branch"}, "not found"),
    ({"pattern": "x", "path": "../etc"}, "not found"),
    ({"pattern": "x", "limit": 0}, "limit"),
    ({"pattern": ""}, "pattern"),
    ({}, "pattern"),
])
def test_grep_bad_input(world, args, message):
    assert message in err(world, "grep", **args).lower() or message in err(world, "grep", **args)


# ---------------------------------------------------------------------- read_file


def test_read_file_matches_git(world):
    text = ok(world, "read_file", repo=DEMO, path="src/app.py")
    want = git_show(world["git_dirs"][DEMO], "main", "src/app.py").decode().splitlines()
    lines = text.split("\n")
    assert lines[0] == f"[{DEMO}] src/app.py @ main"
    assert lines[1].startswith("URL: ") and "/browse/" in lines[1]
    body = [ln for ln in lines if re.match(r"^\d+: ", ln)]
    assert body == [f"{i}: {t}" for i, t in enumerate(want, 1)]
    assert lines[-1] == f"(End of file: showing lines 1-{len(want)} of {len(want)}.)"


def test_read_file_pages_with_offset_and_caps(world):
    first = ok(world, "read_file", repo=DEMO, path="data/big.txt")
    shown = [ln for ln in first.split("\n") if re.match(r"^\d+: ", ln)]
    assert shown[0] == "1: line 1 of the big file"
    assert 100 <= len(shown) < 500 and sum(len(s) for s in shown) <= 6000  # about 5 KB per call
    nxt = int(re.search(r"Continue with offset=(\d+)", first).group(1))
    assert nxt == len(shown) + 1
    page = ok(world, "read_file", repo=DEMO, path="data/big.txt", offset=nxt, limit=10)
    assert [ln for ln in page.split("\n") if re.match(r"^\d+: ", ln)] == [
        f"{i}: line {i} of the big file" for i in range(nxt, nxt + 10)]
    last = ok(world, "read_file", repo=DEMO, path="data/big.txt", offset=1195)
    assert "(End of file: showing lines 1195-1200 of 1200.)" in last
    wide = ok(world, "read_file", repo=DEMO, path="data/wide.txt")
    assert "line cut at 2000 characters" in wide and "3: after the wide line" in wide


def test_read_file_at_any_ref_and_from_a_mirror(world):
    old = ok(world, "read_file", repo=DEMO, path="docs/guide.md", ref="v1.0")
    assert "1: Guide: start the Server, then send requests." in old
    assert "1: def feature_only_marker():" in ok(world, "read_file", repo=DEMO, path="src/feature.py", ref="feature")
    assert "4: class Widget:" not in ok(world, "read_file", repo=WIDGETS, path="src/widget.py", offset=5)
    assert "3: class Widget:" in ok(world, "read_file", repo=WIDGETS, path="src/widget.py")


@pytest.mark.parametrize("args, message", [
    ({"repo": DEMO, "path": "assets/logo.png"}, "binary"),
    ({"repo": DEMO, "path": "../../etc/passwd"}, "not found"),
    ({"repo": DEMO, "path": "src/../../x"}, "not found"),
    ({"repo": DEMO, "path": "src/app.py\0"}, "not found"),
    ({"repo": DEMO, "path": "docs/guide.md"}, "not found"),  # deleted on main
    ({"repo": DEMO, "path": "src"}, "not found"),
    ({"repo": DEMO, "path": "src/app.py", "ref": "--output=/tmp/x"}, "invalid git ref"),
    ({"repo": DEMO, "path": "src/app.py", "ref": "nope"}, "not found"),
    ({"repo": DEMO, "path": "src/app.py", "offset": 999}, "past the end"),
    ({"repo": DEMO, "path": "src/app.py", "limit": 501}, "limit"),
    ({"repo": "github.com/acme/secret", "path": "x"}, "list_repos"),
])
def test_read_file_bad_input(world, args, message):
    assert message in err(world, "read_file", **args).lower()


# ---------------------------------------------------------------------- list_tree, glob


def test_list_tree(world):
    root = ok(world, "list_tree", repo=DEMO)
    assert root.split("\n")[2:-2] == ["assets/", "data/", "src/", "README.md"]
    deep = ok(world, "list_tree", repo=DEMO, path="src", depth=2)
    assert deep.split("\n")[2:-2] == ["util/", "  __init__.py", "  strings.py", "app.py", "new.py"]
    files = ok(world, "list_tree", repo=DEMO, path="src", depth=3, includeDirectories=False)
    assert files.split("\n")[2:-2] == ["util/__init__.py", "util/strings.py", "app.py", "new.py"]
    assert "docs/" in ok(world, "list_tree", repo=DEMO, ref="v1.0")
    cut = ok(world, "list_tree", repo=DEMO, depth=10, maxEntries=3)
    assert len(cut.split("\n")[2:-2]) == 3 and "Truncated at maxEntries=3" in cut
    assert "not found" in err(world, "list_tree", repo=DEMO, path="nope").lower()
    assert "file" in err(world, "list_tree", repo=DEMO, path="README.md").lower()
    assert err(world, "list_tree", repo=DEMO, depth=11)


def test_glob(world):
    text = ok(world, "glob", pattern="**/*.py", repo=DEMO)
    want = [p for p in git_files(world["git_dirs"][DEMO]) if p.endswith(".py")]
    assert text.split("\n")[0] == f'Found {len(want)} files matching "**/*.py":'
    assert [ln.strip() for ln in text.split("\n")[3:]] == want
    across = ok(world, "glob", pattern="*.{go,ts}")
    assert "[github.com/acme/widgets]" in across and "  src/deep/nested/util.go" in across and "  web/index.ts" in across
    assert "src/feature.py" in ok(world, "glob", pattern="feature.py", repo=DEMO, ref="feature")
    assert ok(world, "glob", pattern="*.rs") == 'No files found matching "*.rs"'
    assert "strings.py" in ok(world, "glob", pattern="*.py", path="src/util", repo=DEMO)
    assert "app.py" not in ok(world, "glob", pattern="*.py", path="src/util", repo=DEMO)


# ---------------------------------------------------------------------- history


def test_list_commits(world):
    main = json.loads(ok(world, "list_commits", repo=DEMO))
    assert main["totalCount"] == 2
    newest = main["commits"][0]
    assert newest["message"] == "Fix: handle empty input" and newest["body"] == "The handler crashed on empty bodies."
    assert (newest["authorName"], newest["authorEmail"]) == ("Bob", "bob@example.com")
    assert newest["date"].startswith("2024-03-05")
    assert re.fullmatch(r"[0-9a-f]{40}", newest["hash"])
    assert json.loads(ok(world, "list_commits", repo=DEMO, ref="feature"))["totalCount"] == 3
    assert [c["message"] for c in json.loads(ok(world, "list_commits", repo=DEMO, author="ALICE"))["commits"]] == [
        "Initial import"]
    assert json.loads(ok(world, "list_commits", repo=DEMO, query="FIX"))["totalCount"] == 1
    assert json.loads(ok(world, "list_commits", repo=DEMO, since="2024-02-01"))["totalCount"] == 1
    assert json.loads(ok(world, "list_commits", repo=DEMO, until="2024-02-01"))["totalCount"] == 1
    assert json.loads(ok(world, "list_commits", repo=DEMO, since="30 days ago"))["totalCount"] == 0
    paged = json.loads(ok(world, "list_commits", repo=DEMO, ref="feature", page=2, perPage=2))
    assert paged["totalCount"] == 3 and [c["message"] for c in paged["commits"]] == ["Initial import"]
    assert "since: cannot read 'the day before'" in err(world, "list_commits", repo=DEMO, since="the day before")


def test_get_diff(world):
    text = ok(world, "get_diff", repo=DEMO, base="v1.0", head="main")
    assert "--- a/docs/guide.md\n+++ /dev/null" in text
    assert "--- /dev/null\n+++ b/src/new.py" in text
    assert "+        if not body:" in text
    assert re.search(r"^@@ -\d+,\d+ \+\d+,\d+ @@", text, re.M)
    assert "No differences" in ok(world, "get_diff", repo=DEMO, base="main", head="main")
    assert "not found" in err(world, "get_diff", repo=DEMO, base="v9", head="main").lower()
    assert err(world, "get_diff", repo=DEMO, base="-p", head="main")


# ---------------------------------------------------------------------- symbols, repos, models


def test_symbols(world):
    defs = ok(world, "find_symbol_definitions", symbol="handle_request", repo=DEMO)
    assert parse_grep(defs) == {(DEMO, "src/app.py", 4)}
    assert defs.startswith("Found 1 definition in 1 file")
    refs = ok(world, "find_symbol_references", symbol="shout", repo=DEMO)
    assert parse_grep(refs) == brute_grep({DEMO: world["git_dirs"][DEMO]}, r"\bshout\b")
    assert "No definition" in ok(world, "find_symbol_definitions", symbol="nothing_here", repo=DEMO)
    assert "list_repos" in err(world, "find_symbol_definitions", symbol="x", repo="nope")


def test_list_repos(world):
    got = json.loads(ok(world, "list_repos"))
    assert got["totalCount"] == 2 and [r["repoName"] for r in got["repos"]] == [DEMO, WIDGETS]
    assert [r["repoName"] for r in json.loads(ok(world, "list_repos", query="WIDG"))["repos"]] == [WIDGETS]
    desc = json.loads(ok(world, "list_repos", sort="name", direction="desc", perPage=1, page=1))
    assert [r["repoName"] for r in desc["repos"]] == [WIDGETS] and desc["totalCount"] == 2
    assert err(world, "list_repos", perPage=101)
    assert err(world, "list_repos", sort="stars")


def test_list_language_models_without_models(world):
    assert json.loads(ok(world, "list_language_models")) == []


def test_unknown_tool(world):
    res = world["mcp"].call("rm_rf", {})
    assert res.is_error and "rm_rf" in res.text


# ---------------------------------------------------------------------- auth


def _initialize(url: str, headers: dict) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    return httpx.post(url, json=body, headers={"Accept": "application/json, text/event-stream", **headers}, timeout=30)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer not-a-key"}, {"X-Sourcebot-Api-Key": "nope"},
                                     {"Authorization": "Basic dXNlcjpwYXNz"}])
def test_no_valid_key_is_401(world, headers):
    r = _initialize(world["url"], headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert r.json()["errorCode"] == "NOT_AUTHENTICATED"


def test_valid_keys_in_either_header(world):
    assert _initialize(world["url"], {"Authorization": f"Bearer {world['key']}"}).status_code == 200
    assert _initialize(world["url"], {"X-Sourcebot-Api-Key": world["key"]}).status_code == 200
    assert json.loads(McpClient(world["url"], {"X-Sourcebot-Api-Key": world["key"]}).call("list_repos").text)[
        "totalCount"] == 2


def test_anonymous_access_when_enabled(world):
    anon = McpClient(world["anon_url"])
    assert json.loads(anon.call("list_repos").text)["totalCount"] == 2
    assert "handle_request" in anon.call("grep", {"pattern": "handle_request", "repo": WIDGETS}).text
    # an invalid key counts as no key: still anonymous
    assert not McpClient(world["anon_url"], {"Authorization": "Bearer bad"}).call("list_repos").is_error


# ---------------------------------------------------------------------- a third-party client


def test_mcp_inspector_cli_lists_and_calls_tools(world):
    """The MCP Inspector CLI (Node 22, installed by `make`) against the Serve app, Bearer header."""
    from tests.inspector import InspectorError, run_inspector

    headers = {"Authorization": f"Bearer {world['key']}"}
    listed = run_inspector(world["url"], headers=headers, method="tools/list")
    assert {t["name"] for t in listed["tools"]} == TOOLS
    grep = run_inspector(world["url"], headers=headers, method="tools/call", tool_name="grep",
                         tool_args={"pattern": "handle_request", "repo": WIDGETS, "limit": 5})
    assert not grep.get("isError") and parse_grep(grep["content"][0]["text"]) == {(WIDGETS, "src/widget.py", 4)}
    read = run_inspector(world["url"], headers=headers, method="tools/call", tool_name="read_file",
                         tool_args={"repo": DEMO, "path": "src/app.py", "offset": 3, "limit": 2})
    assert read["content"][0]["text"].split("\n")[3:5] == ["3: class Server:", "4:     def handle_request(self, body):"]
    with pytest.raises(InspectorError) as bad:
        run_inspector(world["url"], headers={"Authorization": "Bearer wrong"}, method="tools/list")
    assert bad.value.returncode == 3  # the CLI's "auth required"
