"""Index jobs in batches: one run of a repository indexer builds many small repositories together.

Alone, each index job of a small repository paid for a whole shard: a ctags process, the
inversion of its trigrams, a shard file, two manifest writes, a searcher reload, and later a
compaction that read the shard, extracted its trigrams again and rewrote it into a compound one
(a first sync of 6,457 repositories, most of them ~1.5 MB of code, spent more on that than on
the code). So `run_batch`, after the job its worker claimed, claims further index jobs
(`claim_more`), builds them with one `ShardBuilder` into shared shards, and swaps them into the
index together (`manifest.swap_repos`: one atomic manifest change, with each repository's build
key).

**A batch never holds a repository back behind a slow neighbour.** A repository built into a
batch becomes searchable when the batch is swapped in, so whatever the batch does after building
it delays it. The rule:

* the batch claims another job only while it is young (less than `YOUNG_S` since its first
  repository went into the builder), while the shard under construction holds less than
  `compact.SMALL_FRACTION` of a full shard's content (compaction merges a shard smaller than
  that), and while the run has had fewer than `MAX_BATCH` repositories;
* before it waits on anything slow for a later repository, it swaps in what it has built and
  records those jobs done (`settle`), and only then waits; the slow repository begins the next
  batch. Slow is a mirror (clone or fetch) not finished within `MIRROR_WAIT_S`, and a
  repository whose listed files hold more than `QUICK_BYTES` (its build alone takes longer than
  a batch may wait; a monorepo fills shards of its own).

So what a batch adds to the wait of a repository it built is bounded: `YOUNG_S`, plus at most
`MIRROR_WAIT_S` and the build of one repository of `QUICK_BYTES`, then one shard write and one
manifest swap. A slow clone, a large repository or a monorepo delays nobody but itself.

Per repository it does what a lone job did: mirror it (local repositories are read in place),
select its revisions, compare its build key (`builder.build_key`: an unchanged repository costs
a ref comparison and is not rebuilt), record INDEXING, then INDEXED with its revisions and
`pushed_at`. A repository that fails before its files are read (its clone or fetch, its
revisions) fails its own job (`fail_alone`); the others go on. A failure while files are being
read or the shards written, or a cancellation, fails every job of the batch not yet swapped in;
batches take only jobs never tried before, and a job being retried runs alone, so a repository
that breaks a batch cannot break another one.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, cast

from codesearch.index import builder as builds
from codesearch.index import scratch
from codesearch.index.builder import IndexSettings, IndexStats, ShardBuilder, shard_prefix
from codesearch.index.compact import SMALL_FRACTION
from codesearch.runtime import metrics
from codesearch.statuses import IndexStatus

if TYPE_CHECKING:
    from codesearch.git.mirror import MirrorStore
    from codesearch.index.sources import GitSource, SourceFile
    from codesearch.store import Store
    from codesearch.store.models import Job, Repo

#: The most repositories one run takes (bounds what one failure while reading files sends back to
#: the queue). At 64, batches of repositories of ~1 MB stopped short of half a shard and were
#: compacted after all.
MAX_BATCH = 256
#: A batch claims more jobs only this long (seconds) after its first repository went into the
#: builder: what it takes later would delay the repositories it has built.
YOUNG_S = 2.0
#: How long a batch that holds other jobs waits for the next repository's mirror (clone or
#: fetch) before it swaps in what it has built and settles those jobs, then waits on.
MIRROR_WAIT_S = 1.0
#: Content (bytes of listed files) above which a repository is not built into a batch that holds
#: built repositories: they are swapped in first (at ~30 MB/s of build, ~0.5 s of work).
QUICK_BYTES = 16 << 20


class BatchWorker(Protocol):
    """What `run_batch` uses of its worker (`codesearch.runtime.workers.RepoIndexer`)."""

    store: Store
    index_dir: str
    mirrors: MirrorStore
    max_revisions: int

    @property
    def index_delay_s(self) -> float: ...

    def index_settings(self) -> IndexSettings: ...

    def check_cancelled(self, *_args: object) -> None: ...

    def wait_cancelled(self, seconds: float) -> None: ...

    def claim_more(self) -> Job | None: ...

    def fail_alone(self, job: Job, error: BaseException) -> None: ...

    def give_back(self, job: Job) -> None: ...

    def settle(self, keep: Job) -> None: ...


@dataclass
class _Built:
    """A repository whose files went into the batch's builder."""

    repo: Repo
    revisions: dict[str, str]
    git_dir: str
    head_commit: str
    pushed_at: datetime | None
    key: str | None
    prefix: str  # its shards' file-name prefix: retires what an index without a manifest had for it


def run_batch(worker: BatchWorker, first: Job) -> None:
    """Index `first`'s repository and, while the batch is young and small, those of further
    claimed jobs; what is built goes in before anything slow is waited on (the module docstring)."""
    batch = _Batch(worker)
    seen: set[int] = set()
    job: Job | None = first
    try:
        while job is not None:
            if job.repo_id is not None and job.repo_id in seen:
                # queued again (forced) after this batch read the repository: it runs in a later batch
                worker.give_back(job)
                break
            try:
                source, repo = _open(worker, job, None if job is first else batch)
            except Exception as e:
                worker.check_cancelled()  # a cancellation stops the batch, not only this job
                worker.fail_alone(job, e)
                source = repo = None
            if source is not None and repo is not None:
                seen.add(repo.id)
                try:
                    batch.add(job, repo, source)
                finally:
                    source.close()
            job = worker.claim_more() if batch.more_allowed(first, len(seen)) else None
        batch.swap_in()
    finally:
        batch.close()


class _Batch:
    """The repositories built and not yet swapped in, and their builder."""

    def __init__(self, worker: BatchWorker):
        self.worker = worker
        self.settings = worker.index_settings()
        self.stats = IndexStats()
        self.builder: ShardBuilder | None = None
        self.build_dir = ""
        self.generation = 0
        self.built: list[_Built] = []
        #: when the first repository went into the builder: the batch's age counts from there
        self.began: float | None = None

    def more_allowed(self, first: Job, repos: int) -> bool:
        """Whether the run takes another job: not when its first job is a retry (it runs alone),
        not beyond `MAX_BATCH` repositories, not once the batch is `YOUNG_S` old, not once the
        shard being built is large enough."""
        if first.attempts > 1 or repos >= MAX_BATCH:
            return False
        if self.began is not None and time.monotonic() - self.began >= YOUNG_S:
            return False
        return self.builder is None or self.builder.content_bytes < SMALL_FRACTION * self.settings.shard_max_bytes

    def add(self, job: Job, repo: Repo, source: GitSource) -> None:
        """Build `repo` into the batch, or record it INDEXED at once when its build key did not move."""
        from codesearch.index import manifest

        worker = self.worker
        key = builds.build_key(source, self.settings)  # looked up at the call (benchmarks swap it)
        rebuild = not repo.indexed_revisions  # a re-index someone asked for, or never recorded
        head = source.revisions[0]
        revisions = {r.ref: r.commit for r in source.revisions}
        if key is not None and not rebuild and manifest.built_from(worker.index_dir, repo.id) == key:
            self.stats.unchanged += 1
            worker.store.update_repo_index_status(
                repo.id, IndexStatus.INDEXED, revisions=revisions, pushed_at=head.committed_at
            )
            return
        files = source.files()
        ahead, large = _look_ahead(files, self.settings.max_file_size)
        if large and self.built:
            self.settle(job)  # a large repository: what is built goes in before it is read
        if self.builder is None:
            self.generation = manifest.next_generation(worker.index_dir)
            self.build_dir = scratch.open_build_dir(worker.index_dir, self.generation)
            name = f"{shard_prefix(source.repo)}.g{self.generation}"
            self.builder = ShardBuilder(
                self.build_dir, source.repo, self.settings, self.stats, worker.check_cancelled, name=name
            )
            self.began = time.monotonic()
        else:
            self.builder.begin_repo(source.repo)
        for f in itertools.chain(ahead, files):
            self.builder.add(f)
        prefix = shard_prefix(source.repo)
        # the head's date now: reading the files walked its history, which dates it (`GitSource.files`)
        pushed_at = source.revisions[0].committed_at
        self.built.append(_Built(repo, revisions, source.git_dir, head.commit, pushed_at, key, prefix))

    def swap_in(self) -> None:
        """Write the shards of what is built, swap them into the index, record INDEXED."""
        from codesearch.index import manifest

        if self.builder is not None:
            written = self.builder.finish()
            swapped = [(b.repo.id, b.repo.name, b.prefix) for b in self.built]
            keys = {b.repo.id: b.key for b in self.built if b.key}
            manifest.swap_repos(self.worker.index_dir, swapped, self.generation, written, self.builder.repos_of, keys)
        self.close()
        _record(self.worker, self.built)
        self.built = []
        self.began = None

    def settle(self, keep: Job) -> None:
        """Swap in what is built and record every job of the run but `keep` done: `keep` is about
        to be waited on, so the batch ends here and `keep` begins the next."""
        self.swap_in()
        self.worker.settle(keep)

    def close(self) -> None:
        """Drop the builder and its folder (after a swap, nothing is left in it)."""
        if self.builder is not None:
            self.builder.symbols.close()
            self.builder = None
        if self.build_dir:
            scratch.remove_build_dir(self.build_dir)
            self.build_dir = ""


def _look_ahead(files: Iterator[SourceFile], max_file_size: int) -> tuple[list[SourceFile], bool]:
    """The first files of `files` (listed, not read) up to `QUICK_BYTES` of content (a file above
    `max_file_size` is not read, so it does not count), and whether there is more than that."""
    ahead: list[SourceFile] = []
    total = 0
    for f in files:
        ahead.append(f)
        if f.size <= max_file_size:
            total += f.size
        if total > QUICK_BYTES:
            return ahead, True
    return ahead, False


def _wait_for(worker: BatchWorker, what: Callable[[], str], batch: _Batch, keep: Job) -> str:
    """`what()` (a repository's mirror), run on a thread of its own: when it is not done within
    `MIRROR_WAIT_S`, the batch swaps in what it has built and settles its jobs, then waits on."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["ok"] = what()
        except BaseException as e:  # noqa: BLE001 - raised again on the job's thread
            box["error"] = e

    t = threading.Thread(target=run, name=f"index-job{keep.id}-mirror", daemon=True)
    t.start()
    t.join(MIRROR_WAIT_S)
    if t.is_alive():
        batch.settle(keep)
        while t.is_alive():
            worker.check_cancelled()  # a cancelled job stops waiting (the clone ends at its own timeout)
            t.join(0.2)
    if "error" in box:
        raise cast(BaseException, box["error"])
    return cast(str, box["ok"])


def _open(worker: BatchWorker, job: Job, batch: _Batch | None) -> tuple[GitSource | None, Repo | None]:
    """The repository of `job` as a git source (mirrored first unless local), its status set to
    INDEXING; (None, None) when there is nothing to index (no repository, or deleted meanwhile).
    With `batch` (the job is not its run's first), what may be slow (the mirror) is waited for
    through `_wait_for`: the batch swaps in what it has built rather than wait long."""
    from codesearch.index.sources import GitSource
    from codesearch.store.errors import NotFound
    from codesearch.sync import repo_git_credentials, repo_info, resolve_connection_token

    store = worker.store
    if job.repo_id is None:  # every index job names its repository: one without has none to index
        return None, None
    try:
        repo = store.get_repo(job.repo_id)
    except NotFound:
        return None, None  # garbage-collected meanwhile
    names = store.connections_for_repo(repo.id)
    conn_cfg, kind, name = {}, "git", ""
    if names:
        name = names[0]
        c = store.get_connection(name)
        conn_cfg, kind = c.config, c.type
    store.update_repo_index_status(repo.id, IndexStatus.INDEXING)

    def mirror() -> str:
        if worker.index_delay_s:  # tests: a slow start, as a slow clone would be
            worker.wait_cancelled(worker.index_delay_s)
            worker.check_cancelled()
        if repo.local_path:
            return repo.local_path
        token = resolve_connection_token(name, conn_cfg) if name else None
        try:
            user, password = repo_git_credentials(kind, conn_cfg, token, repo.display_name)
            return worker.mirrors.sync(repo.id, repo.clone_url, username=user, password=password).path
        except Exception:
            metrics.mirror_fetch_error(kind)
            raise

    quick = repo.local_path and not worker.index_delay_s  # read in place: nothing to wait for
    path = mirror() if batch is None or quick else _wait_for(worker, mirror, batch, job)
    revisions = conn_cfg.get("revisions") or {}
    source = GitSource(
        path,
        repo=repo_info(repo, repo.id),
        branch_globs=revisions.get("branches") or (),
        tag_globs=revisions.get("tags") or (),
        max_revisions=worker.max_revisions,
        stream_up_to=worker.index_settings().max_file_size,  # what the build reads, in listing order
    )
    return source, repo


def _record(worker: BatchWorker, built: list[_Built]) -> None:
    """INDEXED, with the revisions and `pushed_at` (the default branch head's commit date, read
    from git when the revision listing did not carry it), for every repository built."""
    from codesearch.git.revisions import commit_date

    for b in built:
        pushed_at = b.pushed_at
        if pushed_at is None:
            with contextlib.suppress(Exception):  # a date git cannot read is no reason to fail the index
                pushed_at = commit_date(b.git_dir, b.head_commit)
        worker.store.update_repo_index_status(
            b.repo.id, IndexStatus.INDEXED, revisions=b.revisions, pushed_at=pushed_at
        )
