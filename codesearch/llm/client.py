"""One HTTP client for every language model provider of the config's `models` (docs/configuration.md#language-models).

    spec = ModelSpec.from_config(config.models[0].raw)      # or a LanguageModel
    with ModelClient(spec) as client:
        reply = client.chat([{"role": "user", "content": "hi"}], tools=[])
        reply.text, reply.tool_calls, reply.usage

The conversation is provider-neutral (`codesearch.llm.spec`); each provider's wire format is a
dialect module (`codesearch.llm.dialects`), chosen by the table of `codesearch.config.model_providers`.
This module does what all providers share: the endpoint URL, credentials, the HTTP exchange,
retries and errors.

Endpoints and credentials:

=======================  ===============================================================  ============================
provider                 endpoint                                                         credentials
=======================  ===============================================================  ============================
openai, deepseek,        ``<base>/chat/completions``                                      ``Authorization: Bearer``
mistral, openrouter,                                                                      token
xai, openai-compatible
azure                    ``<base>/v1/chat/completions?api-version=<apiVersion>``          ``api-key`` header
                         (base ``https://<resourceName>.openai.azure.com/openai``)
anthropic                ``<base>/v1/messages``                                           ``x-api-key`` (token),
                                                                                          ``Authorization: Bearer``
                                                                                          (authToken)
google-generative-ai     ``<base>/models/<model>:generateContent``                        ``x-goog-api-key`` header
google-vertex            ``<vertex>/publishers/google/models/<model>:generateContent``    OAuth bearer token (service
google-vertex-anthropic  ``<vertex>/publishers/anthropic/models/<model>:rawPredict``      account or application
                                                                                          default credentials)
amazon-bedrock           ``<base>/model/<model>/converse``                                AWS Signature V4
                                                                                          (``bedrock``, region)
=======================  ===============================================================  ============================

``<vertex>`` is ``https://<region>-aiplatform.googleapis.com/v1/projects/<project>/locations/<region>``
(the host is ``aiplatform.googleapis.com`` for the ``global`` region); `baseUrl` replaces the part
before ``/models``. A configured `token` (or other credential) is a reference, resolved with the
config loader's resolver when the first request is made (a missing variable is a `ModelError`
naming the variable); without one, the provider's usual variable (``OPENAI_API_KEY``,
``AWS_ACCESS_KEY_ID``, ...) is used when set. Header values and ``queryParams`` values may be
token references too.

Streaming (``chat(..., on_text=…)``) uses the dialect's streaming endpoint: the same URL with
``stream: true`` for Chat Completions and Anthropic, ``:streamRawPredict`` for Anthropic on
Vertex AI, ``:streamGenerateContent?alt=sse`` for Gemini (and on Vertex AI), and
``/converse-stream`` for Bedrock (AWS event-stream frames); every provider streams.

Errors. Everything that goes wrong (unreachable, timeout, an HTTP error status, a body that is
not JSON or not of the expected shape, a credential that cannot be resolved) is a `ModelError`
whose message names the model and says what happened, e.g. ``language model gpt-4o (openai)
answered 401: invalid api key``. Messages never contain a token or a stack trace: resolved
secrets are masked out of any text the provider sends back, and URLs lose their credentials and
query. 429 and 5xx answers are retried once, after ``Retry-After`` (capped) or a short backoff
(`codesearch.http_retry`, shared with the code host adapters). An error sent inside a stream,
or a stream that cannot be read (a corrupted frame, a stream cut short), is a `ModelError` too.
"""

from __future__ import annotations

import itertools
import json
import os
import time
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from codesearch.config.model_providers import (
    ANTHROPIC_MESSAGES,
    BEDROCK_CONVERSE,
    CHAT_COMPLETIONS,
    GEMINI,
    PROVIDERS,
    SUPPORTED_PROVIDERS,
    missing_dependency,
)
from codesearch.config.tokens import resolve_reference
from codesearch.errors import ConfigError, ModelError
from codesearch.http_retry import backoff_seconds, retry_after_seconds, safe_url
from codesearch.llm import sigv4
from codesearch.llm.dialects import Dialect, anthropic_messages, bedrock_converse, chat_completions, gemini
from codesearch.llm.spec import ModelSpec, Reply, ToolCall
from codesearch.llm.sse import StreamError
from codesearch.redaction import Redactor

if TYPE_CHECKING:
    from codesearch.llm.google_credentials import GoogleAccessTokens

__all__ = ["SUPPORTED_PROVIDERS", "ModelClient", "ModelError", "ModelSpec", "Reply", "ToolCall"]

#: Each dialect of the provider table, and the module that speaks it.
DIALECTS: dict[str, Dialect] = {
    CHAT_COMPLETIONS: chat_completions,
    ANTHROPIC_MESSAGES: anthropic_messages,
    GEMINI: gemini,
    BEDROCK_CONVERSE: bedrock_converse,
}
ANTHROPIC_VERSION = "2023-06-01"
AZURE_API_VERSION = "preview"

DEFAULT_TIMEOUT_S = 120.0
_MAX_ERROR_TEXT = 300


def _join(base: str, path: str) -> str:
    """`path` appended to the path of `base` (a query string in `base` stays at the end)."""
    p = urllib.parse.urlsplit(base)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + path, p.query, p.fragment))


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


class _CallerError(Exception):
    """Carries an exception raised by the caller's `on_text` out of the stream reader unchanged."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class ModelClient:
    """Talks to one configured model. Thread-safe as far as the `httpx.Client` is (it is).

    `http`: a client to use (not closed by `close()`); else one is made with `timeout_s`.
    `environ` is where ``{"env": NAME}`` references and the providers' default variables are
    read. `retry_wait_s` is the backoff before the one retry of a 429/5xx without
    ``Retry-After``; ``Retry-After`` is honoured up to `max_retry_wait_s` (longer: no retry).
    `sleep` and `now` are injectable for tests.
    """

    def __init__(
        self,
        spec: ModelSpec,
        *,
        http: httpx.Client | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        environ: Mapping[str, str] | None = None,
        retry_wait_s: float = 1.0,
        max_retry_wait_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], datetime] | None = None,
    ):
        provider = PROVIDERS.get(spec.provider)
        if provider is None:
            raise ModelError(
                f"language model {spec.label}: provider {spec.provider!r} is not supported by this "
                f"server (supported: {', '.join(SUPPORTED_PROVIDERS)})",
                model=spec.model,
            )
        missing = missing_dependency(spec.provider)
        if missing:
            raise ModelError(
                f"language model {spec.label}: provider {spec.provider!r} needs {missing}", model=spec.model
            )
        if spec.provider == "openai-compatible" and not spec.base_url:
            raise ModelError(
                f"language model {spec.label}: baseUrl is required for provider openai-compatible", model=spec.model
            )
        self.spec = spec
        self.provider = provider
        self.dialect = DIALECTS[provider.dialect]
        self.timeout_s = float(timeout_s)
        self.environ = os.environ if environ is None else environ
        self.retry_wait_s = retry_wait_s
        self.max_retry_wait_s = max_retry_wait_s
        self.sleep = sleep
        self.now = now or (lambda: datetime.now(UTC))
        self._own_http = http is None
        self.http = http if http is not None else httpx.Client(follow_redirects=False)
        self._redact = Redactor()  # resolved secrets, masked out of every error message
        self._redact.add_url(spec.base_url)  # credentials written into the URL itself
        self._ids = itertools.count(1)
        self._auth: tuple[dict[str, str], dict[str, str]] | None = None  # (headers, query params), once resolved
        self._aws: dict[str, str] | None = None  # Bedrock: region and keys, once resolved
        self._google: GoogleAccessTokens | None = None  # Vertex: made on first use

    def close(self) -> None:
        if self._own_http:
            self.http.close()

    def __enter__(self) -> ModelClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the one call

    def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        tool_choice: str | None = None,
        on_text: Callable[[str], Any] | None = None,
    ) -> Reply:
        """One model turn for the conversation so far. `tool_choice` ``"none"`` asks for an answer
        without tool calls (the tools stay declared: the history may hold tool calls).

        `on_text` is called with the reply's text as it is produced: the request asks the
        provider to stream (the dialect's streaming endpoint and body), each piece of answer
        text goes to `on_text` as it arrives, and the stream is put back together into the same
        `Reply` as an unstreamed answer. A server that answers with a plain reply instead
        is read as such, and `on_text` gets its text once. An error sent in the stream, or a
        stream that cannot be read, is a `ModelError`."""
        dialect = self.dialect
        body = dialect.body(self.spec, messages, list(tools or []), tool_choice)
        url = self.endpoint()
        read = None
        if on_text is not None:
            url, body = dialect.stream_url(url), dialect.stream_body(self.spec, body)

            def piece(text: str) -> None:
                try:
                    on_text(text)
                except Exception as e:  # the caller's own failure: not the model's answer
                    raise _CallerError(e) from e

            read = lambda r: self._read_stream(r, piece)  # noqa: E731
        try:
            answer = self._post(url, body, read=read)
            reply = answer if isinstance(answer, Reply) else dialect.reply(self.spec, answer, self._new_id)
        except _CallerError as e:
            raise e.error from None
        except StreamError as e:
            raise self._error(self._redact(str(e))[:_MAX_ERROR_TEXT]) from None
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            raise self._error(
                f"answered with an unexpected response ({type(e).__name__}: {self._redact(str(e))[:100]})"
            ) from None
        if on_text is not None and not isinstance(answer, Reply) and reply.text:
            on_text(reply.text)
        return reply

    def _read_stream(self, r: httpx.Response, on_text: Callable[[str], Any]) -> Any:
        """A streamed answer as a `Reply`; an answer that is not a stream, as its JSON."""
        if self.dialect.STREAM_TYPE not in (r.headers.get("content-type") or ""):
            r.read()
            return self._json(r)
        return self.dialect.read_stream(self.spec, r, on_text, self._new_id)

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
            return _join(
                base, "/messages" if urllib.parse.urlsplit(base).path.rstrip("/").endswith("/v1") else "/v1/messages"
            )
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
        self._redact.add(value)
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
                self._redact.add(value)
            headers[str(header)] = str(value)
        for param, value in spec.query_params.items():
            if isinstance(value, Mapping):
                value = self._resolve(value, f"queryParams.{param}")
                self._redact.add(value)
            params[str(param)] = str(value)
        self._auth = (headers, params)
        return self._auth

    def _aws_credentials(self) -> dict[str, str]:
        if self._aws is None:
            region = self._require("region", "AWS_REGION")
            access_key = self._reference("accessKeyId", "AWS_ACCESS_KEY_ID")
            secret_key = self._reference("accessKeySecret", "AWS_SECRET_ACCESS_KEY")
            if not access_key or not secret_key:
                raise self._error(
                    "cannot be used: set accessKeyId and accessKeySecret in its config entry, or the "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables"
                )
            self._aws = {
                "region": region,
                "access_key": access_key,
                "secret_key": secret_key,
                "session_token": self._reference("sessionToken", "AWS_SESSION_TOKEN") or "",
            }
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
                raise self._error(f"cannot be used: {self._redact(str(e))}") from None
            self._redact.add(token)
            return {"Authorization": f"Bearer {token}"}
        if name == "amazon-bedrock":
            aws = self._aws_credentials()
            return sigv4.sign(
                "POST",
                url,
                {"content-type": headers["Content-Type"]},
                payload,
                access_key=aws["access_key"],
                secret_key=aws["secret_key"],
                session_token=aws["session_token"] or None,
                region=aws["region"],
                service="bedrock",
                now=self.now(),
            )
        return {}

    def _resolve(self, reference: Mapping[str, str], where: str) -> str:
        try:
            return resolve_reference(
                dict(reference), source=f"language model {self.spec.label}", path=where, environ=self.environ
            )
        except ConfigError as e:
            raise self._error("cannot be used: " + "; ".join(e.problems)) from None

    # ------------------------------------------------------------------ HTTP

    def _post(self, url: str, body: dict[str, Any], read: Callable[[httpx.Response], Any] | None = None) -> Any:
        """POST `body`; the JSON answer, or what `read` makes of a successful response (read
        while it arrives: a stream)."""
        headers, params = self._credentials()
        url = _with_query(url, params)
        payload = json.dumps(body).encode("utf-8")
        shown = safe_url(url)
        retried = False
        while True:
            sent = {**headers, **self._request_headers(url, headers, payload)}
            try:
                with self.http.stream(
                    "POST",
                    url,
                    content=payload,
                    headers=sent,
                    timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)),
                ) as r:
                    if r.is_success and read is not None:
                        return read(r)
                    r.read()
            except httpx.TimeoutException:
                raise self._error(f"did not answer within {self.timeout_s:g}s ({shown})") from None
            except httpx.ConnectError as e:
                reason = (
                    "connection refused"
                    if "refused" in str(e).lower()
                    else self._redact(str(e))[:120] or "connection failed"
                )
                raise self._error(f"cannot be reached at {shown}: {reason}") from None
            except httpx.HTTPError as e:
                raise self._error(f"request to {shown} failed: {type(e).__name__}") from None
            if r.is_success:
                break
            if (r.status_code == 429 or r.status_code >= 500) and not retried:
                wait = retry_after_seconds(r.headers.get("retry-after"), now=self.now)
                if wait is None:
                    wait = backoff_seconds(0, base=self.retry_wait_s, cap=self.max_retry_wait_s)
                if wait <= self.max_retry_wait_s:
                    retried = True
                    self.sleep(wait)
                    continue
            raise self._error(f"answered {r.status_code}: {self._error_text(r)}", status=r.status_code)
        return self._json(r)

    def _json(self, r: httpx.Response) -> Any:
        try:
            return r.json()
        except ValueError:
            raise self._error(
                f"answered {r.status_code} with a body that is not JSON "
                f"(content-type {r.headers.get('content-type') or 'none'})",
                status=r.status_code,
            ) from None

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
        text = " ".join(self._redact(text).split())
        return text[:_MAX_ERROR_TEXT] + ("…" if len(text) > _MAX_ERROR_TEXT else "")

    def _error(self, what: str, status: int | None = None) -> ModelError:
        return ModelError(f"language model {self.spec.label} {what}", model=self.spec.model, status=status)
