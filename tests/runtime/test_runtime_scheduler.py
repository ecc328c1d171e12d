"""The runtime on a real Ray instance: scheduler + syncer/indexer actors over a config with a
local `file://` glob connection and a remote repo on a real git smart-HTTP server.

The tests share one data directory and run in order: first sync and index, a new local repo
picked up by a resync, a restart that re-clones nothing, an indexer killed mid-job, and the
garbage collection of a removed connection.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from codesearch.index.manifest import current_shards, read_manifest
from codesearch.search.options import SearchOptions
from codesearch.store import Store
from codesearch.store import models as m
from tests.corpus import make_local_repo
from tests.githttp import GitHttpServer, make_bare_repo

ray = pytest.importorskip("ray")

SETTINGS = {"resyncConnectionIntervalMs": 1000, "reindexIntervalMs": 3600000,
            "resyncConnectionPollingIntervalMs": 200, "reindexRepoPollingIntervalMs": 200,
            "repoGarbageCollectionGracePeriodMs": 1000, "maxConnectionSyncJobConcurrency": 1,
            "maxRepoIndexingJobConcurrency": 2}


def _options(**kw):
    from codesearch.runtime.workers import RuntimeOptions

    return RuntimeOptions(poll_s=0.1, heartbeat_s=0.2, stale_s=1.5, store_options={"retry_base_seconds": 0.2}, **kw)


def _wait(pred, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _files(pool, query: str) -> set[str]:
    resp = pool.search(query, SearchOptions(matches=1000))
    return {f["fileName"]["text"] for f in resp["files"]}


class World:
    def __init__(self, base):
        self.base = str(base)
        self.data = os.path.join(self.base, "data")
        self.index = os.path.join(self.data, "index")
        self.local = os.path.join(self.base, "local")
        os.makedirs(self.local)
        make_local_repo(os.path.join(self.local, "alpha"), {"alpha.py": "def alpha_marker_one():\n    return 1\n"})
        make_local_repo(os.path.join(self.local, "beta"), {"beta.py": "def beta_marker_two():\n    return 2\n"})
        self.git_root = os.path.join(self.base, "git")
        make_bare_repo(self.git_root, "acme/widgets.git", {"widgets.py": "def remote_widget_marker():\n    pass\n"})
        self.server = GitHttpServer(self.git_root).start()
        self.config = os.path.join(self.base, "config.json")
        self.write_config(remote=True)
        self.scheduler = None
        self.workers: list = []
        self.pool = None
        self.store = Store.open(self.data)

    def write_config(self, remote: bool) -> None:
        conns = {"local": {"type": "git", "url": f"file://{self.local}/*"}}
        if remote:
            conns["remote"] = {"type": "git", "url": self.server.url("acme/widgets.git")}
        before = os.stat(self.config).st_mtime_ns if os.path.exists(self.config) else 0
        with open(self.config, "w") as f:
            json.dump({"settings": SETTINGS, "connections": conns}, f)
        if os.stat(self.config).st_mtime_ns == before:
            os.utime(self.config, ns=(before + 10**6, before + 10**6))

    def start(self, **options) -> None:
        from codesearch.config import load_config
        from codesearch.runtime.scheduler import start_scheduler
        from codesearch.runtime.workers import start_workers

        self.scheduler = start_scheduler(self.config, self.data, _options(**options))
        self.workers = start_workers(self.data, load_config(self.config).settings, _options(**options))

    def stop(self) -> None:
        from codesearch.runtime.workers import stop_workers

        if self.scheduler is not None:
            ray.get(self.scheduler.shutdown.remote(), timeout=15)
            ray.kill(self.scheduler)
            self.scheduler = None
        stop_workers(self.workers)
        self.workers = []

    def remote_repo(self):
        return next((r for r in self.store.list_repos(per_page=100)[0] if "acme/widgets" in r.name), None)

    def settled(self) -> bool:
        conns = self.store.list_connections()
        repos = self.store.list_repos(per_page=100)[0]
        return (conns and all(c.synced_at is not None and c.sync_status != m.SYNC_FAILED for c in conns)
                and repos and all(r.index_status == m.INDEXED for r in repos))


@pytest.fixture(scope="module")
def world(ray_session, tmp_path_factory):
    from codesearch.runtime.searchers import SearcherPool

    w = World(tmp_path_factory.mktemp("runtime"))
    try:
        w.start()
        os.makedirs(w.index, exist_ok=True)
        w.pool = SearcherPool.create(w.index, 2, keep_empty=True, name_prefix="sched-test-searcher")
        yield w
    finally:
        w.stop()
        if w.pool is not None:
            w.pool.close()
        w.store.close()
        w.server.stop()


def test_first_sync_indexes_everything_and_searchers_refresh(world):
    _wait(world.settled, what="every connection synced and repo indexed")
    names = sorted(r.name for r in world.store.list_repos(per_page=100)[0])
    assert len(names) == 3 and any("acme/widgets" in n for n in names)
    assert not any(j.state == m.FAILED for j in world.store.list_jobs())
    assert _files(world.pool, "remote_widget_marker") == set()  # not refreshed yet
    world.pool.refresh(world.index)
    assert _files(world.pool, "alpha_marker_one or beta_marker_two or remote_widget_marker") == {
        "alpha.py", "beta.py", "widgets.py"}
    repo = world.remote_repo()
    assert os.path.isdir(os.path.join(world.data, "repos", str(repo.id)))
    assert "refs/heads/main" in repo.indexed_revisions


def test_a_new_local_repo_is_picked_up_by_the_next_resync(world):
    make_local_repo(os.path.join(world.local, "gamma"), {"gamma.py": "def gamma_marker_three():\n    return 3\n"})
    _wait(lambda: any("gamma" in r.name and r.index_status == m.INDEXED for r in world.store.list_repos(per_page=100)[0]),
          what="the new repo indexed")
    world.pool.refresh(world.index)
    assert _files(world.pool, "gamma_marker_three") == {"gamma.py"}


def test_a_restart_resumes_without_recloning(world):
    repo = world.remote_repo()
    mirror = os.path.join(world.data, "repos", str(repo.id))
    before = os.stat(mirror)
    synced_before = {c.name: c.synced_at for c in world.store.list_connections()}
    world.stop()
    requests = len(world.server.requests)
    world.start(index_delay_s=2.0)  # slow indexers for the next test
    _wait(lambda: all(c.synced_at and c.synced_at > synced_before[c.name] for c in world.store.list_connections()),
          what="a resync after the restart")
    time.sleep(0.5)
    after = os.stat(mirror)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert world.server.requests[requests:] == []  # no clone, not even a fetch: nothing was due
    assert world.remote_repo().indexed_at == repo.indexed_at
    assert world.settled()


def test_a_killed_indexer_job_is_requeued_and_finished_by_another(world):
    repo = world.remote_repo()
    job = world.store.enqueue_index_job(repo.id, force=True)
    running = _wait(lambda: (j := world.store.get_job(job.id)).state == m.IN_PROGRESS and j, what="the job claimed")
    ids = ray.get([a.ping.remote() for a in world.workers])
    victim = world.workers[ids.index(running.worker_id)]
    ray.kill(victim, no_restart=True)
    done = _wait(lambda: (j := world.store.get_job(job.id)).state in (m.COMPLETED, m.FAILED) and j, timeout=30,
                 what="the job finished")
    assert done.state == m.COMPLETED and done.worker_id != running.worker_id and done.attempts == 2
    assert world.remote_repo().indexed_at > repo.indexed_at


def test_a_killed_scheduler_is_restarted_by_ray_and_resumes_with_its_searchers(world):
    ray.get(world.scheduler.set_searchers.remote("sched-test-searcher", 2))
    assert ray.get(world.scheduler.status.remote())["reconstructed"] is False
    ray.kill(world.scheduler, no_restart=False)
    # ray.kill returns at once; the old incarnation may still answer for a moment
    status = _wait(lambda: (st := _status_or_none(world.scheduler)) and st["reconstructed"] and st,
                   what="the scheduler restarted")
    assert status["searchers"] == 2
    # it ticks again: a new repo is synced, indexed, and the searchers are refreshed by it alone
    make_local_repo(os.path.join(world.local, "delta"), {"delta.py": "def delta_marker_four():\n    return 4\n"})
    _wait(lambda: _files(world.pool, "delta_marker_four") == {"delta.py"}, what="the searchers refreshed")


def _status_or_none(actor):
    try:
        return ray.get(actor.status.remote(), timeout=2)
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
        return None


def test_the_compactor_merges_the_repositories_into_a_compound_shard(world):
    """The module's shards become one compound shard; the scheduler refreshes the searchers,
    which answer as before. How many there are depends on how the indexers batched the
    repositories (`codesearch.runtime.index_batch`), but gamma and delta were indexed by tests of
    their own, after the first sync: at least three."""
    from codesearch.runtime.compactor import start_compactor, stop_compactor

    query = "alpha_marker_one or beta_marker_two or remote_widget_marker or gamma_marker_three or delta_marker_four"
    before = _files(world.pool, query)
    shards = len(current_shards(world.index))
    assert shards >= 3
    compactor = start_compactor(world.data, poll_s=0.2)
    try:
        _wait(lambda: len(current_shards(world.index)) == 1, what="one compound shard")
        _wait(lambda: _files(world.pool, query) == before, what="the searchers refreshed by the scheduler")
        assert ray.get(compactor.stats.remote())["merged_shards"] == shards
    finally:
        stop_compactor(compactor)


def test_a_removed_connection_is_garbage_collected_after_the_grace_period(world):
    repo = world.remote_repo()
    mirror = os.path.join(world.data, "repos", str(repo.id))
    world.write_config(remote=False)
    _wait(lambda: world.store.find_repo(repo.name) is None, what="the repo row deleted")
    _wait(lambda: not os.path.exists(mirror), timeout=5, what="the mirror removed")
    _wait(lambda: str(repo.id) not in read_manifest(world.index)["repos"], timeout=5, what="out of the index")
    man = read_manifest(world.index)
    # its documents are tombstoned in the compound shard it shares with the local repositories
    assert all(repo.id not in e["repos"] or repo.id in e["dead"] for e in man["shards"].values())
    assert [c.name for c in world.store.list_connections()] == ["local"]
    world.pool.refresh(world.index)
    assert _files(world.pool, "remote_widget_marker") == set()
    assert _files(world.pool, "gamma_marker_three") == {"gamma.py"}


def test_search_contexts_from_the_config(tmp_path):
    """Contexts in the config become store contexts that `context:` resolves."""
    from codesearch.runtime.scheduler import Scheduler

    cfg = tmp_path / "c.json"
    cfg.write_text('{"connections": {"a": {"type": "git", "url": "https://example.com/x/one.git"},'
                   ' "b": {"type": "git", "url": "https://example.com/x/two.git"}},'
                   ' "contexts": {"only-a": {"includeConnections": ["a"]}, "all-x": {"include": ["example.com/x/*"]}}}')
    sched = Scheduler(str(cfg), str(tmp_path / "data"))  # applies the config: both connections recorded
    store = sched.store
    for conn, name in (("a", "one"), ("b", "two")):
        store.upsert_repos(conn, [{"name": f"example.com/x/{name}", "display_name": f"x/{name}",
                                   "code_host_type": "genericGitHost", "clone_url": f"https://example.com/x/{name}.git"}])
    sched.apply_contexts()
    assert store.find_search_context("only-a").repo_names == ["example.com/x/one"]
    assert store.find_search_context("all-x").repo_names == ["example.com/x/one", "example.com/x/two"]
    store.close()


def test_search_contexts_are_resolved_again_only_when_their_inputs_move(tmp_path):
    """Resolving contexts reads every repository, so a tick does it only when a repository, a link,
    a connection's sync or a context's definition changed (at 6,457 repositories the read on every
    tick took 0.7 s of CPU per second); and never without contexts."""
    from codesearch.runtime.scheduler import Scheduler

    def config(contexts: str) -> str:
        return ('{"connections": {"a": {"type": "git", "url": "https://example.com/x/one.git"}},'
                f' "contexts": {{{contexts}}}}}')

    cfg = tmp_path / "c.json"
    cfg.write_text(config('"t": {"includeTopics": ["red"]}'))
    sched = Scheduler(str(cfg), str(tmp_path / "data"))
    store = sched.store
    reads = []
    real = store.repos_for_connection
    store.repos_for_connection = lambda name: reads.append(name) or real(name)

    def repo(topics):
        store.upsert_repos("a", [{"name": "example.com/x/one", "display_name": "x/one", "topics": topics,
                                  "code_host_type": "genericGitHost", "clone_url": "https://example.com/x/one.git"}])

    repo(["red"])
    steps = [  # (what happens before the resolution, repositories read?, the context's repositories)
        ("a repository was added", lambda: None, True, ["example.com/x/one"]),
        ("nothing", lambda: None, False, ["example.com/x/one"]),
        ("nothing, again", lambda: None, False, ["example.com/x/one"]),
        ("its topics changed", lambda: repo(["blue"]), True, []),
        ("a sync ended", lambda: store.update_connection_status("a", m.SYNCED), True, []),
        ("nothing", lambda: None, False, []),
    ]
    for what, change, read, want in steps:
        reads.clear()
        change()
        sched.apply_contexts()
        assert bool(reads) == read, what
        assert store.find_search_context("t").repo_names == want, what
    time.sleep(0.01)  # a new mtime for the config
    cfg.write_text(config('"t": {"includeTopics": ["blue"]}'))  # the same name, a new definition
    reads.clear()
    sched.reload_config(force=True)
    sched.apply_contexts()
    assert reads and store.find_search_context("t").repo_names == ["example.com/x/one"]
    cfg.write_text(config(""))  # no contexts: nothing to read
    reads.clear()
    sched.reload_config(force=True)
    sched.apply_contexts()
    sched.apply_contexts()
    assert reads == []
    store.close()


def test_startup_reindexes_what_an_older_codesearch_indexed(tmp_path):
    """An index whose manifest (or shards) an older codesearch wrote is never read: start-up
    queues an index job for each of its repositories, so it is rebuilt."""
    from codesearch.runtime.scheduler import Scheduler

    cfg = tmp_path / "c.json"
    cfg.write_text('{"connections": {"a": {"type": "git", "url": "https://example.com/x/one.git"}}}')
    sched = Scheduler(str(cfg), str(tmp_path / "data"))
    store = sched.store
    ids = store.upsert_repos("a", [{"name": f"example.com/x/{n}", "code_host_type": "genericGitHost",
                                    "clone_url": f"https://example.com/x/{n}.git"} for n in ("one", "two")]).ids
    one = ids["example.com/x/one"]
    os.makedirs(sched.index_dir, exist_ok=True)
    with open(os.path.join(sched.index_dir, "manifest.json"), "w") as f:  # a format-1 manifest
        json.dump({"format": 1, "generation": 1, "repos": {str(one): {"name": "x", "generation": 1, "shards": []}}}, f)
    out = sched.startup()
    assert out["stale"] == [one]
    assert [j.repo_id for j in store.list_jobs(kind=m.INDEX_JOB, state=m.PENDING)] == [one]
    store.close()
