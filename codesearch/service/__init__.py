"""The HTTP service: routes, middleware, authentication, audit and the MCP server, over the application
layer (`codesearch.app`). The app is put together, and deployed on Ray Serve, by `codesearch.serving`."""
