"""Tenant backend sessions opened with a tenant's own connection (`services.connections`)."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.configs import config, http_backend
from support.processes import header_server
from toolweave.backends.mcp import MCPBackend
from toolweave.executor import Session
from toolweave.services.connections import TenantBackends
from toolweave.store import ConnectionRepository, Database, SecretBox

TOKEN = "tenant-token-for-the-drain-test"


@pytest.fixture
def header_url() -> Iterator[str]:
    with header_server() as url:
        yield url


async def test_a_replaced_session_finishes_the_calls_it_is_serving(header_url: str, tmp_path: Path) -> None:
    """A connection changing mid-call (e.g. seen late by another gateway's poll) must not fail that call."""
    db = Database.from_url(f"sqlite:///{tmp_path / 'toolweave.db'}")
    await db.start()
    shared = MCPBackend(config(http_backend("hdr", header_url)).backends[0])
    await shared.start()
    connections = ConnectionRepository(db, SecretBox("drain-test-key", "tests"))
    resolver = TenantBackends(connections)
    try:
        assert await shared.wait_ready(20)
        await connections.put("alice", "hdr", {"X-Token": TOKEN})
        own = await resolver(shared, Session(tenant="alice"))
        assert own is not shared

        call = asyncio.create_task(own.call_tool("whoami_slowly", {"seconds": 1.0}))
        await asyncio.sleep(0.3)  # the call is in flight on alice's session
        resolver.forget("alice", "hdr")  # her connection changed: that session is replaced
        result = await call

        assert not result.is_error, result
        assert result.structured_content["token"] == hashlib.sha256(TOKEN.encode()).hexdigest()[:12]
        await asyncio.wait_for(asyncio.gather(*resolver._closing), 10)
        assert own.status == "stopped"  # and once drained, it is closed
    finally:
        await resolver.close()
        await shared.stop()
        await db.close()


class _Connections:
    """Every tenant has a connection to every backend (the resolver only asks for it)."""

    async def get(self, tenant: str | None, backend: str) -> dict[str, str]:
        return {"X-Token": f"{tenant}-{backend}"}


class _HttpApi:
    """An HTTP API backend as the resolver sees it: `connection_view` makes a tenant's view."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.config = config(http_backend(name, "http://127.0.0.1:9/mcp")).backends[0]
        self.views = 0

    def connection_view(self, headers: dict[str, str], label: str) -> object:
        self.views += 1
        return _View()


class _View:
    async def stop(self) -> None:
        return None


async def test_a_redefined_backend_drops_every_tenants_session_to_it() -> None:
    """An edit of a backend in the UI (`ManagedBackends`) must not leave tenants on the old definition."""
    resolver = TenantBackends(_Connections())  # type: ignore[arg-type]
    edited, other = _HttpApi("edited"), _HttpApi("other")
    for tenant in ("alice", "bob"):
        for backend in (edited, other):
            await resolver(backend, Session(tenant=tenant))  # type: ignore[arg-type]
    assert sorted(resolver.opened()) == [
        ("alice", "edited"),
        ("alice", "other"),
        ("bob", "edited"),
        ("bob", "other"),
    ]
    resolver.forget_backend("edited")
    assert sorted(resolver.opened()) == [("alice", "other"), ("bob", "other")]
    await resolver(edited, Session(tenant="alice"))  # type: ignore[arg-type]
    assert edited.views == 3 and other.views == 2  # alice's is opened again, from the new definition
    await resolver.close()
