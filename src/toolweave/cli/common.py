"""What every command shares: the consoles, the options, loading the config (every problem printed),
quiet logging, and the database of a one-shot command."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:  # the config models are imported by the commands that read a config, not by --help
    from toolweave.config.models import Config

T = TypeVar("T")
out = Console(width=None if sys.stdout.isatty() else 4096)
"""Not a terminal (a pipe, a file, a test): tables are never cut at 80 columns, so a key id printed by
`keys list` can be pasted into `keys revoke`."""
err = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Config file (TOML or YAML). Default: $TOOLWEAVE_CONFIG or ./toolweave.toml"
    ),
]


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

DatabaseOption = Annotated[
    str | None, typer.Option("--database", help="Database URL (default: the config's gateway.database).")
]


def load_config_or_exit(path: Path | None) -> Config:
    from toolweave.config.loader import default_config_path, load_config
    from toolweave.problems import ConfigError

    try:
        return load_config(path)
    except ConfigError as error:
        source = escape(str(error.source or default_config_path()))
        err.print(f"[bold red]{len(error.issues)} problem(s)[/] in {source}:", soft_wrap=True)
        for issue in error.issues:
            print_problem(issue)
        raise typer.Exit(1) from None


def print_problem(problem: object) -> None:
    """One problem per line, verbatim: messages quote user input (`re:[a-z]`), which is not markup."""
    err.print(f"  [red]•[/] {escape(str(problem))}", highlight=False, soft_wrap=True)


def quiet_logging(level: str = "warning", stream: Any = None) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.WARNING),
        stream=stream or sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def print_backends(backends: list[dict[str, Any]], console: Console) -> None:
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


def database_url(config: Path | None, database: str | None) -> str:
    if database:
        return database

    return load_config_or_exit(config).gateway.database


def config_redis_url(config: Path | None, database: str | None) -> str:
    """The config's `gateway.redis_url`, so running gateways hear of a revocation at once."""
    if database:
        return ""

    return load_config_or_exit(config).gateway.redis_url


def with_database(url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """Open the database (migrating it), run `work(db)`, always close it; store errors exit 1."""
    from toolweave.store import Database, StoreError

    async def run() -> T:
        db = Database.from_url(url)
        await db.start()
        try:
            return await work(db)
        finally:
            await db.close()

    try:
        import asyncio

        return asyncio.run(run())
    except (StoreError, ValueError) as error:
        err.print(f"[red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def when(value: Any) -> str:
    """A time for a table, in local time: an ISO 8601 string (as the API and `--json` give it), a
    datetime or epoch seconds."""
    from datetime import datetime

    if value is None:
        return ""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, int | float):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    moment: datetime = value
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def json_object_option(text: str, what: str) -> dict[str, Any]:
    """A JSON-object argument of a command (`call`'s ARGS_JSON, `runs resume --args`), named `what`
    in the message; exits 2 when it is not JSON or not an object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        err.print(f"[red]{what} is not valid JSON:[/] {escape(str(error))}", soft_wrap=True)
        raise typer.Exit(2) from None
    if not isinstance(value, dict):
        err.print(f"[red]{what} must be a JSON object[/], got {type(value).__name__}")
        raise typer.Exit(2)
    return value


def print_call_result(result: dict[str, Any]) -> NoReturn:
    """Print a CallToolResult as JSON and exit 1 when it is an error (`call`, `runs resume`)."""
    print(json.dumps(result, indent=2, ensure_ascii=False))
    raise typer.Exit(1 if result.get("isError") else 0)
