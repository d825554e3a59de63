"""`toolweave keys`: create (shown once), list, revoke API keys: through the gateway running for the
config when there is one (`cli/running.py`; REST `/api/v1/keys`, scope tools:admin), else in the config's
database (or `--database`) directly. The output is the same either way; a line on stderr says which."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from toolweave.actor import cli_actor
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
from toolweave.cli.running import (
    LocalOption,
    UrlOption,
    gateway_for,
    gateway_or_here,
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
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """Create a key and print it ONCE (only its hash is stored). The key alone goes to stdout."""
    wanted = [scope.strip() for scope in scopes.split(",") if scope.strip()]
    body = {"tenant": tenant, "scopes": wanted, "name": name}
    created = gateway_or_here(
        gateway_for(config, database, url, local),
        local,
        lambda r: r.post("/api/v1/keys", body),
        lambda: _created_here(database_url(config, database), tenant, wanted, name),
    )
    info = created["key"]
    err.print(
        f"created key [bold]{info['id']}[/] ({info['prefix']}…) for tenant [bold]{escape(info['tenant'])}[/] "
        f"with scopes {', '.join(info['scopes'])}. It is shown once: store it now.",
        highlight=False,
        soft_wrap=True,
    )
    print(created["secret"])


def _created_here(url: str, tenant: str, scopes: list[str], name: str | None) -> dict[str, Any]:
    """The same body `POST /api/v1/keys` answers."""
    from toolweave.server.api.records import key_out
    from toolweave.store import KeyRepository

    info, secret = with_database(
        url, lambda db: KeyRepository(db).create(tenant, scopes, name=name, actor=cli_actor())
    )
    return {"key": key_out(info).model_dump(mode="json"), "secret": secret}


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Only this tenant's keys.")] = None,
    config: ConfigOption = None,
    database: DatabaseOption = None,
    as_json: JsonOption = False,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """Every key (never the key itself): id, tenant, name, prefix, scopes, last use, revocation."""
    query = {"tenant": tenant} if tenant else None
    keys: list[dict[str, Any]] = gateway_or_here(
        gateway_for(config, database, url, local),
        local,
        lambda r: r.get("/api/v1/keys", query)["keys"],
        lambda: _listed_here(database_url(config, database), tenant),
    )
    if as_json:
        print(json.dumps(keys, indent=2))
        return
    table = Table(title=f"{len(keys)} keys", title_justify="left")
    for column in ("id", "tenant", "name", "prefix", "scopes", "created", "last used", "revoked"):
        table.add_column(column)
    for k in keys:
        table.add_row(
            k["id"],
            escape(k["tenant"]),
            escape(k["name"] or ""),
            k["prefix"],
            ",".join(k["scopes"]),
            when(k["createdAt"]),
            when(k["lastUsedAt"]),
            when(k["revokedAt"]),
        )
    out.print(table)


def _listed_here(url: str, tenant: str | None) -> list[dict[str, Any]]:
    """The same rows `GET /api/v1/keys` answers."""
    from toolweave.server.api.records import key_out
    from toolweave.store import KeyRepository

    keys = with_database(url, lambda db: KeyRepository(db).list(tenant))
    return [key_out(info).model_dump(mode="json") for info in keys]


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key's id (from `keys list`).")],
    config: ConfigOption = None,
    database: DatabaseOption = None,
    url: UrlOption = None,
    local: LocalOption = False,
) -> None:
    """Revoke a key now; running gateways sharing the database are told at once (or within `sync_interval`)."""
    from urllib.parse import quote

    path = f"/api/v1/keys/{quote(key_id, safe='')}/revoke"
    revoked: dict[str, Any] = gateway_or_here(
        gateway_for(config, database, url, local),
        local,
        lambda r: r.post(path, {}),
        lambda: _revoked_here(config, database, key_id),
        not_found={},
    )
    if not revoked:
        err.print(f"[red]no API key {escape(key_id)!r}[/]")
        raise typer.Exit(1)
    out.print(
        f"revoked key {revoked['id']} ({revoked['prefix']}…) of tenant {escape(revoked['tenant'])}",
        highlight=False,
    )


def _revoked_here(config: Any, database: str | None, key_id: str) -> dict[str, Any]:
    """Revoke in the database and announce it on the change feed; {} when there is no such key."""
    from toolweave.server.api.records import key_out
    from toolweave.store import KeyRepository, NotFound

    redis_url = config_redis_url(config, database)

    async def revoke(db: Any) -> dict[str, Any]:
        from toolweave.services.change_feed import Change, announce

        try:
            info = await KeyRepository(db).revoke(key_id, actor=cli_actor())
        except NotFound:
            return {}
        await announce(db, Change("key", id=info.id), redis_url=redis_url)
        return key_out(info).model_dump(mode="json")

    return with_database(database_url(config, database), revoke)
