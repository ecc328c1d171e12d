"""Index jobs in batches: one run of a repository indexer builds many small repositories together.

Alone, each index job of a small repository paid for a whole shard: a ctags process, the
inversion of its trigrams, a shard file, two manifest writes, a searcher reload, and later a
compaction that read the shard, extracted its trigrams again and rewrote it into a compound one
(a first sync of 6,457 repositories, most of them ~1.5 MB of code, spent more on that than on
the code). So `run_batch`, after the job its worker claimed, claims further index jobs
(`claim_more`) while the shard under construction holds less than `compact.SMALL_FRACTION` of a
full shard's content (compaction merges a shard smaller than that) and the batch has fewer than
`MAX_BATCH` repositories; builds them with one `ShardBuilder` into shared shards; and swaps
them into the index together (`manifest.swap_repos`: one atomic manifest change, with each
repository's build key). The shards it writes are large enough for compaction to leave them
alone; a monorepo fills its own shards and ends the batch.

Per repository it does what a lone job did: mirror it (local repositories are read in place),
select its revisions, compare its build key (`builder.build_key`: an unchanged repository costs
a ref comparison and is not rebuilt), record INDEXING, then INDEXED with its revisions and
`pushed_at`. A repository that fails before its files are read (its clone or fetch, its
revisions) fails its own job (`fail_alone`); the others go on. A failure while files are being
read or the shards written, or a cancellation, fails every job of the batch; batches take only
jobs never tried before, and a job being retried runs alone, so a repository that breaks a
batch cannot break another one.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from codesearch.index import builder as builds
from codesearch.index.builder import IndexSettings, IndexStats, ShardBuilder, shard_prefix
from codesearch.index.compact import SMALL_FRACTION
from codesearch.runtime import metrics
from codesearch.statuses import IndexStatus

if TYPE_CHECKING:
    from codesearch.git.mirror import MirrorStore
    from codesearch.index.sources import GitSource
    from codesearch.store import Store
    from codesearch.store.models import Job, Repo

#: The most repositories one batch holds (bounds how long the batch's first job waits for its
#: INDEXED, and what one failure while reading files sends back to the queue). At 64, batches of
#: repositories of ~1 MB stopped short of half a shard and were compacted after all.
MAX_BATCH = 256


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
    """Index `first`'s repository and, while the batch is small, those of further claimed jobs."""
    from codesearch.index import manifest

    settings = worker.index_settings()
    stats = IndexStats()
    builder: ShardBuilder | None = None
    build_dir = ""
    generation = 0
    built: list[_Built] = []
    seen: set[int] = set()
    job: Job | None = first
    try:
        while job is not None:
            if job.repo_id is not None and job.repo_id in seen:
                # queued again (forced) after this batch read the repository: it runs in a later batch
                worker.give_back(job)
                break
            try:
                source, repo = _open(worker, job)
            except Exception as e:
                worker.check_cancelled()  # a cancellation stops the batch, not only this job
                worker.fail_alone(job, e)
                source = repo = None
            if source is not None and repo is not None:
                seen.add(repo.id)
                try:
                    key = builds.build_key(source, settings)  # looked up at the call (benchmarks swap it)
                    rebuild = not repo.indexed_revisions  # a re-index someone asked for, or never recorded
                    head = source.revisions[0]
                    revisions = {r.ref: r.commit for r in source.revisions}
                    if key is not None and not rebuild and manifest.built_from(worker.index_dir, repo.id) == key:
                        stats.unchanged += 1
                        worker.store.update_repo_index_status(
                            repo.id, IndexStatus.INDEXED, revisions=revisions, pushed_at=head.committed_at
                        )
                    else:
                        if builder is None:
                            generation = manifest.next_generation(worker.index_dir)
                            build_dir = tempfile.mkdtemp(prefix=f".build-{generation}-", dir=worker.index_dir)
                            name = f"{shard_prefix(source.repo)}.g{generation}"
                            builder = ShardBuilder(
                                build_dir, source.repo, settings, stats, worker.check_cancelled, name=name
                            )
                        else:
                            builder.begin_repo(source.repo)
                        for f in source.files():
                            builder.add(f)
                        built.append(
                            _Built(
                                repo,
                                revisions,
                                source.git_dir,
                                head.commit,
                                head.committed_at,
                                key,
                                shard_prefix(source.repo),
                            )
                        )
                finally:
                    source.close()
            job = worker.claim_more() if _more_allowed(first, builder, settings, len(seen)) else None
        if builder is not None:
            written = builder.finish()
            swapped = [(b.repo.id, b.repo.name, b.prefix) for b in built]
            keys = {b.repo.id: b.key for b in built if b.key}
            manifest.swap_repos(worker.index_dir, swapped, generation, written, builder.repos_of, keys)
    finally:
        if builder is not None:
            builder.symbols.close()
        if build_dir:
            shutil.rmtree(build_dir, ignore_errors=True)
    _record(worker, built)


def _more_allowed(
    first: Job, builder: ShardBuilder | None = None, settings: IndexSettings | None = None, repos: int = 0
) -> bool:
    """Whether the batch takes another job: not when its first job is a retry (it runs alone),
    not beyond `MAX_BATCH` repositories, not once the shard being built is large enough."""
    if first.attempts > 1 or repos >= MAX_BATCH:
        return False
    if builder is None or settings is None:
        return True
    return builder.content_bytes < SMALL_FRACTION * settings.shard_max_bytes


def _open(worker: BatchWorker, job: Job) -> tuple[GitSource | None, Repo | None]:
    """The repository of `job` as a git source (mirrored first unless local), its status set to
    INDEXING; (None, None) when there is nothing to index (no repository, or deleted meanwhile)."""
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
    if worker.index_delay_s:
        worker.wait_cancelled(worker.index_delay_s)
        worker.check_cancelled()
    if repo.local_path:
        path = repo.local_path
    else:
        token = resolve_connection_token(name, conn_cfg) if name else None
        try:
            user, password = repo_git_credentials(kind, conn_cfg, token, repo.display_name)
            path = worker.mirrors.sync(repo.id, repo.clone_url, username=user, password=password).path
        except Exception:
            metrics.mirror_fetch_error(kind)
            raise
    revisions = conn_cfg.get("revisions") or {}
    source = GitSource(
        path,
        repo=repo_info(repo, repo.id),
        branch_globs=revisions.get("branches") or (),
        tag_globs=revisions.get("tags") or (),
        max_revisions=worker.max_revisions,
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
