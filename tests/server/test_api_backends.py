"""`POST /backends/{name}/reconnect`: a fresh connection at once, for the operator (or a tenant's own
backend), refused for anyone else; and `lastErrorAt` says when a backend last failed."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from support.api import AppFactory
from support.configs import stdio_backend

API = "/api/v1"
IN_PROCESS = pytest.mark.usefixtures("in_process_testserver")
"""The test server in this process: a reconnect loads a fresh copy of it, as a fresh child would be.
Not for the test whose second ask must come while the first is still stopping the old child."""


async def _until_connected(client, name: str) -> dict:  # type: ignore[no-untyped-def]
    for _ in range(200):
        found = next(b for b in (await client.get(f"{API}/backends")).json()["backends"] if b["name"] == name)
        if found["status"] == "connected":
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"backend {name} did not reconnect: {found}")


@IN_PROCESS
async def test_reconnect_starts_a_fresh_connection(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [stdio_backend()]})
    async with api.client() as client:
        bumped = await client.post(f"{API}/tools/ts__increment/call", json={"by": 5})
        assert bumped.json()["structuredContent"] == {"value": 5}
        answer = await client.post(f"{API}/backends/ts/reconnect")
        assert answer.status_code == 202, answer.text
        assert answer.json()["name"] == "ts" and answer.json()["status"] in ("reconnecting", "connected")
        await _until_connected(client, "ts")
        # a new server process: its process-wide counter starts again from zero
        fresh = await client.post(f"{API}/tools/ts__counter/call", json={})
        assert fresh.json()["structuredContent"] == {"value": 0}


async def test_a_down_backend_reports_when_it_failed_and_unknown_names_are_404(
    sqlite_app: AppFactory,
) -> None:
    api = await sqlite_app(
        {"backends": [{"name": "gone", "url": "http://127.0.0.1:9/mcp", "connect_timeout": 2}]}
    )
    async with api.client() as client:
        listed = (await client.get(f"{API}/backends")).json()["backends"][0]
        assert listed["status"] != "connected" and listed["lastError"]
        first = datetime.fromisoformat(listed["lastErrorAt"])
        answer = await client.post(f"{API}/backends/gone/reconnect")
        assert answer.status_code == 202
        for _ in range(100):  # the new attempt fails too, and says so with a newer time
            again = (await client.get(f"{API}/backends")).json()["backends"][0]
            if again["lastErrorAt"] and datetime.fromisoformat(again["lastErrorAt"]) > first:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the reconnect attempt left no newer error")
        missing = await client.post(f"{API}/backends/nope/reconnect")
        assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]


@IN_PROCESS
async def test_reconnect_needs_the_admin_scope(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [stdio_backend()]}, require_auth=True)
    backend = api.gateway.backends["ts"]
    before = backend.connected_at
    reader = await api.key("alice", "tools:read", "tools:call")
    admin = await api.key("alice", "tools:admin", "tools:read")
    async with api.client(reader) as client:
        refused = await client.post(f"{API}/backends/ts/reconnect")
        assert refused.status_code == 403 and "tools:admin" in refused.json()["error"]["message"]
    assert backend.connected_at == before  # nothing was dropped
    async with api.client(admin) as client:
        assert (await client.post(f"{API}/backends/ts/reconnect")).status_code == 202
        await _until_connected(client, "ts")
    assert backend.connected_at is not None and before is not None and backend.connected_at > before


@IN_PROCESS
async def test_a_tenant_cannot_keep_dropping_a_shared_backend(sqlite_app: AppFactory) -> None:
    """A reconnect fails every call in flight on a shared backend: a tenant's key may force one at
    most every 30 s (429 with Retry-After); asking while an attempt is under way restarts nothing."""
    api = await sqlite_app({"backends": [stdio_backend()]}, require_auth=True)
    backend = api.gateway.backends["ts"]
    alice = await api.key("alice", "tools:admin", "tools:read")
    bob = await api.key("bob", "tools:admin", "tools:read")
    async with api.client(alice) as a, api.client(bob) as b:
        assert (await a.post(f"{API}/backends/ts/reconnect")).status_code == 202
        await _until_connected(a, "ts")
        connected_at = backend.connected_at
        again = await b.post(f"{API}/backends/ts/reconnect")
        assert again.status_code == 429, again.text
        assert 0 < int(again.headers["retry-after"]) <= 30
        assert "a tenant may reconnect it again in" in again.json()["error"]["message"]
        assert backend.connected_at == connected_at and backend.status == "connected"  # nothing dropped


async def test_asking_again_while_reconnecting_restarts_nothing(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [stdio_backend()]})
    backend = api.gateway.backends["ts"]
    async with api.client() as client:
        first, second = await asyncio.gather(
            client.post(f"{API}/backends/ts/reconnect"), client.post(f"{API}/backends/ts/reconnect")
        )
        assert first.status_code == second.status_code == 202
        await _until_connected(client, "ts")
        assert backend.reconnects == 1  # the second ask found the first under way
