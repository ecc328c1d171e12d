"""``POST /api/search_assist``: a description of what to look for, turned into a query.

Sourcebot 4.13's "AI Search Assist" (its ``translateSearchQuery`` action: ``{prompt}`` in,
``{query}`` out) as an HTTP route: body ``{prompt, languageModel?: {provider, model}}``; the
answer ``{query, isValid, error, model}``: the query the configured model wrote, whether our
parser accepts it, the parser's message when not (the page shows the query for the user to fix),
and the model used (`codesearch.app.search_assist`). Errors: 400 ``INVALID_REQUEST_BODY`` (an
empty or too long prompt, no model configured, an unknown model), 502 ``MODEL_ERROR`` (the
model failed; the message says how). Anyone who may search may ask; each request is audited
(``search.assist``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.app.search_assist import MAX_PROMPT, translate
from codesearch.service.deps import Caller, StoreDep
from codesearch.tools.catalog import LanguageModelChoice

router = APIRouter()


class SearchAssistRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: StrictStr = Field(min_length=1, max_length=MAX_PROMPT)
    languageModel: LanguageModelChoice | None = None  # noqa: N815


@router.post("/api/search_assist")
async def search_assist(
    request: Request, body: SearchAssistRequest, identity: Caller, store: StoreDep
) -> dict[str, Any]:
    choice = body.languageModel.model_dump() if body.languageModel else None
    result = await run_in_threadpool(translate, store, body.prompt, choice)
    audit.record(request, identity, "search.assist", body.prompt[:500], valid=result.valid)
    return result.json()
