"""What the code hosts say about read access, one pair of calls per host kind.

* `repo_readers(kind, conn, token, repo, http)` (repo-driven): the user ids on the host that may
  read one repository, asked with the connection's token;
* `readable_repos(kind, api_url, token, http)` (user-driven): the host's ids (`Repo.external_id`)
  of the repositories a linked account's own token can read.

Endpoints (all paginated):

================  ===============================================  ===========================================
kind              repo-driven                                      user-driven
================  ===============================================  ===========================================
github            ``GET /repos/{owner}/{repo}/collaborators``      ``GET /user/repos?visibility=all``
gitlab            ``GET /projects/{id}/members/all`` (level ≥ 20)  ``GET /projects?membership=true&min_access_level=20``
gitea             ``GET /repos/{owner}/{repo}/collaborators``,     ``GET /user/repos``
                  the owning user, and for an organization's
                  repository the members of its teams that read
                  code (``GET /repos/{owner}/{repo}/teams``,
                  ``GET /teams/{id}/members``)
bitbucketCloud    ``GET /repositories/{ws}/{slug}/permissions-      ``GET /user/permissions/repositories``
                  config/users``
bitbucketServer   ``GET /projects/{key}/repos/{slug}/permissions/  ``GET /repos?permission=REPO_READ&archived=ALL``
                  users`` and ``…/groups``, the project's
                  ``GET /projects/{key}/permissions/users`` and
                  ``…/groups``, the groups' members (``GET
                  /admin/groups/more-members?context={group}``)
================  ===============================================  ===========================================

GitLab's level 20 is Reporter, the lowest that may read a private project's code. Errors are
`codesearch.hosts.http`'s: `HostAuthError` (401/403) and `HostNotFound` (404) mean "no access
any more" to the caller (`runner`), other `HostError`s (rate limits, 5xx after retries) mean
"ask again later".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from codesearch.errors import HostError
from codesearch.hosts import bitbucket, github
from codesearch.hosts.base import JsonObject, json_pages
from codesearch.hosts.http import HostHttp, next_link

if TYPE_CHECKING:
    import httpx

    from codesearch.store.models import Repo

GITLAB_REPORTER = 20
_PER_PAGE = 100


def api_url(kind: str, url: str | None) -> str:
    """The REST base of a host of `kind` at its configured `url` (None: the public service)."""
    if kind == "github":
        return github.api_base(url or "https://github.com")
    if kind == "gitlab":
        return (url or "https://gitlab.com").rstrip("/") + "/api/v4"
    if kind == "gitea":
        return (url or "https://gitea.com").rstrip("/") + "/api/v1"
    if kind == "bitbucketCloud":
        u = (url or bitbucket.CLOUD_API).rstrip("/")
        return bitbucket.CLOUD_API if "bitbucket.org" in u and "api.bitbucket.org" not in u else u
    if kind == "bitbucketServer":
        if not url:
            raise HostError("a Bitbucket Server connection needs a url")
        return url.rstrip("/") + "/rest/api/1.0"
    raise HostError(f"permission syncing does not support {kind} hosts")


def headers_for(kind: str, token: str | None, user: str | None = None) -> dict[str, str]:
    """The request headers of a host of `kind` with `token` (`user`: Bitbucket's basic-auth user)."""
    if kind == "github":
        h = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "codesearch"}
        if token:
            h["Authorization"] = f"Bearer {token}"
        return h
    if kind == "gitlab":
        h = {"User-Agent": "codesearch"}
        if token:
            h["Authorization"] = f"Bearer {token}"
        return h
    if kind == "gitea":
        h = {"User-Agent": "codesearch"}
        if token:
            h["Authorization"] = f"token {token}"
        return h
    return bitbucket._auth_headers(user, token)


def _link_pages(
    http: HostHttp, url: str, params: dict[str, Any], headers: dict[str, str], what: str
) -> list[JsonObject]:
    def nxt(r: httpx.Response, body: list[Any], items: list[JsonObject]) -> str | None:
        if "x-next-page" in r.headers:  # GitLab offset pages
            page = r.headers["x-next-page"].strip()
            return str(r.request.url.copy_set_param("page", page)) if page else None
        return next_link(r)

    return [x for x in json_pages(http, url, params, headers, nxt, what) if isinstance(x, dict)]


def _split_display(repo: Repo, parts: int) -> list[str]:
    pieces = (repo.display_name or "").split("/")
    if len(pieces) != parts or not all(pieces):
        raise HostError(f"cannot name {repo.name} on its host (display name {repo.display_name!r})")
    return pieces


def repo_readers(kind: str, conn: dict[str, Any], token: str | None, repo: Repo, http: HostHttp) -> set[str]:
    """The host's user ids that may read `repo` (a `Repo` row of a connection of `kind`)."""
    api = api_url(kind, conn.get("url"))
    h = headers_for(kind, token, conn.get("user"))
    if kind == "github":
        owner, name = _split_display(repo, 2)
        users = _link_pages(
            http,
            f"{api}/repos/{quote(owner)}/{quote(name)}/collaborators",
            {"affiliation": "all", "per_page": _PER_PAGE},
            h,
            "collaborators",
        )
        return {str(u["id"]) for u in users if u.get("id") is not None}
    if kind == "gitlab":
        members = _link_pages(
            http,
            f"{api}/projects/{quote(str(repo.external_id), safe='')}/members/all",
            {"per_page": _PER_PAGE},
            h,
            "members",
        )
        return {
            str(u["id"])
            for u in members
            if u.get("id") is not None
            and int(u.get("access_level") or 0) >= GITLAB_REPORTER
            and (u.get("state") in (None, "active"))
        }
    if kind == "gitea":
        owner, name = _split_display(repo, 2)
        base = f"{api}/repos/{quote(owner)}/{quote(name)}"
        users = _link_pages(http, f"{base}/collaborators", {"limit": 50}, h, "collaborators")
        out = {str(u["id"]) for u in users if u.get("id") is not None}
        info = http.get_json(base, headers=h)
        own = (info or {}).get("owner") or {}
        # The owning user reads their repository. Gitea's `User` does not say whether the owner is
        # an organization; an organization's id is harmless here: users and organizations share
        # one id sequence, so no account has it.
        if own.get("id") is not None:
            out.add(str(own["id"]))
        for team in _gitea_teams(http, base, h):
            members = _link_pages(http, f"{api}/teams/{team['id']}/members", {"limit": 50}, h, "team members")
            out |= {str(u["id"]) for u in members if u.get("id") is not None}
        return out
    if kind == "bitbucketCloud":
        workspace, _key, slug = _split_display(repo, 3)
        values = bitbucket._cloud_pages(
            http, f"{api}/repositories/{quote(workspace)}/{quote(slug)}/permissions-config/users", {"pagelen": 100}, h
        )
        return {
            str((v.get("user") or {}).get("uuid"))
            for v in values
            if (v.get("user") or {}).get("uuid") and v.get("permission") in ("read", "write", "admin")
        }
    if kind == "bitbucketServer":
        return _bitbucket_server_readers(http, api, h, *_split_display(repo, 2))
    raise HostError(f"permission syncing does not support {kind} hosts")


#: a Gitea team's access that includes reading code (``permission``, or ``units_map["repo.code"]``
#: of Gitea 1.17+ teams, whose ``permission`` is then "none")
_GITEA_READS = ("read", "write", "admin", "owner")


def _gitea_teams(http: HostHttp, base: str, headers: dict[str, str]) -> list[JsonObject]:
    """The teams of a Gitea repository that may read its code; none for a user's repository
    (Gitea answers 405 "repo is not owned by an organization")."""
    try:
        teams = _link_pages(http, f"{base}/teams", {}, headers, "teams")
    except HostError as e:
        if e.status == 405:
            return []
        raise
    return [
        t
        for t in teams
        if t.get("id") is not None
        and (t.get("permission") in _GITEA_READS or (t.get("units_map") or {}).get("repo.code") in _GITEA_READS)
    ]


def _bitbucket_server_readers(http: HostHttp, api: str, headers: dict[str, str], key: str, slug: str) -> set[str]:
    """Bitbucket Server: the users granted the repository, or its project (every project
    permission includes reading), by name or through a group. A personal project (``~USER``)
    has no project permissions to ask about: its owner's access comes from user-driven syncing."""

    def pages(url: str, params: dict[str, Any] | None = None) -> list[JsonObject]:
        return bitbucket._server_pages(http, url, params or {}, headers)

    repo_url = f"{api}/projects/{quote(key)}/repos/{quote(slug)}"
    grants = pages(f"{repo_url}/permissions/users")
    groups = pages(f"{repo_url}/permissions/groups")
    if not key.startswith("~"):
        grants += pages(f"{api}/projects/{quote(key)}/permissions/users")
        groups += pages(f"{api}/projects/{quote(key)}/permissions/groups")
    users = [v.get("user") or {} for v in grants]
    names = {g for v in groups if (g := (v.get("group") or {}).get("name")) is not None}
    for name in sorted(names):
        users += pages(f"{api}/admin/groups/more-members", {"context": name})
    return {str(u["id"]) for u in users if u.get("id") is not None}


def readable_repos(kind: str, api: str, token: str, http: HostHttp) -> set[str]:
    """The host's ids of every repository the account whose token this is may read."""
    h = headers_for(kind, token)
    if kind == "github":
        repos = _link_pages(
            http,
            f"{api}/user/repos",
            {"visibility": "all", "per_page": _PER_PAGE, "affiliation": "owner,collaborator,organization_member"},
            h,
            "repositories",
        )
        return {str(r["id"]) for r in repos if r.get("id") is not None}
    if kind == "gitlab":
        repos = _link_pages(
            http,
            f"{api}/projects",
            {"membership": "true", "min_access_level": GITLAB_REPORTER, "simple": "true", "per_page": _PER_PAGE},
            h,
            "projects",
        )
        return {str(r["id"]) for r in repos if r.get("id") is not None}
    if kind == "gitea":
        repos = _link_pages(http, f"{api}/user/repos", {"limit": 50}, h, "repositories")
        return {str(r["id"]) for r in repos if r.get("id") is not None}
    if kind == "bitbucketCloud":
        values = bitbucket._cloud_pages(http, f"{api}/user/permissions/repositories", {"pagelen": 100}, h)
        return {str((v.get("repository") or {}).get("uuid")) for v in values if (v.get("repository") or {}).get("uuid")}
    if kind == "bitbucketServer":
        # `archived` defaults to ACTIVE (Bitbucket 8+), but connections list archived repositories too
        values = bitbucket._server_pages(http, f"{api}/repos", {"permission": "REPO_READ", "archived": "ALL"}, h)
        return {str(v["id"]) for v in values if v.get("id") is not None}
    raise HostError(f"permission syncing does not support {kind} hosts")
