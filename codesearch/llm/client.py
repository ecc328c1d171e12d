"""One HTTP client for every language model provider of the config's `models` (SPEC §2.5).

    spec = ModelSpec.from_config(config.models[0].raw)      # or a LanguageModel
    with ModelClient(spec) as client:
        reply = client.chat([{"role": "user", "content": "hi"}], tools=[])
        reply.text, reply.tool_calls, reply.usage

The conversation is provider-neutral (`codesearch.llm.spec`); each provider's wire format is a
dialect module (`codesearch.llm.dialects`), chosen by the table of `codesearch.llm.providers`.
This module does what all providers share: the endpoint URL, credentials, the HTTP exchange,
retries and errors.

Endpoints and credentials:

==========================  =======================================================  ==========================================
provider                    endpoint                                                 credentials
==========================  =======================================================  ==========================================
openai, deepseek, mistral,  ``<base>/chat/completions``                              ``Authorization: Bearer`` token
openrouter, xai,
openai-compatible
azure                       ``<base>/v1/chat/completions?api-version=<apiVersion>``  ``api-key`` header;
                            (base ``https://<resourceName>.openai.azure.com/openai``)
anthropic                   ``<base>/v1/messages``                                   ``x-api-key`` (token), ``Authorization:
                                                                                     Bearer`` (authToken)
google-generative-ai        ``<base>/models/<model>:generateContent``                ``x-goog-api-key`` header
google-vertex               ``<vertex>/publishers/google/models/<model>:generateContent``  OAuth bearer token (service account
google-vertex-anthropic     ``<vertex>/publishers/anthropic/models/<model>:rawPredict``    or application default credentials)
amazon-bedrock              ``<base>/model/<model>/converse``                        AWS Signature V4 (``bedrock``, region)
==========================  =======================================================  ==========================================

``<vertex>`` is ``https://<region>-aiplatform.googleapis.com/v1/projects/<project>/locations/<region>``
(the host is ``aiplatform.googleapis.com`` for the ``global`` region); `baseUrl` replaces the part
before ``/models``. A configured `token` (or other credential) is a reference, resolved with the
config loader's resolver when the first request is made (a missing variable is a `ModelError`
naming the variable); without one, the provider's usual variable (``OPENAI_API_KEY``,
``AWS_ACCESS_KEY_ID``, ...) is used when set. Header values and ``queryParams`` values may be
token references too.

Errors. Everything that goes wrong (unreachable, timeout, an HTTP error status, a body that is
not JSON or not of the expected shape, a credential that cannot be resolved) is a `ModelError`
whose message names the model and says what happened, e.g. ``language model gpt-4o (openai)
answered 401: invalid api key``. Messages never contain a token or a stack trace: resolved
secrets are masked out of any text the provider sends back, and URLs lose their credentials and
query. 429 and 5xx answers are retried once, after ``Retry-After`` (capped) or a short backoff.
"""

from __future__ import annotations

import email.utils
import itertools
import json
import os
import time
import urllib.parse
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

import httpx

from codesearch.llm import sigv4
from codesearch.llm.dialects import anthropic_messages, bedrock_converse, chat_completions, gemini
from codesearch.llm.providers import (ANTHROPIC_MESSAGES, BEDROCK_CONVERSE, CHAT_COMPLETIONS, GEMINI, PROVIDERS,
                                      SUPPORTED_PROVIDERS, missing_dependency)
from codesearch.llm.spec import ModelError, ModelSpec, Reply, ToolCall, text_call

__all__ = ["SUPPORTED_PROVIDERS", "ModelClient", "ModelError", "ModelSpec", "Reply", "ToolCall"]

DIALECTS = {CHAT_COMPLETIONS: chat_completions, ANTHROPIC_MESSAGES: anthropic_messages, GEMINI: gemini,
            BEDROCK_CONVERSE: bedrock_converse}
ANTHROPIC_VERSION = "2023-06-01"
#: `max_tokens` of Anthropic requests (the API requires one).
ANTHROPIC_MAX_TOKENS = anthropic_messages.MAX_TOKENS
AZURE_API_VERSION = "preview"

DEFAULT_TIMEOUT_S = 120.0
_MAX_ERROR_TEXT = 300
#: Kept for callers of the earlier name; a Chat Completions tool call from its JSON text.
_parse_call = text_call


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




def _with_query(url: str, params: Mapping[str, str]) -> str:
    """`url` with `params` appended to its query string."""
    if not params:
        return url
    p = urllib.parse.urlsplit(url)
    query = "&".join(q for q in (p.query, urllib.parse.urlencode(list(params.items()))) if q)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, p.path, query, p.fragment))


def _model_path(model: str) -> str:
    """Google's ``models/<model>`` (a name that already has a collection, ``tunedModels/x``, stays)."""
    return model if "/" in model else f"models/{model}"


class ModelClient:
    """Talks to one configured model. Thread-safe as far as the `httpx.Client` is (it is).

    `http`: a client to use (not closed by `close()`); else one is made with `timeout_s`.
    `environ` is where ``{"env": NAME}`` references and the providers' default variables are
    read. `retry_wait_s` is the backoff before the one retry of a 429/5xx without
    ``Retry-After``; ``Retry-After`` is honoured up to `max_retry_wait_s` (longer: no retry).
    `sleep` and `now` are injectable for tests.
    """

    def __init__(self, spec: ModelSpec, *, http: httpx.Client | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 environ: Mapping[str, str] | None = None, retry_wait_s: float = 1.0, max_retry_wait_s: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep, now: Callable[[], datetime] | None = None):
        provider = PROVIDERS.get(spec.provider)
        if provider is None:
            raise ModelError(f"language model {spec.label}: provider {spec.provider!r} is not supported by this "
                             f"server (supported: {', '.join(SUPPORTED_PROVIDERS)})", model=spec.model)
        missing = missing_dependency(spec.provider)
        if missing:
            raise ModelError(f"language model {spec.label}: provider {spec.provider!r} needs {missing}", model=spec.model)
        if spec.provider == "openai-compatible" and not spec.base_url:
            raise ModelError(f"language model {spec.label}: baseUrl is required for provider openai-compatible",
                             model=spec.model)
        self.spec = spec
        self.provider = provider
        self.dialect = DIALECTS[provider.dialect]
        self.timeout_s = float(timeout_s)
        self.environ = os.environ if environ is None else environ
        self.retry_wait_s = retry_wait_s
        self.max_retry_wait_s = max_retry_wait_s
        self.sleep = sleep
        self.now = now or (lambda: datetime.now(timezone.utc))
        self._own_http = http is None
        self.http = http if http is not None else httpx.Client(follow_redirects=False)
        self._secrets: list[str] = []  # resolved values, masked out of every error message
        if spec.base_url:  # credentials written into the URL itself
            try:
                parts = urllib.parse.urlsplit(spec.base_url)
                self._secrets += [parts.password or ""] + [v for _, v in urllib.parse.parse_qsl(parts.query)]
            except ValueError:
                pass
        self._ids = itertools.count(1)
        self._auth: tuple[dict[str, str], dict[str, str]] | None = None  # (headers, query params), once resolved
        self._aws: dict[str, str] | None = None  # Bedrock: region and keys, once resolved
        self._google = None  # Vertex: GoogleAccessTokens, made on first use

    def close(self) -> None:
        if self._own_http:
            self.http.close()

    def __enter__(self) -> "ModelClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ the one call

    def chat(self, messages: list[dict], tools: list[dict] | None = None, *, tool_choice: str | None = None,
             on_text: Callable[[str], Any] | None = None) -> Reply:
        """One model turn for the conversation so far. `tool_choice` ``"none"`` asks for an answer
        without tool calls (the tools stay declared: the history may hold tool calls).

        `on_text` is called with the reply's text as it is produced: piece by piece where the
        provider streams (the Chat Completions providers and ``anthropic``: ``stream: true``, read
        as Server-Sent Events and put back together into the same `Reply`), else once, when the
        reply is in.
        The pieces are the model's raw text (a reasoning block that `Reply.text` leaves out
        included)."""
        body = self.dialect.body(self.spec, messages, list(tools or []), tool_choice)
        read = None
        streamed = [False]
        if on_text is not None and self.dialect is chat_completions:
            body["stream"] = True
            if self.spec.provider in ("openai", "azure"):  # others may refuse the option; usage is then 0
                body["stream_options"] = {"include_usage": True}
            read = lambda r: self._read_stream(r, on_text, streamed)  # noqa: E731
        elif on_text is not None and self.spec.provider == "anthropic":
            body["stream"] = True
            read = lambda r: self._read_anthropic_stream(r, on_text, streamed)  # noqa: E731
        data = self._post(self.endpoint(), body, read=read)
        try:
            reply = self.dialect.reply(self.spec, data, self._new_id)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            raise self._error(f"answered with an unexpected response ({type(e).__name__}: {self._mask(str(e))[:100]})"
                              ) from None
        if on_text is not None and not streamed[0] and reply.text:
            on_text(reply.text)
        return reply

    def _plain_json(self, r: httpx.Response) -> Any:
        """A server that answers ``stream: true`` with plain JSON is read as such."""
        r.read()
        try:
            return r.json()
        except ValueError:
            raise self._error(f"answered {r.status_code} with a body that is not JSON "
                              f"(content-type {r.headers.get('content-type') or 'none'})", status=r.status_code) from None

    def _events(self, r: httpx.Response):
        """The JSON objects of a Server-Sent Events answer, up to ``[DONE]``; an ``error`` event
        (OpenAI's ``{"error": …}``, Anthropic's ``type: error``) is a `ModelError`."""
        for line in r.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                event = json.loads(data)
            except ValueError:
                raise self._error("sent a stream event that is not JSON") from None
            if not isinstance(event, dict):
                raise self._error("sent a stream event that is not an object")
            if event.get("error"):
                err = event["error"]
                message = err.get("message") if isinstance(err, dict) else str(err)
                raise self._error(f"failed while answering: {self._mask(str(message))[:_MAX_ERROR_TEXT]}")
            yield event

    def _read_anthropic_stream(self, r: httpx.Response, on_text: Callable[[str], Any], streamed: list[bool]) -> Any:
        """A streamed Messages answer (``message_start``, ``content_block_*``, ``message_delta``)
        put back together as the non-streamed one."""
        if "text/event-stream" not in (r.headers.get("content-type") or ""):
            return self._plain_json(r)
        streamed[0] = True
        blocks: dict[int, dict] = {}
        parts: dict[int, list[str]] = {}
        stop, usage = None, {}
        for event in self._events(r):
            kind = event.get("type")
            if kind == "message_start":
                usage.update((event.get("message") or {}).get("usage") or {})
            elif kind == "content_block_start":
                i = int(event.get("index", len(blocks)))
                blocks[i] = dict(event.get("content_block") or {})
                parts[i] = []
            elif kind == "content_block_delta":
                i, delta = int(event.get("index", 0)), event.get("delta") or {}
                block = blocks.setdefault(i, {"type": "text", "text": ""})
                if delta.get("type") == "text_delta":
                    piece = str(delta.get("text") or "")
                    block["text"] = str(block.get("text") or "") + piece
                    if piece:
                        on_text(piece)
                elif delta.get("type") == "input_json_delta":
                    parts.setdefault(i, []).append(str(delta.get("partial_json") or ""))
            elif kind == "message_delta":
                stop = (event.get("delta") or {}).get("stop_reason") or stop
                usage.update(event.get("usage") or {})
            elif kind == "message_stop":
                break
        for i, block in blocks.items():
            if block.get("type") == "tool_use" and parts.get(i):
                try:
                    block["input"] = json.loads("".join(parts[i]))
                except ValueError:
                    block["input"] = "".join(parts[i])  # reported to the model as a bad input
        return {"content": [blocks[i] for i in sorted(blocks)], "stop_reason": stop, "usage": usage}

    def _read_stream(self, r: httpx.Response, on_text: Callable[[str], Any], streamed: list[bool]) -> Any:
        """A streamed Chat Completions answer put back together as the non-streamed one."""
        if "text/event-stream" not in (r.headers.get("content-type") or ""):
            return self._plain_json(r)
        streamed[0] = True
        text, calls, finish, usage = [], {}, None, {}
        for event in self._events(r):
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                piece = delta.get("content")
                if isinstance(piece, str) and piece:
                    text.append(piece)
                    on_text(piece)
                for tc in delta.get("tool_calls") or []:
                    entry = calls.setdefault(int(tc.get("index", len(calls))),
                                             {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                    entry["id"] = tc.get("id") or entry["id"]
                    fn = tc.get("function") or {}
                    entry["function"]["name"] += fn.get("name") or ""
                    entry["function"]["arguments"] += fn.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if calls:
            message["tool_calls"] = [calls[i] for i in sorted(calls)]
        return {"choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}

    def _new_id(self) -> str:
        return f"call_{next(self._ids):04d}"

    # ------------------------------------------------------------------ where requests go

    def _setting(self, key: str, variable: str | None) -> str | None:
        """A plain field of the entry, else the provider's environment variable."""
        value = self.spec.options.get(key)
        if value is None and variable:
            value = (self.environ.get(variable) or "").strip() or None
        return str(value) if value is not None else None

    def _require(self, key: str, variable: str) -> str:
        value = self._setting(key, variable)
        if not value:
            raise self._error(f"cannot be used: set {key} in its config entry, or the {variable} environment variable")
        return value

    def _vertex_base(self, publisher: str) -> str:
        if self.spec.base_url:
            return self.spec.base_url
        project = self._require("project", "GOOGLE_VERTEX_PROJECT")
        region = self._require("region", "GOOGLE_VERTEX_REGION")
        host = "aiplatform.googleapis.com" if region == "global" else f"{region}-aiplatform.googleapis.com"
        return f"https://{host}/v1/projects/{project}/locations/{region}/publishers/{publisher}"

    def endpoint(self) -> str:
        """The URL requests go to (query parameters such as Azure's api-version are added when sending)."""
        spec, name = self.spec, self.spec.provider
        model = urllib.parse.quote(spec.model, safe="")
        if name == "azure":
            base = spec.base_url
            if not base:
                resource = self._setting("resourceName", "AZURE_RESOURCE_NAME")
                if not resource:
                    raise self._error("cannot be used: set resourceName (or AZURE_RESOURCE_NAME) or baseUrl")
                base = f"https://{resource}.openai.azure.com/openai"
            return _join(base, "/v1/chat/completions")
        if self.provider.dialect == CHAT_COMPLETIONS:
            return _join(spec.base_url or self.provider.base_url or "", "/chat/completions")
        if name == "anthropic":
            base = spec.base_url or self.provider.base_url or ""
            # both "https://api.anthropic.com" and "https://api.anthropic.com/v1" work as baseUrl
            return _join(base, "/messages" if urllib.parse.urlsplit(base).path.rstrip("/").endswith("/v1") else "/v1/messages")
        if name == "google-vertex-anthropic":
            return _join(self._vertex_base("anthropic"), f"/models/{model}:rawPredict")
        if name == "google-vertex":
            return _join(self._vertex_base("google"), f"/{_model_path(spec.model)}:generateContent")
        if name == "google-generative-ai":
            return _join(spec.base_url or self.provider.base_url or "", f"/{_model_path(spec.model)}:generateContent")
        if name == "amazon-bedrock":
            region = self._aws_credentials()["region"]
            return _join(spec.base_url or f"https://bedrock-runtime.{region}.amazonaws.com", f"/model/{model}/converse")
        raise self._error("has no endpoint")  # every provider of the table is handled above

    # ------------------------------------------------------------------ credentials

    def _reference(self, key: str, variable: str | None) -> str | None:
        """A credential: the entry's token reference `key` resolved, else the provider's variable."""
        ref = self.spec.token if key == "token" else self.spec.options.get(key)
        value: str | None = None
        if isinstance(ref, Mapping):
            value = self._resolve(ref, key)
        elif variable:
            value = (self.environ.get(variable) or "").strip() or None
        if value:
            self._secrets.append(value)
        return value

    def _credentials(self) -> tuple[dict[str, str], dict[str, str]]:
        """(auth + configured headers, query params), with every token reference resolved."""
        if self._auth is not None:
            return self._auth
        spec, name, dialect = self.spec, self.spec.provider, self.provider.dialect
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        params: dict[str, str] = {}
        if name == "azure":
            key = self._reference("token", self.provider.token_env)
            if key:
                headers["api-key"] = key
            params["api-version"] = str(spec.options.get("apiVersion") or AZURE_API_VERSION)
        elif dialect == CHAT_COMPLETIONS:
            key = self._reference("token", self.provider.token_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
        elif name == "anthropic":
            headers["anthropic-version"] = ANTHROPIC_VERSION
            key = self._reference("token", self.provider.token_env)
            if key:
                headers["x-api-key"] = key
            bearer = self._reference("authToken", "ANTHROPIC_AUTH_TOKEN")
            if bearer:
                headers["Authorization"] = f"Bearer {bearer}"
        elif name == "google-generative-ai":
            key = self._reference("token", self.provider.token_env)
            if key:
                headers["x-goog-api-key"] = key
        for header, value in spec.headers.items():
            if isinstance(value, Mapping):
                value = self._resolve(value, f"headers.{header}")
                self._secrets.append(value)
            headers[str(header)] = str(value)
        for param, value in spec.query_params.items():
            if isinstance(value, Mapping):
                value = self._resolve(value, f"queryParams.{param}")
                self._secrets.append(value)
            params[str(param)] = str(value)
        self._auth = (headers, params)
        return self._auth

    def _aws_credentials(self) -> dict[str, str]:
        if self._aws is None:
            region = self._require("region", "AWS_REGION")
            access_key = self._reference("accessKeyId", "AWS_ACCESS_KEY_ID")
            secret_key = self._reference("accessKeySecret", "AWS_SECRET_ACCESS_KEY")
            if not access_key or not secret_key:
                raise self._error("cannot be used: set accessKeyId and accessKeySecret in its config entry, or the "
                                  "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables")
            self._aws = {"region": region, "access_key": access_key, "secret_key": secret_key,
                         "session_token": self._reference("sessionToken", "AWS_SESSION_TOKEN") or ""}
        return self._aws

    def _request_headers(self, url: str, headers: dict[str, str], payload: bytes) -> dict[str, str]:
        """Credentials made per request: Vertex's OAuth bearer token, Bedrock's signature."""
        name = self.spec.provider
        if name in ("google-vertex", "google-vertex-anthropic"):
            from codesearch.llm.google_credentials import GoogleAccessTokens, GoogleAuthError

            if self._google is None:
                key_file = self._reference("credentials", None)
                self._google = GoogleAccessTokens(key_file)
            try:
                token = self._google.token()
            except GoogleAuthError as e:
                raise self._error(f"cannot be used: {self._mask(str(e))}") from None
            if token not in self._secrets:
                self._secrets.append(token)
            return {"Authorization": f"Bearer {token}"}
        if name == "amazon-bedrock":
            aws = self._aws_credentials()
            return sigv4.sign("POST", url, {"content-type": headers["Content-Type"]}, payload,
                              access_key=aws["access_key"], secret_key=aws["secret_key"],
                              session_token=aws["session_token"] or None, region=aws["region"], service="bedrock",
                              now=self.now())
        return {}

    def _resolve(self, reference: Mapping[str, str], where: str) -> str:
        from codesearch.config.loader import _resolve as resolve_reference  # the loader's own token resolver
        from codesearch.errors import ConfigError

        try:
            return resolve_reference(dict(reference), source=f"language model {self.spec.label}", path=where,
                                     environ=self.environ)
        except ConfigError as e:
            raise self._error("cannot be used: " + "; ".join(e.problems)) from None

    # ------------------------------------------------------------------ HTTP

    def _post(self, url: str, body: dict, read: Callable[[httpx.Response], Any] | None = None) -> Any:
        """POST `body`; the JSON answer, or what `read` makes of a successful response (read
        while it arrives: a stream)."""
        headers, params = self._credentials()
        url = _with_query(url, params)
        payload = json.dumps(body).encode("utf-8")
        shown = _safe_url(url)
        retried = False
        while True:
            sent = {**headers, **self._request_headers(url, headers, payload)}
            try:
                with self.http.stream("POST", url, content=payload, headers=sent,
                                      timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0))) as r:
                    if r.is_success and read is not None:
                        return read(r)
                    r.read()
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
        """The provider's own error message (``{"error": {"message"}}`` or ``{"message"}``), else the reason."""
        text = ""
        try:
            data = r.json()
        except ValueError:
            data = None
        if isinstance(data, dict):
            err = data.get("error")
            if isinstance(err, dict):
                text = str(err.get("message") or err.get("type") or err.get("status") or "")
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
