"""Server: the MCP front, REST routes, ASGI app assembly."""

from toolweave.server.app import create_app
from toolweave.server.mcp.front import MCPFront

__all__ = ["MCPFront", "create_app"]
