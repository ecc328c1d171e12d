"""The HTTP API's routes (docs/http-api.md#routes): one module per area, each with a module-level
``router = APIRouter()`` that `codesearch.serving.api.build_app` includes.

- `search`: ``POST /api/search``, ``POST /api/stream_search``, ``POST /api/explain``;
- `suggest`: ``GET /api/suggest``, what the search bar offers;
- `repos`: repos, connections, jobs and the sync/index status;
- `source`: ``GET /api/source``, one file at one revision;
- `git`: ``GET /api/tree``, ``GET /api/commits``; `history`: blame, one commit, a diff;
- `codenav`: ``POST /api/find_definitions``, ``/api/find_references``, ``POST /api/tree``;
- `chat` (and `chat_stream`, its Server-Sent Events): the REST forms of the agent tools;
- `permissions`: ``GET /api/permission_sync``; `audit`: ``GET /api/audit`` (the log is `codesearch.audit`);
- `oauth`: the OAuth 2.0 server's endpoints (its protocol is `codesearch.oauth`);
- `webhooks`: ``POST /api/webhooks/<connection>``, signed by the code host;
- `mcp`: the MCP server mounted at ``/api/mcp``.

Handlers get what they need by type from `codesearch.service.deps` (the caller, the store, the
app's `Services`) and reach repositories through `codesearch.app`; docs/development.md#adding-an-http-route
says how to add one. The package imports nothing itself; each module is imported by name.
"""
