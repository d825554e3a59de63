"""Serving an ASGI app (a gateway's) under uvicorn on loopback: the one way tests run HTTP servers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from support.processes import free_port

START_SECONDS = 20.0
STOP_SECONDS = 15.0


@contextlib.asynccontextmanager
async def serve_asgi(
    app: Any, *, lifespan: str = "on", port: int | None = None, **options: Any
) -> AsyncIterator[str]:
    """`app` on a free loopback port (or `port`) until the block ends; yields its base URL
    (`http://127.0.0.1:PORT`).

    `options` go to `uvicorn.Config` (e.g. `timeout_graceful_shutdown`). Signals stay
    pytest's; a server that stops before it started raises its error here.
    """
    port = port or free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan, **options
    )
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]  # pytest owns signals
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(START_SECONDS):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, STOP_SECONDS)


@contextlib.asynccontextmanager
async def serve_mcp(gateway: Any, **app_options: Any) -> AsyncIterator[str]:
    """The MCP front of a gateway (`create_app`) under uvicorn; yields the `/mcp` URL.

    The gateway is started and stopped by the app's lifespan unless it is already started.
    """
    from toolweave.server.app import create_app

    app_options.setdefault("start_gateway", not gateway.started)
    async with serve_asgi(create_app(gateway, **app_options)) as base:
        yield f"{base}/mcp"
