"""Azure DevOps Services and Azure DevOps Server / TFS (docs/configuration.md#connection-kinds).

Base URL of an organisation (cloud) or collection (server): ``<url>[/tfs]/<org>``; `url`
defaults to ``https://dev.azure.com`` and ``useTfsPath`` inserts ``/tfs``. Every request carries
``api-version`` (`API_VERSIONS` per deployment type; an on-premises server that answers
"version out of range" is asked again with the next older version), Basic auth with an empty
user name and the PAT, and ``X-TFS-FedAuthRedirect: Suppress`` so that a bad PAT gives 401
instead of a sign-in page (a 203 with HTML is still treated as refused credentials).

Selection:
  * ``orgs``: every project of the org (``GET /{org}/_apis/projects``, paged by the
    ``x-ms-continuationtoken`` response header), then each project's repositories
    (``GET /{org}/{project id}/_apis/git/repositories``, not paged);
  * ``projects`` (``org/project``, spaces allowed): that project's repositories;
  * ``repos`` (``org/project/repo``): ``GET /{org}/{project}/_apis/git/repositories/{repo}``.
Filters: ``exclude.disabled`` (``isDisabled``), ``exclude.repos`` (globs on ``project/repo``),
``exclude.projects`` (globs on the project name), ``exclude.size.min``/``max`` (bytes; a repo
whose size is unknown or 0 is kept). Repositories without a ``remoteUrl`` are skipped.

Names are ``<host[:port]>[/<url path>]/<project>/<repo>``: the org is not in the name (two orgs
with the same project and repo names collide; the first one listed wins, with a warning).
Fork = ``isFork``; public = the project's visibility is ``public``; default branch from
``defaultBranch`` (``refs/heads/main`` → ``main``); size in bytes. An unknown org, project or
repository is a warning naming the connection; 401/403 raise `HostAuthError`.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from functools import partial
from typing import TYPE_CHECKING, Any

from codesearch.errors import HostAuthError, HostError
from codesearch.hosts.base import Collector, HostRepo, JsonObject, ListResult, glob_any, register
from codesearch.hosts.http import HostHttp

if TYPE_CHECKING:
    import httpx

DEFAULT_URL = "https://dev.azure.com"
#: api-version per deployment type, newest first: Services has 7.1; a Server is asked 7.0 (2022),
#: then 6.0 (2020), 5.0 (2019), 4.1 (TFS 2018) when it answers that the version is out of range
API_VERSIONS = {"cloud": ("7.1",), "server": ("7.0", "6.0", "5.0", "4.1")}
#: ``$top`` for the projects listing (the service's default is 100)
PROJECTS_PAGE = 100


def _path_root(url: str) -> str:
    m = re.match(r"^[a-zA-Z][\w+.-]*://(?:[^@/?#]*@)?([^/?#]+)([^?#]*)", url.strip())
    return (m.group(1) + m.group(2)).rstrip("/") if m else url.strip().rstrip("/")


def _strip_userinfo(url: str) -> str:
    return re.sub(r"^([a-zA-Z][\w+.-]*://)[^@/?#]*@", r"\1", url)


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


class _Client:
    """GETs against one deployment, with the PAT, the api-version and its fallback."""

    def __init__(self, http: HostHttp, deployment: str, token: str):
        self.http = http
        self.versions = list(API_VERSIONS.get(deployment, API_VERSIONS["cloud"]))
        self.headers = {
            "Accept": "application/json",
            "Authorization": "Basic " + base64.b64encode(f":{token}".encode()).decode(),
            "X-TFS-FedAuthRedirect": "Suppress",
        }

    def get(self, url: str, params: dict[str, Any] | None = None) -> tuple[Any, httpx.Response]:
        """(json body, response) of a GET; retries older api-versions on "out of range"."""
        while True:
            try:
                r = self.http.get(url, params={**(params or {}), "api-version": self.versions[0]}, headers=self.headers)
            except HostError as e:
                if e.status == 400 and len(self.versions) > 1 and "version" in str(e).lower():
                    self.versions.pop(0)
                    continue
                raise
            if r.status_code == 203 or "json" not in r.headers.get("content-type", "json"):
                where = url.split("?", 1)[0]
                raise HostAuthError(
                    f"{where} refused the credentials (sign-in page instead of an answer)",
                    url=where,
                    status=r.status_code,
                )
            try:
                return r.json(), r
            except ValueError:
                raise HostError(f"{url} answered with a body that is not JSON", url=url, status=r.status_code) from None


def _projects(client: _Client, org_url: str) -> list[JsonObject]:
    out: list[JsonObject] = []
    token: str | None = None
    seen: set[str] = set()
    while True:
        params: dict[str, Any] = {"$top": PROJECTS_PAGE}
        if token:
            params["continuationToken"] = token
        body, r = client.get(f"{org_url}/_apis/projects", params)
        out.extend(p for p in body.get("value") or () if isinstance(p, dict))
        token = r.headers.get("x-ms-continuationtoken")
        if not token or token in seen:
            return out
        seen.add(token)


def _repos_of_project(client: _Client, org_url: str, project: str) -> list[JsonObject]:
    body, _ = client.get(f"{org_url}/{_q(project)}/_apis/git/repositories")
    return [r for r in body.get("value") or () if isinstance(r, dict)]


def _repo(client: _Client, url: str) -> list[JsonObject]:
    """The one repository at `url`, as a listing of one."""
    body, _ = client.get(url)
    return [body]


@register("azuredevops")
def list_azuredevops(name: str, conn: JsonObject, token: str | None, http: HostHttp) -> ListResult:
    c = Collector(name)
    if not token:
        raise HostAuthError(f"connection {name}: Azure DevOps needs a personal access token (`token`)")
    deployment = conn.get("deploymentType", "cloud")
    base = (conn.get("url") or DEFAULT_URL).rstrip("/")
    prefix = base + ("/tfs" if conn.get("useTfsPath") else "")
    root = _path_root(base)
    client = _Client(http, deployment, token)
    git_user = conn.get("user") or "azuredevops"

    def org_url(org: str) -> str:
        return f"{prefix}/{_q(org)}"

    for org in conn.get("orgs") or ():
        projects = c.fetch(partial(_projects, client, org_url(org)), f"organization {org!r} not found (or not visible)")
        for listed in projects or ():
            c.gather(
                partial(_repos_of_project, client, org_url(org), listed.get("id") or listed.get("name") or ""),
                f"project {org}/{listed.get('name')} disappeared while listing",
            )
    for entry in conn.get("projects") or ():
        org, _, project = entry.partition("/")
        if not org or not project or "/" in project:
            c.warn(f"project {entry!r} is not of the form org/project")
            continue
        c.gather(
            partial(_repos_of_project, client, org_url(org), project),
            f"project {entry!r} not found (or not visible)",
        )
    for entry in conn.get("repos") or ():
        parts = entry.split("/")
        if len(parts) != 3 or not all(parts):
            c.warn(f"repo {entry!r} is not of the form org/project/repo")
            continue
        org, project, repo = parts
        c.gather(
            partial(_repo, client, f"{org_url(org)}/{_q(project)}/_apis/git/repositories/{_q(repo)}"),
            f"repo {entry!r} not found (or not visible)",
        )

    exclude = conn.get("exclude") or {}
    size = exclude.get("size") or {}
    seen: dict[str, str] = {}
    for repo in c.raw:
        project = repo.get("project") or {}
        pname, rname = project.get("name") or "", repo.get("name") or ""
        if not pname or not rname or not repo.get("remoteUrl"):
            continue
        display = f"{pname}/{rname}"
        full = f"{root}/{display}"
        rid = str(repo.get("id") or "")
        if full in seen:
            if seen[full] != rid:
                c.warn(f"repo {display!r} listed twice from different organizations; kept the first")
            continue
        seen[full] = rid
        if exclude.get("disabled") and repo.get("isDisabled"):
            continue
        if glob_any(exclude.get("repos"), display):
            continue
        if glob_any(exclude.get("projects"), pname):
            continue
        nbytes = repo.get("size") or 0
        if nbytes and ((size.get("min") and nbytes < size["min"]) or (size.get("max") and nbytes > size["max"])):
            continue
        web = (repo.get("webUrl") or f"{base}/{_q(pname)}/_git/{_q(rname)}").rstrip("/")
        default = repo.get("defaultBranch") or None
        if default and default.startswith("refs/heads/"):
            default = default[len("refs/heads/") :]
        c.result.repos.append(
            HostRepo(
                name=full,
                display_name=display,
                code_host_type="azuredevops",
                clone_url=_strip_userinfo(repo["remoteUrl"]),
                web_url=web,
                file_url_template=f"{web}?path=/{{path}}&version=GB{{branch}}",
                default_branch=default,
                fork=bool(repo.get("isFork")),
                archived=False,
                public=project.get("visibility") == "public",
                size_bytes=repo.get("size"),
                external_id=rid,
                git_user=git_user,
            )
        )
    return c.result
