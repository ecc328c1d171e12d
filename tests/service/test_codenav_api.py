"""``POST /api/find_definitions``, ``POST /api/find_references`` and ``POST /api/tree`` over real
HTTP against the app with real Ray searchers, checked against oracles that never read the index:
definitions against universal-ctags run on each file, references against a whole-word grep of
every file, trees against ``git ls-tree``. Sourcebot's answer shapes, scopes, caps, bad input."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from codesearch.runtime.searchers import SearcherPool
from codesearch.serving.api import build_app
from tests.asgiserver import serving
from tests.codenavworld import (
    DEMO,
    HOSTILE,
    WIDGETS,
    XSS,
    build_world,
    ctags_definitions,
    word_grep,
)

SYMBOLS = ["Server", "handle_request", "main", "shout", "whisper", "Widget", "Foo", "render", "evil_fn", "VALUE",
           "nothing_is_called_this", XSS, "Demo", "twice"]


@pytest.fixture(scope="module")
def world(ray_session, tmp_path_factory):
    w = build_world(str(tmp_path_factory.mktemp("codenav")))
    pool = SearcherPool.create(w["index"], 2, name_prefix="codenav-api-searcher")
    app = build_app(lambda: pool, get_store=lambda: w["store"], anonymous_access=False, data_dir=w["data"],
                    public_url="http://cs.example")
    with serving(app) as url:
        w["http"] = httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {w['key']}"})
        yield w
        w["http"].close()
    pool.close()
    w["store"].close()


def post(world, route: str, body) -> dict:
    r = world["http"].post(route, json=body)
    assert r.status_code == 200, (route, body, r.text)
    return r.json()


def occurrences(resp: dict) -> set[tuple[str, str, int, int]]:
    return {(f["repository"], f["fileName"], m["range"]["start"]["lineNumber"], m["range"]["start"]["column"])
            for f in resp["files"] for m in f["matches"]}


@pytest.mark.parametrize("name", SYMBOLS)
def test_definitions_are_the_ctags_tags_of_that_name(world, name):
    want = ctags_definitions(world["git_dirs"], name)
    resp = post(world, "/api/find_definitions", {"symbolName": name})
    got = {(r, p, line) for r, p, line, _ in occurrences(resp)}
    assert got == want, name
    assert resp["stats"]["matchCount"] == sum(len(f["matches"]) for f in resp["files"])
    for f in resp["files"]:
        for m in f["matches"]:
            assert name in m["lineContent"] and "\n" not in m["lineContent"]
            line = m["range"]["start"]["lineNumber"]
            text = subprocess.run(["git", "--git-dir", world["git_dirs"][f["repository"]], "show", f"main:{f['fileName']}"],
                                  capture_output=True, check=True).stdout.decode().split("\n")[line - 1]
            assert m["lineContent"] == text


@pytest.mark.parametrize("name", SYMBOLS)
def test_references_are_a_whole_word_grep(world, name):
    want = word_grep(world["git_dirs"], name)
    resp = post(world, "/api/find_references", {"symbolName": name})
    assert occurrences(resp) == want, name
    # grouped by file: each file once
    keys = [(f["repository"], f["fileName"]) for f in resp["files"]]
    assert len(keys) == len(set(keys))


def test_answers_have_sourcebots_shape(world):
    resp = post(world, "/api/find_references", {"symbolName": "shout", "language": "Python"})
    assert set(resp) >= {"stats", "files", "repositoryInfo"}
    f = resp["files"][0]
    assert set(f) == {"fileName", "repository", "repositoryId", "webUrl", "language", "matches"}
    assert f["webUrl"].startswith("http://cs.example/browse/")
    m = f["matches"][0]
    assert set(m) == {"lineContent", "range"}
    assert set(m["range"]["start"]) == {"byteOffset", "lineNumber", "column"}
    assert {r["id"] for r in resp["repositoryInfo"]} == {f["repositoryId"] for f in resp["files"]}


SCOPES = [
    # (body beyond symbolName, kept)
    ({"repoName": DEMO}, lambda r, p: r == DEMO),
    ({"repoName": WIDGETS}, lambda r, p: r == WIDGETS),
    ({"language": "Python"}, lambda r, p: p.endswith(".py")),
    ({"language": "Markdown"}, lambda r, p: p.endswith(".md")),
    ({"repoName": DEMO, "language": "Python"}, lambda r, p: r == DEMO and p.endswith(".py")),
    ({"revisionName": "main"}, lambda r, p: True),
    ({"revisionName": "HEAD"}, lambda r, p: True),
    ({"revisionName": "no-such-branch"}, lambda r, p: False),
    ({"repoName": "git.local/demo.*"}, lambda r, p: False),  # a name, not a pattern
]


@pytest.mark.parametrize("extra,kept", SCOPES)
def test_scopes_narrow_the_answer_exactly(world, extra, kept):
    for name in ("handle_request", "shout"):
        want = {o for o in word_grep(world["git_dirs"], name) if kept(o[0], o[1])}
        assert occurrences(post(world, "/api/find_references", {"symbolName": name, **extra})) == want, (name, extra)
        want = {o for o in ctags_definitions(world["git_dirs"], name) if kept(o[0], o[1])}
        got = {(r, p, n) for r, p, n, _ in occurrences(post(world, "/api/find_definitions", {"symbolName": name, **extra}))}
        assert got == want, (name, extra)


def test_the_typescript_family_is_searched_together(world):
    resp = post(world, "/api/find_definitions", {"symbolName": "render", "language": "JavaScript"})
    assert {(f["repository"], f["fileName"]) for f in resp["files"]} == {(WIDGETS, "web/index.ts")}


def test_answers_are_capped(world):
    # `token_00_000`-style names: 960 distinct words; `alpha` occurs on 960 lines of data/gen
    resp = post(world, "/api/find_references", {"symbolName": "alpha"})
    assert resp["stats"]["matchCount"] == 960 and resp["isSearchExhaustive"] is True
    from codesearch.tools import codenav

    assert codenav.MAX_MATCHES == 1000  # Sourcebot's cap; a bigger answer is cut and says so
    assert len(word_grep(world["git_dirs"], "line")) > 1000
    resp = post(world, "/api/find_references", {"symbolName": "line"})
    assert resp["stats"]["matchCount"] == 1000 and resp["isSearchExhaustive"] is False


BAD = [
    ({}, "symbolName"),
    ({"symbolName": ""}, "symbolName"),
    ({"symbolName": 3}, "symbolName"),
    ({"symbolName": "a\nb"}, "control characters (found '\\n' at character 2)"),
    ({"symbolName": "a\tb"}, "control characters"),
    ({"symbolName": "x" * 257}, "symbolName"),
    ({"symbolName": "x", "repoName": 5}, "repoName"),
    ({"symbolName": "x", "language": ["Python"]}, "language"),
    ([], "body"),
]


@pytest.mark.parametrize("body,says", BAD)
def test_bad_bodies_are_400_and_say_what_is_wrong(world, body, says):
    for route in ("/api/find_definitions", "/api/find_references"):
        r = world["http"].post(route, json=body)
        assert r.status_code == 400, (route, body, r.text)
        assert r.json()["errorCode"] == "INVALID_REQUEST_BODY" and says in r.json()["message"], r.text
    r = world["http"].post("/api/find_references", content=b"{not json")
    assert r.status_code == 400 and "not JSON" in r.json()["message"]


def test_without_credentials_nothing_is_answered(world):
    for route in ("/api/find_definitions", "/api/find_references", "/api/tree"):
        r = httpx.post(str(world["http"].base_url) + route, json={"symbolName": "shout"})
        assert r.status_code == 401, route


def ls_tree(world, repo: str, under: str) -> list[tuple[str, str]]:
    out = subprocess.run(["git", "--git-dir", world["git_dirs"][repo], "ls-tree", "-z", "main", "--", under + "/" if under else "."],
                         capture_output=True, check=True).stdout.decode()
    rows = []
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        rows.append((path, "tree" if meta.split()[1] == "tree" else "blob"))
    return rows


def walk(node, acc):
    for c in node["children"]:
        acc[c["path"]] = (c["type"], c["name"], c)
        walk(c, acc)
    return acc


TREES = [
    (DEMO, []),
    (DEMO, ["src"]),
    (DEMO, ["src/util"]),  # its parent comes along
    (DEMO, ["src/util/", "data", "data/gen"]),
    (WIDGETS, ["src/deep/nested"]),
    (HOSTILE, ["docs"]),
]


@pytest.mark.parametrize("repo,paths", TREES)
def test_post_tree_is_ls_tree_of_the_root_and_each_path(world, repo, paths):
    resp = post(world, "/api/tree", {"repoName": repo, "revisionName": "main", "paths": paths})
    root = resp["tree"]
    assert (root["name"], root["path"], root["type"]) == ("root", "", "tree")
    got = walk(root, {})
    expanded = {""}
    for p in paths:
        parts = p.strip("/").split("/")
        expanded |= {"/".join(parts[: i + 1]) for i in range(len(parts))}
    want = {}
    for d in expanded:
        for path, kind in ls_tree(world, repo, d):
            want[path] = kind
    assert {p: t for p, (t, _, _) in got.items()} == want
    for path, (kind, name, node) in got.items():
        assert name == path.rsplit("/", 1)[-1]
        if path not in expanded:
            assert node["children"] == []
        kids = node["children"]
        assert [k["type"] for k in kids] == sorted((k["type"] for k in kids), key=lambda t: t != "tree")


TREE_ERRORS = [
    ({"repoName": DEMO, "revisionName": "main", "paths": ["nope"]}, 404, "FILE_NOT_FOUND"),
    ({"repoName": DEMO, "revisionName": "main", "paths": ["README.md"]}, 404, "FILE_NOT_FOUND"),
    ({"repoName": DEMO, "revisionName": "main", "paths": ["../etc"]}, 404, "FILE_NOT_FOUND"),
    ({"repoName": DEMO, "revisionName": "--upload-pack=x", "paths": []}, 400, "INVALID_GIT_REF"),
    ({"repoName": DEMO, "revisionName": "no-such-ref", "paths": []}, 400, "INVALID_GIT_REF"),
    ({"repoName": "git.local/missing", "revisionName": "main", "paths": []}, 404, "REPOSITORY_NOT_FOUND"),
    ({"repoName": DEMO, "revisionName": "main"}, 400, "INVALID_REQUEST_BODY"),
    ({"repoName": DEMO, "revisionName": "main", "paths": ["a"] * 101}, 400, "INVALID_REQUEST_BODY"),
    ({"repoName": DEMO, "paths": []}, 400, "INVALID_REQUEST_BODY"),
]


@pytest.mark.parametrize("body,status,code", TREE_ERRORS)
def test_post_tree_refuses_what_it_cannot_answer(world, body, status, code):
    r = world["http"].post("/api/tree", json=body)
    assert r.status_code == status, (body, r.text)
    assert r.json()["errorCode"] == code


def test_post_tree_at_a_tag_and_another_branch(world):
    got = walk(post(world, "/api/tree", {"repoName": DEMO, "revisionName": "v1.0", "paths": ["docs"]})["tree"], {})
    assert "docs/guide.md" in got  # deleted on main after v1.0
    got = walk(post(world, "/api/tree", {"repoName": DEMO, "revisionName": "feature", "paths": ["src"]})["tree"], {})
    assert "src/feature.py" in got


def test_the_oracles_are_not_trivial(world):
    """Markup names, several definitions and none at all are all among the cases."""
    defs = {name: ctags_definitions(world["git_dirs"], name) for name in SYMBOLS}
    assert defs[XSS] == {(HOSTILE, "web/page.html", 1)}
    assert len(defs["handle_request"]) == 2 and defs["nothing_is_called_this"] == set() and defs["Demo"] == set()
    assert len(word_grep(world["git_dirs"], "evil_fn")) == 4 and len(defs["twice"]) == 2
