"""Handshake-era MCP sessions shared through the gateways' PostgreSQL, for deployments without Redis.

The same design as `shared.py` (a replica adopts a session another opened from its record, and the
replicas tell each other what changed), with the database in Redis's place:

- the records are rows of `mcp_sessions` (expiring `idle` seconds after the last request any replica
  served, renewed at most every `TOUCH_SECONDS` per session and replica, in the background);
- the channel is PostgreSQL's LISTEN/NOTIFY (`toolweave_mcp_<database identity>`), one asyncpg
  connection per gateway listening. A NOTIFY payload holds under 8000 bytes: a client's answer to a
  server request larger than `MAX_NOTIFY_BYTES` is served where it lands, not relayed;
- the session limits count the live rows of the tenant.

What it does not share: SSE events. Without Redis there is no event store, as on a single gateway:
a stream that breaks is not resumed with `Last-Event-ID` (a call whose stream broke is retried by its
client); notifications reach the client on its GET stream wherever that is, as with Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

import orjson
from sqlalchemy import delete, select, text, update
from sqlalchemy.dialects.postgresql import insert

from toolweave.server.mcp.shared import SessionSharing
from toolweave.services.change_feed import asyncpg_args, feed_identity
from toolweave.store.database import Database
from toolweave.store.tables import mcp_sessions

logger = logging.getLogger("toolweave.server")

DB_SECONDS = 10.0
"""A statement that takes longer is given up (the database is down or stuck); longer than Redis's
2 s: a loaded PostgreSQL's commit can take seconds, and giving up loses the session's sharing."""
SWEEP_SECONDS = 60.0
"""Expired session rows are removed at most this often per gateway."""
MAX_NOTIFY_BYTES = 7900
"""PostgreSQL refuses NOTIFY payloads of 8000 bytes and more."""
HEALTH_SECONDS = 15.0
"""The listening connection is checked this often (a silently dead link is noticed)."""
_TEXT_FIELDS = ("path", "tenant", "label", "version", "client", "state")


def postgres_channel(db: Database) -> str:
    return f"toolweave_mcp_{feed_identity(db)}"


class DatabaseSessionSharing(SessionSharing):
    """`SessionSharing` over the gateway's PostgreSQL: records in `mcp_sessions`, LISTEN/NOTIFY."""

    broker = "PostgreSQL"

    def __init__(self, db: Database, *, idle_seconds: float) -> None:
        super().__init__("", postgres_channel(db), idle_seconds=idle_seconds)
        self.db = db
        self.channel = self.namespace
        self.events = None
        self._swept = -SWEEP_SECONDS

    @property
    def redis(self) -> Any:
        raise RuntimeError("sessions shared through PostgreSQL use no Redis")

    # -- records -----------------------------------------------------------------------------

    async def save(self, session_id: str, fields: Mapping[str, bytes | str]) -> bool:
        """Write (part of) a session's record and renew its expiry; False when the database failed.
        Only a whole record (with `path`) creates a row: state alone is kept only for a live one."""
        if not self.available:
            return False
        values: dict[str, Any] = {
            name: value.decode() if isinstance(value, bytes) else value
            for name, value in fields.items()
            if name in _TEXT_FIELDS
        }
        values["expires_at"] = time.time() + self.idle
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.write() as conn:
                if "path" in values:
                    await self._sweep(conn)
                    values.setdefault("tenant", "")
                    values.setdefault("label", "")
                    upsert = insert(mcp_sessions).values(id=session_id, **values)
                    await conn.execute(upsert.on_conflict_do_update(index_elements=["id"], set_=values))
                else:
                    await conn.execute(
                        update(mcp_sessions).where(mcp_sessions.c.id == session_id).values(**values)
                    )
        except Exception as error:  # noqa: BLE001 - the database is down: the session stays this replica's
            self._down(error)
            return False
        self._touched[session_id] = time.monotonic()
        self._down_logged = False
        return True

    async def _sweep(self, conn: Any) -> None:
        """Remove expired rows, at most every `SWEEP_SECONDS` per gateway (on a session's opening):
        `held` removes a tenant's, but the local operator's (auth off) are counted by no tenant."""
        now = time.monotonic()
        if now - self._swept < SWEEP_SECONDS:
            return
        self._swept = now
        await conn.execute(delete(mcp_sessions).where(mcp_sessions.c.expires_at <= time.time()))

    async def load(self, session_id: str) -> dict[str, bytes] | None:
        if not self.available:
            return None
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.read() as conn:
                row = (
                    await conn.execute(
                        select(*(mcp_sessions.c[name] for name in _TEXT_FIELDS)).where(
                            mcp_sessions.c.id == session_id, mcp_sessions.c.expires_at > time.time()
                        )
                    )
                ).first()
        except Exception as error:  # noqa: BLE001
            self._down(error)
            return None
        if row is None:
            return None
        return {name: value.encode() for name, value in row._mapping.items() if value is not None}

    async def forget(self, session_id: str) -> None:
        """The session ended (DELETE, a revoked key): no replica serves it any more."""
        self._touched.pop(session_id, None)
        if not self.available:
            return
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.write() as conn:
                await conn.execute(delete(mcp_sessions).where(mcp_sessions.c.id == session_id))
        except Exception as error:  # noqa: BLE001
            self._down(error)
        await self.publish({"t": "end", "sid": session_id})

    async def _expire(self, session_id: str) -> None:
        if not self.available:
            return
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.write() as conn:
                await conn.execute(
                    update(mcp_sessions)
                    .where(mcp_sessions.c.id == session_id)
                    .values(expires_at=time.time() + self.idle)
                )
        except Exception as error:  # noqa: BLE001
            self._down(error)

    # -- cluster-wide counts (the session quota) ----------------------------------------------------

    async def counted(self, session_id: str, principal: tuple[str, str]) -> None:
        """Nothing to do: the session's row names its tenant and key."""

    async def held(self, tenant: str) -> dict[str, list[str]] | None:
        """Key label → the live sessions of a tenant across replicas (its expired rows are removed now);
        None when the database cannot say."""
        if not self.available:
            return None
        now = time.time()
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.write() as conn:
                await conn.execute(
                    delete(mcp_sessions).where(
                        mcp_sessions.c.tenant == tenant, mcp_sessions.c.expires_at <= now
                    )
                )
                rows = (
                    await conn.execute(
                        select(mcp_sessions.c.label, mcp_sessions.c.id).where(mcp_sessions.c.tenant == tenant)
                    )
                ).all()
        except Exception as error:  # noqa: BLE001
            self._down(error)
            return None
        keys: dict[str, list[str]] = {}
        for label, session_id in rows:
            keys.setdefault(label, []).append(session_id)
        return keys

    # -- the channel ---------------------------------------------------------------------------

    async def publish(self, message: dict[str, Any]) -> None:
        message["from"] = self.instance
        payload = orjson.dumps(message)
        if not self.available:
            return
        if len(payload) > MAX_NOTIFY_BYTES:
            logger.info(
                "MCP session %s: a %s message of %d bytes is too large for NOTIFY and is not relayed",
                message.get("sid"),
                message.get("t"),
                len(payload),
            )
            return
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.write() as conn:
                await conn.execute(
                    text("SELECT pg_notify(:channel, :payload)"),
                    {"channel": self.channel, "payload": payload.decode()},
                )
        except Exception as error:  # noqa: BLE001
            self._down(error)

    async def _listen(self) -> None:
        """Take the others' messages for sessions held here; reconnect when the database is back."""
        while True:
            try:
                await self._listen_once()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the database is down: retried
                self._down(error)
            await asyncio.sleep(1.0)

    async def _listen_once(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(**asyncpg_args(self.db))
        lost = asyncio.Event()
        try:
            conn.add_termination_listener(lambda _conn: lost.set())
            await conn.add_listener(self.channel, self._notified)
            self._down_logged = False
            self._down_until = 0.0
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lost.wait(), HEALTH_SECONDS)
                if lost.is_set() or conn.is_closed():
                    raise ConnectionError("the listening connection to PostgreSQL closed")
                await asyncio.wait_for(conn.execute("SELECT 1"), 10)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 2)
            if not conn.is_closed():
                conn.terminate()

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        self._spawn(self._heard(payload.encode()))
