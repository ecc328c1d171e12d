"""The application layer: what every front door calls, written once.

The HTTP routes (`codesearch.service`), the web pages (`codesearch.web`), the MCP tools
(`codesearch.tools`) and the Python client (`codesearch.client`) parse their input, call in here
and serialise what comes back. Nothing here knows HTTP framing, HTML or MCP; nothing here imports
those layers.

- `search`: search as a caller (start, stream, merge, hints, options).
- `index_progress`: how much of the index is built, for the stats of a search.
"""
