"""codesearch.git's readers (objects, trees, commits, refs, diff, grep, dates) against real
repositories built here: a local repository with a known history (authors, dates, branches,
tags, renames, binary files, odd paths) and its bare mirror."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
from datetime import UTC, datetime

import pytest

from codesearch import errors
from codesearch.errors import CodesearchError, FileNotFound, InvalidArgument, InvalidGitRef, RepositoryNotFound
from codesearch.git import grep as gitgrep
from codesearch.git.commits import Author, Commit, list_authors, list_commits
from codesearch.git.dates import parse_when
from codesearch.git.diff import FileDiff, Hunk, diff, render_unified
from codesearch.git.grep import GrepHit, grep
from codesearch.git.objects import ObjectBatch, is_binary, read_blob, resolve_commit
from codesearch.git.paths import check_dir, check_path, check_ref, git_dir_of
from codesearch.git.refs import Branch, head_branch, list_branches
from codesearch.git.trees import TreeEntry, list_files, list_tree
from tests.corpus import git
from tests.githttp import make_bare_repo

APP_V1 = "import os\n\n\ndef main():\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n    e = 5\n    f = 6\n    return a + b\n"
APP_V2 = APP_V1.replace("e = 5", "e = 50")
RENAMED_V1 = "one\ntwo\nthree\nfour\nfive\nsix\n"
RENAMED_V2 = "one\ntwo\nthree\nFOUR\nfive\nsix\n"
BLOB_V1 = bytes(range(256)) * 2
BLOB_V2 = b"\0\1\2" + bytes(range(256))
C2_MESSAGE = ('Fix "parser": handle ü, tabs\tand <angle> & 100% ampersands\n\n'
              "Body line 1\n  indented line, a \x1f unit separator\n\nFixes #12\n")
LONG_LINE = "needle " + "x" * 5000

ALICE = ("Alice Smith", "alice@example.com")
BOB = ("Bob Jones", "bob@example.org")
CAROL = ("Carol", "carol@example.net")


def _write(repo: str, files: dict[str, str | bytes]) -> None:
    for path, data in files.items():
        full = os.path.join(repo, path)
        os.makedirs(os.path.dirname(full) or repo, exist_ok=True)
        with open(full, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)


def commit(repo: str, message: str, when: str, author=ALICE, files=None, remove=(), renames=()) -> str:
    """Commit `files`/`remove`/`renames` as `author` at `when` (author and committer date)."""
    _write(repo, files or {})
    for old, new in renames:
        git(repo, "mv", old, new)
    for path in remove:
        git(repo, "rm", "-q", path)
    git(repo, "add", "-A")
    env = {**os.environ, "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1], "GIT_AUTHOR_DATE": when,
           "GIT_COMMITTER_NAME": author[0], "GIT_COMMITTER_EMAIL": author[1], "GIT_COMMITTER_DATE": when}
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-F", "-"], input=message.encode(), cwd=repo, env=env,
                   check=True, capture_output=True)
    return git(repo, "rev-parse", "HEAD").strip()


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    """main: c1 (Alice, 2024-01-10) -> c2 (Bob, 2024-02-15 +02:00) -> c3 (Alice, 2024-03-20);
    dev: c1 -> d1 (Carol, 2024-01-20); tags v1.0 (lightweight) and v1.0-ann (annotated) on c1;
    a bare mirror of it all."""
    base = tmp_path_factory.mktemp("gitread")
    repo = str(base / "local")
    os.makedirs(repo)
    git(repo, "init", "-q", "-b", "main")
    c1 = commit(repo, "Initial import\n", "2024-01-10T09:00:00Z", ALICE, files={
        "README.md": "hello world\nHello again\n",
        "src/app.py": APP_V1,
        "src/lib/util.py": "def util():\n    return 'needle'\n",
        "src/lib/deep/x.txt": "deep needle\n",
        "docs/guide.md": "# Guide\n\nneedle in the docs\n",
        "data/blob.bin": BLOB_V1,
        "no-newline.txt": "a\nb",
        "old_name.txt": RENAMED_V1,
        "gone.txt": "only in the past: needle\n",
        "sp ace/b/f.txt": "space one\n",
        "zeta.txt": "last\n",
        "long.txt": LONG_LINE + "\n",
    })
    git(repo, "tag", "v1.0")
    git(repo, "tag", "-a", "v1.0-ann", "-m", "annotated release")
    c2 = commit(repo, C2_MESSAGE, "2024-02-15T12:30:00+02:00", BOB, files={
        "src/app.py": APP_V2, "old_name.txt": RENAMED_V2, "data/blob.bin": BLOB_V2, "no-newline.txt": "a\nc",
        "src/new.py": "def new():\n    return 'needle'\n",
    }, remove=["gone.txt"], renames=[("old_name.txt", "new_name.txt")])
    os.chmod(os.path.join(repo, "src/lib/util.py"), 0o755)
    c3 = commit(repo, "Add feature X\n\n\n", "2024-03-20T08:00:00Z", ALICE, files={
        "sp ace/b/f.txt": "space two\n", "tab\there.txt": "tab\n", "ünï.txt": "unicode\n", 'q"uote.txt': "quote\n",
        "empty.txt": "",
    }, renames=[("docs/guide.md", "docs/manual.md")])
    git(repo, "checkout", "-q", "-b", "dev", c1)
    d1 = commit(repo, "dev work\n", "2024-01-20T00:00:00Z", CAROL, files={"dev.txt": "dev needle\n"})
    git(repo, "checkout", "-q", "main")
    # a submodule entry (a gitlink) on its own branch
    git(repo, "checkout", "-q", "-b", "withsub")
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{c1},vendor/sub")
    git(repo, "commit", "-q", "-m", "add a submodule")  # (not commit(): `add -A` would drop the gitlink)
    s1 = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    mirror = str(base / "mirror.git")
    subprocess.run(["git", "clone", "-q", "--mirror", repo, mirror], check=True, capture_output=True)
    return {"repo": repo, "gd": git_dir_of(repo), "mirror": mirror, "c1": c1, "c2": c2, "c3": c3, "d1": d1, "s1": s1}


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize("ref", ["main", "v1.0", "refs/heads/main", "main~1", "HEAD", "release/1.0", "a" * 1024,
                                 "0123abcd"])
def test_check_ref_accepts(ref):
    assert check_ref(ref) == ref


@pytest.mark.parametrize("ref", ["", "-x", "--output=/tmp/x", "a:b", "HEAD:README.md", "a b", "a\tb", "a\nb", "a\rb",
                                 "a\0b", "a" * 1025])
def test_check_ref_refuses(ref):
    with pytest.raises(InvalidGitRef) as e:
        check_ref(ref)
    assert (e.value.error_code, e.value.status_code) == ("INVALID_GIT_REF", 400)


@pytest.mark.parametrize("path", ["a", "a/b.txt", "a b/c d.txt", ":(top)x", "ünï.txt", "a..b", ".hidden/x"])
def test_check_path_accepts(path):
    assert check_path(path) == path


@pytest.mark.parametrize("path", ["", "/etc/passwd", "../x", "a/../b", "./a", "a/./b", "a//b", "a/", ".", "..",
                                  "a\0b", "a\nb", "a\rb"])
def test_check_path_refuses(path):
    with pytest.raises(FileNotFound) as e:
        check_path(path)
    assert (e.value.error_code, e.value.status_code) == ("FILE_NOT_FOUND", 404)


@pytest.mark.parametrize("path, want", [(None, ""), ("", ""), ("/", ""), (".", ""), ("src", "src"), ("src/", "src"),
                                        ("src/lib/", "src/lib"), ("a b", "a b")])
def test_check_dir_accepts(path, want):
    assert check_dir(path) == want


@pytest.mark.parametrize("path", ["src//", "/etc", "../x", "src/../x", "./src", "a\0", "a\nb", "//"])
def test_check_dir_refuses(path):
    with pytest.raises(FileNotFound, match="directory"):
        check_dir(path)


@pytest.mark.parametrize("error, code, status", [
    (RepositoryNotFound("repository 'x' not found"), "REPOSITORY_NOT_FOUND", 404),
    (FileNotFound("file 'x' not found"), "FILE_NOT_FOUND", 404),
    (InvalidGitRef("invalid git ref '-x'"), "INVALID_GIT_REF", 400),
    (InvalidArgument("page must be at least 1"), "INVALID_ARGUMENT", 400),
])
def test_errors_codes_and_pickle(error, code, status):
    assert isinstance(error, CodesearchError) and (error.error_code, error.status_code) == (code, status)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)


# ---------------------------------------------------------------------- refs and blobs


def test_git_dir_of(hist):
    assert git_dir_of(hist["repo"]) == os.path.join(hist["repo"], ".git")
    assert git_dir_of(hist["mirror"]) == hist["mirror"]


@pytest.mark.parametrize("ref, key", [("main", "c3"), ("refs/heads/main", "c3"), ("HEAD", "c3"), ("main~1", "c2"),
                                      ("main^^", "c1"), ("v1.0", "c1"), ("v1.0-ann", "c1"), ("refs/tags/v1.0-ann", "c1"),
                                      ("dev", "d1"), ("c2", "c2"), ("c2[:10]", "c2")])
@pytest.mark.parametrize("where", ["gd", "mirror"])
def test_resolve_commit(hist, ref, key, where):
    ref = hist["c2"] if ref == "c2" else hist["c2"][:10] if ref == "c2[:10]" else ref
    assert resolve_commit(hist[where], ref) == hist[key]


@pytest.mark.parametrize("ref", ["nope", "refs/heads/nope", "main~10", "0" * 40])
def test_resolve_commit_unknown(hist, ref):
    with pytest.raises(InvalidGitRef) as e:
        resolve_commit(hist["gd"], ref)
    assert str(e.value) == f"git ref {ref!r} not found in the repository"


def test_resolve_commit_refuses_a_tree(hist):
    tree = git(hist["repo"], "rev-parse", "main^{tree}").strip()
    with pytest.raises(InvalidGitRef):
        resolve_commit(hist["gd"], tree)


def test_not_a_repository_is_a_server_error(tmp_path):
    with pytest.raises(CodesearchError) as e:
        resolve_commit(str(tmp_path), "main")
    assert type(e.value) is CodesearchError and e.value.status_code == 500


@pytest.mark.parametrize("where", ["gd", "mirror"])
@pytest.mark.parametrize("ref, path, want", [
    ("main", "src/app.py", APP_V2.encode()), ("v1.0", "src/app.py", APP_V1.encode()),
    ("v1.0-ann", "old_name.txt", RENAMED_V1.encode()), ("main", "new_name.txt", RENAMED_V2.encode()),
    ("main~2", "gone.txt", b"only in the past: needle\n"), ("main", "no-newline.txt", b"a\nc"),
    ("v1.0", "data/blob.bin", BLOB_V1), ("main", "empty.txt", b""), ("main", "tab\there.txt", b"tab\n"),
    ("main", "ünï.txt", b"unicode\n"), ("main", "sp ace/b/f.txt", b"space two\n"), ("dev", "dev.txt", b"dev needle\n"),
])
def test_read_blob(hist, where, ref, path, want):
    data, sha = read_blob(hist[where], ref, path)
    assert data == want and sha == resolve_commit(hist[where], ref)


@pytest.mark.parametrize("ref, path, error", [
    ("main", "gone.txt", FileNotFound), ("main", "src", FileNotFound), ("main", "nope.txt", FileNotFound),
    ("withsub", "vendor/sub", FileNotFound), ("main", "../README.md", FileNotFound), ("main", "/etc/passwd", FileNotFound),
    ("main", "README.md\0", FileNotFound), ("nope", "README.md", InvalidGitRef), ("-x", "README.md", InvalidGitRef),
    ("main:README.md", "README.md", InvalidGitRef),
])
def test_read_blob_errors(hist, ref, path, error):
    with pytest.raises(error):
        read_blob(hist["gd"], ref, path)


def test_is_binary(hist):
    assert is_binary(read_blob(hist["gd"], "main", "data/blob.bin")[0])
    assert not is_binary(read_blob(hist["gd"], "main", "README.md")[0])
    assert not is_binary(b"x" * 8000 + b"\0")  # git's test: only the first 8000 bytes


# ---------------------------------------------------------------------- list_tree / list_files


def _tree(entries):
    return [("  " * (e.depth - 1)) + e.name + ("/" if e.is_dir else "") for e in entries]


MAIN_DEPTH_1 = ["data/", "docs/", "sp ace/", "src/", "README.md", "empty.txt", "long.txt", "new_name.txt",
                "no-newline.txt", 'q"uote.txt', "tab\there.txt", "zeta.txt", "ünï.txt"]
MAIN_ALL = ["data/", "  blob.bin", "docs/", "  manual.md", "sp ace/", "  b/", "    f.txt", "src/", "  lib/",
            "    deep/", "      x.txt", "    util.py", "  app.py", "  new.py", "README.md", "empty.txt", "long.txt",
            "new_name.txt", "no-newline.txt", 'q"uote.txt', "tab\there.txt", "zeta.txt", "ünï.txt"]


@pytest.mark.parametrize("where", ["gd", "mirror"])
def test_list_tree_order_and_depth(hist, where):
    entries, truncated = list_tree(hist[where], "main")
    assert _tree(entries) == MAIN_DEPTH_1 and not truncated
    assert all(e.depth == 1 and e.path == e.name for e in entries)
    entries, truncated = list_tree(hist[where], "main", depth=10)
    assert _tree(entries) == MAIN_ALL and not truncated
    assert TreeEntry("src/lib/deep/x.txt", "x.txt", False, 4) in entries
    assert TreeEntry("src/lib", "lib", True, 2) in entries
    entries, _ = list_tree(hist[where], "main", depth=2)
    assert _tree(entries) == [x for x in MAIN_ALL if not x.startswith("    ")]


@pytest.mark.parametrize("path", ["src", "src/"])
def test_list_tree_below_a_directory(hist, path):
    entries, truncated = list_tree(hist["gd"], "main", path, depth=5)
    assert [(e.path, e.depth) for e in entries] == [
        ("src/lib", 1), ("src/lib/deep", 2), ("src/lib/deep/x.txt", 3), ("src/lib/util.py", 2), ("src/app.py", 1),
        ("src/new.py", 1)]
    assert not truncated


@pytest.mark.parametrize("files, dirs, want", [
    (True, False, ["src/lib/deep/x.txt", "src/lib/util.py", "src/app.py", "src/new.py"]),
    (False, True, ["src/lib", "src/lib/deep"]),
    (False, False, []),
])
def test_list_tree_include_flags(hist, files, dirs, want):
    entries, truncated = list_tree(hist["gd"], "main", "src", depth=3, include_files=files, include_dirs=dirs)
    assert [e.path for e in entries] == want and not truncated


@pytest.mark.parametrize("n", [1, 5, len(MAIN_ALL) - 1, len(MAIN_ALL), len(MAIN_ALL) + 1])
def test_list_tree_max_entries(hist, n):
    entries, truncated = list_tree(hist["gd"], "main", depth=10, max_entries=n)
    assert _tree(entries) == MAIN_ALL[:n]
    assert truncated == (n < len(MAIN_ALL))


@pytest.mark.parametrize("where", ["gd", "mirror"])
def test_list_tree_at_other_refs(hist, where):
    at_tag, _ = list_tree(hist[where], "v1.0-ann")
    assert [e.name for e in at_tag if not e.is_dir] == ["README.md", "gone.txt", "long.txt", "no-newline.txt",
                                                        "old_name.txt", "zeta.txt"]
    at_sha, _ = list_tree(hist[where], hist["c1"])
    assert at_sha == at_tag
    dev, _ = list_tree(hist[where], "dev", "src/lib", depth=2)
    assert [e.path for e in dev] == ["src/lib/deep", "src/lib/deep/x.txt", "src/lib/util.py"]


def test_list_tree_lists_a_submodule_as_an_empty_directory(hist):
    entries, _ = list_tree(hist["gd"], "withsub", "vendor", depth=3)
    assert entries == [TreeEntry("vendor/sub", "sub", True, 1)]
    assert "vendor/sub" not in list_files(hist["gd"], "withsub")
    with pytest.raises(FileNotFound):
        list_tree(hist["gd"], "withsub", "vendor/sub")


@pytest.mark.parametrize("ref, path, error, message", [
    ("main", "README.md", FileNotFound, "is a file, not a directory"),
    ("main", "src/app.py", FileNotFound, "use read_file"),
    ("main", "nope", FileNotFound, "not found at 'main'"),
    ("main", "gone.txt/x", FileNotFound, "not found"),
    ("main", ":(top)src", FileNotFound, "not found"),
    ("main", "../src", FileNotFound, "relative to the repository root"),
    ("main", "/etc", FileNotFound, "relative"),
    ("main", "src//lib", FileNotFound, "relative"),
    ("main", "src\0", FileNotFound, "relative"),
    ("-x", "", InvalidGitRef, "invalid git ref"),
    ("a:b", "", InvalidGitRef, "invalid git ref"),
    ("nope", "", InvalidGitRef, "not found in the repository"),
])
@pytest.mark.parametrize("fn", [list_tree, list_files])
def test_list_errors(hist, fn, ref, path, error, message):
    with pytest.raises(error, match=re.escape(message)):
        fn(hist["gd"], ref, path)


@pytest.mark.parametrize("kw", [{"depth": 0}, {"max_entries": 0}, {"depth": True}])
def test_list_tree_bad_arguments(hist, kw):
    with pytest.raises(InvalidArgument):
        list_tree(hist["gd"], "main", **kw)


@pytest.mark.parametrize("where", ["gd", "mirror"])
def test_list_files(hist, where):
    assert list_files(hist[where], "main") == sorted([
        "README.md", "data/blob.bin", "docs/manual.md", "empty.txt", "long.txt", "new_name.txt", "no-newline.txt",
        'q"uote.txt', "sp ace/b/f.txt", "src/app.py", "src/lib/deep/x.txt", "src/lib/util.py", "src/new.py",
        "tab\there.txt", "zeta.txt", "ünï.txt"])
    assert list_files(hist[where], "main", "src/lib") == ["src/lib/deep/x.txt", "src/lib/util.py"]
    assert list_files(hist[where], "v1.0", "/") == list_files(hist[where], hist["c1"])
    assert "gone.txt" in list_files(hist[where], "v1.0")


def test_a_bare_repo_made_by_the_http_helper(tmp_path):
    bare = make_bare_repo(str(tmp_path), "acme/widgets.git", {"README.md": "hi\n", "src/w.py": "w = 1\n"},
                          branches={"feature": {"src/f.py": "f = 2\n"}}, tags=["v0.1"])
    assert git_dir_of(bare) == bare
    assert list_files(bare, "feature") == ["README.md", "src/f.py", "src/w.py"]
    assert [e.path for e in list_tree(bare, "v0.1", depth=2)[0]] == ["src", "src/w.py", "README.md"]
    assert read_blob(bare, "main", "src/w.py")[0] == b"w = 1\n"
    commits, total = list_commits(bare, "feature")
    assert total == 2 and [c.message for c in commits] == ["on feature", "initial"]
    assert commits[0].refs == ["feature"] and commits[1].refs == ["main", "v0.1"]


# ---------------------------------------------------------------------- parse_when

NOW = datetime(2024, 3, 31, 12, 0, 0, tzinfo=UTC)


def _utc(*a):
    return datetime(*a, tzinfo=UTC)


@pytest.mark.parametrize("text, want", [
    ("2024-01-31", _utc(2024, 1, 31)),
    ("2024-01-31T10:00:00Z", _utc(2024, 1, 31, 10)),
    ("2024-01-31t10:00:00z", _utc(2024, 1, 31, 10)),
    ("2024-01-31T10:00:00+02:00", _utc(2024, 1, 31, 8)),
    ("2024-01-31T10:00:00-05:30", _utc(2024, 1, 31, 15, 30)),
    ("2024-01-31 10:00", _utc(2024, 1, 31, 10)),
    ("2024-01-31T10:00:00.5Z", _utc(2024, 1, 31, 10, 0, 0, 500000)),
    ("  2024-01-31  ", _utc(2024, 1, 31)),
    ("now", NOW), ("NOW", NOW), ("today", _utc(2024, 3, 31)), ("yesterday", _utc(2024, 3, 30)),
    ("3 days ago", _utc(2024, 3, 28, 12)), ("3 days", _utc(2024, 3, 28, 12)), ("1 day", _utc(2024, 3, 30, 12)),
    ("a day ago", _utc(2024, 3, 30, 12)), ("an hour ago", _utc(2024, 3, 31, 11)), (" 7 DAYS AGO ", _utc(2024, 3, 24, 12)),
    ("2 weeks ago", _utc(2024, 3, 17, 12)), ("2w", _utc(2024, 3, 17, 12)), ("30d", _utc(2024, 3, 1, 12)),
    ("1 month ago", _utc(2024, 2, 29, 12)), ("6mo", _utc(2023, 9, 30, 12)), ("13 months", _utc(2023, 2, 28, 12)),
    ("1 year ago", _utc(2023, 3, 31, 12)), ("2y", _utc(2022, 3, 31, 12)), ("2 hours ago", _utc(2024, 3, 31, 10)),
    ("90 minutes", _utc(2024, 3, 31, 10, 30)), ("90min", _utc(2024, 3, 31, 10, 30)), ("45s", _utc(2024, 3, 31, 11, 59, 15)),
    ("10 secs ago", _utc(2024, 3, 31, 11, 59, 50)), ("3 hrs", _utc(2024, 3, 31, 9)), ("1 wk", _utc(2024, 3, 24, 12)),
])
def test_parse_when(text, want):
    got = parse_when(text, now=NOW)
    assert got == want and got.tzinfo is UTC


def test_parse_when_naive_now_is_utc_and_default_now_is_current():
    assert parse_when("1 day", now=datetime(2024, 1, 2)) == _utc(2024, 1, 1)
    before = datetime.now(UTC)
    assert before <= parse_when("now") <= datetime.now(UTC)


@pytest.mark.parametrize("text, message", [
    ("", "empty date"), ("   ", "empty date"), ("soon", "2024-01-31"), ("3 fortnights", "7 days ago"),
    ("6m", "'min' for minutes or 'mo' for months"), ("2024-13-01", "ISO 8601"), ("yesterday-ish", "cannot read"),
    ("99999999 years ago", "too far"), ("5 ago", "cannot read"), ("-3 days", "cannot read"), ("3 days later", "cannot read"),
])
def test_parse_when_refuses(text, message):
    with pytest.raises(InvalidArgument, match=re.escape(message)) as e:
        parse_when(text, now=NOW)
    assert (e.value.error_code, e.value.status_code) == ("INVALID_ARGUMENT", 400)


# ---------------------------------------------------------------------- list_commits


def _hashes(hist, commits):
    names = {hist[k]: k for k in ("c1", "c2", "c3", "d1", "s1")}
    return [names[c.hash] for c in commits]


@pytest.mark.parametrize("where", ["gd", "mirror"])
def test_list_commits_fields(hist, where):
    commits, total = list_commits(hist[where], "main")
    assert total == 3 and _hashes(hist, commits) == ["c3", "c2", "c1"]
    c3, c2, c1 = commits
    assert c2 == Commit(hash=hist["c2"], date="2024-02-15T12:30:00+02:00",
                        message='Fix "parser": handle ü, tabs\tand <angle> & 100% ampersands',
                        body="Body line 1\n  indented line, a \x1f unit separator\n\nFixes #12", refs=[],
                        author_name="Bob Jones", author_email="bob@example.org",
                        author_date="2024-02-15T12:30:00+02:00", decoration="")
    assert (c3.message, c3.body, c3.date, c3.author_name) == ("Add feature X", "", "2024-03-20T08:00:00+00:00",
                                                              "Alice Smith")
    assert c3.refs == ["main"]
    assert c1.refs == ["v1.0", "v1.0-ann"] and c1.message == "Initial import"


@pytest.mark.parametrize("where", ["gd", "mirror"])
@pytest.mark.parametrize("ref", ["main", "dev", "withsub", "v1.0"])
def test_list_commits_decoration_and_author_date_are_gits(hist, where, ref):
    """Differential: the short decoration and the author date are what ``git log`` prints."""
    commits, _ = list_commits(hist[where], ref)
    out = subprocess.run(["git", "--git-dir", hist[where], "-c", "log.decorate=short", "log", "--format=%H%x00%D%x00%aI",
                          ref], capture_output=True, text=True, check=True).stdout
    want = [tuple(line.split("\0")) for line in out.splitlines()]
    assert [(c.hash, c.decoration, c.author_date) for c in commits] == want
    assert any(c.decoration for c in commits)


@pytest.mark.parametrize("where", ["gd", "mirror"])
@pytest.mark.parametrize("ref, path", [
    ("main", "src/app.py"), ("main", "src"), ("main", "src/"), ("main", "/src"), ("main", "gone.txt"),
    ("main", "new_name.txt"), ("main", "old_name.txt"), ("main", "docs"), ("main", "sp ace"), ("main", "nope"),
    ("withsub", "vendor/sub"), ("dev", "dev.txt"), ("main", "*.txt"), ("main", "tab\there.txt"), ("main", ""),
])
def test_list_commits_path_equals_git_log(hist, where, ref, path):
    """Differential: `path` keeps the commits ``git log <ref> -- <path>`` lists (a literal path:
    ``*.txt`` is no glob)."""
    commits, total = list_commits(hist[where], ref, path=path)
    spec = [":(literal)" + path.strip("/")] if path.strip("/") else []
    out = subprocess.run(["git", "--git-dir", hist[where], "log", "--format=%H", ref, "--", *spec],
                         capture_output=True, text=True, check=True).stdout.split()
    assert [c.hash for c in commits] == out and total == len(out)


@pytest.mark.parametrize("where", ["gd", "mirror"])
@pytest.mark.parametrize("ref, path, page, per_page, want, total", [
    ("main", None, 1, 50, [(ALICE, 2), (BOB, 1)], 2),  # most commits first (GET /api/commits/authors)
    ("dev", None, 1, 50, [(ALICE, 1), (CAROL, 1)], 2),  # a tie: by name, as git shortlog sorts
    ("main", "src/new.py", 1, 50, [(BOB, 1)], 1),
    ("main", "src", 1, 50, [(ALICE, 2), (BOB, 1)], 2),
    ("main", "nowhere", 1, 50, [], 0),
    ("main", None, 2, 1, [(BOB, 1)], 2),
    ("main", None, 3, 1, [], 2),
])
def test_list_authors(hist, where, ref, path, page, per_page, want, total):
    authors, n = list_authors(hist[where], ref, path=path, page=page, per_page=per_page)
    assert authors == [Author(name=a[0], email=a[1], commit_count=k) for a, k in want] and n == total


@pytest.mark.parametrize("kwargs, error", [({"page": 0}, InvalidArgument), ({"per_page": 101}, InvalidArgument),
                                           ({"path": "../x"}, FileNotFound)])
def test_list_authors_refuses(hist, kwargs, error):
    with pytest.raises(error):
        list_authors(hist["gd"], "main", **kwargs)


def test_list_commits_path_with_paging_and_filters(hist):
    commits, total = list_commits(hist["gd"], "main", path="src", per_page=1, page=3)  # c3 made util.py executable
    assert _hashes(hist, commits) == ["c1"] and total == 3
    commits, total = list_commits(hist["gd"], "main", path="src/new.py", per_page=1)
    assert _hashes(hist, commits) == ["c2"] and total == 1
    commits, total = list_commits(hist["gd"], "main", path="src", author="bob")
    assert _hashes(hist, commits) == ["c2"] and total == 1


@pytest.mark.parametrize("path", ["../x", "src/../x", "a//b", "x\0y", "./src", "src/./app.py"])
def test_list_commits_refuses_paths_outside(hist, path):
    with pytest.raises(FileNotFound, match="relative to the repository root"):
        list_commits(hist["gd"], "main", path=path)
    with pytest.raises(FileNotFound, match="relative to the repository root"):
        diff(hist["gd"], "v1.0", "main", path=path)


@pytest.mark.parametrize("ref, want", [
    ("dev", ["d1", "c1"]), ("v1.0", ["c1"]), ("v1.0-ann", ["c1"]), ("main~1", ["c2", "c1"]), ("withsub", ["s1", "c3", "c2", "c1"]),
])
def test_list_commits_at_refs(hist, ref, want):
    commits, total = list_commits(hist["gd"], ref)
    assert _hashes(hist, commits) == want and total == len(want)


@pytest.mark.parametrize("kw, want", [
    ({"query": 'FIX "PARSER"'}, ["c2"]),
    ({"query": "ü, tabs\tand"}, ["c2"]),
    ({"query": "fixes #12"}, ["c2"]),  # the body is searched too
    ({"query": "feature"}, ["c3"]),
    ({"query": ".*"}, []),  # a substring, not a regex
    ({"query": "100%"}, ["c2"]),
    ({"query": "-x"}, []),
    ({"author": "alice"}, ["c3", "c1"]),
    ({"author": "BOB@EXAMPLE.ORG"}, ["c2"]),
    ({"author": "Jones"}, ["c2"]),
    ({"author": "a.ice"}, []),  # not a regex
    ({"author": "--all"}, []),
    ({"query": "import", "author": "alice"}, ["c1"]),
    ({"query": "import", "author": "bob"}, []),
    ({"since": "2024-02-01"}, ["c3", "c2"]),
    ({"since": "2024-02-15T10:30:00Z"}, ["c3", "c2"]),  # inclusive: c2 is at 10:30 UTC
    ({"since": "2024-02-15T10:30:01Z"}, ["c3"]),
    ({"until": "2024-02-15"}, ["c2", "c1"]),  # a whole day
    ({"until": "2024-02-15T10:30:00Z"}, ["c2", "c1"]),
    ({"until": "2024-02-15T10:29:59Z"}, ["c1"]),
    ({"until": "2024-02-15T12:29:59+02:00"}, ["c1"]),
    ({"since": "2024-01-10", "until": "2024-01-10"}, ["c1"]),
    ({"since": "2024-01-11", "until": "2024-03-19"}, ["c2"]),
    ({"since": "100 years ago"}, ["c3", "c2", "c1"]),
    ({"since": "1 day ago"}, []),
    ({"since": "1900-01-01"}, ["c3", "c2", "c1"]),  # dates git cannot handle (before 1970, after 2099)
    ({"until": "2200-01-01"}, ["c3", "c2", "c1"]),
    ({"until": "1969-12-31"}, []),
    ({"since": "2150-01-01"}, []),
    ({"until": "yesterday", "author": "ALICE SMITH <alice@"}, ["c3", "c1"]),
])
def test_list_commits_filters(hist, kw, want):
    commits, total = list_commits(hist["gd"], "main", **kw)
    assert _hashes(hist, commits) == want and total == len(want)


@pytest.mark.parametrize("page, per_page, want", [
    (1, 2, ["c3", "c2"]), (2, 2, ["c1"]), (3, 2, []), (1, 100, ["c3", "c2", "c1"]), (2, 1, ["c2"]), (99, 1, []),
])
def test_list_commits_paging(hist, page, per_page, want):
    commits, total = list_commits(hist["mirror"], "main", page=page, per_page=per_page)
    assert _hashes(hist, commits) == want and total == 3


def test_list_commits_paging_with_a_filter(hist):
    commits, total = list_commits(hist["gd"], "withsub", author="a", page=2, per_page=2)  # every author has an 'a'
    assert _hashes(hist, commits) == ["c2", "c1"] and total == 4


@pytest.mark.parametrize("kw, error", [
    ({"page": 0}, InvalidArgument), ({"page": -1}, InvalidArgument), ({"per_page": 0}, InvalidArgument),
    ({"per_page": 101}, InvalidArgument), ({"per_page": True}, InvalidArgument), ({"page": "1"}, InvalidArgument),
    ({"since": "soon"}, InvalidArgument), ({"until": "6m"}, InvalidArgument), ({"query": "a\0b"}, InvalidArgument),
    ({"author": "a\0b"}, InvalidArgument), ({"ref": "-x"}, InvalidGitRef), ({"ref": "a:b"}, InvalidGitRef),
    ({"ref": "nope"}, InvalidGitRef), ({"ref": "--all"}, InvalidGitRef),
])
def test_list_commits_errors(hist, kw, error):
    ref = kw.pop("ref", "main")
    with pytest.raises(error):
        list_commits(hist["gd"], ref, **kw)


# ---------------------------------------------------------------------- branches


def _git_branches(git_dir: str) -> list[Branch]:
    """The oracle: each branch's name and head from ``git for-each-ref``, its date from
    ``git log -1``, ordered newest first then by name in Python."""
    refs = subprocess.run(["git", "--git-dir", git_dir, "for-each-ref", "--format=%(refname:lstrip=2) %(objectname)",
                           "refs/heads"], capture_output=True, text=True, check=True).stdout.splitlines()
    out = []
    for line in refs:
        name, sha = line.rsplit(" ", 1)
        when = subprocess.run(["git", "--git-dir", git_dir, "log", "-1", "--format=%cI", sha], capture_output=True,
                              text=True, check=True).stdout.strip()
        out.append(Branch(name, sha, when))
    out.sort(key=lambda b: b.name)
    out.sort(key=lambda b: datetime.fromisoformat(b.committed_at), reverse=True)
    return out


@pytest.mark.parametrize("where", ["gd", "mirror"])
def test_list_branches_equals_git(hist, where):
    got = list_branches(hist[where])
    assert got == _git_branches(hist[where])
    assert [b.name for b in got] == ["main", "dev", "withsub"]  # c3 2024-03-20, d1 2024-01-20, s1 2024-01-01
    assert got[0] == Branch("main", hist["c3"], got[0].committed_at)
    assert datetime.fromisoformat(got[0].committed_at) == datetime(2024, 3, 20, 8, tzinfo=UTC)


def test_list_branches_ties_by_name_and_slashes(tmp_path):
    bare = make_bare_repo(str(tmp_path), "r.git", {"a.txt": "a\n"},
                          branches={"zeta": {"z.txt": "z\n"}, "release/1.0": {"r.txt": "r\n"}, "alpha": {"b.txt": "b\n"}})
    got = list_branches(bare)
    assert [b.name for b in got] == ["alpha", "main", "release/1.0", "zeta"]  # one date: by name
    assert got == _git_branches(bare)


def test_head_branch(hist, tmp_path):
    assert head_branch(hist["gd"]) == head_branch(hist["mirror"]) == "main"
    detached = str(tmp_path / "d")
    subprocess.run(["git", "clone", "-q", hist["repo"], detached], check=True, capture_output=True)
    git(detached, "checkout", "-q", "--detach", "HEAD")
    assert head_branch(git_dir_of(detached)) is None


# ---------------------------------------------------------------------- diff

GOLDEN_C1_C2 = """\
diff --git a/data/blob.bin b/data/blob.bin
Binary files a/data/blob.bin and b/data/blob.bin differ
diff --git a/gone.txt b/gone.txt
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-only in the past: needle
diff --git a/old_name.txt b/new_name.txt
rename from old_name.txt
rename to new_name.txt
--- a/old_name.txt
+++ b/new_name.txt
@@ -1,6 +1,6 @@
 one
 two
 three
-four
+FOUR
 five
 six
diff --git a/no-newline.txt b/no-newline.txt
--- a/no-newline.txt
+++ b/no-newline.txt
@@ -1,2 +1,2 @@
 a
-b
\\ No newline at end of file
+c
\\ No newline at end of file
diff --git a/src/app.py b/src/app.py
--- a/src/app.py
+++ b/src/app.py
@@ -6,6 +6,6 @@ def main():
     b = 2
     c = 3
     d = 4
-    e = 5
+    e = 50
     f = 6
     return a + b
diff --git a/src/new.py b/src/new.py
--- /dev/null
+++ b/src/new.py
@@ -0,0 +1,2 @@
+def new():
+    return 'needle'
"""


def _git_diff_text(repo: str, base: str, head: str, *paths: str) -> str:
    """`git diff` itself, without the lines render_unified does not keep."""
    out = git(repo, "-c", "core.quotePath=false", "diff", "--no-color", "-M", base, head,
              *(["--", *paths] if paths else []))
    skip = ("index ", "new file mode", "deleted file mode", "old mode", "new mode", "similarity index")
    return "".join(line for line in out.splitlines(keepends=True) if not line.startswith(skip))


@pytest.mark.parametrize("where", ["gd", "mirror"])
def test_diff_structure(hist, where):
    files, truncated = diff(hist[where], "v1.0", "main~1")
    assert not truncated
    assert [(f.old_path, f.new_path, f.status, f.binary) for f in files] == [
        ("data/blob.bin", "data/blob.bin", "modified", True),
        ("gone.txt", None, "deleted", False),
        ("old_name.txt", "new_name.txt", "renamed", False),  # git orders files by their new path
        ("no-newline.txt", "no-newline.txt", "modified", False),
        ("src/app.py", "src/app.py", "modified", False),
        (None, "src/new.py", "added", False),
    ]
    assert files[0].hunks == []
    assert files[1].hunks == [Hunk(1, 1, 0, 0, "", ["-only in the past: needle"])]
    assert files[3].hunks == [Hunk(1, 2, 1, 2, "", [" a", "-b", "\\ No newline at end of file", "+c",
                                                      "\\ No newline at end of file"])]
    assert files[4].hunks == [Hunk(6, 6, 6, 6, "def main():", ["     b = 2", "     c = 3", "     d = 4", "-    e = 5",
                                                                 "+    e = 50", "     f = 6", "     return a + b"])]
    assert files[5].hunks == [Hunk(0, 0, 1, 2, "", ["+def new():", "+    return 'needle'"])]


def test_render_unified_golden(hist):
    files, _ = diff(hist["gd"], hist["c1"], hist["c2"])
    assert render_unified(files) == GOLDEN_C1_C2
    assert render_unified(files) == _git_diff_text(hist["repo"], hist["c1"], hist["c2"])


def test_diff_odd_paths_pure_renames_mode_changes(hist):
    files, truncated = diff(hist["gd"], "main~1", "main")
    assert not truncated
    assert [(f.old_path, f.new_path, f.status, len(f.hunks)) for f in files] == [
        ("docs/guide.md", "docs/manual.md", "renamed", 0),
        (None, "empty.txt", "added", 0),
        (None, 'q"uote.txt', "added", 1),
        ("sp ace/b/f.txt", "sp ace/b/f.txt", "modified", 1),
        ("src/lib/util.py", "src/lib/util.py", "modified", 0),  # chmod +x only
        (None, "tab\there.txt", "added", 1),
        (None, "ünï.txt", "added", 1),
    ]
    text = render_unified(files)
    assert 'diff --git "a/q\\"uote.txt" "b/q\\"uote.txt"\n--- /dev/null\n+++ "b/q\\"uote.txt"\n' in text
    assert '+++ "b/tab\\there.txt"\n' in text
    assert "diff --git a/docs/guide.md b/docs/manual.md\nrename from docs/guide.md\nrename to docs/manual.md\n" in text
    assert "diff --git a/empty.txt b/empty.txt\n--- /dev/null\n+++ b/empty.txt\ndiff" in text
    git_text = _git_diff_text(hist["repo"], "main~1", "main")
    # git prints no ---/+++ for an empty new file, and a tab after names with a space
    assert text.replace("--- /dev/null\n+++ b/empty.txt\n", "") == git_text.replace("\t\n", "\n")


def test_diff_reversed_and_empty(hist):
    files, _ = diff(hist["gd"], "main~1", "v1.0")
    assert [(f.old_path, f.new_path, f.status) for f in files if f.status != "modified"] == [
        (None, "gone.txt", "added"), ("new_name.txt", "old_name.txt", "renamed"), ("src/new.py", None, "deleted")]
    assert render_unified(files) == _git_diff_text(hist["repo"], "main~1", "v1.0")
    assert diff(hist["gd"], "main", hist["c3"]) == ([], False)
    assert render_unified([]) == ""


@pytest.mark.parametrize("base, head, path, files", [
    ("v1.0", "main~1", "src", [("src/app.py", "src/app.py", "modified"), (None, "src/new.py", "added")]),
    ("v1.0", "main~1", "src/app.py", [("src/app.py", "src/app.py", "modified")]),
    ("v1.0", "main~1", "gone.txt", [("gone.txt", None, "deleted")]),
    ("v1.0", "main~1", "new_name.txt", [(None, "new_name.txt", "added")]),  # the rename's other side is outside
    ("v1.0", "main~1", "old_name.txt", [("old_name.txt", None, "deleted")]),
    ("v1.0", "main", "docs", [("docs/guide.md", "docs/manual.md", "renamed")]),  # both sides inside: a rename
    ("v1.0", "main", "docs/", [("docs/guide.md", "docs/manual.md", "renamed")]),
    ("v1.0", "main", "nope", []),
    ("dev", "main", "dev.txt", [("dev.txt", None, "deleted")]),
    ("dev", "main", "src/lib", [("src/lib/util.py", "src/lib/util.py", "modified")]),  # a mode change only
])
def test_diff_with_a_path_equals_git_diff(hist, base, head, path, files):
    """Differential: `path` keeps what ``git diff <base> <head> -- <path>`` shows."""
    got, truncated = diff(hist["mirror"], base, head, path=path)
    assert not truncated
    assert [(f.old_path, f.new_path, f.status) for f in got] == files
    assert render_unified(got) == _git_diff_text(hist["repo"], base, head, path)


@pytest.mark.parametrize("path", [None, "", "/", "."])
def test_diff_without_a_path_is_everything(hist, path):
    assert diff(hist["gd"], "dev", "main", path=path) == diff(hist["gd"], "dev", "main")


def test_diff_between_branches(hist):
    files, _ = diff(hist["mirror"], "dev", "main")
    paths = {f.new_path or f.old_path: f.status for f in files}
    assert paths["dev.txt"] == "deleted" and paths["src/new.py"] == "added"


@pytest.mark.parametrize("base, head, error", [
    ("-x", "main", InvalidGitRef), ("main", "--output=/tmp/pwned", InvalidGitRef), ("main", "nope", InvalidGitRef),
    ("a:b", "main", InvalidGitRef), ("main", "", InvalidGitRef),
])
def test_diff_bad_refs(hist, base, head, error):
    with pytest.raises(error):
        diff(hist["gd"], base, head)
    assert not os.path.exists("/tmp/pwned")


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    repo = str(tmp_path_factory.mktemp("bigdiff"))
    git(repo, "init", "-q", "-b", "main")
    first = commit(repo, "base\n", "2024-01-01T00:00:00Z", files={f"f{i}.txt": "old\n" for i in range(5)})
    commit(repo, "big\n", "2024-01-02T00:00:00Z", files={
        **{f"f{i}.txt": "new\n" for i in range(5)}, "z_big.txt": "".join(f"line {n}\n" for n in range(50_000))})
    return repo, first


@pytest.mark.parametrize("max_files, n, truncated", [(1, 1, True), (5, 5, True), (6, 6, False), (300, 6, False)])
def test_diff_max_files(big, max_files, n, truncated):
    repo, first = big
    files, cut = diff(git_dir_of(repo), first, "main", max_files=max_files)
    assert len(files) == n and cut == truncated
    assert [f.new_path for f in files] == [f"f{i}.txt" for i in range(5)][:n] + (["z_big.txt"] if n == 6 else [])


def test_diff_max_bytes(big):
    repo, first = big
    files, cut = diff(git_dir_of(repo), first, "main")
    assert not cut and len(files[-1].hunks[0].lines) == 50_000
    files, cut = diff(git_dir_of(repo), first, "main", max_bytes=10_000)
    assert cut and [f.new_path for f in files] == [f"f{i}.txt" for i in range(5)] + ["z_big.txt"]
    assert files[0].hunks == [Hunk(1, 1, 1, 1, "", ["-old", "+new"])]
    assert files[-1].hunks == []  # its only hunk was cut: left out
    files, cut = diff(git_dir_of(repo), first, "main", max_bytes=100)
    assert cut and len(files) <= 1


@pytest.mark.parametrize("kw", [{"max_files": 0}, {"max_bytes": 0}])
def test_diff_bad_caps(hist, kw):
    with pytest.raises(InvalidArgument):
        diff(hist["gd"], "v1.0", "main", **kw)


def test_render_unified_of_hand_made_diffs():
    files = [
        FileDiff("a.txt", "a.txt", "modified", False, [Hunk(1, 1, 1, 2, "", [" x", "+y"]),
                                                        Hunk(10, 3, 11, 3, "class A:", [" p", "-q", "+r", " s"])]),
        FileDiff(None, "img.png", "added", True, []),
        FileDiff("old.bin", None, "deleted", True, []),
    ]
    assert render_unified(files) == (
        "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n x\n+y\n@@ -10,3 +11,3 @@ class A:\n"
        " p\n-q\n+r\n s\n"
        "diff --git a/img.png b/img.png\nBinary files /dev/null and b/img.png differ\n"
        "diff --git a/old.bin b/old.bin\nBinary files a/old.bin and /dev/null differ\n")


# ---------------------------------------------------------------------- grep


def _hits(found):
    return [(h.path, h.line) for h in found]


@pytest.mark.parametrize("where", ["gd", "mirror"])
@pytest.mark.parametrize("kw, want", [
    ({}, [("docs/manual.md", 3), ("long.txt", 1), ("src/lib/deep/x.txt", 1), ("src/lib/util.py", 2),
          ("src/new.py", 2)]),
    ({"include": "*.py"}, [("src/lib/util.py", 2), ("src/new.py", 2)]),
    ({"include": "**.py"}, [("src/lib/util.py", 2), ("src/new.py", 2)]),  # no git pathspec: filtered here
    ({"include": "src/**/*.py"}, [("src/lib/util.py", 2), ("src/new.py", 2)]),
    ({"include": "src/*.py"}, [("src/new.py", 2)]),
    ({"include": "*.{txt,md}"}, [("docs/manual.md", 3), ("long.txt", 1), ("src/lib/deep/x.txt", 1)]),
    ({"include": "{docs,src/lib}/**"}, [("docs/manual.md", 3), ("src/lib/deep/x.txt", 1), ("src/lib/util.py", 2)]),
    ({"include": "[lx]*.txt"}, [("long.txt", 1), ("src/lib/deep/x.txt", 1)]),
    ({"path": "src"}, [("src/lib/deep/x.txt", 1), ("src/lib/util.py", 2), ("src/new.py", 2)]),
    ({"path": "src/lib/"}, [("src/lib/deep/x.txt", 1), ("src/lib/util.py", 2)]),
    ({"path": "src", "include": "*.txt"}, [("src/lib/deep/x.txt", 1)]),
    ({"path": "src", "include": "lib/*.py"}, [("src/lib/util.py", 2)]),
    ({"path": "src", "include": "new.py"}, [("src/new.py", 2)]),
    ({"include": "nothing.*"}, []),
    ({"max_files": 2}, [("docs/manual.md", 3), ("long.txt", 1)]),
])
def test_grep_scopes(hist, where, kw, want):
    found, truncated = grep(hist[where], "main", "needle", **kw)
    assert _hits(found) == want
    assert truncated == ("max_files" in kw)


def test_grep_at_refs_and_text(hist):
    found, truncated = grep(hist["gd"], "v1.0-ann", r"needle\b", include="*.txt")
    assert _hits(found) == [("gone.txt", 1), ("long.txt", 1), ("src/lib/deep/x.txt", 1)] and not truncated
    assert found[0] == GrepHit("gone.txt", 1, "only in the past: needle")
    assert len(found[1].text) == 2000 and found[1].text.startswith("needle xxx")
    assert _hits(grep(hist["gd"], "dev", "needle", include="dev.*")[0]) == [("dev.txt", 1)]
    assert _hits(grep(hist["gd"], hist["c2"], "^    e = \\d+$")[0]) == [("src/app.py", 9)]


def test_grep_case_binary_and_paths(hist):
    assert _hits(grep(hist["gd"], "main", "hello")[0]) == [("README.md", 1)]
    assert _hits(grep(hist["gd"], "main", "hello", case_sensitive=False)[0]) == [("README.md", 1), ("README.md", 2)]
    assert grep(hist["gd"], "main", "\\x00\\x01")[0] == []  # binary files are skipped
    assert _hits(grep(hist["gd"], "main", "^(tab|unicode|quote)$")[0]) == [
        ('q"uote.txt', 1), ("tab\there.txt", 1), ("ünï.txt", 1)]
    assert _hits(grep(hist["gd"], "main", "space", path="sp ace")[0]) == [("sp ace/b/f.txt", 1)]


def test_grep_max_hits(hist):
    found, truncated = grep(hist["gd"], "main", "=", max_hits=3)
    assert len(found) == 3 and truncated


@pytest.mark.parametrize("pattern, kw, error, message", [
    ("a(", {}, InvalidArgument, "invalid regular expression 'a(': "),
    ("[z-a]", {}, InvalidArgument, "invalid regular expression"),
    ("", {}, InvalidArgument, "empty"),
    ("a\nb", {}, InvalidArgument, "one line"),
    ("a\0b", {}, InvalidArgument, "one line"),
    ("x", {"max_files": 0}, InvalidArgument, "max_files"),
    ("x", {"include": ""}, InvalidArgument, "include"),
    ("x", {"ref": "-x"}, InvalidGitRef, "invalid git ref"),
    ("x", {"ref": "main:README.md"}, InvalidGitRef, "invalid git ref"),
    ("x", {"ref": "nope"}, InvalidGitRef, "not found in the repository"),
    ("x", {"path": "../x"}, FileNotFound, "relative"),
    ("x", {"path": "/etc"}, FileNotFound, "relative"),
    ("x", {"path": "README.md"}, FileNotFound, "is a file"),
    ("x", {"path": "nope"}, FileNotFound, "not found at 'main'"),
])
def test_grep_errors(hist, pattern, kw, error, message):
    ref = kw.pop("ref", "main")
    with pytest.raises(error, match=re.escape(message)) as e:
        grep(hist["gd"], ref, pattern, **kw)
    assert "fatal" not in str(e.value) and "Traceback" not in str(e.value)


def test_grep_pattern_that_looks_like_an_option(hist):
    assert grep(hist["gd"], "main", "--output=x")[0] == []
    assert grep(hist["gd"], "main", "-e")[0] == []


# ---------------------------------------------------------------------- process handling


def test_list_tree_reads_only_the_trees_it_shows(hist, monkeypatch):
    asked = []
    real = ObjectBatch.get

    def spy(self, name):
        asked.append(name)
        return real(self, name)

    monkeypatch.setattr(ObjectBatch, "get", spy)
    entries, truncated = list_tree(hist["gd"], "main", depth=10, max_entries=2)
    assert _tree(entries) == ["data/", "  blob.bin"] and truncated
    assert len(asked) == 2  # the root and data/, not docs/, src/, …
    asked.clear()
    assert list_tree(hist["gd"], "main", "src", include_files=False, include_dirs=False) == ([], False)
    assert asked == []
    with pytest.raises(FileNotFound, match="is a file"):
        list_tree(hist["gd"], "main", "README.md", include_files=False, include_dirs=False)


def test_grep_strips_carriage_returns(tmp_path):
    repo = str(tmp_path)
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "crlf\n", "2024-01-01T00:00:00Z", files={"w.txt": b"one needle\r\ntwo\r\n"})
    assert grep(git_dir_of(repo), "main", "needle")[0] == [GrepHit("w.txt", 1, "one needle")]


def test_grep_falls_back_to_extended_regexes_without_pcre(hist, tmp_path, monkeypatch):
    """A git built without PCRE refuses -P: grep then uses -E (and keeps using it)."""
    real_git = shutil.which("git")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do if [ "$a" = "-P" ]; then\n'
        "  echo 'fatal: cannot use Perl-compatible regexes when not compiled with USE_LIBPCRE' >&2; exit 128\n"
        "fi; done\n"
        f'exec {real_git} "$@"\n')
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gitgrep, "_pcre_missing", False)
    assert _hits(grep(hist["gd"], "main", "need[l]e", include="*.py")[0]) == [("src/lib/util.py", 2), ("src/new.py", 2)]
    assert gitgrep._pcre_missing
    with pytest.raises(InvalidArgument, match=re.escape("invalid regular expression 'a(': ")):
        grep(hist["gd"], "main", "a(")
