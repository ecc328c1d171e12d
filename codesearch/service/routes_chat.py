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
    A read-only HTML page of one session (the web UI's ``chat.html``): the question, the answer
    (as text: the model's markdown is never interpreted as HTML), and the tool calls it made.
    PUBLIC sessions are readable by anyone with the link; PRIVATE ones only by the user who asked
    (an API key, else the web UI's session). Anything else is 404, so a private session's
    existence does not leak.
"""

from __future__ import annotations

import json
from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from codesearch.errors import CodesearchError
from codesearch.permissions import Identity
from codesearch.service import audit
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
    async def chat_blocking(request: Request, body: ChatRequest, identity: Identity = Depends(require_identity)) -> dict:
        tc = make_context(identity)
        choice = body.languageModel.model_dump() if body.languageModel else None

        _text, chat, spec = await run_in_threadpool(ask, tc, body.query, body.repos, choice, body.visibility)
        audit.record(request, identity, "chat.ask", body.query[:500], chat=chat.id, visibility=chat.visibility)
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
            identity = authenticator.anonymous_identity()
        if identity.anonymous:  # no API key: the web UI's session, if any
            identity = getattr(request.state, "identity", None) or identity
        tc = make_context(identity)
        try:
            chat = await run_in_threadpool(tc.store.get_chat, chat_id)
        except Exception:
            chat = None
        if chat is not None and not await run_in_threadpool(shows_only_visible_repos, tc, chat):
            chat = None
        if chat is None or (chat.visibility != "PUBLIC" and (identity.anonymous or chat.user_id != identity.user_id)):
            if "text/html" not in request.headers.get("accept", ""):
                raise ChatNotFound(f"chat {chat_id!r} not found")
            from codesearch.web.templating import render

            return render(request, "notfound.html", status_code=404, title="Not found",
                          message="This research session does not exist, or you cannot see it.")
        audit.record(request, identity, "chat.read", chat.id)
        return render_chat(request, chat)

    return r


def shows_only_visible_repos(tc, chat) -> bool:
    """Whether a research session names only repositories the viewer may read (its question,
    the tools' arguments and outputs, the answer). A shared session whose research touched a
    repository the viewer may not read is not shown to them at all, like a missing one: the
    permission rule holds for what others found, too."""
    from codesearch.permissions import visible_repos

    allowed = visible_repos(tc.identity)
    if allowed is None:
        return True
    hidden = [r.name for r in tc.store.list_repos(page=1, per_page=1_000_000)[0] if r.id not in allowed]
    if not hidden:
        return True
    text = "\n".join([chat.question or "", chat.answer or "", json.dumps(chat.steps or [], ensure_ascii=False)])
    return not any(name in text for name in hidden)


def render_chat(request: Request, chat) -> HTMLResponse:
    """The session page, in the web UI's layout. The model's answer is rendered as Markdown
    without raw HTML or images (`codesearch.web.markdown`); everything else from the session (the
    question, tool arguments and outputs) is autoescaped text."""
    from codesearch.web.markdown import render_markdown
    from codesearch.web.templating import render

    model = chat.model or {}
    steps = [{"tool": str(s.get("tool", "")), "arguments": json.dumps(s.get("arguments", {}), ensure_ascii=False),
              "output": str(s.get("output", "")), "is_error": bool(s.get("is_error"))} for s in chat.steps or []]
    resp = render(request, "chat.html", title=chat.question[:80], chat=chat, steps=steps,
                  answer_html=render_markdown(chat.answer or ""),
                  model_name=str(model.get("displayName") or model.get("model") or ""),
                  model_provider=str(model.get("provider") or ""),
                  created=chat.created_at.isoformat(timespec="seconds") if chat.created_at else "")
    resp.headers["Content-Security-Policy"] = ("default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                               "img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'")
    return resp
