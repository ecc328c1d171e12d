"""A shard the engine cannot read is never skipped in silence.

Three small repositories, one shard each. Each case damages the shard of one of them the way a
disk or an operator can (64 KB of garbage over its middle, cut in half, deleted, or a manifest
naming a file that is not there). The in-process engine then still answers from the other two,
and every answer says it is not exhaustive and names the repository it missed: ``POST
/api/search``'s ``missingRepositories`` (an additive field) and the stream's ``final`` event. A
caller restricted to some repositories sees only the names it may see; an undamaged index
answers without the field. A shard that holds several repositories (the three merged into one)
costs each of them, and the answer names them all.
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from codesearch.app.search import StreamMerger
from codesearch.index import manifest
from codesearch.index.builder import IndexSettings, index_source
from codesearch.index.sources import GitSource, RepoInfo
from codesearch.search.engine import Searcher
from codesearch.search.options import SearchOptions
from codesearch.tools.search_tools import with_missing
from tests.corpus import make_local_repo

NAMES = {1: "git.example.com/t/alpha", 2: "git.example.com/t/beta", 3: "git.example.com/t/gamma"}
VICTIM = 2  # the repository whose shard is damaged


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Three repositories indexed once; each case works on a copy of the index directory."""
    root = tmp_path_factory.mktemp("refused")
    ix = str(root / "index")
    for rid, name in NAMES.items():
        # enough text that the victim's shard is bigger than 64 KB, so the overwrite lands inside it
        files = {"README.md": f"needle in {name}\n", "data/words.txt": f"filler {rid} words\n" * 8000}
        path = make_local_repo(str(root / "src" / str(rid)), files)
        index_source(GitSource(path, repo=RepoInfo(name=name, id=rid)), ix, IndexSettings())
    return ix


def _victim_shard(ix: str) -> str:
    man = manifest.read_manifest(ix)
    (name,) = man["repos"][str(VICTIM)]["shards"]
    return os.path.join(ix, name)


def overwrite_middle(ix: str) -> None:
    path = _victim_shard(ix)
    size = os.path.getsize(path)
    assert size > 128 << 10
    with open(path, "r+b") as f:
        f.seek(size // 2 - (32 << 10))
        f.write(os.urandom(64 << 10))


def truncate(ix: str) -> None:
    path = _victim_shard(ix)
    os.truncate(path, os.path.getsize(path) // 2)


def delete(ix: str) -> None:
    os.unlink(_victim_shard(ix))


def manifest_names_a_missing_file(ix: str) -> None:
    """The manifest's entry for the victim names a file that was never written."""
    path = os.path.join(ix, manifest.MANIFEST)
    with open(path) as f:
        man = json.load(f)
    old = os.path.basename(_victim_shard(ix))
    man["shards"]["lost.shard"] = man["shards"].pop(old)
    man["repos"][str(VICTIM)]["shards"] = ["lost.shard"]
    with open(path, "w") as f:
        json.dump(man, f)
    os.unlink(os.path.join(ix, old))


DAMAGES = [  # (how, what the engine's error says)
    (overwrite_middle, "checksum mismatch"),
    (truncate, ""),
    (delete, ""),
    (manifest_names_a_missing_file, "lost.shard"),
]


def _copy(built: str, tmp_path) -> str:
    ix = str(tmp_path / "index")
    os.makedirs(ix)
    for f in os.listdir(built):
        with open(os.path.join(built, f), "rb") as src, open(os.path.join(ix, f), "wb") as dst:
            dst.write(src.read())
    return ix


def _repos_found(resp) -> set[str]:
    return {f["repository"] for f in resp["files"]}


def test_an_undamaged_index_answers_in_full(built):
    s = Searcher(built)
    try:
        resp = s.search("needle")
        assert _repos_found(resp) == set(NAMES.values())
        assert resp["isSearchExhaustive"] is True and "missingRepositories" not in resp
        assert s.errors == []
    finally:
        s.close()


@pytest.mark.parametrize(("damage", "says"), DAMAGES, ids=[d.__name__ for d, _ in DAMAGES])
def test_a_damaged_shard_is_reported_in_every_answer(built, tmp_path, damage, says):
    ix = _copy(built, tmp_path)
    damage(ix)
    s = Searcher(ix)
    try:
        assert len(s.errors) == 1 and says in s.errors[0]
        missing = [{"id": VICTIM, "name": NAMES[VICTIM]}]

        resp = s.search("needle")  # POST /api/search
        assert _repos_found(resp) == {NAMES[1], NAMES[3]}
        assert resp["isSearchExhaustive"] is False
        assert resp["missingRepositories"] == missing

        # the stream: the final event says the same
        opts = SearchOptions()

        async def stream():
            merger = StreamMerger(opts, 0)
            async for partial in await s.start("needle", opts):
                merger.chunk(partial)
            return merger.final()

        final = asyncio.run(stream())
        assert final["isSearchExhaustive"] is False and final["missingRepositories"] == missing

        # a caller who may see only alpha learns that the answer is incomplete, not beta's name
        only_alpha = s.search("needle", options=SearchOptions(visible_repos=frozenset({1})))
        assert only_alpha["isSearchExhaustive"] is False and only_alpha["missingRepositories"] == []

        # the MCP tools' text says it too
        assert "files of git.example.com/t/beta were not searched" in with_missing("Found 2 matches", resp)
    finally:
        s.close()


def test_a_damaged_shard_of_several_repositories_names_each_of_them(built, tmp_path):
    """A shard may hold many repositories (an index batch builds small ones together, compaction
    merges small shards): refused, it costs every one of them, and the answer names them all."""
    from codesearch.index.compact import compact

    ix = _copy(built, tmp_path)
    compact(ix)  # the three small shards become one
    (only,) = manifest.current_shards(ix)
    os.unlink(only)
    s = Searcher(ix)
    try:
        resp = s.search("needle")
        assert resp["files"] == [] and resp["isSearchExhaustive"] is False
        assert resp["missingRepositories"] == [{"id": i, "name": n} for i, n in sorted(NAMES.items())]
    finally:
        s.close()
