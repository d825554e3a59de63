"""OpenAI adapters: Chat Completions `tool_calls` and Responses API `function_call` items.

    from toolweave.adapters.openai import run_tool_calls

    message = completion.choices[0].message          # or a plain dict
    messages.append(message)
    messages += await run_tool_calls(gw, message.tool_calls)

The calls run as ONE executor batch (contiguous same-class runs concurrently,
barriers between runs, input order kept). Arguments arrive as JSON strings;
malformed JSON becomes an error output for that call only. OpenAI tool
messages carry no error flag, so failed results are prefixed with `Error: `.
The `openai` package is never imported: SDK objects are read by attribute,
dicts by key. Exposed tool names already match OpenAI's name pattern, so
names map 1:1.
"""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types

from toolweave.adapters._common import (
    BatchRunner,
    Prepared,
    field,
    items_of,
    parse_json_arguments,
    result_text,
    run_prepared,
)

ERROR_PREFIX = "Error: "


async def run_tool_calls(
    target: BatchRunner, tool_calls: Any, *, cancel: asyncio.Event | None = None
) -> list[dict[str, Any]]:
    """Chat Completions: run `tool_calls` → `[{"role": "tool", "tool_call_id", "content"}]`, one per call.

    `tool_calls` is the assistant message's list (dicts or SDK objects), or the
    assistant message itself.
    """
    calls = [_prepare_tool_call(call, index) for index, call in enumerate(items_of(tool_calls, "tool_calls"))]
    results = await run_prepared(target, calls, cancel)
    return [
        {"role": "tool", "tool_call_id": call.id, "content": output_text(result)}
        for call, result in zip(calls, results, strict=True)
    ]


async def run_function_calls(
    target: BatchRunner, items: Any, *, cancel: asyncio.Event | None = None
) -> list[dict[str, Any]]:
    """Responses API: run the `function_call` items → `[{"type": "function_call_output", "call_id", "output"}]`.

    `items` is `response.output` (other item types — messages, reasoning — are
    skipped), or the response itself.
    """
    function_calls = [item for item in items_of(items, "output") if field(item, "type") == "function_call"]
    calls = [_prepare_function_call(item, index) for index, item in enumerate(function_calls)]
    results = await run_prepared(target, calls, cancel)
    return [
        {"type": "function_call_output", "call_id": call.id, "output": output_text(result)}
        for call, result in zip(calls, results, strict=True)
    ]


def output_text(result: types.CallToolResult) -> str:
    """The text of a result for an OpenAI tool message; failures start with `Error: `."""
    text = result_text(result)
    return ERROR_PREFIX + text if result.is_error else text


def _prepare_tool_call(call: Any, index: int) -> Prepared:
    call_id = str(field(call, "id") or f"call_{index}")
    kind = field(call, "type", "function") or "function"
    function = field(call, "function")
    name = field(function, "name") if function is not None else None
    if kind != "function" or function is None:
        return Prepared(
            call_id, str(name or kind), error=f"toolweave runs function tool calls only, not {kind!r} ones"
        )
    return _prepared(call_id, name, field(function, "arguments"))


def _prepare_function_call(item: Any, index: int) -> Prepared:
    call_id = str(field(item, "call_id") or field(item, "id") or f"call_{index}")
    return _prepared(call_id, field(item, "name"), field(item, "arguments"))


def _prepared(call_id: str, name: Any, raw_arguments: Any) -> Prepared:
    if not isinstance(name, str) or not name:
        return Prepared(call_id, "", error="the tool call has no function name; nothing was called")
    arguments, error = parse_json_arguments(raw_arguments, name)
    return Prepared(call_id, name, arguments=arguments, error=error)
