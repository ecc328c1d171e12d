"""How the fake model server (tests/fakellm.py) streams an answer, in each provider's real wire
format, and how it breaks a stream on request.

    stream = stream_for(dialect, path, query, body, answer)   # None: the request asked for no stream
    write(h, stream, delay=0.0, fault=None)

`answer` is the plain answer the fake would send; the stream carries the same content the
way the provider streams it:

* Chat Completions: Server-Sent Events of ``chat.completion.chunk`` (text a few words at a
  time, each tool call's arguments in two pieces, a usage chunk when
  ``stream_options.include_usage``), then ``data: [DONE]``;
* Anthropic Messages (``stream: true``; Vertex AI's ``:streamRawPredict``): named events
  ``message_start``, ``ping``, ``content_block_start/_delta/_stop``, ``message_delta``,
  ``message_stop``;
* Gemini ``:streamGenerateContent?alt=sse``: events (CRLF-separated, as Google sends them) each
  a whole ``GenerateContentResponse`` with the next parts, the last with the finish reason;
  without ``alt=sse``, one JSON array of those responses (the API's default);
* Bedrock ``/converse-stream``: AWS event-stream messages (real prelude and message CRC32s,
  `codesearch.llm.eventstream.encode`), ``:event-type`` ``messageStart``,
  ``contentBlockStart`` (tool uses), ``contentBlockDelta``, ``contentBlockStop``,
  ``messageStop``, ``metadata``, each payload padded with a ``p`` field as Bedrock does.

Faults (`FakeModelServer.break_stream`): ``"error"`` — the provider's error event after the
first pieces, ending the stream; ``"cut"`` — the connection closes half-way (Bedrock: inside a
message); ``"not-json"`` — an event whose data is not JSON; ``"crc"`` / ``"prelude"`` (Bedrock)
— a message whose message / prelude CRC does not match its bytes.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from codesearch.llm import eventstream

WORDS = re.compile(r"\S+\s*|\s+")
EVENTSTREAM_TYPE = "application/vnd.amazon.eventstream"

#: The error each provider sends inside a stream (the "error" fault).
ERROR_EVENTS: dict[str, tuple[str, dict]] = {
    "openai": ("", {"error": {"message": "The server had an error while processing your request.",
                              "type": "server_error", "code": None}}),
    "anthropic": ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    "gemini": ("", {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                              "status": "UNAVAILABLE"}}),
    "bedrock": ("modelStreamErrorException", {"message": "The model stream was interrupted."}),
}
ERROR_EVENTS["vertex-anthropic"] = ERROR_EVENTS["anthropic"]


@dataclass
class Stream:
    dialect: str
    framing: str  # "sse", "json-array" or "eventstream"
    events: list[tuple[str, dict]]  # (SSE event name or Bedrock event type, data)


def chat_completion_events(completion: dict, body: dict) -> list[tuple[str, dict]]:
    message = completion["choices"][0]["message"]
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}

    def chunk(delta: dict, finish=None) -> tuple[str, dict]:
        return "", {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in WORDS.findall(message.get("content") or "")]
    for i, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        half = len(args) // 2
        chunks.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": args[:half]}}]}))
        chunks.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]}))
    chunks.append(chunk({}, completion["choices"][0]["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append(("", {**base, "choices": [], "usage": completion["usage"]}))
    return chunks


def _halves(text: str) -> list[str]:
    half = len(text) // 2
    return [text[:half], text[half:]]


def message_events(message: dict) -> list[tuple[str, dict]]:
    events = [("message_start", {"type": "message_start", "message": {
        **message, "content": [], "stop_reason": None,
        "usage": {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1}}}),
        ("ping", {"type": "ping"})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            events += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "text_delta", "text": piece}})
                       for piece in WORDS.findall(block["text"])]
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            text = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            events += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "input_json_delta", "partial_json": part}})
                       for part in _halves(text)]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                                                      "stop_sequence": None},
                                  "usage": {"output_tokens": message["usage"]["output_tokens"]}}),
               ("message_stop", {"type": "message_stop"})]
    return events


def gemini_events(response: dict) -> list[tuple[str, dict]]:
    """One response per part (text: per few words), usage in each, the finish reason last."""
    candidate = response["candidates"][0]
    pieces: list[dict] = []
    for part in candidate["content"]["parts"]:
        if "text" in part and not part.get("thought"):
            pieces += [{"text": w} for w in WORDS.findall(part["text"])]
        else:
            pieces.append(part)
    usage = response["usageMetadata"]
    out = []
    for n, part in enumerate(pieces):
        c: dict[str, Any] = {"content": {"role": "model", "parts": [part]}, "index": 0}
        if n == len(pieces) - 1:
            c["finishReason"] = candidate["finishReason"]
        out.append(("", {"candidates": [c], "usageMetadata": usage, "modelVersion": response["modelVersion"],
                         "responseId": "fake-response"}))
    return out


def converse_events(answer: dict) -> list[tuple[str, dict]]:
    blocks = answer["output"]["message"]["content"]
    events: list[tuple[str, dict]] = [("messageStart", {"role": "assistant"})]
    for i, block in enumerate(blocks):
        if "text" in block:
            events += [("contentBlockDelta", {"contentBlockIndex": i, "delta": {"text": piece}})
                       for piece in WORDS.findall(block["text"])]
        else:
            use = block["toolUse"]
            events.append(("contentBlockStart", {"contentBlockIndex": i, "start": {
                "toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}}}))
            text = use["input"] if isinstance(use["input"], str) else json.dumps(use["input"])
            events += [("contentBlockDelta", {"contentBlockIndex": i, "delta": {"toolUse": {"input": part}}})
                       for part in _halves(text)]
        events.append(("contentBlockStop", {"contentBlockIndex": i}))
    events += [("messageStop", {"stopReason": answer["stopReason"]}),
               ("metadata", {"usage": answer["usage"], "metrics": answer["metrics"]})]
    return events


def stream_for(dialect: str, path: str, query: str, body: dict, answer: Any) -> Stream | None:
    """The stream to send for this answer, or None when the request asked for a plain answer."""
    if not isinstance(answer, dict):
        return None
    if dialect == "openai" and body.get("stream") is True and answer.get("object") == "chat.completion":
        return Stream(dialect, "sse", chat_completion_events(answer, body))
    if dialect in ("anthropic", "vertex-anthropic") and body.get("stream") is True and answer.get("type") == "message":
        return Stream(dialect, "sse", message_events(answer))
    if dialect == "gemini" and path.endswith(":streamGenerateContent") and "candidates" in answer:
        return Stream(dialect, "sse" if "alt=sse" in query.split("&") else "json-array", gemini_events(answer))
    if dialect == "bedrock" and path.endswith("/converse-stream") and "output" in answer:
        return Stream(dialect, "eventstream", converse_events(answer))
    return None


def _frame(event_type: str, data: dict, *, exception: bool = False) -> bytes:
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    if exception:
        headers = {":exception-type": event_type, ":content-type": "application/json", ":message-type": "exception"}
    payload = json.dumps({**data, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"[:len(event_type)]} if not exception
                         else data).encode()
    return eventstream.encode(headers, payload)


def _encoded(stream: Stream, fault: str | None) -> list[bytes]:
    """The stream's bytes, a list of writes, with `fault` applied."""
    events = list(stream.events)
    cut_at = max(2, len(events) // 2)
    if fault == "error":
        events = events[:cut_at] + [ERROR_EVENTS[stream.dialect]]
    elif fault == "cut":
        events = events[:cut_at]
    if stream.framing == "eventstream":
        frames = [_frame(kind, data, exception=fault == "error" and n == len(events) - 1)
                  for n, (kind, data) in enumerate(events)]
        if fault == "cut":
            frames[-1] = frames[-1][:len(frames[-1]) // 2]
        elif fault == "crc":
            broken = bytearray(frames[1])
            broken[-6] ^= 0x01  # a payload byte: the message CRC no longer matches
            frames[1] = bytes(broken)
        elif fault == "prelude":
            broken = bytearray(frames[1])
            broken[3] ^= 0x01  # the total length: the prelude CRC no longer matches
            frames[1] = bytes(broken)
        elif fault == "not-json":
            frames.insert(1, eventstream.encode({":event-type": "contentBlockDelta", ":message-type": "event"},
                                                b'{"contentBlockIndex": 0, "delta": {"te'))
        return frames
    if stream.framing == "json-array":
        return [json.dumps([data for _, data in events]).encode()]
    sep = "\r\n\r\n" if stream.dialect == "gemini" else "\n\n"
    out = [((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}{sep}").encode() for name, data in events]
    if fault == "not-json":
        out.insert(1, f"data: {{\"choices\": [{sep}".encode())
    if stream.dialect == "openai" and fault is None:
        out.append(f"data: [DONE]{sep}".encode())
    return out


def write(h, stream: Stream, *, delay: float = 0.0, fault: str | None = None) -> None:
    """Send `stream` as the answer on handler `h`, `delay` seconds between writes."""
    content_type = {"sse": "text/event-stream", "json-array": "application/json",
                    "eventstream": EVENTSTREAM_TYPE}[stream.framing]
    h.send_response(200)
    h.send_header("Content-Type", content_type)
    h.send_header("Connection", "close")
    h.end_headers()
    for chunk in _encoded(stream, fault):
        if stream.framing == "eventstream":  # frames arrive split across reads, as over a real network
            h.wfile.write(chunk[:5])
            h.wfile.flush()
            chunk = chunk[5:]
        h.wfile.write(chunk)
        h.wfile.flush()
        if delay:
            time.sleep(delay)
    h.close_connection = True
