"""What an MCP client sees on one endpoint: python examples/what_it_sees.py URL [API_KEY].

Connects the MCP SDK's client twice, as a 2025-11-25 client (a session) and as a 2026-07-28 one
(sessionless), and prints for each the server's name, its instructions and the tools it lists.
Used by docs/servers.md; works on `/mcp` and on any `/servers/{name}/mcp`.
"""

from __future__ import annotations

import asyncio
import sys

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def show(url: str, key: str | None, mode: str) -> None:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        info = client.server_info
        tools = (await client.list_tools()).tools
        print(f"[{client.protocol_version}] {info.name if info else '?'}: {client.instructions or ''}")
        print("  tools: " + ", ".join(tool.name for tool in tools))


async def main() -> None:
    url = sys.argv[1]
    key = sys.argv[2] if len(sys.argv) > 2 else None
    for mode in ("legacy", "auto"):
        await show(url, key, mode)


if __name__ == "__main__":
    asyncio.run(main())
