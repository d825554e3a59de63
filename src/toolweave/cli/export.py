"""`toolweave export`: tool definitions in an agent framework's format (composites with their mini-prompts)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolweave.cli.common import ConfigOption, err, load_config_or_exit, quiet_logging
from toolweave.cli.running import GatewayError, LocalOption, UrlOption, fail, find_gateway, said_which
from toolweave.export import FORMATS


def export_command(
    name: Annotated[str | None, typer.Argument(help="The tool's exposed name (or use --all).")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")] = "mcp",
    all_tools: Annotated[bool, typer.Option("--all", help="Every tool the gateway serves.")] = False,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Include this tenant's API-defined tools.")
    ] = None,
    server: Annotated[
        str | None,
        typer.Option("--server", help="The tools of this virtual server ([[servers]]), as it names them."),
    ] = None,
    config: ConfigOption = None,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """Print tool definitions as a JSON list in an agent framework's format (composites with their
    mini-prompts): one tool's definition is a list of one."""
    if format not in FORMATS:
        err.print(f"[red]unknown format {escape(format)!r}[/]; valid formats: {', '.join(FORMATS)}")
        raise typer.Exit(2)
    if server is not None and name is None:
        all_tools = True  # --server alone: every tool the server serves
    if (name is None) == (not all_tools):
        err.print("[red]give a tool NAME or --all[/] (not both)")
        raise typer.Exit(2)

    running = find_gateway(config, url, local) if tenant is None else None
    if running is not None:
        said_which(running)
        try:
            if server is not None:
                exported = _named(
                    running.get(f"/api/v1/servers/{server}/export", {"format": format})["tools"], name
                )
            else:
                exported = running.get("/api/v1/export", {"format": format, "name": [name] if name else []})[
                    "tools"
                ]
        except (GatewayError, LookupError) as error:
            fail(error)
    else:
        exported = _exported_here(config, name, format, tenant, local, server)
    json.dump(exported, sys.stdout, indent=2, ensure_ascii=False)
    print()


def _named(tools: list[object], name: str | None) -> list[object]:
    """Only the tool `name` of a server's export (LookupError when it does not serve one)."""
    if name is None:
        return tools
    found = [tool for tool in tools if name in _names_of(tool)]
    if not found:
        raise LookupError(f"the server serves no tool {name!r}")
    return found


def _names_of(tool: object) -> set[str]:
    """The name of an exported tool in any format (`name`, or `function.name` for OpenAI's chat format)."""
    if not isinstance(tool, dict):
        return set()
    function = tool.get("function")
    names = (tool.get("name"), function.get("name") if isinstance(function, dict) else None)
    return {name for name in names if name is not None}


def _exported_here(
    config: Path | None,
    name: str | None,
    format: str,
    tenant: str | None,
    local: bool,
    server: str | None = None,
) -> list[object]:
    cfg = load_config_or_exit(config)
    quiet_logging("error")
    if tenant is None:
        said_which(None, local)
    from toolweave.services.offline import export_offline

    try:
        import asyncio

        return [*asyncio.run(export_offline(cfg, name, format, tenant, server))]
    except LookupError as error:
        err.print(f"[red]{escape(str(error))}[/]", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
