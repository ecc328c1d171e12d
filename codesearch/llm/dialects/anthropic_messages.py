"""Anthropic Messages: anthropic, and Anthropic models on Google Vertex AI.

``POST <base>/v1/messages`` (Vertex: ``<base>/models/<model>:rawPredict``) with ``{"model",
"max_tokens", "system", "messages", "tools", "tool_choice", "temperature"}``. Roles alternate
user/assistant; tool calls are ``tool_use`` blocks of the assistant, their results
``tool_result`` blocks of the next user turn. On Vertex the model is named by the URL, and
the body carries ``anthropic_version`` instead of the header.

Streaming: ``stream: true`` in the body (Vertex: at ``:streamRawPredict``). The answer is
Server-Sent Events: ``message_start`` (input tokens), per content block
``content_block_start`` / ``content_block_delta`` (``text_delta`` pieces, or the tool input
as ``input_json_delta`` pieces of JSON) / ``content_block_stop``, ``message_delta`` (stop
reason, output tokens), ``message_stop``; ``ping`` may come at any time and ``error`` ends the
stream with the API's error (e.g. ``overloaded_error``). A stream that ends before
``message_stop`` is an error, not a shorter answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from codesearch.llm import sse
from codesearch.llm.dialects import NewId, OnText, add_turn, joined_json, replace_path_end
from codesearch.llm.spec import ModelSpec, Reply, object_call

#: `max_tokens` of each request (the API requires one).
MAX_TOKENS = 4096
VERTEX_VERSION = "vertex-2023-10-16"
STREAM_TYPE = "text/event-stream"


def body(
    spec: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]], tool_choice: str | None
) -> dict[str, Any]:
    system: list[str] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        add_turn(out, role, blocks)

    for msg in messages:
        role, content = msg.get("role"), msg.get("content") or ""
        if role == "system":
            system.append(content)
        elif role == "user":
            add("user", [{"type": "text", "text": content or "(empty)"}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in msg.get("tool_calls") or []
            ]
            add("assistant", blocks or [{"type": "text", "text": "(empty)"}])
        elif role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg["tool_call_id"], "content": content}
            if msg.get("is_error"):
                block["is_error"] = True
            add("user", [block])
        else:
            raise ValueError(f"unknown message role {role!r}")
    if spec.provider == "google-vertex-anthropic":
        data: dict[str, Any] = {"anthropic_version": VERTEX_VERSION}
    else:
        data = {"model": spec.model}
    data.update({"max_tokens": MAX_TOKENS, "messages": out})
    if system:
        data["system"] = "\n\n".join(system)
    if tools:
        data["tools"] = [
            {
                "name": t["name"],
                "description": t.get("description", ""),
                "input_schema": t.get("input_schema") or {"type": "object", "properties": {}},
            }
            for t in tools
        ]
        if tool_choice:
            data["tool_choice"] = {"type": tool_choice}
    if spec.temperature is not None:
        data["temperature"] = spec.temperature
    return data


def reply(spec: ModelSpec, data: Any, new_id: Callable[[], str]) -> Reply:
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise ValueError("no content")
    texts, calls = [], []
    for block in data["content"]:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text") or ""))
        elif kind == "tool_use":
            calls.append(object_call(str(block["id"]), str(block["name"]), block.get("input")))
    u = data.get("usage") or {}
    usage = {"input_tokens": int(u.get("input_tokens") or 0), "output_tokens": int(u.get("output_tokens") or 0)}
    return Reply(text="".join(texts), tool_calls=calls, usage=usage, stop_reason=data.get("stop_reason"))


def stream_url(url: str) -> str:
    return replace_path_end(url, ":rawPredict", ":streamRawPredict")


def stream_body(spec: ModelSpec, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "stream": True}


def read_stream(spec: ModelSpec, response: httpx.Response, on_text: OnText, new_id: NewId) -> Reply:
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, list[str]] = {}
    stop, done = None, False
    usage: dict[str, Any] = {}
    for _, event in sse.events(response.iter_lines()):
        kind = event.get("type")
        if kind == "message_start":
            usage.update((event.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            i = int(event.get("index", len(blocks)))
            blocks[i] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            i, delta = int(event.get("index", 0)), event.get("delta") or {}
            block = blocks.setdefault(i, {"type": "text", "text": ""})
            if delta.get("type") == "text_delta":
                piece = str(delta.get("text") or "")
                block["text"] = str(block.get("text") or "") + piece
                if piece:
                    on_text(piece)
            elif delta.get("type") == "input_json_delta":
                inputs.setdefault(i, []).append(str(delta.get("partial_json") or ""))
        elif kind == "message_delta":
            stop = (event.get("delta") or {}).get("stop_reason") or stop
            usage.update(event.get("usage") or {})
        elif kind == "message_stop":
            done = True
            break
    if not done:
        raise sse.StreamError("ended its stream before the answer was complete (no message_stop)")
    for i, parts in inputs.items():
        if blocks[i].get("type") == "tool_use":
            blocks[i]["input"] = joined_json(parts)
    return reply(spec, {"content": [blocks[i] for i in sorted(blocks)], "stop_reason": stop, "usage": usage}, new_id)
