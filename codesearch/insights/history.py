"""Which commit a repository's default branch was at, at each point in time.

A point's commit is what ``git rev-list -1 --before=<date> <branch>`` names: the newest commit
of the branch whose committer date is at or before the date, the state someone looking at the
branch then would have seen (approximately: a branch can be rewritten, and committer dates can
be out of order; git's own answer is the definition). Points between two commits share one,
so the distinct commits are what the rest of the work is done on (`distinct_commits`).

Every git process goes through `codesearch.git.process.Git` (its environment, time limits and
scrubbing); the dates reach git in one exact format (`codesearch.git.dates.git_date`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from codesearch.git.dates import git_date
from codesearch.git.paths import show
from codesearch.git.process import Git
from codesearch.git.revisions import default_branch

__all__ = ["branch_of", "commits_at", "distinct_commits"]


def branch_of(git_dir: str) -> str | None:
    """The full ref name of the repository's default branch (what HEAD points to, ``HEAD`` when
    detached), None for a repository without commits."""
    try:
        return default_branch(git_dir).ref
    except ValueError:
        return None


def commits_at(git: Git, branch: str, dates: Sequence[datetime]) -> list[str | None]:
    """The commit of `branch` at each of `dates` (None where the branch has no commit that old).
    One ``git rev-list`` per distinct date."""
    found: dict[datetime, str | None] = {}
    for when in dates:
        if when in found:
            continue
        res = git.run(["rev-list", "-1", f"--before={git_date(when)}", "--end-of-options", branch, "--"], check=True)
        sha = show(res.stdout).strip()
        found[when] = sha or None
    return [found[when] for when in dates]


def distinct_commits(commits: Sequence[str | None]) -> list[str]:
    """The commits named, each once, oldest point first (their order in `commits`)."""
    return list(dict.fromkeys(c for c in commits if c is not None))
