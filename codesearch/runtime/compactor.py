"""The compactor: a Ray actor that keeps the index made of a few compound shards.

Indexers write each repository's shards on their own and tombstone what they replace
(`codesearch.index.manifest`); left alone, an index of a thousand repositories would be a
thousand small shards, and re-indexed repositories would leave dead documents behind. The
compactor runs `codesearch.index.compact` every `poll_s` seconds on a thread of its own actor
(its own process: merging reads and writes hundreds of megabytes, which must not hold up the
scheduler's tick or the searchers): one merge at a time, then the next plan. Each merge is one
atomic manifest change, so searches never see a half-done compaction; the scheduler notices the
new manifest and refreshes the searchers, as after any index change.

`Compactor` is a plain class (call `run_once()` yourself, as the tests do); `CompactorActor`
runs it in a loop until `shutdown()`; `start_compactor` creates the actor (supervised by Ray:
a compactor that dies is restarted and starts over from the manifest, which a dead compactor
never leaves half-changed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from typing import TYPE_CHECKING, Any, cast

from codesearch.index import manifest, scratch
from codesearch.index.builder import IndexSettings
from codesearch.index.compact import CompactionStats, merge, plan
from codesearch.runtime import NAMESPACE
from codesearch.sealed_env import SealedEnv

if TYPE_CHECKING:
    from codesearch.runtime.handles import Method, RuntimeHandle

log = logging.getLogger(__name__)

#: Seconds between two looks at the index when there was nothing to merge.
POLL_S = 5.0


class Compactor:
    """Merges the shards of `data_dir`'s index that `compact.plan` picks."""

    def __init__(self, data_dir: str, settings: IndexSettings | None = None):
        self.index_dir = os.path.join(data_dir, "index")
        self.settings = settings or IndexSettings()
        self.totals = CompactionStats()
        self.errors: list[str] = []

    def run_once(self) -> int:
        """Plan, then merge the planned groups; returns how many merges were done."""
        if not os.path.isdir(self.index_dir):
            return 0
        self.sweep()
        done = 0
        for group in plan(self.index_dir, self.settings.shard_max_bytes):
            try:
                if merge(self.index_dir, group, self.settings, self.totals):
                    done += 1
                    log.info("compacted %d shard(s) into %s", len(group), self.totals.written[-1:])
            except Exception as e:  # a bad shard must not stop compaction of the others
                log.exception("compaction of %s failed", group)
                self.errors = (self.errors + [f"{group}: {type(e).__name__}: {e}"])[-20:]
        return done

    def sweep(self) -> None:
        """Clear what a process that died mid-write left: shard files the manifest does not name
        (an indexer or compactor killed between its move and its manifest write), the build
        folders of indexers that died (`scratch.sweep`: their lock is free) and this compactor's
        own unfinished merge folders (``.compact-<generation>``; only the compactor writes those,
        so none is live while it sweeps)."""
        gone = manifest.collect_garbage(self.index_dir) + scratch.sweep(self.index_dir)
        for f in os.listdir(self.index_dir):
            if f.startswith(".compact-"):
                shutil.rmtree(os.path.join(self.index_dir, f), ignore_errors=True)
                gone.append(f)
        if gone:
            log.info("swept %d file(s) left by a writer that died: %s", len(gone), gone[:5])

    def stats(self) -> dict[str, Any]:
        t = self.totals
        return {
            "merged_shards": t.merged_shards,
            "written_shards": t.written_shards,
            "live_bytes": t.live_bytes,
            "dropped_bytes": t.dropped_bytes,
            "refused": t.refused,
            "errors": list(self.errors),
        }


class CompactorActor(Compactor):
    """`Compactor` in a loop on a thread of a Ray actor."""

    def __init__(
        self,
        data_dir: str,
        settings: IndexSettings | None = None,
        poll_s: float = POLL_S,
        env: SealedEnv | None = None,
    ):
        from codesearch import environment

        if env is not None:  # first: the store reads the environment (`codesearch.sealed_env`)
            env.apply()
        environment.configure_logging()
        super().__init__(data_dir, settings)
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="compactor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if self.run_once():
                    continue  # more may be due (a big backlog): look again at once
            except Exception:
                log.exception("compactor loop")
            self._stop.wait(self.poll_s)

    def shutdown(self) -> dict[str, Any]:
        """Stop after the merge under way (if any); returns the totals."""
        self._stop.set()
        self._thread.join(timeout=120)
        return self.stats()

    def ping(self) -> bool:
        return True


if TYPE_CHECKING:

    class CompactorHandle(RuntimeHandle[CompactorActor]):
        """A handle to a `CompactorActor` (`codesearch.runtime.handles`)."""

        ping: Method[bool]
        shutdown: Method[dict[str, Any]]


def start_compactor(
    data_dir: str,
    settings: IndexSettings | None = None,
    *,
    poll_s: float = POLL_S,
    name: str | None = None,
    actor_options: dict[str, Any] | None = None,
    env: SealedEnv | None = None,
    wait: bool = True,
) -> CompactorHandle:
    """Create the compactor actor (supervised by Ray, reserving no CPU); returns it. `env`:
    environment the actor sets first (`codesearch.sealed_env`). Without `wait`, it returns before
    the actor answers (see `workers.start_workers`)."""
    import ray

    opts: dict[str, Any] = {"num_cpus": 0, "max_restarts": -1, **(actor_options or {})}
    if name:
        opts["name"] = name
        opts["namespace"] = NAMESPACE
    actor = cast("CompactorHandle", ray.remote(CompactorActor).options(**opts).remote(data_dir, settings, poll_s, env))
    if wait:
        ray.get(actor.ping.remote())
    return actor


def stop_compactor(actor: CompactorHandle, timeout_s: float = 30.0) -> None:
    import ray

    with contextlib.suppress(Exception):  # dead or stuck: killed below
        ray.get(actor.shutdown.remote(), timeout=timeout_s)
    with contextlib.suppress(Exception):  # already gone
        ray.kill(actor, no_restart=True)
