"""Every way of revoking a key ends what it holds open within seconds: its federated clients and its
MCP sessions — also `toolweave keys revoke` run beside a gateway on SQLite, which has no change feed
to tell it (before, its federated client kept serving calls for as long as it stayed connected)."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx

from support.api import AppFactory
from support.configs import python_backend
from support.federation import raw_client, tool
from support.paths import TOOLWEAVE
from support.processes import subprocess_env
from support.serving import serve_asgi
from toolweave.backends.federated import protocol
from toolweave.store import Database, KeyRepository

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "r", "version": "1"},
    },
}


async def open_session(http: httpx.AsyncClient, url: str, key: str) -> dict[str, str]:
    """An initialized handshake-era session; the headers that use it."""
    opened = await http.post(url, json=INIT, headers={**HEADERS, "Authorization": f"Bearer {key}"})
    assert opened.status_code == 200, opened.text
    headers = {
        **HEADERS,
        "Authorization": f"Bearer {key}",
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    done = await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert done.status_code == 202, done.text
    return headers


async def stream_ends(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], ready: asyncio.Event
) -> float:
    """Hold the session's GET stream open; when it ended (monotonic seconds)."""
    async with http.stream("GET", url, headers={**headers, "Accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200
        ready.set()
        with contextlib.suppress(httpx.ReadError, httpx.RemoteProtocolError):  # ended, cleanly or not
            async for _chunk in stream.aiter_bytes():
                pass
    return time.monotonic()


async def test_keys_revoke_on_sqlite_ends_federated_clients_and_mcp_sessions(sqlite_app: AppFactory) -> None:
    patient = {"heartbeat_interval": 60, "heartbeat_timeout": 120}  # the raw client answers no pings
    raw = {"backends": [python_backend()], "federation": patient, "gateway": {"sync_interval": 0.2}}
    api = await sqlite_app(raw, require_auth=True)
    federate = await api.key("acme", "tools:federate")
    reader = await api.key("acme", "tools:read")
    bystander = await api.key("acme", "tools:read")
    ids = {key: (await api.runtime.keys.verify(key)).id for key in (federate, reader)}
    assert api.runtime.sync is None  # SQLite without Redis: no change feed
    await api.runtime.close()  # served again below, with the lifespan (the MCP session managers)
    async with serve_asgi(api.app) as base, httpx.AsyncClient(timeout=30) as http:
        url = f"{base}/mcp"
        async with raw_client(base, federate, "crm") as client:
            assert (await client.register([tool("lookup")]))["accepted"]
            session = await open_session(http, url, reader)
            other = await open_session(http, url, bystander)
            ready = asyncio.Event()
            streaming = asyncio.create_task(stream_ends(http, url, session, ready))
            await asyncio.wait_for(ready.wait(), 10)

            # the CLI, as an operator runs it beside the gateway; the second key the way the CLI does
            # it (another process's write to the database), without paying a second start-up
            revoke = await asyncio.create_subprocess_exec(
                str(TOOLWEAVE), "keys", "revoke", ids[federate], "--database", api.url,
                env=subprocess_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            _out, err = await revoke.communicate()
            assert revoke.returncode == 0, err.decode()
            elsewhere = Database.from_url(api.url)
            await elsewhere.start()
            try:
                await KeyRepository(elsewhere).revoke(ids[reader])
            finally:
                await elsewhere.close()
            revoked_at = time.monotonic()

            assert await client.closed(10.0) == (protocol.UNAUTHORIZED, "the API key was revoked")
            ended_at = await asyncio.wait_for(streaming, 10)  # before: open until the session idled out
            assert ended_at - revoked_at < 10
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert (await http.post(url, json=ping, headers=session)).status_code in (401, 404)
        assert (await http.post(url, json=ping, headers=other)).status_code == 200  # another key: untouched
