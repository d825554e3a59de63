"""The MCP front over streamable HTTP (the ASGI app under uvicorn on loopback), on both protocol revisions:
2026-07-28 (`mode="auto"`) and 2025-11-25 (`mode="legacy"`)."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import SERVER_INFO_META_KEY

from support.configs import python_backend, stdio_backend
from support.fixtures import OpenGateway, ServeGateway
from support.results import names, text
from toolweave import Gateway

IN_PROCESS = pytest.mark.usefixtures("in_process_testserver")
"""The test server in this process (tests/support/inprocess.py) for every test but the one that
crashes it: what these tests are about is the front, not the backend's process."""

MODES = [
    pytest.param("auto", "2026-07-28", id="2026-07-28"),
    pytest.param("legacy", "2025-11-25", id="2025-11-25"),
]


@pytest.fixture
async def gateway(open_gateway: OpenGateway, tmp_path: Any) -> Gateway:
    return await open_gateway(
        {
            "backends": [
                stdio_backend(),
                python_backend(hide=["drop_table"]),
                {"name": "down", "command": str(tmp_path / "nothing")},
            ]
        }
    )


@IN_PROCESS
@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_list_and_call(url: str, mode: str, version: str) -> None:
    async with Client(url, mode=mode) as client:
        assert client.protocol_version == version
        assert client.server_info is None or client.server_info.name == "toolweave"
        listed = names((await client.list_tools()).tools)
        assert {"ts__echo", "ts__add", "py__greet", "py__multiply"} <= set(listed)
        assert "py__drop_table" not in listed and not any(n.startswith("down__") for n in listed)
        added = await client.call_tool("ts__add", {"a": 20, "b": 22})
        assert not added.is_error and added.structured_content == {"sum": 42}
        greeting = await client.call_tool("py__greet", {"name": "MCP"})
        assert text(greeting) == "Hello, MCP."
        # the gateway is the server: never a backend's identity
        stamp = (added.meta or {}).get(SERVER_INFO_META_KEY)
        assert stamp is None if mode == "legacy" else stamp["name"] == "toolweave"


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_every_failure_is_a_result_and_the_session_goes_on(url: str, mode: str, version: str) -> None:
    async with Client(url, mode=mode) as client:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("no_such_tool", {}, "unknown tool 'no_such_tool'"),
            ("ts__ad", {}, "unknown tool 'ts__ad'. Did you mean: ts__add"),
            (
                "ts__add",
                {"a": "one", "b": 2},
                "invalid arguments for 'ts__add': argument 'a': 'one' is not of type",
            ),
            ("ts__add", {"a": 1}, "missing required argument 'b'"),
            ("ts__fail", {"message": "it broke"}, "it broke"),
            ("py__drop_table", {"table": "t"}, "unknown tool 'py__drop_table'"),
            ("down__anything", {}, "backend 'down' is not connected"),
            ("py__explode", {}, "explode failed: boom"),
        ]
        for name, arguments, fragment in cases:
            result = await client.call_tool(name, arguments)
            assert result.is_error, name
            assert fragment in text(result), (name, text(result))
        crashed = await client.call_tool("ts__crash", {})
        assert crashed.is_error and "backend 'ts' is unavailable" in text(crashed)
        assert text(await client.call_tool("py__greet", {"name": "still here"})) == "Hello, still here."


@IN_PROCESS
@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_resources_and_prompts_pass_through(url: str, mode: str, version: str) -> None:
    async with Client(url, mode=mode) as client:
        resources = (await client.list_resources()).resources
        assert [(r.name, str(r.uri)) for r in resources] == [("ts__readme", "test://readme")]
        templates = (await client.list_resource_templates()).resource_templates
        assert [(t.name, t.uri_template) for t in templates] == [("ts__item", "test://items/{item}")]
        assert (await client.read_resource("test://readme")).contents[0].text == "readme of testserver"
        assert (await client.read_resource("test://items/abc")).contents[0].text == "item abc of testserver"
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["ts__greet"]
        assert prompts[0].arguments[0].name == "name"
        prompt = await client.get_prompt("ts__greet", {"name": "Grace"})
        assert prompt.messages[0].content.text == "Say hello to Grace, from testserver."
        with pytest.raises(MCPError, match="unknown prompt 'greet'"):
            await client.get_prompt("greet", {"name": "x"})  # only the namespaced name exists
        with pytest.raises(MCPError, match="unknown resource 'test://nowhere'"):
            await client.read_resource("test://nowhere")
        # the session survives protocol errors
        assert text(await client.call_tool("ts__echo", {"text": "ok"})) == "ok"


@IN_PROCESS
async def test_list_changed_reaches_2026_clients(url: str, gateway: Gateway) -> None:
    async with Client(url, mode="auto") as client, client.listen(tools_list_changed=True) as subscription:
        await client.call_tool("ts__add_tool", {"name": "modern_tool"})
        async with asyncio.timeout(10):
            event = await anext(aiter(subscription))
        assert type(event).__name__ == "ToolsListChanged"
        assert "ts__modern_tool" in names((await client.list_tools()).tools)
        assert text(await client.call_tool("ts__modern_tool", {})) == "I am modern_tool"


@IN_PROCESS
@pytest.mark.parametrize("list_first", [True, False], ids=["listed", "never-listed"])
async def test_list_changed_reaches_2025_clients(url: str, gateway: Gateway, list_first: bool) -> None:
    received = asyncio.Event()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification):
            received.set()

    async with Client(url, mode="legacy", message_handler=on_message) as client:
        if list_first:
            await client.list_tools()
        await client.call_tool("ts__add_tool", {"name": "legacy_tool"})
        async with asyncio.timeout(10):
            await received.wait()
        assert "ts__legacy_tool" in names((await client.list_tools()).tools)


@IN_PROCESS
async def test_a_definition_change_is_announced_too(url: str, gateway: Gateway) -> None:
    """Any catalog change (here a backend going away) is announced, not only a backend's list_changed."""
    async with Client(url, mode="auto") as client, client.listen(tools_list_changed=True) as subscription:
        gateway.backends["py"].tools = []  # as if the module had lost its tools
        gateway.rebuild()
        async with asyncio.timeout(10):
            await anext(aiter(subscription))
        assert not any(n.startswith("py__") for n in names((await client.list_tools()).tools))


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_search_mode(
    open_gateway: OpenGateway, serve_gateway: ServeGateway, mode: str, version: str
) -> None:
    gateway = await open_gateway(
        {"backends": [python_backend()], "gateway": {"tool_exposure": "search", "pinned": ["py__greet"]}}
    )
    url = await serve_gateway(gateway)
    async with Client(url, mode=mode) as client:
        assert names((await client.list_tools()).tools) == ["find_tools", "call_tool", "py__greet"]
        found = await client.call_tool("find_tools", {"query": "multiply numbers", "limit": 3})
        assert text(found).startswith("py__multiply(a: number, b: number) - ")
        product = await client.call_tool("call_tool", {"name": "py__multiply", "arguments": {"a": 3, "b": 5}})
        assert product.structured_content == {"product": 15.0}
        assert text(await client.call_tool("py__greet", {"name": "pinned"})) == "Hello, pinned."


@IN_PROCESS
async def test_clients_are_served_concurrently(url: str) -> None:
    async def one(label: str) -> dict[str, Any]:
        async with Client(url, mode="auto") as client:
            result = await client.call_tool("ts__sleep", {"seconds": 0.5, "label": label})
            return result.structured_content

    first, second = await asyncio.gather(one("a"), one("b"))
    assert first["start"] < second["end"] and second["start"] < first["end"]  # they overlapped
