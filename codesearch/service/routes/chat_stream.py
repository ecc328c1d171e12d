"""``POST /api/chat``'s answer: the agent's work as Server-Sent Events, as it happens.

Sourcebot's ``/api/chat`` answers with the Vercel AI SDK's *UI message stream* (SSE, header
``x-vercel-ai-ui-message-stream: v1``): each event is ``data: <JSON object>`` with a ``type``,
and the stream ends with ``data: [DONE]``. We send the same event types, so a client written for
Sourcebot's stream reads ours:

- ``start``: the answer begins (``messageId``);
- ``tool-input-available``: a tool call, before it runs (``toolCallId``, ``toolName``, ``input``);
- ``tool-output-available``: its result (``toolCallId``, ``output`` = ``{summary, isError, text}``);
- ``text-start``, ``text-delta`` (``id``, ``delta``)..., ``text-end``: the model's markdown as it
  is produced (text said before a tool call is a part of its own);
- ``data-chat``: ours (the AI SDK allows ``data-*`` parts), ``data`` = ``{chatId, chatUrl, turn,
  visibility, answerHtml}``: the stored chat and the answer rendered for the caller, its code
  references linked;
- ``message-metadata``: ``messageMetadata`` = ``{modelName, totalInputTokens, ...}``;
- ``error``: ``errorText``, what went wrong (the model failed; never a secret);
- ``finish``: the answer is complete.

The agent is synchronous (an HTTP client per model turn, tools that read git), so it runs in a
thread of its own; events cross to the response through an asyncio queue. The thread is not
tied to the connection: a browser that goes away does not lose the answer, which is stored
when the agent finishes and shows at ``/chat/<id>``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

log = logging.getLogger(__name__)

HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no", "x-vercel-ai-ui-message-stream": "v1"}


def sse(payload: Any) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


async def stream(
    work: Callable[[Callable[[dict[str, Any]], None]], Any],
    finish: Callable[[Any], list[dict[str, Any]]],
    fail: Callable[[BaseException], list[dict[str, Any]]],
) -> AsyncIterator[bytes]:
    """Run `work(emit)` in a thread and yield its events as SSE: ``start``, what it emits,
    then ``finish(result)``'s events (or ``fail(error)``'s), ``finish`` and ``[DONE]``."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def emit(event: dict[str, Any]) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, ("event", event))

    def target() -> None:
        try:
            result = work(emit)
        except BaseException as e:  # reported in the stream; the thread ends either way
            loop.call_soon_threadsafe(queue.put_nowait, ("error", e))
        else:
            loop.call_soon_threadsafe(queue.put_nowait, ("done", result))

    threading.Thread(target=target, name="chat-agent", daemon=True).start()
    yield sse({"type": "start", "messageId": secrets.token_urlsafe(12)})
    while True:
        kind, value = await queue.get()
        if kind == "event":
            yield sse(value)
            continue
        try:
            tail = finish(value) if kind == "done" else fail(value)
        except Exception:
            log.exception("the chat stream could not be finished")
            tail = [{"type": "error", "errorText": "internal error while finishing the answer"}]
        for event in tail:
            yield sse(event)
        yield sse({"type": "finish"})
        yield sse("[DONE]")
        return
