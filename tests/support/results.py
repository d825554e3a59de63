"""Reading results: the text of a `CallToolResult`, its text items, its `_meta["toolweave"]`, tool names."""

from __future__ import annotations

import re
from typing import Any

import mcp_types as types


def text(result: types.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))


def texts(result: types.CallToolResult) -> list[str]:
    return [item.text for item in result.content if isinstance(item, types.TextContent)]


def meta(result: types.CallToolResult) -> dict[str, Any]:
    """`_meta["toolweave"]`, which must be there."""
    found = (result.meta or {}).get("toolweave")
    assert isinstance(found, dict), result.meta
    return found


def names(tools: list[types.Tool]) -> list[str]:
    return [tool.name for tool in tools]


async def inner_records(gateway: Any, tool: str, status: str | None = None) -> list[Any]:
    """Run records of direct calls to `tool` (the configs set `record_direct_calls`)."""
    return await gateway.runs.list_runs(tool=tool, status=status, limit=1000)


def sections(result: types.CallToolResult) -> list[str]:
    """A fan-out's one text item split back into `[heading, text, heading, text, ...]` (a target that
    gave no text is its heading alone)."""
    found: list[str] = []
    for chunk in re.split(r"\n\n(?=## )", texts(result)[0]) if texts(result) else []:
        heading, _, body = chunk.partition("\n")
        found.extend([heading, body] if body else [heading])
    return found
