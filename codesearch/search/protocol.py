"""The searcher protocol, as Zoekt's Streamer: a search is "stream, then collect".

`Streamer.start` checks the query (a `CodesearchError` for a query that does not parse or names
an unknown context, raised before any shard is searched) and starts the search; the
`PartialStream` it returns yields the searchers' `PartialResult`s as they arrive, and `abandon`
stops what still runs (the client went away). `collect` is the merged answer of
``POST /api/search``, built on the stream: there is one way a search runs, whoever asks.

The in-process engine (`codesearch.search.engine.Searcher`: one partial, the whole index) and the
Ray pool (`codesearch.runtime.searchers.SearcherPool`: one partial per searcher) implement it;
the callers (`codesearch.app.search`) know nothing else. `Streamer.search` is the same collect for
a caller that blocks (a worker thread: the MCP tools, the Python client, the hints of an empty
search), where an event loop per search would cost more than the search of a short query.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from codesearch.search.engine import PartialResult, merge_partials

if TYPE_CHECKING:
    from codesearch.search.engine import LocalStream, Searcher
from codesearch.search.options import SearchOptions, Stats


class PartialStream(Protocol):
    """One search under way: its partial results as they arrive (``async for``), once."""

    #: What searchers that gave no answer would have searched (crashes, shards skipped), complete
    #: once the stream is exhausted or abandoned.
    missed: Stats

    def __aiter__(self) -> AsyncIterator[PartialResult]: ...

    def abandon(self) -> None:
        """Stop the searchers still at work; harmless once they answered."""


class Streamer(Protocol):
    """What runs searches: the in-process engine or the Ray pool of searchers."""

    async def start(self, query: str, options: SearchOptions, request_id: str | None = None) -> PartialStream:
        """Check `query` (raising its `CodesearchError`) and start searching; never waits for a search."""
        ...

    def search(self, query: str, *, options: SearchOptions) -> dict[str, Any]:
        """`collect` for a blocking caller (a worker thread)."""
        ...


async def collect(
    searcher: Streamer, query: str, options: SearchOptions, request_id: str | None = None
) -> dict[str, Any]:
    """The ``POST /api/search`` answer of one search: `start`, then every partial merged."""
    started = time.perf_counter_ns()
    stream = await searcher.start(query, options, request_id)
    plan_ns = time.perf_counter_ns() - started
    partials = [p async for p in stream]
    return merge_partials(partials, options, started, plan_ns, missed=stream.missed)


if TYPE_CHECKING:  # mypy holds the in-process engine to the protocol (the pool: `runtime.searchers`)

    def _engine_is_a_streamer(searcher: Searcher, stream: LocalStream) -> tuple[Streamer, PartialStream]:
        return searcher, stream
