"""A minimal MCP client for measuring a server's own time: one JSON-RPC POST per request, no pydantic.

It speaks the 2026-07-28 wire (self-contained requests: `MCP-Protocol-Version` and
`Mcp-Method` headers, the `_meta` envelope) over one persistent httpx2 connection
pool, and parses JSON or SSE bodies with orjson. Used where the SDK client's own cost
would hide the server's (a 300-tool listing costs the SDK client several ms to parse).
"""

from __future__ import annotations

import itertools
from types import TracebackType
from typing import Any

import httpx2
import orjson

from bench.load import CallFn

PROTOCOL_VERSION = "2026-07-28"
_META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "toolweave-bench-raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _sse_payload(body: bytes) -> bytes:
    """The data of the last SSE event (the JSON-RPC response comes last)."""
    data = b""
    for line in body.splitlines():
        if line.startswith(b"data:"):
            data = line[5:].strip()
    return data


class RawMcpClient:
    """`async with RawMcpClient(url) as c: await c.request("tools/list", {})`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._ids = itertools.count(1)
        self._http: httpx2.AsyncClient | None = None

    async def __aenter__(self) -> RawMcpClient:
        self._http = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._http is not None, "use RawMcpClient as an async context manager"
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": {**params, "_meta": _META},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": PROTOCOL_VERSION,
            "mcp-method": method,
        }
        if isinstance(params.get("name"), str):
            headers["mcp-name"] = params["name"]
        response = await self._http.post(self.url, content=orjson.dumps(body), headers=headers)
        raw = response.content
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            raw = _sse_payload(raw)
        message = orjson.loads(raw)
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message["result"]


def raw_client(url: str) -> Any:
    """A client factory for `Target` (same shape as `load.url_client`)."""
    return lambda: RawMcpClient(url)


def raw_list_tools(expect_at_least: int) -> CallFn:
    async def call(client: Any) -> Any:
        result = await client.request("tools/list", {})
        if len(result.get("tools", [])) < expect_at_least:
            raise RuntimeError(f"tools/list returned {len(result.get('tools', []))} tools")
        return result

    return call
