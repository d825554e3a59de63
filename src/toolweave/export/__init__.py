"""Exporting tools: description writing now, export formats (mcp, openai, anthropic, ...) later."""
