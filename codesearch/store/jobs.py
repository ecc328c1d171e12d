"""Jobs: the work queue of sync jobs (one connection) and index jobs (one repo).

A job goes PENDING → IN_PROGRESS → COMPLETED | FAILED. Workers take one with `claim_job` (a
conditional UPDATE whose row count is checked: never claimed twice, across processes or hosts),
prove they are alive with `heartbeat_job`, and end it with `complete_job` or `fail_job`; a failed
attempt is retried after an exponential backoff (`retry_delay`) until `max_attempts`. Jobs of a
dead or silent worker are taken back (`requeue_stale_jobs`, `release_worker_jobs`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import Column, ColumnElement, delete, func, insert, select, update
from sqlalchemy.engine import Connection as SAConnection

from codesearch.store import models as m
from codesearch.store.base import StoreBase
from codesearch.store.models import Job
from codesearch.store.rows import from_row, get_one, inserted_id
from codesearch.store.tables import jobs, repos


class JobsMixin(StoreBase):
    """The `Store` methods for sync and index jobs (mixed into `Store`)."""

    def enqueue_sync_job(self, connection: str, *, force: bool = False) -> Job:
        """A PENDING sync job for the connection. An existing PENDING job (or IN_PROGRESS one,
        unless `force`) is returned instead of adding a duplicate."""
        with self._tx(write=True) as c:
            return self._enqueue(c, m.SYNC_JOB, jobs.c.connection_id, self._connection_id(c, connection), force)

    def request_connection_sync(self, connection: str) -> Job:
        """Sync the connection now (an owner's Resync): its PENDING sync job, due at once (one
        waiting for a retry after a failure is pulled forward), or a new one; a sync running
        already is returned as it is (it lists the host anew anyway)."""
        now = self._now()
        with self._tx(write=True) as c:
            job = self._enqueue(c, m.SYNC_JOB, jobs.c.connection_id, self._connection_id(c, connection), False)
            if job.state == m.PENDING and job.next_attempt_at is not None and job.next_attempt_at > now:
                c.execute(update(jobs).where(jobs.c.id == job.id).values(next_attempt_at=now))
                job = self._get_job(c, job.id)
            return job

    def enqueue_index_job(self, repo_id: int, *, force: bool = False, rebuild: bool = False) -> Job:
        """A PENDING index job for the repo, deduplicated like `enqueue_sync_job`. With `rebuild`
        (a re-index someone asked for), the repo's indexed revisions are forgotten, so the job
        rebuilds it even when nothing moved (an unchanged repository is otherwise left as it is:
        `codesearch.index.builder.build_key`)."""
        with self._tx(write=True) as c:
            self._get_repo(c, repo_id)
            if rebuild:
                c.execute(update(repos).where(repos.c.id == repo_id).values(indexed_revisions=None))
            return self._enqueue(c, m.INDEX_JOB, jobs.c.repo_id, repo_id, force)

    def _enqueue(self, c: SAConnection, kind: str, column: Column[Any], target: int, force: bool) -> Job:
        states = (m.PENDING,) if force else (m.PENDING, m.IN_PROGRESS)
        row = c.execute(
            select(jobs)
            .where(jobs.c.kind == kind, column == target, jobs.c.state.in_(states))
            .order_by(jobs.c.id)
            .limit(1)
        ).first()
        if row is not None:
            return from_row(Job, row)
        now = self._now()
        jid = inserted_id(
            c.execute(
                insert(jobs).values(
                    kind=kind,
                    connection_id=target if kind == m.SYNC_JOB else None,
                    repo_id=target if kind == m.INDEX_JOB else None,
                    state=m.PENDING,
                    attempts=0,
                    max_attempts=self.max_attempts,
                    error=None,
                    worker_id=None,
                    created_at=now,
                    started_at=None,
                    finished_at=None,
                    heartbeat_at=None,
                    next_attempt_at=now,
                )
            )
        )
        return self._get_job(c, jid)

    def claim_job(self, kind: str, worker_id: str, *, first_attempt: bool = False) -> Job | None:
        """Atomically take the oldest claimable PENDING job of `kind` (its `next_attempt_at`
        has passed): it becomes IN_PROGRESS for `worker_id`, attempts + 1. None when there is
        none. The claim is a conditional UPDATE (... WHERE state = 'PENDING') whose row count
        is checked, so no job is ever claimed twice, across threads, processes or hosts.
        `first_attempt`: only a job never tried before (an indexer's batch takes no retries:
        `codesearch.runtime.index_batch`)."""
        if kind not in m.JOB_KINDS:
            raise ValueError(f"unknown job kind {kind!r}")
        now = self._now()
        conds = [jobs.c.kind == kind, jobs.c.state == m.PENDING, jobs.c.next_attempt_at <= now]
        if first_attempt:
            conds.append(jobs.c.attempts == 0)
        with self._tx(write=True) as c:
            candidates = list(
                c.scalars(select(jobs.c.id).where(*conds).order_by(jobs.c.next_attempt_at, jobs.c.id).limit(8))
            )
            for jid in candidates:
                won = c.execute(
                    update(jobs)
                    .where(jobs.c.id == jid, jobs.c.state == m.PENDING)
                    .values(
                        state=m.IN_PROGRESS,
                        worker_id=worker_id,
                        attempts=jobs.c.attempts + 1,
                        started_at=now,
                        heartbeat_at=now,
                        finished_at=None,
                    )
                ).rowcount
                if won == 1:
                    return self._get_job(c, jid)
            return None

    def heartbeat_job(self, job_id: int, worker_id: str) -> bool:
        """Record that `worker_id` is still working on the job (it is not stale). False when
        the job is no longer IN_PROGRESS for this worker: the worker should stop."""
        with self._tx(write=True) as c:
            return bool(
                c.execute(
                    update(jobs)
                    .where(jobs.c.id == job_id, jobs.c.state == m.IN_PROGRESS, jobs.c.worker_id == worker_id)
                    .values(heartbeat_at=self._now())
                ).rowcount
            )

    def complete_job(self, job_id: int, worker_id: str | None = None) -> bool:
        """IN_PROGRESS → COMPLETED. False when the job is not IN_PROGRESS (for `worker_id`, when
        given): it was requeued or taken over, and this worker's result is stale."""
        conds = _in_progress(job_id, worker_id)
        with self._tx(write=True) as c:
            return bool(
                c.execute(
                    update(jobs).where(*conds).values(state=m.COMPLETED, finished_at=self._now(), error=None)
                ).rowcount
            )

    def fail_job(self, job_id: int, error: str, *, worker_id: str | None = None, retry: bool = True) -> Job | None:
        """An IN_PROGRESS job failed with `error`. With `retry` and attempts left it goes back
        to PENDING, claimable after the backoff `retry_delay(attempts)`; else it is FAILED.
        Returns the job, or None when it was not IN_PROGRESS (for `worker_id`)."""
        conds = _in_progress(job_id, worker_id)
        with self._tx(write=True) as c:
            row = c.execute(select(jobs).where(*conds)).first()
            if row is None:
                return None
            return self._retry_or_fail(c, from_row(Job, row), error, retry)

    def defer_job(self, job_id: int, error: str, delay_s: float, *, worker_id: str | None = None) -> Job | None:
        """An IN_PROGRESS job could not run for a reason outside it (its disk is full): back to
        PENDING, claimable again in `delay_s` seconds, its attempt given back (a full disk must not
        use up the attempts of every job queued meanwhile, nor fail them for good). `error` is
        recorded on the job and its repository. None when the job was not IN_PROGRESS."""
        conds = _in_progress(job_id, worker_id)
        with self._tx(write=True) as c:
            row = c.execute(select(jobs).where(*conds)).first()
            if row is None:
                return None
            job = from_row(Job, row)
            recorded = self._repo_error(c, job.repo_id, error)
            c.execute(
                update(jobs)
                .where(*conds)
                .values(
                    state=m.PENDING,
                    error=recorded,
                    attempts=max(job.attempts - 1, 0),
                    next_attempt_at=self._now() + timedelta(seconds=delay_s),
                )
            )
            return self._get_job(c, job_id)

    def requeue_stale_jobs(self, timeout_seconds: float, *, kind: str | None = None) -> list[Job]:
        """Crash recovery and timeouts: IN_PROGRESS jobs whose last heartbeat (or start) is
        more than `timeout_seconds` old are retried with backoff, or FAILED when out of
        attempts. `timeout_seconds=0` at start-up takes back every job of a dead service."""
        cutoff = self._now() - timedelta(seconds=timeout_seconds)
        conds = [jobs.c.state == m.IN_PROGRESS, jobs.c.heartbeat_at <= cutoff]
        if kind is not None:
            conds.append(jobs.c.kind == kind)
        return self._requeue_where(
            conds, lambda j: f"timed out: no progress from worker {j.worker_id} for {timeout_seconds:g}s"
        )

    def release_worker_jobs(self, worker_id: str, error: str = "") -> list[Job]:
        """A worker died: its IN_PROGRESS jobs are retried with backoff (or FAILED)."""
        return self._requeue_where(
            [jobs.c.state == m.IN_PROGRESS, jobs.c.worker_id == worker_id],
            lambda j: error or f"worker {worker_id} stopped",
        )

    def _requeue_where(self, conds: list[ColumnElement[bool]], message: Callable[[Job], str]) -> list[Job]:
        with self._tx(write=True) as c:
            stale = [from_row(Job, r) for r in c.execute(select(jobs).where(*conds).order_by(jobs.c.id))]
            out = []
            for job in stale:
                done = self._retry_or_fail(c, job, message(job), True)
                if done is not None:
                    out.append(done)
            return out

    def retry_delay(self, attempts: int) -> float:
        """Backoff before the next attempt after `attempts` failed ones: base × 2^(attempts-1), capped."""
        delay: float = self.retry_base_seconds * (2 ** max(attempts - 1, 0))
        return min(delay, self.retry_max_seconds)

    def _retry_or_fail(self, c: SAConnection, job: Job, error: str, retry: bool) -> Job | None:
        now = self._now()
        recorded = self._repo_error(c, job.repo_id, error)
        if retry and job.attempts < job.max_attempts:
            values = dict(
                state=m.PENDING, error=recorded, next_attempt_at=now + timedelta(seconds=self.retry_delay(job.attempts))
            )
        else:
            values = dict(state=m.FAILED, error=recorded, finished_at=now)
        if not c.execute(
            update(jobs).where(jobs.c.id == job.id, jobs.c.state == m.IN_PROGRESS).values(**values)
        ).rowcount:
            return None
        return self._get_job(c, job.id)

    def get_job(self, job_id: int) -> Job:
        with self._tx() as c:
            return self._get_job(c, job_id)

    def _get_job(self, c: SAConnection, job_id: int) -> Job:
        return get_one(c, Job, jobs.c.id, job_id, "job")

    def list_jobs(
        self,
        *,
        kind: str | None = None,
        state: str | None = None,
        connection: str | None = None,
        repo_id: int | None = None,
        limit: int = 100,
    ) -> list[Job]:
        """Jobs, newest first, filtered by kind, state, connection name or repo id."""
        conds = []
        if kind is not None:
            conds.append(jobs.c.kind == kind)
        if state is not None:
            conds.append(jobs.c.state == state)
        if repo_id is not None:
            conds.append(jobs.c.repo_id == repo_id)
        with self._tx() as c:
            if connection is not None:
                conds.append(jobs.c.connection_id == self._connection_id(c, connection))
            return [
                from_row(Job, r) for r in c.execute(select(jobs).where(*conds).order_by(jobs.c.id.desc()).limit(limit))
            ]

    def count_jobs(self, states: tuple[str, ...] = (m.PENDING, m.IN_PROGRESS)) -> dict[tuple[str, str], int]:
        """How many jobs are in each of `states`, per kind: ``{(kind, state): n}`` (pairs without
        a job left out). One grouped query, cheap enough for every scheduler tick."""
        q = (
            select(jobs.c.kind, jobs.c.state, func.count())
            .where(jobs.c.state.in_(states))
            .group_by(jobs.c.kind, jobs.c.state)
        )
        with self._tx() as c:
            return {(kind, state): int(n) for kind, state, n in c.execute(q)}

    def prune_jobs(self, older_than_seconds: float) -> int:
        """Delete COMPLETED and FAILED jobs finished more than `older_than_seconds` ago (keep it
        above the resync/reindex intervals: recent failures throttle the `*_due_*` queries)."""
        cutoff = self._now() - timedelta(seconds=older_than_seconds)
        with self._tx(write=True) as c:
            return c.execute(
                delete(jobs).where(jobs.c.state.in_((m.COMPLETED, m.FAILED)), jobs.c.finished_at < cutoff)
            ).rowcount


def _in_progress(job_id: int, worker_id: str | None) -> list[ColumnElement[bool]]:
    """The conditions that a job is `job_id`, IN_PROGRESS, and (given `worker_id`) that worker's:
    a worker that lost its claim (the job was taken back after the stale timeout) changes nothing."""
    conds: list[ColumnElement[bool]] = [jobs.c.id == job_id, jobs.c.state == m.IN_PROGRESS]
    if worker_id is not None:
        conds.append(jobs.c.worker_id == worker_id)
    return conds
