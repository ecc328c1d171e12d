"""One search sent to the searchers of one copy of a pool: their answers as they arrive.

`Fanout` is the pool's `codesearch.search.protocol.PartialStream` (``async for``, `abandon`,
`missed`); `partials` reads the same answers blocking, for a caller in a thread. A search sent
from an event loop goes to the searchers of this node over their local links when they are
connected (`codesearch.runtime.search_link`), to the others as Ray tasks.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from codesearch.errors import CodesearchError
from codesearch.runtime import request_ids
from codesearch.runtime.search_link import LinkBroken
from codesearch.search.engine import PartialResult
from codesearch.search.options import FLUSH_MAX_SIZE, FLUSH_TIMER, SearchOptions, Stats

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from codesearch.runtime.search_link import LinkClient, Links


log = logging.getLogger(__name__)

#: Seconds past a search's deadline that a searcher's answer is still awaited (it stops at the
#: deadline by itself; this covers the trip back).
GRACE_S = 2.0


class Pool(Protocol):
    """What a `Fanout` asks of the pool it sends a search to (`searchers.SearcherPool`)."""

    #: copies of every partition: a search that lost a searcher retries on the next copy
    copies: int

    def current_version(self) -> int | None:
        """The index version every searcher of this search must answer from."""
        ...

    def next_turn(self) -> int:
        """The round-robin turn of a new search: which copy it starts on."""
        ...

    def copy(self, turn: int | None = None) -> list[ActorHandle[Any]]: ...

    def shard_count(self, partition: int, version: int | None) -> int: ...

    def searcher_died(self) -> None: ...


class _Asked(NamedTuple):
    """A searcher's task of a `Fanout`: its partition, which attempt, whether through `search_wire`,
    and the local link and request id it went by (`search_link`; None: a Ray task)."""

    partition: int
    attempt: int
    wire: bool
    link: LinkClient | None = None
    ident: int = 0


def request_kwargs(request_id: str | None) -> dict[str, str]:
    """The keyword arguments that send a request id to a searcher: `request_id`, else the current
    request's; none at all outside a request (so a searcher of an older signature still answers)."""
    request_id = request_id or request_ids.current()
    return {"request_id": request_id} if request_id else {}


class Fanout:
    """One search sent to the searchers of one copy: their answers as they arrive.

    A searcher that fails (it died, or its process did) is asked again once on another copy
    when the pool has copies. A partition that gives no answer, in the end or before the
    deadline (plus `GRACE_S`), is recorded in `missed`: one crash and its shards as
    ``shardsSkipped``; the search then is not exhaustive. Searchers stop at the deadline by
    themselves; those still running when the caller gives up are cancelled (Ray sets a flag
    they check; a link sends a cancel frame that sets one), never killed: an actor task cannot
    be force-cancelled, and the searcher is busy with other searches too. A search whose local
    link breaks before its answer came is asked again of the same searcher through Ray (Ray may
    have restarted it), not counted as a crash.
    """

    def __init__(
        self,
        pool: Pool,
        query: str,
        options: SearchOptions,
        stop_when_full: bool = False,
        request_id: str | None = None,
        links: Links | None = None,
    ):
        self.pool = pool
        self.query = query
        self.options = options
        self.stop_when_full = stop_when_full
        self._extra = request_kwargs(request_id)
        self.found = 0  # matches in the answers received so far
        self.deadline_wall = time.time() + options.timeout_s
        self.give_up = time.monotonic() + options.timeout_s + GRACE_S
        self.version = pool.current_version()  # one index generation on every searcher
        self.turn = pool.next_turn()
        self.missed = Stats()
        #: what has not answered yet: Ray tasks (`ObjectRef`) and searches sent over a link (their
        #: `asyncio.Future`, only when `links` is given, on the event loop that reads the answers)
        self.pending: dict[Any, _Asked] = {}
        self.links = links
        self._wire: bytes | None = None  # the request as `ShardSearcher.search_wire` takes it
        for p, actor in enumerate(pool.copy(self.turn)):
            self._ask(p, actor, 0)

    def _ask(self, partition: int, actor: ActorHandle[Any], attempt: int, by_link: bool = True) -> None:
        """Send the search to `actor`: over its local link when it has one connected (and
        `by_link`), else as a Ray task."""
        link = self.links.client(actor) if self.links is not None and by_link else None
        if link is not None:
            ident, fut = link.ask(self._wire_request())
            self.pending[fut] = _Asked(partition, attempt, True, link, ident)
            return
        wire = getattr(actor, "search_wire", None)  # (a searcher of an older release lacks it)
        if wire is not None:
            ref = wire.remote(self._wire_request())
        else:
            ref = actor.search.remote(self.query, self.options, self.deadline_wall, self.version, **self._extra)
        self.pending[ref] = _Asked(partition, attempt, wire is not None)

    def _wire_request(self) -> bytes:
        """The request as `ShardSearcher.search_wire` takes it, pickled once for every searcher."""
        if self._wire is None:
            request = (self.query, self.options, self.deadline_wall, self.version, self._extra.get("request_id"))
            self._wire = pickle.dumps(request, pickle.HIGHEST_PROTOCOL)
        return self._wire

    def _miss(self, partition: int) -> None:
        self.missed.crashes += 1
        self.missed.shardsSkipped += self.pool.shard_count(partition, self.version)

    def settle(self, ref: Any, answer: Callable[[], Any] | None = None) -> PartialResult | None:
        """The answer of a finished `ref` (`answer()` when given: the value of its future, which
        holds it already), or None when its searcher failed (then retried on a twin, or recorded
        as missed). A query error (`CodesearchError`) is raised."""
        import ray

        partition, attempt, wire, _link, _ident = self.pending.pop(ref)
        try:
            got = answer() if answer is not None else ray.get(ref)
            partial: PartialResult = pickle.loads(got) if wire else got
            return partial
        except CodesearchError:
            raise
        except LinkBroken as e:  # the searcher may live on (Ray restarts a process that died): ask Ray
            log.warning("searcher of partition %d: %s; asked through Ray", partition, e)
            if time.time() < self.deadline_wall:
                self._ask(partition, self.pool.copy(self.turn + attempt)[partition], attempt, by_link=False)
                return None
        except Exception as e:  # noqa: BLE001 - the searcher died mid-search
            log.error("searcher of partition %d failed: %s", partition, type(e).__name__)
            if isinstance(e, ray.exceptions.ActorDiedError):
                self.pool.searcher_died()
        if attempt + 1 < min(2, self.pool.copies) and time.time() < self.deadline_wall:
            self._ask(partition, self.pool.copy(self.turn + attempt + 1)[partition], attempt + 1)
        else:
            self._miss(partition)
        return None

    def abandon(self) -> None:
        """Stop waiting: what has not answered is missed, and its tasks are cancelled."""
        if self.pending:
            self.missed.flushReason = FLUSH_TIMER
        for asked in list(self.pending.values()):
            self._miss(asked.partition)
        self._cancel_pending()

    def _cancel_pending(self) -> None:
        import ray

        for ref, asked in list(self.pending.items()):
            if asked.link is not None:
                asked.link.cancel(asked.ident)
                continue
            with contextlib.suppress(Exception):  # already finished or gone
                ray.cancel(ref)
        self.pending.clear()

    def _arrived(self, partial: PartialResult) -> None:
        """Count an answer's matches; once the answers hold more than the match budget, stop
        the searchers still at work (as Zoekt stops at its total match count): their shards
        are skipped (``shardsSkipped``, flush reason "max size"), not crashed, and the answer,
        capped anyway, is not exhaustive. Without this a capped query costs as much as its
        slowest partition, which may have to verify every candidate it holds to find its own
        `matches` (a weak-trigram regex: 170 ms instead of 60 ms over 1 GB). Not for a query
        that names an identifier: its definitions rank first, and the partition holding them
        may be the slow one."""
        self.found += partial.total_matches
        if self.stop_when_full and self.pending and self.found > self.options.search_budget:
            self.missed.flushReason = FLUSH_MAX_SIZE
            for asked in self.pending.values():
                self.missed.shardsSkipped += self.pool.shard_count(asked.partition, self.version)
            self._cancel_pending()

    def partials(self) -> Iterator[PartialResult]:
        """Yield each searcher's `PartialResult` as it arrives, blocking (`SearcherPool.search`, the
        Python client's stream: callers in a thread, where `async for` would need an event loop of
        their own per search)."""
        import ray

        try:
            while self.pending:
                ready, _ = ray.wait(
                    list(self.pending), num_returns=1, timeout=max(0.0, self.give_up - time.monotonic())
                )
                if not ready:
                    break
                partial = self.settle(ready[0])
                if partial is not None:
                    self._arrived(partial)
                    yield partial
        finally:
            self.abandon()

    async def __aiter__(self) -> AsyncIterator[PartialResult]:
        """Each searcher's `PartialResult` as it arrives, for an event loop (the stream of
        `codesearch.search.protocol.PartialStream`)."""
        import asyncio

        waiting: dict[asyncio.Future[Any], Any] = {}  # the future awaited → its key in `pending`
        try:
            while self.pending:
                for ref, asked in self.pending.items():
                    if ref not in waiting.values():
                        linked = asked.link is not None  # a link's future is on this loop already
                        waiting[ref if linked else asyncio.ensure_future(asyncio.wrap_future(ref.future()))] = ref
                done, _ = await asyncio.wait(
                    list(waiting),
                    timeout=max(0.0, self.give_up - time.monotonic()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not done:
                    break
                for fut in done:
                    ref = waiting.pop(fut)
                    if ref not in self.pending:  # cancelled: the answers already in were enough
                        continue
                    partial = self.settle(ref, fut.result)
                    if partial is not None:
                        self._arrived(partial)
                        yield partial
        finally:
            for fut in waiting:
                fut.cancel()
            self.abandon()
