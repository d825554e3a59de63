"""The `toolweave` command: parse, call the library, print. Nothing else lives here."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from toolweave.config.errors import ConfigError
from toolweave.config.loader import default_config_path, load_config
from toolweave.config.models import Config

app = typer.Typer(
    name="toolweave",
    help="A composite tool gateway for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Config file (TOML or YAML). Default: $TOOLWEAVE_CONFIG or ./toolweave.toml"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _load(path: Path | None) -> Config:
    try:
        return load_config(path)
    except ConfigError as error:
        err.print(f"[bold red]{len(error.issues)} problem(s)[/] in {error.source or default_config_path()}:")
        for issue in error.issues:
            err.print(f"  [red]•[/] {issue}", markup=True, highlight=False)
        raise typer.Exit(1) from None


def _logging(level: str = "warning", stream: Any = None) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.WARNING),
        stream=stream or sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


# -- serve -------------------------------------------------------------------


@app.command()
def serve(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(help="Address to bind (default: gateway.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: gateway.port).")] = None,
    stdio: Annotated[bool, typer.Option("--stdio", help="Serve MCP over stdin/stdout instead of HTTP.")] = False,
    auth: Annotated[bool, typer.Option("--auth", help="Require API keys (Authorization: Bearer).")] = False,
) -> None:
    """Run the gateway: MCP at /mcp (or stdio), the REST API at /api/v1."""
    cfg = _load(config)
    if stdio:
        _logging(cfg.gateway.log_level)
        asyncio.run(_serve_stdio(cfg))
        return
    bind = host or cfg.gateway.host
    require_auth = auth or cfg.auth.required
    if not require_auth and not _is_loopback(bind):
        err.print(
            f"[red]refusing to serve {bind} without authentication.[/] Anyone who can reach it could call "
            "every tool. Enable API keys with [bold]--auth[/] (or auth.required = true) and create one with "
            "[bold]toolweave keys create[/], or bind 127.0.0.1."
        )
        raise typer.Exit(2)
    _logging(cfg.gateway.log_level)
    asyncio.run(_serve_http(cfg, bind, port if port is not None else cfg.gateway.port, require_auth))


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _serve_http(cfg: Config, host: str, port: int, require_auth: bool) -> None:
    import uvicorn

    from toolweave.server.factory import build_http_app

    app, gateway = await build_http_app(cfg, host=host, require_auth=require_auth)
    _print_backends(gateway.describe_backends(), err)
    err.print(f"toolweave {len(gateway.list_tools())} tools · MCP at [bold]http://{host}:{port}/mcp[/]")
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    await server.serve()


async def _serve_stdio(cfg: Config) -> None:
    from mcp.server.stdio import stdio_server

    from toolweave.gateway import Gateway
    from toolweave.server.mcp_front import MCPFront

    gateway = Gateway(cfg, errlog=sys.stderr, runs=await _run_store(cfg))
    await gateway.start()
    _print_backends(gateway.describe_backends(), err)
    front = MCPFront(gateway)
    try:
        async with stdio_server() as (read, write):
            await front.server.run(read, write, front.server.create_initialization_options())
    finally:
        await front.close()
        await gateway.stop()


async def _run_store(cfg: Config) -> Any:
    try:
        from toolweave.server.factory import open_run_store
    except ImportError:
        return None
    return await open_run_store(cfg)


def _print_backends(backends: list[dict[str, Any]], console: Console) -> None:
    table = Table(title="backends", title_justify="left")
    for column in ("name", "transport", "status", "tools", "last error"):
        table.add_column(column)
    for backend in backends:
        status = backend["status"]
        color = "green" if status == "connected" else "red"
        table.add_row(
            backend["name"],
            backend["transport"],
            f"[{color}]{status}[/]",
            str(backend["tools"]),
            backend["last_error"] or "",
        )
    console.print(table)


# -- tools, call ---------------------------------------------------------------


@app.command()
def tools(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List every tool the gateway serves."""
    cfg = _load(config)
    _logging("error")

    async def run() -> list[Any]:
        from toolweave.gateway import Gateway

        async with Gateway(cfg) as gateway:
            return gateway.list_tools()

    listed = asyncio.run(run())
    if as_json:
        print(json.dumps([t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed], indent=2))
        return
    table = Table(title=f"{len(listed)} tools", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("description")
    for tool in listed:
        table.add_row(tool.name, (tool.description or "").split("\n")[0][:100])
    out.print(table)


@app.command()
def call(
    name: Annotated[str, typer.Argument(help="Exposed tool name, e.g. github__search")],
    args_json: Annotated[str, typer.Argument(help="Arguments as a JSON object")] = "{}",
    config: ConfigOption = None,
    as_json: JsonOption = True,
) -> None:
    """Call a tool and print the CallToolResult as JSON; exit 1 when it is an error."""
    try:
        arguments = json.loads(args_json)
    except json.JSONDecodeError as error:
        err.print(f"[red]ARGS_JSON is not valid JSON:[/] {error}")
        raise typer.Exit(2) from None
    if not isinstance(arguments, dict):
        err.print(f"[red]ARGS_JSON must be a JSON object[/], got {type(arguments).__name__}")
        raise typer.Exit(2)
    cfg = _load(config)
    _logging("error")

    async def run() -> Any:
        from toolweave.gateway import Gateway

        async with Gateway(cfg, runs=await _run_store(cfg)) as gateway:
            return await gateway.call(name, arguments)

    from toolweave.results import result_to_dict

    result = asyncio.run(run())
    print(json.dumps(result_to_dict(result), indent=2, ensure_ascii=False))
    raise typer.Exit(1 if result.is_error else 0)


# -- validate ------------------------------------------------------------------


@app.command()
def validate(
    config: ConfigOption = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="Check the file only; do not connect to backends.")
    ] = False,
) -> None:
    """Check the config (and, unless --offline, every tool reference against the live backends)."""
    cfg = _load(config)
    if offline:
        out.print(f"[green]ok[/] {cfg.source}: {len(cfg.backends)} backends, {len(cfg.composite_tools)} composites")
        return
    _logging("critical")
    problems = asyncio.run(_connected_problems(cfg))
    if problems:
        err.print(f"[bold red]{len(problems)} problem(s)[/] in {cfg.source}:")
        for problem in problems:
            err.print(f"  [red]•[/] {problem}", highlight=False)
        raise typer.Exit(1)
    out.print(f"[green]ok[/] {cfg.source}: {len(cfg.backends)} backends, {len(cfg.composite_tools)} composites")


async def _connected_problems(cfg: Config) -> list[str]:
    from toolweave.gateway import Gateway

    problems: list[str] = []
    async with Gateway(cfg) as gateway:
        for index, backend_config in enumerate(cfg.backends):
            backend = gateway.backends.get(backend_config.name)
            if backend is not None and backend.status != "connected":
                problems.append(f"backends[{index}] ({backend.name}): {backend.last_error or backend.status}")
        names = {getattr(d, "name", None): i for i, d in enumerate(cfg.composite_tools)}
        for issue in gateway.catalog.issues:
            index = names.get(issue.subject)
            where = f"composite_tools[{index}] ({issue.subject})" if index is not None else issue.subject
            problems.append(f"{where}: {issue.message}")
    return problems


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
