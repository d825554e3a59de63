"""A stdio MCP server that writes to stderr: at startup, and on demand (`shout`)."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("noisy")


@server.tool()
def shout(text: str, repeat: int = 1) -> str:
    """Write `text` to stderr `repeat` times."""
    for _ in range(repeat):
        sys.stderr.write(text + "\n")
    sys.stderr.flush()
    return "written"


if __name__ == "__main__":
    sys.stderr.write(f"noisy starting with token {os.environ.get('NOISY_API_TOKEN', '')}\n")
    sys.stderr.flush()
    server.run("stdio")
