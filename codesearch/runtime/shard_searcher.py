"""The shard searcher: a Ray actor that owns a balanced set of shards and searches them locally.

A search is one hop from the caller: every searcher plans the query itself (plans hold
compiled regexes, which do not travel between processes), evaluates its shards, ranks, caps
and presents its files (`codesearch.search.engine.partial_result`), and returns plain data.
The caller merges (`codesearch.runtime.fanout`, `merge_partials`). Posting lists and bitmaps
never leave a searcher. `ShardSearcher` is a plain class (testable without Ray); the pool
(`codesearch.runtime.searchers.SearcherPool`) makes actors of it.

Observability: a searcher records its query time, candidates, verified bytes and shards
(`codesearch.runtime.metrics`); the pool sends each search the id of the HTTP request it serves
(`request_ids`), which the searcher names when it logs a slow or failed search.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from codesearch.errors import CodesearchError, IndexFormatError
from codesearch.index.shard import Shard
from codesearch.runtime import NAMESPACE, metrics
from codesearch.runtime.published import KEEP_VERSIONS, published_shard_lists, shard_spec
from codesearch.runtime.registry import ShardSpec
from codesearch.search.engine import PartialResult, Refusals, make_plan, partial_result, search_shards
from codesearch.search.options import SearchOptions
from codesearch.search.visibility import visible_shards

if TYPE_CHECKING:
    from codesearch.runtime.search_link import LinkServer
    from codesearch.runtime.shard_copy import ShardCopies, ShardSourceHandle

log = logging.getLogger(__name__)


#: Searches one searcher runs at once (threads of the actor). A search holds the GIL only in
#: short stretches (RE2, the regex fallback and numpy release it), so a slow query takes its
#: share of the CPU instead of making every other query wait for it.
SEARCH_CONCURRENCY = 8
#: A searcher logs a search that took longer than this (seconds), with its request id.
SLOW_SEARCH_S = 2.0
#: Seconds between two reads of the published shard lists by a searcher asked for a version it
#: does not hold (`ShardSearcher._catch_up`).
CATCH_UP_EVERY_S = 1.0


class ShardSearcher:
    """Owns some shard files (memory-mapped) and answers searches over them.

    Shard lists are versioned: `set_shards(paths, version)` adds a list next to the previous
    ones (the last `KEEP_VERSIONS` are kept) and `search(..., version=v)` uses list `v`. The
    pool publishes a version only after every searcher holds it, so one search sees the same
    generation of the index on every searcher, even while a refresh is under way.

    Searches run concurrently (the actor is threaded, `SEARCH_CONCURRENCY`); shards keep no
    per-query state. A searcher of a named pool (`pool_key`) that Ray restarts after a crash
    starts from the shard lists the pool published (`publish_shard_lists`), not from the
    arguments it was first created with, so it serves its partition of the current index at once.
    """

    def __init__(
        self,
        shard_paths: Sequence[ShardSpec],
        origin: int = 0,
        pool_key: str | None = None,
        copy_to: str | None = None,
        source: str | None = None,
    ):
        self.origin = origin
        self.sets: dict[int, list[Shard]] = {}
        #: per list version: the shards of the list this searcher could not open (`Refusals`)
        self.refused: dict[int, Refusals] = {}
        self._refusals = Refusals()  # of the last `_open`
        #: Without the builder's data directory: verified copies fetched from the named
        #: `shard_copy.ShardSource` (see `SearcherPool.create`).
        self.copies = _copies(copy_to, source) if copy_to else None
        self.pool_key = pool_key
        self._caught_up_at = float("-inf")
        self._catching_up = threading.Lock()
        self._link: LinkServer | Literal[False] | None = None  # `link_address`: not yet, none, or this
        self._link_lock = threading.Lock()
        self._catch_up()
        if not self.sets:
            self.sets[0] = self._open(shard_paths, {})
            self.refused[0] = self._refusals
            self.current = 0
            self._report_shards()

    @property
    def shards(self) -> list[Shard]:
        return self.sets[self.current]

    def _open(self, specs: Sequence[ShardSpec], reuse: dict[str, Shard]) -> list[Shard]:
        """Open the shards of `specs` (see `shard_files`), re-using those open already. A shard
        that cannot be opened (its checksum refused, truncated, missing, not fetched) is left out
        and recorded in `_refusals`: the answers of this list say what they missed."""
        out, refusals = [], Refusals()
        for spec in specs:
            origin_path, dead = shard_spec(spec)
            path = origin_path
            try:
                if self.copies is not None:  # a copy open and verified already needs no word from the source
                    path = self.copies.verified(path) or self.copies.local(path)
                # an open shard whose file is gone from under it (moved aside as refused) is not
                # reused: it is opened again, and refused, so that answers say what they miss
                if path in reuse and (self.copies is not None or os.path.exists(path)):
                    out.append(reuse[path].with_dead(dead))
                    continue
                out.append(Shard(path).with_dead(dead))
            except (IndexFormatError, OSError) as e:
                refusals.add(origin_path, str(e))
            except Exception as e:  # noqa: BLE001 - the shard source is unreachable (a Ray error): serve the rest
                refusals.add(
                    origin_path,
                    f"{os.path.basename(path)}: not fetched from where the index is built ({type(e).__name__})",
                )
        self._refusals = refusals
        return out

    @property
    def errors(self) -> list[str]:
        """Why each shard of the newest list that could not be opened was refused."""
        return self.refused[self.current].errors if self.refused.get(self.current) else []

    def held(self) -> list[str]:
        """The files of the shards this searcher holds (every kept version)."""
        return sorted({s.path for shards in self.sets.values() for s in shards})

    def _shards_of(self, version: int | None) -> list[Shard]:
        """The shards of list `version` (default: the newest). A version this searcher never got
        (it was restarted while the registry was unreachable, or a `set_shards` was lost with its
        process) is looked up in the pool's published lists first (`_catch_up`), so a searcher
        never answers a current search from the lists it was first created with."""
        if version is not None and version not in self.sets and self._catch_up():
            log.warning("searcher %d: caught up with published index version %d", self.origin, version)
        return self.sets.get(version, self.shards) if version is not None else self.shards

    def _refusals_of(self, version: int | None) -> Refusals:
        """The refused shards of list `version` (as `_shards_of` picks it)."""
        chosen = version if version is not None and version in self.sets else self.current
        return self.refused.get(chosen) or Refusals()

    def _catch_up(self) -> bool:
        """Load the shard lists of this searcher's partition that its named pool published
        (`publish_shard_lists`) and it does not hold yet, at most every `CATCH_UP_EVERY_S`.
        What a searcher Ray restarted does first. A registry that cannot be read is logged, not
        raised: a constructor that raises ends the actor for good (Ray restarts a process that
        died, not a constructor that failed), and the next search that names an unknown
        version tries again. True when a list was added."""
        if not self.pool_key or time.monotonic() - self._caught_up_at < CATCH_UP_EVERY_S:
            return False
        if not self._catching_up.acquire(blocking=False):  # another search is at it: answer as we are
            return False
        try:
            self._caught_up_at = time.monotonic()
            try:
                published = published_shard_lists(self.pool_key)
            except Exception as e:  # noqa: BLE001 - the registry is restarting or busy: try again later
                log.warning("searcher %d: published shard lists not read: %s", self.origin, e)
                return False
            added = False
            for version, partitions in sorted(published.items()):
                if version not in self.sets:
                    self.set_shards(partitions[self.origin] if self.origin < len(partitions) else [], version)
                    added = True
            return added
        finally:
            self._catching_up.release()

    def search(
        self,
        query: str,
        options: SearchOptions,
        deadline_wall: float,
        version: int | None = None,
        request_id: str | None = None,
    ) -> PartialResult:
        """Search the owned shards of `version` (default: the newest); `deadline_wall` is a
        `time.time()` instant (clocks of other processes and nodes agree on wall time, not on
        `time.monotonic()`). Stops early when the caller cancels it: the Ray task (`ray.cancel`),
        or the search sent over the local link (`_cancel_check`).
        `request_id` names the HTTP request the search is for in this searcher's logs (a slow
        search, an error); the search's time and work are recorded in `metrics`."""
        started = time.perf_counter()
        try:
            deadline = time.monotonic() + max(0.0, deadline_wall - time.time())
            plan = make_plan(query, options)
            out = partial_result(
                search_shards(self._shards_of(version), plan, options, deadline, _cancel_check()),
                options,
                self.origin,
            )
            self._refusals_of(version).attach(out, options)
        except Exception as e:
            self._log_failure("search", query, request_id, e)
            raise
        seconds = time.perf_counter() - started
        metrics.searcher_query(self.origin, seconds, out.stats)
        if seconds > SLOW_SEARCH_S:
            log.warning(
                "searcher %d: slow search (%.2fs, request %s): %.200r", self.origin, seconds, request_id or "-", query
            )
        return out

    def search_wire(self, request: bytes) -> bytes:
        """`search` as the pool asks for it (`Fanout`): its arguments ``(query, options,
        deadline_wall, version, request_id)`` and its `PartialResult` pickled, one bytes object
        each way. Ray ships bytes as they are, where it pickles every argument and the answer on
        its own, at a cost that showed (0.3-0.5 ms of a search with two searchers, on 2 cores);
        the request is pickled once for every searcher of the search."""
        return self._answer_wire(request, None)

    def _answer_wire(self, request: bytes, cancelled: Callable[[], bool] | None) -> bytes:
        """`search_wire`; a search sent over the local link passes its `cancelled` flag, which
        `search` finds through `_cancel_check` (a thread-local: `search` keeps its signature,
        which subclasses override)."""
        query, options, deadline_wall, version, request_id = pickle.loads(request)
        _LINK.cancelled = cancelled
        try:
            out = self.search(query, options, deadline_wall, version, request_id)
        finally:
            _LINK.cancelled = None
        return pickle.dumps(out, pickle.HIGHEST_PROTOCOL)

    def link_address(self) -> tuple[str, str] | None:
        """Where this searcher answers `search_wire` requests over a Unix socket
        (`search_link.LinkAddress`: its node and socket path), started on the first call; None
        when it offers no link. A caller on the same node sends its searches there instead of as
        Ray tasks (`search_link`: a Ray call costs ~1 ms more of each side's CPU)."""
        from codesearch.runtime.search_link import LinkAddress, serve_link

        with self._link_lock:
            if self._link is None:
                self._link = serve_link(self._answer_wire, SEARCH_CONCURRENCY) or False
                if self._link:
                    atexit.register(self._link.close)
            if not self._link:
                return None
            import ray

            return LinkAddress(ray.get_runtime_context().get_node_id(), self._link.path)

    def explain(
        self, query: str, options: SearchOptions, version: int | None = None, request_id: str | None = None
    ) -> dict[str, Any]:
        """`codesearch.search.explain.explain` over the owned shards of `version`."""
        from codesearch.search.explain import explain

        try:
            out = explain(make_plan(query, options), visible_shards(self._shards_of(version), options.visible_repos))
        except Exception as e:
            self._log_failure("explain", query, request_id, e)
            raise
        out["searcher"] = self.origin
        return out

    def _log_failure(self, what: str, query: str, request_id: str | None, e: Exception) -> None:
        """A query the caller got wrong is its error to read (a warning here); anything else is ours."""
        if isinstance(e, CodesearchError):
            log.warning("searcher %d: %s failed (request %s): %s", self.origin, what, request_id or "-", e)
        else:
            log.error(
                "searcher %d: %s of %.200r failed (request %s)", self.origin, what, query, request_id or "-", exc_info=e
            )

    def set_shards(
        self, shard_paths: Sequence[ShardSpec], version: int | None = None, origin: int | None = None
    ) -> int:
        """Own `shard_paths` as list `version` (after an index change), as partition `origin`
        when given. Shards already open are kept; a search that started before finishes on the
        list it started with (unlinked files stay readable while mapped)."""
        if origin is not None:
            self.origin = origin
        current = getattr(self, "current", None)
        version = version if version is not None else (current or 0) + 1
        reuse = {s.path: s for shards in self.sets.values() for s in shards}
        self.sets[version] = self._open(shard_paths, reuse)
        self.refused[version] = self._refusals
        self.current = version if current is None else max(current, version)
        for old in sorted(self.sets)[:-KEEP_VERSIONS]:
            del self.sets[old]
            self.refused.pop(old, None)
        if self.copies is not None:  # the copies no kept list names any more
            self.copies.prune(set(self.held()))
        self._report_shards()
        return len(self.sets[version])

    def _report_shards(self) -> None:
        """The shard count and bytes of the newest list, as gauges (`metrics`)."""
        nbytes = 0
        for shard in self.shards:
            with contextlib.suppress(OSError):  # deleted since it was mapped: it still serves, its size is unknown
                nbytes += os.path.getsize(shard.path)
        metrics.searcher_shards(self.origin, len(self.shards), nbytes)

    def shard_count(self) -> int:
        return len(self.shards)

    def ping(self) -> bool:
        return True


def _copies(copy_to: str, source: str | None) -> ShardCopies:
    """The `ShardCopies` of a searcher that keeps its shards in `copy_to`, fetched from the named
    shard source actor (looked up when first needed: it may start after the searcher)."""
    from codesearch.runtime.shard_copy import ShardCopies

    if not source:
        raise ValueError("a searcher that copies its shards needs the name of their source")

    def lookup() -> ShardSourceHandle:
        import ray

        return cast("ShardSourceHandle", ray.get_actor(source, namespace=NAMESPACE))

    return ShardCopies(copy_to, lookup)


#: How often a search asks Ray whether its task was cancelled, at most (seconds).
CANCEL_POLL_S = 0.002


class _Throttled:
    """`ask()` at most once every `every_s` seconds; False in between, True for good once it
    said so. Ray's ``is_canceled`` costs a few microseconds, and the engine checks after every
    shard and every 64 candidates: asked each time it was 8 % of a searcher's work on an
    everyday mix (issue 25); a cancellation is now noticed within 2 ms more."""

    __slots__ = ("ask", "clock", "every_s", "next_at", "said")

    def __init__(
        self, ask: Callable[[], bool], every_s: float = CANCEL_POLL_S, clock: Callable[[], float] = time.monotonic
    ):
        self.ask, self.every_s, self.clock = ask, every_s, clock
        self.next_at = 0.0
        self.said = False

    def __call__(self) -> bool:
        if self.said:
            return True
        now = self.clock()
        if now < self.next_at:
            return False
        self.next_at = now + self.every_s
        self.said = bool(self.ask())
        return self.said


#: Per thread: the cancel flag of the search this thread runs for the local link (`_answer_wire`).
_LINK = threading.local()


def _cancel_check() -> Callable[[], bool] | None:
    """A function telling whether the running search was cancelled: its local link's flag, or
    whether its Ray task was cancelled (None outside Ray)."""
    linked: Callable[[], bool] | None = getattr(_LINK, "cancelled", None)
    if linked is not None:
        return linked
    try:
        import ray

        if not ray.is_initialized():
            return None
        ctx = ray.get_runtime_context()
        ctx.is_canceled()  # raises outside a task (a driver, a test calling the class directly)
    except Exception:  # noqa: BLE001 - no task context: nothing can cancel us
        return None
    return _Throttled(ctx.is_canceled)
