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
"""

from __future__ import annotations

from typing import Any, Callable

from codesearch.llm.dialects import add_turn
from codesearch.llm.spec import ModelSpec, Reply, object_call

#: Schema keywords the API accepts in function parameters.
SCHEMA_KEYWORDS = {"type", "format", "description", "nullable", "enum", "properties", "required", "items",
                   "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "anyOf"}
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


def body(spec: ModelSpec, messages: list[dict], tools: list[dict], tool_choice: str | None) -> dict[str, Any]:
    system: list[str] = []
    contents: list[dict] = []
    names: dict[str, str] = {}  # tool call id -> function name, for the responses

    def add(role: str, blocks: list[dict]) -> None:
        add_turn(contents, role, blocks, key="parts")

    for msg in messages:
        role, content = msg.get("role"), msg.get("content") or ""
        if role == "system":
            system.append(content)
        elif role == "user":
            add("user", [{"text": content or "(empty)"}])
        elif role == "assistant":
            parts: list[dict] = [{"text": content}] if content else []
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
        data["tools"] = [{"functionDeclarations": [
            {"name": t["name"], "description": t.get("description", ""),
             "parameters": parameters(t.get("input_schema") or {"type": "object", "properties": {}})}
            for t in tools]}]
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
    usage = {"input_tokens": int(u.get("promptTokenCount") or 0),
             "output_tokens": int(u.get("candidatesTokenCount") or 0) + int(u.get("thoughtsTokenCount") or 0)}
    return Reply(text="".join(texts), tool_calls=calls, usage=usage, stop_reason=candidate.get("finishReason"))
