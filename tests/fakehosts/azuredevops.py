"""A fake Azure DevOps Services / Server: projects and git repositories, and git itself.

    orgs = {"acme": [AdoProject("Web App", visibility="public", repos=[AdoRepo("site")])]}
    with FakeAzureDevOps(tmp, orgs, pat="secret") as ado:
        ado.url            # http://127.0.0.1:<port> (stands for https://dev.azure.com or a server)

What it does like the real service:
* every route needs ``api-version`` (400 ``VssServiceException`` without it, 400
  ``VssVersionOutOfRangeException`` above `max_api_version`, as an old Server does);
* auth: Basic with any user name and the PAT as password; a missing or wrong PAT gets 401
  when the request says ``X-TFS-FedAuthRedirect: Suppress`` and otherwise **203 with an HTML
  sign-in page**, as the service does;
* ``GET [/tfs]/{org}/_apis/projects`` (``$top``, capped at `page_size`; ``continuationToken``):
  ``{count, value}``, the next page's token in the ``x-ms-continuationtoken`` **response
  header** (an opaque string);
* ``GET /{org}/{project name or id}/_apis/git/repositories`` (not paged) and
  ``…/repositories/{name or id}``: GitRepository objects (``id`` GUID, ``project{…visibility}``,
  ``remoteUrl`` with ``{org}@``, ``webUrl``, ``defaultBranch`` as a full ref and absent for an
  empty repository, ``size`` in bytes, ``isFork`` (+ ``parentRepository``), ``isDisabled``);
  project and repository names are matched case-insensitively after URL decoding (spaces as
  ``%20``);
* errors are the TF-coded JSON: unknown project 404 ``TF200016`` / ``ProjectDoesNotExistWithNameException``,
  unknown repository 404 ``TF401019`` / ``GitRepositoryNotFoundException``, unknown org or
  collection 404;
* git: ``/{org}/{project}/_git/{repo}`` is served (proxied) by a real `GitHttpServer` over bare
  repositories, so the ``remoteUrl`` can be cloned;
* ``useTfsPath`` servers: pass ``tfs=True`` and every route lives under ``/tfs``;
* rate limiting on demand: 429 with ``Retry-After`` and a ``TF400733`` message.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.fakehosts.server import GIT_SUFFIXES, FakeServer, basic_credentials, proxy_git, send, split_query
from tests.githttp import GitHttpServer, make_bare_repo


@dataclass
class AdoRepo:
    name: str
    size: int = 2048
    default_branch: str | None = "main"  # None: an empty repository (no defaultBranch key)
    fork_of: str | None = None  # name of a repo in the same project
    disabled: bool = False
    files: dict[str, str] = field(default_factory=dict)
    id: str = ""


@dataclass
class AdoProject:
    name: str
    visibility: str = "private"  # private | public
    repos: list[AdoRepo] = field(default_factory=list)
    id: str = ""


def _version(v: str) -> tuple[int, ...]:
    core = v.split("-", 1)[0]
    return tuple(int(x) for x in core.split(".") if x.isdigit())


class FakeAzureDevOps(FakeServer):
    methods = ("GET", "POST")

    def __init__(self, root: str, orgs: dict[str, list[AdoProject]], *, pat: str, tfs: bool = False,
                 page_size: int = 2, max_api_version: str = "7.1"):
        self.root = root
        self.orgs = orgs
        self.pat = pat
        self.prefix = "/tfs" if tfs else ""
        self.page_size = page_size
        self.max_api_version = max_api_version
        os.makedirs(os.path.join(root, "git"), exist_ok=True)
        self.git = GitHttpServer(os.path.join(root, "git"))
        for org, projects in orgs.items():
            for p in projects:
                p.id = p.id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{org}/{p.name}"))
                for r in p.repos:
                    r.id = r.id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"{org}/{p.name}/{r.name}"))
                    if r.default_branch is not None:
                        make_bare_repo(self.git.root, f"{org}/{p.id}/{r.id}.git", r.files or {"README.md": f"# {r.name}\n"},
                                       default=r.default_branch)
        super().__init__(owned=(self.git,))  # requests: (method, raw path, query, auth "ok"/"none"/"bad")
        self.url = self.base_url

    # -- answers
    def _send(self, h, status: int, body: bytes, ctype: str, headers: dict | None = None) -> None:
        send(h, status, body, {"Content-Type": ctype, **(headers or {})})

    def _json(self, h, obj, status: int = 200, headers: dict | None = None) -> None:
        self._send(h, status, json.dumps(obj).encode(), "application/json; charset=utf-8; api-version=7.1", headers)

    def _error(self, h, status: int, message: str, type_key: str, headers: dict | None = None) -> None:
        self._json(h, {"$id": "1", "innerException": None, "message": message,
                       "typeName": f"Microsoft.TeamFoundation.Core.WebApi.{type_key}, Microsoft.TeamFoundation.Core.WebApi",
                       "typeKey": type_key, "errorCode": 0, "eventId": 3000}, status, headers)

    def _auth(self, h) -> str:
        auth = h.headers.get("Authorization", "")
        if not auth:
            return "none"
        creds = basic_credentials(auth)
        return "ok" if creds and creds[1] == self.pat else "bad"

    def project_json(self, org: str, p: AdoProject) -> dict:
        return {"id": p.id, "name": p.name, "description": f"The {p.name} project",
                "url": f"{self.url}{self.prefix}/{org}/_apis/projects/{p.id}", "state": "wellFormed",
                "revision": 11, "visibility": p.visibility, "lastUpdateTime": "2024-05-01T10:00:00.000Z"}

    def repo_json(self, org: str, p: AdoProject, r: AdoRepo) -> dict:
        qp, qr = urllib.parse.quote(p.name), urllib.parse.quote(r.name)
        web = f"{self.url}{self.prefix}/{org}/{qp}/_git/{qr}"
        d = {
            "id": r.id,
            "name": r.name,
            "url": f"{self.url}{self.prefix}/{org}/{p.id}/_apis/git/repositories/{r.id}",
            "project": {"id": p.id, "name": p.name, "url": f"{self.url}{self.prefix}/{org}/_apis/projects/{p.id}",
                        "state": "wellFormed", "revision": 11, "visibility": p.visibility,
                        "lastUpdateTime": "2024-05-01T10:00:00.000Z"},
            "size": r.size if r.default_branch else 0,
            "remoteUrl": f"http://{org}@127.0.0.1:{self.port}{self.prefix}/{org}/{qp}/_git/{qr}",
            "sshUrl": f"git@ssh.dev.azure.com:v3/{org}/{qp}/{qr}",
            "webUrl": web,
            "isDisabled": r.disabled,
            "isInMaintenance": False,
            "isFork": bool(r.fork_of),
        }
        if r.default_branch:
            d["defaultBranch"] = f"refs/heads/{r.default_branch}"
        if r.fork_of:
            parent = next((x for x in p.repos if x.name == r.fork_of), None)
            if parent:
                d["parentRepository"] = {"id": parent.id, "name": parent.name, "isFork": False,
                                         "url": f"{self.url}{self.prefix}/{org}/{p.id}/_apis/git/repositories/{parent.id}",
                                         "project": {"id": p.id, "name": p.name}}
        return d

    # -- routing
    def _find_project(self, org: str, name: str) -> AdoProject | None:
        for p in self.orgs.get(org, ()):
            if p.id == name.lower() or p.name.lower() == name.lower():
                return p
        return None

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        raw_path, query, params = split_query(h.path)
        auth = self._auth(h)
        self.requests.append((h.command, raw_path, params, auth))
        if not raw_path.startswith(self.prefix + "/"):
            self._send(h, 404, b"Not Found", "text/plain")
            return
        parts = [urllib.parse.unquote(p) for p in raw_path[len(self.prefix):].split("/") if p]
        if auth != "ok":
            if h.headers.get("X-TFS-FedAuthRedirect", "").lower() == "suppress" or raw_path.endswith(GIT_SUFFIXES):
                self._send(h, 401, b"", "text/plain", {"WWW-Authenticate": 'Basic realm="https://dev.azure.com/"',
                                                       "X-TFS-ProcessId": str(uuid.uuid4())})
            else:
                self._send(h, 203, b"<!DOCTYPE html><html><head><title>Azure DevOps Services | Sign In</title></head>"
                                   b"<body>Sign in</body></html>", "text/html; charset=utf-8")
            return
        # git over smart HTTP: /{org}/{project}/_git/{repo}/info/refs ...
        if len(parts) >= 4 and parts[2] == "_git" and raw_path.endswith(GIT_SUFFIXES):
            suffix = next(s for s in GIT_SUFFIXES if raw_path.endswith(s))
            org, p = parts[0], self._find_project(parts[0], parts[1])
            repo_name = "/".join(parts[3:])[: -len(suffix)]
            r = next((x for x in p.repos if x.name.lower() == repo_name.lower()), None) if p else None
            if r is None:
                self._send(h, 404, f"TF401019: The Git repository with name or identifier {repo_name} does not exist "
                                   f"or you do not have permissions for the operation you are attempting.".encode(),
                           "text/plain")
                return
            proxy_git(h, self.git.url(f"{org}/{p.id}/{r.id}.git{suffix}") + (f"?{query}" if query else ""))
            return
        if self._limited():
            self._error(h, 429, "TF400733: The request has been canceled: Request was blocked due to exceeding usage "
                                "of resource 'Core' in namespace 'User'.", "RequestBlockedException",
                        {"Retry-After": "3", "X-RateLimit-Resource": "Core", "X-RateLimit-Delay": "0.5",
                         "X-RateLimit-Limit": "200", "X-RateLimit-Remaining": "0"})
            return
        version = params.get("api-version")
        if not version:
            self._error(h, 400, "No api-version was supplied for the \"GET\" request. The version must be supplied "
                                "either as part of the Accept header (e.g. \"application/json; api-version=1.0\") or "
                                "as a query parameter (e.g. \"?api-version=1.0\").", "VssVersionNotSpecifiedException")
            return
        if _version(version) > _version(self.max_api_version):
            self._error(h, 400, f"The requested REST API version of {version} is out of range for this server. The "
                                f"latest REST API version this server supports is {self.max_api_version}.",
                        "VssVersionOutOfRangeException")
            return
        if not parts or parts[0] not in self.orgs:
            org = parts[0] if parts else ""
            self._error(h, 404, f"VS800075: The project collection with name or identifier {org} does not exist or "
                                f"you do not have permission to access it.", "ProjectCollectionNotFoundException")
            return
        org = parts[0]
        if parts[1:] == ["_apis", "projects"]:
            self._projects(h, org, params)
            return
        if len(parts) in (5, 6) and parts[2:5] == ["_apis", "git", "repositories"]:
            p = self._find_project(org, parts[1])
            if p is None:
                self._error(h, 404, f"TF200016: The following project does not exist: {parts[1]}. Verify that the name "
                                    f"of the project is correct and that the project exists on the specified Azure "
                                    f"DevOps Server.", "ProjectDoesNotExistWithNameException")
                return
            if len(parts) == 5:
                repos = [self.repo_json(org, p, r) for r in p.repos]
                self._json(h, {"value": repos, "count": len(repos)})
                return
            else:
                r = next((x for x in p.repos if parts[5].lower() in (x.name.lower(), x.id)), None)
                if r is None:
                    self._error(h, 404, f"TF401019: The Git repository with name or identifier {parts[5]} does not "
                                        f"exist or you do not have permissions for the operation you are attempting.",
                                "GitRepositoryNotFoundException")
                    return
                self._json(h, self.repo_json(org, p, r))
                return
        self._send(h, 404, b"Not Found", "text/plain")

    def _projects(self, h, org: str, params: dict) -> None:
        projects = sorted(self.orgs[org], key=lambda p: p.name.lower())
        try:
            top = min(int(params.get("$top") or 100), self.page_size)
            token = params.get("continuationToken") or ""
            start = int(base64.urlsafe_b64decode(token.encode()).decode().split(":")[1]) if token else 0
        except (ValueError, IndexError):
            self._error(h, 400, "The continuation token is not valid.", "InvalidArgumentValueException")
            return
        chunk = projects[start:start + top]
        headers = {}
        if start + top < len(projects):
            headers["x-ms-continuationtoken"] = base64.urlsafe_b64encode(f"skip:{start + top}".encode()).decode()
        self._json(h, {"count": len(chunk), "value": [self.project_json(org, p) for p in chunk]}, headers=headers)
