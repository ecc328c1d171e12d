"""Which revisions of a repository get indexed.

The default branch first; then branches matching `branch_globs`, newest commit first; then tags
matching `tag_globs`, newest first. Globs are path-style (`codesearch.globs`) over the short
name (``release/*`` matches ``refs/heads/release/1.0``). At most `limit` in all
(``CODESEARCH_MAX_INDEXED_REVISIONS``, by default `MAX_REVISIONS`: Sourcebot's 64); the rest are
dropped with a warning. Revisions are reported as full ref names, with the commit
they name and its committer date (the default branch's is the repository's "pushed at").

Refs are read with one ``git for-each-ref`` (annotated tags peeled to their commit; a tag of
a tree or a blob is skipped), through `codesearch.git.process`. The default branch alone (what
most repositories index) is read from the ref files themselves (`read_head`: ``HEAD``, the loose
ref or ``packed-refs``), without a git process: a periodic re-index of thousands of unchanged
repositories is mostly this read. Its committer date is then left out (`commit_date` reads it
when a build needs it); any layout those files do not describe plainly (a reftable, a linked
worktree, an unborn branch) is asked of git.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from codesearch import defaults
from codesearch.git.paths import show
from codesearch.git.process import Git
from codesearch.globs import glob_match

log = logging.getLogger(__name__)

MAX_REVISIONS = defaults.MAX_INDEXED_REVISIONS

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


_HEX = frozenset("0123456789abcdef")


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and set(text) <= _HEX


def _loose_or_packed(git_dir: str, ref: str) -> str | None:
    """The object a ref names, from its loose file or ``packed-refs`` (None: neither holds it
    plainly)."""
    try:
        with open(os.path.join(git_dir, *ref.split("/")), encoding="ascii") as f:
            value = f.read().strip()
        return value if _is_sha(value) else None
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError):
        return None
    try:
        with open(os.path.join(git_dir, "packed-refs"), encoding="utf-8") as f:
            for line in f:
                sha, _, name = line.rstrip("\n").partition(" ")
                if name == ref and _is_sha(sha):
                    return sha
    except (OSError, UnicodeDecodeError):
        return None
    return None


def read_head(git_dir: str) -> tuple[str, str] | None:
    """(full ref name or "HEAD" when detached, commit) of HEAD, read from the files of git's
    default ref storage; None when they do not say it plainly (then ask git: `default_branch`)."""
    if os.path.exists(os.path.join(git_dir, "reftable")) or os.path.exists(os.path.join(git_dir, "commondir")):
        return None
    try:
        with open(os.path.join(git_dir, "HEAD"), encoding="ascii") as f:
            head = f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if _is_sha(head):
        return "HEAD", head
    ref = head.removeprefix("ref: ")
    if ref == head or not ref.startswith("refs/heads/") or ".." in ref:
        return None
    sha = _loose_or_packed(git_dir, ref)
    return (ref, sha) if sha else None


def commit_date(git_dir: str, commit: str) -> datetime | None:
    """The committer date of `commit` (None when git cannot say)."""
    res = Git.at(git_dir).run(["-c", "log.showSignature=false", "log", "--no-walk", "--format=%cI", commit, "--"])
    text = show(res.stdout).strip()
    return datetime.fromisoformat(text) if res.returncode == 0 and text else None


def default_branch(git_dir: str) -> Revision:
    """HEAD, as the branch it points to (or "HEAD" when detached). ValueError when HEAD names no
    commit (an empty repository, or a branch not created yet). Read from the ref files when they
    say it plainly (no committer date then: `commit_date`), else from git."""
    plain = read_head(git_dir)
    if plain is not None:
        return Revision(plain[0], plain[1])
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
    git_dir: str, branch_globs: Iterable[str] = (), tag_globs: Iterable[str] = (), limit: int = MAX_REVISIONS
) -> tuple[list[Revision], list[str]]:
    """The revisions of the repository at `git_dir` to index, at most `limit`, and warnings (for
    instance about that cap)."""
    if limit < 1:
        raise ValueError(f"the revision cap must be at least 1, not {limit}")
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
    if len(revs) > limit:
        warnings.append(
            f"{len(revs)} revisions match; indexing the first {limit}, dropping {len(revs) - limit}"
            " (CODESEARCH_MAX_INDEXED_REVISIONS)"
        )
        log.warning("%s: %s", git_dir, warnings[-1])
        revs = revs[:limit]
    return revs, warnings
