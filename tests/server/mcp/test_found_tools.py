"""Found tools become real tools (`[search] list_found`): what `find_tools` returns to a session joins
that session's `tools/list`, announced with `list_changed`, bounded, least recently used dropped.
Real MCP clients over streamable HTTP (the ASGI app under uvicorn) and over stdio (`toolweave serve`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from support.configs import python_backend
from support.fixtures import OpenGateway, ServeGateway, WriteConfig
from support.paths import TOOLWEAVE
from support.processes import subprocess_env
from support.results import names, text
from toolweave import Gateway

SEARCH = ["find_tools", "call_tool"]
LISTED_NOTE = "These tools are now in your tool list"


def search_config(list_found: int, **gateway: Any) -> dict[str, Any]:
    return {
        "backends": [python_backend(hide=["drop_table"])],
        "gateway": {"tool_exposure": "search", **gateway},
        "search": {"list_found": list_found},
    }


class Announcements:
    """Counts the `tools/list_changed` notifications a client receives."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = asyncio.Condition()

    async def __call__(self, message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            async with self._changed:
                self.count += 1
                self._changed.notify_all()

    async def reach(self, count: int) -> None:
        async with asyncio.timeout(10), self._changed:
            await self._changed.wait_for(lambda: self.count >= count)


async def find(client: Client, query: str, limit: int = 1) -> str:
    result = await client.call_tool("find_tools", {"query": query, "limit": limit})
    assert not result.is_error, text(result)
    return text(result)


@pytest.fixture
async def gateway(open_gateway: OpenGateway) -> Gateway:
    return await open_gateway(search_config(2, pinned=["py__greet"]))


@contextlib.asynccontextmanager
async def legacy_session(url: str) -> AsyncIterator[tuple[Client, Announcements]]:
    """A 2025-11-25 client (a session) and the list changes it hears (the SDK's client must be
    opened and closed in the test's own task, so this is not a fixture)."""
    heard = Announcements()
    async with Client(url, mode="legacy", message_handler=heard) as client:
        yield client, heard


async def test_found_tools_are_listed_and_called_directly(url: str, gateway: Gateway) -> None:
    async with legacy_session(url) as (client, heard):
        assert names((await client.list_tools()).tools) == [*SEARCH, "py__greet"]
        answer = await find(client, "multiply two numbers")
        assert answer.startswith("py__multiply(") and LISTED_NOTE in answer
        await heard.reach(1)
        listed = (await client.list_tools()).tools
        assert names(listed) == [*SEARCH, "py__greet", "py__multiply"]
        # its own schema, exactly as in `all` mode
        assert listed[-1].input_schema == gateway.catalog.get("py__multiply").tool.input_schema
        product = await client.call_tool("py__multiply", {"a": 6, "b": 7})
        assert product.structured_content == {"product": 42.0}


async def test_the_listing_is_bounded_least_recently_used_dropped(url: str) -> None:
    async with legacy_session(url) as (client, heard):
        await find(client, "multiply two numbers")
        await find(client, "squared distance of a point")
        await heard.reach(2)
        assert names((await client.list_tools()).tools) == [
            *SEARCH,
            "py__greet",
            "py__multiply",
            "py__squared_distance",
        ]
        await client.call_tool("py__multiply", {"a": 1, "b": 2})  # used: squared_distance is now the oldest
        await find(client, "nap for some seconds")
        await heard.reach(3)
        assert names((await client.list_tools()).tools) == [*SEARCH, "py__greet", "py__multiply", "py__nap"]


async def test_only_a_change_is_announced(url: str) -> None:
    async with legacy_session(url) as (client, heard):
        await find(client, "multiply two numbers")
        await heard.reach(1)
        await find(client, "multiply two numbers")  # already listed
        answer = await find(client, "greet someone by name")  # pinned: listed anyway
        assert answer.startswith("py__greet(") and LISTED_NOTE in answer
        await find(client, "squared distance of a point")
        await heard.reach(2)
        await asyncio.sleep(0.2)
        assert heard.count == 2
        listed = names((await client.list_tools()).tools)
        assert listed == [*SEARCH, "py__greet", "py__multiply", "py__squared_distance"]


async def test_each_session_lists_only_what_it_found(url: str) -> None:
    async with legacy_session(url) as (client, heard):
        await find(client, "multiply two numbers")
        await heard.reach(1)
        async with Client(url, mode="legacy") as other:
            assert names((await other.list_tools()).tools) == [*SEARCH, "py__greet"]
        # a 2026-07-28 request has no session: the plain search-mode listing, and call_tool as the way in
        async with Client(url, mode="auto") as modern:
            answer = await find(modern, "squared distance of a point")
            assert LISTED_NOTE not in answer and "Call with call_tool" in answer
            assert names((await modern.list_tools()).tools) == [*SEARCH, "py__greet"]
            assert (await modern.call_tool("py__multiply", {"a": 2, "b": 2})).structured_content == {
                "product": 4.0
            }
        assert names((await client.list_tools()).tools) == [*SEARCH, "py__greet", "py__multiply"]


async def test_off_by_default(open_gateway: OpenGateway, serve_gateway: ServeGateway) -> None:
    config = search_config(0)
    del config["search"]
    url = await serve_gateway(await open_gateway(config))
    async with Client(url, mode="legacy") as client:
        answer = await find(client, "multiply two numbers")
        assert LISTED_NOTE not in answer
        assert names((await client.list_tools()).tools) == SEARCH


async def test_a_found_tool_that_leaves_the_catalog_leaves_the_listing(url: str, gateway: Gateway) -> None:
    async with legacy_session(url) as (client, heard):
        await find(client, "multiply two numbers")
        await heard.reach(1)
        gateway.backends["py"].tools = [t for t in gateway.backends["py"].tools if t.name != "multiply"]
        gateway.rebuild()
        await heard.reach(2)
        assert names((await client.list_tools()).tools) == [*SEARCH, "py__greet"]


async def test_over_stdio(write_config: WriteConfig) -> None:
    path: Path = write_config(search_config(4))
    heard = Announcements()
    server = StdioServerParameters(
        command=str(TOOLWEAVE), args=["serve", "--stdio", "-c", str(path)], env=subprocess_env()
    )
    async with Client(server, mode="legacy", message_handler=heard) as client:
        assert LISTED_NOTE in await find(client, "multiply two numbers")
        await heard.reach(1)
        assert names((await client.list_tools()).tools) == [*SEARCH, "py__multiply"]
        assert (await client.call_tool("py__multiply", {"a": 3, "b": 3})).structured_content == {
            "product": 9.0
        }
