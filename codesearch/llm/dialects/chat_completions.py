"""OpenAI Chat Completions: openai, openai-compatible, deepseek, mistral, openrouter, xai, azure.

``POST <base>/chat/completions`` with ``{"model", "messages", "tools", "tool_choice",
"temperature", "reasoning_effort"}``; tool calls come back as ``message.tool_calls`` whose
``function.arguments`` is a JSON *string*, and tool results go back as ``{"role": "tool",
"tool_call_id"}`` messages. `reasoningEffort` is sent as ``reasoning_effort``. For
``openai-compatible``, reasoning that a model writes between ``<think>`` tags (or the entry's
`reasoningTag`) is cut out of the answer, as Sourcebot does.

Streaming: the same endpoint with ``stream: true`` (and ``stream_options.include_usage`` for
openai and azure; other servers may refuse the option, and their usage is then 0). The answer is
Server-Sent Events of ``chat.completion.chunk`` objects whose ``delta`` carries text pieces and
tool call fragments (by ``index``: id and name first, then the arguments in pieces), up to
``[DONE]``; a stream that ends before a ``finish_reason`` is an error, not a shorter answer.
The pieces are the model's raw text (reasoning between tags included: it is only
recognisable once the tag closes).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import httpx

from codesearch.llm import sse
from codesearch.llm.dialects import NewId, OnText
from codesearch.llm.spec import ModelSpec, Reply, text_call

DEFAULT_REASONING_TAG = "think"
STREAM_TYPE = "text/event-stream"


def body(
    spec: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]], tool_choice: str | None
) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for msg in messages:
        role, content = msg.get("role"), msg.get("content") or ""
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": content or None}
            calls = msg.get("tool_calls") or []
            if calls:
                item["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {
                            "name": c.name,
                            "arguments": c.raw_arguments if c.raw_arguments is not None else json.dumps(c.arguments),
                        },
                    }
                    for c in calls
                ]
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
        data["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
                },
            }
            for t in tools
        ]
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


def stream_url(url: str) -> str:
    return url


def stream_body(spec: ModelSpec, body: dict[str, Any]) -> dict[str, Any]:
    body = {**body, "stream": True}
    if spec.provider in ("openai", "azure"):
        body["stream_options"] = {"include_usage": True}
    return body


def read_stream(spec: ModelSpec, response: httpx.Response, on_text: OnText, new_id: NewId) -> Reply:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: dict[str, Any] = {}
    for _, event in sse.events(response.iter_lines()):
        usage = event.get("usage") or usage
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                text.append(piece)
                on_text(piece)
            for tc in delta.get("tool_calls") or []:
                entry = calls.setdefault(
                    int(tc.get("index", len(calls))),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                entry["id"] = tc.get("id") or entry["id"]
                fn = tc.get("function") or {}
                entry["function"]["name"] += fn.get("name") or ""
                entry["function"]["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    if finish is None:
        raise sse.StreamError("ended its stream before the answer was complete (no finish_reason)")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return reply(spec, {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}, new_id)
