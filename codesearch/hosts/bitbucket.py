"""Bitbucket Cloud and Bitbucket Server / Data Center (docs/configuration.md#connection-kinds).

One connection type, ``bitbucket``; ``deploymentType`` (``cloud``, the default, or ``server``)
picks the API.

Cloud (``url`` defaults to ``https://api.bitbucket.org/2.0``):
  * ``workspaces``: ``GET /repositories/{ws}``; ``projects`` (``workspace/PROJECTKEY``): the same
    with ``q=project.key="KEY"``; ``repos`` (``workspace/slug``): ``GET /repositories/{ws}/{slug}``.
  * pages: follow ``next`` from the body until it is absent.
  * auth: ``Bearer <token>``, or Basic ``user:token`` when ``user`` is set (and is not
    ``x-token-auth``); without a token, anonymous (public repositories only).
  * fork = the key ``parent`` is present; ``size`` is in bytes; default branch ``mainbranch.name``;
    clone URL the ``https`` entry of ``links.clone`` (user info removed); no archived flag, so
    ``exclude.archived`` does not apply; ``all`` is ignored.
  * names ``bitbucket.org/<workspace>/<PROJECTKEY>/<slug>`` (the host of `url`, with
    ``api.bitbucket.org`` read as ``bitbucket.org``); ``exclude.repos`` globs match
    ``workspace/PROJECTKEY/slug``.

Server (``url`` required; the API is ``<url>/rest/api/1.0``):
  * ``all``: ``GET /repos`` (``archived=ALL``, so that ``exclude.archived`` decides); ``projects``
    (keys): ``GET /projects/{KEY}/repos``; ``repos`` (``PROJECT/slug``):
    ``GET /projects/{KEY}/repos/{slug}``; ``workspaces`` do not exist there (a warning).
  * pages: ``start``/``limit``, until ``isLastPage`` (next start from ``nextPageStart``).
  * auth as cloud. fork = the key ``origin`` is present; ``archived``; ``public``; clone URL the
    ``http`` entry of ``links.clone``; web URL ``links.self`` without ``/browse``.
  * names ``<host[:port]>[/<context path>]/<PROJECT>/<slug>``; ``exclude.repos`` globs match
    ``PROJECT/slug``.

Both: a workspace, project or repository the host does not know is a warning naming the
connection and the rest goes on; 401/403 raise `HostAuthError` (Bitbucket Server answers 401
also for missing read permission). The git user is ``gitUser``, else ``user``, else
``x-token-auth``.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from functools import partial
from typing import Any

from codesearch.errors import HostError
from codesearch.hosts.base import Collector, HostRepo, JsonObject, ListResult, excluded, register
from codesearch.hosts.http import HostHttp

CLOUD_API = "https://api.bitbucket.org/2.0"
#: ``pagelen`` asked of Bitbucket Cloud (its maximum); the server may answer fewer
CLOUD_PAGELEN = 100
#: ``limit`` asked of Bitbucket Server (SB asks 1000; servers cap it, commonly at 1000)
SERVER_LIMIT = 1000


def _netloc(url: str) -> str:
    m = re.match(r"^[a-zA-Z][\w+.-]*://(?:[^@/?#]*@)?([^/?#]+)([^?#]*)", url.strip())
    return m.group(1) if m else url.strip().rstrip("/")


def _path_root(url: str) -> str:
    """``host[:port][/path]`` of `url` without scheme, user info or trailing slash."""
    m = re.match(r"^[a-zA-Z][\w+.-]*://(?:[^@/?#]*@)?([^/?#]+)([^?#]*)", url.strip())
    return (m.group(1) + m.group(2)).rstrip("/") if m else url.strip().rstrip("/")


def _strip_userinfo(url: str) -> str:
    return re.sub(r"^([a-zA-Z][\w+.-]*://)[^@/?#]*@", r"\1", url)


def _auth_headers(user: str | None, token: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if token:
        if not user or user == "x-token-auth":
            headers["Authorization"] = f"Bearer {token}"
        else:
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()
    return headers


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


#: besides 404, the answer that means "this workspace/project/repo is not there" (not a failure of the whole)
GONE = (410,)


# ---------------------------------------------------------------------------------------------- cloud


def _cloud_pages(http: HostHttp, url: str, params: dict[str, Any] | None, headers: dict[str, str]) -> list[JsonObject]:
    out: list[JsonObject] = []
    seen: set[str] = set()
    while url:
        body = http.get_json(url, params=params, headers=headers)
        values = body.get("values") or []
        out.extend(v for v in values if isinstance(v, dict))
        nxt = body.get("next")
        if not values or not nxt or nxt in seen:
            break
        seen.add(nxt)
        url, params = nxt, None  # `next` carries every parameter: follow it verbatim
    return out


def _one(http: HostHttp, url: str, headers: dict[str, str]) -> list[JsonObject]:
    """The one repository at `url`, as a listing of one."""
    return [http.get_json(url, headers=headers)]


def _cloud_repo(repo: JsonObject, root: str, git_user: str) -> HostRepo | None:
    full = repo.get("full_name") or ""
    if "/" not in full:
        return None
    workspace, slug = full.split("/", 1)
    key = (repo.get("project") or {}).get("key") or ""
    display = f"{workspace}/{key}/{slug}"
    links = repo.get("links") or {}
    html = ((links.get("html") or {}).get("href") or "").rstrip("/")
    clone = next((c.get("href") for c in links.get("clone") or () if c.get("name") == "https" and c.get("href")), None)
    clone_url = _strip_userinfo(clone) if clone else html
    return HostRepo(
        name=f"{root}/{display}",
        display_name=display,
        code_host_type="bitbucketCloud",
        clone_url=clone_url,
        web_url=html,
        file_url_template=f"{html}/src/{{branch}}/{{path}}" if html else "",
        default_branch=(repo.get("mainbranch") or {}).get("name"),
        fork="parent" in repo,
        archived=False,
        public=repo.get("is_private") is False,
        size_bytes=repo.get("size"),
        pushed_at=repo.get("updated_on"),
        external_id=repo.get("uuid") or "",
        git_user=git_user,
    )


def _list_cloud(conn: JsonObject, token: str | None, http: HostHttp, c: Collector) -> list[HostRepo]:
    api = (conn.get("url") or CLOUD_API).rstrip("/")
    host = _netloc(api)
    if host in ("bitbucket.org", "www.bitbucket.org"):
        api, host = CLOUD_API, "api.bitbucket.org"
    root = "bitbucket.org" if host == "api.bitbucket.org" else host
    headers = _auth_headers(conn.get("user"), token)
    git_user = conn.get("gitUser") or conn.get("user") or "x-token-auth"
    for ws in conn.get("workspaces") or ():
        c.gather(
            partial(_cloud_pages, http, f"{api}/repositories/{_q(ws)}", {"pagelen": CLOUD_PAGELEN}, headers),
            f"workspace {ws!r} not found (or not visible)",
            also=GONE,
        )
    for entry in conn.get("projects") or ():
        ws, _, key = entry.partition("/")
        if not ws or not key or "/" in key:
            c.warn(f"project {entry!r} is not of the form workspace/PROJECTKEY")
            continue
        found = c.gather(
            partial(
                _cloud_pages,
                http,
                f"{api}/repositories/{_q(ws)}",
                {"pagelen": CLOUD_PAGELEN, "q": f'project.key="{key}"'},
                headers,
            ),
            f"project {entry!r}: workspace {ws!r} not found (or not visible)",
            also=GONE,
        )
        if found is not None and not found:
            c.warn(f"project {entry!r} not found or has no repositories visible")
    for entry in conn.get("repos") or ():
        ws, _, slug = entry.partition("/")
        if not ws or not slug or "/" in slug:
            c.warn(f"repo {entry!r} is not of the form workspace/slug")
            continue
        c.gather(
            partial(_one, http, f"{api}/repositories/{_q(ws)}/{_q(slug)}", headers),
            f"repo {entry!r} not found (or not visible)",
            also=GONE,
        )
    return [hr for hr in (_cloud_repo(repo, root, git_user) for repo in c.raw) if hr is not None]


# --------------------------------------------------------------------------------------------- server


def _server_pages(http: HostHttp, url: str, params: dict[str, Any], headers: dict[str, str]) -> list[JsonObject]:
    out: list[JsonObject] = []
    start = 0
    seen: set[int] = set()
    while True:
        body = http.get_json(url, params={**params, "start": start, "limit": SERVER_LIMIT}, headers=headers)
        values = body.get("values") or []
        out.extend(v for v in values if isinstance(v, dict))
        nxt = body.get("nextPageStart")
        if not values or body.get("isLastPage", True) or not isinstance(nxt, int) or nxt in seen:
            return out
        seen.add(nxt)
        start = nxt


def _server_repo(repo: JsonObject, root: str, git_user: str) -> HostRepo | None:
    key = (repo.get("project") or {}).get("key")
    slug = repo.get("slug")
    if not key or not slug:
        return None
    display = f"{key}/{slug}"
    links = repo.get("links") or {}
    clone = next((c.get("href") for c in links.get("clone") or () if c.get("name") == "http" and c.get("href")), "")
    self_links = links.get("self") or []
    web = re.sub(r"/browse/?$", "", (self_links[0].get("href") or "") if self_links else "").rstrip("/")
    default = repo.get("defaultBranch")
    if isinstance(default, dict):
        default = default.get("displayId")
    if isinstance(default, str) and default.startswith("refs/heads/"):
        default = default[len("refs/heads/") :]
    return HostRepo(
        name=f"{root}/{display}",
        display_name=display,
        code_host_type="bitbucketServer",
        clone_url=_strip_userinfo(clone),
        web_url=web,
        file_url_template=f"{web}/browse/{{path}}?at={{branch}}" if web else "",
        default_branch=default or None,
        fork="origin" in repo,
        archived=repo.get("archived") is True,
        public=repo.get("public") is True,
        external_id=str(repo.get("id", "")),
        git_user=git_user,
    )


def _list_server(conn: JsonObject, token: str | None, http: HostHttp, c: Collector) -> list[HostRepo]:
    url = (conn.get("url") or "").rstrip("/")
    if not url:
        raise HostError(f"connection {c.name}: `url` is required when deploymentType is server")
    api = f"{url}/rest/api/1.0"
    root = _path_root(url)
    headers = _auth_headers(conn.get("user"), token)
    git_user = conn.get("gitUser") or conn.get("user") or "x-token-auth"
    for ws in conn.get("workspaces") or ():
        c.warn(f"workspaces do not exist in Bitbucket Server; {ws!r} ignored")
    if conn.get("all"):
        c.raw += _server_pages(http, f"{api}/repos", {"archived": "ALL"}, headers)
    for key in conn.get("projects") or ():
        c.gather(
            partial(_server_pages, http, f"{api}/projects/{_q(key)}/repos", {}, headers),
            f"project {key!r} not found",
            also=GONE,
        )
    for entry in conn.get("repos") or ():
        key, _, slug = entry.partition("/")
        if not key or not slug or "/" in slug:
            c.warn(f"repo {entry!r} is not of the form PROJECT/slug")
            continue
        c.gather(
            partial(_one, http, f"{api}/projects/{_q(key)}/repos/{_q(slug)}", headers),
            f"repo {entry!r} not found",
            also=GONE,
        )
    return [hr for hr in (_server_repo(repo, root, git_user) for repo in c.raw) if hr is not None]


@register("bitbucket")
def list_bitbucket(name: str, conn: JsonObject, token: str | None, http: HostHttp) -> ListResult:
    c = Collector(name)
    server = conn.get("deploymentType", "cloud") == "server"
    listed = (_list_server if server else _list_cloud)(conn, token, http, c)
    exclude = conn.get("exclude") or {}
    for hr in listed:
        if not c.first(hr.name):
            continue
        if excluded(exclude, fork=hr.fork, archived=server and hr.archived, name=hr.display_name):
            continue
        c.result.repos.append(hr)
    return c.result
