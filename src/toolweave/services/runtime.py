"""Everything a served gateway needs besides the gateway: database, repositories, run store, auth, metrics.

Built synchronously (so routes and middleware can hold it), started in the
app's lifespan, in the event loop that serves requests. `start()` order:
database (migrated) → run store (recovers interrupted runs) → gateway
(backends) → stored composite definitions merged into the catalog → the
change feed to the other gateways sharing the database (`sync`).
"""

from __future__ import annotations

import contextlib
import logging

from toolweave.gateway import Gateway
from toolweave.server.auth import KeyCache
from toolweave.services.change_feed import ChangeFeed, Mode
from toolweave.services.connections import TenantBackends
from toolweave.services.definitions import DefinitionService
from toolweave.services.metrics import Metrics
from toolweave.store import (
    ApiKeyInfo,
    CompositeRepository,
    ConnectionRepository,
    Database,
    KeyRepository,
    SqlRunStore,
    TenantRepository,
)

logger = logging.getLogger("toolweave.server")


class ServerRuntime:
    def __init__(
        self,
        gateway: Gateway,
        *,
        require_auth: bool = False,
        database: Database | None = None,
        sync: Mode = "auto",
    ) -> None:
        self.gateway = gateway
        self.require_auth = require_auth
        self.db = database or Database.from_url(gateway.config.gateway.database)
        self.keys = KeyRepository(self.db)
        self.composites = CompositeRepository(self.db)
        self.connections = ConnectionRepository(self.db)
        self.tenants = TenantRepository(self.db)
        self.key_cache = KeyCache(self.keys)
        self.metrics = Metrics()
        self.runs: SqlRunStore | None = None
        self.definitions: DefinitionService | None = None
        self.tenant_backends = TenantBackends(self.connections)
        self.sync_mode: Mode = sync
        """`auto` (see `toolweave.services.change_feed`), `poll` (polling only) or `off`."""
        self.sync: ChangeFeed | None = None
        self._started_gateway = False
        self.started = False

    async def start(self, *, start_gateway: bool = True) -> None:
        ChangeFeed.check(self.gateway.config.gateway.redis_url, self.db, self.sync_mode)
        await self.db.start()
        self.runs = SqlRunStore(self.db)
        await self.runs.start()
        gateway = self.gateway
        gateway.runs = self.runs
        gateway.backend_resolver = self.tenant_backends
        gateway.call_observer = self.metrics.observe
        if start_gateway and not gateway._started:
            await gateway.start()
            self._started_gateway = True
        self.definitions = DefinitionService(gateway, self.composites, self.tenants)
        await self.definitions.load()
        try:
            await self.connections.check_key()
        except Exception as error:  # noqa: BLE001 - reported now rather than at the first call; serving goes on
            logger.error("stored connections cannot be read: %s", error)
        self.sync = ChangeFeed.for_runtime(self, self.sync_mode)
        if self.sync is not None:
            feed = self.sync
            self.definitions.on_change = lambda row: feed.definitions_changed(row.id)
            await feed.start()
        self.started = True

    # -- changes the other gateways sharing the database must hear of --------

    async def revoke_key(self, key_id: str, tenant: str | None = None) -> ApiKeyInfo:
        """Revoke a key: refused here at once, and on the other gateways as soon as they hear of it."""
        info = await self.keys.revoke(key_id, tenant)
        self.key_cache.forget_key(info.id)
        if self.sync is not None:
            self.sync.key_revoked(info.id)
        return info

    def connection_changed(self, tenant: str | None, backend: str) -> None:
        """A tenant's connection was stored or deleted: close its session here and everywhere."""
        self.tenant_backends.forget(tenant, backend)
        if self.sync is not None:
            self.sync.connection_changed(tenant, backend)

    async def close(self) -> None:
        """Stop in reverse order; each step runs even when an earlier one failed."""
        if self.sync is not None:
            with contextlib.suppress(Exception):
                await self.sync.close()
            self.sync = None
        if self.definitions is not None:
            with contextlib.suppress(Exception):
                await self.definitions.close()
        with contextlib.suppress(Exception):
            await self.tenant_backends.close()
        if self._started_gateway:
            with contextlib.suppress(Exception):
                await self.gateway.stop()
            self._started_gateway = False
        self.gateway.backend_resolver = None
        self.gateway.call_observer = None
        if self.runs is not None:
            with contextlib.suppress(Exception):
                await self.runs.close()
            self.runs = None
        await self.db.close()
        self.started = False
