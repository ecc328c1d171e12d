"""The example notebooks run end to end (nbclient, a local kernel), so they never rot.

`01_quickstart` indexes this repository, `02_deprecated_apis` parts of the standard library;
`03_service_and_cluster` runs against a Serve app of this session over HTTP and, attached to this
session's Ray instance, against its searchers directly; `04_code_analytics` audits installed packages
with a batch search and tracks a migration over git history it makes (insights). The committed notebooks keep their
outputs; ``CODESEARCH_SAVE_NOTEBOOKS=1`` (``make notebooks``) writes the fresh outputs back.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import nbformat
import pytest
from nbclient import NotebookClient

from tests.mcpworld import build, publish_as_a_service

#: Not in the fast lane (`make check`): see tests/conftest.py.
pytestmark = pytest.mark.serve

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/
NOTEBOOKS = os.path.join(os.path.dirname(HERE), "notebooks")
PREFIX = "notebook-test-searcher"


def run_notebook(name: str, workdir: str, env: dict[str, str] | None = None):
    nb = nbformat.read(os.path.join(NOTEBOOKS, name), as_version=4)
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": workdir}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
    if os.environ.get("CODESEARCH_SAVE_NOTEBOOKS"):  # `make notebooks`: refresh the committed outputs
        nbformat.write(nb, os.path.join(NOTEBOOKS, name))
    return nb


def _text(nb) -> str:
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            out.append(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) +
                       str(o.get("data", {}).get("text/html", "")))
    return "\n".join(out)


def test_quickstart(tmp_path):
    work = tmp_path / "notebooks"
    work.mkdir()
    nb = run_notebook("01_quickstart.ipynb", str(work), {"CODESEARCH_NOTEBOOK_REPO": os.path.dirname(HERE)})
    text = _text(nb)
    assert "indexed" in text and "<mark>" in text and "candidates" in text and "# codesearch" in text


def test_deprecated_api_analysis(tmp_path):
    nb = run_notebook("02_deprecated_apis.ipynb", str(tmp_path))
    text = _text(nb)
    assert "asyncio" in text and "get_event_loop" in text
    assert any(o.get("data", {}).get("image/png") for c in nb.cells for o in c.get("outputs", []))  # the chart


def test_service_and_cluster(serve_url, tmp_path):
    import ray
    from ray import serve

    from codesearch.runtime.searchers import SearcherPool
    from codesearch.serving.deployment import search_application

    w = build(str(tmp_path / "world"))
    pool = SearcherPool.create(w["index"], 2, name_prefix=PREFIX)
    publish_as_a_service(PREFIX, w, len(pool.actors))
    serve.run(search_application(PREFIX, len(pool.actors), anonymous_access=False, data_dir=w["data"]),
              name="notebook-test", route_prefix="/notebook-test")
    try:
        nb = run_notebook("03_service_and_cluster.ipynb", str(tmp_path), {
            "CODESEARCH_URL": f"{serve_url}/notebook-test", "CODESEARCH_API_KEY": w["key"],
            "CODESEARCH_RAY_ADDRESS": ray.get_runtime_context().gcs_address, "CODESEARCH_SEARCHERS": PREFIX})
        text = _text(nb)
        assert "same as over HTTP" in text and "github.com/acme/widgets" in text and "Fix: handle empty input" in text
    finally:
        serve.delete("notebook-test")
        pool.close()
        w["store"].close()


def _git_grep_count(repo: str, commit: str | None, literal: str) -> int:
    """Occurrences of `literal` (case-insensitive) in the files of `commit`: a count without codesearch."""
    if commit is None:
        return 0
    out = subprocess.run(["git", "grep", "-o", "-i", "-F", literal, commit], cwd=repo, capture_output=True, text=True)
    return len(out.stdout.splitlines())


def test_code_analytics(tmp_path):
    import pandas as pd

    from codesearch import Client

    nb = run_notebook("04_code_analytics.ipynb", str(tmp_path))
    charts = [o for c in nb.cells for o in c.get("outputs", []) if o.get("data", {}).get("image/png")]
    assert len(charts) == 2  # the worst offenders, the migration

    # the audit: every query's rows, per repository, are what Client.search finds through the same index
    audit = pd.read_csv(tmp_path / "deprecations.csv")
    text = _text(nb)
    with Client.local(str(tmp_path / "index")) as cs:
        for (qid, query), rows in audit.groupby(["query_id", "query"]):
            alone = cs.search(query, matches=100_000).to_pandas()
            assert rows.groupby("repository").size().to_dict() == alone.groupby("repo").size().to_dict(), query
            assert f"{query!r}: {len(alone)} call sites" in text
    assert (audit["query"] == "get_event_loop(").sum() > 20  # the chart has something to show

    # the migration: every count is a direct count of that commit's files, and the old API falls
    trend = pd.read_csv(tmp_path / "migration.csv")
    trend["commit"] = trend["commit"].astype(object).where(trend["commit"].notna(), None)
    assert set(trend["query"]) == {"get_event_loop(", "get_running_loop("}
    assert len(trend) == 2 * 3 * 13  # two queries, three repositories, thirteen monthly points
    for row in trend.itertuples():
        assert row.match_count == _git_grep_count(str(tmp_path / row.repository), row.commit, row.query), row
    old = trend[trend["query"] == "get_event_loop("].pivot_table(index="date", values="match_count", aggfunc="sum")
    assert old["match_count"].iloc[0] > old["match_count"].iloc[-1] > 0
