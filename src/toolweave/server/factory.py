"""Putting a served gateway together from a config: database, run store, stored definitions,
auth, the REST API, metrics and the MCP front, in one ASGI app."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount

from toolweave.config.models import Config
from toolweave.gateway import Gateway
from toolweave.server.app import create_app
from toolweave.server.auth import AuthMiddleware
from toolweave.services.runtime import ServerRuntime
from toolweave.store import Database, SqlRunStore


class OwnedRunStore(SqlRunStore):
    """A run store that owns its database: `close()` closes both (the CLI's one-shot commands)."""

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self._db.close()


async def open_run_store(cfg: Config) -> OwnedRunStore:
    """The database-backed run store of `gateway.database`, started; close it when done."""
    db = Database.from_url(cfg.gateway.database)
    await db.start()
    store = OwnedRunStore(db)
    try:
        await store.start()
    except BaseException:
        await db.close()
        raise
    return store


def server_app(
    gateway: Gateway,
    *,
    host: str = "127.0.0.1",
    require_auth: bool = False,
    runtime: ServerRuntime | None = None,
    start_runtime: bool = True,
    json_response: bool = False,
) -> Starlette:
    """The whole HTTP surface: `/mcp`, `/api/v1`, `/openapi.json`, `/docs`, `/metrics`.

    With `start_runtime` (the default) the app's lifespan opens the database, starts
    the gateway and loads stored definitions, and undoes it all on shutdown; pass
    `start_runtime=False` with a runtime that is already started (the CLI starts it
    first, to print the backend table before binding).
    """
    from toolweave.server.api import build_api

    rt = runtime or ServerRuntime(gateway, require_auth=require_auth)

    async def startup(_app: Any) -> None:
        if start_runtime:
            await rt.start()

    async def shutdown(_app: Any) -> None:
        await rt.close()

    api = build_api(rt)
    auth = Middleware(
        AuthMiddleware, required=rt.require_auth, cache=lambda: rt.key_cache if rt.started else None
    )
    app = create_app(
        gateway,
        host=host,
        json_response=json_response,
        start_gateway=False,
        extra_routes=[Mount("/", app=api)],
        middleware=[auth],
        on_startup=startup,
        on_shutdown=shutdown,
    )
    app.state.runtime = rt
    return app


async def build_http_app(cfg: Config, *, host: str, require_auth: bool = False) -> tuple[Any, Gateway]:
    """For `toolweave serve`: everything started now (so the backend table can be printed), served later."""
    gateway = Gateway(cfg)
    runtime = ServerRuntime(gateway, require_auth=require_auth)
    await runtime.start()
    return server_app(gateway, host=host, runtime=runtime, start_runtime=False), gateway
