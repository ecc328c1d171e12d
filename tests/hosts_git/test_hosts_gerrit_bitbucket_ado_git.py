"""Adapters for Gerrit, Bitbucket (Cloud and Server), Azure DevOps and generic git, against fakes.

Each host gets a table: a connection config as a Sourcebot user writes it → the set of repo
names it must give (and the warnings). The fakes (tests/fakehosts) serve the real API shapes and
real git repositories, so some tests clone what the adapters list.
"""

from __future__ import annotations

import base64
import os
import subprocess

import httpx
import pytest

from codesearch.errors import HostAuthError, HostError, HostNotFound
from codesearch.hosts import azuredevops, bitbucket, generic, gerrit
from codesearch.hosts.adapters import adapter_for
from codesearch.hosts.http import HostHttp
from tests.corpus import git as run_git
from tests.fakehosts.azuredevops import AdoProject, AdoRepo, FakeAzureDevOps
from tests.fakehosts.bitbucket import CloudRepo, FakeBitbucketCloud, FakeBitbucketServer, ServerProject, ServerRepo
from tests.fakehosts.gerrit import FakeGerrit, GerritProject

# ------------------------------------------------------------------------------------------ helpers

class Waits(list):
    """An injectable `sleep` that records the waits instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def make_http(waits: Waits | None = None, transport=None) -> HostHttp:
    return HostHttp(sleep=waits if waits is not None else Waits(), retries=1, transport=transport, timeout_s=10)


def run(kind: str, conn: dict, token: str | None = None, waits: Waits | None = None, name: str = "conn1"):
    with make_http(waits) as http:
        return adapter_for(kind)(name, {"type": kind, **conn}, token, http)


def clone_readme(url: str, dest: str, header: str | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    if header:
        env.update({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader", "GIT_CONFIG_VALUE_0": header})
    subprocess.run(["git", "clone", "-q", "--bare", url, dest], check=True, capture_output=True, env=env, timeout=60)
    return subprocess.run(["git", "--git-dir", dest, "show", "HEAD:README.md"], check=True, capture_output=True,
                          text=True).stdout


def names(result) -> set[str]:
    return {r.name for r in result.repos}


def check(result, root: str, expected: set[str], warnings: tuple[str, ...] = ()) -> None:
    assert names(result) == {f"{root}/{d}" for d in expected}
    assert len(result.repos) == len(names(result)), "duplicates in the listing"
    for w in warnings:
        assert any(w in x for x in result.warnings), (w, result.warnings)
    if not warnings:
        assert result.warnings == []
    for x in result.warnings:
        assert x.startswith("connection conn1: ")


def test_every_kind_is_registered():
    for kind in ("gerrit", "bitbucket", "azuredevops", "git"):
        assert callable(adapter_for(kind))


# ------------------------------------------------------------------------------------------- gerrit

GERRIT_PROJECTS = [
    GerritProject("platform/build", description="Build system"),
    GerritProject("platform/art"),
    GerritProject("tools/repo"),
    GerritProject("legacy", state="READ_ONLY"),
    GerritProject("secret", state="HIDDEN"),
    GerritProject("docs", default_branch="main"),
]


@pytest.fixture(scope="module")
def fake_gerrit(tmp_path_factory):
    with FakeGerrit(str(tmp_path_factory.mktemp("gerrit")), GERRIT_PROJECTS) as g:
        yield g


ALL_GERRIT = {"platform/build", "platform/art", "tools/repo", "legacy", "secret", "docs"}

GERRIT_CASES = [
    ("all", {}, ALL_GERRIT),
    ("projects-glob", {"projects": ["platform/*"]}, {"platform/build", "platform/art"}),
    ("projects-list", {"projects": ["docs", "legacy", "nothing-*"]}, {"docs", "legacy"}),
    ("exclude-projects", {"exclude": {"projects": ["platform/*", "tools/repo"]}}, {"legacy", "secret", "docs"}),
    ("exclude-readOnly", {"exclude": {"readOnly": True}}, ALL_GERRIT - {"legacy"}),
    ("exclude-hidden", {"exclude": {"hidden": True}}, ALL_GERRIT - {"secret"}),
    ("exclude-all-three", {"projects": ["**"], "exclude": {"readOnly": True, "hidden": True, "projects": ["docs"]}},
     {"platform/build", "platform/art", "tools/repo"}),
    ("special-projects-never", {"projects": ["All-*"]}, set()),
]


@pytest.mark.parametrize("conn,expected", [c[1:] for c in GERRIT_CASES], ids=[c[0] for c in GERRIT_CASES])
def test_gerrit_selection(fake_gerrit, monkeypatch, conn, expected):
    monkeypatch.setattr(gerrit, "PAGE_SIZE", 3)
    result = run("gerrit", {"url": fake_gerrit.url, **conn})
    check(result, f"127.0.0.1:{fake_gerrit.port}", expected)


def test_gerrit_paging_and_wire_format(fake_gerrit, monkeypatch):
    monkeypatch.setattr(gerrit, "PAGE_SIZE", 3)
    fake_gerrit.requests.clear()
    run("gerrit", {"url": fake_gerrit.url + "/"})
    listing = [q for m, p, q, u in fake_gerrit.requests if p == "/projects/"]
    assert [q["S"] for q in listing] == ["0", "3", "6"]  # 8 projects incl. All-Projects/All-Users, pages of 3
    assert all(q["n"] == "3" and "d" in q and "all" in q for q in listing)
    assert all(u == "" for *_, u in fake_gerrit.requests)  # anonymous, never /a/
    # the fake answers like Gerrit: XSSI guard, name-keyed map, HIDDEN only with `all`, plain-text errors
    r = httpx.get(fake_gerrit.url + "/projects/?d")
    assert r.text.startswith(")]}'\n") and r.headers["content-type"].startswith("application/json")
    body = gerrit.parse_gerrit_json(r.text)
    assert "All-Projects" in body and "All-Users" in body and "secret" not in body and "name" not in body["docs"]
    assert body["platform/build"]["id"] == "platform%2Fbuild"
    r = httpx.get(fake_gerrit.url + "/projects/nope")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/plain") and r.text == "Not found: nope"


def test_gerrit_metadata_and_clone(fake_gerrit, tmp_path):
    result = run("gerrit", {"url": fake_gerrit.url, "projects": ["platform/build", "docs"]})
    repo = next(r for r in result.repos if r.display_name == "platform/build")
    assert repo.name == f"127.0.0.1:{fake_gerrit.port}/platform/build"
    assert repo.code_host_type == "gerrit" and repo.public and not repo.fork and not repo.archived
    assert repo.clone_url == f"{fake_gerrit.url}/platform/build"
    assert repo.web_url == f"{fake_gerrit.url}/plugins/gitiles/platform/build"
    assert repo.file_url_template == f"{fake_gerrit.url}/plugins/gitiles/platform/build/+/{{branch}}/{{path}}"
    assert repo.external_id == "platform%2Fbuild" and repo.git_user == "" and repo.default_branch is None
    assert clone_readme(repo.clone_url, str(tmp_path / "c")) == "# platform/build\n"


def test_gerrit_context_path(tmp_path):
    with FakeGerrit(str(tmp_path / "g"), [GerritProject("tools/repo")], prefix="/r") as g:
        [repo] = run("gerrit", {"url": g.url + "/"}).repos
        assert repo.name == f"127.0.0.1:{g.port}/r/tools/repo" and repo.display_name == "tools/repo"
        assert repo.clone_url == f"{g.url}/tools/repo" and repo.web_url == f"{g.url}/plugins/gitiles/tools/repo"
        assert clone_readme(repo.clone_url, str(tmp_path / "c")) == "# tools/repo\n"


def test_gerrit_rate_limit_wait(fake_gerrit):
    waits = Waits()
    fake_gerrit.limit_next(1, retry_after="2")
    result = run("gerrit", {"url": fake_gerrit.url}, waits=waits)
    assert waits == [2.0] and len(result.repos) == len(ALL_GERRIT)


def test_gerrit_errors(fake_gerrit):
    with pytest.raises(HostNotFound):
        run("gerrit", {"url": fake_gerrit.url + "/not-gerrit"})
    with pytest.raises(HostError):
        run("gerrit", {"url": "http://127.0.0.1:9"})  # nothing listens there


# ------------------------------------------------------------------------------------ bitbucket cloud

CLOUD_TOKEN = "cloud-token-XYZ"
CLOUD_REPOS = [
    CloudRepo("acme", "api", "CORE", size=123456),
    CloudRepo("acme", "web", "WEB"),
    CloudRepo("acme", "api-fork", "CORE", fork_of="acme/api"),
    CloudRepo("acme", "secret", "CORE", private=True),
    CloudRepo("acme", "empty", "WEB", mainbranch=None),
    CloudRepo("beta", "tool", "TOOLS", mainbranch="develop"),
]


@pytest.fixture(scope="module")
def fake_cloud(tmp_path_factory):
    with FakeBitbucketCloud(str(tmp_path_factory.mktemp("bbc")), CLOUD_REPOS, workspaces=["hollow"],
                            tokens={CLOUD_TOKEN}, basic={("alice@example.com", "api-token")}) as f:
        yield f


ACME = {"acme/CORE/api", "acme/WEB/web", "acme/CORE/api-fork", "acme/CORE/secret", "acme/WEB/empty"}

CLOUD_CASES = [
    ("workspaces", {"workspaces": ["acme"]}, ACME, ()),
    ("two-workspaces-exclude-forks", {"workspaces": ["acme", "beta"], "exclude": {"forks": True}},
     ACME - {"acme/CORE/api-fork"} | {"beta/TOOLS/tool"}, ()),
    ("projects", {"projects": ["acme/CORE"]}, {"acme/CORE/api", "acme/CORE/api-fork", "acme/CORE/secret"}, ()),
    ("repos", {"repos": ["acme/api", "beta/tool"]}, {"acme/CORE/api", "beta/TOOLS/tool"}, ()),
    ("dedup", {"workspaces": ["acme"], "projects": ["acme/CORE"], "repos": ["acme/api", "acme/web"]}, ACME, ()),
    ("exclude-repos-globs", {"workspaces": ["acme", "beta"], "exclude": {"repos": ["acme/CORE/*", "**/tool"]}},
     {"acme/WEB/web", "acme/WEB/empty"}, ()),
    ("exclude-archived-ignored-on-cloud", {"repos": ["acme/api"], "exclude": {"archived": True}}, {"acme/CORE/api"}, ()),
    ("all-ignored-on-cloud", {"all": True}, set(), ()),
    ("missing-workspace", {"workspaces": ["nope", "beta"]}, {"beta/TOOLS/tool"}, ("workspace 'nope' not found",)),
    ("missing-repo-and-project", {"repos": ["acme/missing", "acme/web", "bad"], "projects": ["acme/NOPE", "nope/X"]},
     {"acme/WEB/web"}, ("repo 'acme/missing' not found", "project 'acme/NOPE'", "workspace 'nope'", "'bad' is not")),
    ("empty-workspace", {"workspaces": ["hollow"]}, set(), ()),
]


@pytest.mark.parametrize("conn,expected,warnings", [c[1:] for c in CLOUD_CASES], ids=[c[0] for c in CLOUD_CASES])
def test_bitbucket_cloud_selection(fake_cloud, conn, expected, warnings):
    result = run("bitbucket", {"url": fake_cloud.url, **conn}, CLOUD_TOKEN)
    check(result, f"127.0.0.1:{fake_cloud.port}", expected, warnings)


def test_bitbucket_cloud_paging_and_auth(fake_cloud):
    fake_cloud.requests.clear()
    run("bitbucket", {"url": fake_cloud.url, "workspaces": ["acme"]}, CLOUD_TOKEN)
    pages = [q.get("page", "1") for m, p, q, a in fake_cloud.requests]
    assert pages == ["1", "2", "3"]  # 5 repos, pages of 2, `next` absent on the last
    assert {a for *_, a in fake_cloud.requests} == {"bearer"}
    fake_cloud.requests.clear()
    result = run("bitbucket", {"url": fake_cloud.url, "user": "alice@example.com", "gitUser": "alice",
                               "projects": ["acme/CORE"]}, "api-token")
    assert {a for *_, a in fake_cloud.requests} == {"basic"}
    assert fake_cloud.requests[0][2]["q"] == 'project.key="CORE"'
    assert all(r.git_user == "alice" for r in result.repos)
    assert all("@" not in r.clone_url for r in result.repos)  # the https link carries "alice@": removed


def test_bitbucket_cloud_metadata_and_clone(fake_cloud, tmp_path):
    result = run("bitbucket", {"url": fake_cloud.url, "workspaces": ["acme"], "repos": ["beta/tool"]}, CLOUD_TOKEN)
    by = {r.display_name: r for r in result.repos}
    api = by["acme/CORE/api"]
    assert api.name == f"127.0.0.1:{fake_cloud.port}/acme/CORE/api" and api.code_host_type == "bitbucketCloud"
    assert api.default_branch == "main" and api.size_bytes == 123456 and api.public and not api.fork
    assert api.web_url == f"{fake_cloud.base}/acme/api"
    assert api.file_url_template == f"{fake_cloud.base}/acme/api/src/{{branch}}/{{path}}"
    assert api.clone_url == f"http://127.0.0.1:{fake_cloud.git.port}/acme/api.git"
    assert api.external_id.startswith("{") and api.git_user == "x-token-auth"
    assert by["acme/CORE/api-fork"].fork and not by["acme/CORE/secret"].public
    assert by["acme/WEB/empty"].default_branch is None and by["beta/TOOLS/tool"].default_branch == "develop"
    assert clone_readme(by["beta/TOOLS/tool"].clone_url, str(tmp_path / "c")) == "# tool\n"


def test_bitbucket_cloud_anonymous_and_bad_credentials(fake_cloud):
    result = run("bitbucket", {"url": fake_cloud.url, "workspaces": ["acme"]})
    check(result, f"127.0.0.1:{fake_cloud.port}", ACME - {"acme/CORE/secret"})
    with pytest.raises(HostAuthError):  # a private repo without credentials: 403
        run("bitbucket", {"url": fake_cloud.url, "repos": ["acme/secret"]})
    with pytest.raises(HostAuthError) as e:
        run("bitbucket", {"url": fake_cloud.url, "workspaces": ["acme"]}, "wrong-token-SECRET")
    assert "SECRET" not in str(e.value) and e.value.status == 401


def test_bitbucket_cloud_rate_limit(fake_cloud):
    waits = Waits()
    fake_cloud.limit_next(1)  # 429 without Retry-After (Bitbucket Cloud's usual): HostHttp backs off
    result = run("bitbucket", {"url": fake_cloud.url, "repos": ["acme/api"]}, CLOUD_TOKEN, waits)
    assert waits == [1.0] and len(result.repos) == 1
    fake_cloud.limit_next(1, {"Retry-After": "5"})
    result = run("bitbucket", {"url": fake_cloud.url, "workspaces": ["beta"]}, CLOUD_TOKEN, waits)
    assert waits == [1.0, 5.0] and len(result.repos) == 1


def test_bitbucket_cloud_default_url_and_name():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json={"pagelen": 10, "values": [{
            "full_name": "acme/api", "uuid": "{1}", "is_private": False, "project": {"key": "CORE"},
            "links": {"html": {"href": "https://bitbucket.org/acme/api"},
                      "clone": [{"name": "https", "href": "https://bob@bitbucket.org/acme/api.git"}]}}]})

    with make_http(transport=httpx.MockTransport(handler)) as http:
        result = bitbucket.list_bitbucket("c", {"type": "bitbucket", "workspaces": ["acme"]}, "t", http)
    assert seen[0].startswith("https://api.bitbucket.org/2.0/repositories/acme?")
    assert names(result) == {"bitbucket.org/acme/CORE/api"}
    assert result.repos[0].clone_url == "https://bitbucket.org/acme/api.git"


# ----------------------------------------------------------------------------------- bitbucket server

BBS_TOKEN = "bbs-token-XYZ"
BBS_PROJECTS = [ServerProject("CORE"), ServerProject("PUB", public=True), ServerProject("LOCKED", readers={"bob"}),
                ServerProject("~ALICE")]
BBS_REPOS = [
    ServerRepo("CORE", "api"),
    ServerRepo("CORE", "api-fork", fork_of="CORE/api"),
    ServerRepo("CORE", "old", archived=True),
    ServerRepo("PUB", "site", public=True),
    ServerRepo("PUB", "docs"),
    ServerRepo("LOCKED", "vault"),
    ServerRepo("~ALICE", "scratch"),
]


@pytest.fixture(scope="module")
def fake_bbs(tmp_path_factory):
    with FakeBitbucketServer(str(tmp_path_factory.mktemp("bbs")), BBS_PROJECTS, BBS_REPOS, tokens={BBS_TOKEN},
                             basic={("bob", "bob-pw")}) as f:
        yield f


BBS_ALL = {"CORE/api", "CORE/api-fork", "CORE/old", "PUB/site", "PUB/docs", "~ALICE/scratch"}

BBS_CASES = [
    ("all", {"all": True}, BBS_ALL, ()),
    ("all-exclude-archived-forks", {"all": True, "exclude": {"archived": True, "forks": True}},
     BBS_ALL - {"CORE/old", "CORE/api-fork"}, ()),
    ("projects", {"projects": ["CORE"]}, {"CORE/api", "CORE/api-fork", "CORE/old"}, ()),
    ("repos", {"repos": ["PUB/site", "CORE/api"]}, {"PUB/site", "CORE/api"}, ()),
    ("exclude-repos", {"all": True, "exclude": {"repos": ["CORE/*", "*/docs"]}}, {"PUB/site", "~ALICE/scratch"}, ()),
    ("dedup", {"all": True, "projects": ["CORE", "PUB"], "repos": ["CORE/api"]}, BBS_ALL, ()),
    ("missing", {"projects": ["NOPE", "PUB"], "repos": ["CORE/nope", "slugonly"]}, {"PUB/site", "PUB/docs"},
     ("project 'NOPE' not found", "repo 'CORE/nope' not found", "'slugonly' is not")),
    ("workspaces-do-not-exist", {"workspaces": ["acme"], "repos": ["PUB/site"]}, {"PUB/site"}, ("workspaces",)),
    ("nothing-selected", {}, set(), ()),
]


@pytest.mark.parametrize("conn,expected,warnings", [c[1:] for c in BBS_CASES], ids=[c[0] for c in BBS_CASES])
def test_bitbucket_server_selection(fake_bbs, conn, expected, warnings):
    result = run("bitbucket", {"deploymentType": "server", "url": fake_bbs.url, **conn}, BBS_TOKEN)
    check(result, f"127.0.0.1:{fake_bbs.port}", expected, warnings)


def test_bitbucket_server_paging(fake_bbs):
    fake_bbs.requests.clear()
    run("bitbucket", {"deploymentType": "server", "url": fake_bbs.url, "all": True}, BBS_TOKEN)
    assert [q["start"] for m, p, q, a in fake_bbs.requests] == ["0", "2", "4"]
    assert all(q["archived"] == "ALL" and p == "/rest/api/1.0/repos" for m, p, q, a in fake_bbs.requests)
    assert {a for *_, a in fake_bbs.requests} == {"bearer"}
    # the fake's /repos default is ACTIVE only, as the server's
    body = httpx.get(fake_bbs.url + "/rest/api/1.0/repos?limit=100", headers={"Authorization": f"Bearer {BBS_TOKEN}"}).json()
    assert "old" not in {v["slug"] for v in body["values"]}


def test_bitbucket_server_permissions(fake_bbs):
    with pytest.raises(HostAuthError) as e:  # no read permission on a project: 401
        run("bitbucket", {"deploymentType": "server", "url": fake_bbs.url, "projects": ["LOCKED"]}, BBS_TOKEN)
    assert e.value.status == 401
    result = run("bitbucket", {"deploymentType": "server", "url": fake_bbs.url, "user": "bob", "projects": ["LOCKED"]},
                 "bob-pw")
    check(result, f"127.0.0.1:{fake_bbs.port}", {"LOCKED/vault"})
    assert result.repos[0].git_user == "bob"
    anonymous = run("bitbucket", {"deploymentType": "server", "url": fake_bbs.url, "all": True})
    check(anonymous, f"127.0.0.1:{fake_bbs.port}", {"PUB/site", "PUB/docs"})
    with pytest.raises(HostAuthError) as e:
        run("bitbucket", {"deploymentType": "server", "url": fake_bbs.url, "all": True}, "bad-SECRET")
    assert "SECRET" not in str(e.value)
    with pytest.raises(HostError):
        run("bitbucket", {"deploymentType": "server", "all": True}, BBS_TOKEN)  # server needs a url


def test_bitbucket_server_metadata_and_clone(fake_bbs, tmp_path):
    result = run("bitbucket", {"deploymentType": "server", "url": fake_bbs.url, "all": True}, BBS_TOKEN)
    by = {r.display_name: r for r in result.repos}
    api = by["CORE/api"]
    assert api.name == f"127.0.0.1:{fake_bbs.port}/CORE/api" and api.code_host_type == "bitbucketServer"
    assert api.clone_url == f"http://127.0.0.1:{fake_bbs.git.port}/scm/core/api.git"
    assert api.web_url == f"{fake_bbs.url}/projects/CORE/repos/api"
    assert api.file_url_template == f"{fake_bbs.url}/projects/CORE/repos/api/browse/{{path}}?at={{branch}}"
    assert not api.public and not api.fork and not api.archived and api.git_user == "x-token-auth"
    assert api.external_id == "1" and api.default_branch is None
    assert by["CORE/api-fork"].fork and by["CORE/old"].archived and by["PUB/site"].public
    assert by["~ALICE/scratch"].web_url == f"{fake_bbs.url}/users/alice/repos/scratch"
    assert clone_readme(by["PUB/site"].clone_url, str(tmp_path / "c")) == "# site\n"


def test_bitbucket_server_rate_limit(fake_bbs):
    waits = Waits()
    fake_bbs.limit_next(2)
    result = run("bitbucket", {"deploymentType": "server", "url": fake_bbs.url, "repos": ["CORE/api"]}, BBS_TOKEN, waits)
    assert waits == [2.0, 2.0] and len(result.repos) == 1


# ------------------------------------------------------------------------------------- azure devops

PAT = "ado-pat-XYZ"


def ado_orgs():
    return {
        "acme": [
            AdoProject("Web App", visibility="public", repos=[
                AdoRepo("site", size=5000), AdoRepo("site-fork", fork_of="site"), AdoRepo("big", size=10_000_000),
                AdoRepo("frozen", disabled=True), AdoRepo("empty", default_branch=None)]),
            AdoProject("Backend", repos=[AdoRepo("api", default_branch="develop"), AdoRepo("worker")]),
            AdoProject("Data", repos=[AdoRepo("etl")]),
            AdoProject("Zeta", repos=[AdoRepo("z")]),
        ],
        "beta": [AdoProject("Backend", repos=[AdoRepo("api")]), AdoProject("Other", repos=[AdoRepo("tool")])],
    }


@pytest.fixture(scope="module")
def fake_ado(tmp_path_factory):
    with FakeAzureDevOps(str(tmp_path_factory.mktemp("ado")), ado_orgs(), pat=PAT) as f:
        yield f


ACME_ADO = {"Web App/site", "Web App/site-fork", "Web App/big", "Web App/frozen", "Web App/empty", "Backend/api",
            "Backend/worker", "Data/etl", "Zeta/z"}

ADO_CASES = [
    ("orgs", {"orgs": ["acme"]}, ACME_ADO, ()),
    ("exclude-disabled-and-size", {"orgs": ["acme"], "exclude": {"disabled": True, "size": {"min": 3000, "max": 1_000_000}}},
     {"Web App/site", "Web App/empty"}, ()),
    ("projects-with-space", {"projects": ["acme/Web App"]},
     {"Web App/site", "Web App/site-fork", "Web App/big", "Web App/frozen", "Web App/empty"}, ()),
    ("repos", {"repos": ["acme/Backend/api", "acme/Web App/site"]}, {"Backend/api", "Web App/site"}, ()),
    ("exclude-projects-repos", {"orgs": ["acme"], "exclude": {"projects": ["Web*", "Z*"], "repos": ["Backend/w*"]}},
     {"Backend/api", "Data/etl"}, ()),
    ("dedup", {"orgs": ["acme"], "projects": ["acme/Data"], "repos": ["acme/Zeta/z"]}, ACME_ADO, ()),
    ("missing", {"orgs": ["nope"], "projects": ["acme/Nope", "acme/Data", "noslash"], "repos": ["acme/Backend/nope"]},
     {"Data/etl"}, ("organization 'nope'", "project 'acme/Nope'", "repo 'acme/Backend/nope'", "'noslash' is not")),
    ("org-collision", {"orgs": ["acme", "beta"], "exclude": {"projects": ["Web App", "Zeta", "Data"]}},
     {"Backend/api", "Backend/worker", "Other/tool"}, ("listed twice",)),
]


@pytest.mark.parametrize("conn,expected,warnings", [c[1:] for c in ADO_CASES], ids=[c[0] for c in ADO_CASES])
def test_azuredevops_selection(fake_ado, conn, expected, warnings):
    result = run("azuredevops", {"deploymentType": "cloud", "url": fake_ado.url, **conn}, PAT)
    check(result, f"127.0.0.1:{fake_ado.port}", expected, warnings)


def test_azuredevops_paging_and_requests(fake_ado):
    fake_ado.requests.clear()
    run("azuredevops", {"deploymentType": "cloud", "url": fake_ado.url, "orgs": ["acme"]}, PAT)
    projects = [q for m, p, q, a in fake_ado.requests if p == "/acme/_apis/projects"]
    assert len(projects) == 2 and "continuationToken" not in projects[0] and projects[1]["continuationToken"]
    assert all(q["api-version"] == "7.1" and a == "ok" for m, p, q, a in fake_ado.requests)
    fake_ado.requests.clear()
    run("azuredevops", {"deploymentType": "cloud", "url": fake_ado.url, "projects": ["acme/Web App"]}, PAT)
    assert fake_ado.requests[0][1] == "/acme/Web%20App/_apis/git/repositories"
    # the fake: the continuation token comes in a header, the envelope is {count, value}
    auth = {"Authorization": "Basic " + base64.b64encode(f":{PAT}".encode()).decode()}
    r = httpx.get(f"{fake_ado.url}/acme/_apis/projects?api-version=7.1", headers=auth)
    assert r.headers["x-ms-continuationtoken"] and r.json()["count"] == 2 and "continuationToken" not in r.json()


def test_azuredevops_metadata_and_clone(fake_ado, tmp_path):
    result = run("azuredevops", {"deploymentType": "cloud", "url": fake_ado.url, "user": "me",
                                 "projects": ["acme/Web App", "acme/Backend"]}, PAT)
    by = {r.display_name: r for r in result.repos}
    site = by["Web App/site"]
    assert site.name == f"127.0.0.1:{fake_ado.port}/Web App/site" and site.code_host_type == "azuredevops"
    assert site.clone_url == f"{fake_ado.url}/acme/Web%20App/_git/site"
    assert site.web_url == f"{fake_ado.url}/acme/Web%20App/_git/site"
    assert site.file_url_template == f"{fake_ado.url}/acme/Web%20App/_git/site?path=/{{path}}&version=GB{{branch}}"
    assert site.default_branch == "main" and site.size_bytes == 5000 and site.public and not site.fork
    assert site.git_user == "me" and len(site.external_id) == 36
    assert by["Web App/site-fork"].fork and by["Web App/empty"].default_branch is None
    assert by["Backend/api"].default_branch == "develop" and not by["Backend/api"].public
    header = "Authorization: Basic " + base64.b64encode(f":{PAT}".encode()).decode()
    assert clone_readme(site.clone_url, str(tmp_path / "c"), header) == "# site\n"


def test_azuredevops_credentials(fake_ado):
    for token in ("wrong-SECRET", None):
        with pytest.raises(HostAuthError) as e:
            run("azuredevops", {"deploymentType": "cloud", "url": fake_ado.url, "orgs": ["acme"]}, token)
        assert "SECRET" not in str(e.value)
    # without the suppress header the service answers 203 with a sign-in page, not 401
    r = httpx.get(f"{fake_ado.url}/acme/_apis/projects?api-version=7.1",
                  headers={"Authorization": "Basic " + base64.b64encode(b":wrong").decode()})
    assert r.status_code == 203 and "text/html" in r.headers["content-type"]

    def sign_in(request):
        return httpx.Response(203, text="<html>Sign in</html>", headers={"content-type": "text/html"})

    with make_http(transport=httpx.MockTransport(sign_in)) as http, pytest.raises(HostAuthError):
        azuredevops.list_azuredevops("c", {"type": "azuredevops", "deploymentType": "cloud", "orgs": ["x"]}, "t", http)


def test_azuredevops_rate_limit(fake_ado):
    waits = Waits()
    fake_ado.limit_next(1)
    result = run("azuredevops", {"deploymentType": "cloud", "url": fake_ado.url, "repos": ["acme/Data/etl"]}, PAT, waits)
    assert waits == [3.0] and names(result) == {f"127.0.0.1:{fake_ado.port}/Data/etl"}


def test_azuredevops_server_tfs_collection(tmp_path):
    orgs = {"DefaultCollection": [AdoProject("Platform", repos=[AdoRepo("core")])]}
    with FakeAzureDevOps(str(tmp_path / "srv"), orgs, pat=PAT, tfs=True, max_api_version="6.0") as srv:
        result = run("azuredevops", {"deploymentType": "server", "url": srv.url, "useTfsPath": True,
                                     "orgs": ["DefaultCollection"]}, PAT)
        check(result, f"127.0.0.1:{srv.port}", {"Platform/core"})
        versions = [q["api-version"] for m, p, q, a in srv.requests]
        assert versions[:2] == ["7.0", "6.0"] and set(versions[2:]) == {"6.0"}  # out of range → older version
        assert all(p.startswith("/tfs/DefaultCollection/") for m, p, q, a in srv.requests)
        assert result.repos[0].clone_url == f"{srv.url}/tfs/DefaultCollection/Platform/_git/core"
        # without useTfsPath the collection is not found there: a warning, not a failure
        missing = run("azuredevops", {"deploymentType": "server", "url": srv.url, "orgs": ["DefaultCollection"]}, PAT)
        assert missing.repos == [] and "DefaultCollection" in missing.warnings[0]


# ---------------------------------------------------------------------------------------------- git

def test_git_remote_url():
    result = run("git", {"url": "https://git.example.com:8443/team/tool.git"})
    [repo] = result.repos
    assert repo.name == "git.example.com:8443/team/tool" and repo.display_name == "team/tool"
    assert repo.clone_url == "https://git.example.com:8443/team/tool.git" and repo.code_host_type == "genericGitHost"
    assert repo.local_path is None and repo.git_user == "" and repo.public
    [plain] = run("git", {"url": "http://host/a/b"}).repos
    assert plain.name == "host/a/b"
    [creds] = run("git", {"url": "https://u:SECRET@host/x.git"}).repos
    assert "SECRET" not in creds.clone_url and creds.name == "host/x"
    with pytest.raises(HostError):
        run("git", {"url": "ftp://host/x"})


@pytest.fixture(scope="module")
def local_repos(tmp_path_factory):
    base = tmp_path_factory.mktemp("local")
    root = base / "repos"
    root.mkdir()
    for name, origin in (("alpha", "https://github.com/acme/alpha.git"), ("gamma", None)):
        work = root / name
        work.mkdir()
        run_git(str(work), "init", "-q", "-b", "main")
        (work / "README.md").write_text(f"# {name}\n")
        (work / "sub").mkdir()
        (work / "sub" / "f.txt").write_text("x")
        run_git(str(work), "add", "-A")
        run_git(str(work), "commit", "-q", "-m", "init")
        if origin:
            run_git(str(work), "remote", "add", "origin", origin)
    from tests.githttp import make_bare_repo
    make_bare_repo(str(root), "beta.git", {"README.md": "# beta\n"}, default="trunk")
    (root / "notrepo").mkdir()
    (root / "file.txt").write_text("not a dir")
    return root


def test_git_local_glob(local_repos):
    result = run("git", {"url": f"file://{local_repos}/*"})
    by = {r.name: r for r in result.repos}
    path_root = str(local_repos).strip("/")
    assert set(by) == {"github.com/acme/alpha", f"{path_root}/beta.git", f"{path_root}/gamma"}
    alpha = by["github.com/acme/alpha"]
    assert alpha.local_path == str(local_repos / "alpha") and alpha.clone_url == (local_repos / "alpha").as_uri()
    assert alpha.display_name == "acme/alpha" and alpha.default_branch == "main"
    beta = by[f"{path_root}/beta.git"]
    assert beta.default_branch == "trunk" and beta.local_path == str(local_repos / "beta.git")
    # without an origin the name is the path, the display name the folder under the glob's base
    assert beta.display_name == "beta.git" and by[f"{path_root}/gamma"].display_name == "gamma"
    assert all(r.code_host_type == "genericGitHost" and r.git_user == "" for r in result.repos)
    assert "connection conn1: skipped notrepo: not a git repository" in result.warnings
    assert "connection conn1: skipped file.txt: not a directory" in result.warnings
    assert not any(str(local_repos) in w for w in result.warnings)  # warnings reach users: no server paths


def test_git_local_patterns(local_repos):
    braces = run("git", {"url": f"file://{local_repos}/{{alpha,beta.git}}"})
    assert {r.display_name for r in braces.repos} == {"acme/alpha", "beta.git"}
    assert braces.warnings == []
    single = run("git", {"url": f"file://{local_repos}/gamma"})
    assert [r.local_path for r in single.repos] == [str(local_repos / "gamma")]
    inside = run("git", {"url": f"file://{local_repos}/alpha/sub"})  # a folder inside a work tree is no repo
    assert inside.repos == [] and any("not a git repository" in w for w in inside.warnings)
    nothing = run("git", {"url": f"file://{local_repos}/zz-*"})
    assert nothing.repos == [] and any("no path matches" in w for w in nothing.warnings)
    assert not any(str(local_repos) in w for w in inside.warnings + nothing.warnings)
    assert generic.expand_braces("a{b,c{d,e}}f{x}") == ["abf{x}", "acdf{x}", "acef{x}"]


@pytest.fixture(scope="module")
def nested_repos(tmp_path_factory):
    """``base/team-a/api``, ``base/team-b/api`` and ``base/team-b/web``: local repositories without
    an origin, two of them in folders of the same name."""
    base = tmp_path_factory.mktemp("nested")
    for rel in ("team-a/api", "team-b/api", "team-b/web"):
        work = base / rel
        work.mkdir(parents=True)
        run_git(str(work), "init", "-q", "-b", "main")
        (work / "README.md").write_text(f"# {rel}\n")
        run_git(str(work), "add", "-A")
        run_git(str(work), "commit", "-q", "-m", "init")
    return base


@pytest.mark.parametrize("pattern,displays", [
    ("/*/*", {"team-a/api": "team-a/api", "team-b/api": "team-b/api", "team-b/web": "team-b/web"}),
    ("/**", {"team-a/api": "team-a/api", "team-b/api": "team-b/api", "team-b/web": "team-b/web"}),
    ("/team-b/*", {"team-b/api": "api", "team-b/web": "web"}),
    ("/team-*/api", {"team-a/api": "team-a/api", "team-b/api": "team-b/api"}),
    ("/team-a/api", {"team-a/api": "api"}),  # no glob: the folder itself
    ("/team-a/api/", {"team-a/api": "api"}),
    ("/{team-a,team-b}/web", {"team-b/web": "team-b/web"}),
])
def test_git_local_display_names_are_folders_under_the_base(nested_repos, pattern, displays):
    """A local repository without an origin keeps its path as its name (what indexes and URLs
    know it by) and is shown by its folder below the connection's base path (the URL above its
    first glob character), not by every folder above it."""
    result = run("git", {"url": f"file://{nested_repos}{pattern}"})
    root = str(nested_repos).strip("/")
    assert {r.name: r.display_name for r in result.repos} == {f"{root}/{rel}": shown for rel, shown in displays.items()}
