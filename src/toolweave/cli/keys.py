"""`toolweave keys`: create (shown once), list, revoke API keys in the config's database."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolweave.cli.common import (
    ConfigOption,
    DatabaseOption,
    JsonOption,
    config_redis_url,
    database_url,
    err,
    out,
    when,
    with_database,
)

keys_app = typer.Typer(help="API keys: create (shown once), list, revoke.", no_args_is_help=True)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant the key acts for.")],
    scopes: Annotated[
        str,
        typer.Option(
            "--scopes",
            help="Comma-separated: tools:read, tools:call, tools:admin, tools:federate (federated clients).",
        ),
    ] = "tools:read,tools:call",
    name: Annotated[str | None, typer.Option("--name", help="A label to tell keys apart.")] = None,
    config: ConfigOption = None,
    database: DatabaseOption = None,
) -> None:
    """Create a key and print it ONCE (only its hash is stored). The key alone goes to stdout."""
    from toolweave.store import KeyRepository

    wanted = [scope.strip() for scope in scopes.split(",") if scope.strip()]
    info, plaintext = with_database(
        database_url(config, database), lambda db: KeyRepository(db).create(tenant, wanted, name=name)
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

    keys = with_database(database_url(config, database), lambda db: KeyRepository(db).list(tenant))
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
            when(k.created_at),
            when(k.last_used_at),
            when(k.revoked_at),
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

    redis_url = config_redis_url(config, database)

    async def revoke(db: Any) -> Any:
        from toolweave.services.change_feed import Change, announce

        try:
            info = await KeyRepository(db).revoke(key_id)
        except NotFound:
            return None
        await announce(db, Change("key", id=info.id), redis_url=redis_url)
        return info

    info = with_database(database_url(config, database), revoke)
    if info is None:
        err.print(f"[red]no API key {escape(key_id)!r}[/]")
        raise typer.Exit(1)
    out.print(f"revoked key {info.id} ({info.prefix}…) of tenant {escape(info.tenant)}", highlight=False)
