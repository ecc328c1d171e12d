"""Server-Sent Events, as the model APIs stream their answers (Chat Completions, Anthropic
Messages, Gemini's ``alt=sse``).

    for name, data in sse.events(response.iter_lines()):   # name: the ``event:`` field, or ""
        ...

Each event's ``data:`` lines are joined (by newlines, as the SSE format says) and parsed as a
JSON object. OpenAI's closing ``[DONE]`` ends the stream. An error sent inside the stream —
OpenAI's and Gemini's ``{"error": …}``, Anthropic's ``type: error`` — is a `StreamError` with
the provider's message, as is an event that is not a JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


class StreamError(Exception):
    """A streamed answer went wrong: an error event, or data that cannot be read. The message
    says what happened in words fit for users (the client adds the model's name and masks
    secrets)."""


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        kind = error.get("type") or error.get("status") or ""
        message = error.get("message") or kind or json.dumps(error)[:200]
        return f"{message} ({kind})" if kind and kind != message else str(message)
    return str(error)


def events(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event name, data object)`` for each event of the stream whose lines are `lines`."""
    name, data = "", list[str]()
    for line in _with_end(lines):
        if line == "":
            if data:
                text = "\n".join(data)
                if text.strip() == "[DONE]":
                    return
                yield name, _parse(text)
            name, data = "", []
        elif line.startswith(":"):  # a comment (keep-alive)
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value


def _with_end(lines: Iterable[str]) -> Iterator[str]:
    """`lines`, then an empty line: a last event without its blank line still counts."""
    yield from lines
    yield ""


def _parse(text: str) -> dict[str, Any]:
    try:
        event = json.loads(text)
    except ValueError:
        raise StreamError("sent a stream event that is not JSON") from None
    if not isinstance(event, dict):
        raise StreamError("sent a stream event that is not an object")
    if event.get("error") or event.get("type") == "error":
        raise StreamError(f"failed while answering: {_error_text(event.get('error'))}")
    return event
