"""The provider-neutral pieces every dialect shares: a configured model, tool calls, replies, errors.

A conversation is a list of messages ``{"role": "system" | "user" | "assistant" | "tool",
"content": str}``; an assistant message may carry ``"tool_calls": [ToolCall, ...]``, a tool
message carries ``"tool_call_id"`` (and ``"is_error": bool``, optional). A tool spec is
``{"name", "description", "input_schema": <JSON schema of the arguments>}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codesearch.errors import CodesearchError

#: Fields of a `models` entry that `ModelSpec` holds as attributes; the rest go to `options`.
COMMON_FIELDS = ("provider", "model", "displayName", "baseUrl", "temperature", "headers", "token", "queryParams")


class ModelError(CodesearchError):
    """A language model could not be used: the message names the model and says why (never a token)."""

    error_code = "MODEL_ERROR"
    status_code = 502
    #: the message is written for clients (the HTTP API shows it despite the 5xx status)
    expose = True

    #: set on a chat question that failed (`codesearch.tools.ask_chat.run`): the stored `Chat`
    #: and the turn the failure was stored as (absent otherwise)
    chat: Any
    turn: int

    def __init__(self, message: str, model: str = "", status: int | None = None):
        self.model = model
        self.status = status
        super().__init__(message)

    def __reduce__(
        self,
    ) -> tuple[
        type[ModelError], tuple[str, str, int | None]
    ]:  # rebuilt from its fields when it crosses a process boundary (Ray)
        return (type(self), (self.args[0], self.model, self.status))


@dataclass
class ModelSpec:
    """One configured model, as the client needs it. `token`, header values and token-typed
    `options` are token *references* (``{"env": NAME}`` / ``{"googleCloudSecret": ...}``),
    never secrets."""

    provider: str
    model: str
    display_name: str | None = None
    base_url: str | None = field(default=None, repr=False)  # may hold credentials
    temperature: float | None = None
    headers: dict[str, Any] = field(default_factory=dict, repr=False)
    token: dict[str, str] | None = None
    #: ``openai-compatible``'s `queryParams` (values: strings or token references).
    query_params: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The provider's own fields, named as in the config file (``authToken``, ``reasoningEffort``,
    #: ``thinkingBudget``, ``region``, ``accessKeyId``, ...).
    options: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_config(cls, entry: Any) -> ModelSpec:
        """From one raw `models` entry (camelCase keys, as in the file) or a `LanguageModel`."""
        raw = getattr(entry, "raw", entry)
        if not isinstance(raw, Mapping) or not raw.get("provider") or not raw.get("model"):
            raise ModelError("a language model entry needs a provider and a model")
        token = raw.get("token")
        temperature = raw.get("temperature")
        return cls(
            provider=str(raw["provider"]),
            model=str(raw["model"]),
            display_name=raw.get("displayName") or None,
            base_url=raw.get("baseUrl") or None,
            temperature=float(temperature)
            if isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
            else None,
            headers=dict(raw.get("headers") or {}),
            token=dict(token) if isinstance(token, Mapping) else None,
            query_params=dict(raw.get("queryParams") or {}),
            options={k: v for k, v in raw.items() if k not in COMMON_FIELDS},
        )

    @property
    def name(self) -> str:
        """What users see: `displayName`, else `model`."""
        return self.display_name or self.model

    @property
    def label(self) -> str:
        """How errors name the model: ``gpt-4o (openai)``."""
        return f"{self.model} ({self.provider})"

    def public(self) -> dict[str, str]:
        """What callers may see (``list_language_models``): never tokens, headers or URLs."""
        return {"provider": self.provider, "model": self.model, "displayName": self.name}


@dataclass
class ToolCall:
    """A tool call the model asked for. When the model's arguments were not a JSON object,
    `arguments` is empty and `error` says what was wrong (the agent reports it to the model);
    `raw_arguments` keeps the text as the model wrote it, to send it back unchanged."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    raw_arguments: str | None = field(default=None, repr=False)


@dataclass
class Reply:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: ``{"input_tokens": int, "output_tokens": int}`` as the provider reported them.
    usage: dict[str, int] = field(default_factory=dict)
    #: The provider's reason for stopping (``stop``, ``tool_calls``, ``end_turn``, ``max_tokens``, ...).
    stop_reason: str | None = None


def object_call(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A tool call whose arguments arrive as a JSON value (Anthropic, Gemini, Bedrock): an object,
    or an error for the model."""
    if isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, arguments=arguments)
    return ToolCall(id=call_id, name=name, arguments={}, error="the tool input must be a JSON object")


def text_call(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A Chat Completions tool call: `arguments` is a JSON string (an object, or empty for none)."""
    if isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, arguments=arguments)
    raw = "" if arguments is None else str(arguments)
    if not raw.strip():
        return ToolCall(id=call_id, name=name, arguments={}, raw_arguments=raw or "{}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        return ToolCall(
            id=call_id,
            name=name,
            arguments={},
            raw_arguments=raw,
            error=f"the arguments of this {name} call are not valid JSON ({e.msg} at character {e.pos + 1}); "
            "call the tool again with a JSON object of arguments",
        )
    if not isinstance(value, dict):
        return ToolCall(
            id=call_id,
            name=name,
            arguments={},
            raw_arguments=raw,
            error=f"the arguments of this {name} call must be a JSON object, not {type(value).__name__}",
        )
    return ToolCall(id=call_id, name=name, arguments=value, raw_arguments=raw)
