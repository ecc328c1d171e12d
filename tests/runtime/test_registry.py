"""The typed registry the processes of a running codesearch share (`codesearch.runtime.registry`):
records round-trip with their types, readers never create it, and a registry that went away (its
owner ended) is found again when a new one is created, instead of a dead handle failing forever."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import pytest

from codesearch.runtime import registry


def test_records_round_trip_with_their_types(ray_session):
    pool = f"cs-reg-{uuid.uuid4().hex[:8]}"
    registry.put_deployment(pool, registry.Deployment("/data", 4))
    registry.put_layout(pool, registry.Layout(2, 2))
    registry.put_index_version(pool, 7)
    registry.put_shard_lists(pool, {6: [["a.shard"], []], 7: [["b.shard"], ["c.shard"]]})
    assert registry.get_deployment(pool) == registry.Deployment("/data", 4)
    assert registry.get_layout(pool) == registry.Layout(2, 2)
    assert registry.get_index_version(pool) == 7
    assert registry.get_shard_lists(pool) == {6: [["a.shard"], []], 7: [["b.shard"], ["c.shard"]]}
    registry.forget_pool(pool)
    assert (registry.get_deployment(pool), registry.get_layout(pool), registry.get_index_version(pool),
            registry.get_shard_lists(pool)) == (None, None, None, {})


def test_drain_flags_and_reports(ray_session):
    app = f"cs-reg-app-{uuid.uuid4().hex[:8]}"
    assert registry.get_drain_flag(app) is None and registry.drain_reports(app) == []
    registry.put_drain_flag(app, 123.5)
    registry.put_drain_report(app, "r1", 2)
    registry.put_drain_report(app, "r2", 0)
    assert registry.get_drain_flag(app) == {"until": 123.5}
    assert sorted(r["inFlight"] for r in registry.drain_reports(app)) == [0, 2]
    registry.clear_drain(app)
    assert registry.get_drain_flag(app) is None and registry.drain_reports(app) == []


REGISTRY_RESTART = """
import time, ray
from codesearch.runtime import NAMESPACE, registry
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
registry.put_index_version("before", 1)
old = ray.get_actor(registry.REGISTRY_NAME, namespace=NAMESPACE)
ray.kill(old, no_restart=True)
deadline = time.monotonic() + 30
while True:  # the kill is asynchronous
    try:
        ray.get(old.ping.remote(), timeout=5)
    except ray.exceptions.RayActorError:
        break
    assert time.monotonic() < deadline
    time.sleep(0.2)
assert registry.get_index_version("before") is None  # a reader does not create one
registry.put_index_version("after", 2)                # a writer does, and the handle follows it
assert registry.get_index_version("after") == 2
print("ok")
"""


@pytest.mark.ray  # starts Ray in a child process
def test_a_registry_that_went_away_is_found_again(tmp_path):
    """Kill the registry (as when the runtime replica that owns it ends): readers get nothing,
    the next writer makes a new one and the cached handle follows it. On a Ray instance of its
    own (the session's registry holds other tests' pools)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, "-c", REGISTRY_RESTART], capture_output=True, text=True, env=env, timeout=180,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


@pytest.mark.parametrize("value", [None, "x", {"until": "soon"}])
def test_a_drain_flag_that_is_not_one_reads_as_not_draining(ray_session, value):
    from codesearch.serving import drain

    app = f"cs-reg-flag-{uuid.uuid4().hex[:8]}"
    registry._call("put", f"drain:{app}", value, create=True)
    try:
        assert drain.flag_is_up(app) is False
    finally:
        registry.clear_drain(app)


# ------------------------------------------------------------------ records that outlive the process

#: (case, what the registry went through, the records a registry of the same owner reads back)
SNAPSHOT_CASES = [
    ("records are read back", lambda r: (r.put("layout:p", {"partitions": 2, "copies": 1}), r.put("drain:app", {"until": 9.5})),
     {"layout:p": {"partitions": 2, "copies": 1}, "drain:app": {"until": 9.5}}),
    ("drain reports pass (each replica writes its own again)", lambda r: r.put("drain-report:app:r1", {"inFlight": 3}), {}),
    ("a deleted record stays deleted", lambda r: (r.put("layout:p", 1), r.put("layout:q", 2), r.delete("layout:p")),
     {"layout:q": 2}),
    ("a deleted prefix stays deleted", lambda r: (r.put("shard-lists:p", {"1": [[]]}), r.put("index-version:p", 1),
                                                   r.delete_prefix("shard-lists:")), {"index-version:p": 1}),
]


@pytest.mark.parametrize("case,done,kept", SNAPSHOT_CASES, ids=[c[0] for c in SNAPSHOT_CASES])
def test_a_registry_with_a_snapshot_reads_its_records_back(tmp_path, case, done, kept):
    path = str(tmp_path / "registry.json")
    done(registry.RegistryActor("runtime:cs:1", path))
    again = registry.RegistryActor("runtime:cs:1", path)  # what Ray runs when the process died
    assert again.items("") == kept
    assert registry.RegistryActor("runtime:cs:2", path).items("") == {}  # another runtime starts empty


@pytest.mark.parametrize("content", ["", "{not json", json.dumps({"owner": "runtime:cs:1", "values": []}), "[1, 2]"])
def test_a_torn_or_foreign_snapshot_is_an_empty_registry(tmp_path, content):
    path = tmp_path / "registry.json"
    path.write_text(content)
    assert registry.RegistryActor("runtime:cs:1", str(path)).items("") == {}


def test_a_killed_registry_comes_back_with_its_records(ray_session, tmp_path):
    """SIGKILL the registry's process: Ray restarts it, and it answers with what it held."""
    import ray

    path = str(tmp_path / "registry.json")
    actor = ray.remote(registry.RegistryActor).options(max_restarts=-1, max_task_retries=-1, num_cpus=0).remote(
        "runtime:cs:kill", path)
    ray.get(actor.put.remote("drain:app", {"until": 12.0}))
    pid = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))
    os.kill(pid, signal.SIGKILL)
    try:
        assert ray.get(actor.get.remote("drain:app"), timeout=60) == {"until": 12.0}
        assert ray.get(actor.__ray_call__.remote(lambda self: os.getpid())) != pid
    finally:
        ray.kill(actor, no_restart=True)


# ------------------------------------------------------------------------------ the orphan rule

ORPHAN_OWNER = "runtime:orph:gone-app:t1"


@pytest.mark.parametrize("raw, expected", [
    (None, 30.0), ("", 30.0), ("3", 3.0), ("0.5", 0.5), ("0", "refused"), ("-2", "refused"), ("soon", "refused"),
    ("inf", "refused"),
])
def test_the_orphan_bound_is_30_s_or_what_the_environment_says(raw, expected):
    from codesearch.errors import InvalidEnvironmentVariable
    from codesearch.runtime import orphans

    environ = {} if raw is None else {orphans.ORPHAN_ENV: raw}
    if expected == "refused":
        with pytest.raises(InvalidEnvironmentVariable, match=orphans.ORPHAN_ENV):
            orphans.orphan_s(environ)
    else:
        assert orphans.orphan_s(environ) == expected


@pytest.mark.parametrize("registry_owner, record_owner, ended, registry_ends", [
    # the runtime's own registry: the recorded actors end, then the registry
    (ORPHAN_OWNER, ORPHAN_OWNER, True, True),
    # a registry a notebook made first (the service used it as it was): the recorded actors end,
    # the registry stays with every record but the runtime's
    ("", ORPHAN_OWNER, True, False),
    # the prefix's record now belongs to a newer runtime: not this watch's to end
    ("", "runtime:orph:new-app:t2", False, False),
])
def test_the_orphan_rule_ends_what_its_runtime_recorded_and_nothing_else(ray_session, registry_owner, record_owner,
                                                                         ended, registry_ends):
    """No replica of the watched application exists (it was removed): after the bound, the
    registry ends the actors of the runtime record its watch names, and only while that record is
    still the watched runtime's. A notebook's actor on the same cluster, and its records, stay."""
    import ray

    from codesearch.runtime import NAMESPACE, orphans

    tag = uuid.uuid4().hex[:6]
    actor = ray.remote(registry.RegistryActor)
    recorded = actor.options(name=f"orph-{tag}-searcher-0", namespace=NAMESPACE, num_cpus=0).remote()
    notebook = actor.options(name=f"orph-{tag}-notebook-0", namespace=NAMESPACE, num_cpus=0).remote()
    ray.get([recorded.ping.remote(), notebook.ping.remote()])
    watch: orphans.Watch = {"prefix": f"orph-{tag}", "owner": ORPHAN_OWNER, "orphan_s": 0.3,
                            "replicas": f"SERVE_REPLICA::gone-app-{tag}#codesearch-runtime#"}
    holder = actor.options(num_cpus=0, max_concurrency=4).remote(registry_owner)
    ray.get(holder.put.remote(registry.runtime_key(watch["prefix"]),
                              {"owner": record_owner, "actors": [f"orph-{tag}-searcher-0"],
                               "record": {"searcher_prefix": f"orph-{tag}-searcher"}}))
    ray.get(holder.put.remote(f"layout:orph-{tag}-searcher", {"partitions": 1, "copies": 1}))
    ray.get(holder.put.remote(f"layout:orph-{tag}-notebook", {"partitions": 1, "copies": 1}))
    ray.get(holder.watch.remote(watch))

    def alive(handle) -> bool:
        try:
            return ray.get(handle.ping.remote(), timeout=10)
        except ray.exceptions.RayActorError:
            return False

    try:
        # what ends does so within seconds; what must not end is given six times the bound
        deadline = time.monotonic() + (30 if ended else 6 * watch["orphan_s"])
        while alive(recorded) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert alive(recorded) is not ended
        assert alive(notebook)
        deadline = time.monotonic() + 10
        while registry_ends and alive(holder) and time.monotonic() < deadline:  # it ends itself last
            time.sleep(0.2)
        assert alive(holder) is not registry_ends
        if not registry_ends:
            left = ray.get(holder.items.remote(""))
            assert f"layout:orph-{tag}-notebook" in left
            assert (registry.runtime_key(watch["prefix"]) in left) is not ended
            assert (f"layout:orph-{tag}-searcher" in left) is not ended
    finally:
        for handle in (recorded, notebook, holder):
            ray.kill(handle, no_restart=True)
