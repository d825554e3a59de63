"""Search mode (`gateway.tool_exposure = "search"`): clients list `find_tools` and `call_tool`
instead of the catalog. `find_tools` searches what the caller may see; `call_tool` calls a tool by
name through the whole pipeline, exactly as if it had been listed.

A `find_tools` answer is built to be cheap in an agent's context: one line a tool (its name, a
compact parameter signature and the first sentence of its description), sent once as text. The
full input schemas come only with `detail: true`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import mcp_types as types

from toolweave.catalog.catalog import Catalog
from toolweave.catalog.search import CALL_TOOL, FIND_TOOLS
from toolweave.catalog.semantic import SemanticRanker, fuse
from toolweave.common_types import ProgressFn
from toolweave.results import error_result, json_text
from toolweave.schemas.read import required_of

logger = logging.getLogger("toolweave.search")

CallFn = Callable[..., Awaitable[types.CallToolResult]]
"""`await call(name, arguments, progress=...)`: the executor's own `call`."""
FoundFn = Callable[[Sequence[str]], bool]
"""Told the names `find_tools` returned; True when they are now in the caller's own `tools/list`."""

MAX_LIMIT = 50
DEFAULT_LIMIT = 5
MAX_PURPOSE = 160
MAX_PARAMETERS = 12
MAX_ENUM_SHOWN = 5
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`\"'])|\n\s*\n|\n(?=\s*[-*#]|\s*[A-Z][a-z]+:)")


async def answer(
    catalog: Catalog,
    tenant: str | None,
    name: str,
    arguments: Any,
    call: CallFn,
    progress: ProgressFn | None,
    semantic: SemanticRanker | None = None,
    found: FoundFn | None = None,
) -> types.CallToolResult:
    """The result of `find_tools` or `call_tool` for `tenant`; `found` hears what `find_tools` returned."""
    if not isinstance(arguments, Mapping):
        return error_result(f"arguments for {name!r} must be a JSON object")
    if name == FIND_TOOLS:
        return await _find(catalog, tenant, arguments, semantic, found)
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


async def _find(
    catalog: Catalog,
    tenant: str | None,
    arguments: Mapping[str, Any],
    semantic: SemanticRanker | None,
    listen: FoundFn | None,
) -> types.CallToolResult:
    problem = find_arguments_problem(arguments)
    if problem is not None:
        return error_result(problem)
    query: str = arguments["query"]
    limit: int = arguments.get("limit", DEFAULT_LIMIT)
    found, warning = await find(catalog, tenant, query, limit, semantic)
    listed = bool(found) and listen is not None and listen([tool.name for tool in found])
    text = render_found(query, found, detail=arguments.get("detail", False), listed=listed)
    if warning:
        text = f"{text}\n(note: {warning})"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def find(
    catalog: Catalog, tenant: str | None, query: str, limit: int, semantic: SemanticRanker | None
) -> tuple[list[types.Tool], str | None]:
    """The best `limit` tools `tenant` sees for `query`: lexical, fused with the meaning-based
    ranking when one is configured; and a warning when that ranking could not take part."""
    index = catalog.index
    assert index is not None
    lexical = index.ranked(query)
    if semantic is None:
        return catalog.visible_in_order((position for position, _ in lexical), limit, tenant), None
    by_meaning, warning = await semantic.rank(query, index)
    if warning is not None:
        logger.warning("find_tools: %s", warning)
    if by_meaning:
        order = fuse(lexical, by_meaning, semantic.config.weight)
    else:
        order = [position for position, _ in lexical]
    return catalog.visible_in_order(order, limit, tenant), warning


def find_arguments_problem(arguments: Mapping[str, Any]) -> str | None:
    """What is wrong with `find_tools` arguments, said so an agent can fix its call; None if nothing."""
    usage = "find_tools needs {query: string, limit?: integer 1-50, detail?: boolean}"
    query = arguments.get("query")
    limit = arguments.get("limit", DEFAULT_LIMIT)
    detail = arguments.get("detail", False)
    unknown = sorted(set(arguments) - {"query", "limit", "detail"})
    if not isinstance(query, str) or not query.strip():
        return f"{usage}: 'query' must be a non-empty string"
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        return f"{usage}: 'limit' must be an integer from 1 to {MAX_LIMIT}, not {limit!r}"
    if not isinstance(detail, bool):
        return f"{usage}: 'detail' must be true or false, not {detail!r}"
    if unknown:
        return f"{usage}: unknown argument(s) {', '.join(map(repr, unknown))}"
    return None


def render_found(
    query: str, tools: Sequence[types.Tool], *, detail: bool = False, listed: bool = False
) -> str:
    """The text of a `find_tools` answer: one line a tool, or (detail) each tool with its schema;
    `listed`: the tools are now in the caller's own `tools/list` (`[search] list_found`)."""
    if not tools:
        return f"No tool matches {query!r}. Try other words for what you want to do."
    if detail:
        return json_text(
            {
                "tools": [
                    {"name": t.name, "description": t.description or "", "inputSchema": t.input_schema}
                    for t in tools
                ]
            }
        )
    lines = [f"{tool.name}{signature(tool.input_schema)} - {purpose(tool)}" for tool in tools]
    if listed:
        lines.append("These tools are now in your tool list: call them directly, or with call_tool.")
    else:
        lines.append("Call with call_tool {name, arguments}; find_tools detail=true gives full schemas.")
    return "\n".join(lines)


def purpose(tool: types.Tool) -> str:
    """The first sentence of a tool's description (or its title), at most MAX_PURPOSE characters."""
    text = (tool.description or tool.title or "").strip()
    first = _SENTENCE_END.split(text, 1)[0] if text else ""
    first = " ".join(first.split())
    return first if len(first) <= MAX_PURPOSE else first[: MAX_PURPOSE - 3].rstrip() + "..."


def signature(schema: Mapping[str, Any] | None) -> str:
    """`(owner: string, repo: string, state?: "open"|"closed", labels?: string[])`: `?` marks optional."""
    properties = (schema or {}).get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return "()"
    required = set(required_of(schema))
    ordered = sorted(properties, key=lambda name: name not in required)
    shown = [f"{name}{'' if name in required else '?'}: {_type_of(properties[name])}" for name in ordered]
    more = len(shown) - MAX_PARAMETERS
    if more > 0:
        shown = [*shown[:MAX_PARAMETERS], f"+{more} more"]
    return "(" + ", ".join(shown) + ")"


def _type_of(node: Any) -> str:
    if not isinstance(node, Mapping):
        return "any"
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        values = "|".join(json_text(value) for value in enum[:MAX_ENUM_SHOWN])
        return values + ("|..." if len(enum) > MAX_ENUM_SHOWN else "")
    kind = node.get("type")
    if isinstance(kind, list):
        kind = "|".join(str(k) for k in kind if k != "null") or "null"
    if kind == "array":
        return f"{_type_of(node.get('items'))}[]"
    if kind is None:
        options = node.get("anyOf") or node.get("oneOf")
        if isinstance(options, list) and options:
            kinds = {_type_of(option) for option in options} - {"null"}
            return "|".join(sorted(kinds)) or "any"
        return "any"
    return str(kind)
