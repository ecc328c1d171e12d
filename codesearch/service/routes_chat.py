"""The REST forms of the agent tools, and the read-only page of a research session.

``POST /api/chat/blocking``
    Body ``{query, repos?, languageModel?: {provider, model}, visibility?: PRIVATE|PUBLIC}`` (the
    `ask_codebase` arguments). Runs the agent to the end and answers ``{answer, chatId, chatUrl,
    languageModel}``. Errors: 400 ``INVALID_REQUEST_BODY`` (bad body, no model configured, an
    unknown model), 404 ``REPOSITORY_NOT_FOUND`` (a repo in `repos`), 502 ``MODEL_ERROR`` (the
    model's endpoint failed; the message says how, never with its credentials).

``GET /api/models``
    The configured language models: ``[{provider, model, displayName}]`` (never tokens, headers or
    base URLs).

``GET /chat/<id>``
    A read-only HTML page of one session: the question, the answer (as text: the model's markdown
    is never interpreted as HTML), and the tool calls it made. PUBLIC sessions are readable by
    anyone with the link; PRIVATE ones only by the user who asked (an API key here; the web UI's
    sign-in later). Anything else is 404, so a private session's existence does not leak.
"""

from __future__ import annotations

import html
import json
from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from codesearch.errors import CodesearchError
from codesearch.permissions import Identity
from codesearch.service.auth import NotAuthenticated
from codesearch.tools.ask import ask, chat_url
from codesearch.tools.catalog import LanguageModelChoice
from codesearch.tools.repos import language_models


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: StrictStr = Field(min_length=1, max_length=10000)
    repos: list[StrictStr] | None = Field(None, max_length=100)
    languageModel: LanguageModelChoice | None = None  # noqa: N815
    visibility: Literal["PRIVATE", "PUBLIC"] | None = None


class ChatNotFound(CodesearchError):
    error_code = "NOT_FOUND"
    status_code = 404


def router(make_context, authenticator, *, public_url: str, require_identity) -> APIRouter:
    r = APIRouter()

    @r.post("/api/chat/blocking")
    async def chat_blocking(body: ChatRequest, identity: Identity = Depends(require_identity)) -> dict:
        tc = make_context(identity)
        choice = body.languageModel.model_dump() if body.languageModel else None

        _text, chat, spec = await run_in_threadpool(ask, tc, body.query, body.repos, choice, body.visibility)
        return {"answer": chat.answer, "chatId": chat.id, "chatUrl": chat_url(public_url, chat.id),
                "languageModel": spec.public()}

    @r.get("/api/models")
    async def models(identity: Identity = Depends(require_identity)) -> list[dict]:
        tc = make_context(identity)
        return await run_in_threadpool(language_models, tc)

    @r.get("/chat/{chat_id}", response_class=HTMLResponse)
    async def chat_page(chat_id: str, request: Request) -> HTMLResponse:
        try:
            identity = await run_in_threadpool(authenticator.identify, request.headers)
        except NotAuthenticated:
            identity = Identity(None)
        tc = make_context(identity)
        try:
            chat = await run_in_threadpool(tc.store.get_chat, chat_id)
        except Exception:
            chat = None
        if chat is None or (chat.visibility != "PUBLIC" and (identity.anonymous or chat.user_id != identity.user_id)):
            raise ChatNotFound(f"chat {chat_id!r} not found")
        return HTMLResponse(render_chat(chat))

    return r


def render_chat(chat) -> str:
    e = html.escape
    steps = "".join(
        f"<li><details><summary><code>{e(s.get('tool', ''))}</code> {e(json.dumps(s.get('arguments', {}), ensure_ascii=False))}"
        f"{' — error' if s.get('is_error') else ''}</summary><pre>{e(str(s.get('output', '')))}</pre></details></li>"
        for s in chat.steps or [])
    model = chat.model or {}
    status = "" if chat.status == "COMPLETED" else f"<p class=error>This session failed: {e(chat.error or '')}</p>"
    return f"""<!doctype html>
<html lang=en><head><meta charset=utf-8><meta name=viewport content="width=device-width, initial-scale=1">
<title>{e(chat.question[:80])} · codesearch</title>
<style>
:root {{ color-scheme: light dark; font-family: system-ui, sans-serif; }}
body {{ max-width: 60rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }}
pre {{ white-space: pre-wrap; word-break: break-word; background: color-mix(in srgb, canvas 92%, canvasText);
      padding: .75rem; border-radius: 6px; }}
.meta {{ opacity: .7; font-size: .9em; }} .error {{ color: #c33; }}
</style></head>
<body>
<p class=meta><a href="/">codesearch</a> · research session · {e(chat.visibility.lower())}</p>
<h1>{e(chat.question)}</h1>
<p class=meta>Model: {e(str(model.get('displayName') or model.get('model') or ''))} ({e(str(model.get('provider') or ''))})
 · {e(chat.created_at.isoformat(timespec='seconds') if chat.created_at else '')}</p>
{status}
<h2>Answer</h2>
<pre class=answer>{e(chat.answer)}</pre>
<h2>Research steps ({len(chat.steps or [])})</h2>
<ol>{steps}</ol>
</body></html>
"""
