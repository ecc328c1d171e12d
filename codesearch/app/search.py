"""Search as a caller: what every front door (the HTTP routes, the results page, the Python client)
calls to run a search, written once.

Both are the searcher protocol's (`codesearch.search.protocol`: stream, then collect), whatever
runs the search (the Ray pool, the in-process engine).
`start_search` checks a query and asks the searchers; its `StartedSearch.events` are
the answers as they arrive (``chunk``…, then ``final`` or ``error``: docs/http-api.md#search),
merged by `StreamMerger` under one ``matches`` budget; `run_search` is the same search answered
once. Both see only what the caller may see (`codesearch.permissions`), add the index progress for
an unrestricted caller, and compute the hints of an empty search only when asked (``withHints``).
Transports only parse, call and serialise: ``POST /api/search`` and ``/api/stream_search``
(`codesearch.service.routes.search`), the search page (`codesearch.web.pages_search`), the client's
in-process back end (`codesearch.client.backends`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from starlette.concurrency import run_in_threadpool

from codesearch.app.index_progress import IndexProgress
from codesearch.errors import CodesearchError, ServiceUnavailable
from codesearch.permissions import Identity, filter_search_response, visible_repos
from codesearch.search.duplicates import mark_copies
from codesearch.search.engine import PartialResult, folding_for, merge_partials, missing_repositories
from codesearch.search.hints import zero_result_hints
from codesearch.search.options import FLUSH_TIMER, SearchOptions, Stats
from codesearch.search.protocol import PartialStream, Streamer, collect
from codesearch.search.sorting import Sort

if TYPE_CHECKING:
    from codesearch.store import Store

log = logging.getLogger(__name__)

T = TypeVar("T")
#: How the search reads the store (None: an app without one, a bare index).
GetStore = Callable[[], "Store | None"] | None

MAX_MATCH_COUNT_ENV = "DEFAULT_MAX_MATCH_COUNT"
DEFAULT_MAX_MATCH_COUNT = 10_000


def max_match_count(environ: Mapping[str, str] | None = None) -> int:
    """The server's cap on ``matches``: ``DEFAULT_MAX_MATCH_COUNT`` (a positive integer) or 10000."""
    raw = ((os.environ if environ is None else environ).get(MAX_MATCH_COUNT_ENV) or "").strip()
    if not raw:
        return DEFAULT_MAX_MATCH_COUNT
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{MAX_MATCH_COUNT_ENV} must be a positive integer, not {raw!r}")
    return value


class SearchRequest(BaseModel):
    """The body of ``POST /api/search`` and ``/api/stream_search`` (unknown fields are ignored,
    wrong types are 400)."""

    model_config = ConfigDict(extra="ignore")

    query: StrictStr
    matches: StrictInt = Field(ge=1)
    contextLines: StrictInt = Field(0, ge=0, le=100)
    whole: StrictBool = False
    isRegexEnabled: StrictBool = False
    isCaseSensitivityEnabled: StrictBool = False
    #: codesearch's: the ``hints`` of an empty search (Sourcebot has neither the field nor hints).
    withHints: StrictBool = False
    #: codesearch's: the order of the files (docs/http-api.md#sorting).
    sort: Sort = "relevance"
    #: codesearch's: copies of a file kept do not count against ``matches`` (docs/http-api.md#duplicates).
    foldDuplicates: StrictBool = False


def names_a_context(query: str) -> bool:
    """Whether `query` may name a search context (then the store's contexts are read)."""
    return "context:" in query.lower()


def contexts_for(get_store: GetStore, fallback: Mapping[str, Iterable[str]] | None, query: str) -> dict[str, set[str]]:
    """Search contexts by name: the store's, plus `fallback` for names the store lacks; none for
    a query that names no context (they travel with the search to every searcher, and a
    configuration's contexts may list thousands of repositories)."""
    if not names_a_context(query):
        return {}
    out = {name: set(names) for name, names in (fallback or {}).items()}
    store = get_store() if get_store else None
    if store is not None:
        for ctx in store.list_search_contexts():
            out[ctx.name] = set(ctx.repo_names)
    return out


def unwrap(exc: BaseException) -> BaseException:
    """The error a Ray task raised, without Ray's wrapper (whose message holds a traceback, the
    worker's pid and address: internals that must not reach a client)."""
    for _ in range(8):
        cause = getattr(exc, "cause", None)
        if not isinstance(cause, BaseException):
            break
        exc = cause
    return exc


def _error_payload(exc: BaseException) -> dict[str, Any]:
    exc = unwrap(exc)
    if isinstance(exc, CodesearchError) and exc.status_code < 500:
        status, code, message = exc.status_code, exc.error_code, str(exc)
    else:
        status, code, message = 500, "UNEXPECTED_ERROR", "an unexpected error occurred"
    return {"type": "error", "error": {"statusCode": status, "errorCode": code, "message": message}}


def _file_key(f: dict[str, Any]) -> tuple[Any, str, tuple[str, ...]]:
    return f["repositoryId"], f["fileName"]["text"], tuple(f["branches"])


class StreamMerger:
    """Merges searcher answers one at a time, keeping the `matches` budget across chunks."""

    def __init__(self, options: SearchOptions, started_ns: int, plan_ns: int = 0):
        self.options = options
        self.started_ns = started_ns
        self.plan_ns = plan_ns
        self.acc = Stats()
        self.sent = 0  # match ranges sent so far, charged to the budget
        self.truncated = False
        self.refused = 0  # shards the searchers could not open (`PartialResult.refused`)
        self.missing: dict[int, str] = {}
        self.folding = folding_for(options)  # the copies kept free of the budget, across chunks

    def chunk(self, partial: PartialResult) -> dict[str, Any]:
        """The ``chunk`` event for one searcher's `PartialResult`. Its files are ranked, and each
        carries its ranking ``score`` and ``order`` (extra fields: the tie-break of equal scores,
        ``[searcher, shard, document]``), so that a client can keep the files of all chunks in the
        order of `/api/search` as they arrive, whichever searcher answers first."""
        scores = {_file_key(f.file): f.score for f in partial.files}
        orders = {_file_key(f.file): list(f.order) for f in partial.files}
        remaining = self.options.matches - self.sent
        t0 = time.perf_counter_ns()
        free_before = self.folding.free_matches if self.folding is not None else 0
        if remaining > 0:
            options = dataclasses.replace(self.options, matches=remaining)
            merged = merge_partials([partial], options, t0, folding=self.folding)
        else:
            merged = merge_partials([dataclasses.replace(partial, files=[], repos={})], self.options, t0)
        stats = merged["stats"]
        free = (self.folding.free_matches if self.folding is not None else 0) - free_before
        self.acc.add(partial.stats)
        self.refused += partial.refused
        self.missing.update(partial.missing)
        self.acc.totalMatchCount += partial.total_matches
        self.acc.actualMatchCount += stats["actualMatchCount"]
        self.acc.fileCount += stats["fileCount"]
        if partial.timed_out:
            self.acc.flushReason = FLUSH_TIMER
        self.sent += stats["actualMatchCount"] - free
        self.truncated |= partial.truncated or partial.total_matches > stats["actualMatchCount"]
        files = [
            {**f, "score": scores.get(_file_key(f), 0), "order": orders.get(_file_key(f), [])} for f in merged["files"]
        ]
        return {"type": "chunk", "stats": stats, "files": files, "repositoryInfo": merged["repositoryInfo"]}

    def missed(self, missed: Stats) -> None:
        """Count what searchers that gave no answer would have searched (crashes, shards)."""
        self.acc.add(missed)
        if missed.crashes:
            self.acc.flushReason = missed.flushReason

    def final(self) -> dict[str, Any]:
        acc = dataclasses.replace(self.acc)
        acc.totalMatchCount = max(acc.totalMatchCount, acc.actualMatchCount)
        if self.truncated and acc.totalMatchCount <= acc.actualMatchCount:
            acc.totalMatchCount = acc.actualMatchCount + 1  # there is more than we sent
        acc.matchTreeConstruction = self.plan_ns
        acc.duration = time.perf_counter_ns() - self.started_ns
        exhaustive = acc.totalMatchCount <= acc.actualMatchCount and acc.crashes == 0 and not self.refused
        out: dict[str, Any] = {"type": "final", "accumulatedStats": acc.to_json(), "isSearchExhaustive": exhaustive}
        if self.refused:
            out["missingRepositories"] = missing_repositories(self.missing)
        return out


#: The most repository names read to judge a ``repo:`` term of an empty search.
MAX_HINT_REPOS = 20_000


def visible_repo_names(get_store: GetStore, identity: Identity) -> list[str] | None:
    """Names of the repositories `identity` may see, by name, at most `MAX_HINT_REPOS` (None
    without a store)."""
    store = get_store() if get_store else None
    if store is None:
        return None
    allowed = visible_repos(identity)
    names = [name for repo_id, name in store.repo_names() if allowed is None or repo_id in allowed]
    return names[:MAX_HINT_REPOS]


def search_hints(
    searcher: Streamer, get_store: GetStore, query: str, options: SearchOptions, identity: Identity
) -> list[dict[str, Any]]:
    """The hints for an empty search (blocking: run it in a thread). The store is read for the
    caller's repository names only when the query has a ``repo:`` term to judge."""
    small = dataclasses.replace(options, matches=1, context_lines=0, whole=False, sort="relevance", fold_copies=False)

    def has_results(q: str) -> bool:
        try:
            resp = searcher.search(q, options=small)
        except CodesearchError:
            return False
        return bool(filter_search_response(identity, resp).get("files"))

    try:
        return zero_result_hints(
            query,
            is_regex=options.is_regex,
            case_sensitive=options.case_sensitive,
            repo_names=lambda: visible_repo_names(get_store, identity),
            has_results=has_results,
        )
    except Exception:  # noqa: BLE001 - a hint is a courtesy: never fail the search for it
        log.exception("search hints failed")
        return []


async def search_events(
    stream: PartialStream,
    options: SearchOptions,
    identity: Identity,
    plan_ns: int = 0,
    started_ns: int | None = None,
    progress: IndexProgress | None = None,
    hinter: Callable[[], Awaitable[list[dict[str, Any]]]] | None = None,
) -> AsyncGenerator[dict[str, Any], None]:
    """The events of one streamed search, as dicts: ``chunk``…, then ``final`` (or ``error``);
    see the module docstring. `stream_events` sends them as Server-Sent Events, the results page
    (`codesearch.web.results_page`) as HTML.

    `stream` is a started search (`Streamer.start`): each of its partial results becomes one
    chunk, as it arrives. Stopping the searchers when the client goes away is the reader's part
    (`sse`'s and `page_stream`'s `on_close`): a generator closed before it started runs no code
    of its own.
    """
    started_ns = time.perf_counter_ns() if started_ns is None else started_ns
    merger = StreamMerger(options, started_ns, plan_ns)
    try:
        found = False
        async for partial in stream:
            chunk = filter_search_response(identity, merger.chunk(partial))
            found = found or bool(chunk["files"])
            yield chunk
        merger.missed(stream.missed)
        final = merger.final()
        if progress is not None:
            progress.add_to(final["accumulatedStats"])
        if hinter is not None and not found:
            final["hints"] = await hinter()
        yield final
    except Exception as e:  # after the stream started: an error event, never a broken stream
        if not isinstance(e, CodesearchError):
            log.exception("stream_search failed")
        yield _error_payload(e)


def first_in_thread(get: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """`get()` for an event loop, asked once: the first call runs in a thread (attaching to the
    searchers waits for Ray), later ones return what it returned without leaving the loop."""
    got: list[T] = []

    async def resolved() -> T:
        if not got:
            value = await run_in_threadpool(get)
            if not got:
                got.append(value)
        return got[0]

    return resolved


class SearchSettings:
    """What the search routes of one app share (`api.build_app` makes it, `deps.Services.search`
    holds it). Nothing on a search's way to the searchers leaves the event loop unless it must
    wait for I/O: the store is read (in a thread) only for a query that names a search context,
    `get_searcher` is called once (in a thread), and a searcher checks and sends short queries on
    the loop (`Streamer.start`)."""

    def __init__(
        self,
        get_searcher: Callable[[], Streamer | None],
        get_store: GetStore,
        *,
        public_url: str,
        contexts: Mapping[str, Iterable[str]] | None,
        max_matches: int = DEFAULT_MAX_MATCH_COUNT,
        search_timeout_s: float | None = None,
    ):
        self.get_searcher = get_searcher
        self.get_store = get_store
        self.public_url = public_url
        self.contexts = contexts
        self.max_matches = max_matches
        self.budget = {"timeout_s": search_timeout_s} if search_timeout_s else {}
        self.searcher_now = first_in_thread(get_searcher)
        self.progress = IndexProgress(get_store or (lambda: None))

    def options_for(self, body: SearchRequest, identity: Identity, file_matches: int = 0) -> SearchOptions:
        """The engine's options for `body` as `identity`; `file_matches` caps the match ranges kept
        per file (`SearchOptions.file_matches`: the results page's; the API keeps every range)."""
        return SearchOptions(
            matches=min(body.matches, self.max_matches),
            context_lines=body.contextLines,
            whole=body.whole,
            is_regex=body.isRegexEnabled,
            case_sensitive=body.isCaseSensitivityEnabled,
            public_url=self.public_url,
            contexts=contexts_for(self.get_store, self.contexts, body.query),
            visible_repos=visible_repos(identity),
            sort=body.sort,
            fold_copies=body.foldDuplicates,
            file_matches=max(0, file_matches),
            **self.budget,
        )

    async def options_of(self, body: SearchRequest, identity: Identity, file_matches: int = 0) -> SearchOptions:
        if names_a_context(body.query):
            return await run_in_threadpool(self.options_for, body, identity, file_matches)
        return self.options_for(body, identity, file_matches)


@dataclasses.dataclass
class StartedSearch:
    """A search whose query parsed and whose searchers were asked (`start_search`)."""

    settings: SearchSettings
    identity: Identity
    query: str
    options: SearchOptions
    searcher: Streamer
    stream: PartialStream
    started_ns: int
    plan_ns: int
    #: The request asked for the ``hints`` of an empty search (``withHints``).
    with_hints: bool = False

    def abandon(self) -> None:
        """Stop the searchers still at work (the client went away); harmless once they answered."""
        self.stream.abandon()

    def events(self) -> AsyncGenerator[dict[str, Any], None]:
        """Its answers as events (`search_events`), with the hints of an empty search when the
        request asked for them. Whoever reads them calls `abandon` when done."""

        async def hinter() -> list[dict[str, Any]]:
            s, get_store = self, self.settings.get_store
            return await run_in_threadpool(search_hints, s.searcher, get_store, s.query, s.options, s.identity)

        return search_events(
            self.stream,
            self.options,
            self.identity,
            plan_ns=self.plan_ns,
            started_ns=self.started_ns,
            progress=self.settings.progress if self.options.visible_repos is None else None,
            hinter=hinter if self.with_hints else None,
        )


async def _searcher(settings: SearchSettings) -> Streamer:
    """The app's searcher; an app built without one (``get_searcher`` answers None: no index yet)
    answers 503, as the search page does."""
    searcher: Streamer | None = await settings.searcher_now()
    if searcher is None:
        raise ServiceUnavailable("this service has no searchers")
    return searcher


async def start_search(
    settings: SearchSettings, identity: Identity, body: SearchRequest, *, file_matches: int = 0
) -> StartedSearch:
    """Parse `body`'s query and ask the searchers (`Streamer.start`; their answers then arrive as
    `StartedSearch.events`). A query that does not parse or names an unknown context raises its
    `CodesearchError` here, before anything is sent: an ordinary error with its HTTP status.
    `file_matches` > 0 caps the ranges kept per file (the results page's budget of files as well
    as matches: `SearchOptions.file_matches`); the HTTP API never sets it."""
    started = time.perf_counter_ns()
    options = await settings.options_of(body, identity, file_matches)
    searcher = await _searcher(settings)
    try:
        stream = await searcher.start(body.query, options)
    except CodesearchError as e:
        raise unwrap(e) from None
    plan_ns = time.perf_counter_ns() - started
    return StartedSearch(settings, identity, body.query, options, searcher, stream, started, plan_ns, body.withHints)


async def run_search(settings: SearchSettings, identity: Identity, body: SearchRequest) -> dict[str, Any]:
    """One search as `identity`, answered once (`collect`: the merged answer of every searcher),
    filtered to what the caller may see, with the index progress (for an unrestricted caller) and
    the hints of an empty search when asked. A query that does not parse raises its `CodesearchError`."""
    options = await settings.options_of(body, identity)
    searcher = await _searcher(settings)
    try:
        resp = await collect(searcher, body.query, options)
    except CodesearchError as e:
        raise unwrap(e) from None
    resp = filter_search_response(identity, resp)
    resp["files"] = mark_copies(resp["files"])  # after the filter: a pointer names a file the caller sees
    if options.visible_repos is None:  # counts of every repository: not for a restricted caller
        settings.progress.add_to(resp["stats"])
    if body.withHints and not resp["files"]:
        resp["hints"] = await run_in_threadpool(
            search_hints, searcher, settings.get_store, body.query, options, identity
        )
    return resp
