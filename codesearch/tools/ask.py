"""`ask_codebase`: a language model researches a question with the other tools, and the session
is kept so people can read it in the web UI (``/chat/<id>``).

The agent gets the read-only tools of the catalog (`CatalogToolSet`) bound to the caller's
`ToolContext`, so it sees exactly the repos the caller may see, narrowed to `repos` when given.
The model is the configured one named by `language_model` (provider and model), else the first
in the config (`models`, kept in the store by the scheduler). Sessions are stored whether they
succeed or fail; `visibility` decides who may read them (PUBLIC: anyone with the link; PRIVATE:
the user who asked). Anonymous callers can only ask PUBLIC questions: nobody could read back a
private session without an owner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codesearch.app.context import ToolContext
from codesearch.app.skills import expand_command
from codesearch.errors import ToolInputError
from codesearch.llm.agent import run_agent
from codesearch.llm.client import ModelClient, ModelError, ModelSpec
from codesearch.statuses import ChatStatus
from codesearch.tools.budget import ANSWER_BUDGET, fit_text

if TYPE_CHECKING:
    import httpx


def _brief(arguments: object) -> str:
    text = (
        ", ".join(f"{k}={v!r}" for k, v in (arguments or {}).items()) if isinstance(arguments, dict) else str(arguments)
    )
    return text if len(text) <= 200 else text[:200] + "…"


def chat_url(public_url: str, chat_id: str) -> str:
    return f"{public_url.rstrip('/')}/chat/{chat_id}"


def choose_model(entries: list[dict[str, Any]], wanted: dict[str, Any] | None) -> ModelSpec:
    if not entries:
        raise ToolInputError(
            "no language model is configured on this instance, so ask_codebase is unavailable: "
            "research with grep, read_file and find_symbol_definitions instead"
        )
    if not wanted:
        return ModelSpec.from_config(entries[0])
    for entry in entries:
        if entry.get("provider") == wanted.get("provider") and entry.get("model") == wanted.get("model"):
            return ModelSpec.from_config(entry)
    known = ", ".join(f"{e.get('provider')}/{e.get('model')}" for e in entries)
    raise ToolInputError(
        f"language model {wanted.get('provider')}/{wanted.get('model')} is not configured; "
        f"configured: {known} (list_language_models)"
    )


def ask_codebase(
    tc: ToolContext,
    query: str,
    repos: list[str] | None = None,
    language_model: dict[str, Any] | None = None,
    visibility: str | None = None,
    *,
    max_steps: int = 12,
    http: httpx.Client | None = None,
) -> str:
    """The tool: the answer, then a link to the session and the model used (docs/mcp-tools.md#ask_codebase)."""
    return ask(tc, query, repos, language_model, visibility, max_steps=max_steps, http=http)[0]


def ask(
    tc: ToolContext,
    query: str,
    repos: list[str] | None = None,
    language_model: dict[str, Any] | None = None,
    visibility: str | None = None,
    *,
    max_steps: int = 12,
    http: httpx.Client | None = None,
) -> tuple[str, object, ModelSpec]:
    """Run the agent and store the session: (the tool's text, the stored `Chat`, the model)."""
    spec = choose_model(tc.store.list_language_models(), language_model)
    if visibility is None:
        visibility = "PUBLIC" if tc.identity.anonymous else "PRIVATE"
    if visibility == "PRIVATE" and tc.identity.anonymous:
        raise ToolInputError("visibility PRIVATE needs a signed-in caller (an API key); use PUBLIC or send a key")
    names = None
    if repos:
        names = sorted({tc.repo(name).name for name in repos})  # unknown or hidden repos fail here
    from codesearch.tools.read_tools import CatalogToolSet

    scoped = ToolContext(**{**tc.__dict__, "allowed_repos": frozenset(names) if names else None})
    try:
        with ModelClient(spec, http=http) as client:
            tc.report(f"asking {spec.name} ({spec.provider})")
            result = run_agent(
                expand_command(tc.store, tc.identity, query).prompt,  # a leading /skill runs the skill
                client,
                CatalogToolSet(scoped),
                repos=names,
                max_steps=max_steps,
                on_step=lambda step: tc.report(f"{step.get('tool')} {_brief(step.get('arguments'))}"),
            )
    except ModelError as e:
        tc.store.create_chat(
            user_id=tc.identity.user_id,
            visibility=visibility,
            question=query,
            answer="",
            model=spec.public(),
            steps=[],
            status=ChatStatus.FAILED,
            error=str(e),
        )
        raise
    chat = tc.store.create_chat(
        user_id=tc.identity.user_id,
        visibility=visibility,
        question=query,
        answer=result.answer,
        model=result.model or spec.public(),
        steps=result.steps,
        status=ChatStatus.COMPLETED,
        error=None,
        usage=result.usage,
    )
    note = " (the research budget ran out before the model finished)" if result.budget_exhausted else ""
    footer = (
        f"\n\n---\nResearch session: {chat_url(tc.public_url, chat.id)}\nModel: {spec.name} ({spec.provider}){note}"
    )
    # the answer is held to the size budget, never the footer: the session keeps the whole answer
    answer = fit_text(
        result.answer.rstrip(),
        "The whole answer is in the research session below.",
        ANSWER_BUDGET - len(footer.encode("utf-8")),
    )
    return answer + footer, chat, spec
