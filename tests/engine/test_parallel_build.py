"""Parallel builds (`codesearch.index.parallel`) answer exactly what a serial build answers.

The session's generated corpus (a git repository with branches and tags, and a plain directory)
is indexed again with two processes: once cut into parts (one repository's shards built by two
workers, swapped in together), once repository by repository; each index, compacted or not,
must give the brute-force oracle's answers.
"""

from __future__ import annotations

import pytest

from codesearch.index import parallel
from codesearch.index.builder import even_share
from codesearch.index.manifest import read_manifest
from codesearch.index.paths import index_paths
from codesearch.search.engine import Searcher
from tests.conftest import BRANCH_GLOBS, TAG_GLOBS
from tests.conftest import test_settings as index_settings
from tests.oracle import assert_engine_equals_oracle, engine_spans

QUERIES = [  # (query, flags, tree for the oracle)
    ("foo", {}, ("text", "foo")),
    ("Foo", {"case_sensitive": True}, ("text", "Foo")),
    (r"def \w+", {"is_regex": True}, ("and", ("regex", "def"), ("regex", r"\w+"))),
    ("rev:* handler", {}, ("and", ("rev", "*"), ("text", "handler"))),
    ("sym:Handler", {}, ("sym", "Handler")),
    ("lang:skipped", {}, ("lang", "skipped")),
    ("-file:test needle or file:\\.go$", {}, ("or", ("and", ("not", ("file", "test")), ("text", "needle")),
                                             ("file", r"\.go$"))),
]


def _check(index_dir: str, oracle) -> None:
    assert_engine_equals_oracle(index_dir, oracle, QUERIES)


@pytest.mark.parametrize("how", ["parts", "repositories"])
@pytest.mark.parametrize("compact", [False, True])
def test_a_parallel_build_answers_like_the_oracle(indexed_corpus, tmp_path, monkeypatch, how, compact):
    paths = [indexed_corpus["repo"], indexed_corpus["plain"]]
    if how == "parts":
        monkeypatch.setattr(parallel, "PART_MIN_BYTES", 0)  # cut even this small repository into parts
    else:
        paths = paths * 2  # more repositories than 2 × jobs: each built whole by a worker (twice: a re-index)
    out = str(tmp_path / "ix")
    stats = index_paths(paths, out, index_settings(), branches=BRANCH_GLOBS, tags=TAG_GLOBS, jobs=2, compact=compact)
    assert stats.files and stats.input_bytes
    man = read_manifest(out)
    if how == "parts" and not compact:  # the git repository's shards come from both workers
        repo_shards = [n for n in man["shards"] if ".p0." in n or ".p1." in n]
        assert {".p0." in n for n in repo_shards} == {True, False}
    _check(out, indexed_corpus["oracle"])


def test_a_compaction_in_parallel_merges_every_group_and_answers_like_the_oracle(indexed_corpus, tmp_path):
    """Small shards (built with a tiny shard size, merged up to a bigger one) make several groups; the pool's two workers merge
    them side by side, and the compacted index still gives the oracle's answers."""
    from codesearch.index.compact import compact, plan

    small, settings = index_settings(), index_settings()
    small.shard_max_bytes, settings.shard_max_bytes = 2048, 8192
    out = str(tmp_path / "ix")
    index_paths([indexed_corpus["repo"], indexed_corpus["plain"]], out, small,
                branches=BRANCH_GLOBS, tags=TAG_GLOBS)
    groups = plan(out, settings.shard_max_bytes)
    assert len(groups) >= 2
    with parallel.Pool(2) as pool:
        stats = compact(out, settings, pool=pool)
    assert stats.merged_shards >= sum(len(g) for g in groups) and stats.refused == 0
    assert plan(out, settings.shard_max_bytes) == []
    _check(out, indexed_corpus["oracle"])


@pytest.mark.parametrize("sizes, shard, want", [
    # (bytes per path, shard size) → builds, biggest first
    ([100, 10, 10, 10, 10], 100, [[0], [1, 2, 3, 4]]),  # half a shard or more: alone; the rest in one bundle
    ([10, 20, 30, 40], 1000, [[3, 2, 1, 0]]),  # the fewest bundles: less than a shard, one bundle
    ([5, 5, 5, 5], 12, [[0, 2], [1, 3]]),  # 20 bytes, shards of 12: two bundles, each to the lightest
    ([40, 30, 20, 20, 10, 10, 10], 100, [[0, 3, 5], [1, 2, 4, 6]]),  # 140 bytes: two bundles of 70
    ([50, 60], 100, [[1], [0]]),
    ([], 100, []),
])
def test_a_bulk_build_packs_small_repositories_evenly_and_starts_with_the_biggest(sizes, shard, want):
    paths = [f"p{i}" for i in range(len(sizes))]
    assert parallel.plan_builds(paths, sizes, shard) == want


def test_builds_come_costliest_first_whatever_their_bytes():
    """Sizes cut the shards; costs (bytes and files) order the builds: 30 bytes of many files
    before 60 of few, a bundle of 10 bytes before 20 bytes of fewer files."""
    sizes, costs = [60, 30, 20, 20, 10], [60, 90, 20, 25, 40]
    assert parallel.plan_builds(["a", "b", "c", "d", "e"], sizes, 40, costs) == [[1], [0], [4], [3], [2]]


@pytest.mark.parametrize("total, most, want", [
    (0, 100, 100), (100, 100, 100),  # fits in one shard: cut at the most
    (101, 100, 51), (250, 100, 84), (300, 100, 100), (301, 100, 76),  # the fewest shards, even
])
def test_a_builder_told_what_comes_cuts_even_shards(total, most, want):
    assert even_share(total, most) == want


def test_small_repositories_packed_into_shared_shards_answer_like_a_serial_build(indexed_corpus, tmp_path):
    """Six copies of the corpus's plain directory (six repositories) built by two workers into
    shared shards answer exactly what a serial build, one repository at a time, answers; the
    manifest gives every repository its shards."""
    import shutil

    plain = indexed_corpus["plain"]
    paths = []
    for i in range(6):
        dst = tmp_path / f"repo{i}"
        shutil.copytree(plain, dst)
        paths.append(str(dst))
    serial, packed = str(tmp_path / "serial"), str(tmp_path / "packed")
    index_paths(paths, serial, index_settings())
    stats = index_paths(paths, packed, index_settings(), jobs=2)
    man = read_manifest(packed)
    assert len(stats.shards) < len(paths) and any(len(e["repos"]) > 1 for e in man["shards"].values())
    assert sorted(e["name"] for e in man["repos"].values()) == sorted(e["name"] for e in read_manifest(serial)["repos"].values())
    for entry in man["repos"].values():
        assert entry["shards"] and all(n in man["shards"] for n in entry["shards"])
    a, b = Searcher(serial), Searcher(packed)
    try:
        for query, flags, _tree in QUERIES:
            assert engine_spans(b.search(query, matches=10**6, **flags)) == engine_spans(a.search(query, matches=10**6, **flags)), query
    finally:
        a.close()
        b.close()
