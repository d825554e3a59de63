"""`toolweave export`: tool definitions in an agent framework's format (composites with their mini-prompts)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated

import typer
from rich.markup import escape

from toolweave.cli.common import ConfigOption, err, load_config_or_exit, quiet_logging
from toolweave.export import FORMATS


def export_command(
    name: Annotated[str | None, typer.Argument(help="The tool's exposed name (or use --all).")] = None,
    format: Annotated[str, typer.Option("--format", "-f", help=f"One of: {', '.join(FORMATS)}.")] = "mcp",
    all_tools: Annotated[bool, typer.Option("--all", help="Every tool the gateway serves.")] = False,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Include this tenant's API-defined tools.")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Print tool definitions as JSON in an agent framework's format (composites with their mini-prompts)."""
    if format not in FORMATS:
        err.print(f"[red]unknown format {escape(format)!r}[/]; valid formats: {', '.join(FORMATS)}")
        raise typer.Exit(2)
    if (name is None) == (not all_tools):
        err.print("[red]give a tool NAME or --all[/] (not both)")
        raise typer.Exit(2)

    cfg = load_config_or_exit(config)
    quiet_logging("error")
    from toolweave.services.offline import export_offline

    try:
        exported = asyncio.run(export_offline(cfg, name, format, tenant))
    except LookupError as error:
        err.print(f"[red]{escape(str(error))}[/]", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    json.dump(exported if name is None else exported[0], sys.stdout, indent=2, ensure_ascii=False)
    print()
