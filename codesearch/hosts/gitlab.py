"""GitLab (gitlab.com and self-managed): the `gitlab` connection kind.

REST base ``<url>/api/v4`` (`url` defaults to https://gitlab.com), token in ``PRIVATE-TOKEN``.
Path parameters holding a namespace path are URL-encoded (``acme%2Fplatform``).

Sources of projects (``per_page=100``):

* ``all``: ``GET /projects`` with keyset pagination (``pagination=keyset&order_by=id&sort=asc``,
  so instances past GitLab's 50,000-row offset cap still list completely); every project the token
  can see. Ignored with a warning when the host is gitlab.com (the default), as Sourcebot does.
* ``groups``: ``GET /groups/{encoded path}/projects?include_subgroups=true`` (GitLab's default
  ``with_shared=true`` is kept, as Sourcebot does: projects shared into the group are listed too);
* ``users``: ``GET /users/{user}/projects`` (projects in the user's personal namespace);
* ``projects``: ``GET /projects/{encoded path}``.

Offset pages are followed with the ``x-next-page`` header (present but empty on the last page),
keyset pages (and any answer without ``x-next-page``) with the ``Link`` header's ``rel="next"``.

A group, user or project that does not exist (404) is a warning naming the connection and the
entity; the rest continues. Projects listed twice are returned once.

Filters, as Sourcebot applies them: ``exclude.archived``; ``exclude.forks`` (a fork is a project
whose JSON *has* the key ``forked_from_project``); ``exclude.userOwnedProjects`` (namespace kind
``user``); ``exclude.projects`` globs on ``path_with_namespace``; ``topics`` / ``exclude.topics``
globs compared lower-cased. Internal projects count as public. The clone URL is
``http_url_to_repo`` with its scheme forced to the configured URL's scheme.

Links to a project (its page, a file's page) are ``<webUrl>/<path_with_namespace>`` when the
connection sets `webUrl` (the address people browse, when the API is reached at another one, e.g.
``url`` ``https://api.gitlab.example.com``, ``webUrl`` ``https://gitlab.example.com``), as
Sourcebot builds them; else the ``web_url`` GitLab returns for the project.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

from codesearch.hosts.base import (
    Collector,
    HostRepo,
    JsonObject,
    ListResult,
    excluded,
    host_of,
    json_pages,
    one_object,
    register,
    topics_excluded,
)
from codesearch.hosts.http import HostHttp, next_link

if TYPE_CHECKING:
    import httpx

DEFAULT_URL = "https://gitlab.com"
CLOUD_HOST = "gitlab.com"
GIT_USER = "oauth2"
PER_PAGE = 100


def encode_path(path: str) -> str:
    """A namespace path as a GitLab path parameter: every ``/`` as ``%2F``."""
    return quote(path.strip("/"), safe="")


@register("gitlab")
def list_gitlab(name: str, conn: JsonObject, token: str | None, http: HostHttp) -> ListResult:
    url = (conn.get("url") or DEFAULT_URL).rstrip("/")
    api = url + "/api/v4"
    host = host_of(url)
    scheme = urlsplit(url).scheme or "https"
    headers = {"User-Agent": "codesearch"}
    if token:
        headers["PRIVATE-TOKEN"] = token
    c = Collector(name, "GitLab")

    def pages(first_url: str, params: dict[str, Any]) -> list[JsonObject]:
        return json_pages(http, first_url, {**params, "per_page": PER_PAGE}, headers, _next_page, "projects")

    if conn.get("all"):
        if (urlsplit(url).hostname or "").lower() == CLOUD_HOST:
            c.warn(f"`all` is ignored for {CLOUD_HOST}; set `url` to a self-managed instance")
        else:
            c.raw.extend(pages(f"{api}/projects", {"pagination": "keyset", "order_by": "id", "sort": "asc"}))
    for group in conn.get("groups") or ():
        c.entity(
            "group",
            group,
            partial(pages, f"{api}/groups/{encode_path(group)}/projects", {"include_subgroups": "true"}),
        )
    for user in conn.get("users") or ():
        c.entity("user", user, partial(pages, f"{api}/users/{quote(user, safe='')}/projects", {}))
    for project in conn.get("projects") or ():
        c.entity("project", project, partial(one_object, http, f"{api}/projects/{encode_path(project)}", headers))

    return c.finish(
        key=lambda p: str(p.get("id") or p.get("path_with_namespace", "").lower()),
        excluded=lambda p: _excluded(p, conn),
        convert=lambda p: _to_host_repo(p, host, scheme, token, (conn.get("webUrl") or "").rstrip("/")),
    )


def _next_page(r: httpx.Response, body: list[Any], items: list[JsonObject]) -> str | None:
    """Offset pages: the ``x-next-page`` header (empty on the last page); keyset pages: ``Link``."""
    if "x-next-page" in r.headers:
        page = r.headers["x-next-page"].strip()
        return str(r.request.url.copy_set_param("page", page)) if page else None
    return next_link(r)


def _excluded(p: JsonObject, conn: JsonObject) -> bool:
    exclude = conn.get("exclude") or {}
    if not p.get("http_url_to_repo"):
        return True
    if exclude.get("userOwnedProjects") and (p.get("namespace") or {}).get("kind") == "user":
        return True
    if excluded(
        exclude,
        fork="forked_from_project" in p,
        archived=bool(p.get("archived")),
        name=p.get("path_with_namespace", ""),
        globs="projects",
    ):
        return True
    return topics_excluded(p.get("topics"), conn)


def _to_host_repo(p: JsonObject, host: str, scheme: str, token: str | None, web_base: str = "") -> HostRepo:
    path = p["path_with_namespace"]
    web = f"{web_base}/{path}" if web_base else (p.get("web_url") or "").rstrip("/")
    clone = urlsplit(p["http_url_to_repo"])
    stats = p.get("statistics") or {}
    return HostRepo(
        name=f"{host}/{path}",
        display_name=path,
        code_host_type="gitlab",
        clone_url=urlunsplit((scheme, clone.netloc, clone.path, clone.query, "")),
        web_url=web,
        file_url_template=f"{web}/-/blob/{{branch}}/{{path}}" if web else "",
        default_branch=p.get("default_branch") or None,
        fork="forked_from_project" in p,
        archived=bool(p.get("archived")),
        # internal projects are readable by every signed-in GitLab user only: not public here
        public=p.get("visibility") == "public",
        topics=list(p.get("topics") or ()),
        size_bytes=stats.get("repository_size"),
        pushed_at=p.get("last_activity_at"),
        stars=p.get("star_count"),
        external_id=str(p.get("id", "")),
        git_user=GIT_USER if token else "",  # no token: anonymous git
    )
