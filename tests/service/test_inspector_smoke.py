"""The MCP Inspector CLI (tests/inspector.py) against a tiny MCP server made with the official Python SDK.

This pins down the client harness itself: the argv it builds, Bearer headers, argument types on the wire,
and how a refused call shows, against a server that is not ours, before it is pointed at our /api/mcp.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from tests.inspector import InspectorError, inspector_command, run_inspector

TOKEN = "secret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PATH = "/api/mcp"


def make_app(port: int, seen: list[dict]):
    server = MCPServer("inspector-smoke")

    @server.tool()
    def echo(text: str, times: int = 1) -> str:
        """Repeat text."""
        return text * times

    mcp_app = server.streamable_http_app(
        stateless_http=True, json_response=False, streamable_http_path=PATH,
        transport_security=TransportSecuritySettings(
            allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
            allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"]))

    async def app(scope, receive, send):
        """401 unless `Authorization: Bearer secret`; records each JSON-RPC body it lets through."""
        if scope["type"] != "http":  # lifespan: starts the SDK's session manager
            return await mcp_app(scope, receive, send)
        if dict(scope["headers"]).get(b"authorization") != f"Bearer {TOKEN}".encode():
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": b'{"error":"unauthorized"}'})
            return
        chunks: list[bytes] = []

        async def recording_receive():
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body") and chunks[0]:
                    try:
                        seen.append(json.loads(b"".join(chunks)))
                    except ValueError:
                        pass
            return message

        await mcp_app(scope, recording_receive, send)

    return app


@pytest.fixture(scope="module")
def mcp_server():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    seen: list[dict] = []
    server = uvicorn.Server(uvicorn.Config(make_app(port, seen), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "MCP test server did not start"
        time.sleep(0.05)
    yield {"url": f"http://127.0.0.1:{port}{PATH}", "seen": seen}
    server.should_exit = True
    thread.join(10)
    sock.close()


def calls(seen: list[dict], method: str) -> list[dict]:
    return [m for m in seen if isinstance(m, dict) and m.get("method") == method]


def test_command_line():
    argv = inspector_command("http://127.0.0.1:1/api/mcp", headers=AUTH, method="tools/call", tool_name="echo",
                             tool_args={"text": "123", "times": 2})
    assert argv[2] == "--cli"
    assert argv[argv.index("--transport") + 1] == "http"
    assert argv[argv.index("--header") + 1] == "Authorization: Bearer secret"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--tool-arg"] == ['text="123"', "times=2"]


def test_tools_list(mcp_server):
    result = run_inspector(mcp_server["url"], headers=AUTH, method="tools/list")
    (tool,) = result["tools"]
    assert tool["name"] == "echo"
    assert tool["inputSchema"]["properties"]["times"]["type"] == "integer"
    assert tool["inputSchema"]["required"] == ["text"]


def test_tools_call_types_on_the_wire(mcp_server):
    before = len(calls(mcp_server["seen"], "tools/call"))
    result = run_inspector(mcp_server["url"], headers=AUTH, method="tools/call", tool_name="echo",
                           tool_args={"text": "123", "times": 3})
    assert result["isError"] is False
    assert result["content"] == [{"type": "text", "text": "123123123"}]
    (call,) = calls(mcp_server["seen"], "tools/call")[before:]
    assert call["params"]["name"] == "echo"
    args = call["params"]["arguments"]
    assert args == {"text": "123", "times": 3}
    assert type(args["times"]) is int and type(args["text"]) is str  # digits stay a string, an int is a number


def test_tool_error_is_exit_5_with_result(mcp_server):
    with pytest.raises(InspectorError) as err:
        run_inspector(mcp_server["url"], headers=AUTH, method="tools/call", tool_name="echo", tool_args={"times": 2})
    assert err.value.returncode == 5
    assert err.value.error["code"] == "tool_is_error"
    assert err.value.result["isError"] is True


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}], ids=["no-header", "wrong-token"])
def test_without_the_token_it_fails(mcp_server, headers):
    started = time.monotonic()
    with pytest.raises(InspectorError) as err:
        run_inspector(mcp_server["url"], headers=headers, method="tools/list")
    assert err.value.returncode == 3, err.value.stderr
    assert err.value.error["code"] == "auth_required"
    assert "unauthorized" in err.value.error["message"]
    assert time.monotonic() - started < 30  # --stored-auth-only: no interactive OAuth wait


def test_unreachable_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(InspectorError) as err:
            run_inspector(f"http://127.0.0.1:{port}{PATH}", headers=AUTH, method="tools/list")
    assert err.value.returncode == 4
    assert err.value.error["code"] == "unreachable"
