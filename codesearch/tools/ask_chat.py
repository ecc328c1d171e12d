"""The web UI's chat: one question (a new chat or a follow-up in one), researched by the agent
with every tool call reported as it happens, then stored.

`ask_codebase` (`codesearch.tools.ask`) answers one question and returns when done; a person
in the browser wants to watch the research and ask again in the same chat. So this module splits
the work in two, so that every mistake in the request is a plain error before anything streams:

    prepared = prepare(tc, "where is retry?", chat_id=None, repos=["github.com/acme/api"])
    outcome = run(prepared, emit)     # emit(event) for each tool call and its result

`prepare` checks everything the caller sent: the model (configured), the repositories (each
visible to the caller: a hidden one is refused exactly as an unknown one), the chat of a
follow-up (the caller's own; anyone else's is "not found"), the visibility (anonymous callers
ask PUBLIC questions only, and cannot follow up: nobody could tell their chats apart).
`run` calls the agent with the caller's tools narrowed to the repositories, emits
``tool-input-available`` before each tool call, ``tool-output-available`` after it and the
model's text as it is produced (``text-start``, ``text-delta``..., ``text-end``), in the shape
of the AI SDK's UI message stream, which Sourcebot's ``/api/chat`` speaks, and stores the
question and answer: a new chat, or a follow-up turn of the chat. A model that fails is stored
as a FAILED turn and re-raised (`ModelError`, with the stored ``chat`` and ``turn`` attached).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codesearch.app.context import ToolContext
from codesearch.app.skills import expand_command
from codesearch.errors import ChatNotFound, ToolInputError
from codesearch.llm.agent import run_agent
from codesearch.llm.client import ModelClient, ModelError, ModelSpec
from codesearch.statuses import ChatStatus
from codesearch.tools.ask import choose_model
from codesearch.tools.ask_files import Mention, MentionedFile, context_text, read_mentions

if TYPE_CHECKING:
    import httpx

    from codesearch.llm.spec import ToolCall

#: Characters of a tool's output shown as its one-line summary.
SUMMARY_CHARS = 160


@dataclass
class Prepared:
    tc: ToolContext  # narrowed to `repos` when given
    question: str
    spec: ModelSpec
    repos: list[str] | None
    visibility: str
    chat: Any = None  # the chat of a follow-up
    history: list[tuple[str, str]] = field(default_factory=list)
    #: what the model reads: the question, its leading ``/skill`` replaced by the skill's
    #: instructions (`codesearch.app.skills.expand_command`); the chat keeps the question as asked
    prompt: str = ""
    files: list[MentionedFile] = field(default_factory=list)  # the files mentioned with the question


@dataclass
class Outcome:
    chat: Any  # the stored `Chat`
    turn: int  # 0: the chat's first question; 1, 2, ...: follow-ups
    answer: str
    steps: list[dict[str, Any]]
    model: dict[str, Any]
    usage: dict[str, Any]
    budget_exhausted: bool


def summarize(output: str, is_error: bool) -> str:
    """One line about a tool's output, for the live list of tool calls: its first non-empty
    line (shortened) and how many lines there are."""
    lines = [ln for ln in (output or "").splitlines() if ln.strip()]
    if not lines:
        return "error" if is_error else "no output"
    first = lines[0].strip()
    if len(first) > SUMMARY_CHARS:
        first = first[:SUMMARY_CHARS] + "…"
    more = f" (+{len(lines) - 1} more line{'s' if len(lines) > 2 else ''})" if len(lines) > 1 else ""
    return first + more


def prepare(
    tc: ToolContext,
    question: str,
    *,
    chat_id: str | None = None,
    repos: list[str] | None = None,
    language_model: dict[str, Any] | None = None,
    visibility: str | None = None,
    mentions: list[Mention] | None = None,
) -> Prepared:
    """Check a question before it is researched (see the module docstring); `ToolInputError`,
    `RepositoryNotFound`, `FileNotFound` (a mentioned file) or `ChatNotFound` say what is wrong."""
    question = (question or "").strip()
    if not question:
        raise ToolInputError("the question is empty: write what you want to know about the code")
    spec = choose_model(tc.store.list_language_models(), language_model)
    names = sorted({tc.repo(name).name for name in repos}) if repos else None  # hidden or unknown: fails here
    chat: Any = None
    history: list[tuple[str, str]] = []
    if chat_id:
        if tc.identity.anonymous:
            raise ToolInputError("follow-up questions need a signed-in user: sign in, or start a new chat")
        try:
            chat = tc.store.get_chat(chat_id)
        except Exception:
            chat = None
        if chat is None or chat.user_id != tc.identity.user_id:
            raise ChatNotFound(f"chat {chat_id!r} not found (follow-ups are asked in one's own chats)")
        history = [(chat.question, chat.answer)] + [(t.question, t.answer) for t in tc.store.list_chat_turns(chat.id)]
        visibility = chat.visibility
    if visibility is None:
        visibility = "PUBLIC" if tc.identity.anonymous else "PRIVATE"
    if visibility == "PRIVATE" and tc.identity.anonymous:
        raise ToolInputError("visibility PRIVATE needs a signed-in user; use PUBLIC or sign in")
    files = read_mentions(tc, mentions) if mentions else []
    scoped = ToolContext(**{**tc.__dict__, "allowed_repos": frozenset(names) if names else None})
    prompt = expand_command(tc.store, tc.identity, question).prompt
    return Prepared(scoped, question, spec, names, visibility, chat, history, prompt, files)


def run(
    p: Prepared, emit: Callable[[dict[str, Any]], Any], *, max_steps: int = 12, http: httpx.Client | None = None
) -> Outcome:
    """Research `p`'s question, reporting each tool call to `emit`, and store the result."""
    from codesearch.tools.read_tools import CatalogToolSet

    running: list[str] = []  # ids of the calls reported and not yet answered (the agent runs them in order)
    part: list[str] = []  # the id of the text part being streamed, if one is open

    def end_text() -> None:
        if part:
            emit({"type": "text-end", "id": part.pop()})

    def on_text(delta: str) -> None:
        if not part:
            part.append(secrets.token_urlsafe(8))
            emit({"type": "text-start", "id": part[0]})
        emit({"type": "text-delta", "id": part[0], "delta": delta})

    def on_call(call: ToolCall) -> None:
        end_text()  # text said before a tool call is a part of its own
        running.append(call.id)
        emit(
            {
                "type": "tool-input-available",
                "toolCallId": call.id,
                "toolName": call.name,
                "input": call.arguments if isinstance(call.arguments, dict) else {},
            }
        )

    def on_step(step: dict[str, Any]) -> None:
        emit(
            {
                "type": "tool-output-available",
                "toolCallId": running.pop(0) if running else None,
                "output": {
                    "summary": summarize(step.get("output", ""), bool(step.get("is_error"))),
                    "isError": bool(step.get("is_error")),
                    "text": step.get("output", ""),
                },
            }
        )

    store, user_id = p.tc.store, p.tc.identity.user_id
    try:
        with ModelClient(p.spec, http=http) as client:
            result = run_agent(
                p.prompt or p.question,
                client,
                CatalogToolSet(p.tc),
                repos=p.repos,
                max_steps=max_steps,
                on_step=on_step,
                on_call=on_call,
                on_text=on_text,
                history=p.history,
                attachments=context_text(p.files),
            )
    except ModelError as e:
        end_text()
        if p.chat is None:
            e.chat = store.create_chat(
                user_id=user_id,
                visibility=p.visibility,
                question=p.question,
                answer="",
                model=p.spec.public(),
                steps=[],
                status=ChatStatus.FAILED,
                error=str(e),
            )
            e.turn = 0
        else:
            e.chat = p.chat
            e.turn = store.add_chat_turn(
                p.chat.id, p.question, "", model=p.spec.public(), steps=[], status=ChatStatus.FAILED, error=str(e)
            ).position
        raise
    end_text()
    model = result.model or p.spec.public()
    if p.chat is None:
        chat = store.create_chat(
            user_id=user_id,
            visibility=p.visibility,
            question=p.question,
            answer=result.answer,
            model=model,
            steps=result.steps,
            status=ChatStatus.COMPLETED,
            error=None,
            usage=result.usage,
        )
        turn = 0
    else:
        chat = p.chat
        turn = store.add_chat_turn(
            chat.id, p.question, result.answer, model=model, steps=result.steps, usage=result.usage
        ).position
    return Outcome(chat, turn, result.answer, result.steps, model, result.usage, result.budget_exhausted)
