"""The MCP server at /api/mcp, through real HTTP against the Serve app (2 replicas) with the
MCP SDK's own client: every tool, checked against the repositories' real git data and a
brute-force grep; Sourcebot's answer shapes key by key; the answer budget; bad input;
authentication."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime

import httpx
import pytest

from codesearch.tools.budget import ANSWER_BUDGET, fit_json, fit_text
from tests.mcpclient import McpClient
from tests.mcpworld import (
    DEMO,
    HOST_PUSHED_AT,
    WIDGETS,
    brute_grep,
    build,
    git_files,
    git_show,
    parse_grep,
)

PREFIX = "mcp-test-searcher"
TOOLS = {"grep", "list_repos", "read_file", "list_tree", "list_commits", "list_branches", "glob", "get_diff",
         "find_symbol_definitions", "find_symbol_references", "list_language_models",
         "create_skill", "update_skill", "list_skills"}
CUT_HINT = re.compile(r"^\(Answer cut at 20 KB: showing (\d+) of (\d+) lines\. (.+)\)$")


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

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


def git(world, repo: str, *args: str) -> str:
    """git itself on a world repository: the oracle of the history tools."""
    return subprocess.run(["git", "--git-dir", world["git_dirs"][repo], *args], capture_output=True, text=True,
                          check=True).stdout


def when(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


# ---------------------------------------------------------------------- protocol


def test_initialize_and_tool_list(world):
    init = world["mcp"].initialize()
    assert init.server_info.name == "codesearch"
    tools = {t.name: t for t in world["mcp"].list_tools()}
    assert set(tools) == TOOLS  # ask_codebase only with a language model configured
    grep = tools["grep"]
    schema = grep.input_schema
    assert schema["required"] == ["pattern"]
    limit = schema["properties"]["limit"]  # optional: 100 files, or 10000 with groupByRepo
    assert limit["default"] is None and (limit["anyOf"][0]["minimum"], limit["anyOf"][0]["maximum"]) == (1, 10000)
    group = schema["properties"]["groupByRepo"]
    assert (group["type"], group["default"]) == ("boolean", False)
    assert grep.annotations.read_only_hint is True
    assert tools["read_file"].input_schema["properties"]["limit"]["anyOf"][0]["maximum"] == 500
    depth = tools["list_tree"].input_schema["properties"]["depth"]
    assert (depth["minimum"], depth["maximum"], depth["default"]) == (1, 10, 1)
    assert tools["list_tree"].input_schema["properties"]["maxEntries"]["maximum"] == 10000
    assert tools["list_commits"].input_schema["properties"]["perPage"]["default"] == 50
    assert set(tools["list_repos"].input_schema["properties"]["sort"]["enum"]) == {"name", "pushed"}
    branches = tools["list_branches"].input_schema
    assert branches["required"] == ["repo"] and set(branches["properties"]) == {"repo", "query", "page", "perPage"}
    assert (branches["properties"]["perPage"]["maximum"], branches["properties"]["perPage"]["default"]) == (100, 50)
    for name in ("list_commits", "get_diff"):  # path, optional, as in Sourcebot
        assert "path" in tools[name].input_schema["properties"] and "path" not in tools[name].input_schema["required"]
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
            assert f"  … {len(lines) - 50} more matching line{'s' if len(lines) > 51 else ''} in this file" in text
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


COMMIT_KEYS = ["hash", "date", "message", "refs", "body", "authorName", "authorEmail"]


def git_log(world, repo: str, ref: str, *paths: str) -> list[dict]:
    """The oracle of list_commits: git log's fields as Sourcebot shows them (author date, git's
    short decoration text as refs)."""
    out = git(world, repo, "-c", "log.decorate=short", "log", "--format=%H%x00%aI%x00%s%x00%D%x00%b%x00%an%x00%ae%x01",
              ref, "--", *paths)
    rows = [r.lstrip("\n").split("\0") for r in out.split("\x01") if r.strip()]
    return [dict(zip(COMMIT_KEYS, [h, d, s, refs, b.strip(), n, e])) for h, d, s, refs, b, n, e in rows]


@pytest.mark.parametrize("repo, ref", [(DEMO, "main"), (DEMO, "feature"), (DEMO, "v1.0"), (WIDGETS, "main")])
def test_list_commits_is_sourcebots_shape(world, repo, ref):
    got = json.loads(ok(world, "list_commits", repo=repo, ref=ref))
    assert list(got) == ["commits", "totalCount"]
    assert all(list(c) == COMMIT_KEYS for c in got["commits"])
    want = git_log(world, repo, ref)
    assert got["commits"] == want and got["totalCount"] == len(want)
    assert all(isinstance(c["refs"], str) for c in got["commits"]) and any(c["refs"] for c in got["commits"])


def test_list_commits_refs_are_gits_decoration(world):
    commits = json.loads(ok(world, "list_commits", repo=DEMO, ref="feature"))["commits"]
    assert [c["refs"] for c in commits] == ["feature", "HEAD -> main", "tag: v1.0"]


@pytest.mark.parametrize("repo, ref, path", [
    (DEMO, "main", "src/app.py"), (DEMO, "main", "src"), (DEMO, "main", "src/"), (DEMO, "main", "docs/guide.md"),
    (DEMO, "main", "README.md"), (DEMO, "feature", "src/feature.py"), (DEMO, "main", "src/feature.py"),
    (DEMO, "main", "nope"), (WIDGETS, "main", "web"),
])
def test_list_commits_path_equals_git_log(world, repo, ref, path):
    got = json.loads(ok(world, "list_commits", repo=repo, ref=ref, path=path))
    want = git_log(world, repo, ref, path)
    assert got["commits"] == want and got["totalCount"] == len(want)


def test_list_commits_path_pages(world):
    first = json.loads(ok(world, "list_commits", repo=DEMO, ref="feature", path="src", perPage=1))
    second = json.loads(ok(world, "list_commits", repo=DEMO, ref="feature", path="src", perPage=1, page=2))
    want = git_log(world, DEMO, "feature", "src")
    assert first["commits"] + second["commits"] == want[:2] and first["totalCount"] == second["totalCount"] == 3


@pytest.mark.parametrize("path", ["../etc", "src/../../x", "a\0b"])
def test_history_paths_outside_the_repository(world, path):
    assert "relative to the repository root" in err(world, "list_commits", repo=DEMO, path=path)
    assert "relative to the repository root" in err(world, "get_diff", repo=DEMO, base="v1.0", head="main", path=path)


# ---------------------------------------------------------------------- list_branches

BRANCH_KEYS = ["name", "commit", "committedAt", "isDefault", "isIndexed"]


def for_each_ref(world, repo: str) -> list[tuple[str, str, str]]:
    """The oracle of list_branches: (name, head, committer date) of ``git for-each-ref refs/heads``,
    newest first, then by name."""
    out = git(world, repo, "for-each-ref", "--format=%(refname:lstrip=2)%00%(objectname)%00%(committerdate:iso-strict)",
              "refs/heads")
    rows = sorted((tuple(line.split("\0")) for line in out.splitlines()), key=lambda r: r[0])
    return sorted(rows, key=lambda r: when(r[2]), reverse=True)


@pytest.mark.parametrize("repo, args", [
    (DEMO, {}), (DEMO, {"query": "FEAT"}), (DEMO, {"query": "ai"}), (DEMO, {"query": "nothing"}),
    (DEMO, {"perPage": 1}), (DEMO, {"perPage": 1, "page": 2}), (DEMO, {"perPage": 1, "page": 3}), (WIDGETS, {}),
])
def test_list_branches_equals_for_each_ref(world, repo, args):
    got = json.loads(ok(world, "list_branches", repo=repo, **args))
    assert list(got) == ["repo", "defaultBranch", "indexedAt", "totalCount", "branches"]
    rows = [r for r in for_each_ref(world, repo) if args.get("query", "").lower() in r[0].lower()]
    per, page = args.get("perPage", 50), args.get("page", 1)
    row = world["store"].get_repo(world["ids"][repo])
    assert (got["repo"], got["defaultBranch"], got["totalCount"]) == (repo, "main", len(rows))
    assert when(got["indexedAt"]) == row.indexed_at.replace(microsecond=row.indexed_at.microsecond // 1000 * 1000)
    assert all(list(b) == BRANCH_KEYS for b in got["branches"])
    assert got["branches"] == [{"name": n, "commit": c, "committedAt": d, "isDefault": n == "main",
                                "isIndexed": f"refs/heads/{n}" in row.indexed_revisions}
                               for n, c, d in rows[(page - 1) * per:page * per]]


def test_list_branches_newest_first_and_only_main_indexed(world):
    got = json.loads(ok(world, "list_branches", repo=DEMO))["branches"]
    assert [(b["name"], b["isDefault"], b["isIndexed"]) for b in got] == [("feature", False, False),
                                                                          ("main", True, True)]


@pytest.mark.parametrize("args, message", [({"repo": "github.com/nope/nope"}, "list_repos"),
                                           ({"repo": DEMO, "perPage": 101}, "perPage"), ({"repo": DEMO, "page": 0}, "page"),
                                           ({}, "repo")])
def test_list_branches_bad_input(world, args, message):
    assert message in err(world, "list_branches", **args)


def test_get_diff(world):
    text = ok(world, "get_diff", repo=DEMO, base="v1.0", head="main")
    assert "--- a/docs/guide.md\n+++ /dev/null" in text
    assert "--- /dev/null\n+++ b/src/new.py" in text
    assert "+        if not body:" in text
    assert re.search(r"^@@ -\d+,\d+ \+\d+,\d+ @@", text, re.M)
    assert "No differences" in ok(world, "get_diff", repo=DEMO, base="main", head="main")
    assert "not found" in err(world, "get_diff", repo=DEMO, base="v9", head="main").lower()
    assert err(world, "get_diff", repo=DEMO, base="-p", head="main")


def git_diff_text(world, repo: str, base: str, head: str, *paths: str) -> str:
    """``git diff`` itself without the lines get_diff leaves out (index, modes, similarity)."""
    out = git(world, repo, "-c", "core.quotePath=false", "diff", "--no-color", "-M", base, head, "--", *paths)
    skip = ("index ", "new file mode", "deleted file mode", "old mode", "new mode", "similarity index")
    return "".join(line for line in out.splitlines(keepends=True) if not line.startswith(skip))


@pytest.mark.parametrize("repo, base, head, path", [
    (DEMO, "v1.0", "main", "src"), (DEMO, "v1.0", "main", "src/app.py"), (DEMO, "v1.0", "main", "src/new.py"),
    (DEMO, "v1.0", "main", "docs"), (DEMO, "main", "feature", "src/feature.py"), (DEMO, "v1.0", "feature", "src/"),
])
def test_get_diff_path_equals_git_diff(world, repo, base, head, path):
    text = ok(world, "get_diff", repo=repo, base=base, head=head, path=path)
    assert text == git_diff_text(world, repo, base, head, path) != ""
    assert text in ok(world, "get_diff", repo=repo, base=base, head=head)  # a part of the whole diff


def test_get_diff_path_without_changes(world):
    assert ok(world, "get_diff", repo=DEMO, base="v1.0", head="main", path="README.md") == \
        f"No differences between v1.0 and main in {DEMO} under README.md."
    assert git_diff_text(world, DEMO, "v1.0", "main", "README.md") == ""


# ---------------------------------------------------------------------- grep groupByRepo


def repo_counts(found: set[tuple[str, str, int]]) -> dict[str, tuple[int, int]]:
    """(matching lines, matching files) per repository of a brute-force grep."""
    out = {}
    for repo in {r for r, _, _ in found}:
        mine = [f for f in found if f[0] == repo]
        out[repo] = (len(mine), len({p for _, p, _ in mine}))
    return out


@pytest.mark.parametrize("pattern, args, repos, path_filter", [
    ("return", {}, None, None),
    (r"def \w+", {}, None, None),
    ("token_", {}, None, None),
    ("upper", {"repo": DEMO}, [DEMO], None),
    ("handle_request", {"path": "src"}, None, lambda p: p.startswith("src/")),
    ("Widget", {"include": "*.py"}, None, lambda p: p.endswith(".py")),
    ("nothing_matches_this", {}, None, None),
])
def test_grep_group_by_repo_counts_per_repository(world, pattern, args, repos, path_filter):
    dirs = {r: d for r, d in world["git_dirs"].items() if repos is None or r in repos}
    want = repo_counts(brute_grep(dirs, pattern, path_filter=path_filter or (lambda p: True)))
    text = ok(world, "grep", pattern=pattern, groupByRepo=True, **args)
    if not want:
        assert text == "No files found"
        return
    lines = text.split("\n")
    n = len(want)
    assert lines[0] == f"Found matches in {n} {'repository' if n == 1 else 'repositories'}:"
    assert sorted(lines[1:]) == sorted(
        f"  {r}: {m} {'match' if m == 1 else 'matches'} in {f} {'file' if f == 1 else 'files'}"
        for r, (m, f) in want.items())


def test_grep_group_by_repo_at_a_ref_git_answers(world):
    want = repo_counts(brute_grep({DEMO: world["git_dirs"][DEMO]}, "def ", ref="feature"))
    text = ok(world, "grep", pattern="def ", repo=DEMO, ref="feature", groupByRepo=True)
    (m, f), = want.values()
    assert text == f"Found matches in 1 repository:\n  {DEMO}: {m} matches in {f} files"


def test_grep_group_by_repo_limit_counts_files_and_says_so(world):
    text = ok(world, "grep", pattern="token_", groupByRepo=True, limit=3)
    assert text.split("\n")[1] == f"  {DEMO}: 240 matches in 3 files" and "Results truncated" in text


# ---------------------------------------------------------------------- the answer budget


def test_a_grep_over_the_budget_is_cut_at_a_line_with_a_hint(world):
    found = brute_grep(world["git_dirs"], "token_")
    files = sorted({(r, p) for r, p, _ in found})
    # the whole answer, from the oracle: header, then per file a blank line, its header, at most 50 lines, a note
    whole_lines, whole_size = 1, len(f"Found {len(found)} matches in {len(files)} files")
    for r, p in files:
        lines = sorted(n for rr, pp, n in found if (rr, pp) == (r, p))
        shown = lines[:50]
        text = git_show(world["git_dirs"][r], "main", p).decode().split("\n")
        whole_lines += 2 + len(shown) + (len(lines) > 50)
        whole_size += 2 + len(f"[{r}] {p}:") + sum(1 + len(f"  {n}: {text[n - 1]}") for n in shown)
        whole_size += (1 + len(f"  … {len(lines) - 50} more matching line{'s' if len(lines) > 51 else ''} in this file")) \
            if len(lines) > 50 else 0
    assert whole_size > 2 * ANSWER_BUDGET

    answer = ok(world, "grep", pattern="token_", limit=1000)
    assert len(answer.encode()) <= ANSWER_BUDGET
    lines = answer.split("\n")
    hint = CUT_HINT.match(lines[-1])
    assert hint and lines[-2] == "", lines[-3:]
    assert int(hint.group(2)) == whole_lines and int(hint.group(1)) == len(lines) - 2
    assert "Narrow it with path, include or repo" in hint.group(3) and "groupByRepo" in hint.group(3)
    assert lines[0] == f"Found {len(found)} matches in {len(files)} files"  # the header still counts everything
    shown = parse_grep(answer)
    assert shown and shown <= found
    for line in lines[1:-2]:  # every line shown is whole: the cut is between lines
        m = re.match(r"^  (\d+): (.*)$", line)
        if m:
            assert re.fullmatch(r"token_\d\d_\d{3} = alpha beta gamma delta epsilon zeta eta theta", m.group(2))


def test_answers_under_the_budget_are_untouched(world):
    text = ok(world, "grep", pattern="handle_request")
    assert not CUT_HINT.match(text.split("\n")[-1])
    assert parse_grep(text) == brute_grep(world["git_dirs"], "handle_request")


@pytest.mark.parametrize("n_items", [0, 3, 90, 1000])
def test_fit_json_keeps_the_shape_and_whole_items(n_items):
    value = {"commits": [{"hash": f"{i:040x}", "body": "ü" * 120} for i in range(n_items)], "totalCount": 5000}
    text = fit_json(value, "commits", "commits", "narrow with query or path.")
    got = json.loads(text)
    k = len(got["commits"])
    assert len(text.encode()) <= ANSWER_BUDGET and got["commits"] == value["commits"][:k]
    if len(json.dumps(value, ensure_ascii=False).encode()) <= ANSWER_BUDGET:
        assert got == value
    else:
        assert list(got) == ["commits", "totalCount", "note"] and got["totalCount"] == 5000
        assert got["note"].startswith(f"Only the first {k} of the {n_items} commits on this page fit")
        assert got["note"].endswith(f"(perPage={k}) and page through, or narrow with query or path.")
        bigger = {**value, "commits": value["commits"][:k + 1], "note": got["note"]}
        assert len(json.dumps(bigger, ensure_ascii=False).encode()) > ANSWER_BUDGET  # as many as fit


@pytest.mark.parametrize("text, cut", [
    ("short\nanswer", False),
    ("\n".join(f"line {i}" for i in range(5000)), True),
    ("one line of " + "é" * 30000, True),  # longer than the budget: cut inside, at a character
])
def test_fit_text(text, cut):
    out = fit_text(text, "Ask for less.")
    assert len(out.encode()) <= ANSWER_BUDGET
    if not cut:
        assert out == text
        return
    body, hint = out.rsplit("\n\n", 1)
    m = CUT_HINT.match(hint)
    assert m and m.group(3) == "Ask for less." and int(m.group(2)) == text.count("\n") + 1
    assert text.startswith(body)


# ---------------------------------------------------------------------- symbols, repos, models


def test_symbols(world):
    defs = ok(world, "find_symbol_definitions", symbol="handle_request", repo=DEMO)
    assert parse_grep(defs) == {(DEMO, "src/app.py", 4)}
    assert defs.startswith("Found 1 definition in 1 file")
    refs = ok(world, "find_symbol_references", symbol="shout", repo=DEMO)
    assert parse_grep(refs) == brute_grep({DEMO: world["git_dirs"][DEMO]}, r"\bshout\b")
    assert "No definition" in ok(world, "find_symbol_definitions", symbol="nothing_here", repo=DEMO)
    assert "list_repos" in err(world, "find_symbol_definitions", symbol="x", repo="nope")


REPO_KEYS = ["name", "url", "pushedAt", "defaultBranch", "isFork", "isArchived"]


def default_branch_date(world, repo: str) -> datetime:
    """The oracle of pushedAt: ``git log -1 --format=%cI <default branch>``."""
    return when(git(world, repo, "log", "-1", "--format=%cI", "main").strip())


def test_list_repos_is_sourcebots_shape_with_pushed_at_from_git(world):
    got = json.loads(ok(world, "list_repos"))
    assert list(got) == ["repos", "totalCount"] and got["totalCount"] == 2
    assert [r["name"] for r in got["repos"]] == [DEMO, WIDGETS]
    for item in got["repos"]:
        assert list(item) == REPO_KEYS
        assert item["url"] == f"http://localhost:3000/browse/{item['name']}"  # its page in our web UI
        assert (item["defaultBranch"], item["isFork"], item["isArchived"]) == ("main", False, False)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", item["pushedAt"])
        assert when(item["pushedAt"]) == default_branch_date(world, item["name"])
    # the local repo has no host to report it; the host's claim for widgets lost to its real newest commit;
    # demo's newer feature branch is not its default branch
    by_name = {r["name"]: r for r in got["repos"]}
    assert when(by_name[WIDGETS]["pushedAt"]) != when(HOST_PUSHED_AT)
    assert when(by_name[DEMO]["pushedAt"]) < when(git(world, DEMO, "log", "-1", "--format=%cI", "feature").strip())


@pytest.mark.parametrize("args", [
    {}, {"sort": "name", "direction": "desc"}, {"sort": "pushed"}, {"sort": "pushed", "direction": "desc"},
    {"query": "WIDG"}, {"query": "nothing"}, {"sort": "pushed", "direction": "desc", "perPage": 1, "page": 2},
    {"sort": "pushed", "perPage": 1, "page": 1}, {"perPage": 1, "page": 3},
])
def test_list_repos_sorts_by_real_push_dates_and_pages(world, args):
    repos = [(name, default_branch_date(world, name)) for name in (DEMO, WIDGETS)
             if args.get("query", "").lower() in name.lower()]
    repos.sort(key=lambda r: r[1] if args.get("sort") == "pushed" else r[0], reverse=args.get("direction") == "desc")
    per, page = args.get("perPage", 30), args.get("page", 1)
    got = json.loads(ok(world, "list_repos", **args))
    assert [r["name"] for r in got["repos"]] == [n for n, _ in repos][(page - 1) * per:page * per]
    assert got["totalCount"] == len(repos)


def test_pushed_order_differs_from_name_order(world):
    """The two orders really disagree here, so the sort above is checked, not assumed."""
    pushed = [r["name"] for r in json.loads(ok(world, "list_repos", sort="pushed", direction="desc"))["repos"]]
    names = [r["name"] for r in json.loads(ok(world, "list_repos", sort="name", direction="desc"))["repos"]]
    assert pushed == [DEMO, WIDGETS] and names == [WIDGETS, DEMO]


@pytest.mark.parametrize("args, message", [({"perPage": 101}, "perPage"), ({"sort": "stars"}, "sort"),
                                           ({"page": 0}, "page"), ({"direction": "up"}, "direction"),
                                           ({"page": 10**18}, "page")])  # not a database overflow
def test_list_repos_bad_input(world, args, message):
    assert message in err(world, "list_repos", **args)


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


def test_tool_calls_are_in_the_audit_log(world):
    """Every tool call is recorded with its caller and arguments (`codesearch.audit`)."""
    import time as _time

    marker = "audit_marker_5c2e"
    ok(world, "grep", pattern=marker)
    deadline = _time.monotonic() + 20
    while True:
        events, _ = world["store"].list_audit_events(action="mcp.tool", per_page=500)
        mine = [e for e in events if e.target == "grep" and e.details.get("pattern") == marker]
        if mine or _time.monotonic() > deadline:
            break
        _time.sleep(0.2)
    assert len(mine) == 1 and mine[0].actor != "anonymous" and mine[0].actor_user_id is not None, mine
