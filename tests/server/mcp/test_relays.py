"""What a backend offers besides tools reaches the client through the gateway (served over HTTP, a
2025-11-25 client): sampling, elicitation and roots requests go to the client whose call caused them,
log messages follow `logging/setLevel`, completions map namespaced prompt names; over stdio (the SDK
client's callbacks) and over HTTP (the lean caller). A client without a capability, or a gateway whose
backends lack a feature, gets the SDK's own answers."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import pytest
import relayserver
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

from support.configs import stdio_backend
from support.fixtures import OpenGateway, ServeGateway
from support.paths import PYTHON, RELAYSERVER
from support.results import text
from support.serving import serve_asgi
from toolweave.backends import mcp as mcp_backend


@contextlib.asynccontextmanager
async def relay_backend(transport: str) -> AsyncIterator[dict[str, Any]]:
    if transport == "stdio":
        yield {"name": "rs", "command": PYTHON, "args": [str(RELAYSERVER)]}
        return
    async with serve_asgi(relayserver.server.streamable_http_app(), lifespan="auto") as base:
        yield {"name": "rs", "url": f"{base}/mcp"}


async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    question = params.messages[0].content.text  # type: ignore[union-attr]
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"4 (to {question!r})"), model="m"
    )


async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    assert params.message == "What is your name?"
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_backend_reaches_the_client_whose_call_caused_it(
    open_gateway: OpenGateway, serve_gateway: ServeGateway, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a handshake-era backend connection: server-initiated requests exist only there
    monkeypatch.setattr(mcp_backend, "Client", functools.partial(Client, mode="legacy"))
    async with relay_backend(transport) as entry:
        gateway = await open_gateway({"backends": [entry]})
        url = await serve_gateway(gateway)
        logs: list[types.LoggingMessageNotificationParams] = []

        async def log(params: types.LoggingMessageNotificationParams) -> None:
            logs.append(params)

        async with Client(
            url,
            mode="legacy",
            sampling_callback=sample,
            elicitation_callback=elicit,
            list_roots_callback=roots,
            logging_callback=log,
        ) as client:
            capabilities = client.server_capabilities
            assert capabilities.logging is not None and capabilities.completions is not None
            asked = await client.call_tool("rs__ask_model", {"question": "2+2?"})
            assert text(asked) == "model said: 4 (to '2+2?')"
            assert text(await client.call_tool("rs__ask_user", {})) == "accept: Ada"
            assert text(await client.call_tool("rs__list_roots", {})) == "file:///work/project"
            await client.set_logging_level("warning")
            assert text(await client.call_tool("rs__chatty", {})) == "logged"
            assert [(entry.level, entry.data, entry.logger) for entry in logs] == [
                ("warning", {"disk": "almost full"}, "storage")
            ]
            completed = await client.complete(
                types.PromptReference(type="ref/prompt", name="rs__greet"), {"name": "name", "value": "A"}
            )
            assert completed.completion.values == ["Ada", "Alan"]

        async with Client(url, mode="legacy") as plain:  # declared nothing: the SDK client's refusals
            refused = await plain.call_tool("rs__ask_model", {"question": "?"})
            assert refused.is_error and "Sampling not supported" in text(refused)
            refused = await plain.call_tool("rs__ask_user", {})
            assert refused.is_error and "Elicitation not supported" in text(refused)
        assert gateway.backends["rs"].status == "connected"


async def test_features_no_backend_offers_are_not_advertised(
    open_gateway: OpenGateway, serve_gateway: ServeGateway
) -> None:
    gateway = await open_gateway({"backends": [stdio_backend()]})
    url = await serve_gateway(gateway)
    async with Client(url, mode="legacy") as client:
        capabilities = client.server_capabilities
        assert capabilities.completions is None
        with pytest.raises(MCPError) as raised:
            await client.complete(
                types.PromptReference(type="ref/prompt", name="ts__greet"), {"name": "name", "value": "A"}
            )
        assert raised.value.error.code == METHOD_NOT_FOUND
