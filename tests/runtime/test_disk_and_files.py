"""Disk and files: a full disk, and a shard its checksum refuses (no Ray: the workers, the store,
the scheduler's integrity check and the engine as plain classes, on real small tmpfs mounts).

* A full disk during an index build: the job says which file could not be written and why, is put
  back in the queue without using up an attempt, the index that was there keeps answering (no
  temporary file left, the manifest as it was), and once space is freed the job runs by itself.
* A full disk during a store write: a clear `StoreError` naming the database, the transaction rolled
  back, the database intact (``PRAGMA integrity_check``) and writable again once space is freed.
* A damaged shard (a table: garbage over its middle, truncated, deleted): the scheduler's check
  refuses it, moves the file aside, counts it for ``/api/health``, queues its repository for a
  rebuild from its source; the rebuild runs, the refusal clears and searches are full again.

Each tmpfs is mounted for one test and unmounted in its teardown (bounded; lazily if busy).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import uuid

import pytest
from sqlalchemy import text

from codesearch.errors import StoreError
from codesearch.hosts.base import HostRepo
from codesearch.index import manifest
from codesearch.runtime.integrity import REFUSED_DIR, IndexIntegrity, refusal_summary
from codesearch.runtime.workers import RepoIndexer, RuntimeOptions
from codesearch.search.engine import Searcher
from codesearch.store import Store
from codesearch.store import models as m
from tests.corpus import git, make_local_repo


@contextlib.contextmanager
def tmpfs(path: str, size: str):
    """A tmpfs of `size` mounted at `path` for the block (root only: skipped elsewhere)."""
    os.makedirs(path, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                       capture_output=True, text=True, timeout=30)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", path], capture_output=True, timeout=30).returncode:
            subprocess.run(["umount", "-l", path], capture_output=True, timeout=30)


def fill(directory: str) -> str:
    """Write a ballast file in `directory` until its disk is full; returns its path."""
    path = os.path.join(directory, ".ballast-" + uuid.uuid4().hex[:6])
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (64 << 10))
                f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC
    return path


def _local_repos(store: Store, paths: dict[str, str]) -> dict[str, int]:
    """Repositories (name → local path) listed by one connection, indexed in place; their ids."""
    store.upsert_connection("local", "git", {"type": "git", "url": "file:///"})
    repos = [HostRepo(name=name, display_name=os.path.basename(path), code_host_type="git",
                      clone_url=f"file://{path}", local_path=path) for name, path in paths.items()]
    return store.upsert_repos("local", repos).ids


def _found(index_dir: str, query: str) -> tuple[set[str], dict]:
    s = Searcher(index_dir)
    try:
        resp = s.search(query, matches=100_000)
        return {f["repository"] for f in resp["files"]}, resp
    finally:
        s.close()


# --------------------------------------------------------------------------- a full disk


def test_a_full_disk_during_an_index_build_defers_the_job_and_keeps_the_index(tmp_path):
    src = make_local_repo(str(tmp_path / "src" / "alpha"), {"a.py": "def old_function():\n    return 1\n"})
    data = str(tmp_path / "data")
    store = Store.open(data, max_attempts=2)
    rid = _local_repos(store, {"local/alpha": src})["local/alpha"]
    index = os.path.join(data, "index")
    worker = None
    with tmpfs(index, "2m"):
        try:
            worker = RepoIndexer(data, "indexer-full", RuntimeOptions(heartbeat_s=0.05, disk_full_retry_s=0))
            store.enqueue_index_job(rid)
            assert worker.run_once()
            assert store.get_repo(rid).index_status == m.INDEXED
            before = open(os.path.join(index, manifest.MANIFEST), "rb").read()

            # a new commit whose shard cannot be written: the disk is full
            with open(os.path.join(src, "b.txt"), "w") as f:
                f.write("new_words here\n" + "".join(f"line {i} of new text\n" for i in range(20000)))
            git(src, "add", "-A")
            git(src, "commit", "-q", "-m", "more")
            ballast = fill(index)
            job = store.enqueue_index_job(rid)
            for _ in range(3):  # more tries than attempts: a full disk uses none of them
                assert worker.run_once()
                after = store.get_job(job.id)
                assert after.state == m.PENDING and after.attempts == 0, after
            # which file, and why (the data directory written <data dir>, as every recorded error)
            assert "no space left on" in after.error.lower() and "<data dir>/index/" in after.error, after.error

            # the previous index answers as before; nothing half-written is left behind
            assert open(os.path.join(index, manifest.MANIFEST), "rb").read() == before
            assert [f for f in os.listdir(index) if f.startswith((".tmp-", ".build-", ".manifest-"))] == []
            assert _found(index, "old_function")[0] == {"local/alpha"}
            assert _found(index, "new_words")[0] == set()

            # space comes back: the same job runs by itself and the new commit is searchable
            os.unlink(ballast)
            assert worker.run_once()
            assert store.get_job(job.id).state == m.COMPLETED
            assert _found(index, "new_words")[0] == {"local/alpha"}
        finally:
            if worker is not None:
                worker.close()
            store.close()


def test_a_full_disk_during_a_store_write_is_a_clear_error_and_the_store_stays_intact(tmp_path):
    data = str(tmp_path / "data")
    with tmpfs(data, "4m"):
        store = Store.open(data)
        try:
            store.upsert_connection("kept", "git", {"type": "git", "url": "file:///kept"})
            ballast = fill(data)
            error = None
            for i in range(200):  # every write until one needs a page the disk does not have
                try:
                    store.upsert_connection(f"c{i}", "git", {"type": "git", "url": "file:///" + "x" * 4000})
                except StoreError as e:
                    error = e
                    break
            assert error is not None, "no write failed on a full disk"
            assert "disk is full" in str(error) and "nothing was changed" in str(error), str(error)
            assert data not in str(error)  # the database by its file name, not the server's folders
            os.unlink(ballast)
            with store.engine.connect() as c:
                assert c.execute(text("PRAGMA integrity_check")).scalar() == "ok"
            names = {c.name for c in store.list_connections()}
            assert "kept" in names and f"c{i}" not in names
            store.upsert_connection("after", "git", {"type": "git", "url": "file:///after"})
            assert "after" in {c.name for c in store.list_connections()}
        finally:
            store.close()


# --------------------------------------------------------------------------- a refused shard


def overwrite_middle(path: str) -> None:
    size = os.path.getsize(path)
    n = min(64 << 10, size // 2)
    with open(path, "r+b") as f:
        f.seek((size - n) // 2)
        f.write(os.urandom(n))


def truncate(path: str) -> None:
    os.truncate(path, os.path.getsize(path) // 2)


def delete(path: str) -> None:
    os.unlink(path)


DAMAGES = [  # (damage, the reason the refusal is counted under, whether a file is moved aside)
    (overwrite_middle, "checksum", True),
    (truncate, "truncated", True),
    (delete, "missing", False),
]


@pytest.mark.parametrize(("damage", "reason", "moved"), DAMAGES, ids=[d.__name__ for d, _, _ in DAMAGES])
def test_a_refused_shard_is_moved_aside_reported_and_rebuilt(tmp_path, damage, reason, moved):
    data = str(tmp_path / "data")
    index = os.path.join(data, "index")
    store = Store.open(data)
    paths = {f"local/{name}": make_local_repo(str(tmp_path / "src" / name),
                                              {"f.py": f"def needle_{name}():\n    return '{name}' * 3\n" * 200})
             for name in ("alpha", "beta")}
    ids = {name.removeprefix("local/"): rid for name, rid in _local_repos(store, paths).items()}
    worker = RepoIndexer(data, "indexer-rebuild", RuntimeOptions(heartbeat_s=0.05))
    try:
        for rid in ids.values():
            store.enqueue_index_job(rid)
            assert worker.run_once()
        integrity = IndexIntegrity(index)
        assert integrity.check(store) == [] and refusal_summary(index) is None
        (victim,) = manifest.read_manifest(index)["repos"][str(ids["alpha"])]["shards"]
        damage(os.path.join(index, victim))

        (refusal,) = integrity.check(store)
        assert (refusal.shard, refusal.reason, refusal.repositories) == (victim, reason, {ids["alpha"]: "local/alpha"})
        assert os.path.exists(os.path.join(index, REFUSED_DIR, f"{victim}.{int(refusal.since)}")) is moved
        assert not os.path.exists(os.path.join(index, victim))
        assert refusal_summary(index) == {"refusedShards": 1, "missingRepositories": 1}
        assert integrity.check(store) == []  # refused once, not again every tick
        # meanwhile every answer says what it misses
        found, resp = _found(index, "needle")
        assert found == {"local/beta"} and resp["missingRepositories"] == [{"id": ids["alpha"], "name": "local/alpha"}]

        # the repository was queued for a rebuild from its source, though its commit did not move
        jobs = [j for j in store.list_jobs(kind=m.INDEX_JOB) if j.repo_id == ids["alpha"] and j.state == m.PENDING]
        assert len(jobs) == 1
        assert worker.run_once()
        assert store.get_job(jobs[0].id).state == m.COMPLETED
        assert integrity.check(store) == [] and integrity.refused == {} and refusal_summary(index) is None
        found, resp = _found(index, "needle")
        assert found == {"local/alpha", "local/beta"} and resp["isSearchExhaustive"] is True
        assert "missingRepositories" not in resp
    finally:
        worker.close()
        store.close()
