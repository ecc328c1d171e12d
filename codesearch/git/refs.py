"""A repository's branches and where HEAD points (the branch list of the ``list_branches``
tool and the history pages)."""

from __future__ import annotations

from dataclasses import dataclass

from codesearch.git.paths import show
from codesearch.git.process import Git

__all__ = ["Branch", "head_branch", "list_branches"]


@dataclass(frozen=True)
class Branch:
    name: str  # without refs/heads/
    commit: str  # full sha of its head
    committed_at: str  # committer date of its head, ISO 8601 (git's iso-strict)


def list_branches(git_dir: str) -> list[Branch]:
    """Every branch (``refs/heads/*``), newest head commit first, then by name
    (``git for-each-ref --sort=-committerdate``)."""
    # the last --sort is the primary key: newest first, ties by name
    res = Git.at(git_dir).run(
        [
            "for-each-ref",
            "--sort=refname",
            "--sort=-committerdate",
            "--format=%(refname)%00%(objectname)%00%(committerdate:iso-strict)",
            "refs/heads/",
        ],
        check=True,
    )
    out = []
    for line in res.stdout.split(b"\n"):
        parts = line.split(b"\0")
        if len(parts) != 3 or not parts[0].startswith(b"refs/heads/"):
            continue
        out.append(Branch(show(parts[0][len(b"refs/heads/") :]), show(parts[1]), show(parts[2])))
    return out


def head_branch(git_dir: str) -> str | None:
    """The branch HEAD points to (short name), None when HEAD is detached or dangling."""
    res = Git.at(git_dir).run(["symbolic-ref", "--quiet", "HEAD"])
    ref = show(res.stdout).strip()
    return ref[len("refs/heads/") :] if res.returncode == 0 and ref.startswith("refs/heads/") else None
