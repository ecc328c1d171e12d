"""`codesearch.Client` over its three back ends (in-process, HTTP against Serve, the Ray
searchers directly): the same answers, checked against a brute-force grep and the repos' git
data, and the same exceptions."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from codesearch import Client
from codesearch.errors import FileNotFound, InvalidGitRef, NotAuthenticated, QueryError, RepositoryNotFound
from tests.mcpworld import DEMO, WIDGETS, brute_grep, build, git_files, git_show, publish_as_a_service

PREFIX = "client-test-searcher"
BACKENDS = ["local", "http", "ray"]


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    w = build(str(tmp_path_factory.mktemp("client")))
    pool = SearcherPool.create(w["index"], 2, name_prefix=PREFIX)
    publish_as_a_service(PREFIX, w, len(pool.actors))
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=False, data_dir=w["data"]),
              name="client-test", route_prefix="/client-test")
    w["clients"] = {"local": Client.local(w["data"]), "http": Client.http(f"{serve_url}/client-test", w["key"]),
                    "ray": Client.ray(PREFIX)}
    w["serve_url"] = serve_url
    yield w
    for c in w["clients"].values():
        c.close()
    serve.delete("client-test")
    pool.close()
    w["store"].close()


@pytest.fixture(params=BACKENDS)
def cs(request, world):
    return world["clients"][request.param]


def _lines(result) -> set[tuple[str, str, int]]:
    return {(m.repo, m.path, m.line) for m in result}


@pytest.mark.parametrize("query, regex, pattern", [
    ("handle_request", False, "handle_request"),
    (r'"def \w+"', True, r"def \w+"),  # quoted: a space separates terms
    ("upper|lower", True, "upper|lower"),
    ("Widget", False, "(?i)widget"),
])
def test_search_equals_brute_force_on_every_backend(cs, world, query, regex, pattern):
    res = cs.search(query, regex=regex, matches=10_000)
    assert res.exhaustive
    assert _lines(res) == brute_grep(world["git_dirs"], pattern)


def test_matches_are_typed_and_highlighted(cs):
    res = cs.search("handle_request", matches=100)
    m = next(m for m in res if m.repo == WIDGETS)
    assert (m.path, m.branch, m.line, m.column, m.language) == ("src/widget.py", "refs/heads/main", 4, 9, "Python")
    assert m.text == "    def handle_request(self):"
    assert m.text[m.span[0]:m.span[1]] == "handle_request"
    df = res.to_pandas()
    assert list(df.columns) == ["repo", "path", "branch", "line", "column", "text", "language"]
    assert len(df) == len(res) and set(df["repo"]) == {DEMO, WIDGETS}
    html = res._repr_html_()
    assert "<mark>handle_request</mark>" in html and "<table>" in html


def test_streamed_chunks_add_up_to_the_search(cs):
    whole = cs.search("return", matches=10_000)
    chunks = list(cs.search("return", matches=10_000, stream=True))
    assert chunks and set().union(*(_lines(c) for c in chunks)) == _lines(whole)
    capped = list(cs.search("return", matches=5, stream=True))
    assert sum(len(c) for c in capped) <= 5


def test_explain_is_the_same_everywhere(world):
    ex = {name: c.explain("handle_request lang:python") for name, c in world["clients"].items()}
    first = ex["local"]
    assert "handle_request" in first["query"] and "and" in first["plan"]
    assert 0 < first["candidates"] < first["documents"]
    # the content those candidates hold: what a search would verify at most, and then did
    resp = world["clients"]["local"].search("handle_request lang:python", matches=10**6)
    assert first["candidateBytes"] >= resp.stats["contentBytesLoaded"] > 0
    for other in ex.values():
        assert (other["plan"], other["candidates"], other["candidateBytes"], other["documents"]) == (
            first["plan"], first["candidates"], first["candidateBytes"], first["documents"])
        assert all(s["trigramLookups"] > 0 or s["skipped"] for s in other["shards"])
    assert "candidates" in repr(first)


def test_repos_files_trees_commits(cs, world):
    assert [r.name for r in cs.repos()] == [DEMO, WIDGETS]
    assert [r.name for r in cs.repos("widg")] == [WIDGETS]
    f = cs.read_file(DEMO, "src/app.py")
    assert f.text == git_show(world["git_dirs"][DEMO], "main", "src/app.py").decode() and f.language == "Python"
    assert "Guide" in cs.read_file(DEMO, "docs/guide.md", ref="v1.0").text
    assert cs.read_file(WIDGETS, "web/index.ts").text.startswith("export function render")
    entries = cs.tree(DEMO, "src", depth=2)
    assert [(e.path, e.is_dir) for e in entries] == [("src/util", True), ("src/util/__init__.py", False),
                                                     ("src/util/strings.py", False), ("src/app.py", False),
                                                     ("src/new.py", False)]
    commits = cs.commits(DEMO, ref="feature")
    assert [c.message for c in commits] == ["Feature work", "Fix: handle empty input", "Initial import"]
    assert "feature" in commits[0].refs and "HEAD" not in commits[0].refs  # branch and tag names, either way
    assert [c.author_name for c in cs.commits(DEMO, author="bob")] == ["Bob"]


@pytest.mark.parametrize("call, error", [
    (lambda c: c.search("(foo", regex=True), QueryError),
    (lambda c: c.search("archived:maybe"), QueryError),
    (lambda c: c.read_file("github.com/nope/nope", "x"), RepositoryNotFound),
    (lambda c: c.read_file(DEMO, "../etc/passwd"), FileNotFound),
    (lambda c: c.read_file(DEMO, "nope.py"), FileNotFound),
    (lambda c: c.read_file(DEMO, "src/app.py", ref="-x"), InvalidGitRef),
    (lambda c: c.read_file(DEMO, "src/app.py", ref="nope"), InvalidGitRef),
    (lambda c: c.tree(DEMO, "nope"), FileNotFound),
])
def test_the_same_exceptions_on_every_backend(cs, call, error):
    with pytest.raises(error):
        call(cs)


def test_a_bad_api_key_is_not_authenticated(world):
    with Client.http(f"{world['serve_url']}/client-test", "cs_wrong") as bad, pytest.raises(NotAuthenticated):
        bad.search("x")


def test_a_bare_index_directory(tmp_path):
    """`codesearch index` output: repos from the shards, files from the local repo's own git, and
    repository text shown as text in HTML."""
    from codesearch.index.paths import index_paths
    from tests.corpus import git

    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "page.html").write_text("<script>alert('x')</script>\n")
    (repo / "main.py").write_text("print('hello')\n")
    git(str(repo), "init", "-q", "-b", "main")
    git(str(repo), "add", "-A")
    git(str(repo), "commit", "-q", "-m", "init")
    index_paths([str(repo)], str(tmp_path / "index"))
    with Client.local(str(tmp_path / "index")) as cs:
        name = str(repo).strip("/")
        assert [r.name for r in cs.repos()] == [name]
        res = cs.search("alert")
        assert [(m.path, m.line) for m in res] == [("page.html", 1)]
        assert "<script>" not in res._repr_html_() and "&lt;script&gt;" in res._repr_html_()
        assert cs.read_file(name, "main.py").text == "print('hello')\n"
        assert [c.message for c in cs.commits(name)] == ["init"]
        assert cs.explain("alert")["candidates"] == 1
