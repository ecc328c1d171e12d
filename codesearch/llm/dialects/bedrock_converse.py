"""Amazon Bedrock's Converse API (amazon-bedrock).

``POST <base>/model/<model id>/converse`` with ``{"messages", "system", "toolConfig",
"inferenceConfig"}``, signed with AWS Signature V4 (`codesearch.llm.sigv4`). Roles alternate
user/assistant and content is a list of blocks: ``{"text"}``, ``{"toolUse": {"toolUseId",
"name", "input"}}`` from the assistant, ``{"toolResult": {"toolUseId", "content", "status"}}``
in the next user turn. Converse has no way to forbid tool calls while tools are declared, so
a request for an answer without tools sends the tools (the history needs them) and the agent
copes with a model that calls one anyway.

Streaming: ``POST <base>/model/<model id>/converse-stream`` takes the same body and answers in
AWS event-stream framing (`codesearch.llm.eventstream`), one JSON event per message named by
its ``:event-type`` header: ``messageStart``, ``contentBlockStart`` (a tool use's id and
name), ``contentBlockDelta`` (``{"text"}`` pieces, or ``{"toolUse": {"input"}}`` pieces of the
tool input's JSON text), ``contentBlockStop``, ``messageStop`` (the stop reason), ``metadata``
(usage). A message whose ``:message-type`` is ``exception`` (``throttlingException``,
``modelStreamErrorException``...) or ``error`` ends the stream with that error; a stream that
ends before ``messageStop`` is an error, not a shorter answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from codesearch.llm import eventstream
from codesearch.llm.dialects import NewId, OnText, add_turn, joined_json, replace_path_end
from codesearch.llm.spec import ModelSpec, Reply, object_call
from codesearch.llm.sse import StreamError

STREAM_TYPE = "application/vnd.amazon.eventstream"


def body(
    spec: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]], tool_choice: str | None
) -> dict[str, Any]:
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        add_turn(out, role, blocks)

    for msg in messages:
        role, content = msg.get("role"), msg.get("content") or ""
        if role == "system":
            system.append({"text": content})
        elif role == "user":
            add("user", [{"text": content or "(empty)"}])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = [{"text": content}] if content else []
            blocks += [
                {"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}}
                for c in msg.get("tool_calls") or []
            ]
            add("assistant", blocks or [{"text": "(empty)"}])
        elif role == "tool":
            add(
                "user",
                [
                    {
                        "toolResult": {
                            "toolUseId": msg["tool_call_id"],
                            "content": [{"text": content or "(empty)"}],
                            "status": "error" if msg.get("is_error") else "success",
                        }
                    }
                ],
            )
        else:
            raise ValueError(f"unknown message role {role!r}")
    data: dict[str, Any] = {"messages": out}
    if system:
        data["system"] = system
    if tools:
        data["toolConfig"] = {
            "tools": [
                {
                    "toolSpec": {
                        "name": t["name"],
                        "description": t.get("description", "") or t["name"],
                        "inputSchema": {"json": t.get("input_schema") or {"type": "object", "properties": {}}},
                    }
                }
                for t in tools
            ]
        }
        if tool_choice in ("auto", "required", "any"):
            data["toolConfig"]["toolChoice"] = {"auto": {}} if tool_choice == "auto" else {"any": {}}
    if spec.temperature is not None:
        data["inferenceConfig"] = {"temperature": spec.temperature}
    return data


def reply(spec: ModelSpec, data: Any, new_id: Callable[[], str]) -> Reply:
    if not isinstance(data, dict):
        raise ValueError("the answer is not an object")
    message = (data.get("output") or {}).get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise ValueError("no output message")
    texts, calls = [], []
    for block in message["content"]:
        if "toolUse" in block:
            use = block["toolUse"]
            calls.append(object_call(str(use.get("toolUseId") or new_id()), str(use["name"]), use.get("input")))
        elif isinstance(block.get("text"), str):
            texts.append(block["text"])
    u = data.get("usage") or {}
    usage = {"input_tokens": int(u.get("inputTokens") or 0), "output_tokens": int(u.get("outputTokens") or 0)}
    return Reply(text="".join(texts), tool_calls=calls, usage=usage, stop_reason=data.get("stopReason"))


def stream_url(url: str) -> str:
    return replace_path_end(url, "/converse", "/converse-stream")


def stream_body(spec: ModelSpec, body: dict[str, Any]) -> dict[str, Any]:
    return body


def _events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event type, payload object)`` of each event message; exceptions and errors raised."""
    for message in eventstream.decode(response.iter_bytes()):
        headers = message.headers
        kind = headers.get(":message-type", "event")
        if kind == "error":
            raise StreamError(
                f"failed while answering: {headers.get(':error-message') or 'error'} "
                f"({headers.get(':error-code') or 'no code'})"
            )
        try:
            payload = json.loads(message.payload or b"{}")
        except ValueError:
            raise StreamError("sent a stream event that is not JSON") from None
        if kind == "exception":
            detail = payload.get("message") or payload.get("Message") if isinstance(payload, dict) else None
            raise StreamError(
                f"failed while answering: {detail or 'no message'} ({headers.get(':exception-type') or 'exception'})"
            )
        if not isinstance(payload, dict):
            raise StreamError("sent a stream event that is not an object")
        yield str(headers.get(":event-type") or ""), payload


def read_stream(spec: ModelSpec, response: httpx.Response, on_text: OnText, new_id: NewId) -> Reply:
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, list[str]] = {}
    stop, done = None, False
    usage: dict[str, Any] = {}
    for kind, event in _events(response):
        i = int(event.get("contentBlockIndex") or 0)
        if kind == "contentBlockStart":
            use = (event.get("start") or {}).get("toolUse")
            if isinstance(use, dict):
                blocks[i] = {"toolUse": {"toolUseId": use.get("toolUseId"), "name": use.get("name"), "input": {}}}
        elif kind == "contentBlockDelta":
            delta = event.get("delta") or {}
            if isinstance(delta.get("text"), str):
                block = blocks.setdefault(i, {"text": ""})
                block["text"] = str(block.get("text") or "") + delta["text"]
                if delta["text"]:
                    on_text(delta["text"])
            elif isinstance(delta.get("toolUse"), dict):
                inputs.setdefault(i, []).append(str(delta["toolUse"].get("input") or ""))
        elif kind == "messageStop":
            stop, done = event.get("stopReason"), True
        elif kind == "metadata":
            usage = event.get("usage") or usage
    if not done:
        raise StreamError("ended its stream before the answer was complete (no messageStop)")
    for i, parts in inputs.items():
        if "toolUse" in blocks.get(i, {}):
            blocks[i]["toolUse"]["input"] = joined_json(parts)
    data = {
        "output": {"message": {"role": "assistant", "content": [blocks[i] for i in sorted(blocks)]}},
        "stopReason": stop,
        "usage": usage,
    }
    return reply(spec, data, new_id)
