"""``POST /api/search`` and ``POST /api/stream_search`` (docs/http-api.md#search).

Both take the same body (`SearchRequest`), read as Sourcebot reads it: JSON whatever the
``Content-Type``, fields we do not know (``source``, ``isArchivedExcluded``, …) ignored, fields
we know with a wrong type or value refused (400 ``INVALID_REQUEST_BODY``, as is a body that is
not UTF-8 or not JSON). ``matches`` is capped at the server's maximum,
``DEFAULT_MAX_MATCH_COUNT`` (10000 unless the environment says otherwise): a larger request is
answered with that many and ``isSearchExhaustive: false`` when there is more. ``/api/search``
answers once with the merged result of every shard searcher. ``/api/stream_search`` answers with
Server-Sent Events, one ``data: <json>``
line each:

- ``{"type": "chunk", "stats", "files", "repositoryInfo"}`` per searcher, as its answer arrives
  (searchers are awaited individually, not all at once). The ``matches`` cap holds across chunks:
  a chunk gets at most what the earlier chunks left of the budget (ranked within the chunk), so
  the files of all chunks together never hold more than ``matches`` match ranges; a chunk after
  the budget is spent carries stats and no files.
- ``{"type": "final", "accumulatedStats", "isSearchExhaustive"}`` once every searcher answered
  (or the search deadline passed: a searcher that fails or does not answer counts in
  ``crashes``, its shards in ``shardsSkipped``, and makes the search non-exhaustive, never a
  hang; see `codesearch.runtime.fanout.Fanout`);
- ``data: [DONE]``.

Errors known before the stream starts (bad body, no credentials, a query that does not parse,
an unknown ``context:``) are ordinary JSON errors with their HTTP status, like ``/api/search``.
An error after the stream started is an event ``{"type": "error", "error": {statusCode,
errorCode, message}}`` followed by ``data: [DONE]``.

Without a cap, the files of all chunks are exactly the files of ``/api/search`` (chunk order is
arrival order; within a chunk, rank order). With a cap, which files make it may differ: the
stream commits to the first answers, ``/api/search`` ranks all answers before it cuts.

A search that finds no file carries ``hints`` (`codesearch.search.hints`) when its body asks for
them (``withHints: true``, our field; the search page does): in the answer of ``/api/search`` and
in the ``final`` event of ``/api/stream_search``. They are computed as the caller (repository
names the caller may see, re-searches filtered by the caller's permissions), only for empty
results and only when asked: an empty search of an API client that does not ask costs what its
search costs, never the extra searches a hint may need (up to five for a query with filters).

Search contexts (``context:name``): the store's search contexts, then the `contexts` given to
the app for names the store does not have.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Annotated, Any, Protocol, TypeVar, runtime_checkable

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

from codesearch import audit
from codesearch.app.search import (
    SearchRequest,
    SearchSettings,
    contexts_for,
    run_search,
    search_events,
    start_search,
    unwrap,
)
from codesearch.errors import CodesearchError, InvalidRequestBody, ServiceUnavailable
from codesearch.permissions import Identity, visible_repos
from codesearch.search.options import SearchOptions
from codesearch.search.protocol import PartialStream
from codesearch.service.deps import Caller, app_services

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


class ExplainRequest(BaseModel):
    """The body of ``POST /api/explain``."""

    model_config = ConfigDict(extra="ignore")

    query: StrictStr
    isRegexEnabled: StrictBool = False
    isCaseSensitivityEnabled: StrictBool = False


async def json_body(request: Request, model: type[M]) -> M:
    """The request body as `model`: JSON whatever the content type (as Sourcebot reads it), with
    an `InvalidRequestBody` that says what is wrong and where."""
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidRequestBody(f"the request body is not UTF-8 (byte {e.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidRequestBody(f"the request body is not JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    try:
        return model.model_validate(data)
    except ValidationError as e:
        parts = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err.get("loc", ()))
            parts.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
        raise InvalidRequestBody("; ".join(parts) or "invalid request body") from None


async def search_body(request: Request) -> SearchRequest:
    return await json_body(request, SearchRequest)


async def explain_body(request: Request) -> ExplainRequest:
    return await json_body(request, ExplainRequest)


def _sse(payload: str | dict[str, Any]) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


async def sse(
    events: AsyncGenerator[dict[str, Any], None], on_close: Callable[[], None] | None = None
) -> AsyncIterator[bytes]:
    """`events` (`search_events`) as Server-Sent Events: one ``data:`` line each, then
    ``data: [DONE]``. Closing it closes `events` (which stops the searchers) and calls `on_close`
    (`StartedSearch.abandon`), also when it is closed before `events` started."""
    try:
        async with aclosing(events) as open_events:
            async for event in open_events:
                yield _sse(event)
        yield _sse("[DONE]")
    finally:
        if on_close is not None:
            on_close()


def stream_events(
    stream: PartialStream, options: SearchOptions, identity: Identity, **kwargs: Any
) -> AsyncIterator[bytes]:
    """The SSE byte chunks of one streamed search (`search_events`' arguments); closing them
    stops the `stream`'s searchers still at work."""
    return sse(search_events(stream, options, identity, **kwargs), stream.abandon)


def _body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI request body of a route that reads its body itself (`json_body`)."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": model.model_json_schema()}}}}


async def search_settings(request: Request) -> SearchSettings:
    """The app's `SearchSettings` (a typed dependency, read through `deps.app_services`)."""
    settings = app_services(request).search
    assert settings is not None, "api.build_app gives every app its SearchSettings"
    return settings


@runtime_checkable
class Explainer(Protocol):
    """A searcher that explains queries (`runtime.searchers.SearcherPool`)."""

    def explain(self, query: str, options: SearchOptions) -> dict[str, Any]: ...


Settings = Annotated[SearchSettings, Depends(search_settings)]
Body = Annotated[SearchRequest, Depends(search_body)]
router = APIRouter()


@router.post("/api/search", response_class=JSONResponse, openapi_extra=_body_schema(SearchRequest))
async def search(request: Request, identity: Caller, body: Body, settings: Settings) -> JSONResponse:
    audit.record(
        request, identity, "search", body.query, regex=body.isRegexEnabled, caseSensitive=body.isCaseSensitivityEnabled
    )
    resp = await run_search(settings, identity, body)
    # Plain JSON of plain data: FastAPI's jsonable_encoder walk of a large response costs
    # milliseconds per request and adds nothing here.
    return JSONResponse(resp)


@router.post(
    "/api/stream_search",
    response_class=StreamingResponse,
    openapi_extra=_body_schema(SearchRequest),
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "Server-Sent Events: chunk…, final, [DONE] (or error, [DONE])",
        }
    },
)
async def stream_search(request: Request, identity: Caller, body: Body, settings: Settings) -> StreamingResponse:
    audit.record(
        request,
        identity,
        "search",
        body.query,
        regex=body.isRegexEnabled,
        caseSensitive=body.isCaseSensitivityEnabled,
        stream=True,
    )
    search = await start_search(settings, identity, body)
    return StreamingResponse(
        sse(search.events(), on_close=search.abandon),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
    )


@router.post("/api/explain", openapi_extra=_body_schema(ExplainRequest))
def explain(
    identity: Caller, body: Annotated[ExplainRequest, Depends(explain_body)], settings: Settings
) -> dict[str, Any]:
    """The parsed query, its plan (each leaf's trigram query) and, per shard, how many
    documents the posting lists leave as candidates and what that cost (nothing is verified)."""
    options = SearchOptions(
        is_regex=body.isRegexEnabled,
        case_sensitive=body.isCaseSensitivityEnabled,
        public_url=settings.public_url,
        contexts=contexts_for(settings.get_store, settings.contexts, body.query),
        visible_repos=visible_repos(identity),
    )
    searcher: object = settings.get_searcher()
    if not isinstance(searcher, Explainer):  # no searchers yet, or ones that cannot explain
        raise ServiceUnavailable("this service has no searchers that explain queries")
    try:
        return searcher.explain(body.query, options)
    except CodesearchError as e:
        raise unwrap(e) from None
