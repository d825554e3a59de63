"""The MCP front tests' gateway and its URL: one home for `gateway` and `url`.

`gateway` is the test server and the Python backend; a module whose subject needs another config
defines its own `gateway`, and `url` serves whichever the module has.
"""

from __future__ import annotations

import pytest

from support.configs import python_backend, stdio_backend
from support.fixtures import OpenGateway, ServeGateway
from toolweave import Gateway


@pytest.fixture
async def gateway(open_gateway: OpenGateway) -> Gateway:
    """tests/servers/testserver.py (`ts`) and the in-process Python backend (`py`), started."""
    return await open_gateway({"backends": [stdio_backend(), python_backend()]})


@pytest.fixture
async def url(gateway: Gateway, serve_gateway: ServeGateway) -> str:
    """The module's `gateway` behind the MCP front under uvicorn on loopback: its `/mcp` URL."""
    return await serve_gateway(gateway)
