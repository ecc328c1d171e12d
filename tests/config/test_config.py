"""The config file (docs/configuration.md): schema files, loading, problems, tokens, overrides and the CLI."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from jsonschema import Draft7Validator

from codesearch import cli
from codesearch.config import (
    Config,
    Token,
    apply_environment_overrides,
    load_config,
    load_schema,
    resolve_token,
    schema_bytes,
    schema_files,
    schema_index,
    validator,
)
from codesearch.config.jsonc import JsoncError, parse_jsonc
from codesearch.errors import ConfigError

HERE = Path(__file__).parents[1] / "configs"
VALID = sorted((HERE / "valid").glob("*.json"))
INVALID = HERE / "invalid"
SOURCEBOT_SCHEMA = "https://raw.githubusercontent.com/sourcebot-dev/sourcebot/main/schemas/v3/index.json"


def problems_of(text_or_path, **kw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(text_or_path, **kw)
    return info.value.problems


def conn_doc(conn: dict) -> str:
    return json.dumps({"connections": {"c": conn}})


# ----------------------------------------------------------------------------- the schema files

def test_schema_files_are_valid_draft7_and_complete():
    names = set(schema_files())
    assert {"index.json", "shared.json", "connection.json", "github.json", "gitlab.json", "gitea.json", "gerrit.json",
            "bitbucket.json", "azuredevops.json", "genericGitHost.json", "languageModel.json"} <= names
    for name in names:
        schema = load_schema(name)
        Draft7Validator.check_schema(schema)
        assert "$id" not in schema  # relative $refs resolve against wherever the files are served


def _objects(node, where=""):
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node or "patternProperties" in node:
            yield where, node
        for k, v in node.items():
            yield from _objects(v, f"{where}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _objects(v, f"{where}/{i}")


def test_every_object_schema_forbids_additional_properties():
    for name in schema_files():
        for where, obj in _objects(load_schema(name)):
            if where.startswith("/properties/") and where.count("/") == 2 and "properties" not in obj:
                continue  # the names of properties themselves
            if where.endswith("/if"):
                continue  # a condition, not an object definition
            if name == "environmentOverrides.json" and where == "":
                continue  # as in Sourcebot's schema, names outside the pattern pass unchecked
            if name == "identityProvider.json" and where == "/definitions/OtherIdentityProvider":
                continue  # a provider kind of a newer Sourcebot: accepted whatever it holds, with a warning
            assert obj.get("additionalProperties") is False, f"{name}#{where}"


def test_index_schema_top_level_and_settings_defaults():
    index = schema_index()
    assert set(index["properties"]) == {"$schema", "settings", "contexts", "environmentOverrides", "connections",
                                        "models", "apps", "identityProviders"}
    settings = load_schema("shared.json")["definitions"]["Settings"]["properties"]
    assert settings["maxFileSize"]["default"] == 2097152
    assert all(p.get("minimum") == 1 for p in settings.values() if p.get("type") == "number")
    kinds = [load_schema(r["$ref"][2:])["properties"]["type"]["const"] for r in load_schema("connection.json")["oneOf"]]
    assert kinds == ["github", "gitlab", "gitea", "gerrit", "bitbucket", "azuredevops", "git"]
    assert "token" not in load_schema("gerrit.json")["properties"]


def test_schema_bytes_are_stable_and_confined():
    assert schema_bytes("github.json") == (Path(__file__).parents[2] / "codesearch/config/schemas/v3/github.json").read_bytes()
    assert schema_bytes("v3/github.json") == schema_bytes("/schemas/v3/github.json") == schema_bytes("github.json")
    assert json.loads(schema_bytes()) == schema_index()
    for bad in ("../schema.py", "nope.json", "../../../etc/passwd", ""):
        with pytest.raises(FileNotFoundError):
            schema_bytes(bad)
    copy = load_schema("index.json")
    copy["title"] = "changed"
    assert schema_index()["title"] != "changed"


@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_valid_files_pass_the_raw_validator(path):
    doc = parse_jsonc(path.read_text())
    assert list(validator().iter_errors(doc)) == []


# ------------------------------------------------------------------------------- valid configs

@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_valid_configs_load_unchanged(path):
    config = load_config(path)
    assert isinstance(config, Config)
    assert config.source == str(path)
    doc = parse_jsonc(path.read_text())
    assert set(config.connections) == set(doc.get("connections", {}))
    for name, conn in config.connections.items():
        assert conn.raw == doc["connections"][name]  # as written: no defaults filled into raw
    assert set(config.contexts) == set(doc.get("contexts", {}))
    assert len(config.models) == len(doc.get("models", []))


def test_empty_config_has_exact_defaults():
    config = load_config("{}")
    s = config.settings
    assert (s.max_file_size, s.max_trigram_count, s.reindex_interval_ms, s.resync_connection_interval_ms) == (
        2097152, 20000, 3600000, 86400000)
    assert s.resync_connection_polling_interval_ms == s.reindex_repo_polling_interval_ms == 1000
    assert (s.max_connection_sync_job_concurrency, s.max_repo_indexing_job_concurrency,
            s.max_repo_garbage_collection_job_concurrency, s.max_account_permission_sync_job_concurrency,
            s.max_repo_permission_sync_job_concurrency) == (8, 8, 8, 8, 8)
    assert s.repo_garbage_collection_grace_period_ms == 10000
    assert s.repo_index_timeout_ms == 7200000
    assert s.repo_driven_permission_sync_interval_ms == s.user_driven_permission_sync_interval_ms == 86400000
    assert s.enable_public_access is False
    assert (config.connections, config.contexts, config.models, config.warnings) == ({}, {}, [], [])
    assert config.default_model is None


def test_basic_github_defaults():
    config = load_config(HERE / "valid/basic_github.json")
    assert config.schema_ref == SOURCEBOT_SCHEMA
    gh = config.connections["public-github"]
    assert (gh.type, gh.url, gh.token, gh.code_host_type) == ("github", "https://github.com", None, "github")
    assert gh.revisions.branches == [] and gh.revisions.tags == []
    assert gh.get("repos") == ["sourcebot-dev/sourcebot", "torvalds/linux"]
    assert gh.get("exclude", {}) == {} and "exclude" not in gh and gh["type"] == "github"
    assert gh.enforce_permissions is False and gh.enforce_permissions_for_public_repos is False


def test_filters_tokens_and_revisions():
    gh = load_config(HERE / "valid/github_filters.json").connections["github-enterprise"]
    assert gh.url == "https://github.example.com"
    assert gh.token == Token(env="GHE_TOKEN")
    assert gh.get("exclude")["size"] == {"min": 1000, "max": 100000000}
    conns = load_config(HERE / "valid/revisions.json").connections
    assert conns["github-branches"].revisions.branches == ["main", "release/*", "v[0-9]*"]
    assert conns["github-branches"].revisions.tags == ["v*.*.*", "latest"]
    assert conns["gitlab-tags-only"].revisions.branches == [] and conns["gitlab-tags-only"].revisions.tags == ["**"]
    assert conns["gitlab-tags-only"].url == "https://gitlab.com"


def test_self_hosted_kinds():
    c = load_config(HERE / "valid/self_hosted.json").connections
    assert c["gitlab-self-managed"].url == "https://gitlab.example.com"
    assert c["gerrit"].token is None and c["gerrit"].code_host_type == "gerrit"
    assert (c["bitbucket-dc"].deployment_type, c["bitbucket-dc"].code_host_type) == ("server", "bitbucketServer")
    ado = c["azure-devops-server"]
    assert (ado.deployment_type, ado.get("useTfsPath"), ado.code_host_type) == ("server", True, "azuredevops")
    assert ado.get("projects") == ["DefaultCollection/My Project"]
    assert c["local-repos"].is_local and not c["one-remote-repo"].is_local
    assert c["one-remote-repo"].code_host_type == "genericGitHost"
    assert c["one-remote-repo"].revisions.branches == ["main", "dev"]


def test_bitbucket_cloud_is_the_default_deployment():
    c = load_config(HERE / "valid/bitbucket_cloud.json").connections
    assert c["bitbucket-cloud-implicit"].deployment_type == "cloud"
    assert c["bitbucket-cloud-implicit"].url == "https://api.bitbucket.org/2.0"
    assert c["bitbucket-cloud-implicit"].code_host_type == "bitbucketCloud"
    assert c["bitbucket-cloud"].get("gitUser") == "my-username"


def test_google_cloud_secret_refs_load_without_resolving():
    c = load_config(HERE / "valid/tokens.json", environ={}).connections
    assert c["gitlab-gcp"].token.google_cloud_secret == "projects/my-project/secrets/gitlab-token/versions/latest"
    assert c["gitlab-gcp"].token.kind == "googleCloudSecret"
    assert c["github-env"].token.to_dict() == {"env": "GITHUB_TOKEN"}


def test_contexts():
    config = load_config(HERE / "valid/contexts.json")
    web = config.contexts["web"]
    assert web.include == ["github.com/my-org/web-*", "gitlab.example.com/frontend/**"]
    assert web.exclude == ["github.com/my-org/web-legacy"] and web.description == "Front-end code"
    be = config.contexts["backend_services"]
    assert (be.include_connections, be.exclude_connections) == (["gitlab"], ["github"])
    assert (be.include_topics, be.exclude_topics) == (["backend", "service-*"], ["archived"])
    assert be.include == [] and be.description is None
    assert config.warnings == []


def test_context_naming_an_unknown_connection_is_a_warning():
    config = load_config('{"contexts": {"x": {"includeConnections": ["nope"]}}}')
    assert config.warnings == ['contexts.x.includeConnections[0]: no connection named "nope"']


def test_models():
    config = load_config(HERE / "valid/models.json")
    assert [m.provider for m in config.models] == ["anthropic", "openai", "openai-compatible", "amazon-bedrock",
                                                   "google-vertex", "azure"]
    first = config.default_model
    assert (first.model, first.name, first.token) == ("claude-sonnet-4-5", "Claude Sonnet", Token(env="ANTHROPIC_API_KEY"))
    assert config.models[1].temperature == 0.2 and config.models[1].name == "gpt-4.1"
    local = config.models[2]
    assert local.base_url == "http://localhost:11434/v1"
    assert local.headers == {"X-Team": "search", "Authorization": {"env": "LLM_GATEWAY_AUTH"}}
    assert config.models[3].get("region") == "us-east-1"


def test_comments_and_trailing_commas():
    config = load_config(HERE / "valid/with_comments.json")
    assert config.settings.max_file_size == 4194304 and config.settings.reindex_interval_ms == 1800000
    docs = config.connections["docs"]
    assert docs.url == "https://git.example.com/docs//site.git"
    assert docs.revisions.branches == ["/*", "release/*"]


def test_deprecated_settings_map_with_warnings():
    config = load_config(HERE / "valid/settings.json")
    s = config.settings
    assert (s.repo_driven_permission_sync_interval_ms, s.user_driven_permission_sync_interval_ms) == (3600000, 7200000)
    assert (s.max_file_size, s.max_repo_indexing_job_concurrency, s.max_repo_permission_sync_job_concurrency) == (1048576, 16, 5)
    assert s.enable_public_access is True
    assert any("experiment_repoDrivenPermissionSyncIntervalMs: deprecated" in w for w in config.warnings)
    assert any("enablePublicAccess: deprecated" in w and "FORCE_ENABLE_ANONYMOUS_ACCESS" in w for w in config.warnings)
    both = load_config('{"settings": {"repoDrivenPermissionSyncIntervalMs": 5, "experiment_repoDrivenPermissionSyncIntervalMs": 9}}')
    assert both.settings.repo_driven_permission_sync_interval_ms == 5
    assert "ignored" in both.warnings[0]


def test_newer_sourcebot_keys_are_warnings():
    config = load_config(HERE / "valid/newer_sourcebot.json", environ={})
    assert [w.split(":")[0] for w in config.warnings] == [
        "connections.gitlab.enforcePermissions", "connections.github.exclude.private"]
    assert config.settings.repo_driven_permission_sync_interval_ms == 600000
    assert config.connections["gitlab"].get("webUrl") == "https://gitlab.example.com"
    assert config.connections["ado"].get("repos") == ["acme/Platform Team/build tools"]


def test_ineffective_fields_are_warnings():
    w = load_config(conn_doc({"type": "gitlab", "all": True})).warnings
    assert w and "connections.c.all: ignored" in w[0]
    assert load_config(conn_doc({"type": "gitlab", "all": True, "url": "https://gl.example.com"})).warnings == []
    w = load_config(conn_doc({"type": "bitbucket", "deploymentType": "cloud", "all": True})).warnings
    assert w == ['connections.c.all: ignored when deploymentType is "cloud"']


def test_duplicate_keys_warn():
    config = load_config('{"connections": {"a": {"type": "github"}, "a": {"type": "gitlab"}}}')
    assert config.connections["a"].type == "gitlab"
    assert config.warnings == ['duplicate key "a" (the last value is used)']


def test_enforce_permissions_follows_permission_sync_enabled():
    doc = json.dumps({"connections": {"on": {"type": "github"}, "off": {"type": "github", "enforcePermissions": False}}})
    c = load_config(doc, environ={}).connections
    assert not c["on"].enforce_permissions and not c["off"].enforce_permissions
    c = load_config(doc, environ={"PERMISSION_SYNC_ENABLED": "true"}).connections
    assert c["on"].enforce_permissions and not c["off"].enforce_permissions
    c = load_config(HERE / "valid/environment_overrides.json", environ={}).connections  # the file's own override
    assert c["github"].enforce_permissions and not c["github-public"].enforce_permissions


# Accepted but not acted on: each place is a warning (config validate prints them, start-up logs them).
SYNC_OFF = "it has no effect while PERMISSION_SYNC_ENABLED is off"
UNUSED_CASES = [
    ({"apps": [{"type": "github", "id": "1", "privateKey": {"env": "K"}}]}, {},
     ["apps[0]: GitHub App 1 is for github.com, where no github connection is; it is not used"]),
    ({"identityProviders": [{"provider": "gcp-iap", "purpose": "sso", "audience": {"env": "A"}}]}, {}, []),  # supported
    ({"identityProviders": [{"provider": "idira", "purpose": "sso"}]}, {},
     ['identityProviders[0]: accepted but not used: provider "idira" is not known to this version of codesearch']),
    ({"connections": {"gl": {"type": "gitlab", "webUrl": "https://gitlab.example.com"}}}, {}, []),  # links use it
    ({"connections": {"gh": {"type": "github", "exclude": {"private": True}}}}, {},
     ["connections.gh.exclude.private: accepted but not used yet"]),
    ({"connections": {"gh": {"type": "github", "exclude": {"private": False}}}}, {},
     ["connections.gh.exclude.private: accepted but not used yet"]),  # set at all: the reader may expect it to act
    ({"connections": {"gh": {"type": "github", "enforcePermissions": True, "enforcePermissionsForPublicRepos": True}}}, {},
     [f"connections.gh.enforcePermissions: {SYNC_OFF}",
      f"connections.gh.enforcePermissionsForPublicRepos: {SYNC_OFF}"]),
    ({"connections": {"gh": {"type": "github", "enforcePermissions": True}}}, {"PERMISSION_SYNC_ENABLED": "true"}, []),
    ({"connections": {"gh": {"type": "github", "enforcePermissions": False}}}, {}, []),  # asks for what happens anyway
    ({}, {"PERMISSION_SYNC_ENABLED": "true"}, []),
    ({"environmentOverrides": {"PERMISSION_SYNC_ENABLED": {"type": "boolean", "value": True}},
      "connections": {"g": {"type": "gerrit", "url": "https://review.example.com"}}}, {},
     ["connections.g: permission syncing does not support Gerrit, so its private repositories are visible to nobody"]),
    ({"connections": {"g": {"type": "gerrit", "url": "https://review.example.com", "enforcePermissions": False}}},
     {"PERMISSION_SYNC_ENABLED": "true"}, []),
    ({"environmentOverrides": {"PERMISSION_SYNC_ENABLED": {"type": "boolean", "value": False}},
      "connections": {"gh": {"type": "github", "enforcePermissions": True}}},
     {"PERMISSION_SYNC_ENABLED": "true"}, [f"connections.gh.enforcePermissions: {SYNC_OFF}"]),  # the file's override wins
    ({"settings": {"maxAccountPermissionSyncJobConcurrency": 2, "maxFileSize": 10}}, {}, []),
    ({"connections": {"gl": {"type": "gitlab", "url": "https://gl.example.com", "groups": ["eng"]}}}, {}, []),
]


@pytest.mark.parametrize("doc, environ, expected", UNUSED_CASES, ids=[str(i) for i in range(len(UNUSED_CASES))])
def test_accepted_but_unused_settings_are_warnings(doc, environ, expected):
    warnings = load_config(json.dumps(doc), environ=environ).warnings
    assert len(warnings) == len(expected), warnings
    for got, want in zip(warnings, expected):
        assert got.startswith(want), (got, want)


# Sourcebot checks only override names made of letters, digits, "_" and "-"; others pass its schema
# unchecked. They are applied when they are overrides, else skipped with a warning.
ODD_NAME_CASES = [
    ("MY.VAR", {"type": "string", "value": "x"}, "x", None),
    ("my var", {"type": "number", "value": 8}, "8", None),
    ("flag.on", {"type": "boolean", "value": True}, "true", None),
    ("MY.VAR", 42, None, 'environmentOverrides["MY.VAR"]: not an override: expected {"type": ..., "value": ...}; not applied'),
    ("MY.VAR", {"type": "string", "value": 1}, None, 'environmentOverrides["MY.VAR"]: a string override needs a string value'),
    ("MY.VAR", {"type": "number", "value": True}, None, 'environmentOverrides["MY.VAR"]: a number override needs a number'),
    ("MY.VAR", {"type": "token", "value": "sk-123"}, None, 'environmentOverrides["MY.VAR"]: a token override needs a token'),
    ("MY.VAR", {"type": "secret", "value": "x"}, None, "environmentOverrides[\"MY.VAR\"]: unknown override type 'secret'"),
    ("A=B", {"type": "string", "value": "x"}, None, 'environmentOverrides["A=B"]: not a valid environment variable name'),
]


@pytest.mark.parametrize("name, entry, applied, warning", ODD_NAME_CASES, ids=[str(i) for i in range(len(ODD_NAME_CASES))])
def test_override_names_outside_the_pattern(name, entry, applied, warning):
    config = load_config(json.dumps({"environmentOverrides": {name: entry}}))
    environ: dict[str, str] = {}
    apply_environment_overrides(config, environ)
    assert environ.get(name) == applied
    if warning:
        assert any(w.startswith(warning) for w in config.warnings), config.warnings
    else:
        assert config.warnings == []
    assert "sk-123" not in " ".join(config.warnings)


def test_text_bytes_and_path_inputs():
    text = (HERE / "valid/basic_github.json").read_text()
    a = load_config(text)
    b = load_config(text.encode("utf-8"), source="mine")
    c = load_config(str(HERE / "valid/basic_github.json"))
    assert a.source == "<config>" and b.source == "mine"
    assert a.connections == b.connections == c.connections
    assert load_config("\ufeff{}").connections == {}


# ----------------------------------------------------------------------------- invalid configs

INVALID_CASES = [
    # (file in tests/configs/invalid or inline text, [expected problem prefixes...])
    ("several_errors.json", [
        "settings.maxFileSize: must be at least 1",
        "settings.reindexIntervalMs: expected number",
        'settings.maxTrigramCounts: unknown property "maxTrigramCounts"',
        "connections.myGitlab.url: must be an http:// or https:// URL",
        "connections.myGitlab.groups[2]: expected string",
        "connections.myGitlab.topics: must have at least 1 item",
        'connections.gh.orgz: unknown property "orgz" (did you mean "orgs"?)',
        "connections.gh.repos[0]: must be written <owner>/<name>",
    ]),
    ("deep_type.json", ["connections.gh.exclude.size.min: expected integer"]),
    ("config_path_override.json", ["environmentOverrides.CONFIG_PATH: CONFIG_PATH cannot be overridden"]),
    ("bitbucket_server_no_url.json", ['connections.bb: missing required property "url" (url is required unless deploymentType is "cloud")']),
    ('{"connections": {"bb": {"type": "bitbucket", "workspaces": ["ws"]}}}',  # Sourcebot's rule: no deploymentType, no url
     ['connections.bb: missing required property "url" (url is required unless deploymentType is "cloud")']),
    ('{"apps": [{"type": "githubApp", "id": "1", "privateKey": {"env": "K"}}]}',
     ['apps[0].type: unknown type "githubApp" (did you mean "github"?); expected one of github']),
    ('{"connections": {"gl": {"type": "gitlab", "minAccessLevel": 30, "exclude": {"size": {"min": 1}}}}}',
     ['connections.gl.minAccessLevel: unknown property "minAccessLevel"', 'connections.gl.exclude.size: unknown property "size"']),
    ("bad_url.json", ["connections.gitea.url: must be an http:// or https:// URL"]),
    ("syntax_error.json", ["line 6, column 13: invalid JSON: expecting ',' delimiter"]),
    ("unknown_keys.json", ['connection: unknown property "connection" (did you mean "connections"?)',
                           'connections.gerrit.token: unknown property "token"']),
    ("azure_missing_required.json", ['connections.ado: missing required property "token"',
                                     'connections.ado: missing required property "deploymentType"']),
    ("literal_token.json", ['connections.gh.token: expected a token reference: {"env": "<VARIABLE>"}']),
    ('{"connections": {"g": {"type": "gerrit"}}}', ['connections.g: missing required property "url"']),
    ('{"connections": {"x": {"type": "githb"}}}', ['connections.x.type: unknown type "githb" (did you mean "github"?)']),
    ('{"connections": {"x": {"url": "https://a.example.com"}}}', ['connections.x: missing required property "type"']),
    ('{"connections": {"my conn": {"type": "github"}}}', ['connections["my conn"]: invalid name']),
    ('{"contexts": {"a.b": {}}}', ['contexts["a.b"]: invalid name']),
    ('{"contexts": {"c": {"include": "github.com/x/**"}}}', ["contexts.c.include: expected array"]),
    ('{"contexts": {"c": {"includes": []}}}', ['contexts.c.includes: unknown property "includes" (did you mean "include"?)']),
    ('{"connections": {"c": {"type": "github", "users": ["bad user"], "topics": []}}}',
     ["connections.c.users[0]: may only contain letters", "connections.c.topics: must have at least 1 item"]),
    ('{"connections": {"c": {"type": "github", "token": {"env": 5}}}}', ["connections.c.token.env: expected string"]),
    ('{"connections": {"c": {"type": "github", "token": {"env": "A", "x": 1}}}}', ['connections.c.token.x: unknown property "x"']),
    ('{"connections": {"c": {"type": "github", "token": {"secret": "A"}}}}', ["connections.c.token: expected a token reference"]),
    ('{"connections": {"c": {"type": "bitbucket", "deploymentType": "datacenter", "url": "https://b.example.com"}}}',
     ['connections.c.deploymentType: must be one of "cloud", "server"']),
    ('{"connections": {"c": {"type": "azuredevops", "token": {"env": "T"}, "deploymentType": "cloud", "repos": ["a/b"]}}}',
     ["connections.c.repos[0]: must be written <org>/<project>/<repo>"]),
    ('{"connections": {"c": {"type": "git", "url": "file://relative/path"}}}', ["connections.c.url: must be an http:// or https:// URL, or file:///"]),
    ('{"connections": {"c": {"type": "gitlab", "revisions": {"branches": "main"}}}}', ["connections.c.revisions.branches: expected array"]),
    ('{"connections": {"c": {"type": "gitea", "revisions": {"heads": []}}}}', ['connections.c.revisions.heads: unknown property "heads"']),
    ('{"settings": {"enablePublicAccess": "yes", "maxRepoIndexingJobConcurrency": -2}}',
     ["settings.enablePublicAccess: expected boolean", "settings.maxRepoIndexingJobConcurrency: must be at least 1"]),
    ('{"environmentOverrides": {"A": {"type": "number", "value": "1"}, "B": {"type": "nope", "value": 1}, "C": "x"}}',
     ["environmentOverrides.A.value: expected number", 'environmentOverrides.B.type: unknown type "nope"',
      "environmentOverrides.C: expected object"]),
    ('{"models": [{"provider": "openai-compatible", "model": "m"}]}', ['models[0]: missing required property "baseUrl"']),
    ('{"models": [{"provider": "opena", "model": "m"}]}', ['models[0].provider: unknown provider "opena" (did you mean "openai"?)']),
    ('{"models": [{"provider": "openai"}]}', ['models[0]: missing required property "model"']),
    ('{"models": [{"provider": "anthropic", "model": "m", "headers": {"X": 5}, "temperature": "hot"}]}',
     ["models[0].temperature: expected number", "models[0].headers.X: expected string or a token reference"]),
    ('{"models": {"provider": "openai"}}', ["models: expected array"]),
    ("[]", ["(top level): expected object"]),
    ('{"a": "NaN",\n "b": NaN}', ["line 2, column 7: invalid JSON: NaN is not valid JSON"]),
    ('{\n  "settings": {\n    "maxFileSize": 1,,\n  }\n}', ["line 3, column 22: invalid JSON"]),
    ("{\n  /* never closed\n}", ["line 2, column 3: invalid JSON: unterminated /* comment"]),
    ("", ["line 1, column 1: invalid JSON: expecting value"]),
]


@pytest.mark.parametrize("case, expected", INVALID_CASES, ids=[c[0][:50] for c in INVALID_CASES])
def test_invalid_configs(case, expected):
    arg = INVALID / case if case.endswith(".json") and "{" not in case else case
    found = problems_of(arg)
    for want in expected:
        assert any(p.startswith(want) for p in found), f"{want!r} not in {found}"
    assert len(found) == len(expected), found


def test_every_invalid_file_is_in_the_table():
    assert {p.name for p in INVALID.glob("*.json")} == {c for c, _ in INVALID_CASES if c.endswith(".json") and "{" not in c}


def test_problems_come_in_document_order_with_the_source():
    with pytest.raises(ConfigError) as info:
        load_config(INVALID / "several_errors.json")
    e = info.value
    assert e.source == str(INVALID / "several_errors.json")
    assert [p.split(":")[0] for p in e.problems] == [
        "settings.maxFileSize", "settings.reindexIntervalMs", "settings.maxTrigramCounts", "connections.myGitlab.url",
        "connections.myGitlab.groups[2]", "connections.myGitlab.topics", "connections.gh.orgz", "connections.gh.repos[0]"]
    assert str(e).startswith(f"{e.source}: 8 problems:")
    assert "Traceback" not in str(e) and "is not valid under any" not in str(e)


def test_unreadable_files():
    assert problems_of("/nonexistent/config.json")[0].startswith("cannot read the file")
    with pytest.raises(ConfigError):
        load_config(b"{\"a\": \"\xff\"}")


def test_a_literal_token_never_shows_in_problems():
    found = problems_of(INVALID / "literal_token.json")
    assert "ghp_THIS_IS_A_LEAKED" not in " ".join(found)
    secret = "hunter2-very-secret"
    text = json.dumps({"connections": {"c": {"type": "github", "token": secret, "url": 5}},
                       "models": [{"provider": "openai", "model": "m", "headers": {"Authorization": 7}, "token": secret}],
                       "environmentOverrides": {"X": {"type": "number", "value": secret}}})
    with pytest.raises(ConfigError) as info:
        load_config(text)
    assert secret not in str(info.value)


def test_jsonc_parser_details():
    assert parse_jsonc('{"a": "// not a comment", "b": "/* nor this */"} // trailing') == {
        "a": "// not a comment", "b": "/* nor this */"}
    assert parse_jsonc('{"a": "quote \\" // still string"}') == {"a": 'quote " // still string'}
    assert parse_jsonc("[1, 2, /* c */ ]") == [1, 2]
    for bad in ("[,]", "{,}", "[1,,]", "{'a': 1}", "{a: 1}"):
        with pytest.raises(JsoncError):
            parse_jsonc(bad)


# ------------------------------------------------------------------------------------- tokens

def test_resolve_env_token_trims():
    assert resolve_token({"env": "GH"}, connection="gh", environ={"GH": "  abc123\n"}) == "abc123"
    assert resolve_token(Token(env="GH"), connection="gh", environ={"GH": "abc"}) == "abc"


@pytest.mark.parametrize("environ, state", [({}, "is not set"), ({"GH_TOKEN": "   "}, "is empty")])
def test_missing_env_token_names_connection_and_variable(environ, state):
    with pytest.raises(ConfigError) as info:
        resolve_token({"env": "GH_TOKEN"}, connection="my-github", environ=environ)
    msg = str(info.value)
    assert "my-github" in msg and "GH_TOKEN" in msg and state in msg
    assert info.value.problems == [f'connections.my-github.token: environment variable "GH_TOKEN" {state}']


def test_resolve_rejects_non_references():
    for bad in ("ghp_literal", {"secret": "x"}, {"env": "A", "googleCloudSecret": "b"}):
        with pytest.raises(ConfigError) as info:
            resolve_token(bad, connection="c", environ={})
        assert "ghp_literal" not in str(info.value)


def test_google_cloud_secret_without_the_library(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.cloud.secretmanager", None)  # import fails
    with pytest.raises(ConfigError) as info:
        resolve_token({"googleCloudSecret": "projects/p/secrets/s/versions/1"}, connection="gl")
    assert "pip install" in str(info.value) and "codesearch-ray[gcp]" in str(info.value) and "gl" in str(info.value)


def _fake_secretmanager(monkeypatch, payload=None, error=None):
    calls = []

    class Client:
        def access_secret_version(self, request):
            calls.append(request["name"])
            if error:
                raise error
            return types.SimpleNamespace(payload=types.SimpleNamespace(data=payload))

    module = types.ModuleType("google.cloud.secretmanager")
    module.SecretManagerServiceClient = Client
    monkeypatch.setitem(sys.modules, "google.cloud.secretmanager", module)
    return calls


def test_google_cloud_secret_with_the_library(monkeypatch):
    calls = _fake_secretmanager(monkeypatch, payload=b" s3cret\n")
    name = "projects/p/secrets/s/versions/latest"
    assert resolve_token({"googleCloudSecret": name}, connection="gl") == "s3cret"
    assert calls == [name]


def test_google_cloud_secret_errors_name_the_secret_only(monkeypatch):
    _fake_secretmanager(monkeypatch, error=PermissionError("403 Permission denied on resource"))
    with pytest.raises(ConfigError) as info:
        resolve_token({"googleCloudSecret": "projects/p/secrets/s/versions/1"}, connection="gl")
    assert "projects/p/secrets/s/versions/1" in str(info.value) and "403" in str(info.value)
    with pytest.raises(ConfigError) as info:
        resolve_token({"googleCloudSecret": "my-secret"}, connection="gl")
    assert "projects/<project-id>/secrets/<secret-name>/versions/<version-id>" in str(info.value)


def test_token_values_never_appear_in_reprs(monkeypatch):
    secret_env, secret_str, secret_header = "env-secret-value-1", "override-secret-2", "Bearer header-secret-3"
    text = json.dumps({
        "environmentOverrides": {"SOME_KEY": {"type": "string", "value": secret_str},
                                 "TOKEN_KEY": {"type": "token", "value": {"env": "SRC"}}},
        "connections": {"gh": {"type": "github", "token": {"env": "SRC"}}},
        "models": [{"provider": "openai", "model": "m", "headers": {"Authorization": secret_header}}],
    })
    environ = {"SRC": secret_env}
    config = load_config(text, environ=environ)
    resolve_token(config.connections["gh"].token, connection="gh", environ=environ)
    apply_environment_overrides(config, environ)
    for shown in (repr(config), str(config), repr(config.connections), repr(config.models),
                  repr(config.environment_overrides)):
        for secret in (secret_env, secret_str, secret_header):
            assert secret not in shown
    assert "Token(env='SRC')" in repr(config.connections["gh"])


# --------------------------------------------------------------------- environment overrides

def test_apply_environment_overrides(monkeypatch):
    config = load_config(HERE / "valid/environment_overrides.json")
    _fake_secretmanager(monkeypatch, payload=b"postgresql://db")
    environ = {"MY_ENCRYPTION_KEY": " k3y ", "AUTH_URL": "http://old"}
    names = apply_environment_overrides(config, environ)
    assert names == ["AUTH_URL", "DEFAULT_MAX_MATCH_COUNT", "PERMISSION_SYNC_ENABLED", "FORCE_ENABLE_ANONYMOUS_ACCESS",
                     "SOURCEBOT_ENCRYPTION_KEY", "DATABASE_URL"]
    assert environ["AUTH_URL"] == "https://search.example.com"
    assert environ["DEFAULT_MAX_MATCH_COUNT"] == "5000"
    assert environ["PERMISSION_SYNC_ENABLED"] == "true" and environ["FORCE_ENABLE_ANONYMOUS_ACCESS"] == "false"
    assert environ["SOURCEBOT_ENCRYPTION_KEY"] == "k3y" and environ["DATABASE_URL"] == "postgresql://db"


def test_token_override_that_cannot_resolve_sets_nothing():
    config = load_config('{"environmentOverrides": {"A": {"type": "string", "value": "x"}, '
                         '"B": {"type": "token", "value": {"env": "MISSING"}}}}')
    environ: dict[str, str] = {}
    with pytest.raises(ConfigError) as info:
        apply_environment_overrides(config, environ)
    assert environ == {}
    assert info.value.problems == ['environmentOverrides.B.value: environment variable "MISSING" is not set']


def test_number_overrides_are_written_like_sourcebot():
    config = load_config('{"environmentOverrides": {"A": {"type": "number", "value": 1.0}, "B": {"type": "number", "value": 2.5}}}')
    environ: dict[str, str] = {}
    apply_environment_overrides(config, environ)
    assert environ == {"A": "1", "B": "2.5"}


def test_enable_public_access_maps_to_force_enable_anonymous_access():
    config = load_config('{"settings": {"enablePublicAccess": true}}')
    environ: dict[str, str] = {}
    assert apply_environment_overrides(config, environ) == ["FORCE_ENABLE_ANONYMOUS_ACCESS"]
    assert environ == {"FORCE_ENABLE_ANONYMOUS_ACCESS": "true"}
    environ = {"FORCE_ENABLE_ANONYMOUS_ACCESS": "false"}  # an explicit setting wins
    assert apply_environment_overrides(config, environ) == []
    assert environ == {"FORCE_ENABLE_ANONYMOUS_ACCESS": "false"}


# ----------------------------------------------------------------------------------------- CLI

def test_cli_validate_valid(capsys):
    path = str(HERE / "valid/contexts.json")
    assert cli.main(["config", "validate", path]) == 0
    assert capsys.readouterr().out == f"{path}: valid (2 connections, 3 contexts)\n"
    path = str(HERE / "valid/newer_sourcebot.json")
    assert cli.main(["config", "validate", path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path}: valid (3 connections, 0 contexts)\n") and "  warning: connections.github.exclude.private" in out


def test_cli_validate_invalid(capsys):
    path = str(INVALID / "several_errors.json")
    assert cli.main(["config", "validate", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0] == f"{path}: invalid (8 problems)"
    assert "  connections.myGitlab.groups[2]: expected string" in lines
    assert len(lines) == 9
    assert cli.main(["config", "validate", str(INVALID / "syntax_error.json")]) == 2
    assert "line 6, column 13" in capsys.readouterr().err


def test_cli_validate_check_env(capsys, monkeypatch):
    path = str(HERE / "valid/github_filters.json")
    monkeypatch.delenv("GHE_TOKEN", raising=False)
    assert cli.main(["config", "validate", path]) == 0
    assert cli.main(["config", "validate", "--check-env", path]) == 2
    assert 'environment variable "GHE_TOKEN" is not set' in capsys.readouterr().err
    monkeypatch.setenv("GHE_TOKEN", "value-that-must-not-print")
    assert cli.main(["config", "validate", "--check-env", path]) == 0
    assert "value-that-must-not-print" not in "".join(capsys.readouterr())


def test_cli_schema(capsys):
    assert cli.main(["config", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema_index()
    assert cli.main(["config", "schema", "--file", "github.json"]) == 0
    assert json.loads(capsys.readouterr().out)["properties"]["type"]["const"] == "github"
    assert cli.main(["config", "schema", "--file", "nope.json"]) == 2
    assert "github.json" in capsys.readouterr().err


# GitLab's webUrl: where people browse when the API is reached at another address. Links use it
# (tests/hosts_git), and so does permission syncing's host key, which sign-in's GitLab provider
# (configured with the address people browse) must match.
@pytest.mark.parametrize("conn,key", [
    ({"type": "gitlab", "url": "https://api.gitlab.example.com", "webUrl": "https://gitlab.example.com/"},
     "gitlab:https://gitlab.example.com"),
    ({"type": "gitlab", "url": "https://gitlab.example.com"}, "gitlab:https://gitlab.example.com"),
    ({"type": "gitlab"}, "gitlab:https://gitlab.com"),
])
def test_gitlab_web_url_keys_the_host_for_permission_syncing(conn, key):
    from codesearch import permissions

    config = load_config(json.dumps({"connections": {"gl": conn}}), environ={"PERMISSION_SYNC_ENABLED": "true"})
    assert permissions.settings_from_config(config).connections["gl"].host == key
