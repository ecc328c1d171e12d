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


# ---------------------------------------------------------------- the block's posting table

TABLE_TERMS = [
    # (text, case-sensitive): any-case letters (up to 8 index trigrams each), digits and punctuation
    # (no variants), letters kept in case, non-ASCII bytes, and trigrams no document has
    ("return", False), ("Return", True), ("def (", False), ("x == 1", False), ("café", False),
    ("self._", False), ("QQXZZY", False), ("\t\t\t", True), ("κλμ", False),
]


def test_a_posting_table_answers_as_its_trigram_index(indexed_corpus):
    """`PostingTable` (one vectorised pass for a block's queries) against the index it reads, trigram by
    trigram: the posting list sizes that order a query's intersections and the stored bytes it counts."""
    from codesearch.index.trigrams import string_trigrams
    from codesearch.search.postings import PostingLists, PostingTable

    trigrams = [t for text, case in TABLE_TERMS for t in string_trigrams(text, case)]
    assert any(t >> 24 for t in trigrams) and any(not t >> 24 for t in trigrams)
    for shard in indexed_corpus["searcher"].shards:
        index = shard.content_index
        table = PostingTable(index, trigrams, PostingLists().of(index))
        assert table.cardinalities(trigrams) == index.cardinalities(trigrams)
        assert [table.stored_size(t) for t in trigrams] == [index.stored_size(t) for t in trigrams]
        assert any(table.cardinalities(trigrams)) and 0 in table.cardinalities(trigrams)
        assert all(table.postings(t) == index.postings(t) for t in trigrams)  # decoded by the table
        assert all(table.postings(t) == index.postings(t) for t in trigrams)  # kept
        # a trigram the table was not made for is the index's answer too
        other = string_trigrams("import", False)
        assert table.cardinalities(other) == index.cardinalities(other)
        assert table.stored_size(other[0]) == index.stored_size(other[0])
