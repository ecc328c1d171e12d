"""A repository's history over HTTP, in Sourcebot's shapes with a few fields of ours added
(for API clients and scripts; the web UI's history pages read the same git data directly).

``GET /api/blame?repo&path&ref``
    ``{ranges: [{hash, path, startLine, lineCount}], commits: {<hash>: {hash, date, message,
    authorName, authorEmail, previous?: {hash, path}}}}`` as Sourcebot answers, plus ``repo``,
    ``path``, ``ref`` (the ref read, default: the repo's default branch), ``commit`` (its sha)
    and ``truncated`` (only the first `history.MAX_BLAME_LINES` lines were blamed). Ranges are
    contiguous, ordered by line; ``path`` is the file's path in that commit (renames are
    followed); ``date`` is the author date. A binary file answers 200 with no ranges and
    ``"isBinary": true``; a file over `history.MAX_BLAME_BYTES` 400 ``INVALID_ARGUMENT``.

``GET /api/commit?repo&ref[&path]``
    Sourcebot's ``{hash, date, message, refs, body, authorName, authorEmail, parents}`` (``refs``
    and ``date`` as our ``/api/commits`` gives them: ``git log``'s decoration, the committer date)
    plus ``authorDate``, ``committerName``, ``committerEmail`` and what the commit changed:
    ``files`` (below), ``truncated`` and ``totalFiles``; against its first parent (a root
    commit: against nothing). `path` keeps the changes to one file or directory.

``GET /api/diff?repo&base&head[&path]``
    Sourcebot's ``{files}`` (``git diff <base> <head>``: the two trees, not the merge base) plus
    ``repo``, ``base``, ``head``, ``baseCommit``, ``headCommit``, ``truncated`` and ``totalFiles``.

A file of ``files``: ``{oldPath, newPath, hunks: [{oldRange: {start, lines}, newRange: {start,
lines}, heading?, body}]}`` as Sourcebot (``oldPath`` null when added, ``newPath`` null when
deleted; ``body`` the hunk's lines joined with ``\\n``, each starting with ``' '``, ``+``,
``-`` or ``\\``), plus ``status`` (added, deleted, modified, renamed), ``isBinary`` (no hunks
then), ``additions``, ``deletions`` and ``truncated``. A diff is cut at `MAX_FILES` files or
`MAX_DIFF_BYTES` of diff text (``truncated: true``); ``totalFiles`` is then the number of files
of the whole diff (more than ``files`` holds), and the file the cut fell in has ``truncated:
true``, only the hunks read whole before the cut (maybe none) and its whole change's
``additions`` and ``deletions`` (``git diff --numstat``).

Repos go through the tools' `ToolContext`, so a repository the caller may not see answers exactly
as one that does not exist. Errors (docs/http-api.md#errors): 404 ``REPOSITORY_NOT_FOUND`` (unknown,
hidden or not cloned yet), 404 ``FILE_NOT_FOUND`` (a path that is not a file at the ref, or is
malformed), 400 ``INVALID_GIT_REF`` (malformed or unknown ref), 400 ``INVALID_REQUEST_BODY``
(a missing or oversized parameter).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.app import git_reads
from codesearch.git import history
from codesearch.git.diff import FileDiff
from codesearch.service.deps import Caller, ServicesDep
from codesearch.service.routes.git import commit_summary_json

#: a diff over HTTP is cut after this many files or bytes of diff text
MAX_FILES = 300
MAX_DIFF_BYTES = 2_000_000


def file_json(f: FileDiff) -> dict[str, Any]:
    """One file of a diff in Sourcebot's shape, with our status, binary flag and counts."""
    added, removed = history.file_stats(f)
    hunks: list[dict[str, Any]] = []
    for h in f.hunks:
        hunk: dict[str, Any] = {
            "oldRange": {"start": h.old_start, "lines": h.old_lines},
            "newRange": {"start": h.new_start, "lines": h.new_lines},
        }
        if h.header:
            hunk["heading"] = h.header
        hunk["body"] = "\n".join(h.lines)
        hunks.append(hunk)
    return {
        "oldPath": f.old_path,
        "newPath": f.new_path,
        "status": f.status,
        "isBinary": f.binary,
        "additions": added,
        "deletions": removed,
        "truncated": f.cut,
        "hunks": hunks,
    }


def blame_json(b: history.Blame) -> dict[str, Any]:
    commits: dict[str, dict[str, Any]] = {}
    for sha, c in b.commits.items():
        item: dict[str, Any] = {
            "hash": c.hash,
            "date": c.date,
            "message": c.message,
            "authorName": c.author_name,
            "authorEmail": c.author_email,
        }
        if c.previous is not None:
            item["previous"] = {"hash": c.previous[0], "path": c.previous[1]}
        commits[sha] = item
    return {
        "ranges": [
            {"hash": r.hash, "path": r.path, "startLine": r.start_line, "lineCount": r.line_count} for r in b.ranges
        ],
        "commits": commits,
    }


def commit_json(c: history.CommitDetail) -> dict[str, Any]:
    return {
        **commit_summary_json(c),
        "parents": list(c.parents),
        "authorDate": c.author_date,
        "committerName": c.committer_name,
        "committerEmail": c.committer_email,
    }


router = APIRouter()
_repo_q = Query(..., min_length=1, max_length=1000, description="The repository's full name")


@router.get("/api/blame")
async def blame(
    request: Request,
    identity: Caller,
    services: ServicesDep,
    repo: str = _repo_q,
    path: str = Query(..., max_length=4096, description="A file, relative to the repository root"),
    ref: str | None = Query(None, max_length=1024, description="Branch, tag or commit (default branch)"),
) -> dict[str, Any]:
    audit.record(request, identity, "blame.read", f"{repo}:{path}", ref=ref)

    def run() -> dict[str, Any]:
        at = git_reads.blame(services.make_context(identity), repo, path, ref)
        b = at.blame
        out = {
            **blame_json(b),
            "repo": at.repo.name,
            "path": path,
            "ref": at.ref,
            "commit": b.commit,
            "truncated": b.truncated,
        }
        if b.binary:
            out["isBinary"] = True
        return out

    return await run_in_threadpool(run)


@router.get("/api/commit")
async def commit(
    request: Request,
    identity: Caller,
    services: ServicesDep,
    repo: str = _repo_q,
    ref: str = Query(..., min_length=1, max_length=1024, description="A commit, branch or tag"),
    path: str | None = Query(None, max_length=4096, description="Only changes to this file or directory"),
) -> dict[str, Any]:
    audit.record(request, identity, "commit.read", repo, ref=ref)

    def run() -> dict[str, Any]:
        c = git_reads.commit_changes(
            services.make_context(identity), repo, ref, path=path, max_files=MAX_FILES, max_bytes=MAX_DIFF_BYTES
        )
        return {
            **commit_json(c.detail),
            "files": [file_json(f) for f in c.files],
            "truncated": c.truncated,
            "totalFiles": c.total_files,
        }

    return await run_in_threadpool(run)


@router.get("/api/diff")
async def diff(
    request: Request,
    identity: Caller,
    services: ServicesDep,
    repo: str = _repo_q,
    base: str = Query(..., min_length=1, max_length=1024, description="The ref to diff from"),
    head: str = Query(..., min_length=1, max_length=1024, description="The ref to diff to"),
    path: str | None = Query(None, max_length=4096, description="Only changes to this file or directory"),
) -> dict[str, Any]:
    audit.record(request, identity, "diff.read", repo, base=base, head=head)

    def run() -> dict[str, Any]:
        d = git_reads.diff(
            services.make_context(identity), repo, base, head, path=path, max_files=MAX_FILES, max_bytes=MAX_DIFF_BYTES
        )
        return {
            "repo": d.repo.name,
            "base": base,
            "head": head,
            "baseCommit": d.base_commit,
            "headCommit": d.head_commit,
            "files": [file_json(f) for f in d.files],
            "truncated": d.truncated,
            "totalFiles": d.total_files,
        }

    return await run_in_threadpool(run)
