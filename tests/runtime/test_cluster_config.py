"""Deployment files: `cluster.yaml` (both provider variants) against Ray's cluster config schema,
`serve_config.yaml` against Serve's `ServeDeploySchema`, and the application builder
`codesearch.serving.app_builder:app` run for real on the session's Ray and Serve."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _ray_schema() -> dict:
    import ray.autoscaler

    return json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())


def _variant(text: str, name: str) -> str:
    """cluster.yaml with the provider block `name` active and the other marked blocks dropped. A
    block is either active YAML (kept as is) or commented line by line: then its leading "# " is
    removed ("#" alone becomes an empty line)."""
    out: list[str] = []
    block: list[str] | None = None
    current = None
    for line in text.splitlines():
        m = re.match(r"^# --- (BEGIN|END) (\w+)\b", line)
        if m and m.group(1) == "BEGIN":
            current, block = m.group(2), []
            continue
        if m and m.group(1) == "END":
            assert m.group(2) == current, line
            if current == name:
                commented = all(ln.startswith("#") or not ln.strip() for ln in block)
                for ln in block:
                    out.append((ln[2:] if ln.startswith("# ") else "" if ln.rstrip() == "#" else ln)
                               if commented else ln)
            current, block = None, None
            continue
        (out if block is None else block).append(line)
    assert block is None, "unterminated block"
    return "\n".join(out) + "\n"


def _blocks(text: str) -> list[str]:
    return re.findall(r"^# --- BEGIN (\w+)\b", text, flags=re.MULTILINE)


def test_cluster_yaml_variants_are_marked():
    text = (ROOT / "cluster.yaml").read_text()
    assert _blocks(text) == ["local", "aws"]
    # the local block is active YAML, the aws block commented line by line
    local = text.split("# --- BEGIN local")[1].split("# --- END local")[0].splitlines()[1:]
    assert any(line.startswith("provider:") for line in local)
    aws = text.split("# --- BEGIN aws")[1].split("# --- END aws")[0].splitlines()[1:]
    assert aws and all(line.startswith("#") or not line.strip() for line in aws)


@pytest.mark.parametrize("variant", ["local", "aws"])
def test_cluster_yaml_matches_ray_schema(variant):
    import jsonschema
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = yaml.safe_load(_variant((ROOT / "cluster.yaml").read_text(), variant))
    assert config["provider"]["type"] == variant
    jsonschema.validate(config, _ray_schema())  # the file as written
    # what `ray up` does before launching anything: defaults merged, provider specifics, schema again
    prepared = prepare_config(config)
    validate_config(prepared)
    head = " ".join(prepared["head_start_ray_commands"])
    assert "ray start --head --port=6379" in head and "RAY_AUTH_MODE=" in head
    assert re.search(r"RAY_ADDRESS=auto;.*nohup .*codesearch serve --config \S+ --data-dir /shared/codesearch "
                     r"--host 0\.0\.0\.0", head)
    assert "ray start --address=$RAY_HEAD_IP:6379" in " ".join(prepared["worker_start_ray_commands"])
    # Serve's proxies on every node: our middlewares, and no X-Forwarded-For believed (codesearch.forwarded)
    for start in (head, " ".join(prepared["worker_start_ray_commands"])):
        assert "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=codesearch.serving.proxy_errors:middlewares" in start
        assert "FORWARDED_ALLOW_IPS=none" in start
    assert re.search(r'AUTH_URL="[^"]+" RAY_ADDRESS=auto;.*codesearch serve', head)  # the host it answers for
    setup = " ".join(prepared["setup_commands"])
    assert "universal-ctags" in setup and "git" in setup and "pip install" in setup
    if variant == "local":
        assert prepared["provider"]["head_ip"] and prepared["provider"]["worker_ips"]
        assert prepared["max_workers"] == len(prepared["provider"]["worker_ips"])
    else:
        types = prepared["available_node_types"]
        assert prepared["head_node_type"] in types
        assert types["searcher"]["resources"]["codesearch_searcher"] == 1


def test_cluster_yaml_commands_parse_as_shell():
    """Every command is one line of shell that `bash -n` accepts (YAML folding can break them)."""
    import subprocess

    config = yaml.safe_load(_variant((ROOT / "cluster.yaml").read_text(), "aws"))
    local = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    cmds = [c for cfg in (config, local) for k in ("initialization_commands", "setup_commands", "head_setup_commands",
                                                    "worker_setup_commands", "head_start_ray_commands",
                                                    "worker_start_ray_commands") for c in cfg.get(k) or []]
    assert cmds
    for c in cmds:
        r = subprocess.run(["bash", "-n", "-c", c], capture_output=True, text=True, check=False)
        assert r.returncode == 0, (c, r.stderr)


def test_serve_config_matches_serve_schema():
    from ray.serve.schema import ServeDeploySchema

    raw = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    cfg = ServeDeploySchema.model_validate(raw)
    assert cfg.http_options.host == "0.0.0.0" and cfg.http_options.port == 3000
    (application,) = cfg.applications
    assert application.import_path == "codesearch.serving.app_builder:app"
    assert application.route_prefix == "/"
    (dep,) = application.deployments
    assert dep.name == "codesearch-api" and dep.num_replicas >= 1 and dep.max_ongoing_requests >= 32
    assert {"config", "data_dir", "searchers", "replicas", "max_ongoing_requests", "public_url"} <= set(application.args)
    # the import path resolves to the builder, which takes one dict (Serve requires one parameter)
    import inspect

    from ray._common.utils import import_attr

    from codesearch.serving import app_builder

    assert import_attr(application.import_path) is app_builder.app
    assert len(inspect.signature(app_builder.app).parameters) == 1


def test_default_names_are_the_launchers():
    from codesearch.serving import app_builder, launcher

    assert app_builder.names()["searchers"] == launcher.SEARCHER_PREFIX


# ----------------------------------------------------------------------------- a real deploy


def _search(url: str, query: str) -> dict | None:
    try:
        r = httpx.post(f"{url}/api/search", json={"query": query, "matches": 10}, timeout=30)
    except httpx.HTTPError:
        return None
    return r.json() if r.status_code == 200 else None


def _runtime_actor_table(prefix: str) -> dict:
    from ray._private.state import actors as actor_table

    return {a["Name"]: a for a in actor_table().values() if a["Name"].startswith(prefix) and a["State"] == "ALIVE"}


#: The orphan rule's bound in this test (`codesearch.runtime.orphans`; 30 s in a service).
ORPHAN_S = 3.0


def _ours_left(prefix: str) -> dict:
    """What of runtime `prefix` is still there: live actors, its registry (tagged with the prefix),
    its runtime record (in any registry: another process's stays, without it)."""
    from codesearch.runtime import registry

    owner = registry.registry_owner() or ""
    return {"actors": sorted(_runtime_actor_table(prefix)), "registry": owner.startswith(f"runtime:{prefix}:"),
            "record": registry.get_runtime(prefix)}


def _orphan(app_name: str) -> None:
    """Remove Serve application `app_name` while its runtime replica is down: kill the replica
    (as ``kill -9`` would, and for good), then delete the application at once, before Serve
    replaces it. Its runtime's actors, detached, are left with no replica: orphans."""
    import ray
    from ray import serve

    from codesearch.serving.adoption import replicas_prefix

    replica = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
               if a["namespace"] == "serve" and a["name"].startswith(replicas_prefix(app_name))]
    assert len(replica) == 1, replica
    ray.kill(ray.get_actor(replica[0], namespace="serve"), no_restart=True)
    serve.delete(app_name)


def test_app_builder_deploys_and_shuts_down(serve_url, tmp_path, monkeypatch):
    """``app(args)`` only builds; the application's runtime replica starts the actors, detached
    (they outlive a replica that dies: its successor adopts them); a redeploy replaces them. An
    application removed while its runtime replica was down leaves orphans, which end themselves
    after the orphan bound, and only themselves (a notebook's searchers on the same cluster stay);
    another application (another name, the same runtime prefix) never adopts them but starts its
    own. `stop` (drain, delete) leaves nothing of ours: no actor, no registry, no runtime record."""
    import ray
    from ray import serve

    from codesearch.errors import ConfigError
    from codesearch.runtime import orphans, registry
    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving import app_builder
    from codesearch.serving.stop import stop, wait_gone
    from tests.corpus import make_local_repo

    monkeypatch.setenv(orphans.ORPHAN_ENV, str(ORPHAN_S))  # forwarded to the replicas by `app(args)`
    repos = tmp_path / "repos"
    make_local_repo(str(repos / "widgets"), {"widget.py": "def zebra_handler_6c1f():\n    return 'striped'\n",
                                             "README.md": "# widgets\n"})
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "settings": {"resyncConnectionPollingIntervalMs": 200, "reindexRepoPollingIntervalMs": 200},
        "connections": {"local": {"type": "git", "url": f"file://{repos}/*"}}}))
    tag = uuid.uuid4().hex[:8]
    prefix, app_name, route = f"cstest-{tag}", f"cstest-app-{tag}", f"/cstest-{tag}"
    other_app, other_route = f"cstest-other-{tag}", f"/cstest-other-{tag}"
    args = {"config": str(config), "data_dir": str(tmp_path / "data"), "searchers": 2, "replicas": 1,
            "max_ongoing_requests": 16, "public_url": "http://localhost:3000", "anonymous_access": True,
            "prefix": prefix, "syncers": 1, "indexers": 1}
    expected = {f"{prefix}-scheduler", f"{prefix}-compactor", f"{prefix}-sync-0", f"{prefix}-index-0",
                f"{prefix}-searcher-0", f"{prefix}-searcher-1"}
    with pytest.raises(ConfigError, match="serachers: unknown argument"):
        app_builder.app({**args, "serachers": 3})
    notebook = None
    current = app_name
    try:
        bound = app_builder.app(args)
        assert not _runtime_actor_table(prefix)  # building starts nothing
        serve.run(bound, name=app_name, route_prefix=route)
        record = app_builder.runtime_record(prefix)
        assert record["scheduler"] == f"{prefix}-scheduler" and record["searchers"] == 2
        assert sorted(record["workers"]) == [f"{prefix}-index-0", f"{prefix}-sync-0"]
        table = _runtime_actor_table(prefix)
        assert set(table) == expected and all(a["IsDetached"] for a in table.values())
        assert set(registry.get_runtime(prefix)["actors"]) == expected

        url = serve_url + route
        deadline = time.monotonic() + 120
        while True:
            got = _search(url, "zebra_handler_6c1f")
            if got and got["files"]:
                break
            assert time.monotonic() < deadline, f"not found in time: {got}"
            time.sleep(0.5)
        assert [f["fileName"]["text"] for f in got["files"]] == ["widget.py"]
        assert got["files"][0]["repository"].endswith("widgets")
        assert "indexing" not in got["stats"]  # every repository indexed: the stats say nothing more

        # a redeploy with fewer searchers replaces the runtime (the old replica ends the old actors)
        serve.run(app_builder.app({**args, "searchers": 1}), name=app_name, route_prefix=route)
        assert app_builder.runtime_record(prefix)["searchers"] == 1
        assert wait_gone([f"{prefix}-searcher-1"], timeout_s=30)
        deadline = time.monotonic() + 60
        while not ((got := _search(url, "zebra_handler_6c1f")) and got["files"] and not got["stats"].get("crashes")):
            assert time.monotonic() < deadline, f"not found after shrinking: {got}"
            time.sleep(0.5)
        # two copies of one partition, keeping their shards in a directory of their own (as on a
        # node without the data directory): every search, whichever copy answers, finds the file
        far = tmp_path / "searcher-node"
        serve.run(app_builder.app({**args, "searchers": 1, "searcher_copies": 2, "searcher_data_dir": str(far)}),
                  name=app_name, route_prefix=route)
        assert app_builder.runtime_record(prefix)["searchers"] == 2
        assert f"{prefix}-shard-source" in _runtime_actor_table(prefix)
        deadline = time.monotonic() + 60
        while not ((got := _search(url, "zebra_handler_6c1f")) and got["files"] and not got["stats"].get("crashes")):
            assert time.monotonic() < deadline, f"not found with copied shards: {got}"
            time.sleep(0.5)
        for _ in range(4):
            got = _search(url, "zebra_handler_6c1f")
            assert got["files"] and not got["stats"].get("crashes"), got
        assert sorted(p.name for p in far.iterdir()) == [f"{prefix}-searcher-0", f"{prefix}-searcher-1"]
        assert all(any(n.suffix == ".shard" for n in d.iterdir()) for d in far.iterdir())

        # orphans: the application goes while its runtime replica is down; a notebook's searchers
        # (made by this process, on the same cluster and registry) must outlive the orphan rule
        notebook = SearcherPool.create(str(tmp_path / "data" / "index"), 1, name_prefix=f"cstest-nb-{tag}")
        orphans_before = {name: a["ActorID"] for name, a in _runtime_actor_table(prefix).items()}
        _orphan(app_name)
        orphaned_at = time.monotonic()
        assert set(_runtime_actor_table(prefix)) == set(orphans_before), "the runtime ended with its replica"
        # another application, same runtime prefix: it does not adopt them, it waits for their end
        current = other_app
        serve.run(app_builder.app({**args, "searchers": 1}), name=other_app, route_prefix=other_route)
        replaced_after = time.monotonic() - orphaned_at
        table = _runtime_actor_table(prefix)
        assert set(table) == {f"{prefix}-scheduler", f"{prefix}-compactor", f"{prefix}-sync-0", f"{prefix}-index-0",
                              f"{prefix}-searcher-0"}, table
        assert not {a["ActorID"] for a in table.values()} & set(orphans_before.values()), "adopted another app's"
        assert registry.get_runtime(prefix)["owner"].startswith(f"runtime:{prefix}:{other_app}:")
        assert replaced_after >= ORPHAN_S, replaced_after  # the orphans ended themselves first
        print(f"orphans of {app_name} ended, {other_app} running: {replaced_after:.1f} s after the delete")
        assert ray.get(notebook.actors[0].ping.remote(), timeout=30)  # the notebook's searcher is untouched
        deadline = time.monotonic() + 60
        while not ((got := _search(serve_url + other_route, "zebra_handler_6c1f")) and got["files"]):
            assert time.monotonic() < deadline, f"not found by the other application: {got}"
            time.sleep(0.5)
        # removing the application (`serve delete`) ends every actor of its runtime, detached as they
        # are: its replica's stop does, nobody kills them here; no registry or record of it is left
        serve.delete(other_app)
        assert wait_gone(sorted(table), timeout_s=30)
        assert _ours_left(prefix) == {"actors": [], "registry": False, "record": None}
    finally:
        left = stop(current, prefix, gone_timeout_s=30)  # (a failed test's leftovers)
        if notebook is not None:
            notebook.close()
    assert left == []
    assert current not in serve.status().applications and app_name not in serve.status().applications
    assert app_builder.runtime_record(prefix) is None


def test_the_shipped_example_config_loads_and_the_cluster_file_points_to_it():
    """cluster.yaml mounts ./config.json, made from config.example.json (docs/cluster.md, cluster.yaml):
    the example must load without problems or warnings, and every node must stop clearly on a
    Python older than 3.11."""
    from codesearch.config import load_config

    config = load_config(str(ROOT / "config.example.json"))
    assert not config.warnings and set(config.connections) == {"github-org", "internal-git"}
    text = (ROOT / "cluster.yaml").read_text()
    assert "config.example.json" in text and "./config.json" in text
    assert "sys.version_info < (3, 11)" in text and "22.04" not in text
