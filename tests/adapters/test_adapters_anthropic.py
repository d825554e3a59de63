"""Anthropic adapter over a real MCP backend: tool_use blocks → one user message of tool_result blocks."""

from __future__ import annotations

import json
from types import SimpleNamespace

from toolweave import Gateway
from toolweave.adapters.anthropic import run_tool_uses


async def test_tool_use_blocks_become_tool_results(gw: Gateway) -> None:
    content = [
        {"type": "text", "text": "Let me look that up."},
        {"type": "tool_use", "id": "toolu_1", "name": "t__sleep", "input": {"seconds": 0.2, "label": "s"}},
        {"type": "tool_use", "id": "toolu_2", "name": "t__echo", "input": {"text": "hello"}},
        {"type": "thinking", "thinking": "...", "signature": "x"},
        {"type": "tool_use", "id": "toolu_3", "name": "t__nope", "input": {}},
        {"type": "tool_use", "id": "toolu_4", "name": "t__delete_everything", "input": {}},
        {"type": "tool_use", "id": "toolu_5", "name": "t__echo", "input": "not an object"},
    ]
    message = await run_tool_uses(gw, content)
    assert message["role"] == "user"
    blocks = message["content"]
    assert [b["type"] for b in blocks] == ["tool_result"] * 5
    assert [b["tool_use_id"] for b in blocks] == [f"toolu_{i}" for i in range(1, 6)]
    assert [b["is_error"] for b in blocks] == [False, False, True, True, True]
    assert json.loads(blocks[0]["content"])["label"] == "s"
    assert blocks[1]["content"] == "hello"
    assert blocks[2]["content"].startswith("unknown tool 't__nope'")
    assert blocks[3]["content"] == "tool 't__delete_everything' is denied by the gateway policy"
    assert "must be an object" in blocks[4]["content"]


async def test_sdk_objects_and_a_whole_message(gw: Gateway) -> None:
    response = SimpleNamespace(
        role="assistant",
        stop_reason="tool_use",
        content=[
            SimpleNamespace(type="text", text="Adding."),
            SimpleNamespace(type="tool_use", id="toolu_a", name="t__add", input={"a": 40, "b": 2}),
            SimpleNamespace(type="tool_use", id="toolu_b", name="t__counter", input=None),
        ],
    )
    message = await run_tool_uses(gw, response)
    first, second = message["content"]
    assert {k: v for k, v in first.items() if k != "content"} == {
        "type": "tool_result",
        "tool_use_id": "toolu_a",
        "is_error": False,
    }
    assert json.loads(first["content"]) == {"sum": 42}  # the server's own text item
    assert json.loads(second["content"]) == {"value": 0}


async def test_barriers_hold_across_tool_uses(gw: Gateway) -> None:
    message = await run_tool_uses(
        gw,
        [
            {"type": "tool_use", "id": "1", "name": "t__counter", "input": {}},
            {"type": "tool_use", "id": "2", "name": "t__increment", "input": {"by": 4}},
            {"type": "tool_use", "id": "3", "name": "t__counter", "input": {}},
        ],
    )
    assert [json.loads(b["content"])["value"] for b in message["content"]] == [0, 4, 4]


async def test_no_tool_use_blocks(gw: Gateway) -> None:
    assert await run_tool_uses(gw, [{"type": "text", "text": "done"}]) == {"role": "user", "content": []}
