"""Session flood: handshake-era MCP sessions are capped per API key and per tenant, idle ones expire,
and a key at its cap gets a clear error while every other key keeps opening sessions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from support.api import AppFactory
from support.configs import python_backend
from support.serving import serve_asgi

READ = "tools:read"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "f", "version": "1"},
    },
}


async def open_session(http: httpx.AsyncClient, url: str, key: str) -> httpx.Response:
    return await http.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {key}"})


@pytest.fixture
async def limited(sqlite_app: AppFactory) -> AsyncIterator[tuple[str, Any]]:
    limits = {"mcp_sessions_per_key": 3, "mcp_sessions_per_tenant": 5, "mcp_session_idle": "1s"}
    api = await sqlite_app({"backends": [python_backend()], "limits": limits}, require_auth=True)
    app = api.app
    keys = {
        "a1": await api.key("acme", READ),
        "a2": await api.key("acme", READ),
        "b": await api.key("bravo", READ),
    }
    await api.runtime.close()  # served again below by uvicorn with the lifespan
    async with serve_asgi(app) as base:
        yield f"{base}/mcp", keys


async def test_a_key_at_its_cap_is_refused_clearly_and_others_keep_working(limited: tuple[str, Any]) -> None:
    url, keys = limited
    async with httpx.AsyncClient(timeout=10) as http:
        opened = [await open_session(http, url, keys["a1"]) for _ in range(3)]
        assert all(r.status_code == 200 and r.headers.get("mcp-session-id") for r in opened)
        refused = await open_session(http, url, keys["a1"])
        assert refused.status_code == 429, refused.text
        message = refused.json()["error"]["message"]
        assert "3 open MCP sessions" in message and "limits.mcp_sessions_per_key" in message

        assert (await open_session(http, url, keys["a2"])).status_code == 200  # same tenant, other key
        assert (await open_session(http, url, keys["a2"])).status_code == 200
        tenant_full = await open_session(http, url, keys["a2"])
        assert tenant_full.status_code == 429
        assert "limits.mcp_sessions_per_tenant" in tenant_full.json()["error"]["message"]
        assert (await open_session(http, url, keys["b"])).status_code == 200  # another tenant: unaffected

        closed = await http.delete(
            url,
            headers={
                "mcp-session-id": opened[0].headers["mcp-session-id"],
                "Authorization": f"Bearer {keys['a1']}",
            },
        )
        assert closed.status_code == 200
        assert (await open_session(http, url, keys["a1"])).status_code == 200  # a slot was freed


async def test_idle_sessions_expire_and_free_their_slots(limited: tuple[str, Any]) -> None:
    url, keys = limited
    async with httpx.AsyncClient(timeout=10) as http:
        for _ in range(3):
            assert (await open_session(http, url, keys["a1"])).status_code == 200
        assert (await open_session(http, url, keys["a1"])).status_code == 429
        await asyncio.sleep(1.6)  # limits.mcp_session_idle = 1s
        assert (await open_session(http, url, keys["a1"])).status_code == 200


async def test_a_session_answers_only_the_key_that_opened_it(limited: tuple[str, Any]) -> None:
    url, keys = limited
    async with httpx.AsyncClient(timeout=10) as http:
        session_id = (await open_session(http, url, keys["a1"])).headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        foreign = await http.post(
            url,
            json=ping,
            headers={**HEADERS, "mcp-session-id": session_id, "Authorization": f"Bearer {keys['b']}"},
        )
        assert foreign.status_code == 404
