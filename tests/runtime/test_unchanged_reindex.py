"""A re-index of a repository whose content did not move writes nothing (`builder.build_key`,
`manifest.built_from`): what it would be built from is compared with what its shards were built
from, and only a difference rebuilds. Each case below changes one input of a build and says
whether the next re-index must rebuild; "rebuilt" is read from the index itself (the manifest's
generation and the shard files), and every index answers as a fresh build of the same state would.
No Ray."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from codesearch.globs import PatternList
from codesearch.index import manifest
from codesearch.index.builder import IndexSettings, build_key, index_source
from codesearch.index.compact import compact
from codesearch.index.sources import GitSource, RepoInfo
from codesearch.search.engine import Searcher
from tests.corpus import make_local_repo

SETTINGS = IndexSettings(ctags=False)


def _git(repo: str, *args: str) -> None:
    subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True)


def _commit(repo: str, name: str, text: str) -> None:
    with open(os.path.join(repo, name), "w") as f:
        f.write(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"change {name}")


def _index(repo: str, ix: str, settings: IndexSettings = SETTINGS, info: RepoInfo | None = None, **globs):
    source = GitSource(repo, repo=info or RepoInfo(name="git.local/app", id=7), **globs)
    try:
        return index_source(source, ix, settings)
    finally:
        source.close()


def _state(ix: str) -> tuple[int, list[str]]:
    """The manifest's generation and the shard files: what a rebuild changes."""
    data = manifest.read_manifest(ix)
    assert data is not None
    return data["generation"], sorted(f for f in os.listdir(ix) if f.endswith(".shard"))


def _entry(ix: str, repo_id: int) -> dict:
    data = manifest.read_manifest(ix)
    assert data is not None
    return dict(data["repos"][str(repo_id)])


def _found(ix: str, word: str) -> set[str]:
    s = Searcher(ix)
    try:
        return {f["fileName"]["text"] for f in s.search(word)["files"]}
    finally:
        s.close()


@pytest.fixture
def repo(tmp_path) -> str:
    root = make_local_repo(str(tmp_path / "app"), {"a.py": "alpha = 1\n", "b.py": "beta = 2\n"})
    _git(root, "branch", "dev")
    _git(root, "tag", "v1")
    return root


def test_an_unchanged_repository_is_not_rebuilt(repo, tmp_path):
    ix = str(tmp_path / "ix")
    first = _index(repo, ix)
    assert first.unchanged == 0 and first.shards
    before = _state(ix)
    mtime = os.stat(os.path.join(ix, manifest.MANIFEST)).st_mtime_ns
    again = _index(repo, ix)
    assert again.unchanged == 1 and again.shards == [] and again.files == 0
    assert _state(ix) == before
    assert os.stat(os.path.join(ix, manifest.MANIFEST)).st_mtime_ns == mtime  # not even rewritten
    assert _found(ix, "alpha") == {"a.py"}


def _new_commit(repo, _settings):
    _commit(repo, "c.py", "gamma = 3\n")


def _new_commit_on_an_indexed_branch(repo, _settings):
    _git(repo, "checkout", "-q", "dev")
    _commit(repo, "d.py", "delta = 4\n")
    _git(repo, "checkout", "-q", "main")


def _branch_moved_back(repo, _settings):
    _commit(repo, "c.py", "gamma = 3\n")
    _git(repo, "reset", "-q", "--hard", "HEAD~1")


def _unindexed_branch(repo, _settings):
    _git(repo, "checkout", "-q", "-b", "scratch")
    _commit(repo, "e.py", "epsilon = 5\n")
    _git(repo, "checkout", "-q", "main")


#: (what happens between two re-indexes, the settings of the second, rebuilt?)
CASES = [
    ("nothing", lambda repo, s: None, SETTINGS, False),
    ("a branch not indexed gets a commit", _unindexed_branch, SETTINGS, False),
    ("the default branch gets a commit", _new_commit, SETTINGS, True),
    ("an indexed branch gets a commit", _new_commit_on_an_indexed_branch, SETTINGS, True),
    ("a commit made and taken back", _branch_moved_back, SETTINGS, False),
    ("a larger file size limit", lambda repo, s: None, IndexSettings(ctags=False, max_file_size=1 << 22), True),
    ("a smaller trigram limit", lambda repo, s: None, IndexSettings(ctags=False, max_trigram_count=50), True),
    ("always-index patterns", lambda repo, s: None, IndexSettings(ctags=False, always_index=PatternList(["*.py"])), True),
]


@pytest.mark.parametrize(("what", "change", "settings", "rebuilt"), CASES, ids=[c[0] for c in CASES])
def test_what_rebuilds(repo, tmp_path, what, change, settings, rebuilt):
    ix = str(tmp_path / "ix")
    _index(repo, ix, branch_globs=["dev"])
    before = _state(ix)
    change(repo, settings)
    stats = _index(repo, ix, settings, branch_globs=["dev"])
    assert (stats.unchanged == 0) is rebuilt, what
    assert (_state(ix) != before) is rebuilt, what
    # whatever happened, the index answers as a fresh build of this state does
    fresh = str(tmp_path / "fresh")
    _index(repo, fresh, settings, branch_globs=["dev"])
    for word in ("alpha", "beta", "gamma", "delta", "epsilon"):
        assert _found(ix, word) == _found(fresh, word), (what, word)


@pytest.mark.parametrize(
    ("what", "second"),
    [
        ("another revision set", {"branch_globs": ["dev"]}),
        ("tags as well", {"tag_globs": ["v*"]}),
        ("another display name", {"info": RepoInfo(name="git.local/app", id=7, display_name="renamed")}),
        ("another web URL", {"info": RepoInfo(name="git.local/app", id=7, web_url="https://example.com/app")}),
    ],
)
def test_what_the_shards_record_about_the_repository_rebuilds_too(repo, tmp_path, what, second):
    ix = str(tmp_path / "ix")
    _index(repo, ix)
    assert _index(repo, ix, **second).unchanged == 0, what
    assert _index(repo, ix, **second).unchanged == 1, what  # and once built, it is unchanged again


@pytest.mark.parametrize(
    ("what", "damage"),
    [
        ("a shard file lost", lambda ix, shards: os.unlink(os.path.join(ix, shards[0]))),
        ("a shard file of another format", lambda ix, shards: _patch(os.path.join(ix, shards[0]), 4, b"\xff")),
        ("a manifest without the key (an older codesearch)", lambda ix, shards: _drop_keys(ix)),
    ],
)
def test_an_index_that_is_not_as_built_is_rebuilt(repo, tmp_path, what, damage):
    ix = str(tmp_path / "ix")
    _index(repo, ix)
    damage(ix, _state(ix)[1])
    assert manifest.built_from(ix, 7) is None, what
    assert _index(repo, ix).unchanged == 0, what
    assert _found(ix, "alpha") == {"a.py"}


def _patch(path: str, at: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)


def _drop_keys(ix: str) -> None:
    path = os.path.join(ix, manifest.MANIFEST)
    with open(path) as f:
        data = json.load(f)
    for entry in data["repos"].values():
        entry.pop("builtFrom", None)
    with open(path, "w") as f:
        json.dump(data, f)


def test_compaction_keeps_the_key(tmp_path):
    """Compaction moves documents into compound shards without changing them: afterwards the
    repositories are still unchanged, and a changed one is rebuilt out of its compound shard."""
    ix = str(tmp_path / "ix")
    repos = [make_local_repo(str(tmp_path / f"r{i}"), {f"f{i}.py": f"word{i} = {i}\n"}) for i in range(4)]
    infos = [RepoInfo(name=f"git.local/r{i}", id=10 + i) for i in range(4)]
    for root, info in zip(repos, infos, strict=True):
        _index(root, ix, info=info)
    assert compact(ix, SETTINGS).merged_shards >= 2
    data = manifest.read_manifest(ix)
    assert data is not None and len(data["shards"]) < 4  # the four small shards were merged
    before = _state(ix)
    assert all(_index(root, ix, info=info).unchanged == 1 for root, info in zip(repos, infos, strict=True))
    assert _state(ix) == before
    _commit(repos[2], "f2.py", "word2 = 'moved'\n")
    assert _index(repos[2], ix, info=infos[2]).unchanged == 0
    assert _found(ix, "moved") == {"f2.py"} and _found(ix, "word3") == {"f3.py"}


def test_a_plain_directory_has_no_key_and_is_always_rebuilt(tmp_path):
    from codesearch.index.sources import DirectorySource

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("alpha\n")
    source = DirectorySource(str(tmp_path / "src"))
    assert build_key(source, SETTINGS) is None
    ix = str(tmp_path / "ix")
    assert index_source(source, ix, SETTINGS).unchanged == 0
    assert index_source(source, ix, SETTINGS).unchanged == 0


def test_the_indexer_re_indexes_unchanged_repositories_without_writing_a_shard(tmp_path):
    """The periodic re-index as the service runs it (`RepoIndexer` jobs over a state store): a
    local repository and one mirrored over git smart HTTP on 127.0.0.1, indexed, then re-indexed
    with nothing moved: the mirror is fetched (a ref comparison), no shard is written and the
    manifest is untouched; then a push to one of them rebuilds that one only."""
    from codesearch.runtime.workers import RepoIndexer, RuntimeOptions
    from codesearch.statuses import IndexStatus
    from codesearch.store import Store
    from tests.githttp import GitHttpServer, make_bare_repo

    data = str(tmp_path / "data")
    store = Store.open(data)
    local = make_local_repo(str(tmp_path / "local"), {"l.py": "local_word = 1\n"})
    upstream = str(tmp_path / "upstream")
    bare = make_bare_repo(upstream, "acme/remote.git", {"r.py": "remote_word = 1\n"})
    with GitHttpServer(upstream) as server:
        store.upsert_connection("local", "git", {"type": "git", "url": "file://" + local})
        store.upsert_connection("acme", "git", {"type": "git", "url": server.url("acme/remote.git")})
        ids = store.upsert_repos("local", [dict(name="git.local/local", code_host_type="genericGitHost",
                                                clone_url="file://" + local, local_path=local, default_branch="main")]).ids
        ids.update(store.upsert_repos("acme", [dict(name="git.local/remote", code_host_type="genericGitHost",
                                                    clone_url=server.url("acme/remote.git"),
                                                    default_branch="main")]).ids)

        def run_jobs() -> None:
            indexer = RepoIndexer(data, "unchanged-indexer", RuntimeOptions(heartbeat_s=0.05))
            try:
                while indexer.run_once():
                    pass
            finally:
                indexer.close()

        def index_all() -> None:
            for repo_id in ids.values():
                store.enqueue_index_job(repo_id)
            run_jobs()
            for name, repo_id in ids.items():
                row = store.get_repo(repo_id)
                assert row.index_status == IndexStatus.INDEXED, f"{name}: {row.last_error}"

        ix = os.path.join(data, "index")
        index_all()
        before = _state(ix)
        index_all()
        assert _state(ix) == before  # nothing rewritten, not even the manifest's generation
        # a push upstream: the mirror fetches it and only that repository is rebuilt
        work = str(tmp_path / "work")
        subprocess.run(["git", "clone", "-q", bare, work], check=True, capture_output=True)
        _git(work, "config", "user.email", "t@example.com")
        _git(work, "config", "user.name", "t")
        _commit(work, "r.py", "remote_word = 'pushed'\n")
        _git(work, "push", "-q", "origin", "main")
        local_entry = _entry(ix, ids["git.local/local"])
        index_all()
        assert _state(ix)[0] == before[0] + 1  # one build: the pushed repository's
        assert _entry(ix, ids["git.local/local"]) == local_entry  # the local one kept its shards
        assert _found(ix, "pushed") == {"r.py"} and _found(ix, "local_word") == {"l.py"}
        # a re-index someone asks for (Settings, POST /api/repos/<id>/reindex) rebuilds even so
        generation = _state(ix)[0]
        store.enqueue_index_job(ids["git.local/local"], force=True, rebuild=True)
        run_jobs()
        assert _state(ix)[0] == generation + 1
        assert _entry(ix, ids["git.local/local"])["generation"] == generation + 1
        assert store.get_repo(ids["git.local/local"]).indexed_revisions  # recorded again


@pytest.mark.parametrize(
    ("what", "setup", "wanted_ref"),
    [
        ("on a branch", lambda repo: None, "refs/heads/main"),
        ("on a branch with slashes", lambda repo: _git(repo, "checkout", "-q", "-b", "release/2.0"), "refs/heads/release/2.0"),
        ("detached", lambda repo: _git(repo, "checkout", "-q", "--detach"), "HEAD"),
        ("refs packed", lambda repo: _git(repo, "pack-refs", "--all"), "refs/heads/main"),
        ("a tag on the same commit", lambda repo: _git(repo, "tag", "v2"), "refs/heads/main"),
    ],
)
def test_the_default_branch_is_read_from_the_ref_files(repo, what, setup, wanted_ref, monkeypatch):
    """`revisions.default_branch`, which every re-index runs, reads HEAD and its branch from the
    ref files (loose or packed) without starting git; the commit date is left for `commit_date`."""
    from codesearch.git import revisions
    from codesearch.git.process import Git

    setup(repo)
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()

    def no_git(*args, **kwargs):
        raise AssertionError("git was started")

    with monkeypatch.context() as m:
        m.setattr(Git, "run", no_git)
        head = revisions.default_branch(os.path.join(repo, ".git"))
    assert (head.ref, head.commit, head.committed_at) == (wanted_ref, commit, None), what
    assert revisions.commit_date(os.path.join(repo, ".git"), commit) is not None


def test_layouts_the_ref_files_do_not_say_plainly_are_asked_of_git(repo, tmp_path):
    """A linked worktree (HEAD in its own folder, refs in the main one) and an unborn branch go to
    git, which answers with the commit date, or says the repository has no commit."""
    from codesearch.git.revisions import default_branch, read_head

    linked = str(tmp_path / "linked")
    _git(repo, "worktree", "add", "-q", "-b", "side", linked)
    git_dir = subprocess.run(["git", "-C", linked, "rev-parse", "--git-dir"], capture_output=True, text=True).stdout.strip()
    assert read_head(git_dir) is None
    head = default_branch(git_dir)
    assert head.ref == "refs/heads/side" and head.committed_at is not None
    empty = str(tmp_path / "empty")
    subprocess.run(["git", "init", "-q", "-b", "main", empty], check=True)
    assert read_head(os.path.join(empty, ".git")) is None
    with pytest.raises(ValueError, match="no commits"):
        default_branch(os.path.join(empty, ".git"))


def test_git_directories_are_recognised_from_their_files(repo, tmp_path):
    """`sources.repo_git_dir` tells a repository from a folder by git's own test, without git:
    a work tree, a bare clone and a linked work tree are repositories; a folder with only a HEAD
    file, or with objects but no refs, is not."""
    from codesearch.index.sources import repo_git_dir

    bare = str(tmp_path / "bare.git")
    subprocess.run(["git", "clone", "-q", "--bare", repo, bare], check=True)
    linked = str(tmp_path / "linked")
    _git(repo, "worktree", "add", "-q", "-b", "other", linked)
    fake = tmp_path / "fake"
    (fake / ".git" / "objects").mkdir(parents=True)
    (fake / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    cases = [(repo, os.path.join(repo, ".git")), (bare, bare), (str(fake), None), (str(plain), None)]
    for path, want in cases:
        assert repo_git_dir(path) == want, path
    assert repo_git_dir(linked) is not None and repo_git_dir(linked).endswith(os.path.join("worktrees", "linked"))
