"""The one ref grammar (`codesearch.git.paths.parse_ref`), the resolution that follows it
(`objects.resolve_commit`) and how a cut diff is described (`diff.FileDiff.cut`, its counts,
`diff.count_files`), against small real repositories; no service, no Ray (issue 24, items 1
and 8; tests/service/test_security_git_refs.py checks the same through HTTP).

Why a grammar: git reads a ref as a revision expression, and some expressions are work chosen
by the caller (``^{/regex}`` runs a backtracking regex over every commit message), reach what
is not a branch or a tag (``@{…}`` reflogs, ``FETCH_HEAD``), or resolve to something that is
not a commit (``^main`` is ``^<sha>``).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from codesearch.errors import InvalidGitRef, MalformedGitRef
from codesearch.git.diff import count_files, diff_objects
from codesearch.git.objects import resolve_commit
from codesearch.git.paths import MAX_REF_GENERATIONS, MAX_REF_SUFFIXES, RefSpec, check_ref, git_dir_of, parse_ref
from tests.histworld import commit, git, write

# ---------------------------------------------------------------------- the grammar

#: (ref, kind, base, suffix) of refs the grammar accepts
ACCEPTED = [
    ("main", "name", "main", ""),
    ("release/1.0", "name", "release/1.0", ""),
    ("v1.0", "name", "v1.0", ""),
    ("a@b", "name", "a@b", ""),  # '@' is fine, '@{' is not
    ("ünï/cödé", "name", "ünï/cödé", ""),
    ("100%", "name", "100%", ""),
    ("a#b", "name", "a#b", ""),
    ("a+b&c=d", "name", "a+b&c=d", ""),
    ("semi;colon", "name", "semi;colon", ""),
    ("a{b}", "name", "a{b}", ""),
    ("x" * 1024, "name", "x" * 1024, ""),
    ("refs/heads/main", "full", "refs/heads/main", ""),
    ("refs/tags/v1.0", "full", "refs/tags/v1.0", ""),
    ("refs/heads/-dash", "full", "refs/heads/-dash", ""),  # the way to name a branch with a leading dash
    ("refs/heads/--x/-y", "full", "refs/heads/--x/-y", ""),
    ("HEAD", "head", "HEAD", ""),
    ("abcd", "hex", "abcd", ""),
    ("0123ABCD", "hex", "0123ABCD", ""),
    ("a" * 40, "hex", "a" * 40, ""),
    ("b" * 64, "hex", "b" * 64, ""),
    ("a" * 41, "name", "a" * 41, ""),  # too long for an object name: only a name
    ("abc", "name", "abc", ""),  # too short for one
    ("main~1", "name", "main", "~1"),
    ("main~", "name", "main", "~"),
    ("main^", "name", "main", "^"),
    ("main^^", "name", "main", "^^"),
    ("main^2", "name", "main", "^2"),
    ("v1.0~0", "name", "v1.0", "~0"),
    ("HEAD~3^2~1", "head", "HEAD", "~3^2~1"),
    ("refs/tags/v1.0~2", "full", "refs/tags/v1.0", "~2"),
    (f"main~{MAX_REF_GENERATIONS}", "name", "main", f"~{MAX_REF_GENERATIONS}"),
    ("main" + "^" * MAX_REF_SUFFIXES, "name", "main", "^" * MAX_REF_SUFFIXES),
]


@pytest.mark.parametrize("ref, kind, base, suffix", ACCEPTED, ids=[a[0][:30] for a in ACCEPTED])
def test_the_grammar_accepts(ref, kind, base, suffix):
    assert parse_ref(ref) == RefSpec(kind, base, suffix)
    assert check_ref(ref) == ref


#: (ref, what the message says is wrong) of refs the grammar refuses
REFUSED = [
    ("", "it is empty"),
    (r"main^{/(.*)*(.*)*(.*)*(.*)*\1\2\3\4#}", "only ~N and ^N steps may follow the name"),
    ("main^{/fix}", "only ~N and ^N steps"),
    ("main^{commit}", "only ~N and ^N steps"),
    ("main^{}", "only ~N and ^N steps"),
    ("main^!", "only ~N and ^N steps"),
    ("main^@", "only ~N and ^N steps"),
    ("main^-1", "only ~N and ^N steps"),
    ("main~x", "only ~N and ^N steps"),
    ("^main", "it starts with '^'"),
    ("~1", "it starts with '~'"),
    ("main@{1}", "'@{' (reflog syntax)"),
    ("main@{upstream}", "'@{' (reflog syntax)"),
    ("@{-1}", "'@{' (reflog syntax)"),
    ("@", "'@' alone"),
    (":/fix", "':' is not allowed"),
    ("main:README.md", "':' is not allowed"),
    ("HEAD:README.md", "':' is not allowed"),
    ("main..dev", "'..' (a range)"),
    ("main...dev", "'..' (a range)"),
    ("ma*n", "'*' is not allowed"),
    ("ma?n", "'?' is not allowed"),
    ("ma[i]n", "'[' is not allowed"),
    ("ma\\in", "'\\\\' is not allowed"),
    ("a b", "' ' is not allowed"),
    ("a\tb", "control character"),
    ("a\nb", "control character"),
    ("a\rb", "control character"),
    ("a\0b", "control character"),
    ("a\x7fb", "control character"),
    ("-x", "it starts with '-' (for a branch of that name, give refs/heads/-x)"),
    ("--output=/tmp/x", "it starts with '-'"),
    ("/main", "empty part"),
    ("main/", "empty part"),
    ("a//b", "empty part"),
    ("refs/heads/", "empty part"),
    (".hidden", "cannot start with '.'"),
    ("a/.b", "cannot start with '.'"),
    ("main.", "cannot end with '.'"),
    ("x.lock", "'.lock'"),
    ("a.lock/b", "'.lock'"),
    ("refs/remotes/origin/main", "only branches (refs/heads/…) and tags (refs/tags/…)"),
    ("refs/pull/1/head", "only branches"),
    ("refs/heads", "only branches"),
    (f"main~{MAX_REF_GENERATIONS + 1}", "more than 10,000 generations"),
    ("main~5000~5001", "more than 10,000 generations"),
    ("main^99999999999999999999", "more than 10,000 generations"),
    ("main" + "^" * (MAX_REF_SUFFIXES + 1), f"more than {MAX_REF_SUFFIXES} ~N / ^N steps"),
    ("x" * 1025, "longer than 1024 characters"),
    ("a\ud800", "not valid Unicode text"),
]


@pytest.mark.parametrize("ref, why", REFUSED, ids=[repr(r[0][:30]) for r in REFUSED])
def test_the_grammar_refuses_saying_why_and_what_is_accepted(ref, why):
    with pytest.raises(MalformedGitRef) as e:
        check_ref(ref)
    message = str(e.value)
    assert message.startswith("invalid git ref ") and why in message, message
    assert "give a branch or tag name" in message and "HEAD" in message and "~N or ^N" in message
    assert isinstance(e.value, InvalidGitRef) and (e.value.error_code, e.value.status_code) == ("INVALID_GIT_REF", 400)


# ---------------------------------------------------------------------- resolution


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """c1 ← c2 ← c3 on main; a tag and a branch both named ``twin`` (at c1 and c2); a branch
    named like c3's short sha (at c1); ``-dash`` at c2; a remote-tracking ref and ORIG_HEAD (at
    c1), which a caller may not name; a merge on ``merged`` (parents c3, side)."""
    root = str(tmp_path_factory.mktemp("refs") / "repo")
    os.makedirs(root)
    git(root, "init", "-q", "-b", "main")
    shas = {}
    for n in (1, 2, 3):
        write(root, {"f.txt": f"{n}\n"})
        shas[f"c{n}"] = commit(root, f"commit {n}")
    git(root, "tag", "twin", shas["c1"])
    git(root, "branch", "twin", shas["c2"])
    git(root, "branch", shas["c3"][:7], shas["c1"])
    git(root, "update-ref", "refs/heads/-dash", shas["c2"])
    git(root, "update-ref", "refs/remotes/origin/main", shas["c1"])
    git(root, "update-ref", "ORIG_HEAD", shas["c1"])
    git(root, "checkout", "-q", "-b", "side", shas["c1"])
    write(root, {"side.txt": "side\n"})
    shas["side"] = commit(root, "side")
    git(root, "checkout", "-q", "-b", "merged", shas["c3"])
    git(root, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    shas["merge"] = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "main")
    return {"gd": git_dir_of(root), **shas}


@pytest.mark.parametrize("ref, want", [
    ("main", "c3"), ("refs/heads/main", "c3"), ("HEAD", "c3"), ("main~1", "c2"), ("main^", "c2"), ("main~2", "c1"),
    ("main^^", "c1"), ("main~0", "c3"), ("HEAD~1^0", "c2"),
    ("twin", "c1"),  # a tag and a branch of one name: the tag, as git reads it
    ("refs/heads/twin", "c2"), ("refs/tags/twin", "c1"),
    ("refs/heads/-dash", "c2"),
    ("merged^2", "side"), ("merged^1", "c3"),
    ("<c2>", "c2"), ("<c2:8>", "c2"),
    ("<c3:7>", "c1"),  # a branch named like a short sha wins over the object (as in git) ...
    ("<c3>", "c3"),  # ... but never over a full object name
])
def test_resolution_names_what_git_names(repo, ref, want):
    for key in ("c2", "c3"):
        ref = ref.replace(f"<{key}>", repo[key]).replace(f"<{key}:8>", repo[key][:8]).replace(f"<{key}:7>",
                                                                                               repo[key][:7])
    assert resolve_commit(repo["gd"], ref) == repo[want]


@pytest.mark.parametrize("ref", ["origin/main", "ORIG_HEAD", "remotes/origin/main", "heads/main", "nope", "main~3",
                                 "merged^3", "0" * 40])
def test_resolution_reads_nothing_but_branches_tags_head_and_objects(repo, ref):
    """Names git itself would find (a remote-tracking branch, a pseudo-ref, ``heads/main``) are
    not read: only refs/heads/, refs/tags/, HEAD and object names are."""
    with pytest.raises(InvalidGitRef) as e:
        resolve_commit(repo["gd"], ref)
    assert str(e.value) == f"git ref {ref!r} not found in the repository"
    assert not isinstance(e.value, MalformedGitRef)


def test_resolution_gives_a_full_sha_or_refuses(repo):
    with pytest.raises(MalformedGitRef):
        resolve_commit(repo["gd"], "^main")  # (git: "^<sha>", which every later command failed on)
    with pytest.raises(MalformedGitRef):
        resolve_commit(repo["gd"], "main^{/commit}")


def test_a_long_walk_within_the_cap_is_quick(tmp_path):
    """``~N`` at the cap walks `MAX_REF_GENERATIONS` commits: tens of milliseconds for git."""
    root = str(tmp_path / "long")
    os.makedirs(root)
    git(root, "init", "-q", "-b", "main")
    stream = "".join(f"commit refs/heads/main\ncommitter T <t@e> {1700000000 + i} +0000\ndata 2\nc\n\n"
                     for i in range(MAX_REF_GENERATIONS + 1))
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=stream.encode(), check=True)
    first = git(root, "rev-list", "--max-parents=0", "main").strip()
    start = time.monotonic()
    assert resolve_commit(git_dir_of(root), f"main~{MAX_REF_GENERATIONS}") == first
    assert time.monotonic() - start < 3  # (a sanity bound: resolution has a 5 s limit)


# ---------------------------------------------------------------------- cut diffs

LINES = 200


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
    """c1 → c2, which rewrites ``a.txt`` (`LINES` lines), renames ``r-old.txt`` to
    ``r-new.txt`` with one line changed, and adds ``z/0.txt`` … ``z/9.txt``."""
    root = str(tmp_path_factory.mktemp("cut") / "repo")
    os.makedirs(root)
    git(root, "init", "-q", "-b", "main")
    body = "".join(f"line {i} of a file that is renamed\n" for i in range(50))
    write(root, {"a.txt": "".join(f"old {i}\n" for i in range(LINES)), "r-old.txt": body})
    c1 = commit(root, "first")
    os.remove(os.path.join(root, "r-old.txt"))
    write(root, {"a.txt": "".join(f"new {i}\n" for i in range(LINES)), "r-new.txt": body.replace("line 7 ", "LINE 7 "),
                 **{f"z/{i}.txt": f"{i}\n" for i in range(10)}})
    c2 = commit(root, "second")
    return {"gd": git_dir_of(root), "c1": c1, "c2": c2}


def test_the_file_a_byte_cap_falls_in_is_cut_and_keeps_its_real_counts(cut):
    files, truncated = diff_objects(cut["gd"], cut["c1"], cut["c2"], max_bytes=500)
    assert truncated and [f.new_path for f in files] == ["a.txt"]
    (a,) = files
    assert a.cut and a.hunks == [] and a.counts == (LINES, LINES) and a.status == "modified"
    assert count_files(cut["gd"], cut["c1"], cut["c2"]) == 12  # a.txt, the rename (one file), ten added


def test_a_cut_rename_is_counted_as_one_file(cut):
    whole = diff_objects(cut["gd"], cut["c1"], cut["c2"], scope="a.txt")[0][0]
    a_bytes = 60 + sum(len(line) + 1 for h in whole.hunks for line in h.lines)  # (with its headers)
    files, truncated = diff_objects(cut["gd"], cut["c1"], cut["c2"], max_bytes=a_bytes + 300)
    names = [(f.old_path, f.new_path, f.status, f.cut) for f in files]
    assert truncated and names[-1] == ("r-old.txt", "r-new.txt", "renamed", True), names
    assert files[-1].counts == (1, 1)
    assert not files[0].cut and files[0].counts is None  # read whole: counted from its hunks


def test_a_file_cap_cuts_no_file_and_the_count_is_the_whole(cut):
    files, truncated = diff_objects(cut["gd"], cut["c1"], cut["c2"], max_files=3)
    assert truncated and len(files) == 3 and not any(f.cut for f in files)
    assert count_files(cut["gd"], cut["c1"], cut["c2"]) == 12
    assert count_files(cut["gd"], cut["c1"], cut["c2"], scope="z") == 10


def test_an_uncut_diff_marks_nothing(cut):
    files, truncated = diff_objects(cut["gd"], cut["c1"], cut["c2"])
    assert not truncated and len(files) == 12 and not any(f.cut or f.counts for f in files)
