"""Differential: the same requests answered by the fast path (`Server.middleware`, and the plain
2026-07-28 lane) and by the SDK's own handler path (middleware off) give the same wire answers, on both
protocol revisions. The fast path is allowed to be faster, never different."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import orjson
import pytest

from support.configs import python_backend, stdio_backend
from support.fixtures import OpenGateway
from support.serving import serve_asgi
from toolweave import Gateway
from toolweave.server.app import create_app
from toolweave.server.mcp.front import MCPFront

pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The test server runs in this process (the front, not the stdio transport, is the subject)."""

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
CALLS: list[tuple[str, Any]] = [
    ("ts__add", {"a": 1, "b": 2}),
    ("ts__add", {"a": "x", "b": 2}),
    ("py__explode", {}),
    ("no_such_tool", {}),
    ("ts__echo", {"text": "é ✓ \u2028"}),
    ("ts__echo", None),
    ("py__greet", {"name": "MCP"}),
]


@pytest.fixture
async def gateway(open_gateway: OpenGateway) -> Gateway:
    return await open_gateway({"backends": [stdio_backend(), python_backend()]})


@contextlib.asynccontextmanager
async def served(gateway: Gateway, *, middleware: bool) -> AsyncIterator[str]:
    app = create_app(gateway, start_gateway=False, json_response=True)
    if not middleware:
        app.state.front.server.middleware = []  # every request through the SDK's handlers
    async with serve_asgi(app) as base:
        yield f"{base}/mcp"


class Wire:
    """Raw JSON-RPC over streamable HTTP: one revision, answers as parsed JSON."""

    def __init__(self, http: httpx2.AsyncClient, url: str, version: str) -> None:
        self.http, self.url, self.version = http, url, version
        self.headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": version,
        }

    async def handshake(self) -> None:
        if self.version == "2026-07-28":
            return
        params = {
            "protocolVersion": self.version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        answer = await self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        self.headers["mcp-session-id"] = answer.headers["mcp-session-id"]
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def post(self, body: dict[str, Any], **headers: str) -> httpx2.Response:
        return await self.http.post(self.url, content=orjson.dumps(body), headers={**self.headers, **headers})

    async def request(self, request_id: int, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        headers: dict[str, str] = {}
        if self.version == "2026-07-28":
            params = {**params, "_meta": ENVELOPE}
            headers["mcp-method"] = method
            if "name" in params:
                headers["mcp-name"] = params["name"]
        answer = await self.post(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, **headers
        )
        return answer.status_code, answer.json()


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
async def test_the_fast_path_answers_as_the_sdk_handlers_do(
    gateway: Gateway, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = dict.fromkeys(("_call_tool", "_fast_call", "plain_call"), 0)
    for name in counts:
        original = getattr(MCPFront, name)

        def counting(self: Any, *args: Any, __name: str = name, __original: Any = original) -> Any:
            counts[__name] += 1
            return __original(self, *args)

        monkeypatch.setattr(MCPFront, name, counting)
    async with (
        served(gateway, middleware=True) as fast_url,
        served(gateway, middleware=False) as sdk_url,
        httpx2.AsyncClient() as http,
    ):
        fast, sdk = Wire(http, fast_url, version), Wire(http, sdk_url, version)
        await fast.handshake()
        await sdk.handshake()
        requests: list[tuple[str, dict[str, Any]]] = [("tools/list", {})]
        for name, arguments in CALLS:
            params: dict[str, Any] = {"name": name}
            if arguments is not None:
                params["arguments"] = arguments
            requests.append(("tools/call", params))
        for request_id, (method, params) in enumerate(requests, start=1):
            fast_answer = await fast.request(request_id, method, params)
            sdk_answer = await sdk.request(request_id, method, params)
            assert fast_answer == sdk_answer, (method, params)
    assert counts["_call_tool"] == len(CALLS)  # the SDK handler answered every call of one side
    assert counts["_fast_call"] + counts["plain_call"] == len(CALLS)  # the fast path, the other's
