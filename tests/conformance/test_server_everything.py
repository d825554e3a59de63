"""`@modelcontextprotocol/server-everything` (npm, Node 22) as a stdio backend of a served gateway: its
tools that ask the client mid-call (sampling, elicitation) reach the client whose call caused them, under
namespaced names, and its resource updates reach the connections that subscribed; skipped with the reason where Node 22 or npm is missing."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from support.fixtures import OpenGateway, ServeGateway
from support.node import node22_bin, server_everything
from support.npm_documents import Unavailable
from support.results import names, text


@pytest.fixture
def everything() -> dict[str, Any]:
    try:
        script = server_everything()
        node = node22_bin() / "node"
    except Unavailable as missing:
        pytest.skip(str(missing))
    return {"name": "ev", "command": str(node), "args": [str(script), "stdio"]}


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    asked = params.messages[0].content.text  # type: ignore[union-attr]
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"sampled: {asked}"), model="test-model"
    )


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def test_its_requests_reach_the_calling_client(
    everything: dict[str, Any], open_gateway: OpenGateway, serve_gateway: ServeGateway
) -> None:
    gateway = await open_gateway({"backends": [everything]})
    assert gateway.backends["ev"].status == "connected", gateway.backends["ev"].last_error
    url = await serve_gateway(gateway)
    async with Client(url, mode="legacy", sampling_callback=sample, elicitation_callback=elicit) as client:
        listed = names((await client.list_tools()).tools)
        assert {"ev__echo", "ev__trigger-sampling-request", "ev__trigger-elicitation-request"} <= set(listed)
        assert "Echo: hi" in text(await client.call_tool("ev__echo", {"message": "hi"}))
        sampled = await client.call_tool("ev__trigger-sampling-request", {"prompt": "2+2?", "maxTokens": 5})
        assert not sampled.is_error and "sampled: " in text(sampled) and "2+2?" in text(sampled), text(
            sampled
        )
        declined = await client.call_tool("ev__trigger-elicitation-request", {})
        assert not declined.is_error and "declined" in text(declined).lower(), text(declined)


async def test_resource_updates_reach_the_subscribers(
    everything: dict[str, Any], open_gateway: OpenGateway, serve_gateway: ServeGateway
) -> None:
    gateway = await open_gateway({"backends": [everything]})
    url = await serve_gateway(gateway)
    updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            updated.put_nowait(str(root.params.uri))

    async with Client(url, mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.resources.subscribe  # the backend offers it, so the gateway does
        uri = str((await client.list_resources()).resources[0].uri)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await client.subscribe_resource(uri)
        assert not (await client.call_tool("ev__toggle-subscriber-updates", {})).is_error
        async with asyncio.timeout(20):  # the server sends them every 5 s
            assert await updated.get() == uri
