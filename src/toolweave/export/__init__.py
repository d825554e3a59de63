"""Exporting tools: mini-prompt description writing (`describe`) and export formats.

`export_tools(tools, format)` renders catalog tools as MCP, OpenAI (Chat
Completions and Responses), Anthropic, LangChain or the provider-neutral `universal`
JSON; see `formats.py` for each shape and docs/export.md for the rules.
"""

from toolweave.export.formats import (
    FORMATS,
    description_of,
    export_tool,
    export_tools,
    exported_names,
)
from toolweave.export.names import NAME_PATTERN, is_safe_name, safe_name, safe_names
from toolweave.export.strict import is_strict_compatible, strict_problems

__all__ = [
    "FORMATS",
    "NAME_PATTERN",
    "description_of",
    "export_tool",
    "export_tools",
    "exported_names",
    "is_safe_name",
    "is_strict_compatible",
    "safe_name",
    "safe_names",
    "strict_problems",
]
