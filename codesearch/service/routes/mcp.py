"""The MCP server at ``/api/mcp`` (docs/mcp-tools.md): the tool catalog over Streamable HTTP.

Built with the official MCP Python SDK (2.x, `MCPServer`), run **stateless** with SSE responses:
every request is self-contained, so any Serve replica answers any request (with stateful
sessions, a second replica fails the calls of sessions it does not hold), and a tool's progress
can stream.

Authentication is the HTTP API's (`auth.Authenticator`: API keys and OAuth access tokens): an
ASGI wrapper in front of the SDK's endpoint answers 401 ``NOT_AUTHENTICATED`` with
``WWW-Authenticate: Bearer resource_metadata="…"`` (RFC 9728: where MCP clients learn to sign
in with OAuth, `routes.oauth`) when there is no valid credential and anonymous access is off,
and leaves the caller's `Identity` in the request state, where each tool call picks it up to build
its `ToolContext` (so every repo access runs
through `codesearch.permissions` with the caller's identity).

Tools come from `codesearch.tools.catalog`: one declaration gives the SDK its input schema, and
`ToolSpec.call` holds every answer to the size budget (about 20 KB, cut with a hint on how to
narrow the question). A tool failure is a result with ``isError: true`` and the tool's message
(`CodesearchError`s are written for the agent); anything unexpected is logged and answered with
a generic message, never a stack trace. ``ask_codebase`` is listed only when a language model is configured.

The SDK's DNS-rebinding protection is on, with the host names the whole app answers for
(`allowed_hosts.mcp_transport_security`): a request for another ``Host`` is refused (421, as the
app's own `allowed_hosts.CheckHost` already does), and so is a browser's request whose ``Origin``
is not one of those names (403): a page of another site cannot call the tools with a visitor's
browser, even where anonymous access lets anyone.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import Tool, ToolAnnotations
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from codesearch.app.context import ToolContext
from codesearch.errors import CodesearchError, NotAuthenticated
from codesearch.permissions import Identity
from codesearch.service.auth import Authenticator
from codesearch.service.middleware.allowed_hosts import AllowedHosts, mcp_transport_security
from codesearch.tools.catalog import TOOLS
from codesearch.tools.read_tools import ToolSpec, parameters

if TYPE_CHECKING:
    from fastapi import FastAPI

    from codesearch.audit import AuditLog

log = logging.getLogger(__name__)

MCP_PATH = "/api/mcp"
INSTRUCTIONS = (
    "Code search over the repositories indexed by this codesearch instance. Start with list_repos to learn "
    "repository names, grep to find code by regex, glob to find files, read_file and list_tree to read, "
    "find_symbol_definitions/find_symbol_references to follow symbols, list_commits, list_branches and get_diff "
    "for history. Answers are cut at about 20 KB with a note on how to narrow the question."
)


class CodesearchMCP(MCPServer):
    """`MCPServer` that hides ``ask_codebase`` while no language model is configured."""

    def __init__(self, *args: Any, has_models: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._has_models = has_models

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        if any(t.name == "ask_codebase" for t in tools):
            has = await anyio.to_thread.run_sync(self._has_models)
            if not has:
                tools = [t for t in tools if t.name != "ask_codebase"]
        return tools


def _identity(ctx: Context, authenticator: Authenticator) -> Identity:
    request = getattr(ctx.request_context, "request", None)
    state = getattr(request, "scope", {}).get("state") if request is not None else None
    identity = state.get("identity") if isinstance(state, dict) else None
    if isinstance(identity, Identity):
        return identity
    return authenticator.identify_mcp(ctx.headers or {})  # a transport without our wrapper: check again


def _progress_reporter(ctx: Context) -> Callable[[str], None]:
    """A callback for the tool's thread that sends MCP progress notifications on the request's
    event loop (counting steps; the SDK sends nothing unless the client gave a progress token)."""
    steps = iter(range(1, 1 << 30))

    def report(message: str) -> None:
        anyio.from_thread.run(functools.partial(ctx.report_progress, float(next(steps)), None, message))

    return report


def _handler(
    spec: ToolSpec,
    authenticator: Authenticator,
    make_context: Callable[[Identity], ToolContext],
    audit_log: AuditLog | None = None,
) -> Callable[..., Awaitable[str]]:
    """An async function with the tool's parameters (plus the SDK's `Context`) that runs the tool
    on a worker thread (tools block on git, the database and the searchers)."""

    async def handler(ctx: Context, **kwargs: Any) -> str:
        try:
            identity = _identity(ctx, authenticator)
            if audit_log is not None:
                audit_log.record(identity, "mcp.tool", spec.name, **kwargs)
            tc = make_context(identity)
            tc.progress = _progress_reporter(ctx)
            return await anyio.to_thread.run_sync(functools.partial(spec.call, tc, **kwargs))
        except NotAuthenticated as e:
            raise ToolError(str(e)) from None
        except CodesearchError as e:
            raise ToolError(str(e)) from None
        except Exception:
            log.exception("MCP tool %s failed", spec.name)
            raise ToolError(f"{spec.name} failed unexpectedly; try again or use another tool") from None

    params = parameters(spec)
    ctx_param = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)
    # what the SDK reads for the tool's input schema (`inspect.signature` honours it; functions do not declare it)
    handler.__dict__["__signature__"] = inspect.Signature([ctx_param, *params], return_annotation=str)
    handler.__annotations__ = {"ctx": Context, **{p.name: p.annotation for p in params}, "return": str}
    handler.__name__ = spec.name
    handler.__qualname__ = spec.name
    handler.__doc__ = spec.description
    return handler


def build_server(
    authenticator: Authenticator,
    make_context: Callable[[Identity], ToolContext],
    has_models: Callable[[], bool],
    *,
    version: str = "",
    audit_log: AuditLog | None = None,
) -> CodesearchMCP:
    server = CodesearchMCP("codesearch", version=version, instructions=INSTRUCTIONS, has_models=has_models)
    for spec in TOOLS:
        server.add_tool(
            _handler(spec, authenticator, make_context, audit_log),
            name=spec.name,
            title=spec.title,
            description=spec.description,
            structured_output=False,
            annotations=ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=spec.destructive,
                idempotent_hint=spec.read_only if spec.idempotent is None else spec.idempotent,
                open_world_hint=spec.open_world,
            ),
        )
    return server


class AuthenticatedEndpoint:
    """ASGI wrapper of the SDK's endpoint: 401 without credentials, the `Identity` in the state."""

    def __init__(self, inner: ASGIApp, authenticator: Authenticator) -> None:
        self.inner = inner
        self.authenticator = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        try:
            identity = await anyio.to_thread.run_sync(self.authenticator.identify_mcp, headers)
        except NotAuthenticated as e:
            body = json.dumps({"statusCode": 401, "errorCode": e.error_code, "message": str(e)}).encode()
            challenge = self.authenticator.challenge(scope, e).encode("latin-1")
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", challenge),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        scope.setdefault("state", {})["identity"] = identity
        await self.inner(scope, receive, send)


def install(
    app: FastAPI,
    authenticator: Authenticator,
    make_context: Callable[[Identity], ToolContext],
    has_models: Callable[[], bool],
    *,
    version: str = "",
    audit_log: AuditLog | None = None,
    allowed_hosts: AllowedHosts | None = None,
) -> CodesearchMCP:
    """Add ``/api/mcp`` to the FastAPI `app` and run the SDK's session manager in its lifespan;
    `allowed_hosts` (default: `AllowedHosts.from_environ`) for the SDK's Host and Origin checks."""
    server = build_server(authenticator, make_context, has_models, version=version, audit_log=audit_log)
    sdk_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=False,
        transport_security=mcp_transport_security(allowed_hosts or AllowedHosts.from_environ()),
    )
    endpoint = next(r.endpoint for r in sdk_app.routes if isinstance(r, Route) and r.path == MCP_PATH)
    app.router.routes.append(
        Route(MCP_PATH, endpoint=AuthenticatedEndpoint(endpoint, authenticator), methods=["GET", "POST", "DELETE"])
    )

    previous = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: FastAPI) -> AsyncIterator[Any]:  # the state `previous` yields, if any
        async with server.session_manager.run(), previous(a) as state:
            yield state

    app.router.lifespan_context = lifespan
    return server
