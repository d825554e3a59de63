"""Anthropic adapter: Messages API `tool_use` blocks → one user message of `tool_result` blocks.

    from toolweave.adapters.anthropic import run_tool_uses

    messages.append({"role": "assistant", "content": response.content})
    messages.append(await run_tool_uses(gw, response.content))

The calls run as ONE executor batch (contiguous same-class runs concurrently,
barriers between runs, input order kept); failures come back with
`is_error: true`. Blocks of other types (text, thinking, server tools) are
ignored. The `anthropic` package is never imported: SDK objects are read by
attribute, dicts by key. Exposed tool names already match Anthropic's name
pattern, so names map 1:1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from toolweave.adapters._common import BatchRunner, Prepared, field, items_of, result_text, run_prepared


async def run_tool_uses(
    target: BatchRunner, content_blocks: Any, *, cancel: asyncio.Event | None = None
) -> dict[str, Any]:
    """Run the `tool_use` blocks → `{"role": "user", "content": [{"type": "tool_result", ...}]}`.

    `content_blocks` is the assistant message's content (dicts or SDK
    objects), or the message itself. With no `tool_use` block the content
    list is empty (do not send such a message).
    """
    blocks = [block for block in items_of(content_blocks, "content") if field(block, "type") == "tool_use"]
    calls = [_prepare(block, index) for index, block in enumerate(blocks)]
    results = await run_prepared(target, calls, cancel)
    return {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": result_text(result),
                "is_error": bool(result.is_error),
            }
            for call, result in zip(calls, results, strict=True)
        ],
    }


def _prepare(block: Any, index: int) -> Prepared:
    block_id = str(field(block, "id") or f"toolu_{index}")
    name = field(block, "name")
    if not isinstance(name, str) or not name:
        return Prepared(block_id, "", error="the tool_use block has no name; nothing was called")
    raw = field(block, "input")
    if raw is None:
        return Prepared(block_id, name, arguments={})
    if not isinstance(raw, Mapping):
        # SDK objects may hand a pydantic model; anything else is not an argument object
        dump = getattr(raw, "model_dump", None)
        if dump is None:
            return Prepared(
                block_id,
                name,
                error=f"input for {name!r} must be an object, got {type(raw).__name__}; nothing was called",
            )
        raw = dump()
    return Prepared(block_id, name, arguments=dict(raw))
