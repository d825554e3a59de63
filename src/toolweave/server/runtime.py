"""Everything a served gateway needs besides the gateway: database, repositories, run store, auth, metrics.

Built synchronously (so routes and middleware can hold it), started in the
app's lifespan, in the event loop that serves requests. `start()` order:
database (migrated) → run store (recovers interrupted runs) → gateway
(backends) → stored composite definitions merged into the catalog.
"""

from __future__ import annotations

import contextlib
import logging

from toolweave.gateway import Gateway
from toolweave.server.auth import KeyCache
from toolweave.server.connections import TenantBackends
from toolweave.server.definitions import DefinitionService
from toolweave.server.metrics import Metrics
from toolweave.store import (
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
        self, gateway: Gateway, *, require_auth: bool = False, database: Database | None = None
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
        self._started_gateway = False
        self.started = False

    async def start(self, *, start_gateway: bool = True) -> None:
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
        self.started = True

    async def close(self) -> None:
        """Stop in reverse order; each step runs even when an earlier one failed."""
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
