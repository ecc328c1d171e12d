"""Gerrit: every project of a Gerrit server, listed anonymously (docs/configuration.md#connection-kinds).

Gerrit has no token in the config: the listing is anonymous (``GET <url>/projects/``, never the
authenticated ``/a/`` prefix), and every listed project is public. The answer starts with the
XSSI guard line ``)]}'`` and is a JSON object keyed by project name. We ask for descriptions
(``d``), hidden projects (``all``, so that ``exclude.hidden`` means something; real servers show
HIDDEN projects only to their owners) and page with ``n``/``S`` until a page comes back short.

Connection fields: ``url`` (required; may carry a path prefix), ``projects`` (globs; absent =
all), ``exclude.projects`` (globs), ``exclude.readOnly`` (state READ_ONLY), ``exclude.hidden``
(state HIDDEN). The special projects All-Projects, All-Users, All-Avatars and
All-Archived-Projects are never synced.

Names are ``<host[:port]>[/<url path>]/<project>`` (as Sourcebot builds them); the clone URL is
``<url>/<project>``; the web URL comes from the project's first web link (gitiles links are
relative, ``/plugins/gitiles/<project>``, and are joined to `url`). Gerrit's list does not say
the default branch: it is left unset until the repository is cloned.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from typing import Any

from codesearch.errors import HostError
from codesearch.hosts.base import HostRepo, JsonObject, ListResult, glob_any, register
from codesearch.hosts.http import HostHttp

#: projects per request (``n``); a shorter page is the last one
PAGE_SIZE = 500
#: never synced (Gerrit's own bookkeeping projects)
SPECIAL_PROJECTS = frozenset({"All-Projects", "All-Users", "All-Avatars", "All-Archived-Projects"})
XSSI_PREFIX = ")]}'"


def name_root(url: str) -> str:
    """``host[:port][/path]`` of `url`: the scheme, user info and trailing slashes removed, a port kept."""
    m = re.match(r"^[a-zA-Z][\w+.-]*://(?:[^@/?#]*@)?([^/?#]+)([^?#]*)", url.strip())
    if not m:
        return url.strip().rstrip("/")
    return (m.group(1) + m.group(2)).rstrip("/")


def parse_gerrit_json(text: str) -> Any:
    """Gerrit's JSON: the ``)]}'`` guard line removed first."""
    if text.startswith(XSSI_PREFIX):
        text = text[len(XSSI_PREFIX) :]
    return json.loads(text)


def _list_projects(base: str, http: HostHttp) -> dict[str, JsonObject]:
    projects: dict[str, JsonObject] = {}
    skip = 0
    while True:
        url = f"{base}/projects/?d&all&n={PAGE_SIZE}&S={skip}"
        r = http.get(url, headers={"Accept": "application/json"})
        try:
            page = parse_gerrit_json(r.text)
        except ValueError:
            raise HostError(
                f"{base}/projects/ answered {r.status_code} with a body that is not Gerrit JSON",
                url=f"{base}/projects/",
                status=r.status_code,
            ) from None
        if not isinstance(page, dict):
            raise HostError(f"{base}/projects/ did not answer with a map of projects", url=f"{base}/projects/")
        new = [k for k in page if k not in projects]
        for key, info in page.items():
            projects.setdefault(key, info if isinstance(info, dict) else {})
        more = any(isinstance(v, dict) and v.get("_more_projects") for v in page.values())
        # a server that ignores `n` answers everything at once: more than asked for means done
        if not new or len(page) > PAGE_SIZE or (len(page) < PAGE_SIZE and not more):
            return projects
        skip += len(page)


def _web_url(base: str, info: JsonObject) -> str:
    links = [w for w in info.get("web_links") or () if isinstance(w, dict) and w.get("url")]
    if not links:
        return ""
    link = next((w for w in links if "gitiles" in w["url"] or w.get("name") in ("gitiles", "browse")), links[0])
    url: str = link["url"]
    if url.startswith("/"):
        url = base + url
    return url.rstrip("/")


@register("gerrit")
def list_gerrit(name: str, conn: JsonObject, token: str | None, http: HostHttp) -> ListResult:
    base = conn["url"].rstrip("/")
    root = name_root(base)
    include = conn.get("projects")
    exclude = conn.get("exclude") or {}
    result = ListResult()
    for project, info in sorted(_list_projects(base, http).items()):
        project = info.get("name") or project
        if project in SPECIAL_PROJECTS:
            continue
        if include is not None and not glob_any(include, project):
            continue
        state = info.get("state") or "ACTIVE"
        if exclude.get("readOnly") and state == "READ_ONLY":
            continue
        if exclude.get("hidden") and state == "HIDDEN":
            continue
        if glob_any(exclude.get("projects"), project):
            continue
        web = _web_url(base, info)
        result.repos.append(
            HostRepo(
                name=f"{root}/{project}",
                display_name=project,
                code_host_type="gerrit",
                clone_url=f"{base}/{urllib.parse.quote(project, safe='/')}",
                web_url=web,
                file_url_template=f"{web}/+/{{branch}}/{{path}}" if web else "",
                default_branch=None,
                public=True,
                external_id=info.get("id") or urllib.parse.quote(project, safe=""),
                git_user="",
            )
        )
    return result
