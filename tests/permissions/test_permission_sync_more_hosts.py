"""Permission syncing against local Gitea, Bitbucket Cloud and Bitbucket Server APIs.

The same scenario, table-driven over the three kinds (as `tests/permissions/test_permission_sync.py` does it
for GitHub and GitLab): the fakes (`tests.fakehosts`) serve the hosts' documented permission
endpoints on 127.0.0.1 with one page per item, the connection is listed by the real adapter,
grants are written by the real `PermissionSyncer` and read through the real `PermissionPolicy`.

On every host: organization/workspace/project ``acme``/``CORE`` holds ``public`` (public),
``secret`` (private; bob, cora and eve have read, write and admin on it), ``vault`` and
``attic`` (private; dave's, and on Bitbucket Server ``attic`` is archived); dave also has a
repository outside the connection. The connection's token is the user ``admin``'s; dave has a
token of his own; frank has an account on the host and no access.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from tests.fakehosts.bitbucket import (
    CloudRepo,
    FakeBitbucketCloud,
    FakeBitbucketServer,
    ServerProject,
    ServerRepo,
)
from tests.fakehosts.gitea import FakeGitea
from tests.permissions.test_permission_sync import World

#: who the host says may read each private repository of the connection
READERS = {"secret": {"bob", "cora", "eve"}, "vault": {"dave"}, "attic": {"dave"}}


@dataclass
class Host:
    """One fake host behind a uniform face (`World` reads `token`)."""

    kind: str  # code_host_type
    fake: object
    token: str  # the connection's
    conn: dict
    tokens: dict[str, str]  # user → their own token
    subject: Callable[[str], str]  # a user's id on the host (a linked account's subject)
    revoke: Callable[[str, str], None]  # (repository, user): the host takes the user's access away
    repo_path: str  # path prefix of the repo-driven calls (for `fail`)
    readers_call: str  # the repo-driven endpoint, after the repository's name
    user_call: str  # the user-driven endpoint
    #: subjects the host names besides users (Gitea: the owning organization, which no user can be)
    extra: Callable[[str], set[str]] = field(default=lambda repo: set())

    def drop_token(self, token: str) -> None:
        del self.fake.tokens[token]

    def calls(self, part: str) -> list[str]:
        return [r[1] for r in self.fake.requests if part in r[1]]


@contextmanager
def gitea(tmp_path):
    with FakeGitea("gitea-admin", "admin", max_items=1) as fake:  # Gitea clamps `limit` to 1: a page per item
        fake.add_org("acme", members=("admin",))
        fake.add_token("dave", "gitea-dave")
        fake.add_user("frank")
        fake.add_repo("acme", "public")
        for name, readers in READERS.items():
            fake.add_repo("acme", name, private=True, collaborators=tuple(sorted(readers)))
        fake.add_repo("dave", "notes", private=True)

        def revoke(repo, login):
            next(r for r in fake.repos if r["name"] == repo)["collaborators"].discard(login)

        yield Host("gitea", fake, fake.token, {"type": "gitea", "url": fake.base_url, "orgs": ["acme"]},
                   {"dave": "gitea-dave"}, lambda login: str(fake.user_id(login)), revoke,
                   repo_path="/repos/", readers_call="/collaborators", user_call="/api/v1/user/repos",
                   extra=lambda repo: {str(fake.user_id("acme")), str(fake.user_id("admin"))})  # owner, its team


@contextmanager
def bitbucket_cloud(tmp_path):
    perms = {"secret": {"bob": "read", "cora": "write", "eve": "admin"}, "vault": {"dave": "read"},
             "attic": {"dave": "write"}}
    repos = [CloudRepo("acme", "public", "PRJ")]
    repos += [CloudRepo("acme", name, "PRJ", private=True, users=dict(users)) for name, users in perms.items()]
    repos.append(CloudRepo("dave-ws", "notes", "DV", private=True, users={"dave": "admin"}))
    with FakeBitbucketCloud(str(tmp_path / "bbc"), repos, tokens={"bbc-admin": "admin", "bbc-dave": "dave"},
                            admins={"admin"}, page_size=1) as fake:
        fake.user_json("frank")

        def revoke(repo, login):
            del fake.repos[("acme", repo)].users[login]

        yield Host("bitbucketCloud", fake, "bbc-admin", {"type": "bitbucket", "url": fake.url, "workspaces": ["acme"]},
                   {"dave": "bbc-dave"}, fake.user_uuid, revoke, repo_path="/2.0/repositories/",
                   readers_call="/permissions-config/users", user_call="/2.0/user/permissions/repositories")


@contextmanager
def bitbucket_server(tmp_path):
    perms = {"secret": {"bob": "REPO_READ", "cora": "REPO_WRITE", "eve": "REPO_ADMIN"}, "vault": {"dave": "REPO_READ"},
             "attic": {"dave": "REPO_WRITE"}}
    repos = [ServerRepo("CORE", "public", public=True)]
    repos += [ServerRepo("CORE", name, users=dict(users), archived=name == "attic") for name, users in perms.items()]
    repos.append(ServerRepo("~DAVE", "notes"))
    projects = [ServerProject("CORE", readers={"admin"}), ServerProject("~DAVE", readers={"dave"})]
    with FakeBitbucketServer(str(tmp_path / "bbs"), projects, repos, tokens={"bbs-admin": "admin", "bbs-dave": "dave"},
                             admins={"admin"}, page_size=1) as fake:
        fake.user_json("frank")

        def revoke(repo, login):
            del fake.repos[("CORE", repo)].users[login]

        yield Host("bitbucketServer", fake, "bbs-admin",
                   {"type": "bitbucket", "deploymentType": "server", "url": fake.url, "projects": ["CORE"]},
                   {"dave": "bbs-dave"}, lambda login: str(fake.user_id(login)), revoke,
                   repo_path="/rest/api/1.0/projects/", readers_call="/permissions/users",
                   user_call="/rest/api/1.0/repos", extra=lambda repo: {str(fake.user_id("admin"))})  # a project reader


HOSTS = {"gitea": gitea, "bitbucketCloud": bitbucket_cloud, "bitbucketServer": bitbucket_server}


@pytest.fixture(params=list(HOSTS))
def world(request, tmp_path, monkeypatch):
    with HOSTS[request.param](tmp_path) as host:
        w = World(tmp_path, host, host.kind, host.conn, monkeypatch)
        assert {n.rsplit("/", 1)[1] for n in w.ids} == {"public", *READERS}  # the adapter listed the connection
        yield host, w
        w.store.close()


def _sees(w: World, user) -> set[str]:
    return {name.rsplit("/", 1)[1] for name in w.sees(user)}


def _rid(w: World, repo: str) -> int:
    (rid,) = [i for name, i in w.ids.items() if name.rsplit("/", 1)[1] == repo]
    return rid


def test_repo_driven_grants_are_exactly_the_users_the_host_names(world):
    h, w = world
    bob, cora, frank = (w.user(login, h.subject(login)) for login in ("bob", "cora", "frank"))
    ivan = w.user("ivan", None)
    assert _sees(w, bob) == {"public"}  # nothing synced yet
    summary = w.sync()
    assert summary["repos"] == 3 and summary["accounts"] == 3  # the accounts have no token: their syncs fail
    assert _sees(w, bob) == _sees(w, cora) == {"public", "secret"}
    assert _sees(w, frank) == _sees(w, ivan) == _sees(w, None) == {"public"}
    for repo, readers in READERS.items():
        expected = {h.subject(login) for login in readers} | h.extra(repo)
        assert {s for host, s in w.store.repo_grant_subjects(_rid(w, repo))} == expected, repo
        assert {host for host, s in w.store.repo_grant_subjects(_rid(w, repo))} == {w.host}
    # one reader per page: three pages of secret's readers
    assert len([p for p in h.calls(h.readers_call) if "/secret/" in p]) == 3

    h.revoke("secret", "bob")  # the host takes bob's access away
    w.sync()
    assert _sees(w, bob) == {"public"}
    assert _sees(w, cora) == {"public", "secret"}
    assert {s for _, s in w.store.repo_grant_subjects(_rid(w, "secret"))} == \
        {h.subject("cora"), h.subject("eve")} | h.extra("secret")


def test_user_driven_grants_come_from_the_accounts_own_token(world):
    h, w = world
    dave = w.user("dave", h.subject("dave"), token=h.tokens["dave"])
    h.fake.fail(500, times=1000, path=h.repo_path)  # repo-driven syncing cannot help: only dave's own token
    w.sync()
    assert _sees(w, dave) == {"public", "vault", "attic"}
    assert w.store.get_linked_account(dave.account_id).permission_error is None
    for repo in ("vault", "attic"):
        assert w.store.repo_grant_subjects(_rid(w, repo), "user") == [(w.host, h.subject("dave"))]
        assert w.store.repo_grant_subjects(_rid(w, repo), "repo") == []
    assert len(h.calls(h.user_call)) >= 3  # one repository per page

    h.revoke("attic", "dave")  # access the host takes away disappears after the next sync
    w.store.request_account_permission_sync(dave.account_id)
    w.sync(advance_h=0)
    assert _sees(w, dave) == {"public", "vault"}

    h.drop_token(h.tokens["dave"])  # dave's token is revoked on the host: 401 revokes at once
    w.store.request_account_permission_sync(dave.account_id)
    w.sync(advance_h=0)
    assert _sees(w, dave) == {"public"}
    assert "401" in w.store.get_linked_account(dave.account_id).permission_error


def test_a_401_on_the_connection_token_revokes_at_once(world):
    h, w = world
    bob = w.user("bob", h.subject("bob"))
    w.sync()
    assert _sees(w, bob) == {"public", "secret"}
    h.drop_token(h.token)
    w.sync()
    assert _sees(w, bob) == {"public"}
    assert "401" in w.store.repo_permission_syncs()[_rid(w, "secret")].error
    assert w.store.repo_grant_subjects(_rid(w, "secret")) == []


def test_a_host_error_keeps_the_last_known_access(world):
    h, w = world
    bob = w.user("bob", h.subject("bob"))
    w.sync()
    h.fake.fail(502, times=1000, path=h.repo_path)
    w.sync()  # failed 1 h after the grant: it still counts (until it is twice the interval old)
    assert _sees(w, bob) == {"public", "secret"}
    assert w.store.repo_permission_syncs()[_rid(w, "secret")].error
    w.clock.advance(hours=1.1)
    assert _sees(w, bob) == {"public"}


@pytest.mark.parametrize("team_units", [False, True])  # a team's access as `permission`, or per unit (Gitea 1.17+)
def test_gitea_readers_include_the_members_of_the_organizations_teams(team_units):
    """An organization's repository is read by its collaborators and the members of its teams
    that read code; a user's repository has no teams (Gitea answers 405) and only its owner and
    collaborators read it."""
    from types import SimpleNamespace

    from codesearch.hosts.http import HostHttp
    from codesearch.permission_sync.fetch import repo_readers

    with FakeGitea("gitea-admin", "admin") as fake:
        fake.add_org("acme", members=("admin", "gina", "hugo"), team_units=team_units)  # admin: the token's user
        fake.add_repo("acme", "secret", private=True, collaborators=("ivy",))
        fake.add_repo("admin", "notes", private=True, collaborators=("jo",))
        conn = {"type": "gitea", "url": fake.base_url}
        with HostHttp() as http:
            def readers(name):
                repo = SimpleNamespace(display_name=name, external_id="")
                return {int(i) for i in repo_readers("gitea", conn, fake.token, repo, http)}

            ids = fake.user_id
            assert readers("acme/secret") == {ids("acme"), ids("admin"), ids("gina"), ids("hugo"), ids("ivy")}
            assert readers("admin/notes") == {ids("admin"), ids("jo")}


def test_bitbucket_server_readers_include_project_and_group_permissions():
    """A Bitbucket Server repository is read by the users granted it or its project, by name or
    through a group (every project permission includes reading)."""
    import tempfile
    from types import SimpleNamespace

    from codesearch.hosts.http import HostHttp
    from codesearch.permission_sync.fetch import repo_readers

    projects = [ServerProject("CORE", readers={"admin", "pat"}, groups={"staff": "PROJECT_WRITE"}),
                ServerProject("~DAVE", readers={"dave"})]
    repos = [ServerRepo("CORE", "secret", users={"ron": "REPO_READ"}, groups={"auditors": "REPO_READ"}),
             ServerRepo("CORE", "other"), ServerRepo("~DAVE", "notes", users={"jo": "REPO_READ"})]
    with tempfile.TemporaryDirectory() as root, FakeBitbucketServer(
            root, projects, repos, tokens={"bbs-admin": "admin"}, admins={"admin"}, page_size=1,
            group_members={"staff": {"sam", "sue"}, "auditors": {"gus"}}) as fake:
        conn = {"type": "bitbucket", "deploymentType": "server", "url": fake.url}
        with HostHttp() as http:
            def readers(name):
                found = repo_readers("bitbucketServer", conn, "bbs-admin", SimpleNamespace(display_name=name), http)
                return {fake.users_by_id[int(i)] for i in found}

            assert readers("CORE/secret") == {"admin", "pat", "ron", "sam", "sue", "gus"}
            assert readers("CORE/other") == {"admin", "pat", "sam", "sue"}
            assert readers("~DAVE/notes") == {"jo"}  # a personal project's owner: user-driven syncing
