"""LangChain integration: tools that call through a real gateway, errors agents can read, sync bridging."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import sys
import threading
from typing import Any

import mcp_types as types
import pytest

from toolweave import Gateway
from toolweave.export import export_tool

HAS_LANGCHAIN = importlib.util.find_spec("langchain_core") is not None
requires_langchain = pytest.mark.skipif(
    not HAS_LANGCHAIN, reason="langchain-core is not installed (pip install 'toolweave[langchain]')"
)


def test_missing_langchain_core_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in [m for m in sys.modules if m == "langchain_core" or m.startswith("langchain_core.")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.delitem(sys.modules, "toolweave.integrations.langchain", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'toolweave\[langchain\]'"):
        importlib.import_module("toolweave.integrations.langchain")
    import toolweave.integrations

    with pytest.raises(ImportError, match=r"toolweave\[langchain\]"):
        _ = toolweave.integrations.as_langchain_tools
    monkeypatch.delitem(sys.modules, "toolweave.integrations.langchain", raising=False)


# -- through a real gateway ----------------------------------------------------------


@requires_langchain
async def test_tools_mirror_the_gateway_listing(ts_gateway: Gateway) -> None:
    from langchain_core.tools import StructuredTool

    from toolweave.integrations.langchain import as_langchain_tools

    tools = as_langchain_tools(ts_gateway)
    assert [t.name for t in tools] == [t.name for t in ts_gateway.list_tools()]
    echo = next(t for t in tools if t.name == "ts__echo")
    assert isinstance(echo, StructuredTool)
    assert echo.description == "Echo the text back."
    assert echo.args_schema["properties"]["text"]["type"] == "string"
    assert echo.handle_tool_error is True
    assert echo.func is not None and echo.coroutine is not None


@requires_langchain
async def test_ainvoke_calls_through_the_gateway(ts_gateway: Gateway) -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    echo, add = as_langchain_tools(ts_gateway, ["ts__echo", "ts__add"])
    assert await echo.ainvoke({"text": "hello"}) == "hello"
    assert json.loads(await add.ainvoke({"a": 2, "b": 3})) == {"sum": 5}


@requires_langchain
async def test_error_results_become_tool_errors_the_agent_reads(ts_gateway: Gateway) -> None:
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import ToolException

    from toolweave.integrations.langchain import as_langchain_tools

    [fail] = as_langchain_tools(ts_gateway, ["ts__fail"])
    assert "boom" in await fail.ainvoke({"message": "boom"})
    message = await fail.ainvoke(
        {"type": "tool_call", "id": "call-1", "name": fail.name, "args": {"message": "bad"}}
    )
    assert isinstance(message, ToolMessage)
    assert message.status == "error" and "bad" in message.content
    strict_fail = fail.model_copy(update={"handle_tool_error": False})
    with pytest.raises(ToolException, match="boom"):
        await strict_fail.ainvoke({"message": "boom"})


@requires_langchain
async def test_invalid_arguments_are_reported_by_the_gateway(ts_gateway: Gateway) -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    [add] = as_langchain_tools(ts_gateway, ["ts__add"])
    answer = await add.ainvoke({"a": "two"})
    assert "invalid arguments for 'ts__add'" in answer and "Nothing was called" in answer


@requires_langchain
async def test_sync_invoke_from_a_worker_thread_uses_the_gateway_loop(ts_gateway: Gateway) -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    [echo] = as_langchain_tools(ts_gateway, ["ts__echo"])
    assert await asyncio.to_thread(echo.invoke, {"text": "from a thread"}) == "from a thread"


@requires_langchain
async def test_sync_invoke_on_the_loop_thread_refuses_to_block(ts_gateway: Gateway) -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    [echo] = as_langchain_tools(ts_gateway, ["ts__echo"])
    with pytest.raises(RuntimeError, match="ainvoke"):
        echo.invoke({"text": "x"})


@requires_langchain
async def test_unsafe_names_are_sanitised_but_call_the_real_tool(ts_gateway: Gateway) -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    changed = asyncio.Event()
    unsubscribe = ts_gateway.on_tools_changed(changed.set)
    try:
        added = await ts_gateway.call("ts__add_tool", {"name": "dotted.name"})
        assert not added.is_error
        async with asyncio.timeout(10):
            while ts_gateway.catalog.get("ts__dotted.name") is None:
                await changed.wait()
                changed.clear()
    finally:
        unsubscribe()
    [dotted] = as_langchain_tools(ts_gateway, ["ts__dotted.name"])
    assert dotted.name == "ts__dotted_name"
    assert dotted.metadata == {"toolweave_tool": "ts__dotted.name"}
    assert await dotted.ainvoke({}) == "I am dotted.name"


@requires_langchain
async def test_unknown_names_are_refused(ts_gateway: Gateway) -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    with pytest.raises(ValueError, match="ts__nope"):
        as_langchain_tools(ts_gateway, ["ts__echo", "ts__nope"])


# -- the langchain export format and a stand-in gateway ------------------------------------


class FakeGateway:
    """Just what the integration uses: list_tools, catalog.get and call."""

    def __init__(self, tools: list[types.Tool], result: types.CallToolResult | None = None) -> None:
        self.tools = tools
        self.result = result or types.CallToolResult(content=[types.TextContent(type="text", text="ok")])
        self.calls: list[tuple[str, dict[str, Any], str]] = []
        self.catalog = self

    def list_tools(self) -> list[types.Tool]:
        return self.tools

    def get(self, name: str) -> None:
        return None

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        self.calls.append((name, arguments, threading.current_thread().name))
        return self.result


CONFIG_TOOL = types.Tool(
    name="svc/configure",
    description="Change a setting.",
    input_schema={
        "type": "object",
        "properties": {"config": {"type": "string"}, "run_manager": {"type": "string"}},
        "required": ["config", "run_manager"],
        "additionalProperties": False,
    },
)


@requires_langchain
def test_langchain_export_loads_into_a_structured_tool() -> None:
    from langchain_core.tools import StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    async def configure(**_: Any) -> str:
        return "done"

    entry = export_tool(CONFIG_TOOL, "langchain")
    loaded = StructuredTool(**entry, coroutine=configure)
    function = convert_to_openai_tool(loaded)["function"]
    assert function["name"] == "svc_configure"
    assert function["description"] == "Change a setting."
    assert function["parameters"]["properties"] == entry["args_schema"]["properties"]


@requires_langchain
async def test_arguments_named_like_langchain_internals_pass_through() -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    gateway = FakeGateway([CONFIG_TOOL])
    [tool] = as_langchain_tools(gateway)  # type: ignore[arg-type]
    assert await tool.ainvoke({"config": "fast", "run_manager": "x"}) == "ok"
    assert gateway.calls[0][:2] == ("svc/configure", {"config": "fast", "run_manager": "x"})


@requires_langchain
def test_sync_invoke_without_any_loop_runs_the_call_itself() -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    gateway = FakeGateway([CONFIG_TOOL])
    [tool] = as_langchain_tools(gateway)  # type: ignore[arg-type]
    assert tool.invoke({"config": "a", "run_manager": "b"}) == "ok"
    assert gateway.calls == [("svc/configure", {"config": "a", "run_manager": "b"}, "MainThread")]


@requires_langchain
async def test_structured_only_results_are_json() -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    result = types.CallToolResult(content=[], structured_content={"value": 3})
    [tool] = as_langchain_tools(FakeGateway([CONFIG_TOOL], result))  # type: ignore[arg-type]
    assert json.loads(await tool.ainvoke({"config": "a", "run_manager": "b"})) == {"value": 3}


@requires_langchain
async def test_error_without_text_still_explains() -> None:
    from toolweave.integrations.langchain import as_langchain_tools

    result = types.CallToolResult(content=[], is_error=True)
    [tool] = as_langchain_tools(FakeGateway([CONFIG_TOOL], result))  # type: ignore[arg-type]
    assert await tool.ainvoke({"config": "a", "run_manager": "b"}) == "tool 'svc/configure' failed"
