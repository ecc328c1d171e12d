"""Defaults stated once (codesearch/defaults.py): the config model, the index builder, the index
workers and the commands take theirs from there, and they agree with the defaults of Sourcebot's
config schema; the indexing rules read no environment variable unless an entry point passes it."""

from __future__ import annotations

import json

import pytest

from codesearch import cli, defaults, environment
from codesearch.config import schema_bytes
from codesearch.config.models import Settings
from codesearch.index.builder import IndexSettings
from codesearch.index.paths import index_paths
from codesearch.runtime.workers import RepoIndexer
from codesearch.search.options import DEFAULT_PUBLIC_URL
from codesearch.serving.bootstrap import ServiceSpec


def _schema_default(name: str):
    shared = json.loads(schema_bytes("shared.json"))
    found = []

    def walk(node):
        if isinstance(node, dict):
            if name in node and isinstance(node[name], dict) and "default" in node[name]:
                found.append(node[name]["default"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(shared)
    assert found, name
    return found[0]


@pytest.mark.parametrize("schema_name,attribute,value", [
    ("maxFileSize", "max_file_size", defaults.MAX_FILE_SIZE),
    ("maxTrigramCount", "max_trigram_count", defaults.MAX_TRIGRAM_COUNT),
    ("repoIndexTimeoutMs", "repo_index_timeout_ms", defaults.REPO_INDEX_TIMEOUT_MS),
])
def test_config_defaults_are_the_schemas(schema_name, attribute, value):
    assert _schema_default(schema_name) == value == getattr(Settings(), attribute)


def test_the_builder_and_the_service_take_the_same_defaults():
    s = IndexSettings()
    assert (s.max_file_size, s.max_trigram_count) == (defaults.MAX_FILE_SIZE, defaults.MAX_TRIGRAM_COUNT)
    spec = ServiceSpec(config_path="", data_dir="")
    assert (spec.searchers, spec.searcher_copies, spec.replicas) == (defaults.SEARCHERS, defaults.SEARCHER_COPIES,
                                                                      defaults.REPLICAS)
    serve = cli.build_parser().parse_args(["serve"])
    assert (serve.port, serve.host, serve.searchers, serve.searcher_copies, serve.replicas) == (
        defaults.PORT, defaults.HOST, defaults.SEARCHERS, defaults.SEARCHER_COPIES, defaults.REPLICAS)
    assert DEFAULT_PUBLIC_URL == f"http://localhost:{defaults.PORT}"


def test_index_settings_read_no_environment(monkeypatch):
    monkeypatch.setenv(environment.ALWAYS_INDEX, "**/*.big")
    assert not IndexSettings().always_index
    assert environment.always_index_patterns().matches("a/x.big")
    assert not environment.always_index_patterns({}).matches("a/x.big")


def test_the_index_worker_takes_the_patterns_it_is_given(tmp_path, monkeypatch):
    monkeypatch.setenv(environment.ALWAYS_INDEX, "**/*.env")
    given = RepoIndexer(str(tmp_path), "w1", always_index="**/*.given")
    assert given.always_index.matches("a/b.given") and not given.always_index.matches("a/b.env")
    assert RepoIndexer(str(tmp_path), "w2").always_index.matches("a/b.env")  # else its own environment's


def test_library_indexing_ignores_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(environment.ALWAYS_INDEX, "**/*.big")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "x.big").write_bytes(b"y" * 50)
    stats = index_paths([str(tmp_path / "src")], str(tmp_path / "ix"), IndexSettings(max_file_size=10, ctags=False))
    assert stats.skipped == 1
