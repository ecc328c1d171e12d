"""The searcher pool over its searchers' local links, on a real Ray instance: a search started
on an event loop goes over the link once it is connected, and answers as the engine does; a
searcher restarted by Ray is asked through Ray, then linked again; a switched-off link leaves
every search to Ray (`codesearch.runtime.search_link`)."""

from __future__ import annotations

import asyncio
import time

import pytest

from codesearch.runtime.searchers import SearcherPool
from codesearch.search.options import FLUSH_MAX_SIZE, SearchOptions
from codesearch.search.protocol import collect
from tests.oracle import engine_spans

ray = pytest.importorskip("ray")

#: (query, flags, cap), as tests/runtime/test_runtime_searchers.py asks them
ASKED = [("foo", {}, 10**6), ("handler", {}, 3), (r"def \w+", {"is_regex": True}, 10**6), ("sym:Handler", {}, 10**6),
         ("nomatchzzz", {}, 10)]


@pytest.fixture(scope="module")
def pool(ray_session, indexed_corpus):
    p = SearcherPool.create(indexed_corpus["index"], 2, name_prefix="cs-test-link")
    yield p
    p.close()


async def _linked(pool: SearcherPool, timeout: float = 30.0) -> None:
    """Search until every searcher of the pool is linked on this loop."""
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        await collect(pool, "foo", SearchOptions(matches=1))
        slots = pool.links._loops.get(asyncio.get_running_loop(), {})
        if len(slots) == len(pool.actors) and all(s.client is not None and s.client.alive for s in slots.values()):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the searchers were not linked")


async def _by(pool: SearcherPool, query: str, options: SearchOptions) -> set[str]:
    """How the searchers of a search started now are asked: "link", "ray" or both."""
    fan = await pool.start(query, options)
    how = {"link" if asked.link is not None else "ray" for asked in fan.pending.values()}
    async for _partial in fan:
        pass
    return how


def test_searches_on_a_loop_go_over_the_link_and_answer_as_the_engine(pool, indexed_corpus):
    async def main():
        await _linked(pool)
        for query, flags, cap in ASKED:
            opts = SearchOptions(matches=cap, is_regex=flags.get("is_regex", False))
            assert await _by(pool, query, opts) == {"link"}
            got = await collect(pool, query, opts)
            want = indexed_corpus["searcher"].search(query, matches=cap, **flags)
            assert got["stats"]["actualMatchCount"] == want["stats"]["actualMatchCount"], query
            assert got["stats"]["crashes"] == 0 and got["isSearchExhaustive"] == want["isSearchExhaustive"]
            if cap > 1000:
                assert engine_spans(got) == engine_spans(want) == engine_spans(pool.search(query, opts))

    asyncio.run(main())


def test_a_query_error_raised_in_a_searcher_comes_back_as_itself(pool, monkeypatch):
    """A query error the caller's check lets through (here: a check switched off) is raised by
    the searcher's plan and reaches the caller as the same error, not as a crashed searcher."""
    from codesearch.errors import QueryError

    monkeypatch.setattr("codesearch.runtime.searchers.check_query", lambda q, o: None)
    monkeypatch.setattr("codesearch.runtime.searchers.names_identifier", lambda tree: False)

    async def main():
        await _linked(pool)
        assert await _by(pool, "foo", SearchOptions()) == {"link"}
        with pytest.raises(QueryError):
            await collect(pool, "foo(", SearchOptions(is_regex=True))

    asyncio.run(main())


def test_a_capped_search_over_links_stops_the_other_partition(pool):
    async def main():
        await _linked(pool)
        assert await _by(pool, r"\w+", SearchOptions(matches=5, is_regex=True)) == {"link"}
        got = await collect(pool, r"\w+", SearchOptions(matches=5, is_regex=True))
        assert got["stats"]["actualMatchCount"] == 5 and not got["isSearchExhaustive"]
        assert got["stats"]["crashes"] == 0 and got["stats"]["shardsSkipped"] >= 1
        assert got["stats"]["flushReason"] == FLUSH_MAX_SIZE

    asyncio.run(main())


def test_a_link_that_breaks_mid_search_is_answered_through_ray(pool, indexed_corpus):
    """Both links close while the search is out (as when the searchers' processes die): each
    partition is asked again through Ray, and the answer is whole, not a crash."""
    want = engine_spans(indexed_corpus["searcher"].search("foo", matches=10**6))

    async def main():
        await _linked(pool)
        fan = await pool.start("foo", SearchOptions(matches=10**6))
        links = [asked.link for asked in fan.pending.values()]
        assert len(links) == 2 and all(links)
        for link in links:  # before the loop could read any answer
            link.close("closed by the test")
        partials = [p async for p in fan]
        assert len(partials) == 2 and fan.missed.crashes == 0
        from codesearch.search.engine import merge_partials

        got = merge_partials(partials, SearchOptions(matches=10**6), time.perf_counter_ns(), missed=fan.missed)
        assert engine_spans(got) == want and got["isSearchExhaustive"]

    asyncio.run(main())


def test_a_searcher_restarted_by_ray_is_asked_through_ray_then_linked_again(ray_session, indexed_corpus):
    pool = SearcherPool.create(indexed_corpus["index"], 2, name_prefix="cs-test-link-restart")
    want = engine_spans(indexed_corpus["searcher"].search("foo", matches=10**6))
    opts = SearchOptions(matches=10**6, timeout_s=30)

    async def main():
        await _linked(pool)
        old = ray.get(pool.actors[0].link_address.remote())
        ray.kill(pool.actors[0], no_restart=False)  # its process ends; Ray starts it again
        # Its link breaks and the search is asked again through Ray: answered by the new
        # process, or, while Ray is still restarting it, counted as that partition's crash (as a
        # Ray task to a restarting searcher always was), never an error or a hang.
        got = await collect(pool, "foo", opts)
        assert got["stats"]["crashes"] == (0 if got["isSearchExhaustive"] else 1)
        assert got["isSearchExhaustive"] is (engine_spans(got) == want)
        await asyncio.sleep(2.5)  # `RETRY_AFTER_S`: then the link is connected again, to the new process
        await _linked(pool)
        assert ray.get(pool.actors[0].link_address.remote()).path != old.path
        got = await collect(pool, "foo", opts)
        assert engine_spans(got) == want and await _by(pool, "foo", opts) == {"link"}

    try:
        asyncio.run(main())
    finally:
        pool.close()


def test_a_searcher_without_a_link_is_asked_through_ray(ray_session, indexed_corpus):
    pool = SearcherPool.create(
        indexed_corpus["index"], 2, actor_options={"runtime_env": {"env_vars": {"CODESEARCH_SEARCH_LINK": "off"}}}
    )
    want = engine_spans(indexed_corpus["searcher"].search("foo", matches=10**6))

    async def main():
        for _ in range(5):
            assert await _by(pool, "foo", SearchOptions(matches=10**6)) == {"ray"}
            assert engine_spans(await collect(pool, "foo", SearchOptions(matches=10**6))) == want
            await asyncio.sleep(0.05)

    try:
        assert ray.get([a.link_address.remote() for a in pool.actors]) == [None, None]
        asyncio.run(main())
    finally:
        pool.close()
