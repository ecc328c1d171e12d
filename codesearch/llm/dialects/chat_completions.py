"""OpenAI Chat Completions: openai, openai-compatible, deepseek, mistral, openrouter, xai, azure.

``POST <base>/chat/completions`` with ``{"model", "messages", "tools", "tool_choice",
"temperature", "reasoning_effort"}``; tool calls come back as ``message.tool_calls`` whose
``function.arguments`` is a JSON *string*, and tool results go back as ``{"role": "tool",
"tool_call_id"}`` messages. `reasoningEffort` is sent as ``reasoning_effort``. For
``openai-compatible``, reasoning that a model writes between ``<think>`` tags (or the entry's
`reasoningTag`) is cut out of the answer, as Sourcebot does.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from codesearch.llm.spec import ModelSpec, Reply, text_call

DEFAULT_REASONING_TAG = "think"


def body(spec: ModelSpec, messages: list[dict], tools: list[dict], tool_choice: str | None) -> dict[str, Any]:
    out: list[dict] = []
    for msg in messages:
        role, content = msg.get("role"), msg.get("content") or ""
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": content or None}
            calls = msg.get("tool_calls") or []
            if calls:
                item["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                    "name": c.name, "arguments": c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments)}}
                    for c in calls]
            elif item["content"] is None:
                item["content"] = ""
            out.append(item)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": msg["tool_call_id"], "content": content})
        elif role in ("system", "user"):
            out.append({"role": role, "content": content})
        else:
            raise ValueError(f"unknown message role {role!r}")
    data: dict[str, Any] = {"model": spec.model, "messages": out}
    if tools:
        data["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""),
            "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}} for t in tools]
        if tool_choice:
            data["tool_choice"] = tool_choice
    if spec.temperature is not None:
        data["temperature"] = spec.temperature
    effort = spec.options.get("reasoningEffort")
    if effort and spec.provider in ("openai", "azure"):
        data["reasoning_effort"] = effort
    return data


def _cut_reasoning(text: str, tag: str) -> str:
    t = re.escape(tag)
    cut = re.sub(rf"<{t}>.*?</{t}>", "", text, flags=re.DOTALL)
    return cut.strip() if cut != text else text


def reply(spec: ModelSpec, data: Any, new_id: Callable[[], str]) -> Reply:
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ValueError("no choices")
    choice = data["choices"][0]
    message = choice["message"]
    if not isinstance(message, dict):
        raise TypeError("message is not an object")
    text = message.get("content") or ""
    if not isinstance(text, str):  # some servers send content parts
        text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
    if spec.provider == "openai-compatible":
        text = _cut_reasoning(text, str(spec.options.get("reasoningTag") or DEFAULT_REASONING_TAG))
    calls = []
    for tc in message.get("tool_calls") or []:
        fn = tc["function"]
        calls.append(text_call(str(tc.get("id") or new_id()), str(fn["name"]), fn.get("arguments")))
    u = data.get("usage") or {}
    usage = {"input_tokens": int(u.get("prompt_tokens") or 0), "output_tokens": int(u.get("completion_tokens") or 0)}
    return Reply(text=text, tool_calls=calls, usage=usage, stop_reason=choice.get("finish_reason"))
