"""OpenAI adapters over a real MCP backend: Chat Completions tool_calls and Responses function_call items."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from toolweave import Gateway
from toolweave.adapters.openai import run_function_calls, run_tool_calls
from toolweave.executor import Session


def tool_call(call_id: str, name: str, arguments: object) -> dict:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


async def test_chat_completions_tool_calls_become_tool_messages_in_order(gw: Gateway) -> None:
    messages = await run_tool_calls(
        gw,
        [
            tool_call("call_1", "t__sleep", {"seconds": 0.2, "label": "slow"}),
            tool_call("call_2", "t__echo", {"text": "hello"}),
            tool_call("call_3", "t__add", {"a": 1, "b": 2}),
        ],
    )
    assert [m["role"] for m in messages] == ["tool"] * 3
    assert [m["tool_call_id"] for m in messages] == ["call_1", "call_2", "call_3"]
    assert json.loads(messages[0]["content"])["label"] == "slow"
    assert messages[1]["content"] == "hello"
    assert json.loads(messages[2]["content"]) == {"sum": 3}


async def test_failures_are_error_outputs_not_exceptions(gw: Gateway) -> None:
    messages = await run_tool_calls(
        gw,
        [
            tool_call("c1", "t__echo", '{"text": "unterminated'),  # malformed JSON from the model
            tool_call("c2", "t__nope", {}),
            tool_call("c3", "t__delete_everything", {}),
            tool_call("c4", "t__echo", "[1, 2]"),
            tool_call("c5", "t__fail", {"message": "kaput"}),
            tool_call("c6", "t__echo", {"text": "fine"}),
            {"id": "c7", "type": "custom", "custom": {"name": "grammar", "input": "x"}},
        ],
    )
    contents = {m["tool_call_id"]: m["content"] for m in messages}
    assert contents["c1"].startswith("Error: arguments for 't__echo' are not valid JSON")
    assert contents["c2"].startswith("Error: unknown tool 't__nope'")
    assert contents["c3"] == "Error: tool 't__delete_everything' is denied by the gateway policy"
    assert (
        contents["c4"] == "Error: arguments for 't__echo' must be a JSON object, got list; nothing was called"
    )
    assert contents["c5"].startswith("Error:") and "kaput" in contents["c5"]
    assert contents["c6"] == "fine"
    assert contents["c7"].startswith("Error: toolweave runs function tool calls only")
    assert [m["tool_call_id"] for m in messages] == [f"c{i}" for i in range(1, 8)]


async def test_sdk_shaped_objects_and_a_whole_assistant_message(gw: Gateway) -> None:
    def sdk_call(call_id: str, name: str, arguments: str) -> SimpleNamespace:
        return SimpleNamespace(
            id=call_id, type="function", function=SimpleNamespace(name=name, arguments=arguments)
        )

    message = SimpleNamespace(
        role="assistant",
        content=None,
        tool_calls=[sdk_call("a", "t__echo", '{"text": "from an object"}'), sdk_call("b", "t__counter", "")],
    )
    messages = await run_tool_calls(gw, message)
    assert messages[0] == {"role": "tool", "tool_call_id": "a", "content": "from an object"}
    assert json.loads(messages[1]["content"]) == {"value": 0}  # empty arguments mean {}
    # a dict message works the same way; a message without tool calls gives nothing to append
    assert await run_tool_calls(gw, {"role": "assistant", "tool_calls": None}) == []
    assert await run_tool_calls(gw, []) == []


async def test_one_batch_keeps_barriers(gw: Gateway) -> None:
    messages = await run_tool_calls(
        gw,
        [
            tool_call("r1", "t__counter", {}),
            tool_call("w", "t__increment", {"by": 2}),
            tool_call("r2", "t__counter", {}),
        ],
    )
    assert [json.loads(m["content"])["value"] for m in messages] == [0, 2, 2]


async def test_responses_function_calls(gw: Gateway) -> None:
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_a",
            "name": "t__echo",
            "arguments": '{"text":"hi"}',
        },
        {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "t__add", "arguments": "{oops"},
        SimpleNamespace(
            type="function_call", id="fc_3", call_id="call_c", name="t__add", arguments='{"a":2,"b":2}'
        ),
    ]
    items = await run_function_calls(gw, output)
    assert [i["type"] for i in items] == ["function_call_output"] * 3
    assert [i["call_id"] for i in items] == ["call_a", "call_b", "call_c"]
    assert items[0]["output"] == "hi"
    assert items[1]["output"].startswith("Error: arguments for 't__add' are not valid JSON")
    assert json.loads(items[2]["output"]) == {"sum": 4}
    # the response object itself is accepted too
    response = SimpleNamespace(output=output[:2])
    assert (await run_function_calls(gw, response))[0]["output"] == "hi"


async def test_an_executor_carries_the_session(gw: Gateway) -> None:
    acme = gw.executor(Session(tenant="acme"))
    (message,) = await run_tool_calls(acme, [tool_call("x", "t__echo", {"text": "hi"})])
    assert message["content"] == "Error: tool 't__echo' is denied for tenant 'acme' by the gateway policy"


async def test_cancel_is_passed_through(gw: Gateway) -> None:
    cancel = asyncio.Event()
    cancel.set()
    messages = await run_tool_calls(gw, [tool_call("x", "t__increment", {})], cancel=cancel)
    assert messages[0]["content"] == "Error: cancelled before execution; the call was not made"
