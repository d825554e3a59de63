"""What the adapters share: duck-typed field access, argument parsing, result → text."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mcp_types as types

from toolweave.results import error_result, json_text


class BatchRunner(Protocol):
    """A `Gateway` or a `ToolExecutor`: anything with the executor's `execute_batch`."""

    async def execute_batch(
        self, calls: Sequence[Mapping[str, Any]], *, cancel: asyncio.Event | None = None
    ) -> list[types.CallToolResult]: ...


_MISSING = object()


def field(obj: Any, key: str, default: Any = None) -> Any:
    """`obj[key]` for mappings, `obj.key` for SDK objects (pydantic models, dataclasses...)."""
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    value = getattr(obj, key, _MISSING)
    return default if value is _MISSING else value


def items_of(value: Any, key: str) -> list[Any]:
    """A list of items, or the `key` list of a message/response object that holds them."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)):
        raise TypeError(f"expected a list of tool calls, got {type(value).__name__}")
    if isinstance(value, Mapping) or not isinstance(value, Sequence):
        inner = field(value, key, _MISSING)
        if inner is not _MISSING:
            return list(inner or [])
        if isinstance(value, Mapping):
            raise TypeError(f"expected a list of tool calls or an object with {key!r}")
    return list(value)


def parse_json_arguments(raw: Any, tool: str) -> tuple[dict[str, Any] | None, str | None]:
    """Model-emitted arguments (a JSON string, or already a mapping) → (arguments, error message)."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return (
            None,
            f"arguments for {tool!r} must be a JSON object, got {type(raw).__name__}; nothing was called",
        )
    try:
        value = json.loads(raw)
    except ValueError as error:
        return None, (
            f"arguments for {tool!r} are not valid JSON ({error}); nothing was called. "
            "Send the arguments as one JSON object."
        )
    if not isinstance(value, dict):
        return None, (
            f"arguments for {tool!r} must be a JSON object, got {type(value).__name__}; nothing was called"
        )
    return value, None


@dataclass(slots=True)
class Prepared:
    """One model tool call, decoded: either runnable (`arguments`) or already failed (`error`)."""

    id: str
    name: str
    arguments: dict[str, Any] | None = None
    error: str | None = None


async def run_prepared(
    target: BatchRunner, calls: list[Prepared], cancel: asyncio.Event | None
) -> list[types.CallToolResult]:
    """Run the runnable calls as one batch (input order kept); failed decodes become error results."""
    runnable = [call for call in calls if call.error is None]
    results: list[types.CallToolResult] = []
    if runnable:
        execute = getattr(target, "execute_batch", None)
        if execute is None:
            raise TypeError(f"expected a toolweave Gateway or ToolExecutor, got {type(target).__name__}")
        batch = [{"id": call.id, "name": call.name, "arguments": call.arguments} for call in runnable]
        results = list(await execute(batch, cancel=cancel))
    ran = iter(results)
    return [error_result(call.error) if call.error is not None else next(ran) for call in calls]


def result_text(result: types.CallToolResult) -> str:
    """A result as the text a model reads.

    Text items are joined by newlines; other items (images, audio, resources,
    links) are summarised in brackets; when there is no text item,
    `structuredContent` is given as JSON text.
    """
    texts: list[str] = []
    summaries: list[str] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            texts.append(item.text)
        else:
            summaries.append(_summary(item))
    if not texts and result.structured_content is not None:
        texts.append(json_text(result.structured_content))
    parts = texts + summaries
    if parts:
        return "\n".join(parts)
    return "the tool failed without a message" if result.is_error else ""


def _summary(item: Any) -> str:
    kind = getattr(item, "type", type(item).__name__)
    if isinstance(item, (types.ImageContent, types.AudioContent)):
        size = len(item.data) * 3 // 4
        return f"[{kind}: {item.mime_type}, about {size} bytes, not shown]"
    if isinstance(item, types.ResourceLink):
        return f"[resource link: {item.name} <{item.uri}>]"
    if isinstance(item, types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource <{resource.uri}>]\n{resource.text}"
        mime = resource.mime_type or "binary"
        return f"[resource <{resource.uri}>: {mime}, not shown]"
    return f"[{kind} content, not shown]"
