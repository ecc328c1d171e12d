"""A scripted language model on ``127.0.0.1`` that speaks every provider dialect codesearch uses.

    script = [
        [("grep", {"pattern": "retry"})],                         # turn 1: call tools
        lambda messages: f"See {tool_outputs(messages)[-1]}",     # turn 2: answer from what the tools found
    ]
    with FakeModelServer(script, api_key="sk-test") as fake:
        spec = ModelSpec("openai", "gpt-4o", base_url=fake.base_url + "/v1", token={"env": "KEY"})
        ...
        fake.requests[0]["headers"]["authorization"], fake.requests[0]["body"]["tools"]

Endpoints, each checking its credentials as the real service does:

* ``POST …/chat/completions`` — OpenAI Chat Completions; ``Authorization: Bearer <api_key>``, or
  under ``/openai/`` (Azure OpenAI) an ``api-key`` header and an ``api-version`` query parameter;
* ``POST /v1/messages`` — Anthropic Messages; ``x-api-key`` or ``Authorization: Bearer``;
* ``POST …/models/<model>:generateContent`` — Gemini; ``x-goog-api-key``, or under ``/projects/``
  (Vertex AI) a bearer token this server issued at ``/token``;
* ``POST …/publishers/anthropic/models/<model>:rawPredict`` — Anthropic on Vertex AI (bearer token
  issued at ``/token``; ``anthropic_version`` in the body, no ``model``);
* ``POST /model/<model id>/converse`` — Amazon Bedrock Converse, with an AWS Signature V4 that is
  recomputed from the request as received (`aws`: the access key and secret it accepts);
* the streaming variants, answered in each provider's real wire format (tests/fakellm_streams.py),
  `stream_delay` seconds between writes: ``stream: true`` for Chat Completions and Anthropic,
  ``:streamRawPredict`` (Anthropic on Vertex AI), ``:streamGenerateContent?alt=sse`` (Gemini,
  Vertex AI), ``/model/<model id>/converse-stream`` (Bedrock, AWS event-stream frames);
* ``POST /token`` — Google's OAuth token endpoint for service accounts: the JWT assertion must be
  signed by the key of `google_public_key` and ask for the cloud-platform scope.

Each answered request plays the next script step, whatever the endpoint:

* a list of tool calls ``[(name, arguments), ...]``; `arguments` is a dict, or a string sent
  as it is (OpenAI: the ``arguments`` text, so it may be invalid JSON; the others: the input);
* a string: the final answer;
* ``{"text": str, "tool_calls": [...]}``: both at once;
* a callable ``f(messages) -> step``: `messages` is the request's conversation normalized to the
  provider-neutral shape of `codesearch.llm.spec` (tool calls as ``{"id", "name",
  "arguments"}``), so a test can answer from real tool results (`tool_outputs`).

A script that has run out answers 500 (``script exhausted``), so a test notices extra calls.

The fake checks requests as the real APIs do and answers 400 with an error message otherwise:
required fields and types, roles, tool call ids (or, for Gemini, function names) answered by
matching tool results (and nothing else), alternating roles, non-empty text blocks,
`anthropic-version`, and for Gemini the schema keywords the API accepts. With `api_key`, a
missing or wrong key is 401 — and the message echoes the key that was sent, as a careless
server might, so tests can check that clients never repeat it.

Every request is recorded in `requests` (``{"path", "query", "headers" (lower-case names),
"body" (parsed JSON, or None), "status"}``), answered or not. Faults, used before the script:
`fail(status, times=, headers=, body=)` (from `FakeServer`), `hang(seconds, times=)` (answer
after a delay, e.g. past the client's timeout), `send_invalid_json(times=)` (a 200 whose body
is not JSON), `break_stream(fault, times=)` (the next streamed answers go wrong: an error event
mid-way, a cut connection, a corrupted frame...; see tests/fakellm_streams.py).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import secrets
import threading
import time
import urllib.parse
from datetime import datetime, timezone
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from codesearch.llm import sigv4
from tests import fakellm_streams
from tests.fakehosts.server import FakeServer, read_body, send, split_query

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
ANTHROPIC_VERSION = "2023-06-01"
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
TOKEN_PATH = "/token"
GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: The audience of service-account assertions, whatever the key's token_uri (as Google checks it).
GOOGLE_TOKEN_AUDIENCE = "https://oauth2.googleapis.com/token"
GEMINI_ROUTE = re.compile(r"/models/([^/:]+):(?:generateContent|streamGenerateContent)$")
RAW_PREDICT_ROUTE = re.compile(r"/publishers/anthropic/models/([^/:]+):(?:rawPredict|streamRawPredict)$")
CONVERSE_ROUTE = re.compile(r"^/model/([^/]+)/(?:converse|converse-stream)$")
#: Schema keywords Gemini accepts in function parameters (others are an "Invalid JSON payload").
GEMINI_SCHEMA_KEYWORDS = {"type", "format", "description", "nullable", "enum", "properties", "required", "items",
                          "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "anyOf",
                          "title", "default", "propertyOrdering", "example"}

Step = Any  # list of (name, arguments) | str | dict | Callable[[list[dict]], "Step"]


class BadRequest(Exception):
    """The request is not what the real API accepts (answered 400 with this message)."""


@functools.cache
def service_account_keys() -> tuple[str, str]:
    """(private, public) PEM of an RSA key for a fake Google service account (made once: slow)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


def tool_outputs(messages: list[dict]) -> list[str]:
    """The contents of the tool results in a normalized conversation, oldest first."""
    return [m["content"] for m in messages if m["role"] == "tool"]


def last_user_text(messages: list[dict]) -> str:
    return next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")


class FakeModelServer(FakeServer):
    methods = ("POST",)

    def __init__(self, script: list[Step] | None = None, *, api_key: str | None = None,
                 aws: tuple[str, str] | None = None, google_public_key: str | None = None):
        super().__init__()
        self.script: list[Step] = list(script or [])
        self.api_key = api_key
        self.aws = aws  # (access key id, secret access key) Bedrock requests must be signed with
        self.google_public_key = google_public_key  # PEM of the service account allowed at /token
        self.access_tokens: list[str] = []  # issued at /token
        self.requests: list[dict] = []  # type: ignore[assignment]
        self._hangs: list[list[float]] = []  # [[seconds, times]]
        self._invalid_json = 0
        self._stream_faults: list[str] = []
        self._ids = itertools.count(1)
        self._script_lock = threading.Lock()
        #: seconds between the chunks of a streamed answer (``stream: true``)
        self.stream_delay = 0.0

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

    def break_stream(self, fault: str, *, times: int = 1) -> None:
        """Break the next `times` streamed answers with `fault` (``"error"``, ``"cut"``,
        ``"not-json"``, and for Bedrock ``"crc"`` / ``"prelude"``)."""
        with self._lock:
            self._stream_faults += [fault] * times

    def _fault_body(self, status: int) -> object:
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": f"fake {kind} ({status})"}}

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._hangs.clear()
            self._invalid_json = 0
            self._stream_faults.clear()

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
        stream = None
        if status == 200 and isinstance(record["body"], dict) and not record.get("fault"):
            stream = fakellm_streams.stream_for(_dialect(path) or "", path, record["query"], record["body"], payload)
        try:
            if stream is not None:
                with self._lock:
                    fault = self._stream_faults.pop(0) if self._stream_faults else None
                fakellm_streams.write(h, stream, delay=self.stream_delay, fault=fault)
                return
            send(h, status, payload, {"Content-Type": "application/json", **headers})
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def _respond(self, path: str, record: dict, raw: bytes, invalid: bool) -> tuple[int, dict, Any]:
        fault = self._fault(path)
        if fault is not None:
            record["fault"] = True  # answered as queued, never streamed
            return fault
        if invalid:
            return 200, {}, b'{"choices": [ this is not JSON'
        if path == TOKEN_PATH:
            return self._token(raw)
        dialect = _dialect(path)
        if dialect is None:
            return 404, {}, {"error": {"type": "not_found_error", "message": f"no route {path}"}}
        headers = record["headers"]
        body = record["body"]
        denied = self._check_credentials(dialect, path, record, raw)
        if denied is not None:
            return denied
        try:
            if "application/json" not in headers.get("content-type", ""):
                raise BadRequest("content-type must be application/json")
            if not isinstance(body, dict):
                raise BadRequest("the body must be a JSON object" + (" (it is not JSON)" if raw else ""))
            messages = CHECKS[dialect](headers, body)
        except BadRequest as e:
            return 400, {}, _error_body("invalid_request_error", str(e))
        with self._script_lock:
            step = self.script.pop(0) if self.script else None
        if step is None:
            return 500, {}, _error_body("api_error", "fake: script exhausted")
        while callable(step):
            step = step(messages)
        text, calls = _split_step(step)
        # counted from the conversation, so that a streamed and a plain request count the same
        n_in, n_out = len(json.dumps(messages)) // 4, len(text) // 4 + 10 * len(calls)
        model = body.get("model") or _path_model(path)
        if dialect in ("anthropic", "vertex-anthropic"):
            content: list[dict] = [{"type": "text", "text": text}] if text else []
            for name, args in calls:
                content.append({"type": "tool_use", "id": f"toolu_{next(self._ids):04d}", "name": name, "input": args})
            return 200, {}, {"id": f"msg_{next(self._ids)}", "type": "message", "role": "assistant",
                             "model": model, "content": content,
                             "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
                             "usage": {"input_tokens": n_in, "output_tokens": n_out}}
        if dialect == "gemini":
            parts: list[dict] = [{"text": "Let me think about where to look.", "thought": True}]
            parts += [{"text": text}] if text else []
            parts += [{"functionCall": {"name": name, "args": args}} for name, args in calls]
            return 200, {}, {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP",
                                             "index": 0}],
                             "usageMetadata": {"promptTokenCount": n_in, "candidatesTokenCount": n_out,
                                               "thoughtsTokenCount": 7, "totalTokenCount": n_in + n_out + 7},
                             "modelVersion": model}
        if dialect == "bedrock":
            blocks: list[dict] = [{"text": text}] if text else []
            blocks += [{"toolUse": {"toolUseId": f"tooluse_{next(self._ids):04d}", "name": name, "input": args}}
                       for name, args in calls]
            return 200, {}, {"output": {"message": {"role": "assistant", "content": blocks}},
                             "stopReason": "tool_use" if calls else "end_turn",
                             "usage": {"inputTokens": n_in, "outputTokens": n_out, "totalTokens": n_in + n_out},
                             "metrics": {"latencyMs": 5}}
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [{"id": f"call_{next(self._ids):04d}", "type": "function", "function": {
                "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}} for name, args in calls]
        return 200, {}, {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": int(time.time()),
                         "model": model,
                         "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                         "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}

    # -- credentials ------------------------------------------------------------------------

    def _check_credentials(self, dialect: str, path: str, record: dict, raw: bytes) -> tuple[int, dict, Any] | None:
        """None when the request carries the credentials its endpoint wants, else the refusal."""
        headers = record["headers"]
        bearer = (headers.get("authorization") or "").removeprefix("Bearer ")
        if dialect == "bedrock":
            return self._check_signature(path, record, raw)
        if dialect == "vertex-anthropic" or (dialect == "gemini" and "/projects/" in path):
            if bearer not in self.access_tokens:
                return 401, {}, {"error": {"code": 401, "status": "UNAUTHENTICATED",
                                           "message": "Request had invalid authentication credentials."}}
            return None
        if self.api_key is None:
            return None
        if dialect == "anthropic":
            sent = headers.get("x-api-key") or bearer
        elif dialect == "gemini":
            sent = headers.get("x-goog-api-key")
        elif path.startswith("/openai/"):  # Azure OpenAI
            if "api-version" not in urllib.parse.parse_qs(record["query"]):
                return 400, {}, _error_body("invalid_request_error", "Missing required query parameter: api-version")
            sent = headers.get("api-key")
        else:
            sent = bearer
        if sent != self.api_key:
            shown = f"Incorrect API key provided: {sent}" if sent else "missing api key"
            return 401, {}, _error_body("authentication_error", shown)
        return None

    def _check_signature(self, path: str, record: dict, raw: bytes) -> tuple[int, dict, Any] | None:
        """Recompute the request's AWS Signature V4 from what arrived and compare."""
        headers = record["headers"]
        denied = 403, {"x-amzn-ErrorType": "UnrecognizedClientException"}, {
            "message": "The security token included in the request is invalid."}
        auth = headers.get("authorization") or ""
        date = headers.get("x-amz-date") or ""
        if self.aws is None or not auth.startswith(f"AWS4-HMAC-SHA256 Credential={self.aws[0]}/") or not date:
            return denied
        try:
            when = datetime.strptime(date, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
            scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/")
            region, service = scope[2], scope[3]
        except (ValueError, IndexError):
            return denied
        if service != "bedrock":
            return denied
        url = f"http://{headers['host']}{path}" + (f"?{record['query']}" if record["query"] else "")
        expected = sigv4.sign("POST", url, {"content-type": headers.get("content-type", "")}, raw,
                              access_key=self.aws[0], secret_key=self.aws[1], region=region, service="bedrock",
                              session_token=headers.get("x-amz-security-token"), now=when)
        if expected["authorization"] != auth:
            return 403, {"x-amzn-ErrorType": "InvalidSignatureException"}, {
                "message": "The request signature we calculated does not match the signature you provided."}
        return None

    def _token(self, raw: bytes) -> tuple[int, dict, Any]:
        """Google's OAuth token endpoint: a JWT bearer assertion signed by the service account."""
        form = {k: v[-1] for k, v in urllib.parse.parse_qs(raw.decode("utf-8", "replace")).items()}
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" or "assertion" not in form:
            return 400, {}, {"error": "unsupported_grant_type", "error_description": "Invalid grant_type."}
        try:
            claims = jwt.decode(form["assertion"], self.google_public_key or "", algorithms=["RS256"],
                                audience=GOOGLE_TOKEN_AUDIENCE)
        except jwt.PyJWTError as e:
            return 400, {}, {"error": "invalid_grant", "error_description": f"Invalid JWT: {type(e).__name__}"}
        if GOOGLE_SCOPE not in str(claims.get("scope", "")).split():
            return 400, {}, {"error": "invalid_scope", "error_description": "Invalid OAuth scope."}
        token = f"ya29.fake-{secrets.token_hex(8)}"
        with self._lock:
            self.access_tokens.append(token)
        return 200, {}, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"}


def _dialect(path: str) -> str | None:
    if path.endswith("/chat/completions"):
        return "openai"
    if path == ANTHROPIC_PATH:
        return "anthropic"
    if GEMINI_ROUTE.search(path):
        return "gemini"
    if RAW_PREDICT_ROUTE.search(path):
        return "vertex-anthropic"
    if CONVERSE_ROUTE.search(path):
        return "bedrock"
    return None


def _path_model(path: str) -> str:
    for route in (GEMINI_ROUTE, RAW_PREDICT_ROUTE, CONVERSE_ROUTE):
        m = route.search(path)
        if m:
            return urllib.parse.unquote(m.group(1))
    return ""


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
    if "stream" in body:
        _require(isinstance(body["stream"], bool), "stream: must be a boolean")
    if "stream_options" in body:
        _require(body.get("stream") is True, "stream_options: only allowed when stream is true")
        _require(isinstance(body["stream_options"], dict) and set(body["stream_options"]) <= {"include_usage"},
                 "stream_options: must be an object with include_usage")
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
    return _check_messages(body)


def check_vertex_anthropic(headers: dict, body: dict) -> list[dict]:
    """Check a Messages request as Vertex AI's rawPredict takes it: the model is in the URL."""
    _require(body.get("anthropic_version") == VERTEX_ANTHROPIC_VERSION,
             f"anthropic_version: Field required ({VERTEX_ANTHROPIC_VERSION})")
    _require("model" not in body, "model: Extra inputs are not permitted")
    return _check_messages(body)


def _check_messages(body: dict) -> list[dict]:
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
    if "stream" in body:
        _require(isinstance(body["stream"], bool), "stream: must be a boolean")
    _require("stream_options" not in body, "stream_options: Extra inputs are not permitted")
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


def _check_gemini_schema(schema: Any, where: str) -> None:
    _require(isinstance(schema, dict), f"{where}: must be an object")
    for key, value in schema.items():
        _require(key in GEMINI_SCHEMA_KEYWORDS,
                 f'Invalid JSON payload received. Unknown name "{key}" at \'{where}\': Cannot find field.')
        if key == "properties":
            for name, sub in value.items():
                _check_gemini_schema(sub, f"{where}.properties[{name}].value")
        elif key == "items":
            _check_gemini_schema(value, f"{where}.items")
        elif key == "anyOf":
            for i, sub in enumerate(value):
                _check_gemini_schema(sub, f"{where}.any_of[{i}]")


def check_gemini(headers: dict, body: dict) -> list[dict]:
    """Check a generateContent request; return its conversation, normalized (calls numbered)."""
    known = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "safetySettings"}
    for key in body:
        _require(key in known, f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.')
    out: list[dict] = []
    system = body.get("systemInstruction")
    if system is not None:
        _require(isinstance(system, dict) and isinstance(system.get("parts"), list), "systemInstruction: parts required")
        out.append({"role": "system", "content": "".join(p.get("text", "") for p in system["parts"])})
    tools = body.get("tools")
    if tools is not None:
        _require(isinstance(tools, list) and tools, "tools: must be a non-empty array")
        for i, t in enumerate(tools):
            for j, fn in enumerate(t.get("functionDeclarations") or []):
                at = f"tools[{i}].function_declarations[{j}]"
                _require(isinstance(fn.get("name"), str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}", fn["name"]),
                         f"{at}.name: invalid function name")
                _check_gemini_schema(fn.get("parameters"), f"{at}.parameters")
    mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
    _require(mode in (None, "AUTO", "ANY", "NONE"), "toolConfig.functionCallingConfig.mode: invalid value")
    generation = body.get("generationConfig") or {}
    if "temperature" in generation:
        t = generation["temperature"]
        _require(isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= 2,
                 "generationConfig.temperature: must be in [0, 2]")
    thinking = generation.get("thinkingConfig") or {}
    if "thinkingLevel" in thinking:
        _require(str(thinking["thinkingLevel"]).lower() in ("minimal", "low", "medium", "high"),
                 "generationConfig.thinkingConfig.thinkingLevel: invalid value")
    if "thinkingBudget" in thinking:
        _require(isinstance(thinking["thinkingBudget"], int), "generationConfig.thinkingConfig.thinkingBudget: integer")
    contents = body.get("contents")
    _require(isinstance(contents, list) and contents, "contents: required non-empty array")
    pending: list[str] = []  # function names called by the last model turn, not answered yet
    uses_tools = False
    for i, c in enumerate(contents):
        _require(isinstance(c, dict) and c.get("role") in ("user", "model"), f"contents[{i}].role: must be user or model")
        role = c["role"]
        _require(i > 0 or role == "user", "contents: the first turn must be the user's")
        if i:
            _require(contents[i - 1]["role"] != role, f"contents[{i}]: roles must alternate between user and model")
        parts = c.get("parts")
        _require(isinstance(parts, list) and parts, f"contents[{i}].parts: required non-empty array")
        texts, calls, answered = [], [], []
        for j, part in enumerate(parts):
            at = f"contents[{i}].parts[{j}]"
            _require(isinstance(part, dict) and len(set(part) & {"text", "functionCall", "functionResponse"}) == 1,
                     f"{at}: exactly one of text, functionCall, functionResponse")
            if "text" in part:
                _require(isinstance(part["text"], str) and part["text"], f"{at}.text: must be a non-empty string")
                texts.append(part["text"])
            elif "functionCall" in part:
                _require(role == "model", f"{at}: functionCall only in model turns")
                fc = part["functionCall"]
                _require(isinstance(fc.get("name"), str) and isinstance(fc.get("args", {}), dict), f"{at}.functionCall")
                calls.append({"id": f"gemini_{i}_{j}", "name": fc["name"], "arguments": fc.get("args", {})})
                uses_tools = True
            else:
                _require(role == "user", f"{at}: functionResponse only in user turns")
                fr = part["functionResponse"]
                _require(isinstance(fr.get("name"), str) and isinstance(fr.get("response"), dict), f"{at}.functionResponse")
                _require(fr["name"] in pending, f"{at}: functionResponse {fr['name']!r} answers no function call of the "
                                                "previous model turn")
                pending.remove(fr["name"])
                answered.append(fr)
                uses_tools = True
        if role == "user":
            _require(not pending, f"contents[{i}]: function calls without a functionResponse: {pending}")
            for n, fr in enumerate(answered):
                response = fr["response"]
                out.append({"role": "tool", "tool_call_id": f"gemini_{i}_{n}", "is_error": "error" in response,
                            "content": str(response.get("content", response.get("error", "")))})
            if texts:
                out.append({"role": "user", "content": "".join(texts)})
        else:
            _require(not pending, f"contents[{i}]: the previous function calls were not answered")
            pending = [c["name"] for c in calls]
            out.append({"role": "assistant", "content": "".join(texts), "tool_calls": calls})
    _require(not pending, "the last model turn has function calls without responses")
    _require(not uses_tools or tools, "function calls and responses need the functions declared in tools")
    return out


def check_bedrock(headers: dict, body: dict) -> list[dict]:
    """Check a Converse request; return its conversation, normalized."""
    known = {"messages", "system", "toolConfig", "inferenceConfig", "additionalModelRequestFields"}
    for key in body:
        _require(key in known, f"Malformed input request: extraneous key [{key}] is not permitted")
    out: list[dict] = [{"role": "system", "content": "".join(b.get("text", "") for b in body.get("system") or [])}]
    tool_config = body.get("toolConfig")
    if tool_config is not None:
        tools = tool_config.get("tools")
        _require(isinstance(tools, list) and tools, "toolConfig.tools: required non-empty array")
        for i, t in enumerate(tools):
            spec = t.get("toolSpec") or {}
            _require(isinstance(spec.get("name"), str) and spec["name"], f"toolConfig.tools.{i}.toolSpec.name: required")
            _require(isinstance(spec.get("description"), str) and spec["description"],
                     f"toolConfig.tools.{i}.toolSpec.description: must have length at least 1")
            _check_schema((spec.get("inputSchema") or {}).get("json"), f"toolConfig.tools.{i}.toolSpec.inputSchema.json")
    if "inferenceConfig" in body:
        t = body["inferenceConfig"].get("temperature")
        _require(t is None or (isinstance(t, (int, float)) and not isinstance(t, bool) and 0 <= t <= 1),
                 "inferenceConfig.temperature: must be in [0, 1]")
    messages = body.get("messages")
    _require(isinstance(messages, list) and messages, "messages: required non-empty array")
    pending: set[str] = set()
    uses_tools = False
    for i, m in enumerate(messages):
        _require(isinstance(m, dict) and m.get("role") in ("user", "assistant"), f"messages.{i}.role: user or assistant")
        role = m["role"]
        _require(i > 0 or role == "user", "A conversation must start with a user message.")
        if i:
            _require(messages[i - 1]["role"] != role, "A conversation must alternate between user and assistant roles.")
        blocks = m.get("content")
        _require(isinstance(blocks, list) and blocks, f"messages.{i}.content: required non-empty array")
        texts, calls, answered = [], [], set()
        for j, b in enumerate(blocks):
            at = f"messages.{i}.content.{j}"
            _require(isinstance(b, dict) and len(set(b) & {"text", "toolUse", "toolResult"}) == 1,
                     f"{at}: exactly one of text, toolUse, toolResult")
            if "text" in b:
                _require(isinstance(b["text"], str) and b["text"].strip(), f"{at}.text: the text field is blank")
                texts.append(b["text"])
            elif "toolUse" in b:
                _require(role == "assistant", f"{at}: toolUse only in assistant messages")
                use = b["toolUse"]
                _require(isinstance(use.get("toolUseId"), str) and isinstance(use.get("name"), str)
                         and isinstance(use.get("input"), dict), f"{at}.toolUse: toolUseId, name and input required")
                calls.append({"id": use["toolUseId"], "name": use["name"], "arguments": use["input"]})
                uses_tools = True
            else:
                _require(role == "user", f"{at}: toolResult only in user messages")
                res = b["toolResult"]
                tid = res.get("toolUseId")
                _require(tid in pending, f"{at}: toolResult {tid!r} answers no toolUse of the previous message")
                _require(res.get("status") in (None, "success", "error"), f"{at}.toolResult.status: invalid")
                _require(isinstance(res.get("content"), list) and res["content"], f"{at}.toolResult.content: required")
                answered.add(tid)
                uses_tools = True
                out.append({"role": "tool", "tool_call_id": tid, "is_error": res.get("status") == "error",
                            "content": "".join(x.get("text", "") for x in res["content"])})
        if role == "user":
            _require(not (pending - answered), f"messages.{i}: toolUse ids without toolResult: {sorted(pending - answered)}")
            pending = set()
            if texts:
                out.append({"role": "user", "content": "".join(texts)})
        else:
            pending = {c["id"] for c in calls}
            out.append({"role": "assistant", "content": "".join(texts), "tool_calls": calls})
    _require(not pending, "the last assistant message has toolUse blocks without results")
    _require(not uses_tools or tool_config,
             "The toolConfig field must be defined when using toolUse and toolResult content blocks.")
    return out


CHECKS = {
    "openai": lambda headers, body: check_openai(body),
    "anthropic": check_anthropic,
    "vertex-anthropic": check_vertex_anthropic,
    "gemini": check_gemini,
    "bedrock": check_bedrock,
}


__all__ = ["ANTHROPIC_PATH", "OPENAI_PATH", "TOKEN_PATH", "BadRequest", "FakeModelServer", "Step", "check_anthropic",
           "check_bedrock", "check_gemini", "check_openai", "check_vertex_anthropic",
           "last_user_text", "service_account_keys", "tool_outputs"]
