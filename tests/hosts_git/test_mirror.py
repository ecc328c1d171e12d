"""Mirrors (codesearch.git.mirror) against real git over real smart HTTP on 127.0.0.1.

The served repositories live in bare repos under a temp root; tests change them by pushing from
a scratch working copy (new commits, branches, tags, force-pushes, deletions) or by editing the
bare repo directly (its HEAD), then check that the mirror equals the remote ref for ref.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from codesearch.errors import GitError
from codesearch.git.mirror import MirrorStore, public_url
from codesearch.git.revisions import select_revisions
from codesearch.index.builder import IndexSettings
from codesearch.index.paths import index_paths
from codesearch.search.engine import Searcher
from tests.corpus import git
from tests.githttp import GitHttpServer, make_bare_repo

USER, TOKEN = "x-access-token", "tok-9f8e7d6c5b4a-SECRET"
BASIC = base64.b64encode(f"{USER}:{TOKEN}".encode()).decode()
FAST = 1.5  # seconds every failure case must stay under


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for the module (stopping one takes half a second); each test serves its own folder."""
    root = str(tmp_path_factory.mktemp("served"))
    with GitHttpServer(root, users={(USER, TOKEN)}) as srv:
        yield srv


@pytest.fixture
def env(server, tmp_path):
    prefix = os.path.basename(tmp_path)
    root = os.path.join(server.root, prefix)
    bare = make_bare_repo(root, "acme/widgets.git", {"README.md": "hello widgets\n", "src/app.py": "print('main')\n"},
                          branches={"dev": {"src/devonly.py": "def devonly_marker():\n    return 1\n"},
                                    "release/1.0": {"src/release.py": "RELEASE_MARKER = 1\n"}},
                          tags=["v1.0", "old"])
    url = lambda path: server.url(f"{prefix}/{path}")  # noqa: E731
    yield {"root": root, "bare": bare, "srv": server, "url": url("acme/widgets.git"), "served": url,
           "prefix": f"/{prefix}/", "store": MirrorStore(str(tmp_path / "mirrors"), timeout_s=10), "tmp": tmp_path}


def refs(git_dir: str) -> dict[str, str]:
    out = subprocess.run(["git", "--git-dir", git_dir, "for-each-ref", "--format=%(objectname) %(refname)"],
                         capture_output=True, text=True, check=True).stdout
    return {name: sha for sha, name in (line.split(" ", 1) for line in out.splitlines())}


def head_ref(git_dir: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "symbolic-ref", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def sync(e, repo_id=1, **kw):
    kw.setdefault("username", USER)
    kw.setdefault("password", TOKEN)
    return e["store"].sync(repo_id, kw.pop("url", e["url"]), **kw)


def work_copy(e) -> str:
    work = str(e["tmp"] / "work")
    if not os.path.isdir(work):
        subprocess.run(["git", "clone", "-q", e["bare"], work], check=True, capture_output=True)
    return work


def commit(work: str, branch: str, name: str, text: str, msg: str) -> None:
    git(work, "checkout", "-q", branch)
    with open(os.path.join(work, name), "w") as f:
        f.write(text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", msg)


def assert_mirrors(e, result) -> None:
    assert refs(result.path) == refs(e["bare"])
    assert head_ref(result.path) == head_ref(e["bare"]) == result.default_branch
    assert result.head_commit == refs(e["bare"])[result.default_branch]


# ---------------------------------------------------------------- clone and fetch


def test_clone_then_fetch_mirrors_every_ref_change(env):
    r = sync(env)
    assert r.created and r.path == env["store"].path_for(1) and r.default_branch == "refs/heads/main"
    assert_mirrors(env, r)
    seen = [u for _, path, u in env["srv"].requests if path.startswith(env["prefix"])]
    assert seen and set(seen) == {USER}  # the server saw the user, on every request
    assert subprocess.run(["git", "--git-dir", r.path, "rev-parse", "--is-shallow-repository"],
                          capture_output=True, text=True).stdout.strip() == "false"
    old_dev = refs(r.path)["refs/heads/dev"]

    work = work_copy(env)
    commit(work, "main", "new.txt", "new on main\n", "more on main")
    git(work, "checkout", "-q", "-b", "feature", "main")
    commit(work, "feature", "feature.txt", "feature\n", "feature work")
    git(work, "tag", "v2.0", "main")
    git(work, "tag", "-a", "-m", "annotated", "v2.1", "feature")
    git(work, "checkout", "-q", "-B", "dev", "origin/main")  # rewrite dev's history
    commit(work, "dev", "rewritten.txt", "rewritten\n", "rewritten dev")
    git(work, "push", "-q", "origin", "main", "feature", "v2.0", "v2.1")
    git(work, "push", "-q", "--force", "origin", "dev")
    git(work, "push", "-q", "origin", ":release/1.0", ":refs/tags/old")

    r2 = sync(env)
    assert not r2.created and r2.path == r.path
    assert_mirrors(env, r2)
    got = refs(r2.path)
    assert "refs/heads/release/1.0" not in got and "refs/tags/old" not in got
    assert {"refs/heads/feature", "refs/tags/v2.0", "refs/tags/v2.1"} <= set(got)
    assert got["refs/heads/dev"] != old_dev
    assert sync(env).created is False  # nothing changed: still a clean fetch


def test_changed_default_branch_is_followed(env):
    assert sync(env).default_branch == "refs/heads/main"
    git(env["bare"], "symbolic-ref", "HEAD", "refs/heads/dev")
    r = sync(env)
    assert r.default_branch == "refs/heads/dev" and head_ref(r.path) == "refs/heads/dev"
    assert_mirrors(env, r)
    git(env["bare"], "update-ref", "-d", "refs/heads/main")  # the old default branch goes away
    r = sync(env)
    assert "refs/heads/main" not in refs(r.path)
    assert_mirrors(env, r)


def test_no_secret_on_disk_or_in_messages(env):
    r = sync(env)
    work = work_copy(env)
    commit(work, "main", "x.txt", "x\n", "x")
    git(work, "push", "-q", "origin", "main")
    sync(env)
    for dirpath, _, files in os.walk(env["store"].root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                data = f.read()
            for secret in (TOKEN, BASIC, "Authorization"):
                assert secret.encode() not in data, os.path.join(dirpath, name)
    url = subprocess.run(["git", "--git-dir", r.path, "config", "remote.origin.url"], capture_output=True,
                         text=True).stdout.strip()
    assert url == env["url"] and "@" not in url
    errors = []
    for kw in ({"password": TOKEN + "x"}, {"url": env["served"]("acme/missing.git")},
               {"url": env["url"].replace("//", f"//{USER}:{TOKEN}@")}):
        with pytest.raises(GitError) as ei:
            sync(env, repo_id=2, **kw)
        errors.append(str(ei.value))
    for msg in errors:
        assert TOKEN not in msg and BASIC not in msg and "Authorization" not in msg
    assert "credentials must not be part of the clone URL" in errors[2]
    assert public_url(f"https://{USER}:{TOKEN}@example.com/a.git") == "https://example.com/a.git"


def test_credentials_only_in_the_environment_of_network_commands(env, monkeypatch):
    import codesearch.git.process as process

    calls = []
    real = subprocess.Popen

    def spy(argv, *a, **kw):  # (the test server's http-backend goes through Popen too)
        if argv[:2] != ["git", "http-backend"]:
            calls.append((argv, kw.get("env") or {}))
        return real(argv, *a, **kw)

    def command(argv):  # the git subcommand, after -c key=value and --git-dir <dir>
        i = 1
        while argv[i] in ("-c", "--git-dir"):
            i += 2
        return argv[i]

    monkeypatch.setattr(process.subprocess, "Popen", spy)
    monkeypatch.setenv("GIT_TRACE_CURL", "1")  # inherited tracing would print the header: dropped
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'http.extraheader'='X-Leak: 1'")
    sync(env)
    sync(env)
    assert calls
    header = f"Authorization: Basic {BASIC}"
    for argv, e in calls:
        assert not any(TOKEN in a or BASIC in a for a in argv), argv
        assert "GIT_TRACE_CURL" not in e and "GIT_CONFIG_PARAMETERS" not in e
        assert e["GIT_TERMINAL_PROMPT"] == "0" and os.path.basename(e["GIT_ASKPASS"]) == "false"
        values = [e[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(e["GIT_CONFIG_COUNT"]))]
        network = command(argv) in ("clone", "fetch", "ls-remote")
        assert (header in values) == network, argv
        if network:
            keys = [e[f"GIT_CONFIG_KEY_{i}"] for i in range(int(e["GIT_CONFIG_COUNT"]))]
            assert ("credential.helper", "") in list(zip(keys, values))
    assert {command(argv) for argv, _ in calls} >= {"clone", "fetch", "ls-remote"}


# ---------------------------------------------------------------- failures


def _quick(fn):
    t = time.monotonic()
    with pytest.raises(GitError) as ei:
        fn()
    assert time.monotonic() - t < FAST
    return str(ei.value)


def test_wrong_token_is_an_authentication_error(env):
    msg = _quick(lambda: sync(env, password="wrong-token"))
    assert "authentication failed" in msg and env["url"] in msg and "wrong-token" not in msg
    assert not os.path.exists(env["store"].path_for(1)) and env["store"].list_ids() == []
    msg = _quick(lambda: sync(env, username=None, password=None))
    assert "authentication failed" in msg


def test_failed_fetch_keeps_the_clone(env):
    r = sync(env)
    before = refs(r.path)
    msg = _quick(lambda: sync(env, password="wrong-token"))
    assert "authentication failed" in msg
    assert refs(r.path) == before
    assert sync(env).created is False


def test_missing_repository_is_not_found(env):
    msg = _quick(lambda: sync(env, url=env["served"]("acme/nope.git")))
    assert "not found" in msg and "acme/nope.git" in msg


def test_unreachable_host(env):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there any more
    msg = _quick(lambda: sync(env, url=f"http://127.0.0.1:{port}/acme/widgets.git"))
    assert "unreachable" in msg and f"127.0.0.1:{port}" in msg


def test_timeout_when_the_host_never_answers(tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)  # accepts connections (kernel backlog), never answers
    try:
        store = MirrorStore(str(tmp_path / "m"), timeout_s=0.7)
        url = f"http://127.0.0.1:{s.getsockname()[1]}/acme/widgets.git"
        msg = _quick(lambda: store.sync(1, url, username=USER, password=TOKEN))
        assert "timed out" in msg and TOKEN not in msg
        assert store.list_ids() == []  # the temporary clone folder is gone too
    finally:
        s.close()


def test_empty_repository(env):
    subprocess.run(["git", "init", "-q", "--bare", os.path.join(env["root"], "acme/empty.git")], check=True)
    msg = _quick(lambda: sync(env, url=env["served"]("acme/empty.git")))
    assert "empty repository" in msg
    assert env["store"].list_ids() == []


def test_default_branch_that_does_not_exist(env):
    git(env["bare"], "symbolic-ref", "HEAD", "refs/heads/gone")
    msg = _quick(lambda: sync(env))
    assert "refs/heads/gone does not exist" in msg


@pytest.mark.parametrize("url", ["file:///srv/repos/a.git", "/srv/repos/a.git", "./a", "ext::sh -c evil", "-uhoh"])
def test_local_and_odd_urls_are_rejected(env, url):
    with pytest.raises(GitError):
        env["store"].sync(1, url)


# ---------------------------------------------------------------- damaged clones


def _delete_objects(p):
    shutil.rmtree(os.path.join(p, "objects"))


def _garbage_head(p):
    with open(os.path.join(p, "HEAD"), "w") as f:
        f.write("garbage\n")


def _plain_file(p):
    shutil.rmtree(p)
    with open(p, "w") as f:
        f.write("not a repo")


def _not_a_repo(p):
    shutil.rmtree(p)
    os.makedirs(os.path.join(p, "some", "dir"))


def _half_deleted(p):
    for name in ("HEAD", "config", "packed-refs"):
        if os.path.exists(os.path.join(p, name)):
            os.unlink(os.path.join(p, name))


def _missing_objects(p):
    pack = os.path.join(p, "objects", "pack")
    for name in os.listdir(pack):
        os.unlink(os.path.join(pack, name))
    for d in os.listdir(os.path.join(p, "objects")):
        if len(d) == 2:
            shutil.rmtree(os.path.join(p, "objects", d))


def _dangling_ref(p):
    with open(os.path.join(p, "refs", "heads", "zombie"), "w") as f:
        f.write("1" * 40 + "\n")


@pytest.mark.parametrize("damage", [_delete_objects, _garbage_head, _plain_file, _not_a_repo, _half_deleted,
                                    _missing_objects, _dangling_ref])
def test_damaged_clone_is_cloned_again(env, damage, caplog):
    r = sync(env)
    damage(r.path)
    with caplog.at_level(logging.WARNING, logger="codesearch.git.mirror"):
        r2 = sync(env)
    assert r2.created and r2.path == r.path
    assert_mirrors(env, r2)
    assert any("damaged" in rec.getMessage() for rec in caplog.records)
    assert os.listdir(env["store"].root) == ["1"]  # no temporary folders left


def test_crash_leftovers_are_cleaned_up(env):
    store = env["store"]
    os.makedirs(os.path.join(store.root, ".7.clone-abc123", "repo.git"))
    os.makedirs(os.path.join(store.root, ".8.trash-xyz"))
    assert store.list_ids() == ["7", "8"]
    r = sync(env, repo_id=7)
    assert r.created and sorted(os.listdir(store.root)) == [".8.trash-xyz", "7"]
    store.remove(8)
    store.remove(7)
    store.remove(7)  # absent: no error
    assert os.listdir(store.root) == [] and store.list_ids() == []


def test_paths_ids_and_remove(env):
    store = env["store"]
    assert store.path_for(42) == os.path.join(store.root, "42") == store.path_for("42")
    for bad in ("", "..", ".hidden", "a/b"):
        with pytest.raises(GitError):
            store.path_for(bad)
    sync(env, repo_id=42)
    sync(env, repo_id="abc")
    assert store.list_ids() == ["42", "abc"]
    store.remove("abc")
    assert store.list_ids() == ["42"] and not os.path.exists(store.path_for("abc"))


def test_concurrent_syncs_of_one_repo(env):
    results, errors = [], []

    def run():
        try:
            results.append(sync(env))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sorted(r.created for r in results) == [False, False, True]
    assert_mirrors(env, results[0])


# ---------------------------------------------------------------- revisions and the engine


def test_revisions_and_search_on_the_mirror(env):
    r = sync(env)
    revs, warnings = select_revisions(r.path, ["dev", "release/*"], ["v*"])
    # default first; equal commit dates (fixed in tests.corpus.git) tie-break by name
    assert [v.ref for v in revs] == ["refs/heads/main", "refs/heads/dev", "refs/heads/release/1.0", "refs/tags/v1.0"]
    assert not warnings

    out = str(env["tmp"] / "index")
    index_paths([r.path], out, IndexSettings(ctags=False), branches=["dev", "release/*"], tags=["v*"])
    s = Searcher(out)
    try:
        hit = s.search("rev:dev devonly_marker")["files"]
        assert [f["fileName"]["text"] for f in hit] == ["src/devonly.py"]
        assert hit[0]["branches"] == ["refs/heads/dev"]
        assert hit[0]["repository"] == env["url"].split("//", 1)[1].removesuffix(".git")
        assert s.search("devonly_marker rev:main")["files"] == []
        assert [f["fileName"]["text"] for f in s.search("rev:release RELEASE_MARKER")["files"]] == ["src/release.py"]
    finally:
        s.close()
