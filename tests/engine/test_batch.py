"""`Searcher.search_many` (`codesearch.search.batch`): many queries at once, each answered exactly as
`Searcher.search` answers it alone, with the shards' documents read once for all of them.

The table is the differential test's (every query class the engine knows) at three caps: high
enough to be exhaustive, one match (the budget spent in the first file, definitions first) and a
few (spent part-way through a shard). The whole answer is compared, files, chunks, ranges, ranking
order, repository infos, exhaustiveness and the work counters, all but the clocks.
"""

from __future__ import annotations

import pytest

from codesearch.errors import QueryError, SearchContextNotFound
from codesearch.search.options import SearchOptions
from tests.engine.test_differential import CASES

CLOCKS = {"duration", "wait", "matchTreeConstruction", "matchTreeSearch"}


def comparable(resp: dict) -> dict:
    stats = {k: v for k, v in resp["stats"].items() if k not in CLOCKS}
    return {**resp, "stats": stats}


def table(matches: int) -> list[tuple[str, SearchOptions]]:
    return [(query, SearchOptions(matches=matches, **flags)) for query, flags, _tree in CASES]


@pytest.mark.parametrize("matches", [100_000, 1, 7])
def test_every_answer_of_a_batch_is_the_answer_alone(indexed_corpus, matches):
    searcher = indexed_corpus["searcher"]
    queries = table(matches)
    together = searcher.search_many(queries)
    assert len(together) == len(queries)
    for (query, options), got in zip(queries, together, strict=True):
        assert comparable(got) == comparable(searcher.search(query, options=options)), query


def test_a_bad_query_gets_its_error_in_its_place_and_the_others_their_answers(indexed_corpus):
    searcher = indexed_corpus["searcher"]
    o = SearchOptions(matches=50)
    got = searcher.search_many([("foo", o), ("(foo", SearchOptions(is_regex=True)), ("context:nope bar", o), ("bar", o)])
    assert isinstance(got[1], QueryError) and isinstance(got[2], SearchContextNotFound)
    assert comparable(got[0]) == comparable(searcher.search("foo", options=o))
    assert comparable(got[3]) == comparable(searcher.search("bar", options=o))


def test_each_document_is_read_once_for_all_the_queries_that_check_it(indexed_corpus, monkeypatch):
    """Alone, two queries with the same candidates read each candidate twice; together, once."""
    searcher = indexed_corpus["searcher"]
    reads: list[tuple[str, int]] = []
    for shard in searcher.shards:
        original = shard.content

        def counted(doc, shard=shard, original=original):
            reads.append((shard.path, doc))
            return original(doc)

        monkeypatch.setattr(shard, "content", counted)
    o = SearchOptions(matches=100_000)
    queries = [("return", o), ("return lang:python", o), ("return -file:test", o)]
    for query, options in queries:
        searcher.search(query, options=options)
    alone = len(reads)
    reads.clear()
    searcher.search_many(queries)
    # (presenting a match reads its file once more, per query: `present.chunks`)
    assert 0 < len(reads) < alone
    # each query still counts the files it checked in its own statistics, as alone
    assert [r["stats"]["filesLoaded"] for r in searcher.search_many(queries)] == [
        searcher.search(q, options=o)["stats"]["filesLoaded"] for q, o in queries]
