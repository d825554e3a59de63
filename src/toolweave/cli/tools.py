"""`toolweave tools` and `toolweave call`: the gateway in this process, for one listing or one call."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolweave.cli.common import ConfigOption, JsonOption, err, load_config_or_exit, out, quiet_logging
from toolweave.cli.serve import open_run_store_or_warn


def tools(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """List every tool the gateway serves."""
    cfg = load_config_or_exit(config)
    quiet_logging("error")

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
    cfg = load_config_or_exit(config)
    quiet_logging("error")

    async def run() -> Any:
        from toolweave.gateway import Gateway

        runs = await open_run_store_or_warn(cfg)
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
