"""The engine's budgets, in one process: deadlines inside every regex engine, per-query stats,
and queries too deep to plan."""

from __future__ import annotations

import time

import pytest

from codesearch.errors import QueryError
from codesearch.index.builder import index_source
from codesearch.index.sources import GitSource, RepoInfo
from codesearch.query.regex import FALLBACK_TIMEOUT_S, RegexTimeout, compile_regex
from codesearch.search.engine import Searcher
from codesearch.search.options import SearchOptions
from tests.conftest import test_settings as index_settings
from tests.corpus import make_local_repo

#: A back-reference (the `regex` fallback, not RE2) that backtracks for seconds on a run of "a".
SLOW_REGEX = r"((?:a|aa)+)\1b"
RUN = ("a" * 40 + "!\n") * 3


@pytest.fixture(scope="module")
def slow_index(tmp_path_factory):
    base = tmp_path_factory.mktemp("budgets")
    files = {f"runs/run_{i}.txt": RUN for i in range(20)}
    files.update({f"src/m{i}.py": f"def needle_{i}():\n    return {i}\n" for i in range(5)})
    repo = make_local_repo(str(base / "repo"), files)
    index_dir = str(base / "index")
    index_source(GitSource(repo, repo=RepoInfo(name="git.example.com/t/runs", id=1)), index_dir, index_settings())
    s = Searcher(index_dir)
    yield s
    s.close()


def test_the_fallback_stops_at_the_deadline():
    rx = compile_regex(SLOW_REGEX)
    assert rx.engine == "fallback"
    t0 = time.monotonic()
    with pytest.raises(RegexTimeout):
        rx.search(RUN.encode(), deadline=time.monotonic() + 0.2)
    assert time.monotonic() - t0 < FALLBACK_TIMEOUT_S + 1.0  # the smaller budget applied, not 0.5 s per call
    with pytest.raises(RegexTimeout, match="deadline"):
        list(rx.finditer(RUN.encode(), deadline=time.monotonic() - 1))


@pytest.mark.slow  # over 1 s of the fast lane: `make test` runs it (tests/conftest.py, SLOW_MODULES)
def test_a_backtracking_query_ends_at_the_search_deadline(slow_index):
    """20 files would cost 0.5 s each; with a 1 s budget the search answers at about 1 s,
    not 10, and says it was cut short."""
    t0 = time.monotonic()
    resp = slow_index.search(SLOW_REGEX, options=SearchOptions(is_regex=True, timeout_s=1.0))
    took = time.monotonic() - t0
    assert resp["isSearchExhaustive"] is False
    assert resp["stats"]["flushReason"] == "FLUSH_REASON_TIMER_EXPIRED"
    assert took < 20 * FALLBACK_TIMEOUT_S / 2, f"took {took:.1f}s"


def test_stats_do_not_accumulate_across_queries(slow_index):
    first = slow_index.search("needle", matches=100)["stats"]
    slow_index.search("run", matches=100)  # another query reads other files and postings
    again = slow_index.search("needle", matches=100)["stats"]
    for k in ("contentBytesLoaded", "indexBytesLoaded", "filesLoaded", "ngramLookups"):
        assert again[k] == first[k] > 0, k
    # and they count what this query read: the five small files that hold the needle
    assert first["filesLoaded"] == 5 and first["contentBytesLoaded"] == sum(
        len(f"def needle_{i}():\n    return {i}\n") for i in range(5))


@pytest.mark.parametrize("levels,ok", [(10, True), (99, True), (100, False), (1000, False), (4000, False)])
def test_deep_queries_are_refused_not_crashed(slow_index, levels, ok):
    query = "-(" * levels + "needle" + ")" * levels
    if ok:
        slow_index.search(query, matches=5)
    else:
        with pytest.raises(QueryError, match="nests"):
            slow_index.search(query, matches=5)


def test_overlong_queries_are_refused(slow_index):
    from codesearch.search.engine import MAX_QUERY_LENGTH

    slow_index.search("x" * MAX_QUERY_LENGTH, matches=5)
    with pytest.raises(QueryError, match="characters long"):
        slow_index.search("x" * (MAX_QUERY_LENGTH + 1), matches=5)
