"""GitHub, GitLab and Gitea adapters against fake hosts that behave like the real REST APIs.

Each host has a table: a connection config, as a user writes it in the Sourcebot config, and the
set of repo names the adapter must list (plus the warnings it must give). The fakes page in
small pages, so every listing crosses several pages. Then: metadata mapping, auth failures,
rate limits (waited for through an injected `sleep`, and capped), 5xx retries, the hosts' URL
conventions, and a real `git ls-remote` through each clone URL with the adapter's git user.
"""

from __future__ import annotations

import base64
import os
import subprocess

import httpx
import pytest

from codesearch.sync import git_credentials

from codesearch.errors import HostAuthError, HostError
from codesearch.hosts import base
from codesearch.hosts.gitea import list_gitea, rewrite_clone_url
from codesearch.hosts.github import api_base, list_github
from codesearch.hosts.gitlab import list_gitlab
from codesearch.hosts.http import HostHttp
from tests.fakehosts.gitea import FakeGitea
from tests.fakehosts.github import FakeGitHub
from tests.fakehosts.gitlab import FakeGitLab
from tests.githttp import GitHttpServer

GH_TOKEN = "ghp_s3cret0000000000000000000000000000"
GL_TOKEN = "glpat-s3cret000000000000"
GT_TOKEN = "0123456789abcdef0123456789abcdef01234567"


def run(adapter, conn: dict, token: str | None, **http_kw):
    """List one connection; returns (ListResult, recorded waits)."""
    waits: list[float] = []
    with HostHttp(sleep=waits.append, **http_kw) as http:
        return adapter("conn1", conn, token, http), waits


def names(result) -> set[str]:
    return {r.name for r in result.repos}


def ls_remote(url: str, user: str, password: str) -> subprocess.CompletedProcess:
    cred = base64.b64encode(f"{user}:{password}".encode()).decode()
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_COUNT": "1",
           "GIT_CONFIG_KEY_0": "http.extraHeader", "GIT_CONFIG_VALUE_0": f"Authorization: Basic {cred}"}
    return subprocess.run(["git", "ls-remote", url], env=env, capture_output=True, text=True, timeout=30)


def test_adapters_are_registered():
    assert base.ADAPTERS["github"] is list_github
    assert base.ADAPTERS["gitlab"] is list_gitlab
    assert base.ADAPTERS["gitea"] is list_gitea


# ---------------------------------------------------------------------------------------------
# GitHub
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def github(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("github-git"))
    with GitHttpServer(root, users={("x-access-token", GH_TOKEN)}) as git, \
            FakeGitHub(GH_TOKEN, "alice", page_size=2, git=git) as fake:
        fake.add_org("acme", members=("alice",))
        fake.add_repo("acme", "widgets", topics=("backend", "go"), size_kb=2000, stars=42,
                      pushed_at="2024-06-01T10:00:00Z")
        fake.add_repo("acme", "gadgets", fork=True, parent="upstream/gadgets", topics=("frontend",), size_kb=50)
        fake.add_repo("acme", "old-stuff", archived=True, topics=("legacy", "backend"), size_kb=10)
        fake.add_repo("acme", "secret", private=True, topics=("backend",), size_kb=300, default_branch="trunk")
        fake.add_repo("acme", "huge", topics=("data",), size_kb=90000)
        fake.add_repo("acme", "tiny", size_kb=1)
        fake.add_repo("acme", "blank", size_kb=0)
        fake.add_org("other-org")
        fake.add_repo("other-org", "pub")
        fake.add_repo("other-org", "internal-secret", private=True)
        fake.add_repo("alice", "dotfiles")
        fake.add_repo("alice", "notes", private=True)
        fake.add_repo("alice", "fork-of-widgets", fork=True, parent="acme/widgets")
        fake.add_user("bob")
        fake.add_repo("bob", "tools")
        fake.add_repo("bob", "hidden", private=True)
        fake.add_repo("bob", "shared", private=True, collaborators=("alice",))
        yield fake


@pytest.fixture
def gh(github):
    github.reset()
    yield github
    github.reset()


def gh_conn(fake, **fields) -> dict:
    return {"type": "github", "url": fake.base_url, **fields}


ACME = {"acme/widgets", "acme/gadgets", "acme/old-stuff", "acme/secret", "acme/huge", "acme/tiny", "acme/blank"}

GITHUB_CASES = [
    ("org, every page", {"orgs": ["acme"]}, GH_TOKEN, ACME, []),
    ("exclude.forks", {"orgs": ["acme"], "exclude": {"forks": True}}, GH_TOKEN, ACME - {"acme/gadgets"}, []),
    ("exclude.archived", {"orgs": ["acme"], "exclude": {"archived": True}}, GH_TOKEN, ACME - {"acme/old-stuff"}, []),
    ("exclude.repos globs on owner/repo", {"orgs": ["acme"], "exclude": {"repos": ["acme/*-stuff", "acme/h*"]}},
     GH_TOKEN, ACME - {"acme/old-stuff", "acme/huge"}, []),
    ("topics compare lower-cased", {"orgs": ["acme"], "topics": ["BACKEND"]}, GH_TOKEN,
     {"acme/widgets", "acme/old-stuff", "acme/secret"}, []),
    ("topics globs", {"orgs": ["acme"], "topics": ["front*", "d?ta"]}, GH_TOKEN, {"acme/gadgets", "acme/huge"}, []),
    ("exclude.topics", {"orgs": ["acme"], "exclude": {"topics": ["LEGACY", "da*"]}}, GH_TOKEN,
     ACME - {"acme/old-stuff", "acme/huge"}, []),
    ("exclude.size.min in bytes, inclusive; unknown size kept", {"orgs": ["acme"], "exclude": {"size": {"min": 10000}}},
     GH_TOKEN, ACME - {"acme/tiny"}, []),
    ("exclude.size.max in bytes, inclusive", {"orgs": ["acme"], "exclude": {"size": {"max": 2_000_000}}},
     GH_TOKEN, ACME - {"acme/huge"}, []),
    ("exclude.size min and max", {"orgs": ["acme"], "exclude": {"size": {"min": 50_001, "max": 300_000}}},
     GH_TOKEN, {"acme/secret", "acme/blank"}, []),
    ("users: the token's own user includes private repos", {"users": ["alice"]}, GH_TOKEN,
     {"alice/dotfiles", "alice/notes", "alice/fork-of-widgets"}, []),
    ("users: another user's public repos", {"users": ["bob"]}, GH_TOKEN, {"bob/tools"}, []),
    ("repos", {"repos": ["bob/shared", "other-org/pub"]}, GH_TOKEN, {"bob/shared", "other-org/pub"}, []),
    ("dedup across orgs, users and repos", {"orgs": ["acme"], "users": ["acme"], "repos": ["acme/widgets", "ACME/Widgets"]},
     GH_TOKEN, ACME, []),
    ("anonymous sees public repos only", {"orgs": ["acme"], "users": ["alice"]}, None,
     ACME - {"acme/secret"} | {"alice/dotfiles", "alice/fork-of-widgets"}, []),
    ("sources combined with excludes", {"orgs": ["acme"], "users": ["alice"], "exclude": {"forks": True, "archived": True}},
     GH_TOKEN, ACME - {"acme/gadgets", "acme/old-stuff"} | {"alice/dotfiles", "alice/notes"}, []),
    ("missing or invisible entities are warnings", {"orgs": ["acme", "ghost"], "users": ["nobody"],
                                                    "repos": ["acme/nope", "other-org/internal-secret"]},
     GH_TOKEN, ACME, ["'ghost'", "'nobody'", "'acme/nope'", "'other-org/internal-secret'"]),
]


@pytest.mark.parametrize("fields,token,expected,warnings", [c[1:] for c in GITHUB_CASES], ids=[c[0] for c in GITHUB_CASES])
def test_github_table(gh, fields, token, expected, warnings):
    result, _ = run(list_github, gh_conn(gh, **fields), token)
    host = gh.base_url.split("://")[1]
    assert sorted(r.name for r in result.repos) == sorted(f"{host}/{n}" for n in expected)  # also: no duplicates
    assert len(result.warnings) == len(warnings)
    for w, expected_w in zip(result.warnings, warnings):
        assert "conn1" in w and expected_w in w
    for w in result.warnings:
        assert GH_TOKEN not in w


def test_github_metadata(gh):
    result, _ = run(list_github, gh_conn(gh, orgs=["acme"], repos=["alice/fork-of-widgets"]), GH_TOKEN)
    host = f"127.0.0.1:{gh.port}"
    repos = {r.display_name: r for r in result.repos}
    w = repos["acme/widgets"]
    assert w.name == f"{host}/acme/widgets" and w.code_host_type == "github"
    assert w.web_url == f"{gh.base_url}/acme/widgets"
    assert w.file_url_template == f"{gh.base_url}/acme/widgets/blob/{{branch}}/{{path}}"
    assert w.clone_url.endswith("/acme/widgets.git") and "@" not in w.clone_url
    assert (w.default_branch, w.fork, w.archived, w.public) == ("main", False, False, True)
    assert w.topics == ["backend", "go"] and w.size_bytes == 2_000_000 and w.stars == 42
    assert w.pushed_at == "2024-06-01T10:00:00Z" and w.git_user == "x-access-token" and w.external_id.isdigit()
    assert repos["acme/secret"].public is False and repos["acme/secret"].default_branch == "trunk"
    assert repos["acme/gadgets"].fork is True and repos["acme/old-stuff"].archived is True
    assert repos["acme/blank"].size_bytes == 0
    assert repos["alice/fork-of-widgets"].fork is True  # from the single-repo GET


def test_github_requests_ghes_paths_bearer_and_rewritten_next_links(gh):
    run(list_github, gh_conn(gh, orgs=["acme"]), GH_TOKEN)
    paths = gh.api_paths()
    assert all(p.startswith("/api/v3/") for p in paths)
    assert paths[0] == "/api/v3/user"
    assert paths[1].startswith("/api/v3/orgs/acme/repos?") and "per_page=100" in paths[1]
    # 7 repos at 2 per page: 4 pages, pages 2-4 through GitHub's numeric-id next links
    assert [p.split("?")[0] for p in paths[2:]] == [f"/api/v3/organizations/{gh.owners['acme']['id']}/repos"] * 3
    assert all(h.get("Authorization") == f"Bearer {GH_TOKEN}" for _, _, h in gh.requests)


def test_github_anonymous_does_not_ask_for_the_token_user(gh):
    result, _ = run(list_github, gh_conn(gh, orgs=["acme"]), None)
    assert {r.git_user for r in result.repos} == {""}  # anonymous listing, anonymous git
    assert not any(p.startswith("/api/v3/user?") or p == "/api/v3/user" for p in gh.api_paths())
    assert all("Authorization" not in h for _, _, h in gh.requests)


def test_github_bad_token_fails_the_listing(gh):
    with pytest.raises(HostAuthError) as e:
        run(list_github, gh_conn(gh, orgs=["acme"]), "ghp_wrong")
    assert e.value.status == 401 and "Bad credentials" in str(e.value) and "ghp_wrong" not in str(e.value)


def test_github_forbidden_is_an_auth_error_not_a_warning(gh):
    gh.fail(403, path="/orgs/acme", body={"message": "Resource not accessible by personal access token", "status": "403"})
    with pytest.raises(HostAuthError):
        run(list_github, gh_conn(gh, orgs=["acme"]), GH_TOKEN)


@pytest.mark.parametrize("status", [403, 429])
def test_github_rate_limit_waits_until_reset(gh, status):
    gh.rate_limit(times=1, reset_in=30, status=status)
    result, waits = run(list_github, gh_conn(gh, orgs=["acme"]), GH_TOKEN)
    assert len(result.repos) == len(ACME)
    assert len(waits) == 1 and 25 <= waits[0] <= 31


def test_github_rate_limit_reset_too_far_fails_clearly(gh):
    gh.rate_limit(times=1, reset_in=3600)
    with pytest.raises(HostError) as e:
        run(list_github, gh_conn(gh, orgs=["acme"]), GH_TOKEN, max_wait_s=60)
    assert not isinstance(e.value, HostAuthError)
    assert "rate limited" in str(e.value) and "longer than allowed" in str(e.value)


def test_github_server_error_is_retried(gh):
    gh.fail(500, path="/orgs/acme/repos")
    result, waits = run(list_github, gh_conn(gh, orgs=["acme"]), GH_TOKEN)
    assert len(result.repos) == len(ACME) and waits == [2]


def test_github_server_error_that_persists_fails(gh):
    gh.fail(502, times=10, path="/orgs/acme/repos")
    with pytest.raises(HostError) as e:
        run(list_github, gh_conn(gh, orgs=["acme"]), GH_TOKEN)
    assert e.value.status == 502


def test_github_422_is_a_warning(gh):
    gh.fail(422, path="/users/bob", body={"message": "Validation Failed", "errors": [{"resource": "Search", "code": "invalid"}]})
    result, _ = run(list_github, gh_conn(gh, users=["bob"], repos=["acme/widgets"]), GH_TOKEN)
    assert {r.display_name for r in result.repos} == {"acme/widgets"}
    assert len(result.warnings) == 1 and "'bob'" in result.warnings[0] and "422" in result.warnings[0]


def test_github_default_url_is_github_com():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.path == "/user":
            return httpx.Response(200, json={"login": "alice", "id": 1})
        return httpx.Response(200, json=[{"id": 7, "full_name": "acme/widgets", "private": False,
                                          "html_url": "https://github.com/acme/widgets",
                                          "clone_url": "https://github.com/acme/widgets.git", "size": 3}])

    result, _ = run(list_github, {"type": "github", "orgs": ["acme"]}, GH_TOKEN, transport=httpx.MockTransport(handler))
    assert seen[0] == "https://api.github.com/user"
    assert seen[1].startswith("https://api.github.com/orgs/acme/repos?")
    assert [(r.name, r.display_name, r.size_bytes) for r in result.repos] == [("github.com/acme/widgets", "acme/widgets", 3000)]
    assert api_base("https://ghe.example.com/") == "https://ghe.example.com/api/v3"
    assert api_base("https://github.com") == "https://api.github.com"


def test_github_clone_url_clones_with_the_git_user(gh):
    result, _ = run(list_github, gh_conn(gh, repos=["acme/secret"]), GH_TOKEN)
    repo = result.repos[0]
    out = ls_remote(repo.clone_url, repo.git_user, GH_TOKEN)
    assert out.returncode == 0, out.stderr
    assert "refs/heads/trunk" in out.stdout


# ---------------------------------------------------------------------------------------------
# GitLab
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gitlab(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("gitlab-git"))
    with GitHttpServer(root, users={("oauth2", GL_TOKEN)}) as git, \
            FakeGitLab(GL_TOKEN, "alice", page_size=2, git=git) as fake:
        fake.add_group("acme", members=("alice",))
        fake.add_group("acme/platform/infra")
        fake.add_group("partners")
        fake.add_group("secretgrp")
        fake.add_user("bob")
        fake.add_project("acme/website", topics=("Web", "frontend"), stars=5, last_activity_at="2024-06-02T08:00:00.000Z")
        fake.add_project("acme/platform/api", visibility="internal", topics=("backend",), default_branch="develop")
        fake.add_project("acme/platform/infra/terraform", visibility="private", topics=("ops",))
        fake.add_project("acme/platform/legacy-api", archived=True, topics=("backend", "legacy"))
        fake.add_project("acme/platform/api-fork", forked_from="acme/platform/api")
        fake.add_project("secretgrp/hidden", visibility="private")
        fake.add_project("acme/website-mirror", forked_from="secretgrp/hidden")  # upstream invisible: no key
        fake.add_project("partners/shared-lib", shared_with=("acme",))
        fake.add_project("alice/sandbox")
        fake.add_project("alice/scratch", visibility="private")
        fake.add_project("bob/notes")
        fake.add_project("bob/diary", visibility="private")
        yield fake


@pytest.fixture
def gl(gitlab):
    gitlab.reset()
    yield gitlab
    gitlab.reset()


def gl_conn(fake, **fields) -> dict:
    return {"type": "gitlab", "url": fake.base_url, **fields}


ACME_GL = {"acme/website", "acme/platform/api", "acme/platform/infra/terraform", "acme/platform/legacy-api",
           "acme/platform/api-fork", "acme/website-mirror", "partners/shared-lib"}
PLATFORM = {"acme/platform/api", "acme/platform/infra/terraform", "acme/platform/legacy-api", "acme/platform/api-fork"}

GITLAB_CASES = [
    ("group with subgroups and shared projects, every page", {"groups": ["acme"]}, GL_TOKEN, ACME_GL, []),
    ("subgroup by path", {"groups": ["acme/platform"]}, GL_TOKEN, PLATFORM, []),
    ("exclude.forks: key present only", {"groups": ["acme"], "exclude": {"forks": True}}, GL_TOKEN,
     ACME_GL - {"acme/platform/api-fork"}, []),
    ("exclude.archived", {"groups": ["acme"], "exclude": {"archived": True}}, GL_TOKEN,
     ACME_GL - {"acme/platform/legacy-api"}, []),
    ("exclude.projects globs on path_with_namespace", {"groups": ["acme"], "exclude": {"projects": ["acme/platform/**"]}},
     GL_TOKEN, ACME_GL - PLATFORM, []),
    ("exclude.projects: * stays within one path segment", {"groups": ["acme"], "exclude": {"projects": ["acme/platform/*"]}},
     GL_TOKEN, ACME_GL - (PLATFORM - {"acme/platform/infra/terraform"}), []),
    ("exclude.projects several globs", {"groups": ["acme"], "exclude": {"projects": ["**/legacy-*", "partners/**"]}},
     GL_TOKEN, ACME_GL - {"acme/platform/legacy-api", "partners/shared-lib"}, []),
    ("topics lower-cased globs", {"groups": ["acme"], "topics": ["WEB", "back*"]}, GL_TOKEN,
     {"acme/website", "acme/platform/api", "acme/platform/legacy-api"}, []),
    ("exclude.topics", {"groups": ["acme"], "exclude": {"topics": ["legacy", "OPS"]}}, GL_TOKEN,
     ACME_GL - {"acme/platform/legacy-api", "acme/platform/infra/terraform"}, []),
    ("users: personal namespace", {"users": ["alice"]}, GL_TOKEN, {"alice/sandbox", "alice/scratch"}, []),
    ("users: another user", {"users": ["bob"]}, GL_TOKEN, {"bob/notes"}, []),
    ("exclude.userOwnedProjects", {"users": ["alice"], "projects": ["acme/website"], "exclude": {"userOwnedProjects": True}},
     GL_TOKEN, {"acme/website"}, []),
    ("projects with subgroups in the path", {"projects": ["acme/platform/infra/terraform", "bob/notes"]}, GL_TOKEN,
     {"acme/platform/infra/terraform", "bob/notes"}, []),
    ("dedup across groups and projects", {"groups": ["acme", "acme/platform"], "projects": ["acme/website"]},
     GL_TOKEN, ACME_GL, []),
    ("all with a self-managed url", {"all": True}, GL_TOKEN,
     ACME_GL | {"alice/sandbox", "alice/scratch", "bob/notes"}, []),
    ("anonymous sees public projects only", {"groups": ["acme"]}, None,
     ACME_GL - {"acme/platform/api", "acme/platform/infra/terraform"}, []),
    ("missing or invisible entities are warnings",
     {"groups": ["acme/platform", "ghost"], "users": ["nobody"], "projects": ["acme/nope", "secretgrp/hidden"]},
     GL_TOKEN, PLATFORM, ["'ghost'", "'nobody'", "'acme/nope'", "'secretgrp/hidden'"]),
]


@pytest.mark.parametrize("fields,token,expected,warnings", [c[1:] for c in GITLAB_CASES], ids=[c[0] for c in GITLAB_CASES])
def test_gitlab_table(gl, fields, token, expected, warnings):
    result, _ = run(list_gitlab, gl_conn(gl, **fields), token)
    host = gl.base_url.split("://")[1]
    assert sorted(r.name for r in result.repos) == sorted(f"{host}/{n}" for n in expected)
    assert len(result.warnings) == len(warnings)
    for w, expected_w in zip(result.warnings, warnings):
        assert "conn1" in w and expected_w in w and GL_TOKEN not in w


def test_gitlab_metadata(gl):
    result, _ = run(list_gitlab, gl_conn(gl, groups=["acme"]), GL_TOKEN)
    repos = {r.display_name: r for r in result.repos}
    w = repos["acme/website"]
    assert w.name == f"127.0.0.1:{gl.port}/acme/website" and w.code_host_type == "gitlab"
    assert w.web_url == f"{gl.base_url}/acme/website"
    assert w.file_url_template == f"{gl.base_url}/acme/website/-/blob/{{branch}}/{{path}}"
    assert w.clone_url.startswith("http://") and w.clone_url.endswith("/acme/website.git")
    assert (w.default_branch, w.fork, w.archived, w.public) == ("main", False, False, True)
    assert w.topics == ["Web", "frontend"] and w.stars == 5 and w.pushed_at == "2024-06-02T08:00:00.000Z"
    assert w.git_user == "oauth2" and w.size_bytes is None and w.external_id.isdigit()
    api = repos["acme/platform/api"]
    assert api.public is False and api.default_branch == "develop"  # internal: only signed-in GitLab users read it
    assert repos["acme/platform/infra/terraform"].public is False
    assert repos["acme/platform/api-fork"].fork is True
    assert repos["acme/website-mirror"].fork is False  # upstream not visible: GitLab omits the key
    assert repos["acme/platform/legacy-api"].archived is True


@pytest.mark.parametrize("web_url,page", [
    (None, "{base}/acme/platform/api"),  # GitLab's own web_url
    ("https://gitlab.example.com", "https://gitlab.example.com/acme/platform/api"),  # API on another host
    ("https://gitlab.example.com/", "https://gitlab.example.com/acme/platform/api"),  # a trailing slash
    ("https://example.com/gitlab", "https://example.com/gitlab/acme/platform/api"),  # under a path
])
def test_gitlab_web_url_builds_the_links(gl, web_url, page):
    fields = {"projects": ["acme/platform/api"], **({"webUrl": web_url} if web_url else {})}
    (repo,), _ = run(list_gitlab, gl_conn(gl, **fields), GL_TOKEN)[0].repos, None
    want = page.format(base=gl.base_url)
    assert repo.web_url == want and repo.file_url_template == want + "/-/blob/{branch}/{path}"
    assert repo.clone_url.startswith("http://127.0.0.1:")  # clones still go where GitLab says
    assert repo.name == f"127.0.0.1:{gl.port}/acme/platform/api"  # names too


def test_gitlab_encoded_paths_token_header_and_x_next_page(gl):
    run(list_gitlab, gl_conn(gl, groups=["acme/platform"], projects=["acme/platform/infra/terraform"]), GL_TOKEN)
    paths = gl.api_paths()
    group_pages = [p for p in paths if p.startswith("/api/v4/groups/acme%2Fplatform/projects?")]
    assert len(group_pages) == 2  # 4 projects, 2 per page, followed through x-next-page
    assert "include_subgroups=true" in group_pages[0] and "per_page=100" in group_pages[0]
    assert "page=2" in group_pages[1]
    assert "/api/v4/projects/acme%2Fplatform%2Finfra%2Fterraform" in paths
    assert all(h.get("PRIVATE-TOKEN") == GL_TOKEN for _, _, h in gl.requests)


def test_gitlab_all_uses_keyset_pages(gl):
    result, _ = run(list_gitlab, gl_conn(gl, all=True), GL_TOKEN)
    pages = [p for p in gl.api_paths() if p.startswith("/api/v4/projects?")]
    assert len(pages) == -(-len(result.repos) // 2) and len(pages) > 3
    assert "pagination=keyset" in pages[0] and all("id_after=" in p for p in pages[1:])


def test_gitlab_fake_routes_like_gitlab(gl):
    with httpx.Client(headers={"PRIVATE-TOKEN": GL_TOKEN}) as c:
        assert c.get(f"{gl.api_url}/groups/acme/platform/projects").json() == {"error": "404 Not Found"}
        assert c.get(f"{gl.api_url}/groups/ghost/projects").json() == {"message": "404 Group Not Found"}
        plain = c.get(f"{gl.api_url}/projects/acme%2Fwebsite").json()
        fork = c.get(f"{gl.api_url}/projects/acme%2Fplatform%2Fapi-fork").json()
        assert "forked_from_project" not in plain and fork["forked_from_project"]["path_with_namespace"] == "acme/platform/api"
        last = c.get(f"{gl.api_url}/groups/acme%2Fplatform/projects", params={"page": 2, "per_page": 2})
        assert last.headers["x-next-page"] == "" and last.headers["x-total"] == "3"  # include_subgroups defaults to false


def test_gitlab_all_is_ignored_on_gitlab_com():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json=[{"id": 1, "path_with_namespace": "acme/sub/proj", "visibility": "public",
                                          "http_url_to_repo": "https://gitlab.com/acme/sub/proj.git",
                                          "web_url": "https://gitlab.com/acme/sub/proj"}],
                              headers={"x-next-page": ""})

    result, _ = run(list_gitlab, {"type": "gitlab", "all": True, "groups": ["acme"]}, None, transport=httpx.MockTransport(handler))
    assert len(seen) == 1 and seen[0].startswith("https://gitlab.com/api/v4/groups/acme/projects?")
    assert [r.name for r in result.repos] == ["gitlab.com/acme/sub/proj"]
    assert len(result.warnings) == 1 and "`all` is ignored" in result.warnings[0]


def test_gitlab_bad_token_fails_the_listing(gl):
    with pytest.raises(HostAuthError) as e:
        run(list_gitlab, gl_conn(gl, groups=["acme"]), "glpat-wrong")
    assert e.value.status == 401 and "glpat-wrong" not in str(e.value)


def test_gitlab_429_waits_for_retry_after(gl):
    gl.rate_limit(times=2, retry_after=7)
    result, waits = run(list_gitlab, gl_conn(gl, groups=["acme"]), GL_TOKEN)
    assert len(result.repos) == len(ACME_GL) and waits == [7, 7]


def test_gitlab_429_longer_than_allowed_fails(gl):
    gl.rate_limit(times=1, retry_after=600)
    with pytest.raises(HostError, match="rate limited"):
        run(list_gitlab, gl_conn(gl, groups=["acme"]), GL_TOKEN, max_wait_s=60)


def test_gitlab_server_error_is_retried(gl):
    gl.fail(500, path="/groups/acme/projects")
    result, waits = run(list_gitlab, gl_conn(gl, groups=["acme"]), GL_TOKEN)
    assert len(result.repos) == len(ACME_GL) and waits == [2]


def test_gitlab_clone_url_clones_with_the_git_user(gl):
    result, _ = run(list_gitlab, gl_conn(gl, projects=["acme/platform/api"]), GL_TOKEN)
    repo = result.repos[0]
    out = ls_remote(repo.clone_url, repo.git_user, GL_TOKEN)
    assert out.returncode == 0, out.stderr
    assert "refs/heads/develop" in out.stdout


# ---------------------------------------------------------------------------------------------
# Gitea
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gitea(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("gitea-git"))
    with GitHttpServer(root, users={(GT_TOKEN, "")}) as git, \
            FakeGitea(GT_TOKEN, "carol", max_items=2, git=git) as fake:
        fake.add_org("acme", members=("carol",))
        fake.add_repo("acme", "app", topics=("web",), size_kb=120, stars=7, updated_at="2024-06-03T09:00:00Z")
        fake.add_repo("acme", "lib", fork=True)
        fake.add_repo("acme", "attic", archived=True)
        fake.add_repo("acme", "tool-internal", internal=True, default_branch="trunk")
        fake.add_repo("acme", "vault", private=True)
        fake.add_org("secret-org")
        fake.add_repo("secret-org", "hidden", private=True)
        fake.add_repo("carol", "dots")
        fake.add_repo("carol", "diary", private=True)
        fake.add_user("dave")
        fake.add_repo("dave", "scripts")
        yield fake


@pytest.fixture
def gt(gitea):
    gitea.reset()
    yield gitea
    gitea.reset()


def gt_conn(fake, **fields) -> dict:
    return {"type": "gitea", "url": fake.base_url, **fields}


ACME_GT = {"acme/app", "acme/lib", "acme/attic", "acme/tool-internal", "acme/vault"}

GITEA_CASES = [
    ("org, every clamped page", {"orgs": ["acme"]}, GT_TOKEN, ACME_GT, []),
    ("exclude.forks", {"orgs": ["acme"], "exclude": {"forks": True}}, GT_TOKEN, ACME_GT - {"acme/lib"}, []),
    ("exclude.archived", {"orgs": ["acme"], "exclude": {"archived": True}}, GT_TOKEN, ACME_GT - {"acme/attic"}, []),
    ("exclude.repos globs", {"orgs": ["acme"], "exclude": {"repos": ["acme/t*", "*/vault"]}}, GT_TOKEN,
     ACME_GT - {"acme/tool-internal", "acme/vault"}, []),
    ("users: the token's user", {"users": ["carol"]}, GT_TOKEN, {"carol/dots", "carol/diary"}, []),
    ("users: another user", {"users": ["dave"]}, GT_TOKEN, {"dave/scripts"}, []),
    ("repos", {"repos": ["dave/scripts", "acme/vault"]}, GT_TOKEN, {"dave/scripts", "acme/vault"}, []),
    ("dedup across orgs and repos", {"orgs": ["acme"], "repos": ["acme/app", "ACME/App"]}, GT_TOKEN, ACME_GT, []),
    ("anonymous sees public repos only", {"orgs": ["acme"]}, None, {"acme/app", "acme/lib", "acme/attic"}, []),
    ("missing or invisible entities are warnings",
     {"orgs": ["acme", "ghost"], "users": ["nobody"], "repos": ["acme/nope", "secret-org/hidden"]},
     GT_TOKEN, ACME_GT, ["'ghost'", "'nobody'", "'acme/nope'", "'secret-org/hidden'"]),
]


@pytest.mark.parametrize("fields,token,expected,warnings", [c[1:] for c in GITEA_CASES], ids=[c[0] for c in GITEA_CASES])
def test_gitea_table(gt, fields, token, expected, warnings):
    result, _ = run(list_gitea, gt_conn(gt, **fields), token)
    host = gt.base_url.split("://")[1]
    assert sorted(r.name for r in result.repos) == sorted(f"{host}/{n}" for n in expected)
    assert len(result.warnings) == len(warnings)
    for w, expected_w in zip(result.warnings, warnings):
        assert "conn1" in w and expected_w in w and GT_TOKEN not in w


def test_gitea_metadata(gt):
    result, _ = run(list_gitea, gt_conn(gt, orgs=["acme"]), GT_TOKEN)
    repos = {r.display_name: r for r in result.repos}
    a = repos["acme/app"]
    assert a.name == f"127.0.0.1:{gt.port}/acme/app" and a.code_host_type == "gitea"
    assert a.web_url == f"{gt.base_url}/acme/app"
    assert a.file_url_template == f"{gt.base_url}/acme/app/src/branch/{{branch}}/{{path}}"
    assert a.clone_url == f"{gt.base_url}/acme/app.git"
    assert (a.default_branch, a.fork, a.archived, a.public) == ("main", False, False, True)
    assert a.topics == ["web"] and a.size_bytes == 120_000 and a.stars == 7 and a.pushed_at == "2024-06-03T09:00:00Z"
    assert a.git_user == ""  # Gitea: the git user is the token, a secret: never in repo metadata
    assert git_credentials("gitea", {}, GT_TOKEN) == (GT_TOKEN, "")
    assert repos["acme/tool-internal"].public is False and repos["acme/tool-internal"].default_branch == "trunk"
    assert repos["acme/vault"].public is False
    assert repos["acme/lib"].fork is True and repos["acme/attic"].archived is True


def test_gitea_pages_past_the_clamped_limit(gt):
    run(list_gitea, gt_conn(gt, orgs=["acme"]), GT_TOKEN)
    pages = [p for p in gt.api_paths() if p.startswith("/api/v1/orgs/acme/repos?")]
    assert len(pages) == 3  # 5 repos, limit 50 asked, clamped to 2 by the server
    assert "limit=50" in pages[0] and "page=3" in pages[2]
    assert all(h.get("Authorization") == f"token {GT_TOKEN}" for _, _, h in gt.requests)


def test_gitea_pager_without_link_header_uses_total_count():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        page = int(request.url.params.get("page", "1"))
        calls.append(page)
        items = [{"id": i, "full_name": f"o/r{i}", "clone_url": f"https://gitea.com/o/r{i}.git"} for i in range(3 * page - 2, 3 * page + 1) if i <= 7]
        return httpx.Response(200, json=items, headers={"X-Total-Count": "7"})

    result, _ = run(list_gitea, {"type": "gitea", "orgs": ["o"]}, None, transport=httpx.MockTransport(handler))
    assert calls == [1, 2, 3] and len(result.repos) == 7
    assert result.repos[0].name == "gitea.com/o/r1"


def test_gitea_bad_token_fails_the_listing(gt):
    with pytest.raises(HostAuthError) as e:
        run(list_gitea, gt_conn(gt, orgs=["acme"]), "wrong-token")
    assert e.value.status == 401 and "wrong-token" not in str(e.value)


def test_gitea_server_error_is_retried_and_proxy_429_waited(gt):
    gt.fail(500, path="/orgs/acme/repos")
    gt.fail(429, path="/orgs/acme/repos", headers={"Retry-After": "5"}, body=b"Too Many Requests")
    result, waits = run(list_gitea, gt_conn(gt, orgs=["acme"]), GT_TOKEN)
    assert len(result.repos) == len(ACME_GT) and waits == [2, 5]


def test_gitea_clone_url_rewritten_to_configured_host_and_clones(tmp_path):
    with GitHttpServer(str(tmp_path), users={(GT_TOKEN, "")}) as git, \
            FakeGitea(GT_TOKEN, "carol", git=git, root_url="https://gitea.internal.example:3443") as fake:
        fake.add_org("acme", members=("carol",))
        fake.add_repo("acme", "vault", private=True, default_branch="stable")
        result, _ = run(list_gitea, gt_conn(fake, orgs=["acme"]), GT_TOKEN)
        [repo] = result.repos
        assert repo.clone_url == f"{fake.base_url}/acme/vault.git"
        assert repo.web_url == "https://gitea.internal.example:3443/acme/vault"  # the host's own page, as given
        out = ls_remote(repo.clone_url, *git_credentials("gitea", {}, GT_TOKEN))
        assert out.returncode == 0, out.stderr
        assert "refs/heads/stable" in out.stdout
        assert ls_remote(repo.clone_url, "someone-else", "").returncode != 0
    assert rewrite_clone_url("https://old.example/a/b.git", "http://new.example:8080/") == "http://new.example:8080/a/b.git"
