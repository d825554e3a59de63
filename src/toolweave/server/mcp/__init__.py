"""The MCP front: the SDK's low-level server, the tools/call lane, the elicitation broker."""
