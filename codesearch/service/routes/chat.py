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

``POST /api/chat``
    Sourcebot's streaming chat route: body ``{id?, messages: [{role, parts: [{type: "text",
    text}]}], selectedSearchScopes?: [{type: "repo" | "reposet", value}], languageModel?:
    {provider, model}, visibility?}``. The question is the text of the last message (a ``user``
    one); ``id`` names one of the caller's chats to ask a follow-up in (its earlier questions and
    answers are the context; the stored ones, not what the client sends). The answer is a stream
    of Server-Sent Events (`codesearch.service.routes.chat_stream`): each tool call as it happens, the
    answer, the stored chat. Every mistake in the request is a JSON error before the stream
    starts: 400 ``INVALID_REQUEST_BODY``, 404 ``REPOSITORY_NOT_FOUND`` (a hidden repository
    answers as an unknown one) or ``NOT_FOUND`` (a chat that is not the caller's).

``PATCH /api/chat/<id>``
    ``{visibility: PRIVATE | PUBLIC}``: share a chat or stop sharing it (its user only; 404 for
    anyone else). Renaming, deleting, duplicating and sharing with named members are
    `codesearch.service.routes.chat_manage`'s.

The HTML page of a session, ``GET /chat/<id>``, is `codesearch.web.pages_chat`'s; an answer is
rendered as HTML (``answerHtml``) by `codesearch.markup.code_refs.answer_html`, as on that page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictStr
from starlette.concurrency import run_in_threadpool

from codesearch import audit
from codesearch.errors import ChatNotFound, CodesearchError
from codesearch.markup.code_refs import answer_html
from codesearch.service.deps import Caller, ServicesDep
from codesearch.store.models import Chat
from codesearch.tools.ask import ask, chat_url
from codesearch.tools.ask_files import mentioned_files
from codesearch.tools.catalog import LanguageModelChoice
from codesearch.tools.repos import language_models

if TYPE_CHECKING:
    from codesearch.app.context import ToolContext
    from codesearch.tools.ask_chat import Outcome, Prepared


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: StrictStr = Field(min_length=1, max_length=10000)
    repos: list[StrictStr] | None = Field(None, max_length=100)
    languageModel: LanguageModelChoice | None = None  # noqa: N815
    visibility: Literal["PRIVATE", "PUBLIC"] | None = None


class MessagePart(BaseModel):
    model_config = ConfigDict(extra="allow")  # the AI SDK's parts carry more (state, providerMetadata, ...)

    type: StrictStr
    text: StrictStr | None = None


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["user", "assistant", "system"]
    parts: list[MessagePart] = Field(max_length=200)


class SearchScope(BaseModel):
    model_config = ConfigDict(extra="allow")  # Sourcebot's scopes also carry name and codeHostType

    type: Literal["repo", "reposet"]
    value: StrictStr = Field(min_length=1, max_length=1000)


class LanguageModelRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: StrictStr
    model: StrictStr
    displayName: StrictStr | None = None  # noqa: N815  (Sourcebot sends it; the pair decides)


class StreamChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: StrictStr | None = Field(None, max_length=64)
    messages: list[UIMessage] = Field(min_length=1, max_length=500)
    selectedSearchScopes: list[SearchScope] = Field(default_factory=list, max_length=100)  # noqa: N815
    languageModel: LanguageModelRef | None = None  # noqa: N815
    visibility: Literal["PRIVATE", "PUBLIC"] | None = None


class VisibilityRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    visibility: Literal["PRIVATE", "PUBLIC"]


def question_of(body: StreamChatRequest) -> str:
    """The text of the request's last message, which must be the user's question."""
    from codesearch.errors import ToolInputError

    last = body.messages[-1]
    if last.role != "user":
        raise ToolInputError(f"the last message must be the user's question (role 'user'), not {last.role!r}")
    text = "\n".join(p.text for p in last.parts if p.type == "text" and p.text).strip()
    if not text:
        raise ToolInputError("the last message has no text part: send the question as {type: 'text', text: ...}")
    if len(text) > 10000:
        raise ToolInputError(f"the question is {len(text)} characters long; at most 10000 are accepted")
    return text


def scope_repos(tc: ToolContext, scopes: list[SearchScope]) -> list[str] | None:
    """The repository names of `scopes` (a ``reposet`` is a search context of the config)."""
    from codesearch.errors import ToolInputError

    names: list[str] = []
    for scope in scopes:
        if scope.type == "repo":
            names.append(scope.value)
            continue
        ctx = tc.store.find_search_context(scope.value)
        if ctx is None:
            known = ", ".join(sorted(c.name for c in tc.store.list_search_contexts())) or "none"
            raise ToolInputError(f"search context {scope.value!r} does not exist; the contexts are: {known}")
        names += [n for n in ctx.repo_names if _visible(tc, n)]  # the context's repos the caller may read
    return names or None


def _visible(tc: ToolContext, name: str) -> bool:
    try:
        tc.repo(name)
    except CodesearchError:
        return False
    return True


router = APIRouter()


@router.post("/api/chat/blocking")
async def chat_blocking(request: Request, body: ChatRequest, identity: Caller, services: ServicesDep) -> dict[str, Any]:
    tc = services.make_context(identity)
    choice = body.languageModel.model_dump() if body.languageModel else None

    _text, chat, spec = await run_in_threadpool(ask, tc, body.query, body.repos, choice, body.visibility)
    assert isinstance(chat, Chat), "ask returns the stored Chat"
    audit.record(request, identity, "chat.ask", body.query[:500], chat=chat.id, visibility=chat.visibility)
    return {
        "answer": chat.answer,
        "chatId": chat.id,
        "chatUrl": chat_url(services.public_url, chat.id),
        "languageModel": spec.public(),
    }


@router.post(
    "/api/chat",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": "Server-Sent Events in the AI SDK's UI message stream shape",
        }
    },
)
async def chat_stream(
    request: Request, body: StreamChatRequest, identity: Caller, services: ServicesDep
) -> StreamingResponse:
    from codesearch.service.routes import chat_stream as cs
    from codesearch.tools import ask_chat

    tc = services.make_context(identity)
    public_url = services.public_url
    question = question_of(body)
    choice = (
        {"provider": body.languageModel.provider, "model": body.languageModel.model} if body.languageModel else None
    )

    mentions = mentioned_files([p.model_dump() for p in body.messages[-1].parts])

    def prepare() -> Prepared:
        repos = scope_repos(tc, body.selectedSearchScopes)
        return ask_chat.prepare(
            tc,
            question,
            chat_id=body.id,
            repos=repos,
            language_model=choice,
            visibility=body.visibility,
            mentions=mentions,
        )

    prepared = await run_in_threadpool(prepare)
    files = ", ".join(f"{f.repo}/{f.path}" for f in prepared.files)  # the audit log keeps plain values
    audit.record(
        request, identity, "chat.ask", question[:500], chat=body.id or "", visibility=prepared.visibility, files=files
    )
    root = request.scope.get("root_path", "").rstrip("/")

    def finish(outcome: Outcome) -> list[dict[str, Any]]:
        meta = {
            "modelName": outcome.model.get("displayName") or outcome.model.get("model"),
            "totalInputTokens": outcome.usage.get("input_tokens", 0),
            "totalOutputTokens": outcome.usage.get("output_tokens", 0),
            "budgetExhausted": outcome.budget_exhausted,
        }
        data = {
            "chatId": outcome.chat.id,
            "chatUrl": chat_url(public_url, outcome.chat.id),
            "turn": outcome.turn,
            "visibility": outcome.chat.visibility,
            "answerHtml": str(answer_html(tc, outcome.answer, root)),
        }
        return [{"type": "data-chat", "data": data}, {"type": "message-metadata", "messageMetadata": meta}]

    def fail(error: BaseException) -> list[dict[str, Any]]:
        if isinstance(error, CodesearchError):
            stored = getattr(error, "chat", None)  # a failed question is kept: say where
            turn: int | None = getattr(error, "turn", None)  # set with `chat` (`errors.ModelError`)
            linked = (
                []
                if stored is None
                else [
                    {
                        "type": "data-chat",
                        "data": {
                            "chatId": stored.id,
                            "chatUrl": chat_url(public_url, stored.id),
                            "turn": turn,
                            "visibility": stored.visibility,
                            "answerHtml": "",
                        },
                    }
                ]
            )
            return [*linked, {"type": "error", "errorText": str(error)}]
        import logging

        logging.getLogger(__name__).error("chat failed", exc_info=error)
        return [{"type": "error", "errorText": f"internal error ({type(error).__name__}); try again"}]

    return StreamingResponse(
        cs.stream(lambda emit: ask_chat.run(prepared, emit), finish, fail),
        media_type="text/event-stream",
        headers=cs.HEADERS,
    )


@router.patch("/api/chat/{chat_id}")
async def chat_visibility(
    request: Request, chat_id: str, body: VisibilityRequest, identity: Caller, services: ServicesDep
) -> dict[str, Any]:
    tc = services.make_context(identity)

    def change() -> Chat:
        try:
            chat = tc.store.get_chat(chat_id)
        except Exception:
            chat = None
        if chat is None or identity.anonymous or chat.user_id != identity.user_id:
            raise ChatNotFound(f"chat {chat_id!r} not found (only the user who asked may share a chat)")
        changed: Chat = tc.store.set_chat_visibility(chat.id, body.visibility)
        return changed

    chat = await run_in_threadpool(change)
    audit.record(request, identity, "chat.share", chat.id, visibility=chat.visibility)
    return {"chatId": chat.id, "visibility": chat.visibility, "chatUrl": chat_url(services.public_url, chat.id)}


@router.get("/api/models")
async def models(identity: Caller, services: ServicesDep) -> list[dict[str, Any]]:
    tc = services.make_context(identity)
    return await run_in_threadpool(language_models, tc)
