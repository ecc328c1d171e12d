"""The `ask_codebase` agent loop: a language model researches a question with code-search tools.

    result = run_agent("where is the retry policy?", client, tools, repos=["github.com/acme/api"])
    result.answer      # markdown, citing code as repo/path:line
    result.steps       # [{"tool", "arguments", "output", "is_error"}, ...]

Each turn the model either calls tools (each call is run through `ToolSet.call`, its output
truncated to `max_tool_output_chars`, and sent back) or answers. After `max_steps` turns with
tool calls, the model is asked once more for a final answer without tools; if it still gives
none, the answer says that the budget ran out. Tool problems (an unknown tool name, arguments
that are not JSON, a tool raising) go back to the model as error results, so it can correct
itself; a `ModelError` (the model itself failing) propagates to the caller.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from codesearch.errors import CodesearchError
from codesearch.llm.client import ModelClient
from codesearch.llm.spec import Reply, ToolCall

log = logging.getLogger(__name__)

#: How much of each tool output a step record keeps (the model gets up to `max_tool_output_chars`).
STEP_OUTPUT_CHARS = 4000
#: Tool calls run per model turn; more are answered with an error (a runaway model costs little).
MAX_CALLS_PER_STEP = 10


@runtime_checkable
class ToolSet(Protocol):
    """The tools offered to the model."""

    def specs(self) -> list[dict[str, Any]]:
        """``[{"name", "description", "input_schema"}, ...]``"""
        ...

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Run one tool: (output text, is_error). May raise `CodesearchError` (reported to the model)."""
        ...


@dataclass
class AgentResult:
    answer: str  # markdown
    steps: list[dict[str, Any]] = field(default_factory=list)  # {"tool", "arguments", "output", "is_error"}
    model: dict[str, Any] = field(default_factory=dict)  # ModelSpec.public()
    usage: dict[str, Any] = field(default_factory=dict)  # {"input_tokens", "output_tokens", "requests"}
    #: True when `max_steps` turns were used up before the model answered on its own.
    budget_exhausted: bool = False


SYSTEM_PROMPT = """\
You are a code research assistant. You answer questions about the source code of the repositories \
indexed by this code search service, using the tools you are given to search and read that code.

How to work:
- Always search before answering: use the search tools to find the relevant files, then read \
them. Do not answer from memory or guess what code might contain; if the tools do not show it, \
say that you could not find it.
- Prefer several precise searches over one vague one; narrow by repository, path or language \
when you can. When a tool reports an error, fix the call and try again.
- Stop searching as soon as you can answer.

How to answer:
- Answer in Markdown, concisely, and directly address the question.
- Support every claim about the code with references written as `repo/path:line` (or \
`repo/path:start-end`) using the full repository name as the tools show it, e.g. \
`github.com/acme/api/src/retry.py:42`, with a short code snippet (a few lines) where it helps.
- Only cite files and lines you have actually seen in tool results.\
"""


def system_prompt(repos: list[str] | None = None) -> str:
    """The system prompt, restricted to `repos` when given."""
    if not repos:
        return SYSTEM_PROMPT + "\n\nYou may search every repository the tools give you access to."
    listed = "\n".join(f"- {r}" for r in repos)
    return (
        SYSTEM_PROMPT + "\n\nThe user asked about these repositories only; restrict your searches to them "
        f"(pass them as the repository filter of the tools):\n{listed}"
    )


def _truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n\n[output truncated: showing {limit} of {len(text)} characters; narrow the request "
        "(a more specific query, a path filter or a smaller line range) to see the rest]"
    )


def _step_output(text: str) -> str:
    if len(text) <= STEP_OUTPUT_CHARS:
        return text
    return text[:STEP_OUTPUT_CHARS] + f"\n… [{len(text) - STEP_OUTPUT_CHARS} more characters]"


def _run_tool(tools: ToolSet, known: set[str], call: ToolCall) -> tuple[str, bool]:
    if call.error:
        return call.error, True
    if call.name not in known:
        return (f"unknown tool {call.name!r}; the available tools are: {', '.join(sorted(known)) or 'none'}", True)
    try:
        text, is_error = tools.call(call.name, call.arguments)
    except CodesearchError as e:
        return f"{call.name} failed: {e}", True
    except Exception as e:  # a bug in a tool: the model hears that it failed, the log gets the details
        log.exception("tool %s failed", call.name)
        return f"{call.name} failed with an internal error ({type(e).__name__}); try another approach", True
    return (text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)), bool(is_error)


def run_agent(
    question: str,
    client: ModelClient,
    tools: ToolSet,
    *,
    repos: list[str] | None = None,
    max_steps: int = 12,
    max_tool_output_chars: int = 20000,
    on_step: Callable[[dict[str, Any]], Any] | None = None,
    on_call: Callable[[ToolCall], Any] | None = None,
    on_text: Callable[[str], Any] | None = None,
    history: list[tuple[str, str]] | None = None,
    attachments: str = "",
) -> AgentResult:
    """Research `question` with `tools` through `client`'s model; see the module docstring.

    `on_call` is called with each tool call just before it runs and `on_step` with its step
    record as soon as it has run: progress, e.g. the web UI's live list of tool calls (each
    call's step follows its `on_call`, in order). `on_text` gets the model's text as it is
    produced (`ModelClient.chat`), the answer's and any said alongside tool calls.
    `history`: the earlier ``(question, answer)`` pairs of the same chat, oldest first, sent
    before `question` so that a follow-up can refer to them (their tool calls are not resent:
    the answers carry what was found). `attachments`: text the user gave with the question (the
    files they mentioned), appended to the system prompt."""
    specs = list(tools.specs())
    known = {s["name"] for s in specs}
    system = system_prompt(repos) + (f"\n\n{attachments}" if attachments else "")
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for earlier_q, earlier_a in history or ():
        messages += [
            {"role": "user", "content": earlier_q},
            {"role": "assistant", "content": earlier_a or "(no answer)"},
        ]
    messages.append({"role": "user", "content": question})
    steps: list[dict[str, Any]] = []
    usage = {"input_tokens": 0, "output_tokens": 0, "requests": 0}
    result = AgentResult(answer="", steps=steps, model=client.spec.public(), usage=usage)

    def ask(**kw: Any) -> Reply:
        if on_text is not None:
            kw["on_text"] = on_text
        reply = client.chat(messages, specs, **kw)
        usage["requests"] += 1
        for k in ("input_tokens", "output_tokens"):
            usage[k] += int(reply.usage.get(k) or 0)
        return reply

    for _ in range(max(0, max_steps)):
        reply = ask()
        if not reply.tool_calls:
            result.answer = reply.text.strip() or "_The model returned an empty answer._"
            return result
        messages.append({"role": "assistant", "content": reply.text, "tool_calls": reply.tool_calls})
        for n, call in enumerate(reply.tool_calls):
            if on_call is not None:
                on_call(call)
            if n >= MAX_CALLS_PER_STEP:
                output, is_error = (
                    (
                        f"not run: at most {MAX_CALLS_PER_STEP} tool calls are run per turn; "
                        "call it again if you still need it"
                    ),
                    True,
                )
            else:
                output, is_error = _run_tool(tools, known, call)
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": _truncate(output, max_tool_output_chars),
                    "is_error": is_error,
                }
            )
            step = {
                "tool": call.name,
                "arguments": call.arguments,
                "output": _step_output(output),
                "is_error": is_error,
            }
            steps.append(step)
            if on_step is not None:
                on_step(step)

    # Out of turns: one last request for an answer from what was found, tools declared but not allowed.
    result.budget_exhausted = True
    messages.append(
        {
            "role": "user",
            "content": (
                "You have used all your tool calls. Answer the question now from what you found, with references; "
                "say clearly what you could not verify. Do not call any tools."
            ),
        }
    )
    reply = ask(tool_choice="none")
    note = (
        f"_The research budget of {max_steps} steps ran out before the model finished; this answer may be incomplete._"
    )
    text = reply.text.strip()
    result.answer = f"{text}\n\n{note}" if text else note
    return result
