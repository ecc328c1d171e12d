"""The job workers without Ray: a timed-out index job is really stopped, not left running.

`repoIndexTimeoutMs` fails the job, and the job's thread must stop at its next check (the index
builder calls `check_cancelled` per file), so that a worker never runs two jobs at once and a
half-built index never replaces the one that was there.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from datetime import datetime, timezone

import pytest

from codesearch.hosts.base import HostRepo
from codesearch.index import manifest
from codesearch.index.builder import index_source
from codesearch.index.sources import DirectorySource, RepoInfo
from codesearch.runtime.workers import JobCancelled, RepoIndexer, RuntimeOptions
from codesearch.store import Store
from codesearch.store import models as m
from tests.corpus import make_local_repo


def _local_repo(path: str, n_files: int = 3) -> str:
    return make_local_repo(path, {f"f{i}.py": f"def function_{i}():\n    return {i}\n" for i in range(n_files)})


def _job_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "-job" in t.name and t.is_alive()]


@pytest.fixture
def store_with_repo(tmp_path):
    path = _local_repo(str(tmp_path / "src" / "alpha"))
    data = str(tmp_path / "data")
    store = Store.open(data, max_attempts=1)
    store.upsert_connection("local", "git", {"type": "git", "url": f"file://{path}"})
    repo = HostRepo(name=f"local{path}", display_name="alpha", code_host_type="git", clone_url=f"file://{path}",
                    local_path=path)
    rid = store.upsert_repos("local", [repo]).ids[repo.name]
    yield data, store, rid
    store.close()


def test_a_timed_out_index_job_fails_and_its_thread_stops(store_with_repo):
    data, store, rid = store_with_repo
    job = store.enqueue_index_job(rid)
    options = RuntimeOptions(heartbeat_s=0.05, cancel_grace_s=10, store_options={"max_attempts": 1},
                             index_delay_s=60)  # the job would sleep a minute unless cancelled
    worker = RepoIndexer(data, "indexer-t", options, timeout_ms=300)
    try:
        t0 = time.monotonic()
        assert worker.run_once() is True
        elapsed = time.monotonic() - t0
        after = store.get_job(job.id)
        assert after.state == m.FAILED and "timed out after 0.3s" in after.error
        assert store.get_repo(rid).index_status == m.INDEX_FAILED
        assert elapsed < 5, f"the worker waited {elapsed:.1f}s for a cancelled job"
        assert not _job_threads(), "the timed-out job's thread is still running"
        assert not os.path.exists(os.path.join(data, "index")) or not manifest.current_shards(os.path.join(data, "index"))
    finally:
        worker.close()


def test_the_next_job_runs_normally_after_a_cancelled_one(store_with_repo):
    data, store, rid = store_with_repo
    store.enqueue_index_job(rid)
    worker = RepoIndexer(data, "indexer-t2", RuntimeOptions(heartbeat_s=0.05, index_delay_s=60,
                                                             store_options={"max_attempts": 1}), timeout_ms=200)
    assert worker.run_once()
    worker.options.index_delay_s = 0
    worker._timeout_s = 60
    job = store.enqueue_index_job(rid, force=True)
    assert worker.run_once()
    assert store.get_job(job.id).state == m.COMPLETED
    assert store.get_repo(rid).index_status == m.INDEXED
    assert len(manifest.current_shards(os.path.join(data, "index"))) == 1
    worker.close()


def test_a_build_cancelled_midway_keeps_the_previous_index(tmp_path):
    """The cancellation check raised from the builder's progress callback: the old shards stay
    current, and no build folder is left behind."""
    src = tmp_path / "tree"
    src.mkdir()
    for i in range(20):
        (src / f"m{i}.py").write_text(f"value_{i} = {i}\n")
    out = str(tmp_path / "index")
    repo = RepoInfo(id=1, name="tree")
    index_source(DirectorySource(str(src), repo), out)
    before = manifest.current_shards(out)
    seen = []

    def cancel_after_five(_size):
        seen.append(1)
        if len(seen) > 5:
            raise JobCancelled("cancelled")

    with pytest.raises(JobCancelled):
        index_source(DirectorySource(str(src), repo), out, progress=cancel_after_five)
    assert manifest.current_shards(out) == before
    assert not [n for n in os.listdir(out) if n.startswith(".build-")]


# ---------------------------------------------------------------------- pushedAt


def _git_head_date(repo: str, ref: str) -> datetime:
    out = subprocess.run(["git", "-C", repo, "log", "-1", "--format=%cI", ref], capture_output=True, text=True,
                         check=True).stdout.strip()
    return datetime.fromisoformat(out)


@pytest.fixture
def indexed_repo(store_with_repo):
    """The local repo with a newer commit on a side branch, indexed by the real indexer."""
    data, store, rid = store_with_repo
    path = store.get_repo(rid).local_path
    env = {**os.environ, "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_COMMITTER_DATE": "2025-06-01T12:00:00Z",
           "GIT_AUTHOR_DATE": "2025-06-01T12:00:00Z"}
    for args in (["checkout", "-q", "-b", "side"], ["commit", "-q", "--allow-empty", "-m", "newer, not default"],
                 ["checkout", "-q", "main"]):
        subprocess.run(["git", "-C", path, *args], check=True, capture_output=True, env=env)
    store.enqueue_index_job(rid)
    worker = RepoIndexer(data, "indexer-p", RuntimeOptions(heartbeat_s=0.05))
    try:
        assert worker.run_once()
    finally:
        worker.close()
    return data, store, rid, path


def test_indexing_records_pushed_at_as_the_default_branch_head_date(indexed_repo):
    _data, store, rid, path = indexed_repo
    row = store.get_repo(rid)
    assert row.index_status == m.INDEXED
    assert row.pushed_at == _git_head_date(path, "main") == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert row.pushed_at != _git_head_date(path, "side")  # the newest commit of the default branch, not of any


@pytest.mark.parametrize("host_pushed_at, updated", [
    (None, False),                    # a generic git host reports nothing: the indexed date stays
    ("2000-01-01T00:00:00Z", False),  # an older host date: nothing new since the index
    ("2999-01-01T00:00:00Z", True),   # the host saw a push after the index: re-index, date kept until then
])
def test_a_resync_keeps_the_indexed_pushed_at(indexed_repo, host_pushed_at, updated):
    _data, store, rid, path = indexed_repo
    row = store.get_repo(rid)
    listing = HostRepo(name=row.name, display_name=row.display_name, code_host_type=row.code_host_type,
                       clone_url=row.clone_url, local_path=row.local_path, pushed_at=host_pushed_at)
    result = store.upsert_repos("local", [listing])
    assert (rid in result.updated) is updated
    assert store.get_repo(rid).pushed_at == _git_head_date(path, "main")
