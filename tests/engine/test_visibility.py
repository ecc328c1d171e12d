"""A search that may see only some repositories answers exactly as an index of just those
repositories would (`codesearch.search.visibility`, `SearchOptions.visible_repos`).

Differential: one index of five small repositories, packed into a compound shard, searched with
``visible_repos`` = V, against an index built from the repositories of V alone, for every query
of the table and a sample of subsets V. Files, match ranges and the stats that count files
(candidates, files considered, matches) must agree: hidden repositories may not show in results,
counts or stats, and no ``matches`` cap may fill with their files."""

from __future__ import annotations

import itertools
import os
import random

import pytest

from codesearch.index.builder import IndexSettings
from codesearch.index.manifest import current_index
from codesearch.index.paths import index_paths
from codesearch.search.engine import Searcher
from codesearch.search.options import SearchOptions

REPOS = {
    "alpha": {"net.py": "def fetch(url):\n    return open_url(url)\n\nclass Client:\n    pass\n",
              "README.md": "alpha fetches things\n"},
    "beta": {"fetch.go": "package beta\n\nfunc fetch(u string) error { return nil }\n",
             "notes.txt": "fetch fetch fetch\nClient here\n"},
    "gamma": {"client.py": "class Client:\n    def fetch(self):\n        return 42\n", "secret.py": "TOKEN = 'gamma-only'\n"},
    "delta": {"util.js": "function fetch(x) { return x }\nconst client = 1\n"},
    "epsilon": {"empty.txt": "nothing to see\n", "Fetch.md": "# Fetch\nFETCH in capitals\n"},
}

QUERIES = [  # (query, is_regex, case_sensitive)
    ("fetch", False, False),
    ("Fetch", False, True),
    ("Client", False, False),
    ("fetch or client", False, False),
    ("def\\s+fetch", True, False),
    ("sym:^fetch$", False, False),
    ("sym:Client", False, False),
    ("file:\\.py$ fetch", False, False),
    ("-file:\\.md fetch", False, False),
    ("gamma-only", False, False),
    ("lang:python return", False, False),
    ("no_such_text_anywhere", False, False),
]

#: Stats that count files or matches: equal with and without the hidden repositories' shards.
COUNTING = ("fileCount", "actualMatchCount", "totalMatchCount", "ngramMatches", "filesConsidered",
            "filesLoaded", "shardFilesConsidered")


def _settings() -> IndexSettings:
    return IndexSettings(max_file_size=1 << 20, max_trigram_count=20000)


def _build(root, names, out, compact: bool = False) -> str:
    index_paths([str(root / n) for n in names], str(out), _settings(), compact=compact)
    return str(out)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("visibility")
    for name, files in REPOS.items():
        for path, text in files.items():
            full = root / "repos" / name / path
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text)
    full = _build(root / "repos", list(REPOS), root / "full", compact=True)  # one compound shard
    rng = random.Random(1309)
    subsets = [(), ("gamma",), ("alpha", "beta"), tuple(REPOS)]
    subsets += [tuple(sorted(rng.sample(list(REPOS), k))) for k in (2, 3, 4)]
    subs = {s: _build(root / "repos", s, root / f"sub-{'-'.join(s) or 'none'}") for s in subsets if s}
    return {"root": root, "full": full, "subs": subs, "subsets": subsets}


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _answer(resp: dict) -> list:
    return sorted((_short(f["repository"]), f["fileName"]["text"],
                   tuple((c["contentStart"]["lineNumber"], len(c["matchRanges"])) for c in f["chunks"]))
                  for f in resp["files"])


def _ids(searcher: Searcher, names) -> frozenset[int]:
    return frozenset(r.id for s in searcher.shards for r in s.repos if _short(r.name) in names)


def test_the_full_index_packs_repositories_together(world):
    """What the restriction must handle: hidden and visible repositories in one shard."""
    assert len(current_index(world["full"])) == 1
    assert len(Searcher(world["full"]).shards[0].repos) == len(REPOS)


@pytest.mark.parametrize("query,is_regex,case_sensitive", QUERIES)
def test_a_restricted_search_equals_an_index_of_the_visible_repositories(world, query, is_regex, case_sensitive):
    full = Searcher(world["full"])
    for subset in world["subsets"]:
        options = dict(matches=10**6, is_regex=is_regex, case_sensitive=case_sensitive)
        got = full.search(query, options=SearchOptions(**options, visible_repos=_ids(full, subset)))
        if not subset:
            assert got["files"] == [] and got["repositoryInfo"] == [], got
            assert all(got["stats"][k] == 0 for k in COUNTING), got["stats"]
            continue
        want = Searcher(world["subs"][subset]).search(query, options=SearchOptions(**options))
        assert _answer(got) == _answer(want), (query, subset)
        assert {k: got["stats"][k] for k in COUNTING} == {k: want["stats"][k] for k in COUNTING}, (query, subset)
        assert {_short(r["name"]) for r in got["repositoryInfo"]} == {_short(r["name"]) for r in want["repositoryInfo"]}


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_a_cap_never_fills_with_hidden_files(world, cap):
    """With a small ``matches``, the visible repositories' files fill the answer, as many as
    without the hidden ones (which match more, and would come first in the shard)."""
    full = Searcher(world["full"])
    for subset in world["subsets"]:
        if not subset:
            continue
        visible = _ids(full, subset)
        got = full.search("fetch", options=SearchOptions(matches=cap, visible_repos=visible))
        want = Searcher(world["subs"][subset]).search("fetch", options=SearchOptions(matches=cap))
        assert {_short(f["repository"]) for f in got["files"]} <= set(subset)
        assert got["stats"]["actualMatchCount"] == want["stats"]["actualMatchCount"], subset
        assert got["isSearchExhaustive"] == want["isSearchExhaustive"], subset


def test_explain_counts_only_visible_documents(world):
    from codesearch.search.engine import make_plan
    from codesearch.search.explain import explain
    from codesearch.search.visibility import visible_shards

    full = Searcher(world["full"])
    for subset in world["subsets"]:
        options = SearchOptions(visible_repos=_ids(full, subset))
        got = explain(make_plan("fetch", options), visible_shards(list(full.shards), options.visible_repos))
        if subset:
            sub = Searcher(world["subs"][subset])
            want = explain(make_plan("fetch", SearchOptions()), list(sub.shards))
            assert got["documents"] == want["documents"], subset
        else:
            assert got["documents"] == 0 and got["shards"] == []


def test_every_subset_of_two_repositories_sees_only_them(world):
    """Exhaustively over pairs: no file, repository or count of a third repository shows."""
    full = Searcher(world["full"])
    for pair in itertools.combinations(REPOS, 2):
        got = full.search("fetch or client or nothing", options=SearchOptions(matches=10**6, visible_repos=_ids(full, pair)))
        assert {_short(f["repository"]) for f in got["files"]} <= set(pair)
        assert {_short(r["name"]) for r in got["repositoryInfo"]} <= set(pair)
        docs = sum(len(files) for name, files in REPOS.items() if name in pair)
        assert got["stats"]["shardFilesConsidered"] == docs, pair
