"""Building `CallToolResult`s: failures are values an agent can read, not exceptions."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import orjson

META_KEY = "toolweave"


def text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def error_result(message: str, *, meta: dict[str, Any] | None = None) -> types.CallToolResult:
    """An `isError` result whose text tells the agent what went wrong and what to do."""
    return types.CallToolResult(
        content=[text(message)], is_error=True, _meta={META_KEY: meta} if meta is not None else None
    )


def ok_result(
    content: list[Any] | None = None,
    *,
    structured: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> types.CallToolResult:
    return types.CallToolResult(
        content=content or [],
        structured_content=structured,
        is_error=False,
        _meta={META_KEY: meta} if meta is not None else None,
    )


def json_text(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def joined_text(result: types.CallToolResult) -> str:
    """All text items of a result, joined by newlines (what a template sees as `.text`)."""
    return "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))


def toolweave_meta(result: types.CallToolResult) -> dict[str, Any]:
    """The `_meta["toolweave"]` dict of a result, created if absent (mutates the result)."""
    meta = result.meta
    if meta is None:
        result.meta = meta = {}
    found = meta.get(META_KEY)
    if not isinstance(found, dict):
        found = {}
        meta[META_KEY] = found
    return found


def result_to_dict(result: types.CallToolResult) -> dict[str, Any]:
    """The wire (camelCase) form of a result, for JSON output and the REST API."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)
