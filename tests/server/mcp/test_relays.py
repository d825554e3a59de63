"""What a backend offers besides tools reaches the client through the gateway (served over HTTP, a
2025-11-25 client): sampling, elicitation and roots requests go to the client whose call caused them,
log messages follow `logging/setLevel`, completions map namespaced prompt names; over stdio (the SDK
client's callbacks) and over HTTP (the lean caller). A client without a capability, or a gateway whose
backends lack a feature, gets the SDK's own answers."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import mcp_types as types
import pytest
import relayserver
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

from support.configs import stdio_backend
from support.fixtures import OpenGateway, ServeGateway
from support.paths import PYTHON, RELAYSERVER
from support.processes import wait_until
from support.results import text
from support.serving import serve_asgi
from toolweave.backends import mcp as mcp_backend


@contextlib.asynccontextmanager
async def relay_backend(transport: str) -> AsyncIterator[dict[str, Any]]:
    if transport == "stdio":
        yield {"name": "rs", "command": PYTHON, "args": [str(RELAYSERVER)]}
        return
    # the gateway's backend connection (its standalone stream, a hanging call) outlives the block: a
    # short graceful shutdown rather than uvicorn waiting for it
    app = relayserver.server.streamable_http_app()
    async with serve_asgi(app, lifespan="auto", timeout_graceful_shutdown=0.5) as base:
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


@pytest.mark.usefixtures("in_process_testserver")  # the test server's capabilities, not its process
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


async def _hang_call(url: str, stack: contextlib.AsyncExitStack) -> httpx.Response:
    """A handshake-era client (declaring roots) whose `rs__hang` call is in flight; returns the open response."""
    http = await stack.enter_async_context(httpx.AsyncClient(timeout=10))
    headers = {"accept": "application/json, text/event-stream"}
    hello = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"roots": {}},
        "clientInfo": {"name": "a", "version": "1"},
    }
    opened = await http.post(
        url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}, headers=headers
    )
    headers |= {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "rs__hang", "arguments": {}},
    }
    request = http.build_request("POST", url, json=call, headers=headers)
    return await http.send(request, stream=True)


async def test_a_client_that_walked_away_is_not_asked(
    open_gateway: OpenGateway, serve_gateway: ServeGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend's request on its standalone stream (`roots/list` without a related request) names no call.
    With two clients' calls in flight nobody is asked; once one client has closed its call's stream (the
    call runs on: a disconnect is no cancellation) it cannot hear a request, so the other one is asked.
    The conformance suite's server-sse-polling leaves such a call behind (elicitation-sep1330-enums)."""
    monkeypatch.setattr(mcp_backend, "Client", functools.partial(Client, mode="legacy"))
    async with relay_backend("http") as entry, contextlib.AsyncExitStack() as stack:
        gateway = await open_gateway({"backends": [{**entry, "timeout": 60}]})
        url = await serve_gateway(gateway)
        backend = gateway.backends["rs"]
        hanging = await _hang_call(url, stack)
        await wait_until(lambda: backend.calls.in_flight == 1, what="the first call in flight")
        async with Client(url, mode="legacy", list_roots_callback=roots) as client:
            refused = await client.call_tool("rs__list_roots", {})
            assert refused.is_error and "List roots not supported" in text(refused)
            await hanging.aclose()  # the first client walks away from its call
            await wait_until(lambda: _only_listener_left(gateway), what="the first client gone")
            assert text(await client.call_tool("rs__list_roots", {})) == "file:///work/project"
        assert backend.calls.in_flight == 1  # the abandoned call still runs


def _only_listener_left(gateway: Any) -> bool:
    callers = gateway.backends["rs"].requests.callers
    return len(callers) == 1 and not callers[0].can_answer("roots/list")


@pytest.mark.parametrize("backend_mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2026_client_is_asked_through_input_required(
    open_gateway: OpenGateway,
    serve_gateway: ServeGateway,
    transport: str,
    backend_mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On 2026-07-28 a server sends no requests: the backend's sampling, elicitation and roots requests
    reach the client as the input requests of its call's `InputRequiredResult`, and the client's answers
    (its retry's `inputResponses`) go back to the backend, whichever revision the backend speaks."""
    monkeypatch.setattr(mcp_backend, "Client", functools.partial(Client, mode=backend_mode))
    async with relay_backend(transport) as entry:
        gateway = await open_gateway({"backends": [entry]})
        url = await serve_gateway(gateway)
        async with Client(
            url, sampling_callback=sample, elicitation_callback=elicit, list_roots_callback=roots
        ) as client:
            assert client.protocol_version == "2026-07-28"
            asked = await client.call_tool("rs__ask_all", {"question": "2+2?"})
            assert text(asked) == "model said: 4 (to '2+2?'); name: Ada; roots: file:///work/project"
            if backend_mode == "legacy":  # plain server requests: a 2026-07-28 backend cannot send them
                asked = await client.call_tool("rs__ask_model", {"question": "3+3?"})
                assert text(asked) == "model said: 4 (to '3+3?')"
                assert text(await client.call_tool("rs__ask_user", {})) == "accept: Ada"
                assert text(await client.call_tool("rs__list_roots", {})) == "file:///work/project"
        async with Client(url) as plain:  # declared nothing: the SDK client's refusal reaches the backend
            refused = await plain.call_tool("rs__ask_all", {"question": "?"})
            assert refused.is_error and text(refused).endswith(" not supported"), text(refused)
        assert gateway.backends["rs"].status == "connected"


@pytest.mark.parametrize("client_mode", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_cancelled_call_stops_at_the_backend(
    open_gateway: OpenGateway, serve_gateway: ServeGateway, transport: str, client_mode: str
) -> None:
    """The client cancels its call (2025-11-25: `notifications/cancelled`; 2026-07-28: it closes the
    request's stream): the gateway cancels the backend's call, and the backend's tool stops."""
    async with relay_backend(transport) as entry:
        gateway = await open_gateway({"backends": [entry]})
        url = await serve_gateway(gateway)
        backend = gateway.backends["rs"]
        tag = f"{transport}-{client_mode}"
        async with Client(url, mode=client_mode) as client:
            call = asyncio.create_task(client.call_tool("rs__hang", {"tag": tag}))
            await wait_until(lambda: backend.calls.in_flight == 1, what="the call in flight")
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            await wait_until(lambda: backend.calls.in_flight == 0, what="the gateway's call cancelled")
            for _ in range(250):
                if (await client.call_tool("rs__stopped", {"tag": tag})).structured_content == {
                    "result": True
                }:
                    break
                await asyncio.sleep(0.02)
            else:
                pytest.fail("the backend's tool was never cancelled")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_log_messages_outside_calls_reach_the_connections_that_set_a_level(
    open_gateway: OpenGateway, serve_gateway: ServeGateway, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend logs after its call has answered: every connection that set a level hears it (at that
    level or above); one that set none hears nothing (it did not ask)."""
    monkeypatch.setattr(mcp_backend, "Client", functools.partial(Client, mode="legacy"))
    async with relay_backend(transport) as entry:
        gateway = await open_gateway({"backends": [entry]})
        url = await serve_gateway(gateway)
        heard: list[tuple[str, Any, str | None]] = []
        quiet: list[Any] = []

        async def log(params: types.LoggingMessageNotificationParams) -> None:
            heard.append((params.level, params.data, params.logger))

        async def unexpected(params: types.LoggingMessageNotificationParams) -> None:
            quiet.append(params)

        async with (
            Client(url, mode="legacy", logging_callback=log) as client,
            Client(url, mode="legacy", logging_callback=unexpected) as other,
        ):
            await other.list_tools()
            await client.set_logging_level("warning")
            assert text(await client.call_tool("rs__log_later", {})) == "scheduled"
            await wait_until(lambda: bool(heard), what="the log message after the call")
            assert heard == [("warning", "after the call", "later")]
            assert quiet == []


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_clients_progress_on_a_relayed_request_reaches_the_backend(
    open_gateway: OpenGateway, serve_gateway: ServeGateway, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend asks for sampling with a progress token: the client reports progress on the request it
    got (under the gateway's token), and the backend hears it under its own."""
    monkeypatch.setattr(mcp_backend, "Client", functools.partial(Client, mode="legacy"))

    async def sample_slowly(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        token = (params.meta or {}).get("progress_token")
        assert token is not None
        await context.session.send_progress_notification(token, 0.5, 1.0, "thinking")
        await asyncio.sleep(0.3)  # the progress is on its way before the answer
        return await sample(context, params)

    async with relay_backend(transport) as entry:
        gateway = await open_gateway({"backends": [entry]})
        url = await serve_gateway(gateway)
        async with Client(url, mode="legacy", sampling_callback=sample_slowly) as client:
            asked = await client.call_tool("rs__ask_model_patiently", {"question": "2+2?"})
            assert text(asked) == "model said: 4 (to '2+2?'); progress: [(0.5, 1.0, 'thinking')]"
