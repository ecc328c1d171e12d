"""Job workers: connection syncers and repo indexers, as plain classes and as Ray actors.

Each worker loops ``claim → run → complete / fail`` over the state store's job queue
(`Store.claim_job`) until told to stop. Claims are atomic in the database, so any number of
workers, in any processes or on any nodes that share the data directory, never run a job twice.

* `ConnectionSyncer` (sync jobs): lists the connection through its host adapter, records the
  listing (`Store.upsert_repos`: links, unlinks, orphans), enqueues index jobs for new and
  changed repos (all listed repos when the connection's config changed) and sets the
  connection's status (SYNCING, then SYNCED / SYNCED_WITH_WARNINGS / FAILED).
* `RepoIndexer` (index jobs): mirrors the repo (bare clone or fetch; local repos are read in
  place), selects the revisions of its connection's config and indexes them under the store's
  repo id (new shards swapped in atomically), then records INDEXED, the indexed revisions and
  `pushed_at`, the commit date of the default branch's head. It takes small jobs in batches
  (`codesearch.runtime.index_batch`: `claim_more`, one shared shard, one swap) under one rule: a
  repository it has built never waits behind a slow neighbour. A batch claims more only while
  it is young (`index_batch.YOUNG_S`) and small, and before it waits on a slow mirror or reads
  a large repository it swaps in what it built and completes those jobs (`settle`).

Each attempt is counted and timed by kind and outcome, and each failed clone or fetch of a
mirror is counted (`codesearch.runtime.metrics`). While a job runs, the worker heartbeats it
(`Store.heartbeat_job`); a worker that dies stops heartbeating and the scheduler requeues its
job (`Store.requeue_stale_jobs`). A worker restarted
by Ray with the same `worker_id` releases its own unfinished jobs at once. A job that runs
longer than `repoIndexTimeoutMs` is failed (retried with the store's backoff); its thread is
abandoned (Python cannot stop it) and its result ignored.

Each worker opens its own `Store` (one per process). The number of workers is chosen by
`worker_counts` from the concurrency settings.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from codesearch import defaults
from codesearch.errors import is_disk_full
from codesearch.runtime import NAMESPACE, metrics
from codesearch.sealed_env import SealedEnv
from codesearch.statuses import IndexStatus, JobKind, JobState, SyncStatus

if TYPE_CHECKING:
    from ray import ObjectRef

    from codesearch.config.models import Settings
    from codesearch.index.builder import IndexSettings
    from codesearch.runtime.handles import Method, RuntimeHandle
    from codesearch.store.models import Connection, Job

log = logging.getLogger(__name__)

#: Caps on the number of worker actors, whatever the concurrency settings say (default 8 each).
#: Indexing is CPU-bound (pure Python, one core per process) and each actor is a process of
#: 100-200 MB: more indexers than cores only adds memory and contention. Syncing is mostly
#: waiting on host APIs, so two syncers are plenty for a small machine.
MAX_SYNCERS = 2


def worker_counts(settings: Settings, cpus: int | None = None) -> tuple[int, int]:
    """(syncers, indexers) for the concurrency settings, capped for this machine: at most
    `MAX_SYNCERS` syncers and at most one indexer per core (at least one of each)."""
    cpus = cpus or os.cpu_count() or 1
    syncers = max(1, min(int(settings.max_connection_sync_job_concurrency), MAX_SYNCERS))
    indexers = max(1, min(int(settings.max_repo_indexing_job_concurrency), cpus))
    return syncers, indexers


class JobCancelled(Exception):
    """A job stopped early because it timed out or its worker is stopping."""


@dataclass
class RuntimeOptions:
    """Knobs of the runtime that are not in the config file (tests shrink them)."""

    #: idle wait between two empty claims
    poll_s: float = 0.5
    #: how often a running job is heartbeated
    heartbeat_s: float = 5.0
    #: an IN_PROGRESS job without a heartbeat for this long is requeued (its worker died)
    stale_s: float = 60.0
    #: `Store` options (retry backoff: `retry_base_seconds`, `retry_max_seconds`, `max_attempts`)
    store_options: dict[str, Any] = field(default_factory=dict)
    #: how long a timed-out job gets to notice its cancellation and stop
    cancel_grace_s: float = 60.0
    #: a job that failed because a disk is full is tried again after this long, its attempt
    #: given back (`Store.defer_job`): the work resumes by itself once space is freed
    disk_full_retry_s: float = 30.0
    #: tests only: sleep this long (heartbeating) before indexing, to kill a worker mid-job
    index_delay_s: float = 0.0
    #: CPUs each repository indexer reserves: a build keeps one core busy (ctags runs beside it,
    #: mostly waiting), so Ray places indexers where cores are free instead of stacking them
    indexer_cpus: float = 1.0


class _Worker:
    kind = ""

    def __init__(self, data_dir: str, worker_id: str | None = None, options: RuntimeOptions | None = None):
        from codesearch.store import Store

        self.data_dir = os.path.abspath(data_dir)
        self.index_dir = os.path.join(self.data_dir, "index")
        self.options = options or RuntimeOptions()
        self.worker_id = worker_id or f"{self.kind}-{uuid.uuid4().hex[:8]}"
        self.store = Store.open(self.data_dir, **self.options.store_options)
        self._stop = threading.Event()
        #: set when the running job timed out or the worker stops; long jobs check it (`cancelled`)
        self._cancel = threading.Event()
        self.done = 0
        self.failed = 0
        self._full_s = self.options.disk_full_retry_s
        #: the jobs the running run holds (`run_once`: the one it claimed, then those `claim_more`
        #: adds, less those settled or given back meanwhile), shared with the job's thread
        self._held: list[Job] = []
        self._held_lock = threading.Lock()
        #: jobs of the run that failed on their own while the others went on (`fail_alone`)
        self._failures: dict[int, BaseException] = {}
        self._run_started = 0.0
        # a restarted worker (same id) takes back what its previous incarnation held
        self.store.release_worker_jobs(self.worker_id, f"worker {self.worker_id} restarted")

    # ------------------------------------------------------------------ loop

    def stop(self) -> None:
        self._stop.set()
        self._cancel.set()

    def check_cancelled(self, *_args: object) -> None:
        """Raise `JobCancelled` when the running job should stop (called between units of work,
        e.g. as the index builder's per-file progress callback)."""
        if self._cancel.is_set():
            raise JobCancelled("cancelled")

    def run_once(self) -> bool:
        """Claim and run one job (an indexer may take more while it runs: `claim_more`); False
        when there was none."""
        job = self.store.claim_job(self.kind, self.worker_id)
        if job is None:
            return False
        with self._held_lock:
            self._held = [job]
        self._failures = {}
        result: dict[str, object] = {}  # "ok": True, or "error": what the job raised

        def target() -> None:
            try:
                self.run_job(job)
                result["ok"] = True
            except BaseException as e:  # noqa: BLE001 - reported as the job's error
                result["error"] = e

        self._cancel.clear()
        t = threading.Thread(target=target, name=f"{self.worker_id}-job{job.id}", daemon=True)
        started = self._run_started = time.monotonic()
        t.start()
        timeout = self.timeout_s()
        while True:
            t.join(self.options.heartbeat_s)
            if not t.is_alive():
                break
            if time.monotonic() - started > timeout:
                # ask the job to stop at its next check and wait for it, so that two jobs never
                # run at once on this worker; the job's own outcome is replaced by the timeout
                self._cancel.set()
                t.join(self.options.cancel_grace_s)
                if t.is_alive():
                    log.error(
                        "%s: job %s did not stop within %gs of its timeout",
                        self.worker_id,
                        job.id,
                        self.options.cancel_grace_s,
                    )
                result = {"error": TimeoutError(f"timed out after {timeout:g}s")}
                break
            if not self._heartbeat_held():
                log.warning("%s: job %s was taken back; abandoning it", self.worker_id, job.id)
                metrics.job_finished(self.kind, "abandoned", time.monotonic() - started)
                return True
        seconds = time.monotonic() - started
        with self._held_lock:
            held, self._held = self._held, []
        for one in held:
            err = result.get("error") if "ok" not in result else self._failures.get(one.id)
            self._finish(one, err, seconds)
        return True

    def _heartbeat_held(self) -> bool:
        """Heartbeat every job the run holds; one taken back meanwhile (the scheduler requeued it)
        leaves the run and is not completed by it. False when the run holds none any more (it
        is abandoned)."""
        with self._held_lock:
            held = list(self._held)
        lost = {j.id for j in held if not self.store.heartbeat_job(j.id, self.worker_id)}
        if not lost:
            return True
        with self._held_lock:
            self._held = [j for j in self._held if j.id not in lost]
            return bool(self._held)

    def claim_more(self) -> Job | None:
        """Called by a running job: claim one more job of this kind, never tried before, for the
        same run (heartbeated and completed with the first); None when there is none."""
        job = self.store.claim_job(self.kind, self.worker_id, first_attempt=True)
        if job is not None:
            with self._held_lock:
                self._held.append(job)
        return job

    def settle(self, keep: Job) -> None:
        """Called by a running job: record now the outcome of every job of the run but `keep`
        (their work is done and in the index: they must not wait for `keep`'s to be recorded)."""
        with self._held_lock:
            done = [j for j in self._held if j.id != keep.id]
            self._held = [j for j in self._held if j.id == keep.id]
        seconds = time.monotonic() - self._run_started
        for one in done:
            self._finish(one, self._failures.get(one.id), seconds)

    def fail_alone(self, job: Job, error: BaseException) -> None:
        """Called by a running job: `job` (one of the run's) failed, the others go on."""
        self._failures[job.id] = error

    def give_back(self, job: Job) -> None:
        """Called by a running job: `job` (one of the run's, claimed by `claim_more`) goes back to
        the queue untried, claimable at once, and leaves the run."""
        self.store.defer_job(job.id, "", 0.0, worker_id=self.worker_id)
        with self._held_lock:
            self._held = [j for j in self._held if j.id != job.id]

    def _finish(self, job: Job, err: object, seconds: float) -> None:
        """Record a job's outcome: completed (`err` None), deferred (a full disk) or failed."""
        if err is None:
            completed = self.store.complete_job(job.id, self.worker_id)
            metrics.job_finished(self.kind, "completed" if completed else "abandoned", seconds)
            self.done += 1
            return
        metrics.job_finished(self.kind, "failed", seconds)
        msg = str(err) or type(err).__name__
        if isinstance(err, BaseException) and is_disk_full(err):
            log.error("%s: job %s deferred %gs, a disk is full: %s", self.worker_id, job.id, self._full_s, msg)
            self.store.defer_job(job.id, msg, self._full_s, worker_id=self.worker_id)
            self.failed += 1
            return
        log.warning("%s: job %s failed: %s", self.worker_id, job.id, msg)
        after = self.store.fail_job(job.id, msg, worker_id=self.worker_id)
        self.failed += 1
        if after is not None and after.state == JobState.FAILED:
            self.gave_up(job, msg)

    def loop(self) -> None:
        while not self._stop.is_set():
            try:
                busy = self.run_once()
            except Exception as e:  # the database was busy or gone: wait and retry
                log.error("%s: %s", self.worker_id, e)
                busy = False
            if not busy:
                self._stop.wait(self.options.poll_s)

    def close(self) -> None:
        self.stop()
        self.store.close()

    # ------------------------------------------------------------------ per kind

    def timeout_s(self) -> float:
        return float("inf")

    def run_job(self, job: Job) -> None:
        raise NotImplementedError

    def gave_up(self, job: Job, error: str) -> None:
        pass

    def _connection_by_id(self, cid: int | None) -> Connection | None:
        for c in self.store.list_connections():
            if c.id == cid:
                return c
        return None


class ConnectionSyncer(_Worker):
    """Runs sync jobs (see the module docstring)."""

    kind = JobKind.SYNC

    def run_job(self, job: Job) -> None:
        from codesearch.hosts.adapters import adapter_for
        from codesearch.hosts.http import HostHttp
        from codesearch.sync import resolve_connection_token

        conn = self._connection_by_id(job.connection_id)
        if conn is None:
            return  # deleted meanwhile: nothing to do
        config_changed = conn.sync_status == SyncStatus.SYNC_NEEDED
        self.store.update_connection_status(conn.name, SyncStatus.SYNCING)
        try:
            token = resolve_connection_token(conn.name, conn.config)
            http = HostHttp()
            try:
                listing = adapter_for(conn.type)(conn.name, conn.config, token, http)
            finally:
                http.close()
        except Exception as e:
            self.store.update_connection_status(
                conn.name, SyncStatus.FAILED, error=str(e), config_hash=conn.config_hash
            )
            raise
        result = self.store.upsert_repos(conn.name, listing.repos)
        fresh = set(result.added) | set(result.updated) | set(result.linked)
        if config_changed:
            fresh |= set(result.ids.values())
        for rid in sorted(fresh):
            self.store.enqueue_index_job(rid)
        status = SyncStatus.SYNCED_WITH_WARNINGS if listing.warnings else SyncStatus.SYNCED
        self.store.update_connection_status(conn.name, status, warnings=listing.warnings, config_hash=conn.config_hash)

    def gave_up(self, job: Job, error: str) -> None:
        conn = self._connection_by_id(job.connection_id)
        if conn is not None:
            self.store.update_connection_status(conn.name, SyncStatus.FAILED, error=error)


class RepoIndexer(_Worker):
    """Runs index jobs (see the module docstring)."""

    kind = JobKind.INDEX

    def __init__(
        self,
        data_dir: str,
        worker_id: str | None = None,
        options: RuntimeOptions | None = None,
        *,
        max_file_size: int = defaults.MAX_FILE_SIZE,
        max_trigram_count: int = defaults.MAX_TRIGRAM_COUNT,
        timeout_ms: float = defaults.REPO_INDEX_TIMEOUT_MS,
        always_index: str | None = None,
        max_revisions: int | None = None,
    ):
        """`always_index` is an ``ALWAYS_INDEX_FILE_PATTERNS`` value, `max_revisions` a
        ``CODESEARCH_MAX_INDEXED_REVISIONS`` one; None: this process's environment's."""
        from codesearch import environment
        from codesearch.git.mirror import MirrorStore
        from codesearch.globs import PatternList

        super().__init__(data_dir, worker_id, options)
        self._timeout_s = float(timeout_ms) / 1000.0
        self.mirrors = MirrorStore(os.path.join(self.data_dir, "repos"), timeout_s=min(600.0, self._timeout_s))
        self.max_file_size = int(max_file_size)
        self.max_trigram_count = int(max_trigram_count)
        self.max_revisions = environment.max_indexed_revisions() if max_revisions is None else int(max_revisions)
        self.always_index = (
            environment.always_index_patterns() if always_index is None else PatternList.from_env(always_index)
        )

    def timeout_s(self) -> float:
        return self._timeout_s

    @property
    def index_delay_s(self) -> float:
        return self.options.index_delay_s

    def wait_cancelled(self, seconds: float) -> None:
        """Wait `seconds`, or less when the job is cancelled meanwhile."""
        self._cancel.wait(seconds)

    def index_settings(self) -> IndexSettings:
        from codesearch.index.builder import IndexSettings

        return IndexSettings(
            max_file_size=self.max_file_size,
            max_trigram_count=self.max_trigram_count,
            always_index=self.always_index,
            max_revisions=self.max_revisions,
        )

    def run_job(self, job: Job) -> None:
        """Index the job's repository, and with it, while they are small, those of more jobs
        (`codesearch.runtime.index_batch`)."""
        from codesearch.runtime.index_batch import run_batch

        run_batch(self, job)

    def gave_up(self, job: Job, error: str) -> None:
        from codesearch.store.errors import NotFound

        if job.repo_id is None:  # no repository to mark (see `run_job`)
            return
        with contextlib.suppress(NotFound):
            self.store.update_repo_index_status(job.repo_id, IndexStatus.FAILED, error=error)


# ---------------------------------------------------------------------- Ray actors


class _ActorMixin(_Worker):
    """Starts the worker's loop on a thread when the actor starts (and restarts). A `_Worker`
    (so that mypy knows what it uses); first in the bases of the actors, before their kind."""

    def _start_loop(self) -> None:
        from codesearch import environment

        environment.configure_logging()  # SOURCEBOT_LOG_LEVEL in this actor's process too
        self._thread = threading.Thread(target=self.loop, name=f"{self.worker_id}-loop", daemon=True)
        self._thread.start()

    def shutdown(self) -> dict[str, Any]:
        self.stop()
        self._thread.join(timeout=30)
        self.store.close()
        return self.counts()

    def counts(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "done": self.done, "failed": self.failed}

    def ping(self) -> str:
        return self.worker_id


if TYPE_CHECKING:

    class WorkerHandle(RuntimeHandle[_ActorMixin]):
        """A handle to a `ConnectionSyncerActor` or a `RepoIndexerActor` (`codesearch.runtime.handles`)."""

        ping: Method[str]
        shutdown: Method[dict[str, Any]]
        counts: Method[dict[str, Any]]


class ConnectionSyncerActor(_ActorMixin, ConnectionSyncer):
    def __init__(self, *args: Any, env: SealedEnv | None = None, **kwargs: Any):
        if env is not None:  # first: the store and the tokens come from the environment (`codesearch.sealed_env`)
            env.apply()
        ConnectionSyncer.__init__(self, *args, **kwargs)
        self._start_loop()


class RepoIndexerActor(_ActorMixin, RepoIndexer):
    def __init__(self, *args: Any, env: SealedEnv | None = None, **kwargs: Any):
        if env is not None:  # first: the store and the tokens come from the environment (`codesearch.sealed_env`)
            env.apply()
        RepoIndexer.__init__(self, *args, **kwargs)
        self._start_loop()


def start_workers(
    data_dir: str,
    settings: Settings,
    options: RuntimeOptions | None = None,
    *,
    syncers: int | None = None,
    indexers: int | None = None,
    name_prefix: str = "codesearch",
    actor_options: dict[str, Any] | None = None,
    env: SealedEnv | None = None,
    names: Sequence[str] = (),
    wait: bool = True,
) -> list[WorkerHandle]:
    """Create the syncer and indexer actors (counts from `worker_counts` unless given). Worker
    ids are stable per slot, so an actor restarted by Ray releases its own unfinished job.
    `env`: environment each actor sets first (`codesearch.sealed_env`). `names`: the actors'
    names in `NAMESPACE`, syncers first, one per actor. With `wait` (the default) it returns once
    every actor answers; without, at once: the caller starts other actors meanwhile and pings
    these later (each actor is a process to start, ~1 s here: started together, they overlap)."""
    import ray

    options = options or RuntimeOptions()
    n_sync, n_index = worker_counts(settings)
    n_sync = syncers if syncers is not None else n_sync
    n_index = indexers if indexers is not None else n_index
    run_id = uuid.uuid4().hex[:6]
    if names and len(names) != n_sync + n_index:
        raise ValueError(f"{len(names)} names for {n_sync + n_index} workers")

    def named(i: int) -> dict[str, Any]:
        return {"name": names[i], "namespace": NAMESPACE} if names else {}

    opts: dict[str, Any] = {"num_cpus": 0, "max_restarts": -1, **(actor_options or {})}
    actors: list[WorkerHandle] = []
    for i in range(n_sync):
        actors.append(
            cast(
                "WorkerHandle",
                ray.remote(ConnectionSyncerActor)
                .options(**opts, **named(i))
                .remote(data_dir, f"{name_prefix}-sync-{run_id}-{i}", options, env=env),
            )
        )
    index_opts = {**opts, "num_cpus": (actor_options or {}).get("num_cpus", options.indexer_cpus)}
    for i in range(n_index):
        actors.append(
            cast(
                "WorkerHandle",
                ray.remote(RepoIndexerActor)
                .options(**index_opts, **named(n_sync + i))
                .remote(
                    data_dir,
                    f"{name_prefix}-index-{run_id}-{i}",
                    options,
                    max_file_size=int(settings.max_file_size),
                    max_trigram_count=int(settings.max_trigram_count),
                    timeout_ms=float(settings.repo_index_timeout_ms),
                    env=env,
                ),
            )
        )
    if wait:
        ray.get([a.ping.remote() for a in actors])
    return actors


def stop_workers(actors: Sequence[RuntimeHandle[Any]], timeout_s: float = 10.0) -> None:
    """Ask each worker (or other actor of the runtime) to finish its current job and stop, then kill it."""
    import ray

    refs: list[ObjectRef[Any]] = []
    for a in actors:
        with contextlib.suppress(Exception):
            refs.append(a.shutdown.remote())
    if refs:
        ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    for a in actors:
        with contextlib.suppress(Exception):
            ray.kill(a, no_restart=True)
