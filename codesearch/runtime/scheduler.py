"""The scheduler: turns the config and the clock into jobs, and cleans up.

Every polling interval (the smaller of ``resyncConnectionPollingIntervalMs`` and
``reindexRepoPollingIntervalMs``) `Scheduler.tick`:

1. re-reads the config file when its mtime changed and applies it: connections upserted by name
   (a changed config marks the connection SYNC_NEEDED), connections gone from the file deleted
   (their repos become orphans);
2. enqueues a sync job for every connection due (new, config changed, or
   ``resyncConnectionIntervalMs`` passed) and an index job for every repo due (never indexed, or
   ``reindexIntervalMs`` passed) — the store deduplicates and throttles failures;
3. requeues IN_PROGRESS jobs whose worker stopped heartbeating (crash recovery; retried with
   backoff, FAILED when out of attempts);
4. garbage-collects repos orphaned longer than ``repoGarbageCollectionGracePeriodMs``: the row,
   the mirror folder and the repo's entry in the index manifest (its shards);
5. when the set of shards in the manifest changed, tells the searchers to reload
   (`SearcherPool.refresh`, or the `on_index_change` callback);
   before that, shards that fail their checksums (or are missing) are moved aside and their
   repositories queued for a rebuild (`codesearch.runtime.integrity`);
6. with permission syncing on, starts the due repo- and user-driven permission syncs on a
   background thread (`codesearch.permission_sync.runner`); applying the config also publishes
   the permission rule's input for the API replicas (`codesearch.permissions.write_settings`);
7. reports the jobs queued and running per kind (`codesearch.runtime.metrics`).

`startup()` runs once before the workers start: it takes back every job a dead service left
IN_PROGRESS, removes mirror folders and manifest entries that have no repo row, and queues an
index job for every repository whose index an older codesearch wrote (a shard or manifest format
this one does not read: `manifest.stale_repos`), so old indexes are rebuilt, never misread.

`Scheduler` is a plain class (call `tick()` yourself); `SchedulerActor` runs it on a thread in a
Ray actor until `shutdown()`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from codesearch.runtime import NAMESPACE
from codesearch.runtime.integrity import IndexIntegrity
from codesearch.runtime.workers import RuntimeOptions
from codesearch.sealed_env import SealedEnv
from codesearch.statuses import IndexStatus, JobKind, JobState, SyncStatus
from codesearch.store import models as m

if TYPE_CHECKING:
    from codesearch.config.models import Config, SearchContext, Settings
    from codesearch.permission_sync.runner import PermissionSyncer
    from codesearch.runtime.handles import Method, RuntimeHandle
    from codesearch.runtime.registry import ShardSpec
    from codesearch.runtime.searchers import SearcherPool
    from codesearch.store import Store

log = logging.getLogger(__name__)


class StartupReport(TypedDict):
    """What `Scheduler.startup` did."""

    requeued: list[int]  # jobs taken back
    mirrors: list[str]  # mirror folders without a repository, removed
    index: list[str]  # manifest entries without a repository, removed
    stale: list[int]  # repositories an older codesearch indexed, queued again


class TickReport(TypedDict):
    """What one `Scheduler.tick` did."""

    synced: list[str]  # connections a sync job was queued for
    indexed: list[int]  # repositories an index job was queued for
    requeued: list[int]  # jobs whose worker stopped heartbeating
    collected: list[int]  # repositories garbage-collected
    reloaded: bool  # the config file changed and was applied
    permissions: NotRequired[bool]  # with permission syncing on: whether a sync started
    insights: NotRequired[bool]  # whether a refresh of the saved insights started


class FirstSyncState(TypedDict):
    """How far the first sync and index got (`first_sync_state`)."""

    connections: int
    pending_connections: list[str]
    repos: int
    indexed: int
    failed: int
    connection_rows: list[m.Connection]
    finished: list[m.RepoState]
    done: bool


class Scheduler:
    def __init__(
        self,
        config_path: str,
        data_dir: str,
        options: RuntimeOptions | None = None,
        *,
        on_index_change: Callable[[str], None] | None = None,
    ):
        from codesearch.git.mirror import MirrorStore
        from codesearch.insights.refresh import InsightRefresher
        from codesearch.store import Store

        self.config_path = os.path.abspath(config_path)
        self.data_dir = os.path.abspath(data_dir)
        self.index_dir = os.path.join(self.data_dir, "index")
        os.makedirs(self.index_dir, exist_ok=True)
        self.options = options or RuntimeOptions()
        self.store: Store = Store.open(self.data_dir, **self.options.store_options)
        self.mirrors = MirrorStore(os.path.join(self.data_dir, "repos"))
        # saved insights get their missing points on a thread of their own (`codesearch.insights.refresh`)
        self.insights = InsightRefresher(self.store, self.data_dir, rules=lambda: self.settings)
        self.on_index_change = on_index_change
        self.config: Config | None = None
        self._config_mtime: float | None = None
        self._shards: list[ShardSpec] | None = None
        #: Held while the index is compared with what the searchers were given (the tick's
        #: thread and `SchedulerActor.catch_up`'s caller may both do it).
        self._index_lock = threading.Lock()
        #: made when the config is applied
        self.permission_syncer: PermissionSyncer | None = None
        self.errors: list[str] = []
        self.ticks = 0
        #: shards that fail their checks are moved aside and their repositories rebuilt (`integrity`)
        self.integrity = IndexIntegrity(self.index_dir)
        #: repositories garbage-collected so far (a change of what contexts resolve to)
        self._collected = 0
        self.reload_config(force=True)

    # ------------------------------------------------------------------ config

    @property
    def settings(self) -> Settings:
        from codesearch.config.models import Settings

        return self.config.settings if self.config is not None else Settings()

    def poll_interval_s(self) -> float:
        s = self.settings
        return max(
            0.05,
            min(float(s.resync_connection_polling_interval_ms), float(s.reindex_repo_polling_interval_ms)) / 1000.0,
        )

    def reload_config(self, force: bool = False) -> bool:
        """Re-read and apply the config file when its mtime changed (or `force`). A file that
        does not load keeps the previous config (the error is logged and kept in `errors`)."""
        from codesearch.config import load_config

        try:
            mtime = os.stat(self.config_path).st_mtime_ns
        except OSError as e:
            self._error(f"config {self.config_path}: {e}")
            return False
        if not force and mtime == self._config_mtime:
            return False
        self._config_mtime = mtime
        try:
            config = load_config(self.config_path)
        except Exception as e:
            self._error(f"config {self.config_path}: {e}")
            return False
        self.config = config
        self.apply_config()
        return True

    def _loaded(self) -> Config:
        """The config applied last (`apply_config` and what it calls run only once one loaded)."""
        if self.config is None:
            raise RuntimeError(f"no config loaded from {self.config_path}")
        return self.config

    def apply_config(self) -> None:
        from codesearch.hosts.base import listing_version
        from codesearch.hosts.github_app import attach_apps

        config = self._loaded()
        wanted = config.connections
        apps = config.raw.get("apps")
        for name, conn in wanted.items():
            stored = attach_apps(conn.raw, apps)  # a github connection carries its host's apps
            self.store.upsert_connection(name, conn.raw["type"], stored, listing_version(conn.raw["type"]))
        for row in self.store.list_connections():
            if row.name not in wanted:
                orphaned = self.store.delete_connection(row.name)
                log.info("connection %s removed from the config; %d repos orphaned", row.name, len(orphaned))
        # The models `ask_codebase` may use, in config order (the first is the default).
        self.store.replace_language_models([lm.raw for lm in config.models])
        self.apply_permissions()

    def apply_permissions(self) -> None:
        """Publish the permission rule's input for the API replicas, and (re)make the syncer."""
        from codesearch import permissions
        from codesearch.permission_sync.runner import PermissionSyncer

        config = self._loaded()
        rule = permissions.settings_from_config(config)
        permissions.write_settings(self.store, rule)
        if self.permission_syncer is None:
            self.permission_syncer = PermissionSyncer(self.store, config)
        self.permission_syncer.config = config
        self.permission_syncer.enabled = rule.enabled

    def _error(self, msg: str) -> None:
        log.error("%s", msg)
        self.errors = (self.errors + [msg])[-20:]

    # ------------------------------------------------------------------ start-up

    def startup(self, recover: bool = True) -> StartupReport:
        """Crash recovery and orphan cleanup; call before any worker starts."""
        from codesearch.index import manifest

        requeued = self.store.requeue_stale_jobs(0) if recover else []
        ids = {str(i) for i in self.store.repo_ids()}
        removed_mirrors = [i for i in self.mirrors.list_ids() if i not in ids]
        for i in removed_mirrors:
            self.mirrors.remove(i)
        removed_index = []
        man = manifest.read_manifest(self.index_dir)
        for key in list((man or {}).get("repos", {})):
            if key.isdigit() and key not in ids:
                manifest.remove_repo(self.index_dir, int(key))
                removed_index.append(key)
        if removed_mirrors or removed_index:
            log.info("start-up cleanup: mirrors %s, index entries %s", removed_mirrors, removed_index)
        stale = [r for r in manifest.stale_repos(self.index_dir) if str(r) in ids]
        for repo_id in stale:
            self.store.enqueue_index_job(repo_id)
        if stale:
            log.info("an older codesearch indexed repos %s: indexing them again", stale)
        self._check_index()
        return {
            "requeued": [j.id for j in requeued],
            "mirrors": removed_mirrors,
            "index": removed_index,
            "stale": stale,
        }

    # ------------------------------------------------------------------ the tick

    def tick(self) -> TickReport:
        self.ticks += 1
        out: TickReport = {"synced": [], "indexed": [], "requeued": [], "collected": [], "reloaded": False}
        try:
            out["reloaded"] = self.reload_config()
        except Exception as e:
            self._error(f"applying the config: {e}")
        s = self.settings
        for conn in self.store.connections_due_for_sync(float(s.resync_connection_interval_ms) / 1000.0):
            self.store.enqueue_sync_job(conn.name)
            out["synced"].append(conn.name)
        for repo in self.store.repos_due_for_index(float(s.reindex_interval_ms) / 1000.0):
            self.store.enqueue_index_job(repo.id)
            out["indexed"].append(repo.id)
        out["requeued"] = [j.id for j in self.store.requeue_stale_jobs(self.options.stale_s)]
        out["collected"] = self.collect_garbage(float(s.repo_garbage_collection_grace_period_ms) / 1000.0)
        try:
            self.apply_contexts()
        except Exception as e:
            self._error(f"search contexts: {e}")
        if self.permission_syncer is not None and self.permission_syncer.enabled:
            out["permissions"] = self.permission_syncer.kick()
        out["insights"] = self.insights.kick()
        try:
            if self.integrity.check(self.store):
                self._shards = None  # searchers drop what was moved aside (and say what they miss) at once
        except Exception as e:
            self._error(f"index integrity: {e}")
        self._check_index()
        self._report_jobs()
        return out

    def _report_jobs(self) -> None:
        """Jobs queued and running per kind, as gauges (`metrics`); a store that cannot say is an
        error of this tick, not a reason to stop ticking."""
        from codesearch.runtime import metrics

        try:
            counts = self.store.count_jobs()
        except Exception as e:
            self._error(f"counting jobs: {e}")
            return
        metrics.job_queue(
            {kind: n for (kind, state), n in counts.items() if state == JobState.PENDING},
            {kind: n for (kind, state), n in counts.items() if state == JobState.IN_PROGRESS},
            tuple(JobKind),
        )

    def apply_contexts(self) -> None:
        """Resolve the config's search contexts to repository names (for `context:`), when
        the repositories or the contexts changed."""
        from codesearch.config.contexts import RepoFacts, resolve_context

        contexts: dict[str, SearchContext] = self.config.contexts if self.config else {}
        # Read every repository only when what contexts are resolved from may have moved: a
        # connection's status row (a sync ended), the repositories' fingerprint (`repos_stamp`) or a
        # garbage collection. Reading them on every tick cost 0.7 s of CPU per second at 6,457
        # repositories. Without contexts there is nothing to resolve at all.
        stamp = (
            json.dumps({name: ctx.model_dump(mode="json") for name, ctx in contexts.items()}, sort_keys=True),
            (tuple((c.name, c.updated_at) for c in self.store.list_connections()), self.store.repos_stamp())
            if contexts
            else (),
            self._collected if contexts else 0,
        )
        if stamp == getattr(self, "_contexts_stamp", None):
            return
        self._contexts_stamp = stamp
        facts: dict[str, RepoFacts] = {}
        for name in self.config.connections if self.config and contexts else {}:
            for repo in self.store.repos_for_connection(name):
                f = facts.get(repo.name)
                conns = (f.connections if f else frozenset()) | {name}
                facts[repo.name] = RepoFacts(repo.name, conns, tuple(repo.topics or ()))
        key = (stamp[0], tuple(sorted(facts.values(), key=lambda f: f.name)))
        if key == getattr(self, "_contexts_key", None):
            return
        self._contexts_key = key
        repos = list(facts.values())
        self.store.replace_search_contexts(
            m.SearchContext(name=name, repo_names=resolve_context(ctx, repos), description=ctx.description or "")
            for name, ctx in contexts.items()
        )

    def collect_garbage(self, grace_s: float) -> list[int]:
        from codesearch.index import manifest

        gone = []
        for repo in self.store.orphaned_repos(grace_s):
            if not self.store.delete_repo(repo.id, only_if_orphaned=True):
                continue
            if not repo.local_path:
                self.mirrors.remove(repo.id)  # local repos are indexed in place, never deleted
            manifest.remove_repo(self.index_dir, repo.id)
            gone.append(repo.id)
            self._collected += 1
        if gone:
            log.info("garbage-collected repos %s", gone)
        return gone

    def _check_index(self) -> None:
        with self._index_lock:
            self._check_index_locked()

    def _check_index_locked(self) -> None:
        from codesearch.runtime.published import shard_files

        try:
            shards = shard_files(self.index_dir)  # files and tombstones: either change reloads
        except Exception as e:
            self._error(f"index: {e}")
            return
        if shards != self._shards:
            self._shards = shards
            if self.on_index_change is not None:
                try:
                    self.on_index_change(self.index_dir)
                except Exception as e:
                    self._error(f"reloading the searchers: {e}")
                    self._shards = None  # try again next tick

    def close(self) -> None:
        self.insights.close()
        if self.permission_syncer is not None:
            self.permission_syncer.join(timeout=30)
        self.store.close()

    # ------------------------------------------------------------------ status

    def first_sync_done(self) -> bool:
        """Every connection synced (or failed) once, and every linked repo indexed or failed."""
        return first_sync_state(self.store)["done"]


def first_sync_state(store: Store) -> FirstSyncState:
    """How far the first sync and index got, from the store (for progress output): counts, and
    the rows they come from (``connection_rows``; ``finished``: the repositories indexed or
    failed, by id), so that a caller printing them reads the store once. Read twice a second
    while a first sync runs: the repositories come as light rows (`Store.linked_repo_states`)."""
    conns = store.list_connections()
    pending_conns = [c.name for c in conns if c.synced_at is None and c.sync_status != SyncStatus.FAILED]
    repos = store.linked_repo_states()
    finished = [r for r in repos if r.index_status in (IndexStatus.INDEXED, IndexStatus.FAILED)]
    failed = sum(1 for r in finished if r.index_status == IndexStatus.FAILED)
    return {
        "connections": len(conns),
        "pending_connections": pending_conns,
        "repos": len(repos),
        "indexed": len(finished) - failed,
        "failed": failed,
        "connection_rows": conns,
        "finished": finished,
        "done": not pending_conns and len(finished) == len(repos),
    }


class SchedulerActor(Scheduler):
    """The scheduler in a Ray actor: ticks on a thread; searchers named `searcher_prefix`-i are
    refreshed on index changes once `set_searchers` was called.

    Supervised by Ray (`max_restarts=-1` in `start_scheduler`): when the actor dies, Ray runs
    `__init__` again with the same arguments; a reconstructed incarnation starts ticking by itself
    and takes back its searchers from the `registry` (where `set_searchers` wrote them, keyed by
    the actor id, which survives restarts). Start-up cleanup is not run again: the workers are alive
    and their jobs are theirs; stale ones are requeued by the tick as usual.
    """

    def __init__(
        self, config_path: str, data_dir: str, options: RuntimeOptions | None = None, env: SealedEnv | None = None
    ):
        import ray

        from codesearch import environment

        if env is not None:  # first: the store and the config read the environment (`codesearch.sealed_env`)
            env.apply()
        environment.configure_logging()  # SOURCEBOT_LOG_LEVEL in this actor's process too
        self._pool: SearcherPool | None = None
        self._searcher_prefix: str | None = None
        super().__init__(config_path, data_dir, options, on_index_change=self._refresh)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        ctx = ray.get_runtime_context()
        actor_id = ctx.get_actor_id()
        if actor_id is None:
            raise RuntimeError("a SchedulerActor runs as a Ray actor (`start_scheduler`), not in a driver")
        self._actor_id = actor_id
        self.reconstructed = bool(ctx.was_current_actor_reconstructed)
        if self.reconstructed:
            from codesearch.runtime import registry

            try:
                saved = registry.get_scheduler_searchers(self._actor_id)
                if saved:
                    self._attach(*saved)
                    self._searcher_prefix = saved[0]
                    self._publish_permissions()
            except Exception as e:  # noqa: BLE001 - the searchers come back with the next set_searchers
                log.warning("scheduler restarted without its searchers: %s", e)
            log.warning("scheduler restarted after a crash; resuming")
            self.start()

    def _refresh(self, index_dir: str) -> None:
        if self._pool is not None:
            self._pool.refresh(index_dir)

    def catch_up(self) -> None:
        """Give the searchers the index's shards now if they changed since the last tick, and
        return once they hold them: after it, a search finds every repository the store says is
        indexed (what `codesearch serve`'s first-sync line waits for:
        `launcher.searchers_caught_up`), instead of after the next tick."""
        self._check_index()

    def _attach(self, prefix: str, count: int) -> None:
        from codesearch.runtime.searchers import SearcherPool

        self._pool = SearcherPool.attach(prefix, count)
        self._shards = None  # refresh at the next tick

    def database_identity(self) -> tuple[str, str]:
        """(`Store.instance_id`, `Store.database`) of the state database this scheduler runs on."""
        return self.store.instance_id(), self.store.database

    def set_searchers(self, prefix: str, count: int) -> None:
        from codesearch.runtime import registry

        self._attach(prefix, count)
        registry.put_scheduler_searchers(self._actor_id, prefix, count)
        self._searcher_prefix = prefix
        self._publish_permissions()

    def apply_permissions(self) -> None:
        super().apply_permissions()
        self._publish_permissions()

    def _publish_permissions(self) -> None:
        """Tell notebooks that reach the searchers without the state database whether this
        service applies the permission rule (`codesearch.client.backends.RayBackend` refuses
        them when it does)."""
        from codesearch.runtime import registry

        if self._searcher_prefix and self.permission_syncer is not None:
            registry.put_permissions_enabled(self._searcher_prefix, self.permission_syncer.enabled)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="scheduler", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as e:
                self._error(f"tick: {e}")
            self._stop.wait(self.poll_interval_s())

    def shutdown(self) -> None:
        from codesearch.runtime import registry

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            registry.forget_scheduler(self._actor_id)
        except Exception as e:  # noqa: BLE001 - the registry went first (its owner is stopping)
            log.debug("scheduler record not removed: %s", e)
        self.close()

    def status(self) -> dict[str, Any]:
        return {
            "ticks": self.ticks,
            "errors": list(self.errors),
            "reconstructed": self.reconstructed,
            "searchers": None if self._pool is None else len(self._pool.actors),
        }

    def ping(self) -> bool:
        return True


if TYPE_CHECKING:

    class SchedulerHandle(RuntimeHandle[SchedulerActor]):
        """A handle to a `SchedulerActor` (`codesearch.runtime.handles`)."""

        ping: Method[bool]
        startup: Method[StartupReport]
        start: Method[None]
        shutdown: Method[None]
        status: Method[dict[str, Any]]
        catch_up: Method[None]
        set_searchers: Method[None]
        database_identity: Method[tuple[str, str]]


def start_scheduler(
    config_path: str,
    data_dir: str,
    options: RuntimeOptions | None = None,
    *,
    recover: bool = True,
    name: str | None = None,
    actor_options: dict[str, Any] | None = None,
    env: SealedEnv | None = None,
) -> SchedulerHandle:
    """Create the scheduler actor, run its start-up cleanup, start its loop. Returns the actor.
    `env`: environment the actor sets first (`codesearch.sealed_env`)."""
    import ray

    opts: dict[str, Any] = {"num_cpus": 0, "max_restarts": -1, **(actor_options or {})}
    if name:
        opts["name"] = name
        opts["namespace"] = NAMESPACE
    actor = cast(
        "SchedulerHandle", ray.remote(SchedulerActor).options(**opts).remote(config_path, data_dir, options, env)
    )
    ray.get(actor.startup.remote(recover))
    ray.get(actor.start.remote())
    return actor
