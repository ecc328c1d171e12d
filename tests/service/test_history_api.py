"""``GET /api/blame``, ``/api/commit``, ``/api/diff`` and the ``path`` of ``/api/commits`` over real
HTTP on 127.0.0.1, against a real repository (tests.histworld), both indexed in place and as a
bare mirror in the data directory. Differential: every answer is compared with what ``git
blame --porcelain``, ``git log`` and ``git diff`` print when run here directly.

(The routes need no Ray: they read git. That a hidden repository answers exactly as a missing
one is checked with the other routes in tests/permissions/test_permission_leaks.py.)
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import httpx
import pytest

from codesearch.git import history
from codesearch.serving.api import build_app
from codesearch.store import Store
from tests.asgiserver import serving
from tests.histworld import BIG_LINES, make_history_repo
from tests.oauthworld import NoSearcher

LOCAL = "git.local/hist"
MIRROR = "github.com/acme/hist"
REPOS = [LOCAL, MIRROR]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("histapi"))
    root = os.path.join(base, "src", "hist")
    shas = make_history_repo(root)
    data = os.path.join(base, "data")
    store = Store.open(data)
    owner = store.create_user("owner@example.com", "Owner")
    key = store.create_api_key(owner.id, "history tests")[1]
    store.upsert_connection("local", "git", {"type": "git", "url": "file://" + root})
    ids = store.upsert_repos("local", [dict(name=LOCAL, display_name="hist", code_host_type="genericGitHost",
                                            clone_url="file://" + root, local_path=root, default_branch="main")]).ids
    store.upsert_connection("acme", "github", {"type": "github", "orgs": ["acme"]})
    ids.update(store.upsert_repos("acme", [dict(name=MIRROR, display_name="acme/hist", code_host_type="github",
                                                clone_url="file://" + root, default_branch="main")]).ids)
    mirror = os.path.join(data, "repos", str(ids[MIRROR]))
    subprocess.run(["git", "clone", "-q", "--mirror", root, mirror], check=True, capture_output=True)
    app = build_app(lambda: NoSearcher(), get_store=lambda: store, anonymous_access=False, data_dir=data, environ={})
    with serving(app) as url:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
            yield {"http": http, "url": url, "shas": shas, "root": root, "store": store,
                   "git_dirs": {LOCAL: os.path.join(root, ".git"), MIRROR: mirror}}
    store.close()


def run_git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, check=True).stdout.decode()


def get(world, route: str, **params) -> httpx.Response:
    return world["http"].get(route, params=params)


def ok(world, route: str, **params) -> dict:
    r = get(world, route, **params)
    assert r.status_code == 200, r.text
    return r.json()


# ----------------------------------------------------------------------------- blame


def git_blame_lines(git_dir: str, ref: str, path: str) -> list[tuple[str, str]]:
    """(commit, path in that commit) of each line, read from ``git blame --porcelain``."""
    out = run_git(git_dir, "-c", "core.quotePath=false", "blame", "--porcelain", ref, "--", path)
    lines, names, current = [], {}, None
    for line in out.split("\n"):
        m = re.fullmatch(r"([0-9a-f]{40}) \d+ (\d+)(?: \d+)?", line)
        if m:
            current = m.group(1)
            lines.append(current)
        elif line.startswith("filename "):
            names[current] = line[len("filename "):]
    return [(sha, names[sha]) for sha in lines]


def per_line(ranges: list[dict]) -> list[tuple[str, str]]:
    out = []
    for r in ranges:
        assert r["startLine"] == len(out) + 1, "ranges are contiguous and ordered"
        out += [(r["hash"], r["path"])] * r["lineCount"]
    return out


@pytest.mark.parametrize("repo", REPOS)
@pytest.mark.parametrize("ref, path", [
    ("main", "src/app.py"),  # three authors' lines, interleaved
    ("v1.0", "src/app.py"),  # one commit
    (None, "docs/manual.md"),  # renamed with an edit: older lines name the old path
    ("feature", "src/util.py"),
    ("main", "sp ace/ünï.txt"),
])
def test_blame_is_what_git_blame_says(world, repo, ref, path):
    params = {"repo": repo, "path": path, **({"ref": ref} if ref else {})}
    got = ok(world, "/api/blame", **params)
    git_dir = world["git_dirs"][repo]
    use = ref or "main"
    assert per_line(got["ranges"]) == git_blame_lines(git_dir, use, path)
    assert (got["repo"], got["path"], got["ref"], got["truncated"]) == (repo, path, use, False)
    assert got["commit"] == run_git(git_dir, "rev-parse", use + "^{commit}").strip()
    assert "isBinary" not in got
    # neighbours of one commit and path are one range
    assert all((a["hash"], a["path"]) != (b["hash"], b["path"]) for a, b in zip(got["ranges"], got["ranges"][1:]))
    assert set(got["commits"]) == {r["hash"] for r in got["ranges"]}
    for sha, c in got["commits"].items():
        name, email, date, subject = run_git(git_dir, "log", "-1", "--format=%an%x00%ae%x00%aI%x00%s", sha).strip().split("\0")
        assert (c["hash"], c["authorName"], c["authorEmail"], c["date"], c["message"]) == (sha, name, email, date, subject)


def test_blame_follows_a_rename_and_points_to_the_previous_step(world):
    got = ok(world, "/api/blame", repo=LOCAL, path="docs/manual.md")
    shas = world["shas"]
    assert [(r["hash"], r["path"], r["startLine"], r["lineCount"]) for r in got["ranges"]] == [
        (shas["c1"], "docs/guide.md", 1, 3), (shas["c2"], "docs/manual.md", 4, 1), (shas["c1"], "docs/guide.md", 5, 1)]
    assert got["commits"][shas["c2"]]["previous"] == {"hash": shas["c1"], "path": "docs/guide.md"}
    assert "previous" not in got["commits"][shas["c1"]]  # it added its lines


@pytest.mark.parametrize("ref, path, want", [
    ("main", "data/logo.png", {"ranges": [], "commits": {}, "isBinary": True, "truncated": False}),
    ("main", "empty.txt", {"ranges": [], "commits": {}, "truncated": False}),
])
def test_blame_of_binary_and_empty_files(world, ref, path, want):
    got = ok(world, "/api/blame", repo=LOCAL, path=path, ref=ref)
    assert {k: got.get(k) for k in want} == want and ("isBinary" in got) == ("isBinary" in want)


def test_blame_of_a_long_file_is_cut_and_says_so(world):
    got = ok(world, "/api/blame", repo=MIRROR, path="data/big.txt", ref="big")
    assert got["truncated"] is True and BIG_LINES > history.MAX_BLAME_LINES
    assert per_line(got["ranges"]) == [(world["shas"]["b1"], "data/big.txt")] * history.MAX_BLAME_LINES


def test_blame_refuses_a_file_too_large_to_blame(world, monkeypatch):
    monkeypatch.setattr(history, "MAX_BLAME_BYTES", 1_000_000)  # huge.txt is 2.2 MB
    r = get(world, "/api/blame", repo=LOCAL, path="data/huge.txt", ref="big")
    assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_ARGUMENT"
    size = int(run_git(world["git_dirs"][LOCAL], "cat-file", "-s", "big:data/huge.txt"))
    assert f"'data/huge.txt' is {size:,} bytes: too large to blame (at most 1,000,000 bytes)" == r.json()["message"]


# ----------------------------------------------------------------------------- diffs, differentially

HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)")


def git_diff_files(git_dir: str, old: str, new: str, path: str | None = None) -> list[dict]:
    """Each file of ``git diff -M <old> <new>`` as {paths, hunks: [(o, on, n, nn, heading, body)], binary}."""
    out = run_git(git_dir, "-c", "core.quotePath=false", "diff", "--no-color", "-M", "--src-prefix=a/", "--dst-prefix=b/",
                  old, new, "--", *([path] if path else []))
    files: list[dict] = []
    hunk = None
    for line in out.split("\n"):
        if line.startswith("diff --git "):
            a, b = line[len("diff --git a/"):].split(" b/", 1)  # (no test path holds " b/")
            files.append({"old": None, "new": None, "hunks": [], "binary": False, "status": "modified", "ab": (a, b)})
            hunk = None
            continue
        f = files[-1] if files else None
        m = HUNK.fullmatch(line)
        if m and f is not None:
            o, on, n, nn, heading = m.groups()
            hunk = [int(o), int(on or 1), int(n), int(nn or 1), heading, []]
            f["hunks"].append(hunk)
        elif hunk is not None and line[:1] in (" ", "+", "-", "\\"):
            hunk[5].append(line)
        elif line.startswith("--- "):
            f["old"] = None if line == "--- /dev/null" else line[len("--- a/"):]
        elif line.startswith("+++ "):
            f["new"] = None if line == "+++ /dev/null" else line[len("+++ b/"):]
        elif line.startswith("rename from "):
            f["old"], f["status"] = line[len("rename from "):], "renamed"
        elif line.startswith("rename to "):
            f["new"] = line[len("rename to "):]
        elif line.startswith("Binary files "):
            f["binary"] = True
            a, b = re.fullmatch(r"Binary files (.+) and (.+) differ", line).groups()
            f["old"] = None if a == "/dev/null" else a[2:]
            f["new"] = None if b == "/dev/null" else b[2:]
        elif line.startswith("new file mode"):
            f["status"] = "added"
        elif line.startswith("deleted file mode"):
            f["status"] = "deleted"
    for f in files:
        a, b = f.pop("ab")
        if f["status"] == "modified":
            f["old"], f["new"] = a, b
        elif f["status"] == "added":
            f["new"] = b  # (an empty file has no ---/+++ lines)
        elif f["status"] == "deleted":
            f["old"] = a
        f["hunks"] = [(o, on, n, nn, h, "\n".join(body)) for o, on, n, nn, h, body in f["hunks"]]
    return files


def as_git(files: list[dict]) -> list[dict]:
    """Our JSON files in `git_diff_files`' form, checking the counts on the way."""
    out = []
    for f in files:
        lines = [x for h in f["hunks"] for x in h["body"].split("\n")]
        assert (f["additions"], f["deletions"]) == (sum(x.startswith("+") for x in lines), sum(x.startswith("-") for x in lines))
        out.append({"old": f["oldPath"], "new": f["newPath"], "binary": f["isBinary"], "status": f["status"],
                    "hunks": [(h["oldRange"]["start"], h["oldRange"]["lines"], h["newRange"]["start"],
                               h["newRange"]["lines"], h.get("heading", ""), h["body"]) for h in f["hunks"]]})
    return out


@pytest.mark.parametrize("repo", REPOS)
@pytest.mark.parametrize("name", ["c1", "c2", "f1", "c3", "m", "b1"])
def test_commit_is_what_git_log_and_git_diff_say(world, repo, name):
    git_dir = world["git_dirs"][repo]
    sha = world["shas"][name]
    got = ok(world, "/api/commit", repo=repo, ref=sha)
    fields = run_git(git_dir, "log", "-1", "--format=%H%x00%cI%x00%s%x00%b%x00%an%x00%ae%x00%P%x00%aI", sha).split("\0")
    h, date, subject, body, name_, email, parents, author_date = (x.strip() for x in fields)
    assert (got["hash"], got["date"], got["message"], got["body"], got["authorName"], got["authorEmail"],
            got["parents"], got["authorDate"]) == (h, date, subject, body, name_, email, parents.split(), author_date)
    base = got["parents"][0] if got["parents"] else run_git(git_dir, "hash-object", "-t", "tree", "/dev/null").strip()
    if name == "b1":  # more diff text than a diff may hold: cut, and what is shown is git's
        assert got["truncated"] is True
        assert as_git(got["files"][:1]) == git_diff_files(git_dir, base, sha)[:1]
        return
    assert got["truncated"] is False
    assert as_git(got["files"]) == git_diff_files(git_dir, base, sha)


def test_commit_fields_and_statuses(world):
    shas = world["shas"]
    c2 = ok(world, "/api/commit", repo=LOCAL, ref="v1.0~0")  # any ref naming a commit
    assert c2["hash"] == shas["c1"] and c2["parents"] == [] and c2["refs"] == "tag: v1.0"
    got = ok(world, "/api/commit", repo=LOCAL, ref=shas["c2"])
    assert got["message"] == "Rework the app" and got["body"] == "The body says why.\nOn two lines."
    assert {(f["oldPath"], f["newPath"], f["status"], f["isBinary"]) for f in got["files"]} == {
        ("data/logo.png", "data/logo.png", "modified", True), ("docs/guide.md", "docs/manual.md", "renamed", False),
        ("src/app.py", "src/app.py", "modified", False), (None, "src/util.py", "added", False)}
    merge = ok(world, "/api/commit", repo=LOCAL, ref="main")
    assert merge["hash"] == shas["m"] and merge["parents"] == [shas["c3"], shas["f1"]] and isinstance(merge["refs"], str) and "main" in merge["refs"]
    assert {f["newPath"] for f in merge["files"]} == {"feature.txt", "src/util.py"}  # against the first parent
    only = ok(world, "/api/commit", repo=LOCAL, ref=shas["c2"], path="src")
    assert {f["newPath"] for f in only["files"]} == {"src/app.py", "src/util.py"}


@pytest.mark.parametrize("repo", REPOS)
@pytest.mark.parametrize("base, head, path", [
    ("v1.0", "main", None), ("main", "v1.0", None), ("main", "feature", None), ("feature", "main", "src"),
    ("v1.0", "main", "docs/manual.md"), ("main", "main", None), ("v1.0", "main", "nowhere"),
])
def test_diff_is_what_git_diff_says(world, repo, base, head, path):
    params = {"repo": repo, "base": base, "head": head, **({"path": path} if path else {})}
    got = ok(world, "/api/diff", **params)
    git_dir = world["git_dirs"][repo]
    assert as_git(got["files"]) == git_diff_files(git_dir, base, head, path)
    assert (got["repo"], got["base"], got["head"], got["truncated"]) == (repo, base, head, False)
    assert got["baseCommit"] == run_git(git_dir, "rev-parse", base).strip()
    assert got["headCommit"] == run_git(git_dir, "rev-parse", head).strip()


def test_a_huge_diff_is_cut_with_a_flag(world):
    got = ok(world, "/api/diff", repo=LOCAL, base="v1.0", head="big")
    assert got["truncated"] is True
    assert [f["newPath"] for f in got["files"]] == ["data/big.txt", "data/huge.txt"]
    assert len(got["files"][1]["hunks"]) == 0  # cut inside its only hunk: the hunk is left out, never half shown


# ----------------------------------------------------------------------------- commits of a path


@pytest.mark.parametrize("repo", REPOS)
@pytest.mark.parametrize("ref, path", [("main", "src/app.py"), ("main", "src"), ("main", "docs/guide.md"),
                                       ("feature", "feature.txt"), ("main", "nowhere"), ("main", None)])
def test_commits_of_a_path_are_git_logs(world, repo, ref, path):
    params = {"repo": repo, "ref": ref, **({"path": path} if path else {})}
    r = get(world, "/api/commits", **params)
    assert r.status_code == 200, r.text
    want = run_git(world["git_dirs"][repo], "log", "--format=%H", ref, "--", *([path] if path else [])).split()
    assert [c["hash"] for c in r.json()] == want  # Sourcebot's bare array
    assert r.headers["X-Total-Count"] == str(len(want))
    assert all(isinstance(c["refs"], str) for c in r.json())


def test_commits_pages_carry_link_headers(world):
    r = get(world, "/api/commits", repo=LOCAL, path="src", perPage=2, page=1)
    assert r.headers["X-Total-Count"] == "5" and len(r.json()) == 2  # c1, c2, f1, c3 and the merge
    links = r.headers["Link"]
    assert 'rel="next"' in links and 'rel="last"' in links and "path=src" in links and "page=2" in links
    last = get(world, "/api/commits", repo=LOCAL, path="src", perPage=2, page=3)
    assert 'rel="next"' not in last.headers["Link"] and len(last.json()) == 1
    assert "Link" not in get(world, "/api/commits", repo=LOCAL, path="src").headers


# ----------------------------------------------------------------------------- errors


#: where an option injected as a ref (``--output=…``) would write: nothing may appear there
PROBE = f"/tmp/codesearch-history-probe-{os.getpid()}"

ERRORS = [
    # route, params, status, errorCode, words in the message
    ("/api/blame", {"repo": "git.local/nope", "path": "README.md"}, 404, "REPOSITORY_NOT_FOUND", ["git.local/nope"]),
    ("/api/blame", {"repo": LOCAL, "path": "nope.txt"}, 404, "FILE_NOT_FOUND", ["nope.txt", "not found"]),
    ("/api/blame", {"repo": LOCAL, "path": "src"}, 404, "FILE_NOT_FOUND", ["'src' is a directory"]),
    ("/api/blame", {"repo": LOCAL, "path": "../etc/passwd"}, 404, "FILE_NOT_FOUND", ["relative to the repository root"]),
    ("/api/blame", {"repo": LOCAL, "path": "src/app.py", "ref": "nope"}, 400, "INVALID_GIT_REF", ["'nope' not found"]),
    ("/api/blame", {"repo": LOCAL, "path": "src/app.py", "ref": f"--output={PROBE}"}, 400, "INVALID_GIT_REF", ["invalid"]),
    ("/api/blame", {"repo": LOCAL}, 400, "INVALID_REQUEST_BODY", ["path"]),
    ("/api/commit", {"repo": LOCAL, "ref": "nope"}, 400, "INVALID_GIT_REF", ["'nope' not found"]),
    ("/api/commit", {"repo": LOCAL, "ref": "HEAD:README.md"}, 400, "INVALID_GIT_REF", ["invalid"]),
    ("/api/commit", {"repo": LOCAL}, 400, "INVALID_REQUEST_BODY", ["ref"]),
    ("/api/commit", {"repo": LOCAL, "ref": "main", "path": "a//b"}, 404, "FILE_NOT_FOUND", ["relative"]),
    ("/api/commit", {"repo": "git.local/nope", "ref": "main"}, 404, "REPOSITORY_NOT_FOUND", ["git.local/nope"]),
    ("/api/diff", {"repo": LOCAL, "base": "main", "head": "nope"}, 400, "INVALID_GIT_REF", ["'nope' not found"]),
    ("/api/diff", {"repo": LOCAL, "base": "-x", "head": "main"}, 400, "INVALID_GIT_REF", ["invalid"]),
    ("/api/diff", {"repo": LOCAL, "base": "main"}, 400, "INVALID_REQUEST_BODY", ["head"]),
    ("/api/diff", {"repo": LOCAL, "base": "v1.0", "head": "main", "path": "../x"}, 404, "FILE_NOT_FOUND", ["relative"]),
    ("/api/diff", {"repo": "git.local/nope", "base": "main", "head": "main"}, 404, "REPOSITORY_NOT_FOUND", ["nope"]),
    ("/api/commits", {"repo": LOCAL, "path": "./src"}, 404, "FILE_NOT_FOUND", ["relative"]),
]


@pytest.mark.parametrize("route, params, status, code, words", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_bad_requests_say_what_is_wrong(world, route, params, status, code, words):
    r = world["http"].get(route, params=params)
    assert r.status_code == status, r.text
    body = r.json()
    assert (body["statusCode"], body["errorCode"]) == (status, code)
    for word in words:
        assert word in body["message"], body["message"]
    assert not os.path.exists(PROBE)


@pytest.mark.parametrize("route, params", [("/api/blame", {"repo": LOCAL, "path": "README.md"}),
                                           ("/api/commit", {"repo": LOCAL, "ref": "main"}),
                                           ("/api/diff", {"repo": LOCAL, "base": "v1.0", "head": "main"})])
def test_routes_need_credentials(world, route, params):
    r = httpx.get(world["url"] + route, params=params, timeout=30)
    assert r.status_code == 401 and r.json()["errorCode"] == "NOT_AUTHENTICATED"


@pytest.mark.parametrize("route, params, action, target", [
    ("/api/blame", {"repo": LOCAL, "path": "src/app.py", "ref": "v1.0"}, "blame.read", f"{LOCAL}:src/app.py"),
    ("/api/commit", {"repo": LOCAL, "ref": "feature"}, "commit.read", LOCAL),
    ("/api/diff", {"repo": MIRROR, "base": "v1.0", "head": "feature"}, "diff.read", MIRROR),
    ("/api/commits", {"repo": LOCAL, "path": "docs"}, "commits.read", f"{LOCAL}:docs"),
])
def test_history_reads_are_audited(world, route, params, action, target):
    world["http"].get(route, params=params).raise_for_status()
    deadline = time.monotonic() + 20
    while True:  # the service's writer flushes every 0.5 s
        events = [e for e in world["store"].list_audit_events(action=action, per_page=500)[0] if e.target == target]
        if events or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert events and events[0].actor == "owner@example.com", (action, target)
