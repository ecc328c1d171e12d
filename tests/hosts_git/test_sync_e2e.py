"""End to end: a config file with one connection of every kind → repositories listed with the
connection's filters → mirrored over real git smart HTTP (with credentials) → indexed by the
engine → searchable.

Every host is a local fake on 127.0.0.1 that serves real repositories (tests/fakehosts); the
config is a file as a Sourcebot user writes it, with tokens from the environment.
"""

from __future__ import annotations

import json
import io
import re
import os

import pytest

from codesearch.config import load_config
from codesearch.git.mirror import MirrorStore
from codesearch.index.builder import IndexSettings
from codesearch.search.engine import Searcher
from codesearch.sync import sync_connection
from tests.corpus import git
from tests.fakehosts.azuredevops import AdoProject, AdoRepo, FakeAzureDevOps
from tests.fakehosts.bitbucket import CloudRepo, FakeBitbucketCloud, FakeBitbucketServer, ServerProject, ServerRepo
from tests.fakehosts.gerrit import FakeGerrit, GerritProject
from tests.fakehosts.gitea import FakeGitea
from tests.fakehosts.github import FakeGitHub
from tests.fakehosts.gitlab import FakeGitLab
from tests.githttp import GitHttpServer, make_bare_repo

TOKENS = {"GH_TOKEN": "ghp_e2e0000000000000000000000000000000", "GL_TOKEN": "glpat-e2e00000000000000",
          "GT_TOKEN": "e2e0123456789abcdef0123456789abcdef0123", "BBC_TOKEN": "bbc-e2e-token",
          "BBS_TOKEN": "bbs-e2e-token", "ADO_PAT": "ado-e2e-pat"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Every fake host, each with one repository that the config selects and one it excludes."""
    base = tmp_path_factory.mktemp("e2e")
    t = TOKENS
    servers = [
        GitHttpServer(str(base / "gh-git"), users={("x-access-token", t["GH_TOKEN"])}),
        GitHttpServer(str(base / "gl-git"), users={("oauth2", t["GL_TOKEN"])}),
        GitHttpServer(str(base / "gt-git"), users={(t["GT_TOKEN"], "")}),
    ]
    for s in servers:
        s.start()
    gh = FakeGitHub(t["GH_TOKEN"], "alice", page_size=1, git=servers[0]).start()
    gh.add_org("acme", members=("alice",))
    gh.add_repo("acme", "widgets", topics=("backend",))
    gh.add_repo("acme", "old", archived=True)
    gl = FakeGitLab(t["GL_TOKEN"], "alice", page_size=1, git=servers[1]).start()
    gl.add_group("grp", members=("alice",))
    gl.add_project("grp/sub/proj")
    gl.add_project("grp/attic", archived=True)
    gt = FakeGitea(t["GT_TOKEN"], "carol", max_items=1, git=servers[2]).start()
    gt.add_org("team", members=("carol",))
    gt.add_repo("team", "app")
    gt.add_repo("team", "app-fork", fork=True)
    gerrit = FakeGerrit(str(base / "gerrit"), [GerritProject("platform/build"), GerritProject("frozen", state="READ_ONLY")]).__enter__()
    bbc = FakeBitbucketCloud(str(base / "bbc"), [CloudRepo("ws", "cloudy", "PRJ"), CloudRepo("ws", "cloudy-fork", "PRJ", fork_of="ws/cloudy")],
                             tokens={t["BBC_TOKEN"]}).__enter__()
    bbs = FakeBitbucketServer(str(base / "bbs"), [ServerProject("CORE")],
                              [ServerRepo("CORE", "svc"), ServerRepo("CORE", "legacy", archived=True)], tokens={t["BBS_TOKEN"]}).__enter__()
    ado = FakeAzureDevOps(str(base / "ado"), {"org": [AdoProject("Big Project", repos=[AdoRepo("web"), AdoRepo("off", disabled=True)])]},
                          pat=t["ADO_PAT"]).__enter__()
    # A generic git host (anonymous) and two local repositories matched by a file:// glob.
    anon = GitHttpServer(str(base / "anon-git")).start()
    make_bare_repo(anon.root, "pub/thing.git", {"README.md": "# pub/thing\n"}, branches={"feature": {"f.txt": "feature only\n"}})
    local_root = base / "local"
    for name in ("one", "two"):
        work = local_root / name
        work.mkdir(parents=True)
        (work / "README.md").write_text(f"# local {name}\n")
        git(str(work), "init", "-q", "-b", "main")
        git(str(work), "add", "-A")
        git(str(work), "commit", "-q", "-m", "init")
    config = {
        "$schema": "https://raw.githubusercontent.com/sourcebot-dev/sourcebot/main/schemas/v3/index.json",
        "connections": {
            "gh": {"type": "github", "url": gh.base_url, "token": {"env": "GH_TOKEN"}, "orgs": ["acme"], "exclude": {"archived": True}},
            "gl": {"type": "gitlab", "url": gl.base_url, "token": {"env": "GL_TOKEN"}, "groups": ["grp"], "exclude": {"archived": True}},
            "gt": {"type": "gitea", "url": gt.base_url, "token": {"env": "GT_TOKEN"}, "orgs": ["team"], "exclude": {"forks": True}},
            "gerrit": {"type": "gerrit", "url": gerrit.url, "exclude": {"readOnly": True}},
            "bbc": {"type": "bitbucket", "url": bbc.url, "token": {"env": "BBC_TOKEN"},
                    "workspaces": ["ws"], "exclude": {"forks": True}},
            "bbs": {"type": "bitbucket", "deploymentType": "server", "url": bbs.url,
                    "token": {"env": "BBS_TOKEN"}, "projects": ["CORE"], "exclude": {"archived": True}},
            "ado": {"type": "azuredevops", "deploymentType": "server", "url": ado.url,
                    "token": {"env": "ADO_PAT"}, "orgs": ["org"], "exclude": {"disabled": True}},
            "anon": {"type": "git", "url": anon.url("pub/thing"), "revisions": {"branches": ["feature"]}},
            "local": {"type": "git", "url": f"file://{local_root}/*"},
        },
    }
    path = base / "config.json"
    path.write_text("// written as a Sourcebot user would\n" + json.dumps(config, indent=2))
    yield {"config": str(path), "base": base}
    for s in (gh, gl, gt):
        s.stop()
    for f in (gerrit, bbc, bbs, ado):
        f.__exit__(None, None, None)
    for s in servers + [anon]:
        s.stop()


@pytest.fixture(scope="module")
def synced(world, monkeypatch_module):
    for k, v in TOKENS.items():
        monkeypatch_module.setenv(k, v)
    cfg = load_config(world["config"])
    index_dir = str(world["base"] / "index")
    mirrors = MirrorStore(str(world["base"] / "repos"), timeout_s=60)
    settings = IndexSettings(ctags=False)
    reports = {name: sync_connection(name, conn.raw, mirrors=mirrors, index_dir=index_dir, index_settings=settings)
               for name, conn in cfg.connections.items()}
    return reports, Searcher(index_dir), mirrors


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


EXPECTED = {  # connection → (display names indexed, display names excluded by its filters)
    "gh": ({"acme/widgets"}, {"acme/old"}),
    "gl": ({"grp/sub/proj"}, {"grp/attic"}),
    "gt": ({"team/app"}, {"team/app-fork"}),
    "gerrit": ({"platform/build"}, {"frozen"}),
    "bbc": ({"ws/PRJ/cloudy"}, {"ws/PRJ/cloudy-fork"}),
    "bbs": ({"CORE/svc"}, {"CORE/legacy"}),
    "ado": ({"Big Project/web"}, {"Big Project/off"}),
    "anon": ({"pub/thing"}, set()),
}


@pytest.mark.parametrize("connection", sorted(EXPECTED))
def test_each_connection_lists_mirrors_and_indexes(synced, connection):
    reports, searcher, _ = synced
    report = reports[connection]
    assert not report.failed, report.failed
    names = {r.name.split("/", 1)[1] for r in report.repos}
    want, excluded = EXPECTED[connection]
    assert want <= names and not (excluded & names), (names, report.warnings)
    for repo in report.repos:
        resp = searcher.search(f'reposet:"{repo.name}" file:README', matches=10)
        assert [f["fileName"]["text"] for f in resp["files"]] == ["README.md"], repo.name
        assert resp["repositoryInfo"][0]["codeHostType"] == repo.code_host_type


def test_local_repositories_are_indexed_in_place(synced, world):
    reports, searcher, mirrors = synced
    report = reports["local"]
    assert len(report.repos) == 2 and not report.failed
    assert all(r.local_path for r in report.repos)
    resp = searcher.search("local one", matches=10)
    assert len(resp["files"]) == 1
    assert not any(r.name.endswith(("one", "two")) for r in report.repos if r.local_path is None)
    assert len(mirrors.list_ids()) == sum(len(r.repos) for n, r in reports.items() if n != "local")  # local repos not cloned


def test_revisions_from_the_config_are_indexed(synced):
    _, searcher, _ = synced
    assert searcher.search("feature only")["files"] == []  # not on the default branch
    resp = searcher.search("rev:feature feature only")
    assert [f["branches"] for f in resp["files"]] == [["refs/heads/feature"]]


def test_no_token_on_disk(synced, world):
    """Mirrors and index never hold a credential."""
    secrets = [v.encode() for v in TOKENS.values()]
    for root in (world["base"] / "repos", world["base"] / "index"):
        for dirpath, _, files in os.walk(root):
            for name in files:
                data = open(os.path.join(dirpath, name), "rb").read()
                assert not any(s in data for s in secrets), os.path.join(dirpath, name)


def test_cli_sync(world, monkeypatch_module, tmp_path, capsys):
    from codesearch.cli import main

    for k, v in TOKENS.items():
        monkeypatch_module.setenv(k, v)
    assert main(["sync", world["config"], "--data-dir", str(tmp_path), "--connection", "gh", "--connection", "anon"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "gh: 1 of 1 repositories indexed" in out and "anon: 1 of 1" in out
    # per-repository progress on stderr, plain lines when it is not a terminal
    progress = [line for line in captured.err.splitlines() if re.match(r"(gh|anon): \[\d+/\d+\] ", line)]
    assert len(progress) == 2 and all("[1/1]" in line for line in progress), captured.err
    assert main(["search", "rev:feature feature only", "--index", str(tmp_path / "index")]) == 0


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("tty, want", [
    (False, "gh: [1/2] github.com/a/long-name\ngh: [2/2] github.com/a/b\n"),
    (True, "\rgh: [1/2] github.com/a/long-name\rgh: [2/2] github.com/a/b        \r" + " " * 24 + "\r"),
])
def test_sync_progress_is_one_line_on_a_terminal_and_plain_lines_in_logs(tty, want):
    from codesearch.cli.sync import RepoProgress

    stream = _Terminal() if tty else io.StringIO()
    progress = RepoProgress("gh", stream)
    progress("github.com/a/long-name", 1, 2)
    progress("github.com/a/b", 2, 2)
    progress.done()
    assert stream.getvalue() == want
