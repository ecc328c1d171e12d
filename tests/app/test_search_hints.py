"""Zero-result hints, parse-error positions and ``GET /api/suggest`` over real HTTP on 127.0.0.1.

The app is `build_app` over the engine's own `Searcher` on the test corpus (tests/corpus.py: one
git repository and one plain directory), served by uvicorn; the store knows both repositories by
their index names plus one more that nothing is indexed for. Each table row is a query, what the
answer's ``hints`` must say, and the fixed query a suggestion offers, which is then searched to
check that it does find files (a hint that offers a fix must offer one that works).

Hints are computed only for a request that asks (``withHints: true``, as the search page does):
an API client that does not ask gets Sourcebot's answer and pays for nothing but its search (one
search, no store read); one that asks pays the store read of repository names only for a query
with a ``repo:`` term. The searcher and the store are the real ones, each seen through a
`Counted` wrapper that counts the calls the app makes.
"""

from __future__ import annotations

import json

import httpx
import pytest

from codesearch.serving.api import build_app
from codesearch.store import Store
from tests.asgiserver import serving


class Counted:
    """`target` with the calls of the methods named in `counted` counted (in `calls`)."""

    def __init__(self, target, *counted):
        self._target = target
        self._counted = set(counted)
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name):
        value = getattr(self._target, name)
        if name not in self._counted:
            return value

        def call(*args, **kwargs):
            self.calls.append((name, args))
            return value(*args, **kwargs)

        return call


@pytest.fixture(scope="module")
def api(indexed_corpus, tmp_path_factory):
    data = str(tmp_path_factory.mktemp("hints") / "data")
    store = Store.open(data)
    store.create_user("owner@example.com", "Owner")
    store.upsert_connection("local", "git", {"type": "git", "url": "file:///x"})
    names = [indexed_corpus["repo_name"], indexed_corpus["plain_name"], "git.example.com/team/payments-service"]
    store.upsert_repos("local", [dict(name=n, code_host_type="genericGitHost", clone_url="file:///x/" + str(i),
                                      default_branch="main") for i, n in enumerate(names)])
    searcher = Counted(indexed_corpus["searcher"], "start", "search")
    counted_store = Counted(store, "repo_names", "list_repos")
    app = build_app(lambda: searcher, get_store=lambda: counted_store, anonymous_access=True, data_dir=data,
                    contexts={"backend": {indexed_corpus["repo_name"]}, "web-ui": {indexed_corpus["plain_name"]}})
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as http:
        yield {"http": http, "names": names, "searches": searcher.calls, "store_reads": counted_store.calls,
               **indexed_corpus}
    store.close()


def _search(api, query, hints=True, **flags):
    body = {"query": query, "matches": 50, "isRegexEnabled": flags.get("regex", False),
            "isCaseSensitivityEnabled": flags.get("case", False), **({"withHints": True} if hints else {})}
    return api["http"].post("/api/search", json=body)


def _final(api, query, hints=True, **flags):
    body = {"query": query, "matches": 50, "isRegexEnabled": flags.get("regex", False),
            **({"withHints": True} if hints else {})}
    r = api["http"].post("/api/stream_search", json=body)
    assert r.status_code == 200, r.text
    events = [json.loads(line[6:]) for line in r.text.split("\n\n") if line.startswith("data: {")]
    return next(e for e in events if e["type"] == "final")


#: query → (hint kind, words the message must hold, label of the first suggestion or None,
#:          whether that suggestion's query finds files)
HINTS = [
    ("handler lang:pyhton", "unknownLanguage", ["no language named pyhton", "did you mean", "Python"], "Python", True),
    ("handler language:Pyton", "unknownLanguage", ["no language named Pyton", "Python"], "Python", True),
    ("handler lang:cobol", "languageNotIndexed", ["no file you can search is written in COBOL"],
     "search without lang:cobol", True),
    ("handler repo:nonexistent", "unknownRepository", ["no repository you can search matches repo:nonexistent"],
     None, None),
    # a repository the caller may see, with no such file: not "unknown", the filter emptied it
    ("handler repo:payment", "filterEmptied", ["repo:payment left no results"], "search without repo:payment", True),
    ("handler r:gitrepp", "unknownRepository", ["did you mean", "gitrepo"], "gitrepo", True),
    ("handler file:zzznothing", "filterEmptied", ["file:zzznothing left no results"],
     "search without file:zzznothing", True),
    ("Handler1 path:\\.go$", "filterEmptied", ["path:\\.go$ left no results"], "search without path:\\.go$", True),
    ("Foo3 lang:python", "filterEmptied", ["lang:python left no results"], "search without lang:python", True),
    ("nomatchzzz", None, None, None, None),  # nothing to drop: no hint
    ("nomatchzzz or zzznomatch", None, None, None, None),
]


@pytest.mark.parametrize("query,kind,words,label,works", HINTS)
def test_zero_result_hints(api, query, kind, words, label, works):
    r = _search(api, query)
    assert r.status_code == 200, r.text
    resp = r.json()
    assert resp["files"] == []
    hints = resp["hints"]
    assert [h["kind"] for h in hints] == ([kind] if kind else []), hints
    if kind is None:
        return
    hint = hints[0]
    for w in words:
        assert w in hint["message"], hint
    if label is not None:
        first = hint["suggestions"][0]
        assert label in first["label"], hint
        fixed = _search(api, first["query"]).json()
        assert bool(fixed["files"]) == works, (first["query"], fixed.get("hints"))
    # the stream's final event carries the same hints
    assert _final(api, query).get("hints") == hints


def test_a_search_that_finds_files_has_no_hints(api):
    resp = _search(api, "Handler1").json()
    assert resp["files"] and "hints" not in resp
    assert "hints" not in _final(api, "Handler1")


#: (query, withHints) → searches the request runs, whether it reads the repository names, whether
#: the answer has ``hints``: without the flag an empty search is one search and Sourcebot's answer
#: (no ``hints`` field); with it, the re-searches and store read that its hints need, and no more
WHAT_HINTS_COST = [
    ("handler file:zzznothing", False, 1, False, False),
    ("handler repo:nonexistent", False, 1, False, False),
    ("handler lang:cobol", False, 1, False, False),
    ("nomatchzzz", False, 1, False, False),
    ("nomatchzzz", True, 1, False, True),  # nothing to judge or drop: no store read, no re-search
    ("handler file:zzznothing", True, 2, False, True),  # the search, then one without file:
    ("handler lang:cobol", True, 2, False, True),  # the search, then is any file in COBOL
    ("handler repo:nonexistent", True, 1, True, True),  # the names say it: no re-search
    ("Handler1", True, 1, False, False),  # found files: nothing more, whatever was asked
]


@pytest.mark.parametrize("query,asked,searches,reads_names,has_hints", WHAT_HINTS_COST)
@pytest.mark.parametrize("route", ["/api/search", "/api/stream_search"])
def test_hints_cost_only_who_asks(api, route, query, asked, searches, reads_names, has_hints):
    api["searches"].clear()
    api["store_reads"].clear()
    answer = _search(api, query, hints=asked).json() if route == "/api/search" else _final(api, query, hints=asked)
    assert ("hints" in answer) == has_hints, answer
    assert len(api["searches"]) == searches, api["searches"]
    assert bool(api["store_reads"]) == reads_names, api["store_reads"]
    assert all(name == "repo_names" for name, _ in api["store_reads"]), api["store_reads"]


def test_with_hints_must_be_a_boolean(api):
    r = api["http"].post("/api/search", json={"query": "nomatchzzz", "matches": 5, "withHints": "yes"})
    assert r.status_code == 400
    assert "withHints" in r.json()["message"]


#: query, regex mode → 0-based position of the problem in the query, words of the message
PARSE_ERRORS = [
    ("foo (bar", True, 4, "missing )"),
    ("ok foo(bar", True, 6, "missing )"),
    ("handler file:a[b", False, 14, "missing ]"),
    ("handler /a(b/", False, 10, 'quote it: "/a(b/"'),
    ("x archived:maybe", False, 11, "expected yes, no or only"),
]


@pytest.mark.parametrize("query,regex,position,words", PARSE_ERRORS)
def test_parse_errors_say_where(api, query, regex, position, words):
    for r in (_search(api, query, regex=regex),
              api["http"].post("/api/stream_search", json={"query": query, "matches": 5, "isRegexEnabled": regex})):
        assert r.status_code == 400
        err = r.json()
        assert err["errorCode"] == "FAILED_TO_PARSE_QUERY" and err["statusCode"] == 400
        assert err["position"] == position, err
        assert words in err["message"] and f"at character {position + 1}" in err["message"]


def test_aliases_find_what_sourcebot_spellings_find(api):
    for ours, theirs in (("path:\\.go$ Foo3", "file:\\.go$ Foo3"), ("language:Go main", "lang:Go main"),
                         ("/Handler\\d/ lang:python", "Handler lang:python")):
        a = {(f["repository"], f["fileName"]["text"]) for f in _search(api, ours).json()["files"]}
        b = {(f["repository"], f["fileName"]["text"]) for f in _search(api, theirs).json()["files"]}
        assert a and a == b, (ours, theirs)


def _suggest(api, **params):
    return api["http"].get("/api/suggest", params=params)


SUGGEST = [
    # kind, q, what the first suggestions must be (in order), what must not be there
    ("lang", "py", ["Python"], []),
    ("lang", "type", ["TypeScript"], []),
    ("lang", "GO", ["Go"], []),
    ("repo", "payments", ["git.example.com/team/payments-service"], []),
    ("repo", "plain", None, ["git.example.com/team/payments-service"]),
    ("context", "", ["backend", "web-ui"], []),
    ("context", "web", ["web-ui"], ["backend"]),
    ("file", "handler.", ["src/handler.c"], []),
    ("sym", "Handler", None, []),
    ("file", "zzz-none", [], []),
]


@pytest.mark.parametrize("kind,q,first,absent", SUGGEST)
def test_suggest(api, kind, q, first, absent):
    r = _suggest(api, kind=kind, q=q)
    assert r.status_code == 200, r.text
    got = [s["value"] for s in r.json()["suggestions"]]
    if first is not None:
        assert got[: len(first)] == first, got
    for a in absent:
        assert a not in got
    pairs = [(s["value"], s["detail"]) for s in r.json()["suggestions"]]
    assert len(pairs) == len(set(pairs)) <= 10


def test_suggest_symbols_start_with_what_was_typed(api):
    got = [s["value"] for s in _suggest(api, kind="sym", q="Handler").json()["suggestions"]]
    assert got and all(v.lower().startswith("handler") for v in got) and "Handler1" in got  # case as typed or not


def test_suggest_repo_prefers_names_that_start_with_the_text(api):
    plain = api["plain_name"]
    tail = plain.rsplit("/", 1)[-1]
    got = [s["value"] for s in _suggest(api, kind="repo", q=tail[:3]).json()["suggestions"]]
    assert got[0] == plain


BAD_SUGGEST = [
    ({"kind": "colour", "q": "x"}, "kind: must be one of repo, lang, context, file, sym"),
    ({"kind": "repo", "q": "x" * 201}, "q: at most 200 characters"),
    ({"kind": "repo", "q": "x", "limit": 0}, "limit: must be between 1 and 50"),
]


@pytest.mark.parametrize("params,message", BAD_SUGGEST)
def test_suggest_refuses_bad_parameters(api, params, message):
    r = _suggest(api, **params)
    assert r.status_code == 400
    assert message in r.json()["message"]


def test_suggest_needs_a_kind(api):
    r = api["http"].get("/api/suggest", params={"q": "x"})
    assert r.status_code == 400 and "kind" in r.json()["message"]


#: an unknown context → words of the 404's message (the contexts are backend and web-ui)
CONTEXTS = [
    ("context:backnd handler", "search context 'backnd' not found; did you mean 'backend'?"),
    ("context:webui handler", "did you mean 'web-ui'?"),
    ("context:zzzzzz handler", "search context 'zzzzzz' not found"),
]


@pytest.mark.parametrize("query,words", CONTEXTS)
def test_an_unknown_context_suggests_close_names(api, query, words):
    for r in (_search(api, query), api["http"].post("/api/stream_search", json={"query": query, "matches": 5})):
        assert r.status_code == 404
        body = r.json()
        assert body["errorCode"] == "SEARCH_CONTEXT_NOT_FOUND" and words in body["message"], body
        if "zzzzzz" in query:
            assert "did you mean" not in body["message"]
