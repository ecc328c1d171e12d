"""Amazon Bedrock's Converse API (amazon-bedrock).

``POST <base>/model/<model id>/converse`` with ``{"messages", "system", "toolConfig",
"inferenceConfig"}``, signed with AWS Signature V4 (`codesearch.llm.sigv4`). Roles alternate
user/assistant and content is a list of blocks: ``{"text"}``, ``{"toolUse": {"toolUseId",
"name", "input"}}`` from the assistant, ``{"toolResult": {"toolUseId", "content", "status"}}``
in the next user turn. Converse has no way to forbid tool calls while tools are declared, so
a request for an answer without tools sends the tools (the history needs them) and the agent
copes with a model that calls one anyway.
"""

from __future__ import annotations

from typing import Any, Callable

from codesearch.llm.dialects import add_turn
from codesearch.llm.spec import ModelSpec, Reply, object_call


def body(spec: ModelSpec, messages: list[dict], tools: list[dict], tool_choice: str | None) -> dict[str, Any]:
    system: list[dict] = []
    out: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        add_turn(out, role, blocks)

    for msg in messages:
        role, content = msg.get("role"), msg.get("content") or ""
        if role == "system":
            system.append({"text": content})
        elif role == "user":
            add("user", [{"text": content or "(empty)"}])
        elif role == "assistant":
            blocks: list[dict] = [{"text": content}] if content else []
            blocks += [{"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}}
                       for c in msg.get("tool_calls") or []]
            add("assistant", blocks or [{"text": "(empty)"}])
        elif role == "tool":
            add("user", [{"toolResult": {"toolUseId": msg["tool_call_id"], "content": [{"text": content or "(empty)"}],
                                         "status": "error" if msg.get("is_error") else "success"}}])
        else:
            raise ValueError(f"unknown message role {role!r}")
    data: dict[str, Any] = {"messages": out}
    if system:
        data["system"] = system
    if tools:
        data["toolConfig"] = {"tools": [{"toolSpec": {
            "name": t["name"], "description": t.get("description", "") or t["name"],
            "inputSchema": {"json": t.get("input_schema") or {"type": "object", "properties": {}}}}} for t in tools]}
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
