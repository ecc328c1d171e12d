"""The results page's budget of files as well as matches (`SearchOptions.file_matches`, issue 29
item 1): a file keeps at most `file_matches` match ranges, counts the rest (``moreMatches``), and
the `matches` budget goes on to other files. Without it (the HTTP API) nothing changes: the
defining file's matches spend the whole budget, as Sourcebot's `matches` says.

The expected counts come from a brute-force scan of the files written here (`re.finditer`)."""

from __future__ import annotations

import re

import pytest

from codesearch.index.builder import IndexSettings, index_source
from codesearch.index.sources import GitSource, RepoInfo
from codesearch.search.engine import Searcher
from codesearch.search.options import MAX_COUNTED_PER_FILE, SearchOptions
from tests.corpus import make_local_repo

#: The defining file has hundreds of whole-word matches (it ranks first); thirty others a few
#: partial-word matches each; one more than the count limit.
FILES = {
    "db/models/query.py": "class QuerySet:\n" + "".join(f"    def m{i}(self): return QuerySet()\n" for i in range(300)),
    **{f"app{i:02d}/views.py": f"from db import QuerySetMixin\nx{i} = QuerySetMixin\n" for i in range(30)},
    "gen/huge.txt": "QuerySets " * (MAX_COUNTED_PER_FILE + 200) + "\n",
    "README.md": "nothing here\n",
}


def brute_force(word: str) -> dict[str, int]:
    """Matches per file, in its content and its name."""
    return {path: n for path, text in FILES.items() if (n := len(re.findall(re.escape(word), path + "\n" + text)))}


@pytest.fixture(scope="module")
def searcher(tmp_path_factory):
    base = tmp_path_factory.mktemp("file-matches")
    repo = make_local_repo(str(base / "repo"), FILES)
    index_dir = str(base / "index")
    index_source(GitSource(repo, repo=RepoInfo(name="git.example.com/t/orm", id=1)), index_dir, IndexSettings())  # (the tests' settings skip files over 6 KB)
    s = Searcher(index_dir)
    yield s
    s.close()


def shown(f: dict) -> int:
    return len(f["fileName"]["matchRanges"]) + sum(len(c["matchRanges"]) for c in f["chunks"])


@pytest.mark.parametrize("matches,per_file,files_listed", [
    (100, 5, 32),    # every file: 5 + 30 × 2 + 5 = 70 ranges shown, under the budget
    (40, 5, None),   # the budget ends the list: about 40 ranges over many files, not one file
    (100, 1, 32),
    (1000, 5, 32),
])
def test_a_file_keeps_a_few_matches_and_counts_the_rest(searcher, matches, per_file, files_listed):
    expected = brute_force("QuerySet")
    resp = searcher.search("QuerySet", options=SearchOptions(matches=matches, context_lines=1, file_matches=per_file))
    files = {f["fileName"]["text"]: f for f in resp["files"]}
    assert resp["files"][0]["fileName"]["text"] == "db/models/query.py"  # whole words: it ranks first
    if files_listed is not None:
        assert len(files) == files_listed and resp["isSearchExhaustive"]
    else:
        assert len(files) >= matches // (2 * per_file) and not resp["isSearchExhaustive"]
    assert sum(shown(f) for f in files.values()) == resp["stats"]["actualMatchCount"] <= matches
    last = resp["files"][-1]["fileName"]["text"]
    for path, f in files.items():
        if path == last and not resp["isSearchExhaustive"]:  # the budget may end inside the last file
            assert 1 <= shown(f) <= min(expected[path], per_file), path
        else:
            assert shown(f) == min(expected[path], per_file), path
        if expected[path] < MAX_COUNTED_PER_FILE:
            assert f["moreMatchesExact"] and shown(f) + f["moreMatches"] == expected[path], path
        else:  # counted up to the limit: a lower bound, said so
            assert not f["moreMatchesExact"] and shown(f) + f["moreMatches"] == MAX_COUNTED_PER_FILE, path


def test_the_api_keeps_sourcebots_matches(searcher):
    """Without a per-file cap the defining file spends the budget (the issue's "100 matches in 1
    file"), and no file carries the page's extra fields."""
    resp = searcher.search("QuerySet", options=SearchOptions(matches=100, context_lines=1))
    assert [f["fileName"]["text"] for f in resp["files"]] == ["db/models/query.py"]
    assert shown(resp["files"][0]) == 100 and not resp["isSearchExhaustive"]
    assert not any("moreMatches" in f or "moreMatchesExact" in f for f in resp["files"])
