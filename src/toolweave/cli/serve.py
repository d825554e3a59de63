"""`toolweave serve`: MCP over streamable HTTP (with the REST API) or stdio."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer
from rich.markup import escape

from toolweave.cli.common import ConfigOption, err, load_config_or_exit, print_backends
from toolweave.config.models import Config


def serve(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default: gateway.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: gateway.port).")] = None,
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Serve MCP over stdin/stdout instead of HTTP.")
    ] = False,
    auth: Annotated[bool, typer.Option("--auth", help="Require API keys (Authorization: Bearer).")] = False,
    log_json: Annotated[
        bool, typer.Option("--log-json", help='Log JSON lines (same as gateway.log_format = "json").')
    ] = False,
) -> None:
    """Run the gateway: MCP at /mcp (or stdio), the REST API at /api/v1, the web UI at /."""
    cfg = load_config_or_exit(config)
    if stdio:
        _serve_logging(cfg, log_json)
        asyncio.run(_serve_stdio(cfg))
        return
    from toolweave.server.hosts import is_loopback_bind

    bind = host or cfg.gateway.host
    require_auth = auth or cfg.auth.required
    if not require_auth and not is_loopback_bind(bind):
        err.print(
            f"[red]refusing to serve {bind} without authentication.[/] Anyone who can reach it could call "
            "every tool. Enable API keys with [bold]--auth[/] (or auth.required = true) and create one with "
            "[bold]toolweave keys create[/], or bind 127.0.0.1."
        )
        raise typer.Exit(2)
    _serve_logging(cfg, log_json)
    from toolweave.store import StoreError

    try:
        asyncio.run(_serve_http(cfg, bind, port if port is not None else cfg.gateway.port, require_auth))
    except (StoreError, ValueError, OSError) as error:  # an unreachable database: say so, no traceback
        err.print(f"[red]cannot start:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _serve_logging(cfg: Config, log_json: bool) -> None:
    """Text or JSON lines on stderr; connection secrets are scrubbed from both."""
    from toolweave.services.logs import configure_logging

    configure_logging(cfg.gateway.log_level, json_lines=log_json or cfg.gateway.log_format == "json")


async def _serve_http(cfg: Config, host: str, port: int, require_auth: bool) -> None:
    import uvicorn

    from toolweave.server.app import build_http_app

    app, gateway = await build_http_app(cfg, host=host, require_auth=require_auth)
    print_backends(gateway.describe_backends(), err)
    err.print(f"toolweave {len(gateway.list_tools())} tools · MCP at [bold]http://{host}:{port}/mcp[/]")
    if cfg.ui.enabled:
        err.print(f"web UI at [bold]http://{host}:{port}/[/] · API docs at http://{host}:{port}/docs")
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            http="httptools",
            # the federation endpoint refuses a frame over the limit with its own reason; this bounds the rest
            ws_max_size=2 * cfg.federation.max_frame_bytes,
        )
    )
    await server.serve()


async def _serve_stdio(cfg: Config) -> None:
    from mcp.server.stdio import stdio_server

    from toolweave.gateway import Gateway
    from toolweave.server.mcp.front import MCPFront

    runs = await open_run_store_or_warn(cfg)
    gateway = Gateway(cfg, runs=runs)  # backends' stderr: log records (backends/stderr.py)
    try:
        await gateway.start()
        print_backends(gateway.describe_backends(), err)
        front = MCPFront(gateway)
        try:
            async with stdio_server() as (read, write):
                await front.server.run(read, write, front.server.create_initialization_options())
        finally:
            await front.close()
            await gateway.stop()
    finally:
        if runs is not None:
            await runs.close()


async def open_run_store_or_warn(cfg: Config) -> Any:
    """The database's run store; a one-shot command still works (runs kept in memory) when it cannot be opened."""
    try:
        from toolweave.services.runtime import open_run_store
        from toolweave.store import StoreError
    except ImportError:
        return None
    try:
        return await open_run_store(cfg)
    except (StoreError, ValueError, OSError) as error:
        err.print(
            f"[yellow]warning:[/] runs are not recorded: {escape(str(error))}",
            highlight=False,
            soft_wrap=True,
        )
        return None
