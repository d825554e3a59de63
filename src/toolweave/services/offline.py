"""A served gateway's state used by a one-shot process that does not serve (the CLI's `runs resume`
and `export`): the database's run store, the stored composite definitions (read-only: verdicts are
not recorded) and the tenants' connections, around a gateway started for one task."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from toolweave.actor import cli_actor
from toolweave.config.models import Config
from toolweave.executor.resume import interrupted_run, resume_run
from toolweave.export import export_tools
from toolweave.gateway import Gateway
from toolweave.services.connections import TenantBackends
from toolweave.services.definitions import DefinitionService
from toolweave.store import CompositeRepository, ConnectionRepository, Database, SqlRunStore, TenantRepository


async def resume_offline(cfg: Config, run_id: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """The served gateway's view (stored definitions, tenants' connections) in this process, for one resume."""
    db = Database.from_url(cfg.gateway.database)
    await db.start()
    runs = SqlRunStore(db)
    try:
        await runs.start()
        await interrupted_run(runs, run_id, None)  # refuse before starting any backend
        backends = TenantBackends(ConnectionRepository(db))
        async with Gateway(cfg, runs=runs, backend_resolver=backends) as gateway:
            service = DefinitionService(gateway, CompositeRepository(db), TenantRepository(db), record=False)
            try:
                await service.load()
                return await resume_run(gateway.executor(), run_id, arguments, actor=cli_actor())
            finally:
                await service.close()
                await backends.close()
    finally:
        try:
            await runs.close()
        finally:
            await db.close()


async def export_offline(
    cfg: Config, name: str | None, format: str, tenant: str | None, server: str | None = None
) -> list[dict[str, Any]]:
    """Start the gateway, merge the stored definitions (read-only), export (`server`: the tools of that
    virtual server, under the names and descriptions it gives them)."""
    db = Database.from_url(cfg.gateway.database)
    await db.start()
    try:
        async with Gateway(cfg) as gateway:
            service = DefinitionService(gateway, CompositeRepository(db), TenantRepository(db), record=False)
            await service.load()
            catalog = gateway.catalog
            if server is not None:
                chosen = gateway.servers.get(server)
                if chosen is None:
                    known = ", ".join(sorted(gateway.servers.by_name)) or "none"
                    raise LookupError(f"no virtual server {server!r} (the config's [[servers]]: {known})")
                catalog = chosen.catalog
            listed = [entry.name for entry in catalog.listed_for(tenant)]
            if name is not None:
                if name not in listed:
                    where = f"on server {server!r}" if server else "(see `toolweave tools`)"
                    raise LookupError(f"no tool {name!r} {where}")
                listed = [name]
            await service.close()
            return export_tools([catalog.entries[n].tool for n in listed], format)
    finally:
        await db.close()
