"""ASGI assembly: MCP at `/mcp`, the REST API under `/api/v1`, metrics, and the gateway's lifespan."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount, Route

from toolweave.gateway import Gateway
from toolweave.server.mcp_front import MCPFront


def create_app(
    gateway: Gateway,
    *,
    host: str = "127.0.0.1",
    extra_routes: list[Any] | None = None,
    json_response: bool = False,
    start_gateway: bool = True,
    on_startup: Any = None,
    on_shutdown: Any = None,
    middleware: list[Any] | None = None,
) -> Starlette:
    """The whole HTTP surface of one gateway.

    `start_gateway=False` when the caller has already started it (tests, `serve`
    that prints the backend table before binding).
    """
    front = MCPFront(gateway)
    mcp_app = front.server.streamable_http_app(
        streamable_http_path="/mcp", json_response=json_response, host=host
    )
    session_manager = front.server.session_manager

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if start_gateway:
            await gateway.start()
        if on_startup is not None:
            await on_startup(app)
        try:
            async with session_manager.run():
                yield
        finally:
            await front.close()
            if on_shutdown is not None:
                await on_shutdown(app)
            if start_gateway:
                await gateway.stop()

    mcp_route = next(route for route in mcp_app.routes if getattr(route, "path", None) == "/mcp")
    routes: list[Route | Mount] = [mcp_route, *(extra_routes or [])]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware or [])
    app.state.gateway = gateway
    app.state.front = front
    return app
