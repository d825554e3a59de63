"""Per-tenant backend credentials at call time ("context loading", docs/api.md#connections).

A connection is a set of HTTP headers a tenant stores for an HTTP MCP
backend (an API token, an account id). The shared backend connection was
opened with the config's headers, and MCP's streamable HTTP transport fixes
its headers per session, so a tenant's headers need a session of their own:
`TenantBackends` opens one lazily — at the first call that actually reaches
that backend for that tenant, i.e. only for the operation a router chose —
reuses it for the tenant's later calls, and closes it when the connection is
changed or deleted.

Tenants without a connection use the shared backend; that answer is cached
for `NEGATIVE_SECONDS` so the hot path is a dict lookup, not a query. A
connection stored by another gateway sharing the database is picked up
within that time.

Secrets: decrypted values live only in the backend's config headers; they are
never logged, returned or put in an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from toolweave.backends.base import Backend
from toolweave.backends.mcp import MCPBackend
from toolweave.executor import Session
from toolweave.services.errors import ConnectionUnavailable
from toolweave.store import ConnectionRepository

logger = logging.getLogger("toolweave.connections")

NEGATIVE_SECONDS = 10.0
_NONE = object()


@runtime_checkable
class ConnectionViews(Protocol):
    """A backend that lays a tenant's connection over its own client (an HTTP API's `HttpApiBackend`)."""

    def connection_view(self, connection: Mapping[str, str], owner: str) -> Backend: ...


class TenantBackends:
    """The gateway's `backend_resolver`: the backend connection to use for a session."""

    def __init__(self, connections: ConnectionRepository) -> None:
        self._connections = connections
        self._cache: dict[tuple[str | None, str], tuple[float, Any]] = {}
        self._locks: dict[tuple[str | None, str], asyncio.Lock] = {}
        self._closing: set[asyncio.Task[None]] = set()

    async def __call__(self, backend: Backend, session: Session) -> Backend:
        if not backend.config.url and not backend.config.is_http_api:
            return backend  # connections are HTTP credentials; stdio and Python backends have none
        key = (session.tenant, backend.name)
        found = self._cache.get(key)
        if found is not None and (found[1] is not _NONE or found[0] > time.monotonic()):
            return backend if found[1] is _NONE else found[1]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._cache.get(key)
            if found is not None and (found[1] is not _NONE or found[0] > time.monotonic()):
                return backend if found[1] is _NONE else found[1]
            secrets = await self._connections.get(session.tenant, backend.name)
            if secrets is None:
                self._cache[key] = (time.monotonic() + NEGATIVE_SECONDS, _NONE)
                return backend
            own = await self._open(backend, session.tenant, dict(secrets))
            self._cache[key] = (0.0, own)
            return own

    async def _open(self, shared: Backend, tenant: str | None, headers: dict[str, str]) -> Backend:
        if isinstance(shared, ConnectionViews):  # an HTTP API: the same client, the tenant's credentials
            owner = f"the connection of tenant {tenant!r}" if tenant else "the local connection"
            return shared.connection_view(headers, owner)
        config = shared.config.model_copy(update={"headers": {**shared.config.headers, **headers}})
        own = MCPBackend(config)
        await own.start()
        if not await own.wait_ready(config.connect_timeout):
            why = own.last_error or own.status
            await own.stop()
            who = f"tenant {tenant!r}" if tenant else "the local operator"
            raise ConnectionUnavailable(
                f"cannot connect to backend {shared.name!r} with the connection of {who}: {why}"
            )
        logger.info("opened backend %s for tenant %s with its connection", shared.name, tenant)
        return own

    def forget(self, tenant: str | None, backend: str) -> None:
        """The connection changed or was deleted: close its session; the next call loads the new one."""
        found = self._cache.pop((tenant, backend), None)
        if found is not None and found[1] is not _NONE:
            self._close_later(found[1])

    def forget_backend(self, backend: str) -> None:
        """The backend itself was redefined (an edit in the UI): every tenant's session to the old one
        closes, and the next call opens one to the new definition."""
        for key in [key for key in self._cache if key[1] == backend]:
            self.forget(key[0], backend)

    def _close_later(self, backend: Backend) -> None:
        drained = getattr(backend, "stop_when_idle", None)  # calls it is serving finish first
        task = asyncio.get_running_loop().create_task(drained() if drained else backend.stop())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        opened = [value for _expiry, value in self._cache.values() if value is not _NONE]
        self._cache.clear()
        for backend in opened:
            with contextlib.suppress(Exception):
                await backend.stop()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    def opened(self) -> list[tuple[str | None, str]]:
        """(tenant, backend) pairs with a session of their own, for tests and diagnostics."""
        return [key for key, (_e, value) in self._cache.items() if value is not _NONE]
