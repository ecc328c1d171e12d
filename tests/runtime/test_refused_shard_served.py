"""A damaged shard under a running service (real Ray and Serve: the scheduler, the workers and the
searchers as actors, the HTTP API on Serve, one world for the module).

Two local repositories are synced and indexed by the real runtime. Then the shard that holds
alpha is damaged on disk while the searchers hold it (a table of damages). Within seconds: the
scheduler refuses the shard and moves it aside; searches answer 200 with the files of every
repository the shard does not hold and name every one it holds (``missingRepositories``,
``isSearchExhaustive: false``), in ``POST /api/search``, in the stream's final event and on the
results page; ``/api/health`` says ``degraded`` and counts them; they are rebuilt from their
sources at once, and searches are full again (exhaustive, no notice) with health back to ``ok``.
The indexers wait before each build (`RuntimeOptions.index_delay_s`, 3 s), so that the degraded
state lasts long enough to be seen.

Which repositories share a shard is the indexer's business (an index batch builds several into
one, `codesearch.runtime.index_batch`; compaction merges small ones): the rule is read from the
manifest of the moment, never from file names. alpha's shard may hold beta too, and then beta
is missing as well.
"""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest

from codesearch.index import manifest
from tests.corpus import make_local_repo

SETTINGS = {"resyncConnectionIntervalMs": 3600000, "reindexIntervalMs": 3600000,
            "resyncConnectionPollingIntervalMs": 200, "reindexRepoPollingIntervalMs": 200,
            "maxConnectionSyncJobConcurrency": 1, "maxRepoIndexingJobConcurrency": 1}
PREFIX = "refused-rt-searcher"
APP = "refused-rt"
BODY = {"query": "needle", "matches": 100}


def _names(resp: dict) -> set[str]:
    return {f["repository"].rsplit("/", 1)[-1] for f in resp["files"]}


def _wait(what: str, predicate, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        got = predicate()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {timeout_s:g}s: {what}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    import ray
    from ray import serve

    from codesearch.config import load_config
    from codesearch.runtime.scheduler import start_scheduler
    from codesearch.runtime.searchers import SearcherPool
    from codesearch.runtime.workers import RuntimeOptions, start_workers, stop_workers
    from codesearch.serving.deployment import search_application

    base = str(tmp_path_factory.mktemp("refusedrt"))
    data, local = os.path.join(base, "data"), os.path.join(base, "local")
    for name in ("alpha", "beta"):
        # one match per repository (an answer capped at `matches` would hide one of them)
        make_local_repo(os.path.join(local, name),
                        {"f.py": f"def needle_{name}():\n    return '{name}'\n" + f"{name} filler\n" * 2000})
    config = os.path.join(base, "config.json")
    with open(config, "w") as f:
        json.dump({"settings": SETTINGS, "connections": {"local": {"type": "git", "url": f"file://{local}/*"}}}, f)
    options = RuntimeOptions(poll_s=0.1, heartbeat_s=0.2, stale_s=10.0, index_delay_s=3.0,
                             store_options={"retry_base_seconds": 0.2})
    index = os.path.join(data, "index")
    os.makedirs(index, exist_ok=True)
    scheduler = workers = pool = None
    try:
        scheduler = start_scheduler(config, data, options)
        workers = start_workers(data, load_config(config).settings, options, syncers=1, indexers=1)
        pool = SearcherPool.create(index, 1, keep_empty=True, name_prefix=PREFIX)
        ray.get(scheduler.set_searchers.remote(PREFIX, 1))
        serve.run(search_application(PREFIX, 1, anonymous_access=True, data_dir=data), name=APP,
                  route_prefix=f"/{APP}")
        with httpx.Client(base_url=f"{serve_url}/{APP}", timeout=30) as http:
            _wait("both repositories indexed and searchable",
                  lambda: _names(http.post("/api/search", json=BODY).json()) == {"alpha", "beta"}, 120)
            yield {"http": http, "index": index}
    finally:
        try:
            serve.delete(APP)
        except Exception:
            pass
        if scheduler is not None:
            ray.get(scheduler.shutdown.remote(), timeout=15)
            ray.kill(scheduler)
        if workers:
            stop_workers(workers)
        if pool is not None:
            pool.close()


def _alpha_shard(index: str) -> tuple[str, list[str]]:
    """The path of the shard that holds alpha, and the names of every repository whose live
    documents it holds (alpha, and any other built or merged into it): what its refusal misses."""
    man = manifest.read_manifest(index)
    (key,) = [k for k, r in man["repos"].items() if r["name"].endswith("/alpha")]
    (name,) = man["repos"][key]["shards"]
    path = os.path.join(index, name)
    return path, sorted(n.rsplit("/", 1)[-1] for n in manifest.shard_repos(path).values())


def overwrite_middle(path: str) -> None:
    size = os.path.getsize(path)
    n = min(64 << 10, size // 2)
    with open(path, "r+b") as f:
        f.seek((size - n) // 2)
        f.write(os.urandom(n))
        f.flush()
        os.fsync(f.fileno())


def truncate(path: str) -> None:
    """The file replaced by its first half (a restore or copy cut short). Not cut in place: a
    searcher that has the file mapped would die of SIGBUS on its next read there (Ray restarts
    it, and it refuses the shard when it opens it again; docs/operations.md says so)."""
    with open(path, "rb") as f:
        head = f.read(os.path.getsize(path) // 2)
    with open(path + ".part", "wb") as f:
        f.write(head)
    os.replace(path + ".part", path)


def delete(path: str) -> None:
    os.unlink(path)


@pytest.mark.parametrize("damage", [overwrite_middle, truncate, delete], ids=lambda d: d.__name__)
def test_a_damaged_shard_is_reported_then_rebuilt(world, damage):
    http, index = world["http"], world["index"]
    victim, missing = _alpha_shard(index)
    assert "alpha" in missing
    served = {"alpha", "beta"} - set(missing)
    started = time.monotonic()
    damage(victim)

    # the refusal, as every front door says it
    def degraded():
        resp = http.post("/api/search", json=BODY).json()
        return resp if resp.get("missingRepositories") else None

    resp = _wait("a search that names the missing repository", degraded, 30)
    assert [r["name"].rsplit("/", 1)[-1] for r in resp["missingRepositories"]] == missing
    assert _names(resp) == served and resp["isSearchExhaustive"] is False
    health = http.get("/api/health")
    assert health.status_code == 200
    assert health.json() == {"status": "degraded",
                             "index": {"refusedShards": 1, "missingRepositories": len(missing)}}
    stream = http.post("/api/stream_search", json=BODY).text
    final = [json.loads(line[6:]) for line in stream.splitlines() if line.startswith("data: {")][-1]
    assert final["type"] == "final" and final["isSearchExhaustive"] is False
    assert [r["name"].rsplit("/", 1)[-1] for r in final["missingRepositories"]] == missing
    page = http.get("/search", params={"q": "needle"}).text
    assert '"missing":[{"id":' in page and all(name in page for name in missing)
    # the refused file was moved aside, not deleted (a missing one had nothing to move)
    aside = os.listdir(os.path.join(index, "refused"))
    assert any(f.startswith(os.path.basename(victim) + ".") for f in aside) is (damage is not delete)

    # rebuilt from the source at once: full answers again, health ok
    _wait("full answers again", lambda: (r := http.post("/api/search", json=BODY).json())["isSearchExhaustive"]
          and _names(r) == {"alpha", "beta"} and "missingRepositories" not in r, 60)
    seconds = time.monotonic() - started
    assert seconds < 30, f"full answers only {seconds:.1f}s after the damage"
    _wait("health ok again", lambda: http.get("/api/health").json() == {"status": "ok"}, 10)
    assert victim not in manifest.current_shards(index)
    print(f"{damage.__name__}: {', '.join(missing)} missing; full answers again {seconds:.1f}s after the damage")
