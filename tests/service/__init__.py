"""The HTTP API, MCP, OAuth, security and the Serve deployment (`codesearch serve`)."""
