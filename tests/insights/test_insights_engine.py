"""Insight counts, checked against independent oracles at every point in time.

Each case is (query, flags, tree), as in tests/engine/test_differential.py: the query string goes
to the insights engine, the tree (written by hand) to the brute-force oracle of tests/oracle.py,
which reads each commit's files with plain git (``ls-tree``, ``cat-file``) and never sees the
query string, the shard format or the engine. The commit of each point is checked against the
history the test wrote (the newest commit at or before the date). A second oracle is
``git grep -c`` itself, for literals that occur at most once per line (then lines are matches).
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime

import pytest

from codesearch.errors import InvalidArgument
from codesearch.index.symbols import find_ctags
from codesearch.insights.engine import RepoTarget, count_repository
from codesearch.insights.snapshot import MAX_COMMITS
from codesearch.insights.spec import points
from tests.insightworld import ALPHA, ALPHA_NAME, BETA, BETA_NAME, make_repo, make_ticking_repo
from tests.oracle import Oracle, docs_from_git, walk_tree

R = {"regex": True}
CS = {"case_sensitive": True}
RCS = {"regex": True, "case_sensitive": True}

CASES = [
    # literals and case
    ("oldclient", {}, ("text", "oldclient")),
    ("OldClient", CS, ("text", "OldClient")),
    ("OLDCLIENT", CS, ("text", "OLDCLIENT")),
    ("newclient", {}, ("text", "newclient")),
    ("café", {}, ("text", "café")),
    ("CAFÉ NAÏVE", {}, ("and", ("text", "CAFÉ"), ("text", "NAÏVE"))),
    ('"oldclient oldclient"', {}, ("text", "oldclient oldclient")),
    ("nowhere_at_all", {}, ("text", "nowhere_at_all")),
    # regular expressions
    (r"old_?client\.\w+\(", R, ("regex", r"old_?client\.\w+\(")),
    (r"^import\s\w+", RCS, ("regex", r"^import\s\w+")),
    (r"(Old|New)Client\b", RCS, ("regex", r"(Old|New)Client\b")),
    # filters: file names, languages, negation, alternatives
    (r"oldclient file:\.py$", {}, ("and", ("text", "oldclient"), ("file", r"\.py$"))),
    (r"file:\.md$", {}, ("file", r"\.md$")),
    ("file:oldclient", {}, ("file", "oldclient")),
    ("lang:python newclient", {}, ("and", ("lang", "python"), ("text", "newclient"))),
    ("lang:go", {}, ("lang", "go")),
    ("oldclient -file:guide/", {}, ("and", ("text", "oldclient"), ("not", ("file", "guide/")))),
    ("oldclient or newclient", {}, ("or", ("text", "oldclient"), ("text", "newclient"))),
    ("-(oldclient) newclient", {}, ("and", ("not", ("text", "oldclient")), ("text", "newclient"))),
    ("repo:alpha TODO", {}, ("and", ("repo", "alpha"), ("text", "TODO"))),
]
if find_ctags() is not None:
    CASES.append(("sym:Handler", {}, ("sym", "Handler")))

SINCE, UNTIL = "2023-10-01", "2024-08-01"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("insights")
    alpha, beta = str(base / "alpha"), str(base / "beta")
    history = {ALPHA_NAME: make_repo(alpha, ALPHA), BETA_NAME: make_repo(beta, BETA)}
    targets = [RepoTarget(ALPHA_NAME, alpha + "/.git", id=1), RepoTarget(BETA_NAME, beta + "/.git", id=2)]
    dates = points(SINCE, UNTIL, "month") + points("2024-02-01", "2024-03-15", "week")
    queries = [{"query": q, "isRegexEnabled": f.get("regex", False),
                "isCaseSensitivityEnabled": f.get("case_sensitive", False)} for q, f, _ in CASES]
    rows = [r for t in targets for r in count_repository(t, queries, dates)]
    return {"rows": rows, "dates": dates, "history": history, "dirs": {ALPHA_NAME: alpha, BETA_NAME: beta},
            "scratch": str(base / "scratch")}


def expected_commit(history: list[tuple[str, str]], when: datetime) -> str | None:
    """The newest commit of a linear history at or before `when`, from the dates the test wrote."""
    found = None
    for date, sha in history:
        if datetime.fromisoformat(date.replace("Z", "+00:00")) <= when:
            found = sha
    return found


def oracle_count(world, repo: str, commit: str, tree, case_sensitive: bool) -> tuple[int, int]:
    """(matches, files) of `tree` over the files of `commit`, by brute force."""
    docs = docs_from_git(world["dirs"][repo], repo, [commit], world["scratch"])
    spans, files = Oracle(docs, repos={repo: {"default": commit}}).search(tree, case_sensitive=case_sensitive)
    content = any(n[0] in ("text", "regex", "sym") for n in _positive_leaves(tree))
    return (len(spans) if content else len(files)), len(files)


def _positive_leaves(tree, negated=False):
    if tree[0] in ("and", "or"):
        for c in tree[1:]:
            yield from _positive_leaves(c, negated)
    elif tree[0] == "not":
        yield from _positive_leaves(tree[1], not negated)
    elif not negated:
        yield tree


def test_every_point_is_counted_on_the_commit_of_its_date(world):
    for row in world["rows"]:
        assert row.commit == expected_commit(world["history"][row.repository], row.date), (row.repository, row.date)
    # beta has no commit before March 2024: its early points count nothing
    early = [r for r in world["rows"] if r.repository == BETA_NAME and r.date < datetime(2024, 3, 3, tzinfo=UTC)]
    assert early and all(r.commit is None and r.match_count == 0 == r.file_count for r in early)


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c[0] for c in CASES])
def test_counts_equal_a_brute_force_scan_of_each_commit(world, i):
    query, flags, tree = CASES[i]
    assert all(n[0] != "rev" for n in walk_tree(tree))
    rows = [r for r in world["rows"] if r.query_id == i]
    assert len(rows) == 2 * len(world["dates"])
    cache: dict[tuple[str, str], tuple[int, int]] = {}
    for r in rows:
        if r.commit is None:
            continue
        key = (r.repository, r.commit)
        if key not in cache:
            cache[key] = oracle_count(world, r.repository, r.commit, tree, flags.get("case_sensitive", False))
        assert (r.match_count, r.file_count) == cache[key], (query, r.repository, r.date.date(), r.commit)


def test_the_history_moves(world):
    """Not a vacuous table: the migration shows in the counts."""
    by = {(r.query, r.repository, r.date.date().isoformat()): r.match_count for r in world["rows"]}
    assert by[("oldclient", ALPHA_NAME, "2024-01-01")] > by[("oldclient", ALPHA_NAME, "2024-08-01")] > 0
    assert by[("newclient", ALPHA_NAME, "2024-01-01")] == 1  # the TODO comment only
    assert by[("newclient", ALPHA_NAME, "2024-08-01")] > 10


def _git_grep(repo: str, commit: str, *flags: str) -> int:
    out = subprocess.run(["git", "grep", *flags, commit, "--"], cwd=repo, capture_output=True).stdout
    if "-c" in flags:
        return sum(int(line.rsplit(b":", 1)[1]) for line in out.splitlines())
    return len(out.splitlines())


@pytest.mark.parametrize("literal", ["import", "Handler", "client.get", "todo"])
def test_counts_of_once_per_line_literals_equal_git_grep_c(world, literal):
    """``git grep -c -i -F -I`` counts lines; for these literals every matching line holds one
    match (``git grep -o`` prints each match on a line of its own: checked), so lines are matches."""
    repo = world["dirs"][ALPHA_NAME]
    rows = count_repository(RepoTarget(ALPHA_NAME, repo + "/.git"), [literal], world["dates"])
    assert any(r.match_count for r in rows)
    for r in rows:
        if r.commit is None:
            continue
        lines = _git_grep(repo, r.commit, "-c", "-i", "-F", "-I", "-e", literal)
        assert lines == _git_grep(repo, r.commit, "-o", "-i", "-F", "-I", "-e", literal)
        assert r.match_count == lines, (literal, r.date)


def test_more_commits_than_one_index_holds(tmp_path):
    days = MAX_COMMITS + 6
    make_ticking_repo(str(tmp_path / "ticks"), days)
    dates = points("2024-01-01T13:00:00Z", "2024-03-31", "day")[:days]
    rows = count_repository(RepoTarget("ticks", str(tmp_path / "ticks" / ".git")), ["tick", "file:ticks"], dates)
    assert [r.match_count for r in rows if r.query_id == 0] == list(range(1, days + 1))
    assert [r.match_count for r in rows if r.query_id == 1] == [1] * days
    assert len({r.commit for r in rows}) == days


@pytest.mark.parametrize(
    "queries, message",
    [
        (["foo rev:main"], "query 1: an insight counts each repository's default branch"),
        (["ok", "file:"], "query 2: missing value after file:"),
        (["context:nowhere"], "query 1: search context 'nowhere' not found"),
        (["ok", {"query": "(", "isRegexEnabled": True}], "query 2:"),
        ([""], "query 1: the query is empty"),
        ([], "at least one query"),
        ([{"query": "x", "isRegexEnabled": "yes"}], "query 1: isRegexEnabled"),
    ],
)
def test_a_bad_query_is_refused_before_any_git_process(queries, message):
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        count_repository(RepoTarget("nowhere", "/nonexistent/.git"), queries, [datetime(2024, 1, 1, tzinfo=UTC)])
