"""``POST /api/search`` and ``POST /api/stream_search`` (SPEC §5).

Both take the same body (`SearchRequest`). ``/api/search`` answers once with the merged result of
every shard searcher. ``/api/stream_search`` answers with Server-Sent Events, one ``data: <json>``
line each:

- ``{"type": "chunk", "stats", "files", "repositoryInfo"}`` per searcher, as its answer arrives
  (searchers are awaited individually, not all at once). The ``matches`` cap holds across chunks:
  a chunk gets at most what the earlier chunks left of the budget (ranked within the chunk), so
  the files of all chunks together never hold more than ``matches`` match ranges; a chunk after
  the budget is spent carries stats and no files.
- ``{"type": "final", "accumulatedStats", "isSearchExhaustive"}`` once every searcher answered
  (or the search deadline passed: a searcher that fails or does not answer counts in
  ``crashes`` and makes the search non-exhaustive, never a hang);
- ``data: [DONE]``.

Errors known before the stream starts (bad body, no credentials, a query that does not parse,
an unknown ``context:``) are ordinary JSON errors with their HTTP status, like ``/api/search``.
An error after the stream started is an event ``{"type": "error", "error": {statusCode,
errorCode, message}}`` followed by ``data: [DONE]``.

Without a cap, the files of all chunks are exactly the files of ``/api/search`` (chunk order is
arrival order; within a chunk, rank order). With a cap, which files make it may differ: the
stream commits to the first answers, ``/api/search`` ranks all answers before it cuts.

Search contexts (``context:name``): the store's search contexts, then the `contexts` given to
the app for names the store does not have.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from starlette.concurrency import run_in_threadpool

from codesearch.errors import CodesearchError
from codesearch.runtime.searchers import published_version
from codesearch.search.engine import make_plan, merge_partials
from codesearch.search.options import FLUSH_TIMER, SearchOptions, Stats
from codesearch.service.auth import Identity, filter_search_response

log = logging.getLogger(__name__)

_GRACE_S = 5.0  # how long past the search deadline a searcher's answer is still awaited


class SearchRequest(BaseModel):
    """The body of ``POST /api/search`` and ``/api/stream_search`` (unknown fields and wrong types are 400)."""

    model_config = ConfigDict(extra="forbid")

    query: StrictStr
    matches: StrictInt = Field(ge=1, le=1_000_000)
    contextLines: StrictInt = Field(0, ge=0, le=100)
    whole: StrictBool = False
    isRegexEnabled: StrictBool = False
    isCaseSensitivityEnabled: StrictBool = False
    #: Who sends the request (Sourcebot's clients send e.g. "sourcebot-web-client", "mcp"); ignored.
    source: StrictStr | None = None


class ExplainRequest(BaseModel):
    """The body of ``POST /api/explain``."""

    model_config = ConfigDict(extra="forbid")

    query: StrictStr
    isRegexEnabled: StrictBool = False
    isCaseSensitivityEnabled: StrictBool = False


def _contexts(get_store, fallback: dict | None, query: str) -> dict[str, set[str]]:
    """Search contexts by name: the store's, plus `fallback` for names the store lacks."""
    out = {name: set(names) for name, names in (fallback or {}).items()}
    if "context:" not in query.lower():
        return out
    store = get_store() if get_store else None
    if store is not None:
        for ctx in store.list_search_contexts():
            out[ctx.name] = set(ctx.repo_names)
    return out


def _sse(payload) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def unwrap(exc: BaseException) -> BaseException:
    """The error a Ray task raised, without Ray's wrapper (whose message holds a traceback, the
    worker's pid and address: internals that must not reach a client)."""
    seen = 0
    while getattr(exc, "cause", None) is not None and isinstance(exc.cause, BaseException) and seen < 8:
        exc, seen = exc.cause, seen + 1
    return exc


def _error_payload(exc: BaseException) -> dict:
    exc = unwrap(exc)
    if isinstance(exc, CodesearchError) and exc.status_code < 500:
        status, code, message = exc.status_code, exc.error_code, str(exc)
    else:
        status, code, message = 500, "UNEXPECTED_ERROR", "an unexpected error occurred"
    return {"type": "error", "error": {"statusCode": status, "errorCode": code, "message": message}}


class StreamMerger:
    """Merges searcher answers one at a time, keeping the `matches` budget across chunks."""

    def __init__(self, options: SearchOptions, started_ns: int, plan_ns: int = 0):
        self.options = options
        self.started_ns = started_ns
        self.plan_ns = plan_ns
        self.acc = Stats()
        self.sent = 0  # match ranges sent so far
        self.truncated = False

    def chunk(self, partial) -> dict:
        """The ``chunk`` event for one searcher's `PartialResult`."""
        remaining = self.options.matches - self.sent
        t0 = time.perf_counter_ns()
        if remaining > 0:
            merged = merge_partials([partial], dataclasses.replace(self.options, matches=remaining), t0)
        else:
            merged = merge_partials([dataclasses.replace(partial, files=[], repos={})], self.options, t0)
        stats = merged["stats"]
        self.acc.add(partial.stats)
        self.acc.totalMatchCount += partial.total_matches
        self.acc.actualMatchCount += stats["actualMatchCount"]
        self.acc.fileCount += stats["fileCount"]
        if partial.timed_out:
            self.acc.flushReason = FLUSH_TIMER
        self.sent += stats["actualMatchCount"]
        self.truncated |= partial.truncated or partial.total_matches > stats["actualMatchCount"]
        return {"type": "chunk", "stats": stats, "files": merged["files"], "repositoryInfo": merged["repositoryInfo"]}

    def crashed(self, n: int = 1) -> None:
        self.acc.crashes += n

    def final(self) -> dict:
        acc = dataclasses.replace(self.acc)
        acc.totalMatchCount = max(acc.totalMatchCount, acc.actualMatchCount)
        if self.truncated and acc.totalMatchCount <= acc.actualMatchCount:
            acc.totalMatchCount = acc.actualMatchCount + 1  # there is more than we sent
        acc.matchTreeConstruction = self.plan_ns
        acc.duration = time.perf_counter_ns() - self.started_ns
        exhaustive = acc.totalMatchCount <= acc.actualMatchCount and acc.crashes == 0
        return {"type": "final", "accumulatedStats": acc.to_json(), "isSearchExhaustive": exhaustive}


async def stream_events(searcher, query: str, options: SearchOptions, identity: Identity, plan_ns: int = 0,
                        started_ns: int | None = None):
    """The SSE byte chunks of one streamed search (see the module docstring).

    `searcher` is a `SearcherPool` (the actors of one copy are awaited one by one), anything
    else with `actors`, or any object with ``search(query, options) -> dict`` (answered as a
    single chunk).
    """
    started_ns = time.perf_counter_ns() if started_ns is None else started_ns
    merger = StreamMerger(options, started_ns, plan_ns)
    actors = list(searcher.copy() if hasattr(searcher, "copy") else getattr(searcher, "actors", None) or [])
    pending: set = set()
    refs: dict = {}
    try:
        if not actors:
            resp = await run_in_threadpool(searcher.search, query, options)
            resp = filter_search_response(identity, resp)
            yield _sse({"type": "chunk", "stats": resp["stats"], "files": resp["files"],
                        "repositoryInfo": resp["repositoryInfo"]})
            final = {"type": "final", "accumulatedStats": resp["stats"], "isSearchExhaustive": resp["isSearchExhaustive"]}
            yield _sse(final)
        else:
            deadline_wall = time.time() + options.timeout_s
            version = published_version(getattr(searcher, "version_key", None))  # one index generation everywhere
            for actor in actors:
                ref = actor.search.remote(query, options, deadline_wall, version)
                fut = asyncio.ensure_future(asyncio.wrap_future(ref.future()))
                refs[fut] = ref
                pending.add(fut)
            give_up = time.monotonic() + options.timeout_s + _GRACE_S
            while pending:
                done, pending = await asyncio.wait(pending, timeout=max(0.0, give_up - time.monotonic()),
                                                   return_when=asyncio.FIRST_COMPLETED)
                if not done:  # deadline: the rest count as crashed
                    break
                for fut in done:
                    try:
                        partial = fut.result()
                    except CodesearchError:
                        raise
                    except Exception as e:  # a searcher died mid-search: count it, keep the others
                        log.error("searcher failed: %s", type(e).__name__)
                        merger.crashed()
                        continue
                    chunk = merger.chunk(partial)
                    chunk = filter_search_response(identity, chunk)
                    yield _sse(chunk)
            if pending:
                merger.crashed(len(pending))
            yield _sse(merger.final())
    except Exception as e:  # after the stream started: an error event, never a broken stream
        if not isinstance(e, CodesearchError):
            log.exception("stream_search failed")
        yield _sse(_error_payload(e))
    finally:
        _cancel(pending, refs)
    yield _sse("[DONE]")


def _cancel(pending, refs) -> None:
    if not pending:
        return
    import ray

    for fut in pending:
        fut.cancel()
        try:
            ray.cancel(refs[fut], force=True)
        except Exception:
            pass


def router(get_searcher, get_store, *, public_url: str, contexts: dict | None, require_identity) -> APIRouter:
    r = APIRouter()

    def options_for(body: SearchRequest) -> SearchOptions:
        return SearchOptions(matches=body.matches, context_lines=body.contextLines, whole=body.whole,
                             is_regex=body.isRegexEnabled, case_sensitive=body.isCaseSensitivityEnabled,
                             public_url=public_url, contexts=_contexts(get_store, contexts, body.query))

    @r.post("/api/search", response_class=JSONResponse)
    def search(body: SearchRequest, identity: Identity = Depends(require_identity)) -> JSONResponse:
        try:
            resp = get_searcher().search(body.query, options_for(body))
        except CodesearchError as e:
            raise unwrap(e) from None
        # Plain JSON of plain data: FastAPI's jsonable_encoder walk of a large response costs
        # milliseconds per request and adds nothing here.
        return JSONResponse(filter_search_response(identity, resp))

    @r.post("/api/stream_search", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "Server-Sent Events: chunk…, final, [DONE] (or error, [DONE])"}})
    async def stream_search(body: SearchRequest, identity: Identity = Depends(require_identity)):
        started = time.perf_counter_ns()
        options = await run_in_threadpool(options_for, body)
        t0 = time.perf_counter_ns()
        make_plan(body.query, options)  # parse errors and unknown contexts: a JSON error, before the stream
        plan_ns = time.perf_counter_ns() - t0
        searcher = await run_in_threadpool(get_searcher)
        return StreamingResponse(stream_events(searcher, body.query, options, identity, plan_ns, started),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"})

    @r.post("/api/explain")
    def explain(body: ExplainRequest, identity: Identity = Depends(require_identity)) -> dict:
        """The parsed query, its plan (each leaf's trigram query) and, per shard, how many
        documents the posting lists leave as candidates and what that cost (nothing is verified)."""
        options = SearchOptions(is_regex=body.isRegexEnabled, case_sensitive=body.isCaseSensitivityEnabled,
                                public_url=public_url, contexts=_contexts(get_store, contexts, body.query))
        try:
            return get_searcher().explain(body.query, options)
        except CodesearchError as e:
            raise unwrap(e) from None

    return r
