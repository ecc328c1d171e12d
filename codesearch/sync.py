"""From a connection to searchable shards: config → hosts → git → index, in one process.

`sync_connection` lists a connection's repositories through its host adapter, mirrors each
(bare clone or fetch, credentials passed per command) or takes a local repository in place,
selects the revisions (default branch, then `revisions.branches` and `revisions.tags` globs)
and indexes them with the engine. It is the path the Ray runtime runs piecewise in actors;
here it runs sequentially, which is what the command line and the tests need.

Partial failures are collected, never raised: a repository that cannot be cloned or indexed
is reported in `SyncReport.failed` and the others go on. Only a failure of the listing itself
(bad token, unreachable host) raises.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codesearch.errors import CodesearchError
from codesearch.hosts.adapters import adapter_for
from codesearch.hosts.base import HostRepo
from codesearch.hosts.http import HostHttp
from codesearch.index.builder import IndexSettings, IndexStats, index_source
from codesearch.index.sources import GitSource, RepoInfo

if TYPE_CHECKING:
    from codesearch.git.mirror import MirrorStore
    from codesearch.hosts.base import ListResult
    from codesearch.store.models import Repo

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    connection: str
    repos: list[HostRepo] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # repo name → reason
    warnings: list[str] = field(default_factory=list)
    stats: IndexStats = field(default_factory=IndexStats)


def git_credentials(kind: str, conn: Mapping[str, Any], token: str | None) -> tuple[str | None, str | None]:
    """(user, password) for git over HTTPS, per docs/configuration.md#connection-kinds; (None, None) without a token."""
    if not token:
        return None, None
    if kind == "github":
        return "x-access-token", token
    if kind == "gitlab":
        return "oauth2", token
    if kind == "gitea":
        return token, ""
    if kind == "bitbucket":
        return conn.get("gitUser") or conn.get("user") or "x-token-auth", token
    if kind == "azuredevops":
        return conn.get("user") or "azuredevops", token
    return None, None


def repo_git_credentials(
    kind: str, conn: Mapping[str, Any], token: str | None, display_name: str | None
) -> tuple[str | None, str | None]:
    """(user, password) to fetch one repository (its host's `display_name`, ``owner/repo``) with:
    the installation token of a GitHub App installed on its owner when the connection has apps
    (`codesearch.hosts.github_app`), else `git_credentials`."""
    if kind == "github" and display_name:
        from codesearch.hosts.github import DEFAULT_URL, GIT_USER, api_base
        from codesearch.hosts.github_app import clone_token

        app_token = clone_token(conn, api_base(conn.get("url") or DEFAULT_URL), display_name.partition("/")[0])
        if app_token:
            return GIT_USER, app_token
    return git_credentials(kind, conn, token)


def repo_info(repo: HostRepo | Repo, repo_id: int | None = None) -> RepoInfo:
    """The engine's view of a repository (the shard's `meta.repos` entry, and what file links
    are made from): of a `HostRepo` as a host lists it, or of the state store's `Repo` row, which
    keeps the same fields (the one conversion, for the indexer, the API, the tools and the pages).

    `repo_id` is the state store's id (the API's `repositoryId`); by default the row's own, and
    for a listing without one, a stable id derived from the name."""
    return RepoInfo(
        name=repo.name,
        id=getattr(repo, "id", 0) if repo_id is None else repo_id,
        display_name=repo.display_name or "",
        code_host_type=repo.code_host_type,
        web_url=repo.web_url or "",
        file_url_template=repo.file_url_template or "",
        archived=repo.archived,
        fork=repo.fork,
        public=repo.public,
    )


def resolve_connection_token(
    name: str, conn: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> str | None:
    if not conn.get("token"):
        return None
    from codesearch.config import resolve_token

    return resolve_token(conn["token"], connection=name, environ=environ if environ is not None else os.environ)


def sync_connection(
    name: str,
    conn: Mapping[str, Any],
    *,
    mirrors: MirrorStore,
    index_dir: str,
    index_settings: IndexSettings | None = None,
    http: HostHttp | None = None,
    environ: Mapping[str, str] | None = None,
    on_listed: Callable[[ListResult], Mapping[str, int]] | None = None,
    progress: Callable[[str, int, int], object] | None = None,
) -> SyncReport:
    """List, mirror and index every repository of one connection (see the module docstring).

    `on_listed(listing) -> {repo name: id}` lets the caller record the listing (the state store)
    and supply the ids the index uses; `progress(repo_name, done, total)` reports each repo.
    """
    kind = conn["type"]
    token = resolve_connection_token(name, conn, environ)
    own_http = http is None
    http = http or HostHttp()
    try:
        listing = adapter_for(kind)(name, conn, token, http)
    finally:
        if own_http:
            http.close()
    report = SyncReport(name, repos=listing.repos, warnings=list(listing.warnings))
    ids = on_listed(listing) if on_listed else {}
    revisions = conn.get("revisions") or {}
    for done, repo in enumerate(listing.repos, 1):
        info = repo_info(repo, ids.get(repo.name, 0))
        try:
            user, password = repo_git_credentials(kind, conn, token, repo.display_name)
            path = repo.local_path or mirrors.sync(info.id, repo.clone_url, username=user, password=password).path
            source = GitSource(
                path,
                repo=info,
                branch_globs=revisions.get("branches") or (),
                tag_globs=revisions.get("tags") or (),
                max_revisions=(index_settings or IndexSettings()).max_revisions,
            )
            try:
                index_source(source, index_dir, index_settings, report.stats)
            finally:
                source.close()
            report.indexed.append(repo.name)
        except CodesearchError as e:
            log.warning("connection %s: %s: %s", name, repo.name, e)
            report.failed[repo.name] = str(e)
        if progress:
            progress(repo.name, done, len(listing.repos))
    return report
