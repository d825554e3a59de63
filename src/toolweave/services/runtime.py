"""The composition root of a served gateway: database, repositories, run store, key cache,
metrics, tenants' connections, stored definitions, the change feed, and the gateway itself.

Built synchronously (so routes and middleware can hold it), started in the
app's lifespan, in the event loop that serves requests. The gateway is built
here with everything it needs (the run store, the backend resolver, the call
observer): nothing is set on it afterwards. `start()` order: database
(migrated) → run store (recovers interrupted runs) → gateway (backends) →
stored composite definitions merged into the catalog → the change feed to the
other gateways sharing the database, told what to do through callbacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from mcp_types import CallToolResult

from toolweave.actor import Actor
from toolweave.backends.federated.protocol import UNAUTHORIZED
from toolweave.catalog.catalog import Entry
from toolweave.config.models import Config
from toolweave.credentials.backends import OAuthBackends
from toolweave.gateway import Gateway
from toolweave.identity import public_url_for
from toolweave.services.call_rates import RedisCallRates
from toolweave.services.change_feed import ChangeFeed, Mode, feed_identity, plan
from toolweave.services.connections import TenantBackends
from toolweave.services.definitions import DefinitionService
from toolweave.services.event_relay import EventRelay
from toolweave.services.events import EventStream
from toolweave.services.federation_relay import FederationRelay
from toolweave.services.keys import KeyCache
from toolweave.services.live_share import LiveShare, live_share
from toolweave.services.managed_backends import ManagedBackends
from toolweave.services.metrics import Metrics
from toolweave.services.servers import ServerService
from toolweave.services.stats import ToolStats
from toolweave.services.takeover import RunTakeover
from toolweave.store import (
    ApiKeyInfo,
    AuditRepository,
    CompositeRepository,
    Conflict,
    ConnectionRepository,
    Database,
    KeyRepository,
    NotFound,
    OAuthTokenRepository,
    PendingAuthorizations,
    ServerRepository,
    SqlRunStore,
    SqlVectorStore,
    TenantRepository,
    TooSoon,
)
from toolweave.store.gateway_lock import GatewayLock
from toolweave.store.managed_backends import ManagedBackendRepository
from toolweave.store.stats import StatsRepository
from toolweave.telemetry import Tracing

AUDIT_PRUNE_INTERVAL = 3600.0
"""Seconds between two deletions of audit records past `[audit] retention`."""
RECONNECT_COOLDOWN = 30.0
"""Seconds between two reconnects of one shared backend asked for by tenants' keys."""

REVOCATION_POLL = 5.0
"""Seconds between two checks for keys revoked by another process, when `gateway.sync_interval` is 0."""

logger = logging.getLogger("toolweave.server")


def oauth_callback_url(config: Config) -> str:
    """Where backends' authorization servers send people back: `gateway.public_url` (else the
    configured address; `toolweave serve` names the one it bound) + `/oauth/callback`."""
    return (
        public_url_for(config.gateway.public_url, config.gateway.host, config.gateway.port)
        + "/oauth/callback"
    )


class ServerRuntime:
    def __init__(
        self,
        config: Config,
        *,
        require_auth: bool = False,
        database: Database | None = None,
        sync: Mode = "auto",
        wait_for_backends: bool = True,
    ) -> None:
        self.config = config
        self.wait_for_backends = wait_for_backends
        """False for `toolweave serve`: listen at once, each backend's tools appear (with
        `list_changed`) as it connects, instead of holding the port closed for the slowest one."""
        self.require_auth = require_auth
        self.db = database or Database.from_url(config.gateway.database)
        self.keys = KeyRepository(self.db)
        self.composites = CompositeRepository(self.db)
        self.server_store = ServerRepository(self.db)
        self.connections = ConnectionRepository(self.db)
        self.tenants = TenantRepository(self.db)
        self.audit = AuditRepository(self.db)
        self.key_cache = KeyCache(self.keys)
        self.metrics = Metrics(instance=config.gateway.instance)
        self.stats = ToolStats(StatsRepository(self.db))
        self.runs = SqlRunStore(self.db, on_orphaned=lambda run_ids: self.takeover.orphaned(run_ids))
        self.tenant_backends = TenantBackends(self.connections)
        self._tenant_reconnects: dict[str, float] = {}
        """Shared backend → when a tenant last had it reconnected (monotonic seconds)."""
        self.events = EventStream(
            EventRelay(self.db, config.gateway.redis_url) if config.gateway.redis_url else None,
            per_key=config.limits.event_streams_per_key,
            per_tenant=config.limits.event_streams_per_tenant,
        )
        self.grants = (
            OAuthBackends(
                OAuthTokenRepository(self.db, via="ui"),
                callback_url=oauth_callback_url(config),
                shared_pending=PendingAuthorizations(self.db),
            )
            if any(backend.oauth is not None for backend in config.backends)
            else None
        )
        """`[backends.oauth]` grants per (tenant, user, backend), in the database (docs/backends-oauth.md)."""
        self.call_rates = (
            RedisCallRates(
                config.gateway.redis_url, f"toolweave:rates:{feed_identity(self.db)}:", config.limits
            )
            if config.gateway.redis_url
            else None
        )
        """`[limits]` call rates for the whole deployment (Redis), or None: counted in this process."""
        self.tracing = Tracing.from_config(config)
        """OpenTelemetry traces (`[telemetry]`, `toolweave[otel]`); None: off, the SDK is not imported."""
        self.gateway = Gateway(
            config,
            credentials=self.grants,
            runs=self.runs,
            backend_resolver=self.tenant_backends,
            call_observer=self._observe,
            vector_store=SqlVectorStore(self.db),
            call_rates=self.call_rates,
            tracer=self.tracing,
        )
        self.managed_backends = ManagedBackends(
            self.gateway, ManagedBackendRepository(self.db), replaced=self.tenant_backends.forget_backend
        )
        """Backends the operator added in the web UI (stored encrypted, started with the gateway)."""
        self.takeover = RunTakeover(self.gateway, self.runs, self.events.publish, self.metrics.instance)
        """Resumes the runs of gateways whose lease lapsed (`services.takeover`)."""
        self.definitions: DefinitionService | None = None
        self.servers: ServerService | None = None
        """Virtual servers defined through `/api/v1/servers` (services/servers.py), once started."""
        self.sync_mode: Mode = sync
        """`auto` (see `toolweave.services.change_feed`), `poll` (polling only) or `off`."""
        self.sync: ChangeFeed | None = None
        self.started = False
        self.database_ready = False
        """The database is open and migrated (`GET /readyz`)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.key_revoked_listeners: list[Callable[[ApiKeyInfo], Awaitable[None]]] = []
        """Told of each revoked key, here or elsewhere (the server ends the key's MCP sessions)."""
        self._revocation_watch: asyncio.Task[None] | None = None
        self._backend_watch: asyncio.Task[None] | None = None
        self._pruner: asyncio.Task[None] | None = None
        self.closing: list[Callable[[], Awaitable[None]]] = []
        """What the app's other parts ask to have closed first, while backends and the database
        still serve them (the UI's live calls: a Try-it call still running is cancelled)."""
        self.relay: FederationRelay | None = None
        self.live_share: LiveShare | None = (
            live_share(self.db, config.gateway.redis_url)
            if config.ui.enabled and plan(config.gateway.redis_url, self.db, sync) in ("redis", "postgres")
            else None
        )
        """The web UI's Try-it calls followed from any gateway (`services.live_share`); None: one gateway."""
        self._gateway_lock: GatewayLock | None = None
        """Federated tools across the gateways sharing the database (with Redis)."""

    async def start(self) -> None:
        settings = self.config.gateway
        ChangeFeed.check(settings.redis_url, self.db, self.sync_mode)
        self._lock_unshared_sqlite()
        await self.db.start()
        self.database_ready = True
        await self.runs.start()
        self.stats.start()
        await self.gateway.start(wait=self.wait_for_backends)
        await self.managed_backends.start()
        self.definitions = DefinitionService(self.gateway, self.composites, self.tenants)
        await self.definitions.load()
        self.servers = ServerService(self.gateway, self.server_store)
        await self.servers.load()
        try:
            await self.connections.check_key()
        except Exception as error:  # noqa: BLE001 - reported now rather than at the first call; serving goes on
            logger.error("stored connections cannot be read: %s", error)
        self.sync = self._change_feed(self.definitions)
        if self.sync is not None:
            feed = self.sync
            self.definitions.on_change = lambda row: feed.definitions_changed(row.id)
            self.servers.on_change = lambda row: feed.definitions_changed(row.id)
            await feed.start()
        elif not self.db.is_memory:
            self._revocation_watch = asyncio.get_running_loop().create_task(
                self._watch_revocations(settings.sync_interval or REVOCATION_POLL),
                name="toolweave-revocations",
            )
        if not self.db.is_memory:
            self._backend_watch = asyncio.get_running_loop().create_task(
                self._watch_backends(settings.sync_interval or REVOCATION_POLL), name="toolweave-backends"
            )
        if self.events.relay is not None:
            await self.events.relay.start(self.events.deliver)
        if self.live_share is not None:
            await self.live_share.start()
        self.gateway.federation.namespace_listeners.append(self._audit_namespace)
        if self.config.audit.retention > 0:
            self._pruner = asyncio.get_running_loop().create_task(self._prune_audit_hourly())
        if settings.redis_url and self.config.federation.enabled:
            self.relay = FederationRelay(self.gateway.federation, self.db, settings.redis_url)
            await self.relay.start()
        self.started = True
        self.takeover.ready()

    def _observe(
        self, entry: Entry, result: CallToolResult, seconds: float, tenant: str | None, subject: str | None
    ) -> None:
        """Every call the executor dispatched: counted (metrics), traced (logs, `GET /api/v1/events`)."""
        self.metrics.observe(entry, result, seconds, tenant)
        self.stats.observe(entry, result, seconds, tenant)
        self.events.observe(entry, result, seconds, tenant, subject)

    def _audit_namespace(self, event: str, namespace: str, client: Any) -> None:
        """A federated namespace registered or dropped by a client connected here: one audit record,
        written in the background (the federation's bookkeeping is synchronous and never waits)."""
        tenant = getattr(client, "tenant", None)
        actor = Actor(tenant=tenant, who=str(client.label), via="federation")
        record = self.audit.record(
            actor,
            f"namespace.{event}",
            tenant=tenant,
            object_type="namespace",
            object_id=namespace,
            object_name=namespace,
        )
        self._spawn(self._logged(record, f"the audit record of namespace {namespace!r} {event}"))

    async def _prune_audit_hourly(self) -> None:
        """`[audit] retention`: delete older records now and every hour (one indexed DELETE)."""
        while True:
            cutoff = datetime.now(UTC) - timedelta(seconds=self.config.audit.retention)
            try:
                pruned = await self.audit.prune(cutoff)
            except Exception:
                logger.warning("cannot prune the audit log", exc_info=True)
            else:
                if pruned:
                    logger.info("audit log: %d record(s) older than %s deleted", pruned, cutoff.isoformat())
            await asyncio.sleep(AUDIT_PRUNE_INTERVAL)

    async def _logged(self, write: Awaitable[None], what: str) -> None:
        try:
            await write
        except Exception:
            logger.exception("cannot write %s", what)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _lock_unshared_sqlite(self) -> None:
        """A SQLite file served without a change feed is this gateway's alone (`store.gateway_lock`)."""
        path = self.db.sqlite_path
        if path is None or plan(self.config.gateway.redis_url, self.db, self.sync_mode) != "off":
            return
        lock = GatewayLock(Path(path))
        lock.acquire()
        self._gateway_lock = lock

    async def _reload_definitions(self) -> None:
        """Another gateway changed composite tools or virtual servers: read both again."""
        if self.definitions is not None:
            await self.definitions.reload()
        if self.servers is not None:
            await self.servers.reload()

    def _change_feed(self, definitions: DefinitionService) -> ChangeFeed | None:
        """The feed to the other gateways sharing the database, or None (SQLite without Redis, `off`)."""
        settings = self.config.gateway
        if plan(settings.redis_url, self.db, self.sync_mode) == "off":
            return None
        return ChangeFeed(
            self.db,
            reload_definitions=self._reload_definitions,
            forget_key=self._forget_key,
            forget_connection=self.tenant_backends.forget,
            redis_url=settings.redis_url,
            interval=settings.sync_interval,
            mode=self.sync_mode,
        )

    def _forget_key(self, key_id: str | None) -> None:
        """A key changed elsewhere (another gateway, the CLI): drop it (or, when unknown which, every
        cached key), and end what a revoked key holds open here."""
        if key_id is None:
            self.key_cache.clear()
        else:
            self.key_cache.forget_key(key_id)
        task = asyncio.get_running_loop().create_task(self._end_revoked(key_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _end_revoked(self, key_id: str | None) -> None:
        """End what `key_id` holds open if it is revoked (None: what every revoked key holds)."""
        try:
            if key_id is None:
                revoked = await self.keys.revoked()
            else:
                found = await self.keys.get(key_id)
                revoked = [found] if found.revoked else []
        except NotFound:  # deleted: its federated clients go (MCP sessions fail their next request)
            assert key_id is not None
            await self.gateway.federation.disconnect_key(key_id, UNAUTHORIZED, "the API key was revoked")
            return
        except Exception:
            logger.warning("cannot check which API keys were revoked", exc_info=True)
            return
        for info in revoked:
            await self._end_key(info)

    async def _end_key(self, info: ApiKeyInfo) -> None:
        """A revoked key's federated clients are disconnected and its MCP sessions ended, here, now."""
        await self.gateway.federation.disconnect_key(info.id, UNAUTHORIZED, "the API key was revoked")
        for listener in list(self.key_revoked_listeners):
            try:
                await listener(info)
            except Exception:
                logger.exception("ending the sessions of a revoked API key failed")

    async def _watch_backends(self, interval: float) -> None:
        """Backends another gateway on the database added or changed in its UI start here too, within
        `interval` seconds (`ManagedBackends.refresh`: one cheap query when nothing changed)."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.managed_backends.refresh()
            except Exception:
                logger.exception("starting backends added in another gateway's UI failed")

    async def _watch_revocations(self, interval: float) -> None:
        """Without a change feed (SQLite without Redis) nothing tells this gateway that `toolweave
        keys revoke` revoked a key in its database: one cheap count every `interval` seconds does."""
        seen: int | None = None
        failing = False
        while True:
            try:
                count = await self.keys.revoked_count()
            except Exception as error:  # noqa: BLE001 - a database hiccup: try again next time
                if not failing:
                    logger.warning("checking the database for revoked API keys failed: %s", error)
                failing = True
            else:
                failing = False
                if seen is not None and count != seen:
                    self._forget_key(None)
                seen = count
            await asyncio.sleep(interval)

    # -- changes the other gateways sharing the database must hear of --------

    async def revoke_key(
        self, key_id: str, tenant: str | None = None, *, actor: Actor | None = None
    ) -> ApiKeyInfo:
        """Revoke a key: refused here at once, and on the other gateways as soon as they hear of it."""
        info = await self.keys.revoke(key_id, tenant, actor=actor)
        self.key_cache.forget_key(info.id)
        await self._end_key(info)
        if self.sync is not None:
            self.sync.key_revoked(info.id)
        return info

    # -- operator actions --------------------------------------------------------

    def reconnect_allowed(self, name: str, tenant: str | None) -> bool:
        """Whether a caller of `tenant` may reconnect backend `name`: one the gateway dials and the
        caller sees (a shared backend, or the tenant's own; never another tenant's)."""
        backend = self.gateway.backends.get(name)
        return backend is not None and (tenant is None or backend.owner in (None, tenant))

    async def reconnect_backend(
        self, name: str, tenant: str | None, *, actor: Actor | None = None
    ) -> dict[str, Any]:
        """Reconnect one configured backend now (REST `POST /backends/{name}/reconnect`, the UI's button).

        Only this gateway's connection: other gateways sharing the database keep theirs.
        Returns the backend's description as the new attempt begins.
        """
        backend = self.gateway.backends.get(name)
        federated = (b for b in self.gateway.federation.backends() if b.name == name)
        if backend is None and any(tenant is None or b.owner in (None, tenant) for b in federated):
            raise Conflict(
                f"backend {name!r} is federated: its clients connect to the gateway, so it cannot be redialled"
            )
        if backend is None or not self.reconnect_allowed(name, tenant):
            raise NotFound(f"no backend named {name!r}")
        if backend.status in ("starting", "reconnecting"):
            return backend.describe()  # an attempt is under way: asking again changes nothing
        if tenant is not None and backend.owner is None:
            self._bound_tenant_reconnects(name)
        logger.info("backend %s: reconnect asked for by %s", name, tenant or "the operator")
        if actor is not None:
            await self.audit.record(
                actor,
                "backend.reconnected",
                tenant=backend.owner,
                object_type="backend",
                object_id=name,
                object_name=name,
            )
        await backend.reconnect()
        return backend.describe()

    def _bound_tenant_reconnects(self, name: str) -> None:
        """A shared backend serves every tenant and a reconnect fails the calls in flight on it: a
        tenant's key may force one at most every RECONNECT_COOLDOWN seconds, so no tenant can keep
        dropping everyone's calls (the operator, and a tenant's own backend, are not limited)."""
        now = time.monotonic()
        last = self._tenant_reconnects.get(name)
        if last is not None and now - last < RECONNECT_COOLDOWN:
            wait = math.ceil(RECONNECT_COOLDOWN - (now - last))
            raise TooSoon(
                f"backend {name!r} is shared and was reconnected by a tenant {int(now - last)} s ago; "
                f"a tenant may reconnect it again in {wait} s",
                retry_after=wait,
            )
        self._tenant_reconnects[name] = now

    def connection_changed(self, tenant: str | None, backend: str) -> None:
        """A tenant's connection was stored or deleted: close its session here and everywhere."""
        self.tenant_backends.forget(tenant, backend)
        if self.sync is not None:
            self.sync.connection_changed(tenant, backend)

    async def close(self) -> None:
        """Stop in reverse order; each step runs even when an earlier one failed."""
        for close_first in self.closing:
            with contextlib.suppress(Exception):
                await close_first()
        await _end(self._pruner)
        await _end(self._revocation_watch)
        await _end(self._backend_watch)
        self._pruner = self._revocation_watch = self._backend_watch = None
        with contextlib.suppress(Exception):
            await self.takeover.close()
        if self.events.relay is not None:
            with contextlib.suppress(Exception):
                await self.events.relay.close()
        if self.call_rates is not None:
            with contextlib.suppress(Exception):
                await self.call_rates.close()
        if self.live_share is not None:
            with contextlib.suppress(Exception):
                await self.live_share.close()
        if self.relay is not None:
            with contextlib.suppress(Exception):
                await self.relay.close()
            self.relay = None
        if self.sync is not None:
            with contextlib.suppress(Exception):
                await self.sync.close()
            self.sync = None
        if self.definitions is not None:
            with contextlib.suppress(Exception):
                await self.definitions.close()
        with contextlib.suppress(Exception):
            await self.tenant_backends.close()
        with contextlib.suppress(Exception):
            await self.gateway.stop()
        if self._tasks:  # audit records of the namespaces the stop just dropped, among others
            await asyncio.wait(set(self._tasks), timeout=5.0)
            for task in set(self._tasks):
                await _end(task)
        with contextlib.suppress(Exception):
            await self.stats.close()
        with contextlib.suppress(Exception):
            await self.runs.close()
        self.database_ready = False
        await self.db.close()
        if (
            self.tracing is not None
        ):  # the spans still queued are exported (bounded by the exporter's timeout)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.tracing.close)
        if self._gateway_lock is not None:
            self._gateway_lock.release()
            self._gateway_lock = None
        self.started = False


class OwnedRunStore(SqlRunStore):
    """A run store that owns its database: `close()` closes both (the CLI's one-shot commands)."""

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self._db.close()


async def open_run_store(cfg: Config) -> OwnedRunStore:
    """The database-backed run store of `gateway.database`, started; close it when done."""
    db = Database.from_url(cfg.gateway.database)
    await db.start()
    # on PostgreSQL the serving gateways sweep (and take over) a dead one's runs; a command must not
    store = OwnedRunStore(db, sweeps=db.dialect != "postgresql")
    try:
        await store.start()
    except BaseException:
        await db.close()
        raise
    return store


async def _end(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task and wait until it has ended: its cleanup (a database session rolling
    back, closing its connection) must finish while the database is still open. A task merely
    cancelled is left to the event loop's own shutdown, which waits forever on a connection whose
    engine was disposed in the meantime. `asyncio.wait` does not swallow a cancellation of `close()`."""
    if task is None or task.done():
        return
    task.cancel()
    await asyncio.wait({task})
