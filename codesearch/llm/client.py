"""One HTTP client for the language models of the config's `models` (SPEC §2.5).

    spec = ModelSpec.from_config(config.models[0].raw)      # or a LanguageModel
    with ModelClient(spec) as client:
        reply = client.chat([{"role": "user", "content": "hi"}], tools=[])
        reply.text, reply.tool_calls, reply.usage

The conversation is provider-neutral:

* a message is ``{"role": "system" | "user" | "assistant" | "tool", "content": str}``; an
  assistant message may carry ``"tool_calls": [ToolCall, ...]``, a tool message carries
  ``"tool_call_id"`` (and ``"is_error": bool``, optional);
* a tool spec is ``{"name", "description", "input_schema": <JSON schema of the arguments>}``.

Providers. ``openai`` and the OpenAI-shaped ``openai-compatible`` (which requires `baseUrl`),
``deepseek``, ``mistral``, ``openrouter`` and ``xai`` speak Chat Completions
(``POST <base>/chat/completions``, ``Authorization: Bearer``); ``anthropic`` speaks the Messages
API (``POST <base>/v1/messages``, ``x-api-key``, ``anthropic-version: 2023-06-01``). Other
providers of the schema are refused with a `ModelError` when the client is built.

Tokens. A configured `token` is a reference, resolved with the config loader's resolver when the
first request is made (a missing variable is a `ModelError` naming the variable); without one,
the provider's usual variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...) is used when set.
Header values and ``queryParams`` values may be token references too.

Errors. Everything that goes wrong (unreachable, timeout, an HTTP error status, a body that is
not JSON or not of the expected shape, a token that cannot be resolved) is a `ModelError` whose
message names the model and says what happened, e.g. ``language model gpt-4o (openai) answered
401: invalid api key``. Messages never contain a token or a stack trace: resolved secrets are
masked out of any text the provider sends back, and URLs lose their credentials and query.
429 and 5xx answers are retried once, after ``Retry-After`` (capped) or a short backoff.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

import httpx

from codesearch.errors import CodesearchError

#: Chat Completions providers: default base URL (None: `baseUrl` is required) and default token variable.
OPENAI_SHAPED: dict[str, tuple[str | None, str | None]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "openai-compatible": (None, None),
    "deepseek": ("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "mistral": ("https://api.mistral.ai/v1", "MISTRAL_API_KEY"),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "xai": ("https://api.x.ai/v1", "XAI_API_KEY"),
}
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_TOKEN_ENV = "ANTHROPIC_API_KEY"
#: Every provider `ModelClient` can talk to.
SUPPORTED_PROVIDERS: tuple[str, ...] = (*OPENAI_SHAPED, "anthropic")

DEFAULT_TIMEOUT_S = 120.0
#: `max_tokens` of Anthropic requests (the API requires one).
ANTHROPIC_MAX_TOKENS = 4096
_MAX_ERROR_TEXT = 300


class ModelError(CodesearchError):
    """A language model could not be used: the message names the model and says why (never a token)."""

    error_code = "MODEL_ERROR"
    status_code = 502
    #: the message is written for clients (the HTTP API shows it despite the 5xx status)
    expose = True

    def __init__(self, message: str, model: str = "", status: int | None = None):
        self.model = model
        self.status = status
        super().__init__(message)

    def __reduce__(self):  # rebuilt from its fields when it crosses a process boundary (Ray)
        return (type(self), (self.args[0], self.model, self.status))


@dataclass
class ModelSpec:
    """One configured model, as the client needs it. `token` and header values are token
    *references* (``{"env": NAME}`` / ``{"googleCloudSecret": ...}``), never secrets."""

    provider: str
    model: str
    display_name: str | None = None
    base_url: str | None = field(default=None, repr=False)  # may hold credentials
    temperature: float | None = None
    headers: dict[str, Any] = field(default_factory=dict, repr=False)
    token: dict[str, str] | None = None
    #: ``openai-compatible``'s `queryParams` (values: strings or token references).
    query_params: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_config(cls, entry: Any) -> "ModelSpec":
        """From one raw `models` entry (camelCase keys, as in the file) or a `LanguageModel`."""
        raw = getattr(entry, "raw", entry)
        if not isinstance(raw, Mapping) or not raw.get("provider") or not raw.get("model"):
            raise ModelError("a language model entry needs a provider and a model")
        token = raw.get("token")
        temperature = raw.get("temperature")
        return cls(
            provider=str(raw["provider"]), model=str(raw["model"]), display_name=raw.get("displayName") or None,
            base_url=raw.get("baseUrl") or None,
            temperature=float(temperature) if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) else None,
            headers=dict(raw.get("headers") or {}), token=dict(token) if isinstance(token, Mapping) else None,
            query_params=dict(raw.get("queryParams") or {}),
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


def _safe_url(url: str) -> str:
    """`url` without credentials, query or fragment (for error messages)."""
    try:
        p = urllib.parse.urlsplit(url)
    except ValueError:
        return "<invalid URL>"
    netloc = p.hostname or ""
    if p.port:
        netloc += f":{p.port}"
    return urllib.parse.urlunsplit((p.scheme, netloc, p.path, "", ""))


def _join(base: str, path: str) -> str:
    """`path` appended to the path of `base` (a query string in `base` stays at the end)."""
    p = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + path, p.query, p.fragment))


def _retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header (seconds or an HTTP date), None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


class ModelClient:
    """Talks to one configured model. Thread-safe as far as the `httpx.Client` is (it is).

    `http`: a client to use (not closed by `close()`); else one is made with `timeout_s`.
    `environ` is where ``{"env": NAME}`` references are read. `retry_wait_s` is the backoff
    before the one retry of a 429/5xx without ``Retry-After``; ``Retry-After`` is honoured up to
    `max_retry_wait_s` (longer: no retry). `sleep` is injectable for tests.
    """

    def __init__(self, spec: ModelSpec, *, http: httpx.Client | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 environ: Mapping[str, str] | None = None, retry_wait_s: float = 1.0, max_retry_wait_s: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep):
        if spec.provider not in SUPPORTED_PROVIDERS:
            raise ModelError(f"language model {spec.label}: provider {spec.provider!r} is not supported by this "
                             f"server (supported: {', '.join(SUPPORTED_PROVIDERS)})", model=spec.model)
        if spec.provider == "openai-compatible" and not spec.base_url:
            raise ModelError(f"language model {spec.label}: baseUrl is required for provider openai-compatible",
                             model=spec.model)
        self.spec = spec
        self.timeout_s = float(timeout_s)
        self.environ = os.environ if environ is None else environ
        self.retry_wait_s = retry_wait_s
        self.max_retry_wait_s = max_retry_wait_s
        self.sleep = sleep
        self._own_http = http is None
        self.http = http if http is not None else httpx.Client(follow_redirects=False)
        self._secrets: list[str] = []  # resolved values, masked out of every error message
        if spec.base_url:  # credentials written into the URL itself
            try:
                parts = urllib.parse.urlsplit(spec.base_url)
                self._secrets += [parts.password or ""] + [v for _, v in urllib.parse.parse_qsl(parts.query)]
            except ValueError:
                pass
        self._auth: tuple[dict[str, str], dict[str, str]] | None = None  # (headers, query params), once resolved

    def close(self) -> None:
        if self._own_http:
            self.http.close()

    def __enter__(self) -> "ModelClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ the one call

    def chat(self, messages: list[dict], tools: list[dict] | None = None, *, tool_choice: str | None = None) -> Reply:
        """One model turn for the conversation so far. `tool_choice` ``"none"`` asks for an answer
        without tool calls (the tools stay declared: the history may hold tool calls)."""
        tools = list(tools or [])
        if self.spec.provider == "anthropic":
            url, body = self._anthropic_request(messages, tools, tool_choice)
        else:
            url, body = self._openai_request(messages, tools, tool_choice)
        data = self._post(url, body)
        try:
            return self._anthropic_reply(data) if self.spec.provider == "anthropic" else self._openai_reply(data)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            raise self._error(f"answered with an unexpected response ({type(e).__name__}: {self._mask(str(e))[:100]})"
                              ) from None

    # ------------------------------------------------------------------ OpenAI Chat Completions

    def _openai_request(self, messages: list[dict], tools: list[dict], tool_choice: str | None) -> tuple[str, dict]:
        base = self.spec.base_url or OPENAI_SHAPED[self.spec.provider][0] or ""
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
        body: dict[str, Any] = {"model": self.spec.model, "messages": out}
        if tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t["name"], "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}} for t in tools]
            if tool_choice:
                body["tool_choice"] = tool_choice
        if self.spec.temperature is not None:
            body["temperature"] = self.spec.temperature
        return _join(base, "/chat/completions"), body

    def _openai_reply(self, data: Any) -> Reply:
        if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
            raise ValueError("no choices")
        choice = data["choices"][0]
        message = choice["message"]
        if not isinstance(message, dict):
            raise TypeError("message is not an object")
        text = message.get("content") or ""
        if not isinstance(text, str):  # some servers send content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        calls = []
        for i, tc in enumerate(message.get("tool_calls") or []):
            fn = tc["function"]
            calls.append(_parse_call(str(tc.get("id") or f"call_{i}"), str(fn["name"]), fn.get("arguments")))
        u = data.get("usage") or {}
        usage = {"input_tokens": int(u.get("prompt_tokens") or 0), "output_tokens": int(u.get("completion_tokens") or 0)}
        return Reply(text=text, tool_calls=calls, usage=usage, stop_reason=choice.get("finish_reason"))

    # ------------------------------------------------------------------ Anthropic Messages

    def _anthropic_request(self, messages: list[dict], tools: list[dict], tool_choice: str | None) -> tuple[str, dict]:
        base = self.spec.base_url or ANTHROPIC_BASE_URL
        # both "https://api.anthropic.com" and "https://api.anthropic.com/v1" work as baseUrl
        suffix = "/messages" if urllib.parse.urlsplit(base).path.rstrip("/").endswith("/v1") else "/v1/messages"
        system: list[str] = []
        out: list[dict] = []

        def add(role: str, blocks: list[dict]) -> None:
            if out and out[-1]["role"] == role:  # tool results and the next user text share one turn
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": role, "content": blocks})

        for msg in messages:
            role, content = msg.get("role"), msg.get("content") or ""
            if role == "system":
                system.append(content)
            elif role == "user":
                add("user", [{"type": "text", "text": content or "(empty)"}])
            elif role == "assistant":
                blocks: list[dict] = [{"type": "text", "text": content}] if content else []
                blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                           for c in msg.get("tool_calls") or []]
                add("assistant", blocks or [{"type": "text", "text": "(empty)"}])
            elif role == "tool":
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg["tool_call_id"], "content": content}
                if msg.get("is_error"):
                    block["is_error"] = True
                add("user", [block])
            else:
                raise ValueError(f"unknown message role {role!r}")
        body: dict[str, Any] = {"model": self.spec.model, "max_tokens": ANTHROPIC_MAX_TOKENS, "messages": out}
        if system:
            body["system"] = "\n\n".join(system)
        if tools:
            body["tools"] = [{"name": t["name"], "description": t.get("description", ""),
                              "input_schema": t.get("input_schema") or {"type": "object", "properties": {}}}
                             for t in tools]
            if tool_choice:
                body["tool_choice"] = {"type": tool_choice}
        if self.spec.temperature is not None:
            body["temperature"] = self.spec.temperature
        return _join(base, suffix), body

    def _anthropic_reply(self, data: Any) -> Reply:
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise ValueError("no content")
        texts, calls = [], []
        for block in data["content"]:
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text") or ""))
            elif kind == "tool_use":
                args = block.get("input")
                if isinstance(args, dict):
                    calls.append(ToolCall(id=str(block["id"]), name=str(block["name"]), arguments=args))
                else:
                    calls.append(ToolCall(id=str(block["id"]), name=str(block["name"]), arguments={},
                                          error="the tool input must be a JSON object"))
        u = data.get("usage") or {}
        usage = {"input_tokens": int(u.get("input_tokens") or 0), "output_tokens": int(u.get("output_tokens") or 0)}
        return Reply(text="".join(texts), tool_calls=calls, usage=usage, stop_reason=data.get("stop_reason"))

    # ------------------------------------------------------------------ HTTP

    def _credentials(self) -> tuple[dict[str, str], dict[str, str]]:
        """(auth + configured headers, query params), with every token reference resolved."""
        if self._auth is not None:
            return self._auth
        spec = self.spec
        anthropic = spec.provider == "anthropic"
        token = None
        if spec.token is not None:
            token = self._resolve(spec.token, "token")
        else:
            var = ANTHROPIC_TOKEN_ENV if anthropic else OPENAI_SHAPED[spec.provider][1]
            value = (self.environ.get(var) or "").strip() if var else ""
            token = value or None
        if token:
            self._secrets.append(token)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if anthropic:
            headers["anthropic-version"] = ANTHROPIC_VERSION
            if token:
                headers["x-api-key"] = token
        elif token:
            headers["Authorization"] = f"Bearer {token}"
        for name, value in spec.headers.items():
            if isinstance(value, Mapping):
                value = self._resolve(value, f"headers.{name}")
                self._secrets.append(value)
            headers[str(name)] = str(value)
        params = {}
        for name, value in spec.query_params.items():
            if isinstance(value, Mapping):
                value = self._resolve(value, f"queryParams.{name}")
                self._secrets.append(value)
            params[str(name)] = str(value)
        self._auth = (headers, params)
        return self._auth

    def _resolve(self, reference: Mapping[str, str], where: str) -> str:
        from codesearch.config.loader import _resolve as resolve_reference  # the loader's own token resolver
        from codesearch.errors import ConfigError

        try:
            return resolve_reference(dict(reference), source=f"language model {self.spec.label}", path=where,
                                     environ=self.environ)
        except ConfigError as e:
            raise self._error("cannot be used: " + "; ".join(e.problems)) from None

    def _post(self, url: str, body: dict) -> Any:
        headers, params = self._credentials()
        shown = _safe_url(url)
        retried = False
        while True:
            try:
                r = self.http.post(url, json=body, headers=headers, params=params or None,
                                   timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)))
            except httpx.TimeoutException:
                raise self._error(f"did not answer within {self.timeout_s:g}s ({shown})") from None
            except httpx.ConnectError as e:
                reason = "connection refused" if "refused" in str(e).lower() else self._mask(str(e))[:120] or "connection failed"
                raise self._error(f"cannot be reached at {shown}: {reason}") from None
            except httpx.HTTPError as e:
                raise self._error(f"request to {shown} failed: {type(e).__name__}") from None
            if r.is_success:
                break
            if (r.status_code == 429 or r.status_code >= 500) and not retried:
                wait = _retry_after(r.headers.get("retry-after"))
                if wait is None:
                    wait = self.retry_wait_s
                if wait <= self.max_retry_wait_s:
                    retried = True
                    self.sleep(wait)
                    continue
            raise self._error(f"answered {r.status_code}: {self._error_text(r)}", status=r.status_code)
        try:
            return r.json()
        except ValueError:
            raise self._error(f"answered {r.status_code} with a body that is not JSON "
                              f"(content-type {r.headers.get('content-type') or 'none'})", status=r.status_code) from None

    def _error_text(self, r: httpx.Response) -> str:
        """The provider's own error message ({"error": {"message"}} in both APIs), else the reason."""
        text = ""
        try:
            data = r.json()
        except ValueError:
            data = None
        if isinstance(data, dict):
            err = data.get("error")
            if isinstance(err, dict):
                text = str(err.get("message") or err.get("type") or "")
            elif isinstance(err, str):
                text = err
            elif isinstance(data.get("message"), str):
                text = data["message"]
        if not text:
            text = r.reason_phrase or "error"
        text = " ".join(self._mask(text).split())
        return text[:_MAX_ERROR_TEXT] + ("…" if len(text) > _MAX_ERROR_TEXT else "")

    def _mask(self, text: str) -> str:
        for secret in self._secrets:
            if secret and len(secret) >= 4:
                text = text.replace(secret, "***")
        return text

    def _error(self, what: str, status: int | None = None) -> ModelError:
        return ModelError(f"language model {self.spec.label} {what}", model=self.spec.model, status=status)


def _parse_call(call_id: str, name: str, arguments: Any) -> ToolCall:
    """A Chat Completions tool call: `arguments` is a JSON string (an object, or empty for none)."""
    if isinstance(arguments, dict):
        return ToolCall(id=call_id, name=name, arguments=arguments)
    raw = "" if arguments is None else str(arguments)
    if not raw.strip():
        return ToolCall(id=call_id, name=name, arguments={}, raw_arguments=raw or "{}")
    try:
        value = json.loads(raw)
    except ValueError as e:
        return ToolCall(id=call_id, name=name, arguments={}, raw_arguments=raw,
                        error=f"the arguments of this {name} call are not valid JSON ({e.msg} at character {e.pos + 1}); "
                              "call the tool again with a JSON object of arguments")
    if not isinstance(value, dict):
        return ToolCall(id=call_id, name=name, arguments={}, raw_arguments=raw,
                        error=f"the arguments of this {name} call must be a JSON object, not {type(value).__name__}")
    return ToolCall(id=call_id, name=name, arguments=value, raw_arguments=raw)
