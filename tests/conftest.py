"""Shared fixtures: the generated corpus, indexed once per session, and its oracle."""

from __future__ import annotations

import os

import pytest

from codesearch.globs import PatternList
from codesearch.index.builder import IndexSettings
from codesearch.index.paths import index_paths
from codesearch.index.sources import local_repo_name
from codesearch.search.engine import Searcher
from tests import corpus, schedule
from tests.oracle import Oracle, docs_from_dir, docs_from_git
from tests.ports import free_port  # noqa: F401  (tests import it from here)

BRANCH_GLOBS = ["dev", "release/*"]
TAG_GLOBS = ["v*"]
TEST_LLM_TOKEN_ENV = "CODESEARCH_TEST_LLM_KEY"
TEST_LLM_TOKEN = "sk-test-8c1f2e"
GIT_REFS = ["refs/heads/main", "refs/heads/dev", "refs/heads/release/1.0", "refs/tags/v1.0"]
#: The base URL of in-process test clients (Starlette's TestClient): a host the app answers for
#: without configuration (`codesearch.service.middleware.allowed_hosts`; TestClient's own "testserver" is refused).
LOCAL = "http://localhost"

#: The lanes. Every test that needs more than this process carries one of these markers (registered in
#: pyproject.toml, `--strict-markers`), applied by the fixture or helper it uses (`LANE_FIXTURES`,
#: `LANE_HELPERS`) or written on the test (``@pytest.mark.browser``); `SLOW_MODULES` are marked
#: ``slow``. ``pytest --fast`` (`make check`) is ``-m "not (ray or serve or browser or slow)"``.
LANES = ("ray", "serve", "browser", "slow")
#: Fixtures whose use puts a test in a lane (directly or through another fixture).
LANE_FIXTURES = {"ray_session": "ray", "serve_url": "serve", "browser": "browser"}
#: Helpers whose import puts a whole test module in a lane: `Served` (a `codesearch serve` process),
#: the two-node cluster run, the MCP Inspector (Node).
LANE_HELPERS = {"Served": "serve", "two_node_checks": "ray", "run_inspector": "serve", "INSPECTOR_JS": "serve"}
#: Modules in the ``slow`` lane for their time alone: each took 5 s or more of a ``pytest --fast
#: -n 2 --durations=0`` run on 2 cores (fuzzing, many local code-host servers, subprocesses, many
#: argon2 hashes). Together they were four fifths of the fast lane; `make test` runs them. A single
#: test of another module that takes over a second of the fast lane is marked ``@pytest.mark.slow``
#: where it stands.
SLOW_MODULES = frozenset(
    {
        "test_compaction",
        "test_disk_and_files",
        "test_environment",
        "test_github_app",
        "test_github_app_runtime",
        "test_hosts_gerrit_bitbucket_ado_git",
        "test_hosts_github_gitlab_gitea",
        "test_index",
        "test_index_batch",
        "test_insights_engine",
        "test_llm_streaming",
        "test_many_branches",
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
        "test_web_email_signin",
        "test_sso_iap",
        "test_invite_signin_methods",
        "test_store",
        "test_sync_e2e",
        "test_unchanged_reindex",
        "test_web_settings",
        "test_webhooks",
    }
)
FAST = "not (" + " or ".join(LANES) + ")"


def pytest_addoption(parser):
    parser.addoption(
        "--fast",
        action="store_true",
        help=f"the fast lane (make check): -m {FAST!r}, the tests that need no Ray, Serve, "
        "`codesearch serve` process, cluster or browser, without the slow modules",
    )


def pytest_ignore_collect(collection_path, config):
    """With ``--fast``, the `SLOW_MODULES` are not even collected: importing them and making their
    tests took each worker ~3 s of the fast lane's minute, for tests it then deselected."""
    if config.getoption("--fast") and collection_path.suffix == ".py" and collection_path.stem in SLOW_MODULES:
        return True
    return None


def lanes_of(item) -> set[str]:
    """The lanes a collected test belongs to, from its fixtures, its module's helpers and name."""
    module = getattr(item, "module", None)
    found = {LANE_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in LANE_FIXTURES}
    found |= {lane for name, lane in LANE_HELPERS.items() if hasattr(module, name)}
    if getattr(module, "__name__", "").rsplit(".", 1)[-1] in SLOW_MODULES:
        found.add("slow")
    return found


def pytest_collection_modifyitems(config, items):
    """Mark every test with its lanes (`lanes_of`); with ``--fast``, keep only the tests in none.
    The files go longest first (`tests.schedule`: the order pytest-xdist hands them out in, with
    ``--no-loadscope-reorder``)."""
    for item in items:
        for lane in lanes_of(item) - {m.name for m in item.iter_markers()}:
            item.add_marker(lane)
    items[:] = schedule.longest_first(items, schedule.module_seconds())
    if not config.getoption("--fast"):
        return
    kept, dropped = [], []
    for item in items:
        (dropped if any(item.get_closest_marker(lane) for lane in LANES) else kept).append(item)
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
    # No `ray.shutdown()` here: Ray stops this instance (every process it started, Serve's among
    # them) when the test process exits. Shut down here, while the session's fixtures are torn
    # down, a thread some test left running that still touches Ray made Ray end the whole process
    # ("The core worker has already been shutdown ... The process will exit"): a pytest-xdist
    # worker lost before it reported its end, after which the run waited forever.




@pytest.fixture(scope="session")
def serve_url(ray_session) -> str:
    """Ray Serve's HTTP proxy on 127.0.0.1 (one per Ray session: every module deploys its own
    applications under their own route prefix and deletes them when done)."""
    from ray import serve

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    return f"http://127.0.0.1:{port}"
