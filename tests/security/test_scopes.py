"""MCP scopes as documented: listing needs `tools:read`; running anything a backend answers (a tool,
a resource read, a prompt) needs `tools:call`. Both protocol revisions, every entry (the SDK
handlers, the middleware fast path, the plain 2026-07-28 lane)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from support.api import AppFactory
from support.configs import python_backend, stdio_backend
from support.serving import serve_asgi
from toolweave.config import parse_config
from toolweave.gateway import Gateway
from toolweave.server.mcp.front import MCPFront
from toolweave.server.mcp.scopes import METHOD_SCOPES, UNSCOPED_METHODS

pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The backend with resources and prompts (tests/servers/testserver.py) in this process: scopes are
the front's business, not the backend's process."""

READ, CALL = "tools:read", "tools:call"
MODES = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="2025-11-25")]
MODERN_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2026-07-28",
}
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
async def served(sqlite_app: AppFactory) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """The whole app with auth on and a stdio backend with resources and prompts; keys by scope."""
    api = await sqlite_app({"backends": [stdio_backend(), python_backend()]}, require_auth=True)
    keys = {"call": await api.key("acme", CALL), "read": await api.key("acme", READ)}
    app = api.app
    await api.runtime.close()  # served again below by uvicorn with the lifespan
    async with serve_asgi(app) as base:
        yield f"{base}/mcp", keys


def client(url: str, key: str, mode: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode)


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_only_key_cannot_list_anything(served: tuple[str, dict[str, str]], mode: str) -> None:
    url, keys = served
    async with client(url, keys["call"], mode) as session:
        for listing in (
            session.list_tools,
            session.list_resources,
            session.list_resource_templates,
            session.list_prompts,
        ):
            with pytest.raises(MCPError, match="lacks the tools:read scope"):
                await listing()
    # the key still calls (over raw HTTP: the SDK client lists tools to check every result)
    answer = await raw_post(
        url, keys["call"], "tools/call", {"name": "py__greet", "arguments": {"name": "s"}}
    )
    assert answer["result"]["content"][0]["text"] == "Hello, s."


async def raw_post(url: str, key: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One plain 2026-07-28 request (the lane that answers straight off HTTP)."""
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": ENVELOPE}}
    headers = {**MODERN_HEADERS, "mcp-method": method, "Authorization": f"Bearer {key}"}
    if "name" in params:
        headers["mcp-name"] = params["name"]
    async with httpx.AsyncClient() as http:
        return (await http.post(url, content=orjson.dumps(body), headers=headers)).json()


@pytest.mark.parametrize("mode", MODES)
async def test_a_read_only_key_cannot_run_backend_handlers(
    served: tuple[str, dict[str, str]], mode: str
) -> None:
    url, keys = served
    async with client(url, keys["read"], mode) as session:
        assert "py__greet" in [tool.name for tool in (await session.list_tools()).tools]
        assert [p.name for p in (await session.list_prompts()).prompts] == ["ts__greet"]
        with pytest.raises(MCPError, match="lacks the tools:call scope"):
            await session.read_resource("test://readme")
        with pytest.raises(MCPError, match="lacks the tools:call scope"):
            await session.get_prompt("ts__greet", {"name": "Grace"})
        with pytest.raises(MCPError, match="lacks the tools:call scope"):
            await session.call_tool("py__greet", {"name": "x"})


async def test_the_plain_lane_refuses_a_listing_without_the_read_scope(
    served: tuple[str, dict[str, str]],
) -> None:
    url, keys = served
    error = (await raw_post(url, keys["call"], "tools/list", {})).get("error")
    assert error is not None and "lacks the tools:read scope" in error["message"], error
    assert "py__greet" in str(await raw_post(url, keys["read"], "tools/list", {}))


def test_every_method_the_gateway_answers_has_a_decided_scope() -> None:
    """A handler added later must be put in the table (or declared unscoped) on purpose."""
    config = parse_config({"backends": [stdio_backend()]})  # handlers relayed to backends included
    assert config is not None
    handlers: dict[str, Any] = MCPFront(Gateway(config)).server._request_handlers
    undecided = [m for m in handlers if m not in METHOD_SCOPES and m not in UNSCOPED_METHODS]
    assert undecided == []
    assert {"resources/subscribe", "completion/complete", "logging/setLevel"} <= set(handlers)
