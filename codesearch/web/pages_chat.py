"""The chat pages: ask a question from the browser, watch the research, keep and share chats.

- ``GET /chat?q=&repo=``: a new chat. The question box (Enter sends, Shift+Enter is a new line),
  the model picker (filled from ``GET /api/models``), the repository-scope picker (only the
  repositories the caller may read: `ToolContext.visible_repos`, the permission rule of
  `codesearch.permissions`) and, for signed-in users, whether to share it. ``q`` and ``repo``
  prefill the form (the question box of the home and file pages, ``_ask.html``, sends them).
- ``GET /chat/<id>`` (`chat_page`, in the OpenAPI document: API clients get JSON errors from it):
  every question of the chat, the tool calls made for it, the answer and the model's token use
  (`render_chat`); its user can ask follow-ups, rename, delete and share it (`codesearch.web.chat_manage`).
  Who may read it is `codesearch.app.chat_access`: its user (an API key, else the web UI's session;
  an OAuth access token counts as no credential here: it opens ``/api/mcp`` only), the members it
  is shared with by name, anyone for a PUBLIC chat. Anything else is 404, so a private chat's
  existence does not leak; so is a chat naming a repository the viewer may not read.
- ``GET /chats``: the signed-in user's chats, newest first, and those shared with them.

``static/chat.js`` posts the question to ``POST /api/chat`` (with ``X-CSRF-Token``) and builds
each tool call and the answer from the event stream with DOM text nodes; the one piece of HTML
it inserts is ``answerHtml``, which the server renders (`codesearch.markup.code_refs.answer_html`):
Markdown without raw HTML or images, safe links, code references linked to the file at the line.
Visitors may ask only when anonymous access is on, and then see and scope only the public
repositories (the rule gives anonymous callers nothing else).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.app import chat_access
from codesearch.errors import ChatNotFound, NotAuthenticated
from codesearch.markup.code_refs import answer_html, visible_names
from codesearch.service.deps import ServicesDep, StoreDep
from codesearch.sessions import login_redirect
from codesearch.web.chat_manage import chat_manage_context, shared_chat_items, usage_text
from codesearch.web.deps import PageCaller, WebDep
from codesearch.web.templating import render

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.store.models import Chat

MAX_SCOPE_REPOS = 2000
MAX_LISTED_CHATS = 200


def _when(at: datetime | None) -> str:
    """A time as people read it (the ISO form goes into ``<time datetime>``)."""
    return at.strftime("%Y-%m-%d %H:%M UTC") if at else ""


def _root(request: Request) -> str:
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/")


def _turn(
    tc: ToolContext,
    root: str,
    names: list[str],
    question: str,
    answer: str,
    model: dict[str, Any],
    steps: list[dict[str, Any]],
    status: str,
    error: str | None,
    created: datetime | None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from codesearch.tools.ask_chat import summarize

    model = model or {}
    return {
        "question": question,
        "answer_html": answer_html(tc, answer, root, names),
        "status": status,
        "error": error or "",
        "model_name": str(model.get("displayName") or model.get("model") or ""),
        "model_provider": str(model.get("provider") or ""),
        "created": created.isoformat(timespec="seconds") if created else "",
        "when": _when(created),
        "usage": usage_text(usage),
        "steps": [
            {
                "tool": str(s.get("tool", "")),
                "arguments": json.dumps(s.get("arguments", {}), ensure_ascii=False),
                "summary": summarize(str(s.get("output", "")), bool(s.get("is_error"))),
                "output": str(s.get("output", "")),
                "is_error": bool(s.get("is_error")),
            }
            for s in steps or []
        ],
    }


def _composer(
    tc: ToolContext,
    request: Request,
    *,
    q: str = "",
    selected: list[str] | None = None,
    names: list[str] | None = None,
) -> dict[str, Any]:
    names = visible_names(tc) if names is None else names
    return {
        "repos": names[:MAX_SCOPE_REPOS],
        "more_repos": max(0, len(names) - MAX_SCOPE_REPOS),
        "selected": [n for n in selected or [] if n in set(names)],
        "q": q,
        "anonymous": tc.identity.anonymous,
    }


def render_chat(request: Request, chat: Chat, tc: ToolContext, role: str) -> HTMLResponse:
    """The page of one chat for the viewer `tc`, whose `role` in it (`codesearch.app.chat_access`)
    the caller found."""
    root = _root(request)
    names = visible_names(tc)
    turns = [
        _turn(
            tc,
            root,
            names,
            chat.question,
            chat.answer,
            chat.model,
            chat.steps,
            chat.status,
            chat.error,
            chat.created_at,
            chat.usage,
        )
    ]
    for t in tc.store.list_chat_turns(chat.id):
        turns.append(
            _turn(tc, root, names, t.question, t.answer, t.model, t.steps, t.status, t.error, t.created_at, t.usage)
        )
    mine = role == chat_access.OWNER
    context = _composer(tc, request, names=names) if mine else {}
    manage = chat_manage_context(tc, chat, role)
    return render(
        request,
        "chat.html",
        title=chat.title[:80],
        chat=chat,
        turns=turns,
        mine=mine,
        can_ask=mine,
        manage=manage,
        **context,
    )


router = APIRouter(include_in_schema=False)


@router.get("/chat")
def new_chat(
    request: Request,
    identity: PageCaller,
    web: WebDep,
    q: str = Query("", max_length=10000),
    repo: list[str] = Query([]),
) -> Response:
    if identity is None:
        return login_redirect(request)
    tc = web.make_context(identity)
    return render(
        request,
        "chat.html",
        title="Ask",
        chat=None,
        turns=[],
        mine=True,
        can_ask=True,
        **_composer(tc, request, q=q, selected=repo),
    )


@router.get("/chats")
def chats(request: Request, store: StoreDep) -> Response:
    identity = getattr(request.state, "identity", None)
    if identity is None or store is None:  # a history needs someone to belong to (and a store: sessions live in it)
        return login_redirect(request)
    rows = store.list_chats(user_id=identity.user_id, limit=MAX_LISTED_CHATS)
    items = [
        {
            "id": c.id,
            "question": c.title,
            "visibility": c.visibility,
            "status": c.status,
            "created": c.created_at.isoformat(timespec="seconds") if c.created_at else "",
            "when": _when(c.created_at),
        }
        for c in rows
    ]
    shared = shared_chat_items(store, identity.user_id, MAX_LISTED_CHATS)
    return render(request, "chats.html", title="Your chats", chats=items, shared=shared)


#: ``/chat/<id>``: in the OpenAPI document (the other pages are not), as it has always been.
page_router = APIRouter()


@page_router.get("/chat/{chat_id}", response_class=HTMLResponse)
async def chat_page(chat_id: str, request: Request, services: ServicesDep) -> HTMLResponse:
    authenticator = services.authenticator
    try:  # API keys only: `identify` never takes an OAuth access token (those are for /api/mcp)
        identity = await run_in_threadpool(authenticator.identify, request.headers)
    except NotAuthenticated:
        identity = authenticator.anonymous_identity()
    if identity.anonymous:  # no API key: the web UI's session, if any
        identity = getattr(request.state, "identity", None) or identity
    tc = services.make_context(identity)
    try:
        chat, role = await run_in_threadpool(chat_access.readable_chat, tc, chat_id)
    except ChatNotFound:
        if "text/html" not in request.headers.get("accept", ""):
            raise
        return render(
            request,
            "notfound.html",
            status_code=404,
            title="Not found",
            message="This research session does not exist, or you cannot see it.",
        )
    audit.record(request, identity, "chat.read", chat.id, role=role)
    return await run_in_threadpool(render_chat, request, chat, tc, role)
