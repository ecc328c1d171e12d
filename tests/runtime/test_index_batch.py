"""Index jobs in batches (`codesearch.runtime.index_batch`), without Ray: one run of an indexer
builds the small repositories of many queued jobs into one shared shard, and everything a lone job
guaranteed still holds: exact answers, a re-index that swaps only what changed, a removal that
takes a repository out of search, a repository that fails alone, retries that run alone. And a
batch never holds a repository it built behind a slow neighbour: a slow clone, a large repository
or a batch grown old sends what is built into the index first."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

from codesearch.index import manifest
from codesearch.index.compact import plan
from codesearch.runtime import index_batch
from codesearch.runtime.workers import RepoIndexer, RuntimeOptions
from codesearch.store import Store
from codesearch.store import models as m
from tests.corpus import git, make_local_repo
from tests.githttp import GatedGitHttp, make_bare_repo
from tests.oracle import Oracle, assert_engine_equals_oracle, docs_from_git

QUERIES = [  # (query, flags, tree for the oracle)
    ("needle", {}, ("text", "needle")),
    ("Needle", {"case_sensitive": True}, ("text", "Needle")),
    (r'"def handler_\d+"', {"is_regex": True}, ("regex", r"def handler_\d+")),
    ("sym:^handler_2$", {}, ("sym", "^handler_2$")),
    ("renamed", {}, ("text", "renamed")),
]


def _files(i: int) -> dict[str, str]:
    return {f"src/mod_{i}.py": f"def handler_{i}():\n    return 'Needle {i}'\n", "README.md": f"repo {i}: needle\n"}


@pytest.fixture
def world(tmp_path, monkeypatch):
    """`n` local repositories (call it), their store rows and index jobs queued, and an indexer.
    Batches stay young for a minute here (a loaded machine must not split them): the tests of
    the age rule set `YOUNG_S` themselves."""
    monkeypatch.setattr(index_batch, "YOUNG_S", 60.0)
    data = str(tmp_path / "data")
    store = Store.open(data, max_attempts=1, retry_base_seconds=0)
    store.upsert_connection("local", "git", {"type": "git", "url": f"file://{tmp_path}/src/*"})
    made: dict[str, object] = {"data": data, "store": store, "index": os.path.join(data, "index"), "ids": []}

    def make(n: int) -> dict[str, object]:
        from codesearch.hosts.base import HostRepo

        listing = []
        for i in range(n):
            path = make_local_repo(str(tmp_path / "src" / f"r{i}"), _files(i))
            listing.append(HostRepo(name=f"local{path}", display_name=f"r{i}", code_host_type="git",
                                    clone_url=f"file://{path}", local_path=path))
        ids = store.upsert_repos("local", listing).ids
        made["ids"] = [ids[r.name] for r in listing]
        made["worker"] = RepoIndexer(data, "indexer-b", RuntimeOptions(heartbeat_s=0.05))
        return made

    yield make
    if "worker" in made:
        made["worker"].close()
    store.close()


def _enqueue(w) -> list[int]:
    return [w["store"].enqueue_index_job(rid).id for rid in w["ids"]]


def _check_answers(w, tmp_path, gone=()) -> None:
    store, docs, repos = w["store"], [], {}
    for rid in w["ids"]:
        if rid in gone:
            continue
        row = store.get_repo(rid)
        docs += docs_from_git(row.local_path, row.name, ["refs/heads/main"], str(tmp_path / "scratch" / str(len(docs))))
        repos[row.name] = {"default": "refs/heads/main"}
    assert_engine_equals_oracle(w["index"], Oracle(docs, repos=repos), QUERIES)


def test_one_run_builds_the_queued_repositories_into_one_shard_and_reindexes_only_what_changed(world, tmp_path):
    w = world(5)
    store, ix, ids = w["store"], w["index"], w["ids"]
    jobs = _enqueue(w)
    assert w["worker"].run_once()
    assert [store.get_job(j).state for j in jobs] == [m.COMPLETED] * 5
    assert all(store.get_repo(r).index_status == m.INDEXED and store.get_repo(r).indexed_revisions for r in ids)
    shards = manifest.current_shards(ix)
    assert len(shards) == 1 and plan(ix, 100 << 20) == []  # one shared shard: nothing for compaction to do
    assert all(manifest.built_from(ix, r) for r in ids)
    _check_answers(w, tmp_path)

    # a new commit in one repository: a second run rebuilds it alone, the shared shard stays as it was
    path = store.get_repo(ids[2]).local_path
    with open(os.path.join(path, "src", "mod_2.py"), "w") as f:
        f.write("def renamed_2():\n    return 'moved'\n")
    git(path, "commit", "-q", "-am", "rename")
    jobs = _enqueue(w)
    assert w["worker"].run_once()
    assert [store.get_job(j).state for j in jobs] == [m.COMPLETED] * 5
    got = manifest.read_manifest(ix)
    shared = os.path.basename(shards[0])
    assert got["shards"][shared] == {"repos": sorted(ids), "dead": [ids[2]]}
    assert [got["repos"][str(r)]["shards"] == [shared] for r in ids] == [True, True, False, True, True]
    _check_answers(w, tmp_path)

    manifest.remove_repo(ix, ids[3])  # what the scheduler's garbage collection does for a deleted repository
    _check_answers(w, tmp_path, gone={ids[3]})


def test_a_repository_that_cannot_be_read_fails_alone(world):
    w = world(3)
    store, ids = w["store"], w["ids"]
    shutil.rmtree(store.get_repo(ids[1]).local_path)
    jobs = _enqueue(w)
    assert w["worker"].run_once()
    assert [store.get_job(j).state for j in jobs] == [m.COMPLETED, m.FAILED, m.COMPLETED]
    assert [store.get_repo(r).index_status for r in ids] == [m.INDEXED, m.INDEX_FAILED, m.INDEXED]


def test_a_retried_job_runs_alone(world):
    w = world(3)
    store, ids = w["store"], w["ids"]
    store.max_attempts = 3
    first = store.enqueue_index_job(ids[0], force=True)
    store.claim_job("index", "someone")
    store.fail_job(first.id, "it broke", worker_id="someone")  # PENDING again, its attempt counted
    later = [store.enqueue_index_job(r).id for r in ids[1:]]
    assert w["worker"].run_once()
    assert store.get_job(first.id).state == m.COMPLETED
    assert [store.get_job(j).state for j in later] == [m.PENDING, m.PENDING]
    assert w["worker"].run_once()  # the two first attempts, together
    assert [store.get_job(j).state for j in later] == [m.COMPLETED, m.COMPLETED]
    assert len(manifest.current_shards(w["index"])) == 2

    # nor does a batch take a retried job after a first attempt
    retried = store.enqueue_index_job(ids[1], force=True)
    store.claim_job("index", "someone")
    fresh = store.enqueue_index_job(ids[0], force=True)
    store.fail_job(retried.id, "it broke", worker_id="someone")  # due now: after `fresh`
    assert w["worker"].run_once()
    assert (store.get_job(fresh.id).state, store.get_job(retried.id).state) == (m.COMPLETED, m.PENDING)


def test_a_batch_holds_at_most_max_batch_repositories(world, monkeypatch):
    monkeypatch.setattr(index_batch, "MAX_BATCH", 2)
    w = world(3)
    jobs = _enqueue(w)
    assert w["worker"].run_once()
    assert [w["store"].get_job(j).state for j in jobs] == [m.COMPLETED, m.COMPLETED, m.PENDING]


def _until(what: str, check, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s:g}s: {what}"
        time.sleep(0.05)


def test_a_slow_clone_does_not_hold_back_what_the_batch_built(world, tmp_path):
    """Queued: a local repository, one behind a clone that hangs, another local one. The first is
    swapped in and its job completed while the clone still hangs (it waited `MIRROR_WAIT_S`, not
    for the clone); the clone's repository then begins the next batch."""
    from codesearch.hosts.base import HostRepo

    w = world(2)
    store, ix, (quick, later) = w["store"], w["index"], w["ids"]
    make_bare_repo(str(tmp_path / "served"), "team/slow.git", {"slow.py": "def slowpoke():\n    return 2\n"})
    with GatedGitHttp(str(tmp_path / "served"), gate_s=60) as host:
        listing = [HostRepo(name="remote/slow", display_name="slow", code_host_type="git",
                            clone_url=host.url("team/slow.git"))]
        slow = store.upsert_repos("local", listing, prune=False).ids["remote/slow"]
        jobs = [store.enqueue_index_job(r).id for r in (quick, slow, later)]
        run = threading.Thread(target=w["worker"].run_once)
        run.start()
        try:
            _until("the quick repository's job completed", lambda: store.get_job(jobs[0]).state == m.COMPLETED)
            assert not host.gate.is_set() and store.get_job(jobs[1]).state == m.IN_PROGRESS
            assert store.get_repo(quick).index_status == m.INDEXED and manifest.built_from(ix, quick)
        finally:
            host.gate.set()
            run.join(60)
    assert [store.get_job(j).state for j in jobs] == [m.COMPLETED] * 3
    assert [store.get_repo(r).index_status for r in (quick, slow, later)] == [m.INDEXED] * 3
    shard_of = {r: manifest.read_manifest(ix)["repos"][str(r)]["shards"] for r in (quick, slow, later)}
    assert shard_of[quick] != shard_of[slow] == shard_of[later]  # the clone's repository began the next batch


def test_a_large_repository_is_not_built_into_a_batch_that_holds_others(world, monkeypatch):
    """A repository whose files hold more than `QUICK_BYTES` would keep the batch from the index for
    its whole build: what is built is swapped in first, and the large one begins the next batch."""
    monkeypatch.setattr(index_batch, "QUICK_BYTES", 1000)
    w = world(3)
    store, ix, ids = w["store"], w["index"], w["ids"]
    path = store.get_repo(ids[1]).local_path
    with open(os.path.join(path, "large.txt"), "w") as f:
        f.write("needle filler\n" * 200)  # 2,800 bytes: "large" here
    git(path, "add", "large.txt")
    git(path, "commit", "-q", "-m", "large")
    jobs = _enqueue(w)
    assert w["worker"].run_once()
    assert [store.get_job(j).state for j in jobs] == [m.COMPLETED] * 3
    repos = [manifest.read_manifest(ix)["repos"][str(r)] for r in ids]
    assert repos[0]["shards"] != repos[1]["shards"] == repos[2]["shards"]  # the large one began the next batch
    assert repos[0]["generation"] < repos[1]["generation"]  # and went in after the small one


@pytest.mark.parametrize(("young_s", "states"), [
    (60.0, [m.COMPLETED, m.COMPLETED, m.COMPLETED]),  # young all along: one batch
    (0.0, [m.COMPLETED, m.PENDING, m.PENDING]),  # old once its first repository is built: it takes no more
])
def test_a_batch_claims_more_only_while_it_is_young(world, monkeypatch, young_s, states):
    w = world(3)
    monkeypatch.setattr(index_batch, "YOUNG_S", young_s)
    jobs = _enqueue(w)
    assert w["worker"].run_once()
    assert [w["store"].get_job(j).state for j in jobs] == states
