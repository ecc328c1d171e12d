"""The typed registry the processes of a running codesearch share (`codesearch.runtime.registry`):
records round-trip with their types, readers never create it, and a registry that went away (its
owner ended) is found again when a new one is created, instead of a dead handle failing forever."""

from __future__ import annotations

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
