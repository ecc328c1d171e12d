"""Which revisions of a repository get indexed.

The default branch first; then branches matching `branch_globs`, newest commit first; then tags
matching `tag_globs`, newest first. Globs are path-style (`codesearch.globs`) over the short
name (``release/*`` matches ``refs/heads/release/1.0``). At most `MAX_REVISIONS` in all; the
rest are dropped with a warning. Revisions are reported as full ref names, with the commit
they name and its committer date (the default branch's is the repository's "pushed at").

Refs are read with one ``git for-each-ref`` (annotated tags peeled to their commit; a tag of
a tree or a blob is skipped), through `codesearch.git.process`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from codesearch.git.paths import show
from codesearch.git.process import Git
from codesearch.globs import glob_match

log = logging.getLogger(__name__)

MAX_REVISIONS = 64

_REF_FORMAT = "%00".join(
    (
        "%(refname)",
        "%(objecttype)",
        "%(objectname)",
        "%(committerdate:iso-strict)",
        "%(*objecttype)",
        "%(*objectname)",
        "%(*committerdate:iso-strict)",
    )
)


@dataclass(frozen=True)
class Revision:
    ref: str  # full ref name, e.g. refs/heads/main, or "HEAD" for a detached head
    commit: str  # hex sha of the commit
    committed_at: datetime | None = None  # the commit's committer date, with its offset


def default_branch(git_dir: str) -> Revision:
    """HEAD, as the branch it points to (or "HEAD" when detached). ValueError when HEAD names no
    commit (an empty repository, or a branch not created yet)."""
    git = Git.at(git_dir)
    # One process for the commit, its date and the branch HEAD points to (``HEAD -> refs/heads/x``
    # among the decorations): a re-index of an unchanged repository is mostly this call.
    res = git.run(
        [
            "-c",
            "log.showSignature=false",
            "log",
            "--no-walk",
            "--decorate=full",
            "--format=%H%x00%cI%x00%D",
            "--end-of-options",
            "HEAD",
            "--",
        ]
    )
    sha, date, decorations = (show(res.stdout).strip().split("\0") + ["", ""])[:3]
    if res.returncode != 0 or not sha:
        raise ValueError("repository has no commits on HEAD")
    pointed = [d.removeprefix("HEAD -> ") for d in decorations.split(", ") if d.startswith("HEAD -> refs/heads/")]
    # none: detached, or the repository's config hides decorations; then git is asked directly
    ref = pointed[0] if pointed else show(git.run(["symbolic-ref", "-q", "HEAD"]).stdout).strip()
    return Revision(ref or "HEAD", sha, datetime.fromisoformat(date))


def _refs(git_dir: str) -> list[tuple[str, str, datetime]]:
    """(full ref name, commit, committer date) of every branch and every tag naming a commit."""
    res = Git.at(git_dir).run(["for-each-ref", f"--format={_REF_FORMAT}", "refs/heads/", "refs/tags/"], check=True)
    out = show(res.stdout)
    found = []
    for line in out.splitlines():
        parts = line.split("\0")
        if len(parts) != 7:
            continue
        ref, kind, sha, date, peeled_kind, peeled, peeled_date = parts
        if kind == "tag":  # annotated: the commit it names, if it names one
            kind, sha, date = peeled_kind, peeled, peeled_date
        if kind == "commit" and date:
            found.append((ref, sha, datetime.fromisoformat(date)))
    return found


def select_revisions(
    git_dir: str, branch_globs: Iterable[str] = (), tag_globs: Iterable[str] = ()
) -> tuple[list[Revision], list[str]]:
    """The revisions of the repository at `git_dir` to index, and warnings (for instance about
    the 64-revision cap)."""
    branch_globs, tag_globs = tuple(branch_globs), tuple(tag_globs)  # each is read once per ref
    head = default_branch(git_dir)
    revs, warnings = [head], []
    refs = _refs(git_dir) if branch_globs or tag_globs else []

    def matching(prefix: str, globs: Sequence[str]) -> list[Revision]:
        found = [
            (ref, sha, when)
            for ref, sha, when in refs
            if ref.startswith(prefix) and ref != head.ref and any(glob_match(g, ref[len(prefix) :]) for g in globs)
        ]
        found.sort(key=lambda r: (-r[2].timestamp(), r[0]))  # newest first
        return [Revision(ref, sha, when) for ref, sha, when in found]

    if branch_globs:
        revs += matching("refs/heads/", branch_globs)
    if tag_globs:
        revs += matching("refs/tags/", tag_globs)
    if len(revs) > MAX_REVISIONS:
        warnings.append(
            f"{len(revs)} revisions match; indexing the first {MAX_REVISIONS}, dropping {len(revs) - MAX_REVISIONS}"
        )
        log.warning("%s: %s", git_dir, warnings[-1])
        revs = revs[:MAX_REVISIONS]
    return revs, warnings
