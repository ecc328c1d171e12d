"""The wire formats of the model providers, one module per format, each a `Dialect`.

    body = dialect.body(spec, messages, tools, tool_choice)
    reply = dialect.reply(spec, response_json, new_id)                       # a plain answer
    url, body = dialect.stream_url(url), dialect.stream_body(spec, body)     # ask for a stream
    reply = dialect.read_stream(spec, response, on_text, new_id)             # read it

A dialect turns the provider-neutral conversation (`codesearch.llm.spec`) into one format's
request, and its answer — whole or streamed — into a `Reply`; a streamed answer is put back
together into the shape of the plain one and read by `reply`, so the two cannot differ.
Endpoints, credentials, retries and errors are the client's (`codesearch.llm.client`).
`new_id()` gives a fresh tool call id for formats whose calls carry none.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from typing import Any, Protocol

import httpx

from codesearch.llm.spec import ModelSpec, Reply

OnText = Callable[[str], Any]
NewId = Callable[[], str]


class Dialect(Protocol):
    """One wire format. Implemented by the modules of this package (module functions)."""

    #: The content type of a streamed answer; an answer of another type is read as a plain one.
    STREAM_TYPE: str

    def body(
        self, spec: ModelSpec, messages: list[dict[str, Any]], tools: list[dict[str, Any]], tool_choice: str | None
    ) -> dict[str, Any]:
        """The request body for the conversation so far."""
        ...

    def reply(self, spec: ModelSpec, data: Any, new_id: NewId) -> Reply:
        """The plain (not streamed) answer; raises ValueError & co. when it has another shape."""
        ...

    def stream_url(self, url: str) -> str:
        """The endpoint that streams, from the plain one."""
        ...

    def stream_body(self, spec: ModelSpec, body: dict[str, Any]) -> dict[str, Any]:
        """The request body that asks for a stream."""
        ...

    def read_stream(self, spec: ModelSpec, response: httpx.Response, on_text: OnText, new_id: NewId) -> Reply:
        """Read a streamed answer as it arrives, calling `on_text` with each piece of answer
        text; the same `Reply` as the plain answer. Raises `StreamError` for an error sent in
        the stream or one that cannot be read."""
        ...


def add_turn(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]], key: str = "content") -> None:
    """Append `blocks` to the conversation as a turn of `role`, merged into the last turn when it
    has the same role: the APIs that alternate user and assistant turns (Anthropic, Bedrock,
    Gemini) want tool results and the next user text in one turn. `key` names the list of blocks
    in a turn (``content``, or Gemini's ``parts``)."""
    if turns and turns[-1]["role"] == role:
        turns[-1][key].extend(blocks)
    else:
        turns.append({"role": role, key: blocks})


def replace_path_end(url: str, old: str, new: str, query: str = "") -> str:
    """`url` whose path ends in `new` instead of `old` (unchanged when it does not end in
    `old`: a gateway's own URL), with `query` added to its query string."""
    p = urllib.parse.urlsplit(url)
    path = p.path[: -len(old)] + new if old and p.path.endswith(old) else p.path
    return urllib.parse.urlunsplit((p.scheme, p.netloc, path, "&".join(q for q in (p.query, query) if q), p.fragment))


def joined_json(parts: list[str]) -> Any:
    """Tool input streamed as pieces of JSON text: the value, ``{}`` for none, or the text itself
    when it is not JSON (the tool call then reports the bad input to the model)."""
    text = "".join(parts)
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text
