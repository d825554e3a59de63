"""`toolweave keys`, `toolweave runs`, `toolweave export`: the commands that read or change the database.

They use the config's `gateway.database` (or `--database URL`, which needs
no config file). Kept apart from `cli.py` so the serving commands stay small;
`register(app)` adds them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from toolweave.export import FORMATS

T = TypeVar("T")
out = Console()
err = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="Config file (TOML or YAML). Default: $TOOLWEAVE_CONFIG or ./toolweave.toml"
    ),
]
DatabaseOption = Annotated[
    str | None, typer.Option("--database", help="Database URL (default: the config's gateway.database).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

keys_app = typer.Typer(help="API keys: create (shown once), list, revoke.", no_args_is_help=True)
runs_app = typer.Typer(help="Run records of composite (and recorded direct) calls.")


def _database_url(config: Path | None, database: str | None) -> str:
    if database:
        return database
    from toolweave.cli.main import _load

    return _load(config).gateway.database


def _redis_url(config: Path | None, database: str | None) -> str:
    """The config's `gateway.redis_url`, so running gateways hear of a revocation at once."""
    if database:
        return ""
    from toolweave.cli.main import _load

    return _load(config).gateway.redis_url


def _with_db(url: str, work: Callable[[Any], Awaitable[T]]) -> T:
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
        return asyncio.run(run())
    except (StoreError, ValueError) as error:
        err.print(f"[red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _when(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, int | float):
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
    return value.strftime("%Y-%m-%d %H:%M:%S")


# -- keys ---------------------------------------------------------------------------------


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key acts for.")],
    scopes: Annotated[
        str, typer.Option("--scopes", help="Comma-separated: tools:read, tools:call, tools:admin.")
    ] = "tools:read,tools:call",
    name: Annotated[str | None, typer.Option("--name", help="A label to tell keys apart.")] = None,
    config: ConfigOption = None,
    database: DatabaseOption = None,
) -> None:
    """Create a key and print it ONCE (only its hash is stored). The key alone goes to stdout."""
    from toolweave.store import KeyRepository

    wanted = [scope.strip() for scope in scopes.split(",") if scope.strip()]
    info, plaintext = _with_db(
        _database_url(config, database), lambda db: KeyRepository(db).create(tenant, wanted, name=name)
    )
    err.print(
        f"created key [bold]{info.id}[/] ({info.prefix}…) for tenant [bold]{escape(info.tenant)}[/] "
        f"with scopes {', '.join(info.scopes)}. It is shown once: store it now.",
        highlight=False,
        soft_wrap=True,
    )
    print(plaintext)


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's keys.")] = None,
    config: ConfigOption = None,
    database: DatabaseOption = None,
    as_json: JsonOption = False,
) -> None:
    """Every key (never the key itself): id, tenant, name, prefix, scopes, last use, revocation."""
    from toolweave.store import KeyRepository

    keys = _with_db(_database_url(config, database), lambda db: KeyRepository(db).list(tenant))
    if as_json:
        rows = [
            {
                "id": k.id,
                "tenant": k.tenant,
                "name": k.name,
                "prefix": k.prefix,
                "scopes": list(k.scopes),
                "createdAt": k.created_at.isoformat(),
                "lastUsedAt": k.last_used_at.isoformat() if k.last_used_at else None,
                "revokedAt": k.revoked_at.isoformat() if k.revoked_at else None,
            }
            for k in keys
        ]
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{len(keys)} keys", title_justify="left")
    for column in ("id", "tenant", "name", "prefix", "scopes", "created", "last used", "revoked"):
        table.add_column(column)
    for k in keys:
        table.add_row(
            k.id,
            escape(k.tenant),
            escape(k.name or ""),
            k.prefix,
            ",".join(k.scopes),
            _when(k.created_at),
            _when(k.last_used_at),
            _when(k.revoked_at),
        )
    out.print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `keys list`).")],
    config: ConfigOption = None,
    database: DatabaseOption = None,
) -> None:
    """Revoke a key now; running gateways sharing the database are told at once (or within `sync_interval`)."""
    from toolweave.store import KeyRepository, NotFound

    redis_url = _redis_url(config, database)

    async def revoke(db: Any) -> Any:
        from toolweave.services.change_feed import Change, announce

        try:
            info = await KeyRepository(db).revoke(key_id)
        except NotFound:
            return None
        await announce(db, Change("key", id=info.id), redis_url=redis_url)
        return info

    info = _with_db(_database_url(config, database), revoke)
    if info is None:
        err.print(f"[red]no API key {escape(key_id)!r}[/]")
        raise typer.Exit(1)
    out.print(f"revoked key {info.id} ({info.prefix}…) of tenant {escape(info.tenant)}", highlight=False)


# -- runs ---------------------------------------------------------------------------------


def _run_dict(record: Any) -> dict[str, Any]:
    from toolweave.server.api.present import run_out

    return run_out(record).model_dump(mode="json")


@runs_app.callback(invoke_without_command=True)
def runs_list(
    ctx: typer.Context,
    tool: Annotated[str | None, typer.Option("--tool", help="Only runs of this tool.")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="completed, failed, running, interrupted, ...")
    ] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's runs.")] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=10_000, help="At most this many, newest first.")
    ] = 20,
    config: ConfigOption = None,
    database: DatabaseOption = None,
    as_json: JsonOption = False,
) -> None:
    """List recent runs, newest first. `toolweave runs show ID` for one run with its steps."""
    if ctx.invoked_subcommand is not None:
        return
    from toolweave.store import SqlRunStore

    records = _with_db(
        _database_url(config, database),
        lambda db: SqlRunStore(db).list_runs(tenant=tenant, tool=tool, status=status, limit=limit),
    )
    if as_json:
        print(json.dumps([_run_dict(r) for r in records], indent=2))
        return
    table = Table(title=f"{len(records)} runs", title_justify="left")
    for column in ("id", "started", "tool", "kind", "tenant", "status", "operation", "ms", "error"):
        table.add_column(column)
    for r in records:
        table.add_row(
            r.id,
            _when(r.started_at),
            escape(r.tool),
            r.kind,
            escape(r.tenant or ""),
            r.status,
            escape(r.operation or ""),
            f"{r.latency_ms:.0f}",
            escape((r.error or "").split("\n")[0][:60]),
        )
    out.print(table)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="The run's id.")],
    config: ConfigOption = None,
    database: DatabaseOption = None,
) -> None:
    """One run as JSON: arguments (secrets redacted), operation and reason, steps, error."""
    from toolweave.store import SqlRunStore

    record = _with_db(_database_url(config, database), lambda db: SqlRunStore(db).get_run(run_id))
    if record is None:
        err.print(f"[red]no run {escape(run_id)!r}[/]")
        raise typer.Exit(1)
    print(json.dumps(_run_dict(record), indent=2, ensure_ascii=False))


@runs_app.command("resume")
def runs_resume(
    run_id: Annotated[
        str, typer.Argument(help="The interrupted run's id (`toolweave runs --status interrupted`).")
    ],
    args: Annotated[
        str | None,
        typer.Option(
            "--args",
            help="Secret arguments the run record does not keep, as a JSON object (the rest come from the record).",
        ),
    ] = None,
    config: ConfigOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON (as `call` does).")
    ] = True,
) -> None:
    """Continue an interrupted run as the same run: completed workflow steps are not run again, and the step
    that was in flight only when its tool is idempotent or the step retries. Prints the result as `call`
    does; exits 1 when it is an error or the run cannot be resumed, 2 on malformed --args."""
    arguments: dict[str, Any] = {}
    if args is not None:
        try:
            arguments = json.loads(args)
        except json.JSONDecodeError as error:
            err.print(f"[red]--args is not valid JSON:[/] {escape(str(error))}", soft_wrap=True)
            raise typer.Exit(2) from None
        if not isinstance(arguments, dict):
            err.print(f"[red]--args must be a JSON object[/], got {type(arguments).__name__}")
            raise typer.Exit(2)
    from toolweave.cli.main import _load, _logging
    from toolweave.executor.resume import ResumeError
    from toolweave.results import result_to_dict
    from toolweave.store import StoreError

    cfg = _load(config)
    _logging("error")
    try:
        result = asyncio.run(_resume(cfg, run_id, arguments))
    except ResumeError as error:
        err.print(f"[red]cannot resume:[/] {escape(error.message)}", highlight=False, soft_wrap=True)
        for path, message in error.problems:
            err.print(f"  [red]•[/] {escape(path)}: {escape(message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    except (StoreError, ValueError) as error:
        err.print(f"[red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    print(json.dumps(result_to_dict(result), indent=2, ensure_ascii=False))
    raise typer.Exit(1 if result.is_error else 0)


async def _resume(cfg: Any, run_id: str, arguments: dict[str, Any]) -> Any:
    """The served gateway's view (stored definitions, tenants' connections) in this process, for one resume."""
    from toolweave.executor.resume import interrupted_run, resume_run
    from toolweave.gateway import Gateway
    from toolweave.services.connections import TenantBackends
    from toolweave.services.definitions import DefinitionService
    from toolweave.store import (
        CompositeRepository,
        ConnectionRepository,
        Database,
        SqlRunStore,
        TenantRepository,
    )

    db = Database.from_url(cfg.gateway.database)
    await db.start()
    runs = SqlRunStore(db)
    try:
        await runs.start()
        await interrupted_run(runs, run_id, None)  # refuse before starting any backend
        async with Gateway(cfg, runs=runs) as gateway:
            backends = TenantBackends(ConnectionRepository(db))
            gateway.backend_resolver = backends
            service = DefinitionService(gateway, CompositeRepository(db), TenantRepository(db), record=False)
            try:
                await service.load()
                return await resume_run(gateway.executor(), run_id, arguments)
            finally:
                await service.close()
                await backends.close()
                gateway.backend_resolver = None
    finally:
        try:
            await runs.close()
        finally:
            await db.close()


# -- export -------------------------------------------------------------------------------


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
    from toolweave.cli.main import _load, _logging

    cfg = _load(config)
    _logging("error")
    try:
        exported = asyncio.run(_export(cfg, name, format, tenant))
    except LookupError as error:
        err.print(f"[red]{escape(str(error))}[/]", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    json.dump(exported if name is None else exported[0], sys.stdout, indent=2, ensure_ascii=False)
    print()


async def _export(cfg: Any, name: str | None, format: str, tenant: str | None) -> list[dict[str, Any]]:
    """Start the gateway, merge the stored definitions (read-only), export."""
    from toolweave.gateway import Gateway
    from toolweave.services.definitions import DefinitionService
    from toolweave.store import CompositeRepository, Database, TenantRepository

    db = Database.from_url(cfg.gateway.database)
    await db.start()
    try:
        async with Gateway(cfg) as gateway:
            service = DefinitionService(gateway, CompositeRepository(db), TenantRepository(db), record=False)
            await service.load()
            listed = [
                entry.name
                for entry in gateway.catalog.visible()
                if gateway.owner_of(entry.name) in (None, tenant)
            ]
            if name is not None:
                if name not in listed:
                    raise LookupError(f"no tool {name!r} (see `toolweave tools`)")
                listed = [name]
            await service.close()
            return gateway.export(format, listed)
    finally:
        await db.close()


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app, name="keys")
    app.add_typer(runs_app, name="runs")
    app.command("export")(export_command)
