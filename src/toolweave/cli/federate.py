"""`toolweave federate`: connect a local stdio MCP server out to a gateway as federated tools."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from toolweave.cli.common import err, print_problem

if TYPE_CHECKING:  # imported by the command itself, not by --help
    from toolweave.backends.federated.bridge import StdioBridge


def federate(
    command: Annotated[list[str], typer.Argument(help="The stdio MCP server to run, after --.")],
    gateway: Annotated[
        str, typer.Option("--gateway", "-g", help="The gateway's URL, e.g. https://gw.example.com.")
    ],
    key: Annotated[
        str | None,
        typer.Option("--key", "-k", envvar="TOOLWEAVE_KEY", help="API key with the tools:federate scope."),
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="Namespace of the tools (default: from the command's name)."),
    ] = None,
    toolkit: Annotated[str | None, typer.Option("--toolkit", help="A toolkit name shown in traces.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log every connection event.")] = False,
) -> None:
    """Serve a local MCP server's tools through a gateway; they run here, with this machine's access.

    Example: toolweave federate --gateway http://127.0.0.1:8080 --key tw_... -- mcp-server-time
    """
    from toolweave.backends.errors import FederationRefused
    from toolweave.backends.federated.bridge import StdioBridge

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")
    logging.getLogger("toolweave.federation").setLevel(logging.INFO)
    chosen = namespace or _namespace_from(command[0])
    try:
        bridge = StdioBridge(gateway, key, command, namespace=chosen, toolkit=toolkit)
    except ValueError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        raise typer.Exit(2) from None
    err.print(
        f"federating [bold]{escape(' '.join(command))}[/] as namespace [bold]{chosen}[/] → {escape(bridge.url)}"
    )
    try:
        import asyncio

        asyncio.run(_run(bridge))
    except FederationRefused as refused:
        err.print(f"[bold red]refused[/] ({refused.code}): {escape(refused.reason)}", soft_wrap=True)
        for problem in refused.problems:
            print_problem(f"{problem.get('path') or '(manifest)'}: {problem.get('message')}")
        raise typer.Exit(2) from None


async def _run(bridge: StdioBridge) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, bridge.stop)
    await bridge.run()


def _namespace_from(program: str) -> str:
    """`mcp-server-time` → `mcp-server-time`; `/opt/My Tools/run.py` → `run-py` (a valid namespace)."""
    name = re.sub(r"[^a-z0-9_-]+", "-", os.path.basename(program).lower()).strip("-_")
    return (name or "federated")[:32]
