"""Shared fixtures: the generated corpus, indexed once per session, and its oracle."""

from __future__ import annotations

import os

import pytest

from codesearch.globs import PatternList
from codesearch.index.builder import IndexSettings
from codesearch.index.paths import index_paths
from codesearch.index.sources import local_repo_name
from codesearch.search.engine import Searcher
from tests import corpus
from tests.oracle import Oracle, docs_from_dir, docs_from_git

BRANCH_GLOBS = ["dev", "release/*"]
TAG_GLOBS = ["v*"]
TEST_LLM_TOKEN_ENV = "CODESEARCH_TEST_LLM_KEY"
TEST_LLM_TOKEN = "sk-test-8c1f2e"
GIT_REFS = ["refs/heads/main", "refs/heads/dev", "refs/heads/release/1.0", "refs/tags/v1.0"]
#: The base URL of in-process test clients (Starlette's TestClient): a host the app answers for
#: without configuration (`codesearch.service.allowed_hosts`; TestClient's own "testserver" is refused).
LOCAL = "http://localhost"

#: Fixtures that start Ray, Serve or a browser: a test that needs one (directly or through another
#: fixture) is not in the fast lane (`make check`, ``pytest --fast``).
HEAVY_FIXTURES = frozenset({"ray_session", "serve_url", "browser"})
#: Helpers whose import marks a whole test module as heavy: `Served` (a `codesearch serve` process),
#: the two-node cluster run, the MCP Inspector (Node).
HEAVY_HELPERS = ("Served", "two_node_checks", "run_inspector", "INSPECTOR_JS")
#: Modules left out of the fast lane for their time alone: each took 5 s or more of a ``pytest --fast
#: -n 2 --durations=0`` run on 2 cores (fuzzing, many local code-host servers, subprocesses, many
#: argon2 hashes). Together they were four fifths of the lane; `make test` runs them.
SLOW_MODULES = frozenset(
    {
        "test_compaction",
        "test_environment",
        "test_hosts_gerrit_bitbucket_ado_git",
        "test_hosts_github_gitlab_gitea",
        "test_index",
        "test_llm_streaming",
        "test_mirror",
        "test_oauth_abuse",
        "test_oauth_mcp_client",
        "test_parallel_build",
        "test_parser",
        "test_permission_sync_linked",
        "test_permission_sync_more_hosts",
        "test_property",
        "test_regex_trigrams",
        "test_service_http_path",
        "test_sso",
        "test_sso_iap",
        "test_store",
        "test_sync_e2e",
        "test_web_settings",
        "test_webhooks",
    }
)


def pytest_addoption(parser):
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast lane: leave out the tests that start Ray, Serve, `codesearch serve` or a browser "
        "(those marked `heavy`, those using a fixture of HEAVY_FIXTURES, "
        "the modules importing one of HEAVY_HELPERS, and the SLOW_MODULES)",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "heavy: starts Ray, Serve, a `codesearch serve` process, a cluster or a browser (not in --fast)"
    )


def _heavy(item) -> bool:
    module = getattr(item, "module", None)
    return (
        bool(HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())))
        or item.get_closest_marker("heavy") is not None
        or any(hasattr(module, name) for name in HEAVY_HELPERS)
        or getattr(module, "__name__", "").rsplit(".", 1)[-1] in SLOW_MODULES
    )


def pytest_collection_modifyitems(config, items):
    """With ``--fast``, deselect the heavy tests (see `HEAVY_FIXTURES` and the ``heavy`` marker)."""
    if not config.getoption("--fast"):
        return
    kept, dropped = [], []
    for item in items:
        (dropped if _heavy(item) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def test_settings() -> IndexSettings:
    return IndexSettings(max_file_size=corpus.MAX_FILE_SIZE, max_trigram_count=corpus.MAX_TRIGRAMS, always_index=PatternList([]))


@pytest.fixture(scope="session")
def indexed_corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("corpus")
    repo = corpus.make_git_repo(str(base / "gitrepo"))
    plain = corpus.make_plain_dir(str(base / "plain"))
    out = str(base / "index")
    stats = index_paths([repo, plain], out, test_settings(), branches=BRANCH_GLOBS, tags=TAG_GLOBS)
    repo_name, plain_name = local_repo_name(repo), local_repo_name(plain)
    docs = docs_from_git(repo, repo_name, GIT_REFS, str(base / "scratch"), corpus.MAX_FILE_SIZE, corpus.MAX_TRIGRAMS)
    docs += docs_from_dir(plain, plain_name, corpus.MAX_FILE_SIZE, corpus.MAX_TRIGRAMS)
    oracle = Oracle(docs, repos={repo_name: {"default": "refs/heads/main"}})
    searcher = Searcher(out)
    yield {"searcher": searcher, "oracle": oracle, "stats": stats, "index": out, "repo": repo, "plain": plain,
           "repo_name": repo_name, "plain_name": plain_name}
    searcher.close()


@pytest.fixture(scope="session")
def ray_session():
    """One Ray instance for the whole test session (started only when a test asks for it)."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # a language model token the Serve replicas can resolve (they inherit the environment of ray.init)
    os.environ.setdefault(TEST_LLM_TOKEN_ENV, TEST_LLM_TOKEN)
    # as `codesearch serve` runs its own Ray: Serve's proxies answer a dead replica in JSON
    from codesearch.serving.proxy_errors import install_for_own_ray

    install_for_own_ray()
    ray.init(address="local", num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    yield ray
    try:
        from ray import serve

        serve.shutdown()
    except Exception:
        pass
    ray.shutdown()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def serve_url(ray_session) -> str:
    """Ray Serve's HTTP proxy on 127.0.0.1 (one per Ray session: every module deploys its own
    applications under their own route prefix and deletes them when done)."""
    from ray import serve

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    return f"http://127.0.0.1:{port}"
