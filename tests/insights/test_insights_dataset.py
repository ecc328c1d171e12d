"""`run_insights` on Ray: the rows of the Dataset are the engine's rows, one task per repository.

The engine's counts are checked against brute force in test_insights_engine.py; here the Ray
layer must give exactly those rows, in the documented schema, from every form of source.
"""

from __future__ import annotations

import pytest

from codesearch.errors import InvalidArgument
from codesearch.insights.dataset import COLUMNS, run_insights, targets_of
from codesearch.insights.engine import RepoTarget, count_repository
from codesearch.insights.spec import points
from tests.insightworld import ALPHA, ALPHA_NAME, BETA, BETA_NAME, make_repo

QUERIES = ["oldclient", {"query": r"new\w+", "isRegexEnabled": True}, "file:\\.md$"]


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    base = tmp_path_factory.mktemp("insights-ray")
    make_repo(str(base / "alpha"), ALPHA)
    make_repo(str(base / "beta"), BETA)
    return {ALPHA_NAME: str(base / "alpha"), BETA_NAME: str(base / "beta")}


def _key(row: dict) -> tuple:
    return (row["query_id"], row["repository"], row["date"].isoformat())


def test_the_dataset_holds_the_engines_rows(ray_session, repos):
    ds = run_insights(QUERIES, repos, "2023-12-01", "2024-07-01", "month")
    frame = ds.to_pandas()
    assert tuple(frame.columns) == COLUMNS
    got = {_key(r): r for r in frame.to_dict("records")}
    dates = points("2023-12-01", "2024-07-01", "month")
    want = [r.to_row() for name, path in repos.items()
            for r in count_repository(RepoTarget(name, path + "/.git"), QUERIES, dates)]
    assert len(got) == len(want) == 3 * 2 * len(dates)
    for row in want:
        g = got[_key(row)]
        assert (g["query"], g["match_count"], g["file_count"]) == (row["query"], row["match_count"], row["file_count"])
        assert (g["commit"] if isinstance(g["commit"], str) else None) == row["commit"]
    assert frame["date"].dt.tz is not None  # dates are UTC instants
    assert frame["match_count"].sum() > 0


def test_repositories_are_counted_in_tasks_of_their_own(ray_session, repos):
    ds = run_insights(["oldclient"], repos, "2024-01-01", "2024-02-01", "month")
    assert ds.materialize().num_blocks() == 2


@pytest.mark.parametrize(
    "source, names",
    [
        ("list", [ALPHA_NAME, BETA_NAME]),
        ("mapping", [ALPHA_NAME, BETA_NAME]),
        ("one", ["alpha"]),
    ],
)
def test_sources(repos, source, names):
    if source == "list":
        given = [RepoTarget(n, p + "/.git") for n, p in repos.items()]
    elif source == "mapping":
        given = repos
    else:
        given = repos[ALPHA_NAME]
    assert [t.name.rsplit("/", 1)[-1] if source == "one" else t.name for t in targets_of(given)] == names


@pytest.mark.parametrize(
    "args, message",
    [
        ((["("], {"isRegexEnabled": True}), "query 1"),
        ((["x"], {"step": "fortnight"}), "step 'fortnight' is not one of"),
        ((["x"], {"since": "2025-01-01", "until": "2024-01-01"}), "is before since"),
        ((["x"], {"source": "/nonexistent"}), "not a git repository"),
    ],
)
def test_mistakes_fail_before_ray_runs_anything(repos, args, message):
    queries, opts = args
    if opts.pop("isRegexEnabled", False):
        queries = [{"query": q, "isRegexEnabled": True} for q in queries]
    source = opts.pop("source", repos)
    kwargs = {"since": "2024-01-01", "until": "2024-03-01", "step": "month", **opts}
    with pytest.raises(InvalidArgument, match=message):
        run_insights(queries, source, **kwargs)
