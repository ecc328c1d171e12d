"""Gitea (and Forgejo / Codeberg, same API): the `gitea` connection kind.

REST base ``<url>/api/v1`` (`url` defaults to https://gitea.com), ``Authorization: token <token>``.

Sources of repositories:

* ``orgs``: ``GET /orgs/{org}/repos``;
* ``users``: ``GET /users/{user}/repos``;
* ``repos``: ``GET /repos/{owner}/{repo}``.

Lists are paged with ``page``/``limit`` (we ask ``limit=50``; the server silently clamps it to its
``MAX_RESPONSE_ITEMS``, so a page shorter than asked is *not* the last one). The next page is the
``Link`` header's ``rel="next"`` URL; without a Link header we page on while ``X-Total-Count`` says
items are missing, and without either until an empty page.

A user, org or repo that does not exist (404) is a warning naming the connection and the entity;
the rest continues. Repos listed twice are returned once.

Filters, as Sourcebot applies them: ``exclude.forks``, ``exclude.archived``, ``exclude.repos`` globs
on ``owner/repo``. A repo is public when it is neither ``private`` nor ``internal``. Gitea builds
``clone_url`` from its own ``ROOT_URL``, which is often not the address we reach it at, so the clone
URL's scheme, host and port are replaced by those of the configured `url`. Git over HTTPS uses the
token as user name with an empty password; since that user name is a secret, `HostRepo.git_user`
stays empty and `codesearch.sync.git_credentials` supplies it at clone time.
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
)
from codesearch.hosts.http import HostHttp, next_link

if TYPE_CHECKING:
    import httpx

DEFAULT_URL = "https://gitea.com"
LIMIT = 50


def rewrite_clone_url(clone_url: str, configured_url: str) -> str:
    """`clone_url` with the scheme, host and port of `configured_url` (path and query kept)."""
    c, base = urlsplit(clone_url), urlsplit(configured_url)
    netloc = (base.hostname or "") + (f":{base.port}" if base.port else "")
    return urlunsplit((base.scheme or c.scheme, netloc, c.path, c.query, ""))


@register("gitea")
def list_gitea(name: str, conn: JsonObject, token: str | None, http: HostHttp) -> ListResult:
    url = (conn.get("url") or DEFAULT_URL).rstrip("/")
    api = url + "/api/v1"
    host = host_of(url)
    headers = {"User-Agent": "codesearch"}
    if token:
        headers["Authorization"] = f"token {token}"
    c = Collector(name, "Gitea")

    def pages(first_url: str) -> list[JsonObject]:
        page = 1

        def next_url(r: httpx.Response, body: list[Any], items: list[JsonObject]) -> str | None:
            nonlocal page
            nxt = next_link(r)
            if not nxt:
                total = r.headers.get("x-total-count", "").strip()
                more = len(items) < int(total) if total.isdigit() else True
                if not body or not more or "link" in r.headers:
                    return None
                page += 1
                nxt = str(r.request.url.copy_set_param("page", page))
            return nxt

        return json_pages(http, first_url, {"page": page, "limit": LIMIT}, headers, next_url, "repositories")

    for org in conn.get("orgs") or ():
        c.entity("organization", org, partial(pages, f"{api}/orgs/{quote(org, safe='')}/repos"))
    for user in conn.get("users") or ():
        c.entity("user", user, partial(pages, f"{api}/users/{quote(user, safe='')}/repos"))
    for full in conn.get("repos") or ():
        owner, _, repo = full.partition("/")
        c.entity(
            "repository",
            full,
            partial(one_object, http, f"{api}/repos/{quote(owner, safe='')}/{quote(repo, safe='')}", headers),
        )

    return c.finish(
        key=lambda r: str(r.get("id") or r.get("full_name", "").lower()),
        excluded=lambda r: _excluded(r, conn),
        convert=lambda r: _to_host_repo(r, url, host, token),
    )


def _excluded(r: JsonObject, conn: JsonObject) -> bool:
    exclude = conn.get("exclude") or {}
    if not r.get("clone_url"):
        return True
    return excluded(exclude, fork=bool(r.get("fork")), archived=bool(r.get("archived")), name=r.get("full_name", ""))


def _to_host_repo(r: JsonObject, url: str, host: str, token: str | None) -> HostRepo:
    full = r["full_name"]
    html = (r.get("html_url") or "").rstrip("/")
    size = r.get("size")
    return HostRepo(
        name=f"{host}/{full}",
        display_name=full,
        code_host_type="gitea",
        clone_url=rewrite_clone_url(r["clone_url"], url),
        web_url=html,
        file_url_template=f"{html}/src/branch/{{branch}}/{{path}}" if html else "",
        default_branch=r.get("default_branch") or None,
        fork=bool(r.get("fork")),
        archived=bool(r.get("archived")),
        public=not r.get("private") and not r.get("internal"),
        topics=list(r.get("topics") or ()),
        size_bytes=size * 1000 if isinstance(size, int) else None,
        pushed_at=r.get("updated_at"),
        stars=r.get("stars_count"),
        external_id=str(r.get("id", "")),
        git_user="",  # the git user is the token itself: `sync.git_credentials` supplies it, never metadata
    )
