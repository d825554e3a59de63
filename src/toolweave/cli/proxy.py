"""`toolweave proxy revoke`: end the OAuth proxy's grants (`[auth.proxy]`) of a tenant, a person, a
client, or all of them, in the config's database (or `--database`) directly. Every gateway on that
database refuses their tokens within 5 s (it asks the database about a grant that often)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from toolweave.actor import cli_actor
from toolweave.cli.common import ConfigOption, DatabaseOption, database_url, err, with_database

proxy_app = typer.Typer(help="The OAuth proxy's grants ([auth.proxy]).", no_args_is_help=True)

if TYPE_CHECKING:  # imported by the command itself, not by --help
    from toolweave.store.database import Database


@proxy_app.command("revoke")
def proxy_revoke(
    tenant: Annotated[str | None, typer.Option("--tenant", help="Every grant of this tenant.")] = None,
    subject: Annotated[
        str | None, typer.Option("--subject", help="Every grant of this person (sub).")
    ] = None,
    client: Annotated[str | None, typer.Option("--client", help="Every grant to this client id.")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Every grant of every person.")] = False,
    config: ConfigOption = None,
    database: DatabaseOption = None,
) -> None:
    """Revoke grants: their access and refresh tokens stop working on every gateway within 5 s."""
    if everything == any(value is not None for value in (tenant, subject, client)):
        err.print("[red]error:[/] give --tenant, --subject and/or --client, or --all", highlight=False)
        raise typer.Exit(2)

    async def work(db: Database) -> int:
        from toolweave.store.oauth_proxy import OAuthProxyRepository

        repository = OAuthProxyRepository(db)
        return await repository.revoke_matching(cli_actor(), tenant=tenant, subject=subject, client_id=client)

    ended = with_database(database_url(config, database), work)
    err.print(f"revoked {ended} grant(s)", highlight=False)
    print(ended)
