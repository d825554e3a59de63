"""Keeping several gateways that share one database in step: a change feed.

When a gateway changes composite definitions, revokes a key or changes a
tenant's connection, it publishes a small `Change` (its kind and an id,
tenant or backend: never a definition, a key or a secret). Every other
gateway on the same database re-reads what changed from the database:

- `definitions`: all stored definitions (composite tools and virtual servers)
  are read again and what is served changes at once (`Gateway.set_definitions`, so MCP clients get
  `notifications/tools/list_changed`);
- `key`: the revoked key is dropped from the verification cache, so its next
  request is checked against the database (and refused);
- `connection`: the tenant's backend session is closed (and a cached "no
  connection" forgotten), so the next call loads the new headers.

An event is only ever a hint to re-read the database, which stays the single
source of truth: a forged or duplicated event costs a re-read, never trust.

Transports, by configuration:

- **Redis pub/sub** when `gateway.redis_url` is set (the `redis` extra);
- **PostgreSQL LISTEN/NOTIFY** when the database is PostgreSQL and no Redis
  is configured (a dedicated asyncpg connection listens);
- **polling** in every case, every `gateway.sync_interval` seconds: one cheap
  aggregate query (counts, version sums, latest change times of the three
  tables) compared with the previous answer, so a message lost while the
  broker was down is still picked up. `sync_interval = 0` turns it off.

A SQLite database without Redis has no feed: it is the single-gateway
setup. A broker that is down never stops the gateway: the loss is logged
once, polling carries on, the listener reconnects with a growing delay (up to
`MAX_BACKOFF`), and after reconnecting the database is polled at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from sqlalchemy import func, select, text

from toolweave.services.errors import SyncError
from toolweave.store import Database
from toolweave.store.tables import api_keys, composite_tools, connections, virtual_servers
from toolweave.waiting import cancel_requested, pause, set_within, within

logger = logging.getLogger("toolweave.sync")

Kind = Literal["definitions", "key", "connection"]
KINDS: tuple[str, ...] = ("definitions", "key", "connection")
Mode = Literal["auto", "poll", "off"]
"""`auto`: Redis, else LISTEN/NOTIFY on PostgreSQL, plus polling; `poll`: polling only; `off`: no feed."""

INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 30.0
HEALTH_SECONDS = 15.0
"""How often an idle listener checks its broker connection."""
FIRST_CONNECT_SECONDS = 5.0
"""How long `start()` waits for the listener's first attempt (refused at once when the broker is down)."""
MAX_MESSAGE = 4096


@dataclass(frozen=True, slots=True)
class Change:
    """What changed, never its content: an id, a tenant, a backend name."""

    kind: Kind
    id: str | None = None
    """A composite tool's id (`definitions`) or an API key's id (`key`)."""
    tenant: str | None = None
    backend: str | None = None
    origin: str = ""
    """The publishing gateway's instance id: a gateway ignores its own changes."""

    def encode(self) -> bytes:
        fields: dict[str, Any] = {"v": 1, "kind": self.kind, "origin": self.origin}
        for name in ("id", "tenant", "backend"):
            value = getattr(self, name)
            if value is not None:
                fields[name] = value
        return orjson.dumps(fields)

    @classmethod
    def decode(cls, raw: str | bytes) -> Change | None:
        """None for anything that is not a change of ours (logged at debug level only)."""
        if len(raw) > MAX_MESSAGE:
            return None
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(data, dict) or data.get("v") != 1 or data.get("kind") not in KINDS:
            return None
        values = {name: data.get(name) for name in ("id", "tenant", "backend")}
        if not all(value is None or isinstance(value, str) for value in values.values()):
            return None
        origin = data.get("origin")
        return cls(kind=data["kind"], origin=origin if isinstance(origin, str) else "", **values)


def feed_identity(db: Database) -> str:
    """A short name for "this database and schema", the same on every gateway that shares it.

    Host names are left out on purpose (gateways may reach one server under
    different names); NOTIFY is scoped to the database anyway, and on a shared
    Redis two deployments whose names collide only cost each other a re-read.
    """
    if db.dialect == "postgresql":
        name = f"postgresql/{db.url.database or ''}/{db.schema or 'public'}"
    else:
        name = f"sqlite/{db.sqlite_path}"
    return hashlib.sha256(name.encode()).hexdigest()[:16]


def redis_channel(db: Database) -> str:
    return f"toolweave:changes:{feed_identity(db)}"


def postgres_channel(db: Database) -> str:
    return f"toolweave_changes_{feed_identity(db)}"


def plan(config_redis_url: str, db: Database, mode: Mode = "auto") -> str:
    """The transport a gateway will use: `redis`, `postgres`, `poll` or `off`."""
    if mode == "off" or db.is_memory:
        return "off"
    if mode == "poll":
        return "poll"
    if config_redis_url:
        return "redis"
    return "postgres" if db.dialect == "postgresql" else "off"


def import_redis() -> Any:
    """`redis.asyncio`, or a SyncError naming the extra to install: every Redis user imports it here."""
    try:
        import redis.asyncio as aioredis
    except ImportError:
        raise SyncError(
            "gateway.redis_url is set but the redis package is not installed: "
            "pip install 'toolweave[redis]' (or leave redis_url empty)"
        ) from None
    return aioredis


async def follow_channels(
    redis: Any,
    channels: Sequence[str],
    received: Callable[[bytes | str], None],
    down: Callable[[BaseException], None],
    subscribed: Callable[[], None] = lambda: None,
) -> None:
    """Follow Redis channels until cancelled: each message's data to `received`.

    A lost connection is told to `down` and subscribed again with backoff (0.2 s doubling to
    5 s); `subscribed` runs after each subscription. The event relay and the federation relay
    follow their channels through here.
    """
    delay = 0.2
    while True:
        pubsub = redis.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(*channels)
            subscribed()
            delay = 0.2
            while not cancel_requested():  # redis-py's own timeout can swallow the cancel
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5.0)
                if message is not None and message.get("type") == "message":
                    received(message["data"])
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - Redis went away: reconnect with backoff
            down(error)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()
        await pause(delay)
        delay = min(delay * 2, 5.0)


# -- the transports ----------------------------------------------------------------


class _Transport(ABC):
    name = "none"

    def __init__(self, feed: ChangeFeed) -> None:
        self.feed = feed

    async def listen(self) -> None:
        """Run until cancelled: connect, deliver messages to the feed, reconnect after a loss."""
        delay = INITIAL_BACKOFF
        while True:
            try:
                await self._listen_once()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - any broker failure: log, poll, retry later
                if self.feed.transport_down(error):
                    delay = INITIAL_BACKOFF  # it had been up: start again with a short delay
            await pause(delay)
            delay = min(delay * 2, MAX_BACKOFF)

    def describe(self) -> str:
        return self.name

    @abstractmethod
    async def _listen_once(self) -> None:
        """Connect, subscribe, and deliver messages until the connection ends."""

    @abstractmethod
    async def publish(self, payload: bytes) -> None:
        """Send one change to the other gateways."""

    async def close(self) -> None:
        return None


class RedisTransport(_Transport):
    """Redis pub/sub on `toolweave:changes:<database identity>`."""

    name = "redis"

    def __init__(self, feed: ChangeFeed, url: str, channel: str) -> None:
        super().__init__(feed)
        aioredis = import_redis()
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        self._aioredis = aioredis
        self._url = url
        self.channel = channel
        # No hidden retries: a lost connection must reach `listen`, which logs it and polls.
        self._options: dict[str, Any] = {
            "socket_connect_timeout": 5,
            "socket_keepalive": True,
            "health_check_interval": int(HEALTH_SECONDS),
            "retry": Retry(NoBackoff(), 0),
        }
        # The publisher may retry once: its pooled connection can be stale after a broker restart.
        publisher = {**self._options, "retry": Retry(NoBackoff(), 1), "socket_timeout": 5}
        self._publisher = aioredis.from_url(url, **publisher)

    def describe(self) -> str:
        """Where Redis is, without credentials."""
        try:
            kwargs = self._publisher.connection_pool.connection_kwargs
        except AttributeError:
            return "Redis"
        if kwargs.get("path"):
            return f"Redis at {kwargs['path']}"
        return f"Redis at {kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"

    async def _listen_once(self) -> None:
        client = self._aioredis.from_url(self._url, **self._options)
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            await pubsub.subscribe(self.channel)
            self.feed.transport_up()
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=HEALTH_SECONDS)
                if message is not None and message.get("type") == "message":
                    self.feed.received(message["data"])
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()
            with contextlib.suppress(Exception):
                await client.aclose()

    async def publish(self, payload: bytes) -> None:
        await self._publisher.publish(self.channel, payload)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._publisher.aclose()


def asyncpg_args(db: Database) -> dict[str, Any]:
    """`asyncpg.connect` arguments for a connection of its own to `db` (a listener's)."""
    url = db.url
    query = dict(url.query)
    args: dict[str, Any] = {
        "host": url.host or query.get("host"),
        "port": url.port,
        "user": url.username,
        "password": url.password,
        "database": url.database,
        "timeout": 10,
    }
    if "ssl" in query:
        args["ssl"] = query["ssl"]
    return {name: value for name, value in args.items() if value is not None}


class PostgresTransport(_Transport):
    """LISTEN/NOTIFY on `toolweave_changes_<database identity>`: one asyncpg connection listens,
    notifications are sent through the database's pool."""

    name = "postgres"

    def __init__(self, feed: ChangeFeed, db: Database, channel: str) -> None:
        super().__init__(feed)
        self._db = db
        self.channel = channel

    def describe(self) -> str:
        return f"PostgreSQL LISTEN/NOTIFY on {self._db.url.host or 'localhost'}"

    def _connect_args(self) -> dict[str, Any]:
        return asyncpg_args(self._db)

    async def _listen_once(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(**self._connect_args())
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            await conn.add_listener(self.channel, self._notified)
            self.feed.transport_up()
            while True:
                await set_within(lost, HEALTH_SECONDS)
                if lost.is_set() or conn.is_closed():
                    raise ConnectionError("the listening connection to PostgreSQL closed")
                await within(10, conn.execute("SELECT 1"))  # notices a silently dead link
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2)
            if not conn.is_closed():
                conn.terminate()

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self.feed.received(payload)

    async def publish(self, payload: bytes) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                text("SELECT pg_notify(:channel, :payload)"),
                {"channel": self.channel, "payload": payload.decode()},
            )


# -- the feed ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Marks:
    """The poll's watermark: cheap aggregates that move whenever a row of interest changes."""

    definitions: tuple[Any, ...]
    keys: tuple[Any, ...]
    connections: tuple[Any, ...]


class ChangeFeed:
    """One gateway's side of the feed: publishes its own changes, applies everyone else's.

    It knows nothing of what it keeps in step: the host hands it what to do when
    something changed elsewhere (`reload_definitions`, `forget_key` with a key id or
    None for "any key", `forget_connection` with a tenant and a backend).
    """

    def __init__(
        self,
        db: Database,
        *,
        reload_definitions: Callable[[], Awaitable[Any]],
        forget_key: Callable[[str | None], None],
        forget_connection: Callable[[str | None, str], None],
        redis_url: str = "",
        interval: float = 5.0,
        mode: Mode = "auto",
    ) -> None:
        self.db = db
        self._reload_definitions = reload_definitions
        self._forget_key = forget_key
        self._forget_connection = forget_connection
        self.interval = interval
        self.instance = uuid.uuid4().hex
        self.transport_name = plan(redis_url, db, mode)
        self.transport: _Transport | None = None
        if self.transport_name == "redis":
            self.transport = RedisTransport(self, redis_url, redis_channel(db))
        elif self.transport_name == "postgres":
            self.transport = PostgresTransport(self, db, postgres_channel(db))
        self.connected = False
        """True while the transport's listener is subscribed."""
        self.received_count = 0
        """Changes from other gateways applied so far (diagnostics, tests)."""
        self.polls = 0
        self._down_logged = False
        self._first_attempt = asyncio.Event()
        self._poll_now = asyncio.Event()
        self._definitions_dirty = asyncio.Event()
        self._marks: _Marks | None = None
        self._connections: dict[tuple[str | None, str], Any] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._sending: set[asyncio.Task[None]] = set()
        self._poll_lock = asyncio.Lock()
        self._poll_failing = False

    @staticmethod
    def check(redis_url: str, db: Database, mode: Mode = "auto") -> None:
        """Fail before anything starts when the configured transport cannot work."""
        if plan(redis_url, db, mode) == "redis":
            import_redis()

    def describe(self) -> str:
        where = self.transport.describe() if self.transport is not None else ""
        polling = f"polling every {self.interval:g}s" if self.interval > 0 else "no polling"
        return f"{where}, {polling}" if where else polling

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Listen, take the poll's first watermark, then reconcile once (a change made while this
        gateway was loading its definitions is not lost)."""
        if self.transport is not None:
            self._spawn(self.transport.listen(), "listener")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first_attempt.wait(), FIRST_CONNECT_SECONDS)
        try:
            self._marks = await self._read_marks()
            self._connections = await self._read_connections()
        except Exception as error:  # noqa: BLE001 - the first poll will try again
            logger.warning("reading the change watermark failed: %s", error)
        self._spawn(self._definitions_worker(), "definitions")
        self._spawn(self._poller(), "poller")
        self._definitions_dirty.set()
        logger.info("change feed between gateways: %s", self.describe())

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks.clear()
        if self._sending:
            await asyncio.wait(list(self._sending), timeout=2)
            for task in list(self._sending):
                task.cancel()
        if self.transport is not None:
            await self.transport.close()
        self.connected = False

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(work, name=f"toolweave-sync-{name}"))

    # -- publishing --------------------------------------------------------

    def publish(self, change: Change) -> None:
        """Tell the other gateways, in the background: a request never waits for (or fails on) the broker."""
        if self.transport is None:
            return  # polling only: the others find the change in the database
        payload = Change(change.kind, change.id, change.tenant, change.backend, self.instance).encode()
        task = asyncio.get_running_loop().create_task(self._send(payload))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, payload: bytes) -> None:
        assert self.transport is not None
        try:
            await within(10, self.transport.publish(payload))
        except Exception as error:  # noqa: BLE001 - the others will find it by polling
            logger.warning(
                "could not publish a change on the %s feed (%s: %s); other gateways pick it up by polling",
                self.transport_name,
                type(error).__name__,
                error,
            )

    def definitions_changed(self, tool_id: str | None = None) -> None:
        self.publish(Change("definitions", id=tool_id))

    def key_revoked(self, key_id: str) -> None:
        self.publish(Change("key", id=key_id))

    def connection_changed(self, tenant: str | None, backend: str) -> None:
        self.publish(Change("connection", tenant=tenant, backend=backend))

    # -- receiving ---------------------------------------------------------

    def received(self, raw: str | bytes) -> None:
        """A message from the broker: apply it unless it is ours."""
        change = Change.decode(raw)
        if change is None:
            logger.debug("ignored a message on the change feed that is not a toolweave change")
            return
        if change.origin == self.instance:
            return
        self.received_count += 1
        self.apply(change)

    def apply(self, change: Change) -> None:
        if change.kind == "definitions":
            self._definitions_dirty.set()
        elif change.kind == "key":
            self._forget_key(change.id)
        elif change.kind == "connection" and change.backend is not None:
            self._forget_connection(change.tenant, change.backend)

    def transport_up(self) -> None:
        was_down = self._down_logged
        self.connected = True
        self._down_logged = False
        self._first_attempt.set()
        if was_down:
            logger.warning(
                "change feed %s is back; checking the database for what was missed", self.transport_name
            )
            self._poll_now.set()
        else:
            logger.debug("change feed %s connected", self.transport_name)

    def transport_down(self, error: BaseException) -> bool:
        """Log a loss once (not every retry); True when the feed had been connected."""
        was_up = self.connected
        self.connected = False
        self._first_attempt.set()
        if not self._down_logged:
            self._down_logged = True
            polling = f"polling every {self.interval:g}s" if self.interval > 0 else "polling is off"
            logger.warning(
                "change feed %s unavailable (%s: %s); %s and reconnecting",
                self.transport_name,
                type(error).__name__,
                error,
                polling,
            )
        return was_up

    # -- polling -----------------------------------------------------------

    def poll_soon(self) -> None:
        """Poll now rather than at the next interval (after a reconnect; also picks up a new `interval`)."""
        self._poll_now.set()

    async def _poller(self) -> None:
        while True:
            timeout = self.interval if self.interval > 0 else None
            await set_within(self._poll_now, timeout)
            self._poll_now.clear()
            await self.poll()

    async def poll(self) -> None:
        """Compare the database's watermark with the last one and apply what moved."""
        async with self._poll_lock:
            try:
                marks = await self._read_marks()
                previous = self._marks
                if previous is None:
                    self._marks = marks
                    self._connections = await self._read_connections()
                    self._definitions_dirty.set()
                    return
                if marks.connections != previous.connections:
                    await self._connections_moved()
                self._marks = marks
            except Exception as error:  # noqa: BLE001 - a database hiccup: log once, try next time
                if not self._poll_failing:
                    logger.warning("polling the database for changes failed: %s", error)
                self._poll_failing = True
                return
            self._poll_failing = False
            self.polls += 1
            if marks.definitions != previous.definitions:
                self._definitions_dirty.set()
            if marks.keys != previous.keys:
                self._forget_key(None)

    async def _read_marks(self) -> _Marks:
        """One round trip: per table a count and what moves on every change that matters.

        Tools: a new version raises the sum of versions, a status change or a delete
        moves the latest `updated_at` (and the deleted count). Keys: a revocation
        raises the revoked count, which never goes down. Connections: a put moves
        the latest `updated_at`, a delete the count.
        """
        tools, keys, conns, servers = composite_tools.c, api_keys.c, connections.c, virtual_servers.c
        parts = [
            select(func.count()).select_from(composite_tools),
            select(func.count(tools.deleted_at)),
            select(func.coalesce(func.sum(tools.version), 0)),
            select(func.max(tools.updated_at)),
            select(func.count()).select_from(api_keys),
            select(func.count(keys.revoked_at)),
            select(func.max(keys.created_at)),
            select(func.count()).select_from(connections),
            select(func.max(conns.updated_at)),
            select(func.count()).select_from(virtual_servers),
            select(func.count(servers.deleted_at)),
            select(func.coalesce(func.sum(servers.version), 0)),
        ]
        query = select(*(part.scalar_subquery() for part in parts))
        async with self.db.read() as conn:
            row = tuple((await conn.execute(query)).one())
        return _Marks(definitions=(*row[0:4], *row[9:12]), keys=row[4:7], connections=row[7:9])

    async def _read_connections(self) -> dict[tuple[str | None, str], Any]:
        query = select(connections.c.tenant, connections.c.backend, connections.c.updated_at)
        async with self.db.read() as conn:
            rows = (await conn.execute(query)).all()
        return {(row.tenant, row.backend): row.updated_at for row in rows}

    async def _connections_moved(self) -> None:
        """Close the sessions of connections changed, added or deleted since the last poll."""
        now = await self._read_connections()
        before = self._connections
        for key in set(now) | set(before):
            if now.get(key) != before.get(key):
                self._forget_connection(*key)
        self._connections = now

    async def _definitions_worker(self) -> None:
        """One reload at a time; a burst of changes costs one reload, a failed one is retried."""
        while True:
            await self._definitions_dirty.wait()
            self._definitions_dirty.clear()
            try:
                await self._reload_definitions()
            except Exception as error:  # noqa: BLE001 - retried shortly; the previous definitions keep serving
                logger.warning("reloading composite tools after a change failed (%s); retrying", error)
                await asyncio.sleep(min(self.interval, 5.0) if self.interval > 0 else 5.0)
                self._definitions_dirty.set()

    # -- tests and diagnostics ---------------------------------------------

    async def wait_connected(self, timeout: float = 10.0) -> None:
        """Until the listener is subscribed (tests: changes published before that are only polled)."""
        async with asyncio.timeout(timeout):
            while not self.connected:  # noqa: ASYNC110 - a flag set by the listener task
                await asyncio.sleep(0.02)


async def announce(db: Database, change: Change, *, redis_url: str = "", timeout: float = 5.0) -> bool:
    """Tell the running gateways of a change made by a one-shot process (the CLI's `keys revoke`).

    `db` is the process's started database; `redis_url` is `gateway.redis_url` of its config.
    True when the change was published; False when there is no feed (SQLite without Redis) or
    publishing failed (logged): the gateways then find the change at their next poll.
    """
    name = plan(redis_url, db)
    payload = Change(change.kind, change.id, change.tenant, change.backend, origin="announce").encode()
    try:
        if name == "redis":
            client = import_redis().from_url(
                redis_url, socket_connect_timeout=timeout, socket_timeout=timeout
            )
            try:
                await within(timeout, client.publish(redis_channel(db), payload))
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()
            return True
        if name == "postgres":
            async with db.write() as conn:
                await conn.execute(
                    text("SELECT pg_notify(:channel, :payload)"),
                    {"channel": postgres_channel(db), "payload": payload.decode()},
                )
            return True
    except SyncError:
        raise
    except Exception as error:  # noqa: BLE001 - the change is stored; polling finds it
        logger.warning(
            "could not announce the change to running gateways (%s: %s); they find it at their next poll",
            type(error).__name__,
            error,
        )
    return False
