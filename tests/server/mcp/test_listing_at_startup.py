"""A listing right after start waits for backends still on their first connection attempt (bounded by
gateway.startup_timeout), as a call does: clients that list once and ignore `list_changed` (many agent
frameworks) would otherwise never see the tools of a backend that is only slow to come up."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from mcp import Client

from support.configs import config, python_backend, stdio_backend
from support.serving import serve_asgi
from toolweave.server.app import server_app
from toolweave.services.runtime import ServerRuntime

pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The slow backend in this process: TESTSERVER_START_DELAY is an asyncio sleep there."""

START_DELAY = "2"
"""Seconds the slow backend sleeps before it answers: longer than the listings below take to be sent."""


def slow_runtime(tmp_path: Path, startup_timeout: str) -> ServerRuntime:
    slow = stdio_backend("slow", env={"TESTSERVER_START_DELAY": START_DELAY}, connect_timeout="120s")
    cfg = config(
        slow,
        python_backend(),
        gateway={"database": f"sqlite:///{tmp_path / 'toolweave.db'}", "startup_timeout": startup_timeout},
    )
    return ServerRuntime(cfg, wait_for_backends=False)  # as `toolweave serve`: listen at once


async def mcp_listing(url: str, mode: str) -> set[str]:
    async with Client(url, mode=mode) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


async def rest_listing(base: str) -> set[str]:
    async with httpx.AsyncClient(base_url=base, timeout=60) as api:
        response = await api.get("/api/v1/tools")
        response.raise_for_status()
        return {tool["name"] for tool in response.json()["tools"]}


async def test_every_listing_during_a_first_connection_attempt_waits_for_it(tmp_path: Path) -> None:
    runtime = slow_runtime(tmp_path, "120s")
    async with serve_asgi(server_app(runtime=runtime)) as base:
        assert runtime.gateway.backends["slow"].status == "starting", "the test lists before it is up"
        legacy, modern, rest = await asyncio.gather(
            mcp_listing(f"{base}/mcp", "legacy"),  # 2025-11-25: the SDK middleware's fast path
            mcp_listing(f"{base}/mcp", "auto"),  # 2026-07-28: the plain JSON lane
            rest_listing(base),  # what `toolweave tools` prints through a running gateway
        )
    for listed in (legacy, modern, rest):
        assert {"slow__echo", "py__greet"} <= listed, listed


async def test_the_wait_ends_when_startup_timeout_has_passed_since_start(tmp_path: Path) -> None:
    """A backend slower than startup_timeout is listed without (and announced when it comes up); once
    the timeout has passed since start no listing waits again, however many clients ask."""
    runtime = slow_runtime(tmp_path, "0.1s")
    async with serve_asgi(server_app(runtime=runtime)) as base:
        gateway = runtime.gateway
        listed = await mcp_listing(f"{base}/mcp", "legacy")
        # still starting (as it should be, unless this machine took over 2 s to list): listed without it
        if gateway.backends["slow"].status == "starting":
            assert "slow__echo" not in listed and "py__greet" in listed
        assert not gateway.first_connections_pending()
        assert not await gateway.wait_for_first_connections(), "nothing is waited for after the deadline"
