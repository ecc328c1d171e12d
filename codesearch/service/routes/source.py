"""``GET /api/source?repo=<name>&path=<path>[&ref=<ref>]``: one file at one revision (docs/http-api.md#routes).

The file is read as the caller by `codesearch.app.git_reads.read_file` (the same read as the
``read_file`` tool's): from the repository's git objects, never from a checkout (the bare mirror
under ``<data dir>/repos``, or the repository itself for local repositories indexed in place),
counted against the caller's git slots. ``ref`` is a branch, tag, full ref name or commit
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

from typing import Any

from fastapi import APIRouter, Query, Request

from codesearch import audit
from codesearch.app.git_reads import FileAtRef, read_file
from codesearch.git.paths import check_path, check_ref
from codesearch.search.present import external_url, web_url
from codesearch.service.deps import Caller, ServicesDep
from codesearch.sync import repo_info

router = APIRouter()


def source_json(f: FileAtRef, public_url: str) -> dict[str, Any]:
    """The answer of ``GET /api/source`` for a file read as the caller (`app.git_reads.read_file`)."""
    repo, path, ref = f.repo, f.path, f.ref
    info = repo_info(repo)
    out: dict[str, Any] = {}
    binary = f.is_binary
    if not binary:
        out["source"] = f.text
    out.update(
        {
            "language": f.language,
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
        out.update(isBinary=True, size=len(f.data))
    return {k: v for k, v in out.items() if v is not None}


@router.get("/api/source")
def source(
    request: Request,
    identity: Caller,
    services: ServicesDep,
    repo: str = Query(..., min_length=1, max_length=1000, description="Repository name"),
    path: str = Query(..., max_length=4096, description="File path, relative to the repository root"),
    ref: str | None = Query(None, max_length=1024, description="Branch, tag or commit (default branch)"),
) -> dict[str, Any]:
    if ref is not None:
        check_ref(ref)
    check_path(path)
    audit.record(request, identity, "source.read", f"{repo}:{path}", ref=ref)
    return source_json(read_file(services.make_context(identity), repo, path, ref), services.public_url)
