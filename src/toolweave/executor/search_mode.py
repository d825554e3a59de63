"""Search mode (`gateway.tool_exposure = "search"`): clients list `find_tools` and `call_tool`
instead of the catalog. `find_tools` searches what the caller may see; `call_tool` calls a tool by
name through the whole pipeline, exactly as if it had been listed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types

from toolweave.catalog.catalog import Catalog
from toolweave.catalog.search import CALL_TOOL, FIND_TOOLS
from toolweave.composite.base import ProgressFn
from toolweave.results import error_result, json_text

CallFn = Callable[..., Awaitable[types.CallToolResult]]
"""`await call(name, arguments, progress=...)`: the executor's own `call`."""


async def answer(
    catalog: Catalog, tenant: str | None, name: str, arguments: Any, call: CallFn, progress: ProgressFn | None
) -> types.CallToolResult:
    """The result of `find_tools` or `call_tool` for `tenant`."""
    if not isinstance(arguments, Mapping):
        return error_result(f"arguments for {name!r} must be a JSON object")
    if name == FIND_TOOLS:
        return _find(catalog, tenant, arguments)
    target = arguments.get("name")
    inner_args = arguments.get("arguments", {})
    if not isinstance(target, str):
        return error_result(
            "call_tool needs {name: string, arguments?: object}; use find_tools to find names"
        )
    if target in (FIND_TOOLS, CALL_TOOL):
        return error_result("call_tool cannot call itself or find_tools")
    return await call(target, inner_args, progress=progress)


def target_of(name: str, arguments: Any) -> str | None:
    """The tool a search-mode call reaches: None for `find_tools`, a malformed or self-calling `call_tool`."""
    if name == FIND_TOOLS:
        return None
    target = arguments.get("name") if isinstance(arguments, Mapping) else None
    if not isinstance(target, str) or target in (FIND_TOOLS, CALL_TOOL):
        return None
    return target


def _find(catalog: Catalog, tenant: str | None, arguments: Mapping[str, Any]) -> types.CallToolResult:
    query = arguments.get("query")
    limit = arguments.get("limit", 10)
    if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return error_result("find_tools needs {query: string, limit?: positive integer}")
    found = catalog.search(query, limit, tenant)
    payload = {"tools": [_summary(tool) for tool in found]}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json_text(payload))], structured_content=payload
    )


def _summary(tool: types.Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description or "", "inputSchema": tool.input_schema}
