"""Google's generateContent: the Gemini API (google-generative-ai) and Gemini on Vertex AI.

``POST <base>/models/<model>:generateContent`` with ``{"contents", "systemInstruction",
"tools": [{"functionDeclarations"}], "toolConfig", "generationConfig"}``. Roles are ``user``
and ``model``; a tool call is a ``functionCall`` part of the model's turn and its result a
``functionResponse`` part of the next user turn, matched by the function's *name* (calls carry
no id, so `new_id` numbers them for the agent). `thinkingLevel` and `thinkingBudget` go to
``generationConfig.thinkingConfig``; the model's thought parts are left out of the answer.

Function parameters take an OpenAPI subset of JSON schema: keywords outside it (such as
``additionalProperties``, ``title`` or ``default``) are dropped and ``anyOf [X, null]`` becomes
``X`` with ``nullable``, which keeps what the model needs to call the tool right.

Streaming: ``:streamGenerateContent?alt=sse`` (Vertex AI: the same path under its
``publishers/google`` base) takes the same body and answers Server-Sent Events, each a whole
``GenerateContentResponse`` holding the next parts: text pieces, function calls (each whole,
in one chunk), thoughts (not passed on as answer text). The last chunk has the
``finishReason``; ``usageMetadata`` is cumulative, so the last one counts. There is no closing
event: a stream that ends without a finish reason is an error, not a shorter answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

from codesearch.llm import sse
from codesearch.llm.dialects import NewId, OnText, add_turn, replace_path_end
from codesearch.llm.spec import ModelSpec, Reply, object_call

#: Schema keywords the API accepts in function parameters.
SCHEMA_KEYWORDS = {
    "type",
    "format",
    "description",
    "nullable",
    "enum",
    "properties",
    "required",
    "items",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "anyOf",
}
STREAM_TYPE = "text/event-stream"
_TOOL_MODES = {"none": "NONE", "auto": "AUTO", "required": "ANY", "any": "ANY"}


def parameters(schema: Any) -> Any:
    """A JSON schema as function parameters: unknown keywords dropped, ``anyOf [X, null]`` as nullable X."""
    if isinstance(schema, list):
        return [parameters(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    branches = schema.get("anyOf")
    if isinstance(branches, list):
        rest = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        if len(rest) == 1 and len(rest) < len(branches):
            merged = {**{k: v for k, v in schema.items() if k != "anyOf"}, **rest[0], "nullable": True}
            return parameters(merged)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in SCHEMA_KEYWORDS:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: parameters(v) for name, v in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = parameters(value)
        elif key == "type" and isinstance(value, list):
            kinds = [t for t in value if t != "null"]
            out["type"] = kinds[0] if kinds else "string"
            if "null" in value:
                out["nullable"] = True
        else:
            out[key] = value
    return out


def body(
    spec: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]], tool_choice: str | None
) -> dict[str, Any]:
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # tool call id -> function name, for the responses

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        add_turn(contents, role, blocks, key="parts")

    for msg in messages:
        role, content = msg.get("role"), msg.get("content") or ""
        if role == "system":
            system.append(content)
        elif role == "user":
            add("user", [{"text": content or "(empty)"}])
        elif role == "assistant":
            parts: list[dict[str, Any]] = [{"text": content}] if content else []
            for c in msg.get("tool_calls") or []:
                names[c.id] = c.name
                parts.append({"functionCall": {"name": c.name, "args": c.arguments}})
            add("model", parts or [{"text": "(empty)"}])
        elif role == "tool":
            result = {"error": content} if msg.get("is_error") else {"content": content}
            name = names.get(msg["tool_call_id"])
            if name is None:
                raise ValueError(f"tool result {msg['tool_call_id']!r} answers no earlier tool call")
            add("user", [{"functionResponse": {"name": name, "response": result}}])
        else:
            raise ValueError(f"unknown message role {role!r}")
    data: dict[str, Any] = {"contents": contents}
    if system:
        data["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if tools:
        data["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t["name"],
                        "description": t.get("description", ""),
                        "parameters": parameters(t.get("input_schema") or {"type": "object", "properties": {}}),
                    }
                    for t in tools
                ]
            }
        ]
        if tool_choice in _TOOL_MODES:
            data["toolConfig"] = {"functionCallingConfig": {"mode": _TOOL_MODES[tool_choice]}}
    generation: dict[str, Any] = {}
    if spec.temperature is not None:
        generation["temperature"] = spec.temperature
    thinking = {k: spec.options[k] for k in ("thinkingLevel", "thinkingBudget") if spec.options.get(k) is not None}
    if thinking:
        generation["thinkingConfig"] = thinking
    if generation:
        data["generationConfig"] = generation
    return data


def reply(spec: ModelSpec, data: Any, new_id: Callable[[], str]) -> Reply:
    if not isinstance(data, dict):
        raise ValueError("the answer is not an object")
    candidates = data.get("candidates")
    if not isinstance(candidates, list) or not candidates:
        blocked = (data.get("promptFeedback") or {}).get("blockReason")
        raise ValueError(f"no candidates (the prompt was blocked: {blocked})" if blocked else "no candidates")
    candidate = candidates[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    texts, calls = [], []
    for part in parts:
        if part.get("thought"):
            continue
        if "functionCall" in part:
            fc = part["functionCall"]
            calls.append(object_call(str(fc.get("id") or new_id()), str(fc["name"]), fc.get("args", {})))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    u = data.get("usageMetadata") or {}
    usage = {
        "input_tokens": int(u.get("promptTokenCount") or 0),
        "output_tokens": int(u.get("candidatesTokenCount") or 0) + int(u.get("thoughtsTokenCount") or 0),
    }
    return Reply(text="".join(texts), tool_calls=calls, usage=usage, stop_reason=candidate.get("finishReason"))


def stream_url(url: str) -> str:
    return replace_path_end(url, ":generateContent", ":streamGenerateContent", query="alt=sse")


def stream_body(spec: ModelSpec, body: dict[str, Any]) -> dict[str, Any]:
    return body


def read_stream(spec: ModelSpec, response: httpx.Response, on_text: OnText, new_id: NewId) -> Reply:
    parts: list[dict[str, Any]] = []
    finish = None
    last: dict[str, Any] = {}
    usage: dict[str, Any] = {}
    seen_candidate = False
    for _, chunk in sse.events(response.iter_lines()):
        last, usage = chunk, chunk.get("usageMetadata") or usage
        for candidate in (chunk.get("candidates") or [])[:1]:
            seen_candidate = True
            for part in (candidate.get("content") or {}).get("parts") or []:
                parts.append(part)
                if isinstance(part.get("text"), str) and part["text"] and not part.get("thought"):
                    on_text(part["text"])
            finish = candidate.get("finishReason") or finish
    if not seen_candidate:  # a blocked prompt: the plain answer's error
        return reply(spec, last, new_id)
    if finish is None:
        raise sse.StreamError("ended its stream before the answer was complete (no finishReason)")
    data = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}],
        "usageMetadata": usage,
    }
    return reply(spec, data, new_id)
