"""The HTTP service: the API's routes, the MCP server, the middleware every request passes through,
and who is calling, over the application layer (`codesearch.app`). The app is put together, and
deployed on Ray Serve, by `codesearch.serving`.

- `routes/`: one module per area of the API (docs/http-api.md#routes), each with a module-level
  ``router``; the MCP server's mount (`routes.mcp`) and the push webhooks among them;
- `middleware/`: pure ASGI middleware (request ids and metrics, allowed hosts, security headers,
  gzip, request limits, the body Serve's proxy sends ahead);
- `auth`: who is calling (API keys, OAuth access tokens at the MCP endpoint, the web session
  cookie or IAP with their CSRF header, anonymous access: `anonymous`);
- `deps`: the app's one state container (`deps.Services`, ``app.state.services``) and the typed
  dependencies handlers declare (the caller, the store, the services);
- `errors`: the error bodies of docs/http-api.md#errors (pages for browsers, through
  `Services.error_page`).

What the pages need too lives below this package, and both import it: browser sessions and CSRF
tokens (`codesearch.sessions`), the audit log (`codesearch.audit`), the OAuth 2.0 server's protocol
(`codesearch.oauth`), who sent a request (`codesearch.forwarded`). The web UI (`codesearch.web`)
sits above; nothing here imports it.
"""
