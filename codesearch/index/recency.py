"""When each file was last changed, and what its content is: the ``doc.time`` and ``doc.oid`` sections.

Recency (``sort: recency``, docs/http-api.md#sorting) needs, per document, the time of the last commit
that touched its path on the revision it is indexed from. One ``git log --name-only`` walk per indexed
revision gives it for every path at once: the walk goes from the newest commit back, and the first commit
that names a path is the last one that touched it. A walk reads at most `MAX_COMMITS` commits: a path not
touched in them (an old file of a huge history) has no time ("unknown", 0), and ranks after every known
one. Merge commits name no files (git shows no diff for them by default): a change that came in through a
merge counts at the time of the commit that made it, on its branch.

Duplicate folding (docs/http-api.md#duplicates) needs, per document, what its content is: the git blob id
(SHA-1 of ``blob <size>\\0<content>``), which a git source already knows and a directory source computes
from the bytes it reads (`blob_id`): the same content has the same id wherever it is indexed from.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from codesearch.git.process import Git

#: the most commits one walk reads (a walk of 50,000 commits with their file names takes a few seconds)
MAX_COMMITS = 50_000
#: the size of a stored blob id (SHA-1); an all-zero id is "unknown"
OID_BYTES = 20
UNKNOWN_OID = bytes(OID_BYTES)


def blob_id(content: bytes) -> bytes:
    """The git blob id (SHA-1) of `content`: what ``git hash-object`` prints, as 20 bytes."""
    h = hashlib.sha1(b"blob %d\0" % len(content), usedforsecurity=False)
    h.update(content)
    return h.digest()


def oid_bytes(sha: str) -> bytes:
    """A hex git object id as stored in ``doc.oid``: a SHA-1 id's 20 bytes; unknown for anything else
    (a SHA-256 repository's ids are not comparable with the SHA-1 ids of other sources)."""
    if len(sha) != 2 * OID_BYTES:
        return UNKNOWN_OID
    try:
        return bytes.fromhex(sha)
    except ValueError:
        return UNKNOWN_OID


class ChangeWalk(NamedTuple):
    """What one walk of a commit's history found (`walk_changes`)."""

    times: dict[str, int]  # path -> the committer time (Unix seconds) of the last commit that touched it
    head_time: int  # the committer time of the walked commit itself (0 when git printed none)


def walk_changes(git: Git, commit: str, max_commits: int = MAX_COMMITS) -> ChangeWalk:
    """One ``git log`` walk from `commit` over at most `max_commits` commits: when each path was last
    changed, and when `commit` itself was made (the first commit of the walk), which saves the index
    job a process of its own for the repository's ``pushed_at``. A failed walk (a shallow clone
    missing parents answers what it read) yields what git printed: times are a ranking aid, never a
    build failure."""
    res = git.run(
        [
            "log",
            "-z",
            "--name-only",
            "--no-renames",
            "--format=%x01%ct",
            f"--max-count={max_commits}",
            "--end-of-options",
            commit,
        ]
    )
    times: dict[str, int] = {}
    current = head_time = 0
    first = True
    for token in res.stdout.split(b"\0"):
        if token.startswith(b"\n"):
            token = token[1:]
        if not token:
            continue
        if token.startswith(b"\x01"):
            try:
                current = int(token[1:].strip())
            except ValueError:
                current = 0
            if first:
                head_time, first = current, False
            continue
        path = token.decode("utf-8", "replace")
        if current and path not in times:
            times[path] = current
    return ChangeWalk(times, head_time if res.returncode == 0 else 0)
