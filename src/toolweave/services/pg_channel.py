"""A channel between the gateways on one PostgreSQL (no Redis): LISTEN/NOTIFY, payloads of any size.

PostgreSQL refuses a NOTIFY payload of 8000 bytes or more. A payload under `MAX_NOTIFY_BYTES` goes
in the notification itself; a larger one is written to `channel_messages` and the notification
carries `@<row id>`, which each listener reads back (one indexed read). Rows are deleted after
`KEEP_SECONDS` (by the next large publish, at most once a `KEEP_SECONDS` per gateway): a listener
that reads later than that misses the message, as it would miss a NOTIFY sent while it was
disconnected. Payloads are the users' JSON, which never starts with `@`.

One asyncpg connection per channel listens (the database's pool publishes); `follow` runs until
cancelled and reconnects after a loss, telling `down` once per loss.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import delete, insert, select, text

from toolweave.services.change_feed import asyncpg_args
from toolweave.store import Database
from toolweave.store.tables import channel_messages
from toolweave.waiting import set_within, within

logger = logging.getLogger("toolweave.sync")

MAX_NOTIFY_BYTES = 7900
"""PostgreSQL refuses NOTIFY payloads of 8000 bytes and more (the channel name counts too)."""
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
"""A larger payload is refused (`publish` raises ValueError)."""
KEEP_SECONDS = 60.0
"""How long a large payload's row is kept for its listeners."""
HEALTH_SECONDS = 15.0
"""The listening connection is checked this often (a silently dead link is noticed)."""
REFERENCE = "@"


class PostgresChannel:
    """One NOTIFY channel (`name`: letters, digits, underscores) of the database `db`."""

    def __init__(self, db: Database, name: str) -> None:
        self.db = db
        self.name = name
        self._swept = 0.0
        self._reads: set[asyncio.Task[None]] = set()

    async def publish(self, payload: str) -> None:
        """Send `payload` to every listener (this gateway's too); raises when the database fails."""
        size = len(payload.encode())
        if size > MAX_PAYLOAD_BYTES:
            raise ValueError(f"a message of {size} bytes is too large for the channel")
        async with self.db.write() as conn:
            if size >= MAX_NOTIFY_BYTES or payload.startswith(REFERENCE):
                now = time.time()
                if now - self._swept >= KEEP_SECONDS:
                    self._swept = now
                    await conn.execute(
                        delete(channel_messages).where(channel_messages.c.created_at < now - KEEP_SECONDS)
                    )
                row = await conn.execute(
                    insert(channel_messages)
                    .values(payload=payload, created_at=now)
                    .returning(channel_messages.c.id)
                )
                payload = f"{REFERENCE}{row.scalar_one()}"
            await conn.execute(
                text("SELECT pg_notify(:channel, :payload)"), {"channel": self.name, "payload": payload}
            )

    async def follow(
        self,
        received: Callable[[str], Awaitable[None]],
        down: Callable[[BaseException], None],
        up: Callable[[], None] = lambda: None,
    ) -> None:
        """Hand every message's payload to `received` until cancelled; `down` on each loss (then
        reconnect after a second), `up` each time the listener is connected."""
        while True:
            try:
                await self._follow_once(received, up)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the database is down: retried
                down(error)
            await asyncio.sleep(1.0)

    async def _follow_once(self, received: Callable[[str], Awaitable[None]], up: Callable[[], None]) -> None:
        import asyncpg

        conn = await asyncpg.connect(**asyncpg_args(self.db))
        lost = asyncio.Event()

        def notified(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            task = asyncio.get_running_loop().create_task(self._deliver(payload, received))
            self._reads.add(task)
            task.add_done_callback(self._reads.discard)

        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            await conn.add_listener(self.name, notified)
            up()
            while True:
                await set_within(lost, HEALTH_SECONDS)
                if lost.is_set() or conn.is_closed():
                    raise ConnectionError("the listening connection to PostgreSQL closed")
                await within(10, conn.execute("SELECT 1"))
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2)
            if not conn.is_closed():
                conn.terminate()

    async def _deliver(self, payload: str, received: Callable[[str], Awaitable[None]]) -> None:
        try:
            if payload.startswith(REFERENCE):
                found = await self._read(payload[len(REFERENCE) :])
                if found is None:
                    return
                payload = found
            await received(payload)
        except Exception:
            logger.exception("a message on %s could not be handled", self.name)

    async def _read(self, reference: str) -> str | None:
        if not reference.isdigit():
            return None
        async with self.db.read() as conn:
            row = await conn.execute(
                select(channel_messages.c.payload).where(channel_messages.c.id == int(reference))
            )
            return row.scalar_one_or_none()

    async def close(self) -> None:
        for task in list(self._reads):
            task.cancel()
        for task in list(self._reads):
            with contextlib.suppress(BaseException):
                await task
