"""The status values of connections, repositories, jobs and chat turns, one `StrEnum` each.

The values are stored in the state database and sent over the API (``syncStatus``,
``indexStatus``, a job's ``state``, a chat's ``status``), and the pages' scripts compare them
as strings: they never change. A member *is* its value (``JobState.FAILED == "FAILED"``, it
formats, serialises to JSON and binds to SQL as ``"FAILED"``), so rows read back as plain
strings compare equal to the members.

Four kinds of thing can fail, and each says so with the value ``"FAILED"``: a connection's
sync, a repository's last index attempt, a job, an ``ask_codebase`` turn. They are four
enums, not one constant, so that a sync status cannot be compared with a job state by mistake
(a type checker sees `SyncStatus` where one is expected).
"""

from __future__ import annotations

from enum import StrEnum


class SyncStatus(StrEnum):
    """A connection's sync status (what the UI shows for a connection)."""

    SYNC_NEEDED = "SYNC_NEEDED"  # new, or its config changed, since the last sync
    SYNCING = "SYNCING"
    SYNCED = "SYNCED"
    SYNCED_WITH_WARNINGS = "SYNCED_WITH_WARNINGS"  # e.g. one org of several did not exist
    FAILED = "FAILED"


class IndexStatus(StrEnum):
    """A repository's index status."""

    NEW = "NEW"  # never indexed
    INDEXING = "INDEXING"
    INDEXED = "INDEXED"
    FAILED = "FAILED"  # the last attempt failed (an older index may still be served)


class JobKind(StrEnum):
    """What a job does."""

    SYNC = "sync"  # one connection: list, upsert repos, link/unlink
    INDEX = "index"  # one repo: fetch, index, swap shards


class JobState(StrEnum):
    """Where a sync or index job is: queued, held by a worker, done, or out of attempts."""

    PENDING = "PENDING"
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"

    @classmethod
    def active(cls) -> tuple[JobState, ...]:
        """The states of a job that is still to run or running."""
        return (cls.PENDING, cls.IN_PROGRESS)


class ChatStatus(StrEnum):
    """How an ``ask_codebase`` turn ended: with an answer, or with the model's error."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
