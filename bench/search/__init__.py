"""Tool search evaluation: a catalog of real MCP servers' tools, query sets, scores, token sizes."""
