"""Batch search through a running service (`codesearch.data` with an HTTP URL, and with the service's
searchers over Ray), as a caller the permission rule does not let see one of the two repositories.

The world is tests/mcpworld.py's (``git.local/demo``, ``github.com/acme/widgets``) behind Serve with
the rule on: the ``acme`` connection enforces permissions and the member has no linked account, so
the member never sees ``acme/widgets``; ``demo`` is visible to every signed-in user. The rows of each
query equal what `Client.search` returns to the same caller through the same back end, and none is
from ``acme/widgets``, which does match those queries for a caller without the rule.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

import codesearch.data as csd
from codesearch import Client
from codesearch.cli import main
from tests.mcpworld import DEMO, WIDGETS, build

PREFIX = "batch-test-searcher"
QUERIES = ["handle_request", "widget", "return", "shout lang:python", r"/def \w+/", "nomatchzzz"]


@pytest.fixture(scope="module")
def world(serve_url, tmp_path_factory):
    from ray import serve

    from codesearch import permissions
    from codesearch.runtime import registry
    from codesearch.runtime.searchers import SearcherPool, publish_deployment
    from codesearch.serving.deployment import search_application

    w = build(str(tmp_path_factory.mktemp("batchsvc")))
    store = w["store"]
    rule = permissions.ConnectionRule
    permissions.write_settings(store, permissions.PermissionSettings(enabled=True, connections={
        "local": rule(False, False, None), "acme": rule(True, True, "github:https://github.com")}))
    member = store.create_user("member@example.com", "Member")
    w["member_key"] = store.create_api_key(member.id, "batch tests")[1]
    pool = SearcherPool.create(w["index"], 2, name_prefix=PREFIX)
    publish_deployment(PREFIX, data_dir=w["data"], searchers=len(pool.actors), instance=store.instance_id(),
                       database=store.database)
    registry.put_permissions_enabled(PREFIX, True)
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=False, data_dir=w["data"]),
              name="batch-test", route_prefix="/batch-test")
    w["url"] = f"{serve_url}/batch-test"
    yield w
    serve.delete("batch-test")
    pool.close()
    store.close()


def rows_of_client(cs: Client, query: str) -> list[tuple]:
    return sorted((m.repo, m.path, m.line, m.column, m.text, m.language, m.branch) for m in cs.search(query, matches=10_000))


def rows_of_batch(df: pd.DataFrame) -> list[tuple]:
    return sorted(df[["repository", "path", "line_number", "column", "line", "language", "branch"]]
                  .itertuples(index=False, name=None))


def check_rows(df: pd.DataFrame, caller: Client, world) -> None:
    with Client.local(world["data"]) as everything:  # no rule: the owner of the data directory
        assert {m.repo for q in QUERIES for m in everything.search(q, matches=10_000)} == {DEMO, WIDGETS}
    assert set(df["repository"]) == {DEMO}  # never a row of a repository the caller may not see
    for i, query in enumerate(QUERIES):
        assert rows_of_batch(df[df["query_id"] == i]) == rows_of_client(caller, query), query


def test_over_http_the_callers_permissions_apply(world):
    df = csd.search(QUERIES, world["url"], api_key=world["member_key"], tasks=2).to_pandas()
    with Client.http(world["url"], world["member_key"]) as caller:
        check_rows(df, caller, world)


def test_a_client_is_a_source_too(world):
    with Client.http(world["url"], world["member_key"]) as caller:
        df = csd.search(QUERIES, caller).to_pandas()
        check_rows(df, caller, world)


def test_over_the_services_searchers_on_ray_the_callers_permissions_apply(world):
    with Client.ray(PREFIX, api_key=world["member_key"]) as caller:
        df = csd.search(QUERIES, caller, tasks=2).to_pandas()
        check_rows(df, caller, world)


def test_a_wrong_key_stops_the_batch(world):
    with pytest.raises(Exception, match="(?i)api key|authenticat"):
        csd.search(["handle_request"], world["url"], api_key="cs_wrong").to_pandas()


def test_the_command_over_http_reports_what_only_the_service_could_judge(world, tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps(b) for b in [
        {"query": "handle_request", "matches": 100},
        {"query": "context:nope foo", "matches": 100},  # the service's contexts: judged as the batch runs
        {"query": "shout", "matches": 100},
    ]) + "\n")
    out = tmp_path / "hits.jsonl"
    code = main(["batch", str(queries), "--url", world["url"], "--api-key", world["member_key"], "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "line 2 (query 1): search context 'nope' not found; skipped" in err
    df = pd.DataFrame([json.loads(line) for line in out.read_text().splitlines()])
    assert set(df["query_id"]) == {0, 2} and set(df["repository"]) == {DEMO}
    with Client.http(world["url"], world["member_key"]) as caller:
        assert rows_of_batch(df[df["query_id"] == 0]) == rows_of_client(caller, "handle_request")
        assert rows_of_batch(df[df["query_id"] == 2]) == rows_of_client(caller, "shout")


def test_the_command_on_the_services_searchers(world, tmp_path, capsys):
    queries = tmp_path / "q.txt"
    queries.write_text("handle_request\nwidget\n")
    out = tmp_path / "hits.csv"
    assert main(["batch", str(queries), "--ray", "--name-prefix", PREFIX, "--api-key", world["member_key"],
                 "--out", str(out)]) == 0
    df = pd.read_csv(out, keep_default_na=False)
    with Client.ray(PREFIX, api_key=world["member_key"]) as caller:
        assert rows_of_batch(df[df["query_id"] == 0]) == rows_of_client(caller, "handle_request")
    assert set(df["repository"]) == {DEMO} and "1 bad" not in capsys.readouterr().err
