"""Server: the MCP front (`server/mcp/`), REST routes (`server/api/`), the web UI (`server/ui/`), ASGI app
assembly (`server/app.py`). Nothing is imported here: `from toolweave.server.api import present` (the CLI's
`keys` and `runs`) must not load the whole server."""
