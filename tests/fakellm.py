"""A scripted language model on ``127.0.0.1``: OpenAI Chat Completions and Anthropic Messages.

    script = [
        [("grep", {"pattern": "retry"})],                         # turn 1: call tools
        lambda messages: f"See {tool_outputs(messages)[-1]}",     # turn 2: answer from what the tools found
    ]
    with FakeModelServer(script, api_key="sk-test") as fake:
        spec = ModelSpec("openai", "gpt-4o", base_url=fake.base_url + "/v1", token={"env": "KEY"})
        ...
        fake.requests[0]["headers"]["authorization"], fake.requests[0]["body"]["tools"]

Endpoints: ``POST /v1/chat/completions`` (OpenAI shape) and ``POST /v1/messages`` (Anthropic
shape). Each answered request plays the next script step, whatever the endpoint:

* a list of tool calls ``[(name, arguments), ...]``; `arguments` is a dict, or a string sent
  as it is (OpenAI: the ``arguments`` text, so it may be invalid JSON; Anthropic: the ``input``);
* a string: the final answer;
* ``{"text": str, "tool_calls": [...]}``: both at once;
* a callable ``f(messages) -> step``: `messages` is the request's conversation normalized to the
  provider-neutral shape of `codesearch.llm.client` (tool calls as ``{"id", "name",
  "arguments"}``), so a test can answer from real tool results (`tool_outputs`).

A script that has run out answers 500 (``script exhausted``), so a test notices extra calls.

The fake checks requests as the real APIs do and answers 400 with an error message otherwise:
required fields and types, roles, tool call ids answered by matching tool results (and nothing
else), Anthropic's alternating roles, non-empty text blocks and `anthropic-version`. With
`api_key`, a missing or wrong key is 401 — and the message echoes the key that was sent, as a
careless server might, so tests can check that clients never repeat it.

Every request is recorded in `requests` (``{"path", "query", "headers" (lower-case names),
"body" (parsed JSON, or None), "status"}``), answered or not. Faults, used before the script:
`fail(status, times=, headers=, body=)` (from `FakeServer`), `hang(seconds, times=)` (answer
after a delay, e.g. past the client's timeout), `send_invalid_json(times=)` (a 200 whose body
is not JSON).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

from tests.fakehosts.server import FakeServer, read_body, send, split_query

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
ANTHROPIC_VERSION = "2023-06-01"

Step = Any  # list of (name, arguments) | str | dict | Callable[[list[dict]], "Step"]


class BadRequest(Exception):
    """The request is not what the real API accepts (answered 400 with this message)."""


def tool_outputs(messages: list[dict]) -> list[str]:
    """The contents of the tool results in a normalized conversation, oldest first."""
    return [m["content"] for m in messages if m["role"] == "tool"]


def last_user_text(messages: list[dict]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


class FakeModelServer(FakeServer):
    methods = ("POST",)

    def __init__(self, script: list[Step] | None = None, *, api_key: str | None = None):
        super().__init__()
        self.script: list[Step] = list(script or [])
        self.api_key = api_key
        self.requests: list[dict] = []  # type: ignore[assignment]
        self._hangs: list[list[float]] = []  # [[seconds, times]]
        self._invalid_json = 0
        self._ids = itertools.count(1)
        self._script_lock = threading.Lock()

    # -- configuration ----------------------------------------------------------------------

    def add(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._script_lock:
            self.script.extend(steps)

    def hang(self, seconds: float, *, times: int = 1) -> None:
        """Answer the next `times` requests only after `seconds`."""
        with self._lock:
            self._hangs.append([seconds, times])

    def send_invalid_json(self, *, times: int = 1) -> None:
        """Answer the next `times` requests 200 with a body that is not JSON."""
        with self._lock:
            self._invalid_json += times

    def _fault_body(self, status: int) -> object:
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": f"fake {kind} ({status})"}}

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._hangs.clear()
            self._invalid_json = 0

    def api_paths(self) -> list[str]:
        return [r["path"] for r in self.requests]

    @property
    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]

    @property
    def remaining(self) -> int:
        """Script steps not played yet."""
        return len(self.script)

    # -- answering --------------------------------------------------------------------------

    def handle(self, h) -> None:
        path, query, _ = split_query(h.path)
        raw = read_body(h)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = {"path": path, "query": query, "headers": {k.lower(): v for k, v in h.headers.items()},
                  "body": body, "status": None}
        with self._lock:
            self.requests.append(record)
            delay = 0.0
            for entry in self._hangs:
                if entry[1] > 0:
                    entry[1] -= 1
                    delay = entry[0]
                    break
            invalid = self._invalid_json > 0
            if invalid:
                self._invalid_json -= 1
        if delay:
            time.sleep(delay)
        status, headers, payload = self._respond(path, record, raw, invalid)
        record["status"] = status
        try:
            send(h, status, payload, {"Content-Type": "application/json", **headers})
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def _respond(self, path: str, record: dict, raw: bytes, invalid: bool) -> tuple[int, dict, Any]:
        fault = self._fault(path)
        if fault is not None:
            return fault
        if invalid:
            return 200, {}, b'{"choices": [ this is not JSON'
        if path not in (OPENAI_PATH, ANTHROPIC_PATH):
            return 404, {}, {"error": {"type": "not_found_error", "message": f"no route {path}"}}
        anthropic = path == ANTHROPIC_PATH
        headers = record["headers"]
        body = record["body"]
        if self.api_key is not None:
            sent = headers.get("x-api-key") if anthropic else (headers.get("authorization") or "").removeprefix("Bearer ")
            if sent != self.api_key:
                shown = f"Incorrect API key provided: {sent}" if sent else "missing api key"
                return 401, {}, _error_body("authentication_error", shown)
        try:
            if "application/json" not in headers.get("content-type", ""):
                raise BadRequest("content-type must be application/json")
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object" + (" (it is not JSON)" if raw else ""))
            messages = check_anthropic(headers, body) if anthropic else check_openai(body)
        except BadRequest as e:
            return 400, {}, _error_body("invalid_request_error", str(e))
        with self._script_lock:
            step = self.script.pop(0) if self.script else None
        if step is None:
            return 500, {}, _error_body("api_error", "fake: script exhausted")
        while callable(step):
            step = step(messages)
        text, calls = _split_step(step)
        n_in = len(raw) // 4
        if anthropic:
            content: list[dict] = [{"type": "text", "text": text}] if text else []
            for name, args in calls:
                content.append({"type": "tool_use", "id": f"toolu_{next(self._ids):04d}", "name": name, "input": args})
            return 200, {}, {"id": f"msg_{next(self._ids)}", "type": "message", "role": "assistant",
                             "model": body["model"], "content": content,
                             "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
                             "usage": {"input_tokens": n_in, "output_tokens": len(text) // 4 + 10 * len(calls)}}
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [{"id": f"call_{next(self._ids):04d}", "type": "function", "function": {
                "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}} for name, args in calls]
        out_tokens = len(text) // 4 + 10 * len(calls)
        return 200, {}, {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
                         "model": body["model"],
                         "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                         "usage": {"prompt_tokens": n_in, "completion_tokens": out_tokens, "total_tokens": n_in + out_tokens}}


def _error_body(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _split_step(step: Step) -> tuple[str, list[tuple[str, Any]]]:
    if isinstance(step, str):
        return step, []
    if isinstance(step, dict):
        return step.get("text") or "", [tuple(c) for c in step.get("tool_calls") or []]
    if isinstance(step, (list, tuple)):
        return "", [tuple(c) for c in step]
    raise TypeError(f"a script step is a list of tool calls, a string, a dict or a callable, not {type(step).__name__}")


# ------------------------------------------------------------------------------ request checks

def _require(cond: bool, message: str) -> None:
    if not cond:
        raise BadRequest(message)


def _check_schema(schema: Any, where: str) -> None:
    _require(isinstance(schema, dict) and schema.get("type") == "object", f"{where}: must be a JSON schema of type object")


def check_openai(body: dict) -> list[dict]:
    """Check a Chat Completions request; return its conversation, normalized."""
    _require(isinstance(body.get("model"), str) and body["model"], "model: required string")
    messages = body.get("messages")
    _require(isinstance(messages, list) and messages, "messages: required non-empty array")
    tools = body.get("tools")
    if tools is not None:
        _require(isinstance(tools, list) and tools, "tools: must be a non-empty array when present")
        for i, t in enumerate(tools):
            _require(isinstance(t, dict) and t.get("type") == "function", f"tools[{i}].type: must be 'function'")
            fn = t.get("function")
            _require(isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"], f"tools[{i}].function.name: required")
            _require(isinstance(fn.get("description", ""), str), f"tools[{i}].function.description: must be a string")
            _check_schema(fn.get("parameters"), f"tools[{i}].function.parameters")
    if "tool_choice" in body:
        _require(tools is not None, "tool_choice is only allowed when tools are specified")
        _require(body["tool_choice"] in ("none", "auto", "required") or isinstance(body["tool_choice"], dict),
                 "tool_choice: invalid value")
    if "temperature" in body:
        t = body["temperature"]
        _require(isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= 2, "temperature: must be in [0, 2]")
    out: list[dict] = []
    pending: set[str] = set()  # tool_call ids of the last assistant message not answered yet
    for i, m in enumerate(messages):
        _require(isinstance(m, dict), f"messages[{i}]: must be an object")
        role = m.get("role")
        if role != "tool":
            _require(not pending, f"messages[{i}]: an assistant message with 'tool_calls' must be followed by tool "
                                  f"messages responding to each 'tool_call_id' (missing: {sorted(pending)})")
        if role in ("system", "user"):
            _require(isinstance(m.get("content"), str), f"messages[{i}].content: required string")
            out.append({"role": role, "content": m["content"]})
        elif role == "assistant":
            calls = m.get("tool_calls")
            content = m.get("content")
            _require(content is None or isinstance(content, str), f"messages[{i}].content: must be a string or null")
            _require(calls is not None or isinstance(content, str), f"messages[{i}]: content or tool_calls required")
            norm_calls = []
            if calls is not None:
                _require(isinstance(calls, list) and calls, f"messages[{i}].tool_calls: must be a non-empty array")
                for j, c in enumerate(calls):
                    at = f"messages[{i}].tool_calls[{j}]"
                    _require(isinstance(c, dict) and isinstance(c.get("id"), str) and c["id"], f"{at}.id: required string")
                    _require(c.get("type") == "function", f"{at}.type: must be 'function'")
                    fn = c.get("function")
                    _require(isinstance(fn, dict) and isinstance(fn.get("name"), str), f"{at}.function.name: required")
                    _require(isinstance(fn.get("arguments"), str), f"{at}.function.arguments: must be a string")
                    _require(c["id"] not in pending, f"{at}.id: duplicate id {c['id']!r}")
                    pending.add(c["id"])
                    try:
                        args = json.loads(fn["arguments"])
                    except ValueError:
                        args = fn["arguments"]
                    norm_calls.append({"id": c["id"], "name": fn["name"], "arguments": args})
            out.append({"role": "assistant", "content": content or "", "tool_calls": norm_calls})
        elif role == "tool":
            tid = m.get("tool_call_id")
            _require(isinstance(tid, str), f"messages[{i}].tool_call_id: required string")
            _require(tid in pending, f"messages[{i}]: tool_call_id {tid!r} does not answer a tool call of the "
                                     "preceding assistant message")
            pending.discard(tid)
            _require(isinstance(m.get("content"), str), f"messages[{i}].content: required string")
            out.append({"role": "tool", "tool_call_id": tid, "content": m["content"]})
        else:
            raise BadRequest(f"messages[{i}].role: invalid value {role!r}")
    _require(not pending, f"tool calls without tool messages: {sorted(pending)}")
    return out


def check_anthropic(headers: dict, body: dict) -> list[dict]:
    """Check a Messages request; return its conversation, normalized."""
    _require(headers.get("anthropic-version") == ANTHROPIC_VERSION,
             f"anthropic-version: header required ({ANTHROPIC_VERSION})")
    _require(isinstance(body.get("model"), str) and body["model"], "model: Field required")
    mt = body.get("max_tokens")
    _require(isinstance(mt, int) and not isinstance(mt, bool) and mt > 0, "max_tokens: Field required (positive integer)")
    out: list[dict] = []
    system = body.get("system")
    if system is not None:
        _require(isinstance(system, str) or isinstance(system, list), "system: must be a string or an array of blocks")
        out.append({"role": "system", "content": system if isinstance(system, str)
                    else "".join(b.get("text", "") for b in system)})
    tools = body.get("tools")
    if tools is not None:
        _require(isinstance(tools, list), "tools: must be an array")
        for i, t in enumerate(tools):
            _require(isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"], f"tools.{i}.name: Field required")
            _require(isinstance(t.get("description", ""), str), f"tools.{i}.description: must be a string")
            _check_schema(t.get("input_schema"), f"tools.{i}.input_schema")
    if "tool_choice" in body:
        tc = body["tool_choice"]
        _require(isinstance(tc, dict) and tc.get("type") in ("auto", "any", "tool", "none"), "tool_choice: invalid")
    if "temperature" in body:
        t = body["temperature"]
        _require(isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= 1, "temperature: must be in [0, 1]")
    messages = body.get("messages")
    _require(isinstance(messages, list) and messages, "messages: Field required (non-empty array)")
    _require(isinstance(messages[0], dict) and messages[0].get("role") == "user", "messages: the first message must use the user role")
    pending: set[str] = set()
    uses_tools = False
    for i, m in enumerate(messages):
        _require(isinstance(m, dict) and m.get("role") in ("user", "assistant"), f"messages.{i}.role: must be user or assistant")
        role = m["role"]
        if i:
            _require(messages[i - 1].get("role") != role, f"messages: roles must alternate between user and assistant (messages.{i})")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        _require(isinstance(blocks, list) and blocks, f"messages.{i}.content: must be a string or a non-empty array")
        answered: set[str] = set()
        texts: list[str] = []
        calls: list[dict] = []
        for j, b in enumerate(blocks):
            at = f"messages.{i}.content.{j}"
            _require(isinstance(b, dict), f"{at}: must be an object")
            kind = b.get("type")
            if kind == "text":
                _require(isinstance(b.get("text"), str) and b["text"].strip(), f"{at}: text content blocks must be non-empty")
                texts.append(b["text"])
            elif kind == "tool_use":
                _require(role == "assistant", f"{at}: tool_use blocks are only allowed in assistant messages")
                _require(isinstance(b.get("id"), str) and b["id"] and isinstance(b.get("name"), str), f"{at}: id and name required")
                _require(isinstance(b.get("input"), dict), f"{at}.input: Input should be a valid dictionary")
                uses_tools = True
                calls.append({"id": b["id"], "name": b["name"], "arguments": b["input"]})
            elif kind == "tool_result":
                _require(role == "user", f"{at}: tool_result blocks are only allowed in user messages")
                _require(not texts, f"{at}: tool_result blocks must come first in the user message's content")
                tid = b.get("tool_use_id")
                _require(tid in pending, f"{at}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. Each "
                                         "`tool_result` block must have a corresponding `tool_use` block in the previous message.")
                answered.add(tid)
                uses_tools = True
                c = b.get("content", "")
                _require(isinstance(c, (str, list)), f"{at}.content: must be a string or an array")
                text = c if isinstance(c, str) else "".join(x.get("text", "") for x in c if isinstance(x, dict))
                out.append({"role": "tool", "tool_call_id": tid, "content": text, "is_error": bool(b.get("is_error"))})
            else:
                raise BadRequest(f"{at}.type: unknown block type {kind!r}")
        if role == "user":
            _require(not (pending - answered), f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                                               f"immediately after: {sorted(pending - answered)}")
            pending = set()
            if texts:
                out.append({"role": "user", "content": "".join(texts)})
        else:
            _require(not pending, f"messages.{i}: tool results missing")
            pending = {c["id"] for c in calls}
            out.append({"role": "assistant", "content": "".join(texts), "tool_calls": calls})
    _require(not pending, "the last assistant message has tool_use blocks without results")
    _require(not uses_tools or tools, "requests which include `tool_use` or `tool_result` blocks must define tools")
    return out


__all__ = ["ANTHROPIC_PATH", "OPENAI_PATH", "BadRequest", "FakeModelServer", "Step", "check_anthropic", "check_openai",
           "last_user_text", "tool_outputs"]
