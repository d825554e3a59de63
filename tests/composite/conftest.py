"""The composite end-to-end modules' MCP front: one home for `mcp_url`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from support.serving import serve_mcp
from toolweave import Gateway


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def mcp_url(gateway: Gateway) -> AsyncIterator[str]:
    """The module's `gateway` (its own config, started once per module) behind the MCP front over
    streamable HTTP, for the module."""
    async with serve_mcp(gateway) as url:
        yield url
