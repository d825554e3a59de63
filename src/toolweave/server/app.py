"""ASGI assembly: MCP at `/mcp`, the REST API under `/api/v1`, `/openapi.json`, `/docs`, `/metrics`,
auth, and the lifespan that starts and stops what they serve."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from toolweave.config.models import Config
from toolweave.gateway import Gateway
from toolweave.server.api.rest import build_api
from toolweave.server.auth import AuthMiddleware, key_label
from toolweave.server.bodies import BodyLimitMiddleware
from toolweave.server.federation import federation_route
from toolweave.server.health import health_routes
from toolweave.server.hosts import HostOriginMiddleware, HostRules
from toolweave.server.identity import identity_parts
from toolweave.server.mcp.endpoint import build_endpoint
from toolweave.server.mcp.front import MCPFront
from toolweave.server.mcp.sessions import SessionQuota
from toolweave.server.mcp.shared import SessionSharing
from toolweave.server.mcp.shared_db import DatabaseSessionSharing
from toolweave.server.mcp.virtual import VirtualEndpoints
from toolweave.server.oauth_callback import callback_route
from toolweave.server.ui import ui_routes
from toolweave.services.change_feed import feed_identity
from toolweave.services.runtime import ServerRuntime
from toolweave.store import ApiKeyInfo
from toolweave.wire.transport import ExchangeEnd

FREEZE_AFTER = 1.0
"""Seconds after start-up that the start-up heap is collected and frozen (`_freeze_startup_heap`)."""


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
    federation: Any = None,
    sharing: SessionSharing | None = None,
) -> Starlette:
    """The whole HTTP surface of one gateway.

    `start_gateway=False` when the caller has already started it (tests, `serve`
    that prints the backend table before binding). `federation`: the WebSocket route
    of federated clients (default: without keys, every client is the local operator).

    With `json_response=False` (the default) a 2026-07-28 request that cannot receive
    notifications is still answered with plain JSON (`ModernJsonRouter`); requests that
    can (progress, log messages, `subscriptions/listen`) and every handshake-era
    request take the SDK's SSE-capable path. `json_response=True` answers JSON always.

    `sharing`: handshake-era MCP sessions are shared with the other replicas over Redis or PostgreSQL
    (any replica serves any session; `server/mcp/shared.py`, `shared_db.py`).
    """
    front = MCPFront(gateway)
    limits = gateway.config.limits
    main = build_endpoint(front, limits, host=host, json_response=json_response, sharing=sharing)
    managers = main.managers
    virtual = VirtualEndpoints(
        gateway, limits, host=host, json_response=json_response, local=front.default_session, sharing=sharing
    )
    quota = SessionQuota(
        _McpPaths(main.app, virtual),
        limits,
        live=lambda sid: main.is_open(sid) or virtual.is_open(sid),
        shared=sharing,
    )
    mcp_route = Route("/mcp", endpoint=ExchangeEnd(quota))
    servers_route = Route("/servers/{name}/mcp", endpoint=ExchangeEnd(quota))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if start_gateway:
            await gateway.start()
        if on_startup is not None:
            await on_startup(app)
        try:
            async with contextlib.AsyncExitStack() as stack:
                for manager in managers:
                    await stack.enter_async_context(manager.run())
                if sharing is not None:
                    await sharing.start()
                    stack.push_async_callback(sharing.close)
                # after the first requests can be answered: a full collection of the startup heap
                # takes 0.1-0.2 s, which listening need not wait for
                freezing = asyncio.get_running_loop().call_later(FREEZE_AFTER, _freeze_startup_heap)
                stack.callback(gc.unfreeze)
                stack.callback(freezing.cancel)
                yield
        finally:
            await virtual.close()
            await front.close()
            if on_shutdown is not None:
                await on_shutdown(app)
            if start_gateway:
                await gateway.stop()

    federation_socket = federation if federation is not None else federation_route(gateway)
    routes: list[Any] = [mcp_route, servers_route, federation_socket, *(extra_routes or [])]
    settings = gateway.config.gateway
    guard = Middleware(
        HostOriginMiddleware,
        rules=HostRules.for_bind(host, settings.allowed_hosts, settings.allowed_origins),
    )
    bodies = Middleware(BodyLimitMiddleware, max_bytes=limits.max_body_bytes)
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[guard, bodies, *(middleware or [])],
        exception_handlers={404: _no_route},
    )
    app.state.gateway = gateway
    app.state.front = front
    app.state.virtual = virtual

    async def end_sessions(tenant: str, label: str) -> int:
        """End every MCP session one key opened (on `/mcp` or a virtual server): it was revoked."""
        ended = 0
        for session_id in quota.held_by(tenant, label):
            ended += await main.end(session_id) or await virtual.end(session_id)
        if sharing is not None:  # and no replica adopts them any more; those holding copies end them
            held = await sharing.held(tenant)
            for session_id in (held or {}).get(label, []):
                await sharing.forget(session_id)
        return ended

    app.state.end_sessions = end_sessions
    return app


class _McpPaths:
    """`/mcp` to the whole catalog's endpoint, `/servers/{name}/mcp` to the virtual servers' (behind
    one session quota, so a key's sessions count together wherever it opened them)."""

    def __init__(self, main: Any, virtual: VirtualEndpoints) -> None:
        self.main = main
        self.virtual = virtual

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("path_params"):
            await self.virtual(scope, receive, send)
        else:
            await self.main(scope, receive, send)


def _freeze_startup_heap() -> None:
    """Move everything alive after startup out of the garbage collector's generations.

    The served gateway's heap (the SDK, pydantic schemas, SQLAlchemy, the catalog) is a
    few hundred thousand objects; every full collection walked all of them, 50-150 ms
    each, several times a second under load (they showed up as p95 stalls at c=8).
    Frozen, a full collection only walks what was allocated since. Unfrozen on shutdown,
    so an app started and stopped in a longer-lived process (tests) leaves nothing pinned.

    `toolweave serve` runs its start-up (imports, building the app) with the collector off
    (`cli/serve.py`): it only allocates, and the collections it triggered cost 15-20% of it.
    The collector is back on from here.
    """
    gc.collect()
    gc.freeze()
    gc.enable()


def server_app(
    config: Config | None = None,
    *,
    runtime: ServerRuntime | None = None,
    host: str = "127.0.0.1",
    require_auth: bool = False,
    start_runtime: bool = True,
    json_response: bool = False,
    public_url: str | None = None,
) -> Starlette:
    """The whole HTTP surface of a served gateway: `/mcp`, `/api/v1`, `/openapi.json`, `/docs`, `/metrics`,
    and the web UI at `/` (unless `[ui] enabled = false`).

    Give the config (a runtime is built for it) or a runtime. With `start_runtime`
    (the default) the app's lifespan opens the database, starts the gateway and loads
    stored definitions, and undoes it all on shutdown; pass `start_runtime=False` with
    a runtime that is already started (the CLI starts it first, to print the backend
    table before binding).

    `public_url`: how clients reach this gateway, for OAuth (default: `gateway.public_url`, else
    `http://host:gateway.port`).
    """
    if runtime is None:
        if config is None:
            raise TypeError("server_app needs a config or a runtime")
        runtime = ServerRuntime(config, require_auth=require_auth)
    rt = runtime

    identity = identity_parts(rt.config, host, public_url, lambda: rt.db)

    async def startup(_app: Any) -> None:
        if start_runtime:
            await rt.start()
        if identity.proxy is not None:
            await identity.proxy.authority.ready()

    async def shutdown(_app: Any) -> None:
        await rt.close()
        await identity.close()

    auth = Middleware(
        AuthMiddleware,
        required=rt.require_auth,
        cache=lambda: rt.key_cache if rt.started else None,
        tokens=identity.tokens,
        resource=identity.resource,
    )
    app = create_app(
        rt.gateway,
        host=host,
        json_response=json_response,
        start_gateway=False,
        extra_routes=[
            *health_routes(rt),
            *identity.routes,
            callback_route(rt.gateway),
            *ui_routes(rt, identity.tokens, identity.public_url),
            Mount("/", app=build_api(rt)),
        ],
        middleware=[auth]
        if rt.tracing is None
        else [Middleware(rt.tracing.middleware_class, tracing=rt.tracing), auth],
        federation=federation_route(
            rt.gateway, require_auth=rt.require_auth, keys=lambda: rt.key_cache if rt.started else None
        ),
        on_startup=startup,
        on_shutdown=shutdown,
        sharing=_sharing(rt),
    )
    app.state.runtime = rt
    app.state.identity = identity

    async def end_key_sessions(info: ApiKeyInfo) -> None:
        await app.state.end_sessions(info.tenant, key_label(info))

    rt.key_revoked_listeners.append(end_key_sessions)
    return app


def _sharing(runtime: ServerRuntime) -> SessionSharing | None:
    """MCP sessions are shared by every gateway on the same database: over `gateway.redis_url`, else
    through the database when it is PostgreSQL (`shared_db.py`); a SQLite gateway keeps its own."""
    config = runtime.config
    if not config.gateway.redis_url:
        if runtime.db.dialect != "postgresql":
            return None
        return DatabaseSessionSharing(runtime.db, idle_seconds=config.limits.mcp_session_idle)
    return SessionSharing(
        config.gateway.redis_url,
        f"toolweave:mcp:{feed_identity(runtime.db)}",
        idle_seconds=config.limits.mcp_session_idle,
    )


async def build_http_app(
    cfg: Config,
    *,
    host: str,
    require_auth: bool = False,
    wait_for_backends: bool = True,
    public_url: str | None = None,
) -> tuple[Any, Gateway]:
    """For `toolweave serve`: the runtime started now (database, stored definitions and, with
    `wait_for_backends`, every backend's first connection attempt), served later."""
    runtime = ServerRuntime(cfg, require_auth=require_auth, wait_for_backends=wait_for_backends)
    await runtime.start()
    app = server_app(runtime=runtime, host=host, start_runtime=False, public_url=public_url)
    return app, runtime.gateway


async def _no_route(request: Request, _error: Exception) -> JSONResponse:
    """A path no route takes (one with a newline escapes every route's pattern) gets the REST error shape.

    Starlette's own answer is a text/plain 404, which no client of the documented API expects.
    """
    path = request.url.path
    shown = path if len(path) <= 200 else path[:200] + "..."
    return JSONResponse(
        {"error": {"code": "not_found", "message": f"no such path: {shown!r}", "problems": []}},
        status_code=404,
    )
