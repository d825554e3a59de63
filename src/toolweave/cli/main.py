"""The `toolweave` command: parse, call the library, print. Nothing else lives here."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolweave.config.loader import default_config_path, load_config
from toolweave.config.models import Config
from toolweave.problems import ConfigError

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
    typer.Option(
        "--config", "-c", help="Config file (TOML or YAML). Default: $TOOLWEAVE_CONFIG or ./toolweave.toml"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _load(path: Path | None) -> Config:
    try:
        return load_config(path)
    except ConfigError as error:
        source = escape(str(error.source or default_config_path()))
        err.print(f"[bold red]{len(error.issues)} problem(s)[/] in {source}:", soft_wrap=True)
        for issue in error.issues:
            _print_problem(issue)
        raise typer.Exit(1) from None


def _print_problem(problem: object) -> None:
    """One problem per line, verbatim: messages quote user input (`re:[a-z]`), which is not markup."""
    err.print(f"  [red]•[/] {escape(str(problem))}", highlight=False, soft_wrap=True)


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
    stdio: Annotated[
        bool, typer.Option("--stdio", help="Serve MCP over stdin/stdout instead of HTTP.")
    ] = False,
    auth: Annotated[bool, typer.Option("--auth", help="Require API keys (Authorization: Bearer).")] = False,
    log_json: Annotated[
        bool, typer.Option("--log-json", help='Log JSON lines (same as gateway.log_format = "json").')
    ] = False,
) -> None:
    """Run the gateway: MCP at /mcp (or stdio), the REST API at /api/v1."""
    cfg = _load(config)
    if stdio:
        _serve_logging(cfg, log_json)
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
    server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", http="httptools")
    )
    await server.serve()


async def _serve_stdio(cfg: Config) -> None:
    from mcp.server.stdio import stdio_server

    from toolweave.gateway import Gateway
    from toolweave.server.mcp.front import MCPFront

    runs = await _run_store(cfg)
    gateway = Gateway(cfg, errlog=sys.stderr, runs=runs)
    try:
        await gateway.start()
        _print_backends(gateway.describe_backends(), err)
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


async def _run_store(cfg: Config) -> Any:
    """The database's run store; a one-shot command still works (runs kept in memory) when it cannot be opened."""
    try:
        from toolweave.server.factory import open_run_store
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
            for backend in gateway.describe_backends():
                if backend["status"] != "connected":  # its tools are missing from the list: say why
                    problem = f"backend {backend['name']!r} is {backend['status']}: {backend['last_error']}"
                    err.print(f"[yellow]warning:[/] {escape(problem)}", highlight=False, soft_wrap=True)
            return gateway.list_tools()

    listed = asyncio.run(run())
    if as_json:
        print(
            json.dumps(
                [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed], indent=2
            )
        )
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
        err.print(f"[red]ARGS_JSON is not valid JSON:[/] {escape(str(error))}", soft_wrap=True)
        raise typer.Exit(2) from None
    if not isinstance(arguments, dict):
        err.print(f"[red]ARGS_JSON must be a JSON object[/], got {type(arguments).__name__}")
        raise typer.Exit(2)
    cfg = _load(config)
    _logging("error")

    async def run() -> Any:
        from toolweave.gateway import Gateway

        runs = await _run_store(cfg)
        try:
            async with Gateway(cfg, runs=runs) as gateway:
                return await gateway.call(name, arguments)
        finally:
            if runs is not None:
                await runs.close()

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
    """Check the config (and, unless --offline, every tool reference against the live backends).

    Every problem is printed at once, each with its path: the file's own
    problems AND those only the live backends reveal (unknown tools, schema
    conflicts, name clashes), checked for every definition that parsed.
    """
    path = config if config is not None else default_config_path()
    cfg, static, paths = _load_for_validation(path)
    problems = [str(issue) for issue in static]
    if cfg is not None and not offline:
        _logging("critical")
        reported = {issue.path for issue in static if issue.path}
        for where, problem in asyncio.run(_connected_problems(cfg, paths)):
            # one problem per path: a definition's own problems come back from the catalog build too,
            # and a reference to an unknown backend is also an unknown tool
            if where not in reported and problem not in problems:
                problems.append(problem)
    if problems:
        err.print(f"[bold red]{len(problems)} problem(s)[/] in {escape(str(path))}:", soft_wrap=True)
        for problem in problems:
            _print_problem(problem)
        raise typer.Exit(1)
    assert cfg is not None
    out.print(
        f"[green]ok[/] {cfg.source}: {len(cfg.backends)} backends, {len(cfg.composite_tools)} composites",
        soft_wrap=True,
    )


def _load_for_validation(path: Path) -> tuple[Config | None, list[Any], list[str]]:
    """(config, its problems, the config path of each composite it holds).

    When the file has problems, the config is still built from every part that
    validated (None when the top level itself is broken), so the live check can
    report the rest in the same run.
    """
    from toolweave.config.loader import _read_document, expand_env, load_composites, parse_config
    from toolweave.problems import ConfigIssue

    issues: list[ConfigIssue] = []
    raw = _read_document(path, issues)
    if not isinstance(raw, Mapping):
        if raw is not None:
            issues.append(ConfigIssue("", "the config must be a table/mapping at the top level"))
        return None, issues, []
    cfg = parse_config(raw, base_dir=path.parent, source=str(path), issues=issues)
    paths: list[str] = []
    entries = expand_env(raw.get("composite_tools", []), "composite_tools", [])
    load_composites(entries, path.parent, [], paths)
    if cfg is not None and len(paths) != len(cfg.composite_tools):  # cannot happen; never mislabel a problem
        paths = [f"composite_tools ({getattr(d, 'name', '?')})" for d in cfg.composite_tools]
    return cfg, issues, paths


_PATH_PREFIX = re.compile(r"^([A-Za-z_$][\w$]*(?:\[\d+\])*(?:\.[A-Za-z_$][\w$]*(?:\[\d+\])*)*): ")
"""A build problem that starts with its path inside the definition (`tools[1]: ...`)."""


async def _connected_problems(cfg: Config, paths: list[str]) -> list[tuple[str | None, str]]:
    """(path, problem) for what only the live backends reveal."""
    from toolweave.gateway import Gateway

    problems: list[tuple[str | None, str]] = []
    async with Gateway(cfg) as gateway:
        for index, backend_config in enumerate(cfg.backends):
            backend = gateway.backends.get(backend_config.name)
            if backend is not None and backend.status != "connected":
                where = f"backends[{index}]"
                problems.append((where, f"{where} ({backend.name}): {backend.last_error or backend.status}"))
        where: dict[str, str] = {}
        for path, definition in zip(paths, cfg.composite_tools, strict=True):
            where.setdefault(getattr(definition, "name", ""), path)
        for issue in gateway.catalog.issues:
            message = issue.message
            if message.startswith("name conflict: composite tool") and "and composite tool" in message:
                continue  # a duplicate composite name: the file check already reported it
            path = where.get(issue.subject)
            prefix = _PATH_PREFIX.match(message)
            if path is None:
                problems.append((None, str(issue)))
            elif prefix is not None:
                problems.append((f"{path}.{prefix.group(1)}", f"{path}.{message}"))
            else:
                problems.append((path, f"{path}: {message}"))
    return problems


def _register_admin_commands() -> None:
    """keys, runs, export: the commands that read or change the database (cli_admin.py)."""
    from toolweave.cli.admin import register

    register(app)


_register_admin_commands()


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
