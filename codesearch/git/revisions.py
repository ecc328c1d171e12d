"""Which revisions of a repository get indexed (SPEC §3).

The default branch first; then branches matching `branch_globs`, newest commit first; then tags
matching `tag_globs`, newest first. Globs are path-style (`codesearch.globs`) over the short
name (``release/*`` matches ``refs/heads/release/1.0``). At most `MAX_REVISIONS` in all; the
rest are dropped with a warning. Revisions are reported as full ref names.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import git

from codesearch.globs import glob_match

log = logging.getLogger(__name__)

MAX_REVISIONS = 64


@dataclass(frozen=True)
class Revision:
    ref: str  # full ref name, e.g. refs/heads/main, or "HEAD" for a detached head
    commit: str  # hex sha of the commit


def default_branch(repo: git.Repo) -> Revision:
    """HEAD, as the branch it points to (or "HEAD" when detached)."""
    try:
        commit = repo.head.commit.hexsha
    except ValueError as e:
        raise ValueError("repository has no commits on HEAD") from e
    try:
        ref = repo.head.reference.path
    except TypeError:  # detached HEAD
        ref = "HEAD"
    return Revision(ref, commit)


def select_revisions(repo: git.Repo, branch_globs=(), tag_globs=()) -> tuple[list[Revision], list[str]]:
    """The revisions to index, and warnings (for instance about the 64-revision cap)."""
    head = default_branch(repo)
    revs, warnings = [head], []
    seen = {head.ref}

    def matching(refs, prefix, globs):
        found = []
        for r in refs:
            short = r.path[len(prefix):]
            if r.path in seen or not any(glob_match(g, short) for g in globs):
                continue
            try:
                c = r.commit
            except (ValueError, git.BadName):
                continue
            found.append((c.committed_date, r.path, c.hexsha))
        found.sort(key=lambda x: (-x[0], x[1]))
        return found

    if branch_globs:
        for _, path, sha in matching(repo.branches if not repo.bare else repo.heads, "refs/heads/", branch_globs):
            revs.append(Revision(path, sha))
            seen.add(path)
    if tag_globs:
        for _, path, sha in matching(repo.tags, "refs/tags/", tag_globs):
            revs.append(Revision(path, sha))
            seen.add(path)
    if len(revs) > MAX_REVISIONS:
        warnings.append(f"{len(revs)} revisions match; indexing the first {MAX_REVISIONS}, dropping {len(revs) - MAX_REVISIONS}")
        log.warning("%s: %s", repo.git_dir, warnings[-1])
        revs = revs[:MAX_REVISIONS]
    return revs, warnings
