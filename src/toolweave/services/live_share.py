"""Try-it calls followed from any gateway: each call's state shared, and the page's orders relayed.

The web UI's Try it starts a call on the gateway that got the form and the page then polls it twice a
second; behind a round-robin balancer each poll may reach another gateway. The gateway running the
call writes what the page shows of it (a JSON *snapshot*: tool, progress, open questions, result) to
the shared store, and a gateway asked about a call it does not run reads the snapshot. An answer to
a question or a cancel posted to another gateway is sent on the deployment's channel to the gateway
running the call, which applies it as if posted there.

- **Redis** (`gateway.redis_url`): snapshots are keys `toolweave:ui:<id>:call:<call>`, orders go on
  the channel `toolweave:ui:<id>:calls` (followed through `change_feed.follow_channels`).
- **PostgreSQL without Redis**: snapshots are rows of `ui_live_calls`, orders go over LISTEN/NOTIFY
  (`pg_channel.PostgresChannel`, `toolweave_ui_<id>`).
- SQLite without Redis: nothing is shared (one gateway).

Snapshots are **written behind**: a change marks its call, and one task writes the marked calls every
`FLUSH_SECONDS` in one round trip (the call never waits); the first snapshot is written before the
page that follows it is sent (`flush`). A running call's snapshot is written again every
`RENEW_SECONDS` and expires after `RUNNING_SECONDS` without one, so a call whose gateway died is not
shown running for ever (the reader also tells such a call by its stale `renewed_at`); a finished
call's snapshot expires `FINISHED_SECONDS` after it ended. This module knows nothing of the UI: a
snapshot and an order are JSON objects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert

from toolweave.common_types import JSONObject
from toolweave.services.change_feed import feed_identity, follow_channels, import_redis
from toolweave.services.pg_channel import PostgresChannel
from toolweave.store import Database
from toolweave.store.tables import ui_live_calls
from toolweave.waiting import set_within

logger = logging.getLogger("toolweave.ui")

FLUSH_SECONDS = 0.1
"""How long a change waits for others to share its write (the page polls every 0.5 s)."""
RENEW_SECONDS = 10.0
"""A running call's snapshot is written again this often, changed or not."""
RUNNING_SECONDS = 60.0
"""A running call's snapshot expires this long after its last write (its gateway died)."""
FINISHED_SECONDS = 900.0
"""A finished call's snapshot is kept this long (the page shows the result; `live_calls.KEEP_SECONDS`)."""
STORE_SECONDS = 2.0
"""A write or read that takes longer is given up (Redis or the database is down or stuck)."""
DOWN_SECONDS = 5.0
"""After a failure the store is not asked for this long (a stuck broker would otherwise hold every
page's poll for `STORE_SECONDS`); snapshots are written again at the next renewal after it."""
MAX_ORDER_BYTES = 256 * 1024
"""An order (an answer) larger than this is refused."""

Snapshot = Callable[[], JSONObject]
"""Builds a call's snapshot now (called at write time, off the call's path)."""
OrderHandler = Callable[[JSONObject], Awaitable[None]]


class LiveShare(ABC):
    """One gateway's part: writes the snapshots of the calls it runs, reads the others', relays orders."""

    broker = "Redis"

    def __init__(self) -> None:
        self.instance = uuid.uuid4().hex
        """Names this gateway in the snapshots of its calls (orders are addressed to it)."""
        self.handlers: list[OrderHandler] = []
        """Told each order addressed to this gateway (the UI's live calls apply it)."""
        self._tracked: dict[str, Snapshot] = {}
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()
        self._down_logged = False
        self._down_until = 0.0
        self.listening = asyncio.Event()
        """Set once the listener has subscribed (tests wait for it; orders sent before are lost)."""

    # -- life ------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop(), name="toolweave-live-calls")
            self._listener = asyncio.create_task(self._listen(), name="toolweave-live-orders")

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.flush()
        for task in (self._writer, self._listener):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._writer = self._listener = None

    # -- the calls of this gateway --------------------------------------------------------------

    def track(self, call_id: str, snapshot: Snapshot) -> None:
        """A call started here: its snapshot is written now and whenever it `changed`."""
        self._tracked[call_id] = snapshot
        self.changed(call_id)

    def changed(self, call_id: str) -> None:
        if call_id in self._tracked:
            self._dirty.add(call_id)
            self._wake.set()

    async def flush(self) -> None:
        """Write every marked snapshot now (the page following a new call may poll another gateway)."""
        async with self._writing:
            dirty, self._dirty = self._dirty, set()
            await self._write_marked(dirty)

    async def _write_loop(self) -> None:
        renewed = time.monotonic()
        while True:
            await set_within(self._wake, RENEW_SECONDS)
            self._wake.clear()
            await asyncio.sleep(FLUSH_SECONDS)
            if time.monotonic() - renewed >= RENEW_SECONDS:
                renewed = time.monotonic()
                self._dirty.update(self._tracked)
            await self.flush()

    @property
    def available(self) -> bool:
        """False for `DOWN_SECONDS` after the store failed."""
        return time.monotonic() >= self._down_until

    async def _write_marked(self, dirty: set[str]) -> None:
        if not self.available:
            return  # written again at the next renewal (every tracked call is, finished ones too)
        rows: list[tuple[str, bytes, float]] = []
        finished: list[str] = []
        now = time.time()
        for call_id in dirty:
            snapshot = self._tracked.get(call_id)
            if snapshot is None:
                continue
            data = {**snapshot(), "instance": self.instance, "renewed_at": now}
            running = bool(data.get("running"))
            if not running:
                finished.append(call_id)
            rows.append((call_id, orjson.dumps(data), RUNNING_SECONDS if running else FINISHED_SECONDS))
        if not rows:
            return
        try:
            async with asyncio.timeout(STORE_SECONDS):
                await self._write(rows)
        except Exception as error:  # noqa: BLE001 - the store is down: other gateways cannot show these
            self._down(error)
        else:
            self._up()
            for call_id in finished:  # its last write
                self._tracked.pop(call_id, None)

    def forget(self, call_id: str) -> None:
        """No more writes for this call (dropped here)."""
        self._tracked.pop(call_id, None)
        self._dirty.discard(call_id)

    # -- other gateways' calls ------------------------------------------------------------

    async def read(self, call_id: str) -> JSONObject | None:
        """The call's last snapshot, None when unknown, expired, or the store cannot say."""
        if not self.available:
            return None
        try:
            async with asyncio.timeout(STORE_SECONDS):
                raw = await self._read(call_id)
        except Exception as error:  # noqa: BLE001
            self._down(error)
            return None
        if raw is None:
            return None
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        return data if isinstance(data, dict) else None

    async def order(self, instance: str, order: JSONObject) -> bool:
        """Send `order` to the gateway `instance` (which runs the call); False when it could not go."""
        payload = orjson.dumps({**order, "to": instance})
        if len(payload) > MAX_ORDER_BYTES or not self.available:
            return False
        try:
            async with asyncio.timeout(STORE_SECONDS):
                await self._publish(payload)
        except Exception as error:  # noqa: BLE001
            self._down(error)
            return False
        return True

    async def _heard(self, raw: bytes | str) -> None:
        if len(raw) > MAX_ORDER_BYTES + 1024:
            return
        try:
            order = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if not isinstance(order, dict) or order.get("to") != self.instance:
            return
        for handler in self.handlers:
            try:
                await handler(order)
            except Exception:
                logger.exception("an order for a live call failed")

    def _down(self, error: BaseException) -> None:
        self._down_until = time.monotonic() + DOWN_SECONDS
        if not self._down_logged:
            self._down_logged = True
            logger.warning(
                "%s unreachable for live Try-it calls (%s: %s): a page following a call on another "
                "gateway cannot see it until it is back",
                self.broker,
                type(error).__name__,
                error,
            )

    def _subscribed(self) -> None:
        self.listening.set()
        self._up()

    def _up(self) -> None:
        self._down_until = 0.0
        if self._down_logged:
            self._down_logged = False
            logger.info("live Try-it calls: %s is back", self.broker)

    # -- the store ------------------------------------------------------------------------

    @abstractmethod
    async def _write(self, rows: list[tuple[str, bytes, float]]) -> None:
        """Write (call id, snapshot, seconds to keep it) rows in one round trip."""

    @abstractmethod
    async def _read(self, call_id: str) -> bytes | str | None: ...

    @abstractmethod
    async def _publish(self, payload: bytes) -> None: ...

    @abstractmethod
    async def _listen(self) -> None:
        """Hand the channel's messages to `_heard` until cancelled (reconnecting)."""


class RedisLiveShare(LiveShare):
    def __init__(self, db: Database, redis_url: str) -> None:
        super().__init__()
        self.prefix = f"toolweave:ui:{feed_identity(db)}"
        self.channel = f"{self.prefix}:calls"
        self._url = redis_url
        self._redis: Any = None
        self._orders: set[asyncio.Task[None]] = set()

    @property
    def redis(self) -> Any:
        if self._redis is None:
            self._redis = import_redis().from_url(self._url, socket_connect_timeout=2, socket_keepalive=True)
        return self._redis

    def key(self, call_id: str) -> str:
        return f"{self.prefix}:call:{call_id}"

    async def _write(self, rows: list[tuple[str, bytes, float]]) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            for call_id, data, seconds in rows:
                pipe.set(self.key(call_id), data, ex=max(1, int(seconds)))
            await pipe.execute()

    async def _read(self, call_id: str) -> bytes | None:
        found: bytes | None = await self.redis.get(self.key(call_id))
        return found

    async def _publish(self, payload: bytes) -> None:
        await self.redis.publish(self.channel, payload)

    async def _listen(self) -> None:
        def received(raw: bytes | str) -> None:
            task = asyncio.get_running_loop().create_task(self._heard(raw))
            self._orders.add(task)
            task.add_done_callback(self._orders.discard)

        await follow_channels(self.redis, [self.channel], received, self._down, self._subscribed)

    async def close(self) -> None:
        await super().close()
        if self._redis is not None:
            with contextlib.suppress(Exception):
                await self._redis.aclose()
            self._redis = None


class DatabaseLiveShare(LiveShare):
    """Over PostgreSQL: snapshots in `ui_live_calls`, orders over LISTEN/NOTIFY."""

    broker = "PostgreSQL"

    def __init__(self, db: Database) -> None:
        super().__init__()
        self.db = db
        self.channel = PostgresChannel(db, f"toolweave_ui_{feed_identity(db)}")
        self._swept = 0.0

    async def _write(self, rows: list[tuple[str, bytes, float]]) -> None:
        now = time.time()
        values = [
            {"id": call_id, "snapshot": data.decode(), "expires_at": now + seconds}
            for call_id, data, seconds in rows
        ]
        statement = insert(ui_live_calls)
        statement = statement.on_conflict_do_update(
            index_elements=["id"],
            set_={"snapshot": statement.excluded.snapshot, "expires_at": statement.excluded.expires_at},
        )
        async with self.db.write() as conn:
            if now - self._swept >= RUNNING_SECONDS:
                self._swept = now
                await conn.execute(delete(ui_live_calls).where(ui_live_calls.c.expires_at < now))
            await conn.execute(statement, values)

    async def _read(self, call_id: str) -> str | None:
        async with self.db.read() as conn:
            row = await conn.execute(
                select(ui_live_calls.c.snapshot).where(
                    ui_live_calls.c.id == call_id, ui_live_calls.c.expires_at > time.time()
                )
            )
            return row.scalar_one_or_none()

    async def _publish(self, payload: bytes) -> None:
        await self.channel.publish(payload.decode())

    async def _listen(self) -> None:
        async def received(payload: str) -> None:
            await self._heard(payload)

        await self.channel.follow(received, self._down, self._subscribed)

    async def close(self) -> None:
        await super().close()
        await self.channel.close()


def live_share(db: Database, redis_url: str) -> LiveShare | None:
    """The deployment's share: over Redis when configured, else PostgreSQL's; None on SQLite alone."""
    if db.is_memory:
        return None
    if redis_url:
        return RedisLiveShare(db, redis_url)
    if db.dialect == "postgresql":
        return DatabaseLiveShare(db)
    return None
