"""Shard searchers on a real local Ray instance: fan-out and merge equal the in-process engine."""

from __future__ import annotations

import asyncio
import os

import pytest

from codesearch.runtime.published import balance, shard_files
from codesearch.runtime.searchers import SearcherPool
from codesearch.runtime.shard_searcher import ShardSearcher
from codesearch.search.options import SearchOptions
from codesearch.search.protocol import collect
from tests.oracle import engine_spans

ray = pytest.importorskip("ray")


def test_balance_spreads_bytes(tmp_path):
    paths = []
    for i, size in enumerate([100, 90, 50, 40, 30, 10]):
        p = tmp_path / f"s{i}.shard"
        p.write_bytes(b"x" * size)
        paths.append(str(p))
    groups = balance(paths, 2)
    sums = sorted(sum(os.path.getsize(p) for p in g) for g in groups)
    assert sums[1] - sums[0] <= 30 and sorted(sum(groups, [])) == sorted(paths)  # greedy, largest first


def test_plain_searcher_matches_engine(indexed_corpus):
    from codesearch.search.engine import merge_partials

    s = indexed_corpus["searcher"]
    plain = ShardSearcher([sh.path for sh in s.shards])
    opts = SearchOptions(matches=10**6)
    import time

    resp = merge_partials([plain.search("foo or handler", opts, time.time() + 30)], opts, time.perf_counter_ns())
    assert engine_spans(resp) == engine_spans(s.search("foo or handler", matches=10**6))


@pytest.mark.parametrize("query,flags", [("foo", {}), ("rev:* handler", {}), (r"def \w+", {"is_regex": True}),
                                         ("sym:Handler", {}), ("lang:skipped", {})])
@pytest.mark.parametrize("cap", [3, 10**6])
def test_pool_equals_in_process_engine(ray_session, indexed_corpus, query, flags, cap):
    pool = _pool(indexed_corpus)
    opts = SearchOptions(matches=cap, **{"is_regex": flags.get("is_regex", False)})
    got = pool.search(query, opts)
    want = indexed_corpus["searcher"].search(query, matches=cap, **flags)
    assert got["stats"]["actualMatchCount"] == want["stats"]["actualMatchCount"]
    assert got["isSearchExhaustive"] == want["isSearchExhaustive"]
    if cap > 1000:
        assert engine_spans(got) == engine_spans(want)


def test_named_searchers_can_be_attached(ray_session, indexed_corpus):
    pool = _pool(indexed_corpus)
    other = SearcherPool.attach("cs-test-searcher", len(pool.actors))
    assert engine_spans(other.search("foo", SearchOptions(matches=10**6))) == engine_spans(pool.search("foo", SearchOptions(matches=10**6)))


def test_a_dead_searcher_is_counted_not_fatal(ray_session, indexed_corpus, tmp_path):
    pool = SearcherPool.create(indexed_corpus["index"], 2)
    ray.kill(pool.actors[0])
    resp = pool.search("foo", SearchOptions(matches=10**6, timeout_s=10))
    assert resp["stats"]["crashes"] == 1 and not resp["isSearchExhaustive"]
    assert resp["files"]  # the other searcher still answered
    pool.close()


def test_an_attached_pool_follows_searchers_started_again_under_the_same_names(ray_session, indexed_corpus):
    """The runtime that owns the searchers ended and a new one started others under the same
    names (a redeploy): a pool attached to the old ones (a Serve replica's) counts the dead ones
    once, then looks the names up again and answers in full."""
    import time

    prefix = "cs-test-reborn"
    first = SearcherPool.create(indexed_corpus["index"], 2, name_prefix=prefix)
    attached = SearcherPool.attach(prefix, 2)
    want = engine_spans(first.search("foo", SearchOptions(matches=10**6)))
    for actor in first.actors:
        ray.kill(actor, no_restart=True)
    time.sleep(1.0)
    second = SearcherPool.create(indexed_corpus["index"], 2, name_prefix=prefix)
    resp = attached.search("foo", SearchOptions(matches=10**6, timeout_s=10))
    assert resp["stats"]["crashes"] >= 1  # the old handles, once
    deadline = time.monotonic() + 20
    while True:
        resp = attached.search("foo", SearchOptions(matches=10**6, timeout_s=10))
        if not resp["stats"]["crashes"]:
            break
        assert time.monotonic() < deadline, resp["stats"]
        time.sleep(0.5)
    assert engine_spans(resp) == want
    second.close()


_POOLS = {}


def _pool(indexed_corpus):
    if "p" not in _POOLS:
        _POOLS["p"] = SearcherPool.create(indexed_corpus["index"], 2, name_prefix="cs-test-searcher")
    return _POOLS["p"]


def test_versioned_shard_lists():
    """A search names the version it wants; older lists stay until three newer ones exist."""
    s = ShardSearcher([])
    assert s.shard_count() == 0
    for v in (10, 20, 30, 40):
        s.set_shards([], v)
    assert sorted(s.sets) == [20, 30, 40] and s.current == 40


def test_refresh_is_atomic_across_searchers(ray_session, indexed_corpus, tmp_path):
    """While searcher lists are being replaced, searches use the last published version on
    every searcher: never one searcher's new list with another's old one."""
    import shutil

    from codesearch.runtime.published import published_version

    ix = tmp_path / "ix"
    shutil.copytree(indexed_corpus["index"], ix)
    pool = SearcherPool.create(str(ix), 2)
    full = engine_spans(pool.search("foo", SearchOptions(matches=10**6)))
    created = published_version(pool.version_key)
    assert created is not None  # `create` publishes the lists it started with
    pool.refresh(str(ix))
    before = published_version(pool.version_key)
    assert before > created
    # Half a refresh by hand: one searcher gets an empty list under a version nobody published.
    ray.get(pool.actors[0].set_shards.remote([], 2**62))
    assert engine_spans(pool.search("foo", SearchOptions(matches=10**6))) == full
    pool.refresh(str(ix))  # a complete refresh publishes a newer version
    assert published_version(pool.version_key) > before
    assert engine_spans(pool.search("foo", SearchOptions(matches=10**6))) == full
    pool.close()


# ---- the index version a process's searches name (`VersionWatch`) -----------------------------


def test_a_version_watch_reads_the_kv_only_in_the_background(ray_session):
    """Searches take the version from the watch: what was read last, never a KV read of their
    own; the watch's thread re-reads it every `poll_s`; a version this process publishes
    (`set`) counts at once; the thread ends with `close`."""
    import time
    import uuid

    from codesearch.runtime.published import VersionWatch, publish_version

    key = f"cs-test-watch-{uuid.uuid4().hex[:8]}"
    publish_version(key, 1)
    still = VersionWatch(key, poll_s=3600)  # a thread that will not read again during the test
    assert still.get() == 1
    publish_version(key, 2)
    assert [still.get() for _ in range(3)] == [1, 1, 1]
    still.refresh()
    assert still.get() == 2
    still.set(3)
    assert still.get() == 3
    still.close()

    polling = VersionWatch(key, poll_s=0.05)
    assert polling.get() == 2
    publish_version(key, 4)
    deadline = time.monotonic() + 10
    while polling.get() != 4:
        assert time.monotonic() < deadline, "the watch did not read the new version"
        time.sleep(0.01)
    thread = polling._thread
    assert thread.name == f"codesearch-version-{key}" and thread.is_alive()
    polling.close()
    thread.join(5)
    assert not thread.is_alive()


def test_a_version_watch_nobody_uses_stops(ray_session):
    import gc
    import threading
    import uuid

    from codesearch.runtime.published import VersionWatch, publish_version

    key = f"cs-test-watch-{uuid.uuid4().hex[:8]}"
    publish_version(key, 1)
    watch = VersionWatch(key, poll_s=0.05)
    assert watch.get() == 1
    thread = watch._thread
    del watch
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()


#: A process that watches a version, leaves Ray and lives on: prints whether the watch's thread
#: is still alive and whether Ray is running again in the process.
LEAVES_RAY = r"""
import time, uuid
import ray
from codesearch.runtime.published import VersionWatch, publish_version
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
key = f"cs-test-leave-{uuid.uuid4().hex[:8]}"
publish_version(key, 1)
watch = VersionWatch(key, poll_s=0.05)
assert watch.get() == 1
ray.shutdown()
watch._thread.join(5)
time.sleep(0.3)
print(watch._thread.is_alive(), ray.is_initialized())
"""


@pytest.mark.ray
def test_a_version_watch_ends_when_its_process_leaves_ray():
    """After ``ray.shutdown`` the watch's thread ends instead of calling the registry, which
    made Ray start a new local instance from that thread (a clean run of the suite logged it at
    a worker's exit)."""
    import subprocess
    import sys

    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-c", LEAVES_RAY], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", "False"], done.stdout + done.stderr[-3000:]


def test_searches_follow_a_version_published_elsewhere(ray_session, indexed_corpus, tmp_path):
    """A pool attached by name (a Serve replica's) searches the version another process
    published within the watch's interval, and its answers are whole before and after."""
    import shutil
    import time

    from codesearch.runtime.published import VERSION_POLL_S, published_version

    ix = tmp_path / "ix"
    shutil.copytree(indexed_corpus["index"], ix)
    owner = SearcherPool.create(str(ix), 2, name_prefix="cs-test-follow")
    attached = SearcherPool.attach("cs-test-follow", len(owner.actors))
    opts = SearchOptions(matches=10**6)
    want = engine_spans(indexed_corpus["searcher"].search("foo", matches=10**6))
    assert engine_spans(attached.search("foo", opts)) == want
    assert attached.version_watch.get() == published_version("cs-test-follow")
    newer = owner.assign(balance(shard_files(str(ix)), 2))  # the scheduler's refresh, say
    assert owner.version_watch.get() == newer  # the publisher itself: at once
    deadline = time.monotonic() + VERSION_POLL_S + 10
    while attached.version_watch.get() != newer:
        assert engine_spans(attached.search("foo", opts)) == want
        assert time.monotonic() < deadline
    assert engine_spans(attached.search("foo", opts)) == want
    attached.version_watch.close()
    owner.close()


# ---- copies: `copies × partitions` searchers, each search on one copy -------------------------

QUERIES = [("foo", {}), (r"def \w+", {"is_regex": True}), ("sym:Handler", {}), ("rev:* handler", {})]


@pytest.fixture(scope="module")
def copies_pool(ray_session, indexed_corpus):
    pool = SearcherPool.create(indexed_corpus["index"], 2, copies=2, name_prefix="cs-test-copies")
    yield pool
    pool.close()


def test_every_copy_answers_like_the_engine(copies_pool, indexed_corpus):
    assert (copies_pool.partitions, copies_pool.copies, len(copies_pool.actors)) == (2, 2, 4)
    assert [ray.get(a.shard_count.remote()) > 0 for a in copies_pool.actors] == [True] * 4
    for query, flags in QUERIES:
        want = engine_spans(indexed_corpus["searcher"].search(query, matches=10**6, **flags))
        for _turn in range(copies_pool.copies):  # round robin: consecutive searches use each copy
            got = copies_pool.search(query, SearchOptions(matches=10**6, is_regex=flags.get("is_regex", False)))
            assert engine_spans(got) == want and got["stats"]["crashes"] == 0, query


def test_copies_divide_the_requests(copies_pool):
    first, second, third = copies_pool.copy(), copies_pool.copy(), copies_pool.copy()
    assert first != second and first == third and sorted(map(id, first + second)) == sorted(map(id, copies_pool.actors))


def test_attach_finds_the_layout(copies_pool):
    other = SearcherPool.attach("cs-test-copies", len(copies_pool.actors))
    assert (other.partitions, other.copies) == (2, 2)
    opts = SearchOptions(matches=10**6)
    assert engine_spans(other.search("foo", opts)) == engine_spans(copies_pool.search("foo", opts))


def test_a_dead_searcher_is_replaced_by_its_twin(ray_session, indexed_corpus):
    pool = SearcherPool.create(indexed_corpus["index"], 2, copies=2)
    want = engine_spans(pool.search("foo", SearchOptions(matches=10**6)))
    ray.kill(pool.actors[1])  # copy 0, partition 1
    for _turn in range(4):
        resp = pool.search("foo", SearchOptions(matches=10**6, timeout_s=10))
        assert resp["stats"]["crashes"] == 0 and resp["isSearchExhaustive"] and engine_spans(resp) == want
    ray.kill(pool.actors[3])  # partition 1 has no live copy left: counted, the rest still answers
    _wait_dead(pool.actors[3])  # (a kill lands a moment later: a search sent before it is answered)
    resp = pool.search("foo", SearchOptions(matches=10**6, timeout_s=10))
    assert resp["stats"]["crashes"] == 1 and not resp["isSearchExhaustive"] and resp["files"]
    pool.close()


def _wait_dead(actor, timeout_s: float = 30.0) -> None:
    """Return once `actor`'s death is known to Ray (its calls fail), or fail the test."""
    import time

    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        try:
            ray.get(actor.ping.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError("the killed searcher still answers")


def test_refresh_gives_every_copy_its_partition(ray_session, indexed_corpus, tmp_path):
    import shutil

    ix = tmp_path / "ix"
    shutil.copytree(indexed_corpus["index"], ix)
    pool = SearcherPool.create(str(ix), 2, copies=2, keep_empty=True)
    ray.get(pool.actors[2].set_shards.remote([], None, 0))  # a copy that lost its list
    pool.refresh(str(ix))
    counts = ray.get([a.shard_count.remote() for a in pool.actors])
    assert counts[:2] == counts[2:] and sum(counts[:2]) == len(shard_files(str(ix))) >= 2
    want = engine_spans(indexed_corpus["searcher"].search("foo", matches=10**6))
    assert all(engine_spans(pool.search("foo", SearchOptions(matches=10**6))) == want for _ in range(2))
    pool.close()


def test_a_layout_that_does_not_divide_is_refused():
    with pytest.raises(ValueError, match="3 searchers cannot form 2 equal copies"):
        SearcherPool([object()] * 3, copies=2)
    with pytest.raises(ValueError, match="at least one"):
        SearcherPool.create("/nonexistent", 2, copies=0)


def test_a_capped_search_stops_the_other_partitions_once_its_budget_is_full(ray_session, indexed_corpus):
    """Each partition holds more than 5 matches of ``\\w+``: the first answer fills the budget,
    and the other partition is stopped (its shards skipped, not crashed), as Zoekt stops at
    its total match count. A query naming an identifier waits for every partition: the one
    that holds the definition may be the slower one."""
    from codesearch.search.options import FLUSH_MAX_SIZE

    pool = _pool(indexed_corpus)
    assert all(pool.shard_count(p, pool.version_watch.get()) for p in range(len(pool.actors)))
    for search in (pool.search, lambda q, o: asyncio.run(collect(pool, q, o))):
        got = search(r"\w+", SearchOptions(matches=5, is_regex=True))
        assert got["stats"]["actualMatchCount"] == 5 and not got["isSearchExhaustive"]
        assert got["stats"]["crashes"] == 0 and got["stats"]["shardsSkipped"] >= 1
        assert got["stats"]["flushReason"] == FLUSH_MAX_SIZE
        named = search("handler", SearchOptions(matches=1))
        assert named["stats"]["flushReason"] != FLUSH_MAX_SIZE and named["stats"]["crashes"] == 0


class _SearcherOfAnOlderRelease(ShardSearcher):
    """A searcher started by an earlier release (a redeploy may pair it with a newer API
    replica): it has no `search_wire`, only `search`."""

    search_wire = None


#: (query, flags, cap): what each way of asking the searchers must answer as the engine does
ASKED = [("foo", {}, 10**6), ("handler", {}, 3), (r"def \w+", {"is_regex": True}, 10**6), ("sym:Handler", {}, 10**6),
         ("nomatchzzz", {}, 10)]


@pytest.mark.parametrize("query,flags,cap", ASKED)
def test_every_way_of_asking_answers_as_the_engine(ray_session, indexed_corpus, query, flags, cap):
    """The pool asks its searchers through `search_wire` (one pickled request, one pickled
    answer), and an older searcher that lacks it through `search`; synchronously or from an event
    loop (where the answer is taken from the task's future, not fetched again): the same answer."""
    groups = balance(shard_files(indexed_corpus["index"]), 2)
    mixed = SearcherPool([ray.remote(_SearcherOfAnOlderRelease).options(max_concurrency=2).remote(groups[0], origin=0),
                          ray.remote(ShardSearcher).options(max_concurrency=2).remote(groups[1], origin=1)])
    mixed.assign(groups)
    assert hasattr(_pool(indexed_corpus).actors[0], "search_wire") and not hasattr(mixed.actors[0], "search_wire")
    try:
        want = indexed_corpus["searcher"].search(query, matches=cap, **flags)
        opts = SearchOptions(matches=cap, is_regex=flags.get("is_regex", False))
        for pool in (_pool(indexed_corpus), mixed):
            for got in (pool.search(query, opts), asyncio.run(collect(pool, query, opts))):
                assert got["stats"]["actualMatchCount"] == want["stats"]["actualMatchCount"], query
                assert got["stats"]["crashes"] == 0 and got["isSearchExhaustive"] == want["isSearchExhaustive"]
                if cap > 1000:
                    assert engine_spans(got) == engine_spans(want)
    finally:
        mixed.close()


def test_search_wire_is_search_pickled(indexed_corpus):
    import pickle
    import time

    searcher = ShardSearcher([sh.path for sh in indexed_corpus["searcher"].shards])
    opts, deadline = SearchOptions(matches=50), time.time() + 30
    wire = pickle.loads(searcher.search_wire(pickle.dumps(("handler", opts, deadline, None, "req-1"))))
    plain = searcher.search("handler", opts, deadline)
    assert [f[3] for f in wire.files] == [f[3] for f in plain.files] and wire.total_matches == plain.total_matches


def test_a_searcher_asked_for_a_version_it_lacks_reads_the_published_lists(ray_session, indexed_corpus, monkeypatch):
    """A searcher that missed a version (restarted while the registry could not be read, so it
    started from the lists it was created with) is asked for the version searches name: it reads
    the pool's published lists and answers from them, not from its first lists."""
    import time
    import uuid

    from codesearch.runtime import shard_searcher
    from codesearch.runtime.published import publish_shard_lists
    from codesearch.runtime.searchers import forget_pool

    monkeypatch.setattr(shard_searcher, "CATCH_UP_EVERY_S", 0.0)
    key = f"cs-catch-up-{uuid.uuid4().hex[:8]}"
    searcher = ShardSearcher([], origin=0, pool_key=key)  # nothing published yet: its own (empty) list
    assert searcher.shard_count() == 0
    publish_shard_lists(key, 7, [shard_files(indexed_corpus["index"])])
    options = SearchOptions(matches=10**6)
    try:
        got = searcher.search("foo", options, time.time() + 30, version=7)
        want = ShardSearcher(shard_files(indexed_corpus["index"])).search("foo", options, time.time() + 30)
        assert got.total_matches == want.total_matches > 0
        assert searcher.current == 7
    finally:
        forget_pool(key)


def test_the_cancel_check_asks_ray_at_most_every_few_milliseconds():
    """The engine checks for cancellation after every shard and every 64 candidates; Ray is asked
    at most once per `CANCEL_POLL_S`, and a True answer sticks."""
    from codesearch.runtime import shard_searcher

    clock = [100.0]
    answers = iter([False, False, True])
    asked = []

    def ask() -> bool:
        asked.append(clock[0])
        return next(answers)

    check = shard_searcher._Throttled(ask, every_s=0.002, clock=lambda: clock[0])
    steps = [  # (seconds since the start, expected answer, how many times Ray was asked by then)
        (0.0, False, 1),
        (0.001, False, 1),
        (0.0019, False, 1),
        (0.002, False, 2),
        (0.0035, False, 2),
        (0.0041, True, 3),
        (0.0042, True, 3),
        (1.0, True, 3),
    ]
    for at, expected, times in steps:
        clock[0] = 100.0 + at
        assert check() is expected, at
        assert len(asked) == times, at
