"""A synchronous face on the official MCP SDK client, for tests: one session per call.

`McpClient(url, headers)` connects with ``streamable_http_client`` (Streamable HTTP) and
``ClientSession``; every method opens a session, initializes it, does one thing and closes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@dataclass
class ToolResult:
    text: str
    is_error: bool
    raw: object


class McpClient:
    def __init__(self, url: str, headers: dict[str, str] | None = None, timeout_s: float = 120.0):
        self.url = url
        self.headers = headers or {}
        self.timeout_s = timeout_s

    async def _with_session(self, fn):
        async with httpx2.AsyncClient(headers=self.headers, timeout=self.timeout_s) as http:
            async with streamable_http_client(self.url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    return await fn(session, init)

    def run(self, fn):
        return asyncio.run(self._with_session(fn))

    def initialize(self):
        return self.run(lambda s, init: _value(init))

    def list_tools(self) -> list:
        async def go(s, _init):
            return (await s.list_tools()).tools
        return self.run(go)

    def call(self, name: str, arguments: dict | None = None, *, progress: list | None = None) -> ToolResult:
        """Call one tool; with `progress`, the server's progress notifications are appended to it
        as (progress, total, message)."""
        async def on_progress(value, total, message):
            progress.append((value, total, message))

        async def go(s, _init):
            return await s.call_tool(name, arguments or {},
                                     progress_callback=on_progress if progress is not None else None)
        res = self.run(go)
        texts = [c.text for c in res.content if getattr(c, "type", "") == "text"]
        assert len(texts) == 1, f"{name}: expected one text item, got {res.content!r}"
        return ToolResult(texts[0], bool(res.is_error), res)

    def calls(self, pairs: list[tuple[str, dict]]) -> list[ToolResult]:
        """Several calls in one session (as an agent does)."""
        async def go(s, _init):
            out = []
            for name, args in pairs:
                res = await s.call_tool(name, args)
                out.append(ToolResult(res.content[0].text, bool(res.is_error), res))
            return out
        return self.run(go)


async def _value(x):
    return x
