"""``GET /api/source?repo=<name>&path=<path>[&ref=<ref>]``: one file at one revision (docs/http-api.md#routes).

The file is read from the repository's git objects, never from a checkout: the bare mirror at
``MirrorStore(<data dir>/repos).path_for(repo.id)``, or the repository itself for local
repositories indexed in place (``local_path``). ``ref`` is a branch, tag, full ref name or commit
(default: the repo's default branch, else ``HEAD``).

Response: ``{source, language, path, repo, repoCodeHostType, repoDisplayName,
repoExternalWebUrl, webUrl, externalWebUrl, ref}`` (Sourcebot's fields plus ``ref``, the ref the
file was read at; fields without a value are left out). ``source`` is the file decoded as UTF-8
(invalid bytes replaced).

Binary files (a NUL byte in the first 8000 bytes, git's own test) are answered with 200, no
``source`` and ``"isBinary": true`` (plus ``size`` in bytes): the file exists, but has no text
to show.

Errors (docs/http-api.md#errors): a repo that does not exist, is not visible to the caller or has no clone
yet → 404 ``REPOSITORY_NOT_FOUND``; a path that is empty, absolute, has ``..``, ``.`` or empty
segments, a NUL or a newline, names a directory or does not exist at that ref → 404
``FILE_NOT_FOUND``; a ref that starts with ``-``, holds a NUL, whitespace or ``:``, or names
nothing in the repository → 400 ``INVALID_GIT_REF``; missing parameters → 400
``INVALID_REQUEST_BODY``.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request

from codesearch import permissions
from codesearch.errors import FileNotFound, InvalidGitRef, RepositoryNotFound
from codesearch.git.mirror import MirrorStore
from codesearch.git.objects import is_binary, read_blob
from codesearch.git.paths import check_path, check_ref, git_dir_of
from codesearch.index.language import detect
from codesearch.search.present import external_url, web_url
from codesearch.service import audit
from codesearch.service.deps import Caller, ServicesDep, StoreDep
from codesearch.sync import repo_info

if TYPE_CHECKING:
    from codesearch.store import Repo

# the git access lives in codesearch.git (paths, objects); these names are re-exported for existing importers
__all__ = [
    "FileNotFound",
    "InvalidGitRef",
    "RepositoryNotFound",
    "check_path",
    "check_ref",
    "git_dir_of",
    "is_binary",
    "read_blob",
    "router",
    "source_json",
]


def source_json(repo: Repo, path: str, ref: str, data: bytes, public_url: str) -> dict[str, Any]:
    info = repo_info(repo)
    out: dict[str, Any] = {}
    binary = is_binary(data)
    if not binary:
        out["source"] = data.decode("utf-8", "replace")
    out.update(
        {
            "language": detect(path, data),
            "path": path,
            "repo": repo.name,
            "repoCodeHostType": repo.code_host_type,
            "repoDisplayName": repo.display_name or None,
            "repoExternalWebUrl": repo.web_url or None,
            "webUrl": web_url(public_url, info, ref, path),
            "externalWebUrl": external_url(info, ref, path) or None,
            "ref": ref,
        }
    )
    if binary:
        out.update(isBinary=True, size=len(data))
    return {k: v for k, v in out.items() if v is not None}


def _default_ref(repo: Repo) -> str:
    return repo.default_branch or "HEAD"


router = APIRouter()


@functools.lru_cache(maxsize=16)
def _mirrors(data_dir: str) -> MirrorStore:
    """The mirrors of a data directory (one per app, made on first use: it creates the folder)."""
    return MirrorStore(os.path.join(data_dir, "repos"))


def _mirror_path(data_dir: str | None, repo_id: int) -> str | None:
    return None if data_dir is None else _mirrors(data_dir).path_for(repo_id)


@router.get("/api/source")
def source(
    request: Request,
    identity: Caller,
    store: StoreDep,
    services: ServicesDep,
    repo: str = Query(..., min_length=1, max_length=1000, description="Repository name"),
    path: str = Query(..., max_length=4096, description="File path, relative to the repository root"),
    ref: str | None = Query(None, max_length=1024, description="Branch, tag or commit (default branch)"),
) -> dict[str, Any]:
    if ref is not None:
        check_ref(ref)
    check_path(path)
    audit.record(request, identity, "source.read", f"{repo}:{path}", ref=ref)
    row = store.find_repo(repo) if store is not None else None
    if row is None or not permissions.can_see(identity, row):
        raise RepositoryNotFound(f"repository {repo!r} not found")
    where = (
        row.local_path if row.local_path and os.path.isdir(row.local_path) else _mirror_path(services.data_dir, row.id)
    )
    if not where or not os.path.isdir(where):
        raise RepositoryNotFound(f"repository {repo!r} has not been cloned yet")
    use_ref = ref or _default_ref(row)
    data, _commit = read_blob(git_dir_of(where), use_ref, path)
    return source_json(row, path, use_ref, data, services.public_url)
