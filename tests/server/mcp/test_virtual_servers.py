"""Virtual servers (`[[servers]]`): each a selection of the catalog at `/servers/{name}/mcp`, with its
own `serverInfo`, instructions, listing, search index and list changes. Real backends (a Python module
and the test server, in this process), the SDK's client on both protocol revisions, the ASGI app under uvicorn."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client

from support.configs import python_backend, stdio_backend
from support.fixtures import OpenGateway, ServeGateway
from support.results import names, text
from toolweave import Gateway

pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The test server runs in this process (the front, not the stdio transport, is the subject)."""

MODES = ["legacy", "auto"]
"""2025-11-25 (a session) and 2026-07-28 (sessionless)."""


def servers_config() -> dict[str, Any]:
    return {
        "backends": [
            python_backend(tools={"multiply": {"tags": ["release"]}}),
            stdio_backend(),
        ],
        "composite_tools": [
            {
                "name": "echo_both",
                "description": "Echo through two tools",
                "tools": ["ts/echo", "ts/text_only"],
            }
        ],
        "servers": [
            {
                "name": "support",
                "title": "Support desk",
                "instructions": "Help customers.",
                "tools": ["py__greet", "ts__search", "echo_both"],
                "overrides": {"py__greet": {"name": "hello", "description": "Say hello to a customer"}},
            },
            {
                "name": "release",
                "backends": ["ts"],
                "tags": ["release"],
                "hide": ["ts__crash", "re:ts__(garbage|big)"],
                "tool_exposure": "search",
                "pinned": ["ts__echo"],
            },
        ],
    }


class Announcements:
    """Counts the `tools/list_changed` notifications a client receives."""

    def __init__(self) -> None:
        self.count = 0
        self.heard = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            self.count += 1
            self.heard.set()


@pytest.fixture
async def gateway(open_gateway: OpenGateway) -> Gateway:
    return await open_gateway(servers_config())


@pytest.fixture
async def base(gateway: Gateway, serve_gateway: ServeGateway) -> str:
    return (await serve_gateway(gateway)).removesuffix("/mcp")


@pytest.mark.parametrize("mode", MODES)
async def test_each_server_lists_and_calls_its_own_selection(base: str, mode: str) -> None:
    async with Client(f"{base}/servers/support/mcp", mode=mode) as support:
        assert support.server_info is not None
        assert (support.server_info.name, support.server_info.title) == ("support", "Support desk")
        assert support.instructions == "Help customers."
        listed = (await support.list_tools()).tools
        assert sorted(names(listed)) == ["echo_both", "hello", "ts__search"]
        assert next(t for t in listed if t.name == "hello").description == "Say hello to a customer"
        assert text(await support.call_tool("hello", {"name": "Ada"})).startswith("Hello")
        both = await support.call_tool("echo_both", {"text": "hi"})  # its inner tools are not selected
        assert not both.is_error, text(both)
        refused = await support.call_tool("ts__echo", {"text": "hi"})  # on the catalog, not on this server
        assert refused.is_error and "unknown tool 'ts__echo'" in text(refused)
        refused = await support.call_tool("py__greet", {"name": "Ada"})  # renamed here
        assert refused.is_error
    async with Client(f"{base}/servers/release/mcp", mode=mode) as release:
        assert names((await release.list_tools()).tools) == ["find_tools", "call_tool", "ts__echo"]
        found = await release.call_tool("find_tools", {"query": "multiply two numbers", "limit": 3})
        assert "py__multiply" in text(found)  # selected by its tag
        found = await release.call_tool("find_tools", {"query": "say hello greet someone", "limit": 20})
        assert "py__greet" not in text(found) and "ts__crash" not in text(found)
        product = await release.call_tool(
            "call_tool", {"name": "py__multiply", "arguments": {"a": 6, "b": 7}}
        )
        assert product.structured_content == {"product": 42.0} or "42" in text(product)
        overlap = await release.call_tool("call_tool", {"name": "ts__search", "arguments": {"query": "x"}})
        assert not overlap.is_error  # in both servers
        outside = await release.call_tool("call_tool", {"name": "py__greet", "arguments": {"name": "x"}})
        assert outside.is_error
    async with Client(f"{base}/mcp", mode=mode) as whole:  # /mcp stays the whole catalog
        listed = names((await whole.list_tools()).tools)
        assert {"py__greet", "ts__echo", "ts__crash", "echo_both"} <= set(listed) and "hello" not in listed


async def test_an_unknown_server_is_404_naming_the_known_ones(base: str) -> None:
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{base}/servers/nope/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
        )
    assert answer.status_code == 404
    assert "(yours: release, support)" in answer.json()["error"]["message"]


async def test_a_backend_change_reaches_only_the_servers_that_include_it(base: str, gateway: Gateway) -> None:
    heard_support, heard_release = Announcements(), Announcements()
    async with (
        Client(f"{base}/servers/support/mcp", mode="legacy", message_handler=heard_support) as support,
        Client(f"{base}/servers/release/mcp", mode="legacy", message_handler=heard_release) as release,
    ):
        await support.list_tools()
        await release.list_tools()
        await gateway.call("ts__add_tool", {"name": "fresh_tool"})
        async with asyncio.timeout(10):
            await heard_release.heard.wait()
        found = await release.call_tool("find_tools", {"query": "fresh_tool added at run time", "limit": 3})
        assert "ts__fresh_tool" in text(found)
        await asyncio.sleep(0.3)
        assert heard_support.count == 0
        assert "ts__fresh_tool" not in names((await support.list_tools()).tools)


async def test_on_2026_07_28_only_the_including_server_is_told(base: str, gateway: Gateway) -> None:
    async with (
        Client(f"{base}/servers/support/mcp", mode="auto") as support,
        Client(f"{base}/servers/release/mcp", mode="auto") as release,
        support.listen(tools_list_changed=True) as support_events,
        release.listen(tools_list_changed=True) as release_events,
    ):
        await gateway.call("ts__add_tool", {"name": "modern_tool"})
        async with asyncio.timeout(10):
            await anext(aiter(release_events))
        found = await release.call_tool("find_tools", {"query": "modern_tool added at run time", "limit": 3})
        assert "ts__modern_tool" in text(found)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await anext(aiter(support_events))
