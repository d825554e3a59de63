"""HTTP backends call tools through the lean caller on the wire their SDK client negotiated (2026-07-28 or
2025-11-25), with progress and `Mcp-Param-*` headers, and hand a call to the SDK client only where its own
logic is needed (a stale header map); a stream the server closes early is resumed, the backend stays."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventMessage, EventStore
from mcp_types import ToolAnnotations
from pydantic import Field

from support.processes import wait_until
from support.results import text
from support.serving import serve_asgi
from toolweave.backends import mcp as mcp_module
from toolweave.backends.mcp import MCPBackend
from toolweave.config import BackendConfig

MODES = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="2025-11-25")]

app_server = MCPServer("leanserver")


@app_server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def steps(count: int, ctx: Context) -> str:
    """Report progress `count` times."""
    for index in range(1, count + 1):
        await ctx.report_progress(index, count, f"step {index}")
    return f"{count} steps"


@app_server.tool(annotations=ToolAnnotations(read_only_hint=True))
def regional(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], item: str = ""
) -> str:
    """A tool whose `region` argument is mirrored into an `Mcp-Param-Region` header."""
    return f"{item} in {region}"


@app_server.tool(annotations=ToolAnnotations(read_only_hint=True))
def total(a: int, b: int) -> dict[str, int]:
    """Structured output, checked against its output schema."""
    return {"sum": a + b}


@pytest.fixture
async def lean_url() -> AsyncIterator[str]:
    async with serve_asgi(
        app_server.streamable_http_app(), lifespan="auto", timeout_graceful_shutdown=1
    ) as base:
        yield f"{base}/mcp"


@pytest.fixture
async def backend(
    lean_url: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    mode = request.param
    if mode == "legacy":
        monkeypatch.setattr(mcp_module, "Client", functools.partial(Client, mode="legacy"))
    backend = MCPBackend(BackendConfig.model_validate({"name": "lean", "url": lean_url}))
    await backend.start()
    assert await backend.wait_ready(15), backend.last_error
    sdk_calls: list[str] = []
    client = backend._client
    assert client is not None
    original = client.call_tool

    async def counted(name: str, *args: Any, **kwargs: Any) -> Any:
        sdk_calls.append(name)
        return await original(name, *args, **kwargs)

    client.call_tool = counted  # type: ignore[method-assign]
    backend.sdk_calls = sdk_calls  # type: ignore[attr-defined]
    yield backend
    await backend.stop()


@pytest.mark.parametrize("backend", MODES, indirect=True)
async def test_calls_take_the_lean_path(backend: Any) -> None:
    caller = backend._caller
    assert caller is not None
    assert caller.modern == (backend._client.protocol_version == "2026-07-28")
    seen: list[tuple[Any, ...]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    result = await backend.call_tool("steps", {"count": 3}, progress=progress)
    assert text(result) == "3 steps"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    added = await backend.call_tool("total", {"a": 2, "b": 40})
    assert not added.is_error and added.structured_content == {"sum": 42}
    assert "io.modelcontextprotocol/serverInfo" not in (added.meta or {})
    assert (
        text(await backend.call_tool("regional", {"region": "eu west", "item": "bike"})) == "bike in eu west"
    )
    assert backend.sdk_calls == []  # every call above went through the lean caller


@pytest.mark.parametrize("backend", [MODES[0]], indirect=True)
async def test_a_stale_header_map_hands_the_call_to_the_sdk(backend: Any) -> None:
    backend._caller.header_maps = {}  # as if the tool gained its x-mcp-header after our last listing
    result = await backend.call_tool("regional", {"region": "north", "item": "sled"})
    assert text(result) == "sled in north"
    assert backend.sdk_calls == ["regional"]  # rejected with HEADER_MISMATCH, nothing ran; sent once more
    await wait_until(lambda: bool(backend._caller.header_maps), what="lists refreshed")


@pytest.mark.parametrize("backend", MODES, indirect=True)
async def test_tool_errors_and_unknown_tools(backend: Any) -> None:
    bad = await backend.call_tool("total", {"a": "x", "b": 1})
    assert bad.is_error
    unknown = await backend.call_tool("no_such_tool", {})
    assert unknown.is_error and "no_such_tool" in text(unknown)
    assert backend.status == "connected"


@pytest.mark.parametrize("backend", MODES, indirect=True)
async def test_calls_in_parallel_share_the_pool(backend: Any) -> None:
    results = await asyncio.gather(*(backend.call_tool("total", {"a": i, "b": i}) for i in range(12)))
    assert [r.structured_content["sum"] for r in results] == [2 * i for i in range(12)]
    assert 1 <= len(backend._caller._idle) <= 12


class MemoryEventStore(EventStore):
    """Every event kept, so a client can resume a stream the server closed (what makes a server resumable)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    async def store_event(self, stream_id: str, message: Any) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        found = [index for index, event in enumerate(self.events) if event[0] == last_event_id]
        if not found:
            return None
        stream_id = self.events[found[0]][1]
        for event_id, stream, message in self.events[found[0] + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


resumable_server = MCPServer("resumable")


@resumable_server.tool()
async def interrupted(ctx: Context) -> str:
    """Report progress, close this call's stream (the client must resume it), then answer."""
    await ctx.report_progress(1, 2)
    await ctx.close_sse_stream()
    await asyncio.sleep(0.2)
    await ctx.report_progress(2, 2)
    return "answered after the stream was resumed"


async def test_a_stream_the_server_closes_is_resumed_not_reconnected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_module, "Client", functools.partial(Client, mode="legacy"))
    app = resumable_server.streamable_http_app(event_store=MemoryEventStore(), retry_interval=50)
    async with serve_asgi(app, lifespan="auto", timeout_graceful_shutdown=1) as base:
        backend = MCPBackend(BackendConfig.model_validate({"name": "resumable", "url": f"{base}/mcp"}))
        await backend.start()
        try:
            assert await backend.wait_ready(15), backend.last_error
            assert backend._caller is not None
            statuses: list[str] = []
            backend.on_change(lambda changed: statuses.append(changed.status))
            seen: list[tuple[Any, ...]] = []
            result = await backend.call_tool("interrupted", {}, progress=lambda *args: seen.append(args))
            assert text(result) == "answered after the stream was resumed", text(result)
            assert seen == [(1, 2, None), (2, 2, None)]
            assert not (await backend.call_tool("interrupted", {})).is_error
            assert backend.status == "connected" and statuses == []  # never torn down
        finally:
            await backend.stop()
