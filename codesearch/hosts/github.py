"""GitHub and GitHub Enterprise Server: the `github` connection kind.

REST base: ``https://api.github.com`` when `url` is github.com (the default), else ``<url>/api/v3``
(GHES). Requests carry ``Authorization: Bearer <token>`` when a token is configured; the token is
checked first with ``GET /user`` (a bad token fails the whole listing with `HostAuthError`), which
also tells whose token it is.

Sources of repositories (all lists paged with ``per_page=100``, following the ``Link`` header's
``rel="next"`` URL verbatim, as GitHub rewrites it to ``/organizations/{id}/…`` paths):

* ``orgs``: ``GET /orgs/{org}/repos`` (every repo of the org the token can see);
* ``users``: ``GET /users/{user}/repos`` (the user's public repos) and, when the token belongs to
  that user, also ``GET /user/repos?affiliation=owner`` (adds the user's private repos);
* ``repos``: ``GET /repos/{owner}/{repo}``.

A user, org or repo that does not exist (404, or 422 from GitHub's validation) is a warning naming
the connection and the entity; the rest of the listing continues. Repos listed twice (an org and a
`repos` entry) are returned once.

With GitHub Apps (the config's ``apps`` for this host, `codesearch.hosts.github_app`), an org, user
or repo owner an app is installed on is read with that installation's token: an org's or user's
repositories are the installation's (``GET /installation/repositories``, owned by that account, its
private ones included), and ``GET /user`` is not asked (installation tokens belong to no user). An
owner no app is installed on is read as above with the connection's token, and a warning says so.

Filters, as Sourcebot applies them: a repo without ``clone_url`` is dropped; ``exclude.forks``,
``exclude.archived``; ``exclude.repos`` globs on ``owner/repo``; ``topics`` (keep a repo when one of
its topics matches one glob) and ``exclude.topics`` (drop it when one matches), both compared
lower-cased; ``exclude.size.min``/``max`` in bytes (inclusive) against GitHub's ``size`` (KB) × 1000.
A repo whose size GitHub reports as 0 or not at all is never excluded by size (Sourcebot does the same).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import quote, urlsplit

from codesearch.errors import HostError
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
    response_json,
    topics_excluded,
)
from codesearch.hosts.github_app import TOKENS, apps_of
from codesearch.hosts.http import HostHttp, next_link

DEFAULT_URL = "https://github.com"
CLOUD_HOST = "github.com"
CLOUD_API = "https://api.github.com"
GIT_USER = "x-access-token"
PER_PAGE = 100


def api_base(url: str) -> str:
    """The REST base for a configured host URL: api.github.com for github.com, else GHES `<url>/api/v3`."""
    if (urlsplit(url).hostname or "").lower() == CLOUD_HOST:
        return CLOUD_API
    return url.rstrip("/") + "/api/v3"


@register("github")
def list_github(name: str, conn: JsonObject, token: str | None, http: HostHttp) -> ListResult:
    url = (conn.get("url") or DEFAULT_URL).rstrip("/")
    api = api_base(url)
    host = host_of(url)
    headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "codesearch",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    c = Collector(name, "GitHub")

    def pages(first_url: str, params: dict[str, Any]) -> list[JsonObject]:
        return json_pages(
            http,
            first_url,
            {**params, "per_page": PER_PAGE},
            headers,
            lambda r, body, items: next_link(r),
            "repositories",
        )

    def attempt(kind: str, entity: str, fetch: Callable[[], list[JsonObject]]) -> None:
        c.entity(kind, entity, fetch, also=(422,))  # 422: GitHub's validation of a name

    apps = apps_of(conn)
    app_owners: set[str] = set()  # lower-cased owners read with an installation token
    asked: dict[str, dict[str, str] | None] = {}  # lower-cased owner -> its installation's headers, or None

    def installation_headers(owner: str) -> dict[str, str] | None:
        """Headers with the installation token of an app installed on `owner`, else None (and a
        warning, once per owner)."""
        if not apps:
            return None
        if owner.lower() not in asked:
            asked[owner.lower()] = _ask(owner)
        return asked[owner.lower()]

    def _ask(owner: str) -> dict[str, str] | None:
        tok = TOKENS.token_for_owner(api, apps, owner, http, os.environ)
        if tok is None:
            c.warn(
                f"no GitHub App is installed on {owner!r} at {host}; its repositories are read with the "
                + ("connection's token" if token else "no token (public repositories only)")
            )
            return None
        app_owners.add(owner.lower())
        return {**headers, "Authorization": f"Bearer {tok}"}

    def installation_repos(owner: str, h: dict[str, str]) -> list[JsonObject]:
        """The repositories the installation on `owner` was granted, owned by `owner`."""
        items: list[JsonObject] = []
        r = http.get(f"{api}/installation/repositories", params={"per_page": PER_PAGE}, headers=h)
        while True:
            body = response_json(r)
            repos = body.get("repositories") if isinstance(body, dict) else None
            if not isinstance(repos, list):
                raise HostError(f"{api}/installation/repositories answered with a body without repositories")
            items.extend(x for x in repos if ((x.get("owner") or {}).get("login") or "").lower() == owner.lower())
            nxt = next_link(r)
            if not nxt:
                return items
            r = http.get(nxt, headers=h)

    token_user = None
    if token:
        me = http.get_json(f"{api}/user", headers=headers)
        token_user = (me.get("login") or "").lower() if isinstance(me, dict) else None

    for org in conn.get("orgs") or ():
        h = installation_headers(org)
        if h is not None:
            attempt("organization", org, partial(installation_repos, org, h))
            continue
        attempt("organization", org, partial(pages, f"{api}/orgs/{quote(org)}/repos", {}))
    for user in conn.get("users") or ():
        h = installation_headers(user)
        if h is not None:
            attempt("user", user, partial(installation_repos, user, h))
            continue
        attempt("user", user, partial(pages, f"{api}/users/{quote(user)}/repos", {}))
        if token_user and user.lower() == token_user:
            c.raw.extend(pages(f"{api}/user/repos", {"affiliation": "owner"}))
    for full in conn.get("repos") or ():
        owner, _, repo = full.partition("/")
        h = installation_headers(owner)
        attempt(
            "repository",
            full,
            partial(one_object, http, f"{api}/repos/{quote(owner)}/{quote(repo)}", h or headers),
        )

    return c.finish(
        key=lambda r: str(r.get("id") or r.get("full_name", "").lower()),
        excluded=lambda r: _excluded(r, conn),
        convert=lambda r: _to_host_repo(r, host, token or _owner(r).lower() in app_owners),
    )


def _excluded(r: JsonObject, conn: JsonObject) -> bool:
    exclude = conn.get("exclude") or {}
    if not r.get("clone_url"):
        return True
    if excluded(exclude, fork=bool(r.get("fork")), archived=bool(r.get("archived")), name=r.get("full_name", "")):
        return True
    if topics_excluded(r.get("topics"), conn):
        return True
    size = exclude.get("size") or {}
    size_bytes = (r.get("size") or 0) * 1000
    if size_bytes:
        if size.get("min") is not None and size_bytes < size["min"]:
            return True
        if size.get("max") is not None and size_bytes > size["max"]:
            return True
    return False


def _owner(r: JsonObject) -> str:
    return str((r.get("owner") or {}).get("login") or r.get("full_name", "").partition("/")[0])


def _to_host_repo(r: JsonObject, host: str, token: str | bool | None) -> HostRepo:
    full = r["full_name"]
    html = (r.get("html_url") or "").rstrip("/")
    size = r.get("size")
    return HostRepo(
        name=f"{host}/{full}",
        display_name=full,
        code_host_type="github",
        clone_url=r["clone_url"],
        web_url=html,
        file_url_template=f"{html}/blob/{{branch}}/{{path}}" if html else "",
        default_branch=r.get("default_branch") or None,
        fork=bool(r.get("fork")),
        archived=bool(r.get("archived")),
        public=r.get("private") is False,
        topics=list(r.get("topics") or ()),
        size_bytes=size * 1000 if isinstance(size, int) else None,
        pushed_at=r.get("pushed_at"),
        stars=r.get("stargazers_count"),
        external_id=str(r.get("id", "")),
        git_user=GIT_USER if token else "",  # no token: anonymous git
    )
