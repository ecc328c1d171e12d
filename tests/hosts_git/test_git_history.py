"""codesearch.git.history against real repositories: blame with odd file names and line counts,
the line cap, what a path is at a ref, tags, the commits between two refs and a commit's changes
(root, merge), each compared with what git itself prints."""

from __future__ import annotations

import os
import subprocess

import pytest

from codesearch.errors import FileNotFound, InvalidArgument, InvalidGitRef
from codesearch.git import history
from codesearch.git.paths import git_dir_of
from tests.histworld import ALICE, BOB, commit, git, make_history_repo, write

ODD_NAMES = ["tab\there.txt", 'q"uote.txt', "back\\slash.txt", "ünï cödé.txt", "-dash.txt", ":(top)magic.txt",
             "*.txt"]


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """Files with names git quotes or could read as options or pathspecs, each edited by Bob on
    its second line; a file without a final newline; tags of every kind."""
    root = str(tmp_path_factory.mktemp("odd") / "repo")
    os.makedirs(root)
    git(root, "init", "-q", "-b", "main")
    write(root, {**{n: "one\ntwo\nthree\n" for n in ODD_NAMES}, "no-newline.txt": "a\nb", "one.txt": "x"})
    c1 = commit(root, "first", ALICE, "2024-01-01T00:00:00Z")
    write(root, {**{n: "one\nTWO\nthree\n" for n in ODD_NAMES}, "no-newline.txt": "a\nB"})
    c2 = commit(root, "second", BOB, "2024-02-01T00:00:00Z")
    git(root, "tag", "light", c1)
    git(root, "tag", "-a", "annotated", "-m", "an annotated tag", c2, when="2024-03-01T00:00:00Z")
    blob = git(root, "rev-parse", f"{c1}:one.txt").strip()
    git(root, "tag", "a-blob", blob)  # names no commit: not listed
    return {"gd": git_dir_of(root), "c1": c1, "c2": c2}


@pytest.mark.parametrize("name", ODD_NAMES)
def test_blame_reads_odd_file_names_literally(odd, name):
    b = history.blame(odd["gd"], "main", name)
    assert [(r.hash, r.path, r.start_line, r.line_count) for r in b.ranges] == [
        (odd["c1"], name, 1, 1), (odd["c2"], name, 2, 1), (odd["c1"], name, 3, 1)]
    assert b.commits[odd["c2"]].previous == (odd["c1"], name)
    assert (b.lines, b.truncated, b.binary) == (3, False, False)


@pytest.mark.parametrize("path, lines, ranges", [
    ("no-newline.txt", 2, [("c1", 1, 1), ("c2", 2, 1)]),  # a last line without a newline counts
    ("one.txt", 1, [("c1", 1, 1)]),
])
def test_blame_counts_lines_as_git_does(odd, path, lines, ranges):
    b = history.blame(odd["gd"], "main", path)
    assert b.lines == lines and [(r.hash, r.start_line, r.line_count) for r in b.ranges] == [
        (odd[k], s, n) for k, s, n in ranges]


@pytest.mark.parametrize("max_lines, want", [(1, [("c1", 1, 1)]), (2, [("c1", 1, 1), ("c2", 2, 1)]),
                                             (3, [("c1", 1, 1), ("c2", 2, 1), ("c1", 3, 1)])])
def test_blame_stops_at_max_lines(odd, max_lines, want):
    b = history.blame(odd["gd"], "main", "tab\there.txt", max_lines=max_lines)
    assert [(r.hash, r.start_line, r.line_count) for r in b.ranges] == [(odd[k], s, n) for k, s, n in want]
    assert b.truncated is (max_lines < 3)


@pytest.mark.parametrize("kw, error", [({"max_lines": 0}, InvalidArgument), ({"max_lines": True}, InvalidArgument),
                                        ({"path": "nope"}, FileNotFound), ({"path": "a/../one.txt"}, FileNotFound),
                                        ({"ref": "nope"}, InvalidGitRef), ({"ref": "-p"}, InvalidGitRef)])
def test_blame_refuses(odd, kw, error):
    args = {"ref": "main", "path": "one.txt", **kw}
    with pytest.raises(error):
        history.blame(odd["gd"], args.pop("ref"), args.pop("path"), **args)


@pytest.mark.parametrize("path, want", [("", "tree"), ("one.txt", "blob"), ("nope", None), ("-dash.txt", "blob")])
def test_path_kind(odd, path, want):
    assert history.path_kind(odd["gd"], "main", path) == want


def test_tags_name_commits_newest_first(odd):
    tags, truncated = history.list_tags(odd["gd"])
    assert [(t.name, t.commit) for t in tags] == [("annotated", odd["c2"]), ("light", odd["c1"])] and not truncated
    assert history.list_tags(odd["gd"], limit=1) == ([history.Tag("annotated", odd["c2"])], True)


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("hist") / "repo")
    shas = make_history_repo(root)
    return {"gd": git_dir_of(root), **shas}


@pytest.mark.parametrize("base, head, limit", [("v1.0", "main", 100), ("v1.0", "main", 2), ("main", "v1.0", 100),
                                               ("feature", "main", 100), ("main", "main", 100)])
def test_commits_between_are_git_log_base_dot_dot_head(hist, base, head, limit):
    want = subprocess.run(["git", "--git-dir", hist["gd"], "log", "--format=%H", f"{base}..{head}"],
                          capture_output=True, text=True, check=True).stdout.split()
    got, total = history.commits_between(hist["gd"], base, head, limit=limit)
    assert [c.hash for c in got] == want[:limit] and total == len(want)


def test_commit_changes_of_a_root_and_a_merge(hist):
    root, files, truncated, total = history.commit_changes(hist["gd"], "v1.0")
    assert root.parents == [] and not truncated and total == len(files)
    assert {(f.old_path, f.new_path, f.status) for f in files} == {
        (None, p, "added") for p in ("src/app.py", "README.md", "docs/guide.md", "data/logo.png", "sp ace/ünï.txt",
                                     "empty.txt")}
    merge, files, _, _ = history.commit_changes(hist["gd"], "main")
    assert merge.parents == [hist["c3"], hist["f1"]] and merge.message == "Merge branch 'feature'"
    assert sorted(f.new_path for f in files) == ["feature.txt", "src/util.py"]
    assert [history.file_stats(f) for f in sorted(files, key=lambda f: f.new_path)] == [(1, 0), (1, 1)]
