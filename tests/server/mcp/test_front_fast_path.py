"""The MCP front's hot path: the `Server.middleware` fast path (a provisional SDK seam, covered here),
admission pools per session without per-call growth, and JSON answers for 2026-07-28 requests that
cannot receive notifications."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import httpx2
import orjson
import pytest
from mcp import Client
from mcp_types import SERVER_INFO_META_KEY

from support.results import names, text
from support.serving import serve_asgi
from toolweave import Gateway
from toolweave.executor import Admission, Pools, Session
from toolweave.server.app import create_app
from toolweave.server.mcp.front import MCPFront
from toolweave.server.request_session import SESSION_SCOPE_KEY
from toolweave.wire.transport import ModernJsonRouter

pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The test server runs in this process (the front, not the stdio transport, is the subject)."""

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
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often each way of answering runs, in any front of this test: the SDK handlers
    (`_call_tool`, `_list_tools`), the `Server.middleware` fast path (`_fast_call`, `_listing`) and
    the plain 2026-07-28 lane straight off HTTP (`plain_call`, `plain_listing`)."""
    counts = dict.fromkeys(
        ("_call_tool", "_list_tools", "_fast_call", "_listing", "plain_call", "plain_listing"), 0
    )
    for name in counts:
        original = getattr(MCPFront, name)

        def wrapper(self: Any, *args: Any, __name: str = name, __original: Any = original) -> Any:
            counts[__name] += 1
            return __original(self, *args)

        monkeypatch.setattr(MCPFront, name, wrapper)
    return counts


@pytest.fixture
async def served(gateway: Gateway, counted: dict[str, int]) -> AsyncIterator[tuple[str, MCPFront]]:
    app = create_app(gateway, start_gateway=False)
    async with serve_asgi(app) as base:
        yield f"{base}/mcp", app.state.front


async def raw_post(url: str, body: dict[str, Any], **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient() as http:
        return await http.post(url, content=orjson.dumps(body), headers={**MODERN_HEADERS, **headers})


@pytest.mark.parametrize("mode", MODES)
async def test_plain_calls_and_listings_take_the_fast_path(
    served: tuple[str, MCPFront], counted: dict[str, int], mode: str
) -> None:
    url, front = served
    assert front.server.middleware == [front._fast_path]
    async with Client(url, mode=mode) as client:
        listed = names((await client.list_tools()).tools)
        assert {"ts__echo", "ts__add", "py__greet"} <= set(listed)
        assert names((await client.list_tools()).tools) == listed  # the prebuilt answer again
        added = await client.call_tool("ts__add", {"a": 20, "b": 22})
        assert added.structured_content == {"sum": 42}
        stamp = (added.meta or {}).get(SERVER_INFO_META_KEY)
        assert stamp is None if mode == "legacy" else stamp["name"] == "toolweave"
        failed = await client.call_tool("ts__add", {"a": "one", "b": 2})
        assert failed.is_error and "invalid arguments for 'ts__add'" in text(failed)
        assert text(await client.call_tool("ts__echo", {"text": "fast"})) == "fast"
    assert counted["_call_tool"] == 0 and counted["_list_tools"] == 0
    if mode == "legacy":  # handshake-era requests go through the SDK, then the middleware
        assert (counted["_fast_call"], counted["_listing"]) == (3, 2)
    else:  # 2026-07-28 JSON requests are answered by the lane
        assert (counted["plain_call"], counted["plain_listing"]) == (3, 2)
        assert (counted["_fast_call"], counted["_listing"]) == (0, 0)


def call_body(name: str, arguments: Any = None, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    body = {"name": name, "_meta": ENVELOPE, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def call_headers(name: str) -> dict[str, str]:
    return {"mcp-method": "tools/call", "mcp-name": name}


async def test_a_tools_call_never_runs_tools_list(
    served: tuple[str, MCPFront], counted: dict[str, int]
) -> None:
    """`Mcp-Param-*` headers are checked with `get_tool_input_schema` (a lookup), never our listing."""
    url, _front = served
    for _ in range(3):
        answer = await raw_post(url, call_body("ts__echo", {"text": "x"}), **call_headers("ts__echo"))
        assert answer.json()["result"]["content"][0]["text"] == "x"
    assert counted["plain_call"] == 3
    assert counted["_list_tools"] == counted["_listing"] == counted["plain_listing"] == 0


async def test_the_lane_answers_as_the_sdk_would(
    gateway: Gateway, served: tuple[str, MCPFront], serve_gateway: Any, counted: dict[str, int]
) -> None:
    url, _front = served
    plain_url = await serve_gateway(gateway, json_response=True)  # always the SDK pipeline (+ middleware)
    requests = [
        (call_body("ts__add", {"a": 1, "b": 2}, request_id="abc"), call_headers("ts__add")),
        (call_body("ts__add", {"a": "x", "b": 2}), call_headers("ts__add")),
        (call_body("py__explode", {}, request_id=7), call_headers("py__explode")),
        (call_body("no_such_tool", {}), call_headers("no_such_tool")),
        (call_body("ts__echo", {"text": "é ✓ \u2028"}), call_headers("ts__echo")),
        (call_body("ts__echo", None), call_headers("ts__echo")),
        (
            {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": ENVELOPE}},
            {"mcp-method": "tools/list"},
        ),
    ]
    for body, headers in requests:
        lane, sdk = await raw_post(url, body, **headers), await raw_post(plain_url, body, **headers)
        assert (lane.status_code, lane.headers["content-type"]) == (
            sdk.status_code,
            sdk.headers["content-type"],
        )
        assert lane.json() == sdk.json(), body
    assert counted["plain_call"] == 6 and counted["plain_listing"] == 1


@pytest.mark.parametrize(
    ("body", "headers", "code"),
    [
        pytest.param(
            call_body("ts__echo", {"text": "x"}), call_headers("ts__add"), -32020, id="name-header-mismatch"
        ),
        pytest.param(
            call_body("ts__echo", {"text": "x"}),
            {"mcp-method": "tools/list", "mcp-name": "ts__echo"},
            -32020,
            id="method-header-mismatch",
        ),
        pytest.param(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "ts__echo", "arguments": {}},
            },
            call_headers("ts__echo"),
            -32602,
            id="no-envelope",
        ),
        pytest.param(
            call_body("ts__echo", [1]), call_headers("ts__echo"), -32602, id="arguments-not-an-object"
        ),
        pytest.param(
            call_body("ts__echo", {}, request_id=True), call_headers("ts__echo"), -32600, id="bad-id"
        ),
    ],
)
async def test_what_the_lane_refuses_the_sdk_answers(
    served: tuple[str, MCPFront],
    counted: dict[str, int],
    body: dict[str, Any],
    headers: dict[str, str],
    code: int,
) -> None:
    url, _front = served
    answer = await raw_post(url, body, **headers)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == code
    assert counted["plain_call"] + counted["_fast_call"] + counted["_call_tool"] <= 1
    assert counted["_call_tool"] == 0


async def test_what_the_fast_paths_leave_to_the_sdk(
    served: tuple[str, MCPFront], counted: dict[str, int]
) -> None:
    url, _front = served
    listing = await raw_post(
        url,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"cursor": "x", "_meta": ENVELOPE}},
        **{"mcp-method": "tools/list"},
    )
    assert counted["_list_tools"] == 1 and "result" in listing.json()
    with_progress = call_body("ts__echo", {"text": "p"}, _meta={**ENVELOPE, "progressToken": "t1"})
    answer = await raw_post(url, with_progress, **call_headers("ts__echo"))
    assert answer.status_code == 200
    assert (
        counted["plain_call"] == 0 and counted["_fast_call"] == 1
    )  # the SSE-capable path, then the middleware


async def test_a_missing_scope_is_left_to_the_sdk(gateway: Gateway) -> None:
    front = MCPFront(gateway)
    verdict = SimpleNamespace(protocol_version="2026-07-28", client_info=None, client_capabilities={})
    scope = {SESSION_SCOPE_KEY: Session(scopes=frozenset({"tools:read"}))}
    assert await front.plain_call(scope, verdict, {"name": "ts__echo", "arguments": {}}) is None
    await front.close()


async def test_the_sdk_middleware_seam(gateway: Gateway) -> None:
    """What the fast path relies on from the SDK's provisional `Server.middleware` (may change in a 2.x minor)."""
    front = MCPFront(gateway)
    seen: list[Any] = []
    fast = front._fast_path

    async def probe(ctx: Any, call_next: Any) -> Any:
        seen.append(ctx)
        return await fast(ctx, call_next)

    front.server.middleware = [probe]
    try:
        async with Client(front.server) as client:
            assert text(await client.call_tool("ts__echo", {"text": "in-process"})) == "in-process"
            assert "ts__echo" in names((await client.list_tools()).tools)
    finally:
        await front.close()
    call = next(ctx for ctx in seen if ctx.method == "tools/call")
    assert call.params["name"] == "ts__echo" and call.params["arguments"] == {"text": "in-process"}
    assert call.request_id is not None and call.protocol_version == "2026-07-28"
    assert call.session._connection.initialize_accepted
    assert callable(call.session.report_progress)


async def test_pools_follow_the_session_not_the_request(
    served: tuple[str, MCPFront], counted: dict[str, int]
) -> None:
    url, front = served
    async with Client(url, mode="auto") as client:
        for index in range(30):
            await client.call_tool("ts__echo", {"text": str(index)})
    admission = front.gateway.registry.admission
    assert len(admission._by_principal) == 1  # 2026-07-28: one caller, one pool set, however many requests
    assert len(admission._by_owner) == 0
    async with Client(url, mode="legacy") as legacy:
        for index in range(5):
            await legacy.call_tool("ts__echo", {"text": str(index)})
        assert len(admission._by_owner) == 1  # a handshake-era session has its own
    assert len(admission._by_principal) == 1


class FakeConnection:
    """Stands in for the SDK's per-session `Connection` (weakly referenceable, like it)."""


def test_pool_identity_and_bound(gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    front = MCPFront(gateway)
    admission = Admission(read_width=64, concurrent_width=10, max_principals=3)
    monkeypatch.setattr(front.lane, "_registry", SimpleNamespace(admission=admission))

    def pools_for(ctx: Any, base: Session) -> Pools:
        """The pools the front's executor for this request and caller gets."""
        return front.lane.executor(base, None, front._connection_of(ctx)).pools

    modern = SimpleNamespace(protocol_version="2026-07-28", session=SimpleNamespace(_connection=object()))
    acme, globex = Session(tenant="acme", label="key:a"), Session(tenant="globex", label="key:b")
    assert pools_for(modern, acme) is pools_for(modern, Session(tenant="acme", label="key:a"))
    assert pools_for(modern, acme) is not pools_for(modern, globex)
    for index in range(10):
        pools_for(modern, Session(tenant=f"t{index}"))
    assert len(admission._by_principal) == 3
    connection = FakeConnection()
    legacy = SimpleNamespace(protocol_version="2025-11-25", session=SimpleNamespace(_connection=connection))
    assert pools_for(legacy, acme) is pools_for(legacy, globex)  # the connection is the session
    del legacy, connection
    gc.collect()
    assert len(admission._by_owner) == 0  # gone with the connection


# -- JSON answers for requests that cannot receive notifications -----------------------


class Recorder:
    def __init__(self, name: str, calls: list[tuple[str, bytes]], block: asyncio.Event | None = None) -> None:
        self.name, self.calls, self.block = name, calls, block
        self.cancelled = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while scope["method"] == "POST":
            message = await receive()
            body += message["body"]
            if not message.get("more_body"):
                break
        self.calls.append((self.name, body))
        if self.block is not None:
            try:
                await self.block.wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def scope_for(
    method: str = "POST",
    version: bytes | None = b"2026-07-28",
    accept: bytes = b"application/json, text/event-stream",
) -> dict[str, Any]:
    headers = [(b"accept", accept)]
    if version is not None:
        headers.append((b"mcp-protocol-version", version))
    return {"type": "http", "method": method, "headers": headers, "path": "/mcp"}


async def route(
    scope: dict[str, Any], body: Any, block: asyncio.Event | None = None
) -> list[tuple[str, bytes]]:
    calls: list[tuple[str, bytes]] = []
    router = ModernJsonRouter(Recorder("sse", calls), Recorder("json", calls, block), max_body=1 << 20)
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    messages = [
        {"type": "http.request", "body": raw[:5], "more_body": True},
        {"type": "http.request", "body": raw[5:], "more_body": False},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    await router(scope, receive, send)
    return calls


CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "x", "arguments": {}, "_meta": ENVELOPE},
}


async def test_the_router_answers_plain_modern_requests_with_json() -> None:
    assert await route(scope_for(), CALL) == [("json", orjson.dumps(CALL))]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    assert await route(scope_for(), listing) == [("json", orjson.dumps(listing))]


@pytest.mark.parametrize(
    ("scope", "body"),
    [
        pytest.param(
            scope_for(),
            {**CALL, "params": {**CALL["params"], "_meta": {**ENVELOPE, "progressToken": 7}}},
            id="progress",
        ),
        pytest.param(
            scope_for(),
            {
                **CALL,
                "params": {
                    **CALL["params"],
                    "_meta": {**ENVELOPE, "io.modelcontextprotocol/logLevel": "info"},
                },
            },
            id="log-level",
        ),
        pytest.param(
            scope_for(),
            {"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen", "params": {}},
            id="listen",
        ),
        pytest.param(scope_for(), b"{not json", id="unparsable"),
        pytest.param(scope_for(version=b"2025-11-25"), CALL, id="handshake-era"),
        pytest.param(scope_for(version=None), CALL, id="no-version"),
        pytest.param(scope_for(accept=b"application/json"), CALL, id="no-sse-accept"),
    ],
)
async def test_the_router_leaves_streams_and_everything_else_to_the_sdk(
    scope: dict[str, Any], body: Any
) -> None:
    calls = await route(scope, body)
    assert [name for name, _ in calls] == ["sse"]
    assert calls[0][1] == (
        body if isinstance(body, bytes) else orjson.dumps(body)
    )  # the body, replayed whole


async def test_a_client_that_disconnects_cancels_its_json_request() -> None:
    block = asyncio.Event()
    calls: list[tuple[str, bytes]] = []
    json_app = Recorder("json", calls, block)
    router = ModernJsonRouter(Recorder("sse", calls), json_app, max_body=1 << 20)
    disconnected = asyncio.Event()
    messages = [{"type": "http.request", "body": orjson.dumps(CALL), "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        raise AssertionError("nothing is sent to a client that left")

    task = asyncio.create_task(router(scope_for(), receive, send))
    while not calls:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    disconnected.set()
    await asyncio.wait_for(task, 5)  # returns quietly: the request was cancelled, not the server
    assert json_app.cancelled
