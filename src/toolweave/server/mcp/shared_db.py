"""Handshake-era MCP sessions shared through the gateways' PostgreSQL, for deployments without Redis.

The same design as `shared.py` (a replica adopts a session another opened from its record, and the
replicas tell each other what changed), with the database in Redis's place:

- the records are rows of `mcp_sessions` (expiring `idle` seconds after the last request any replica
  served, renewed at most every `TOUCH_SECONDS` per session and replica, in the background);
- the channel is PostgreSQL's LISTEN/NOTIFY (`toolweave_mcp_<database identity>`, one asyncpg
  connection per gateway listening) through `services.pg_channel`: a message NOTIFY cannot carry
  (a client's large answer to a server request) is put in `channel_messages` and its row id sent;
- SSE events are kept in `mcp_events` (`events_db.py`), so a stream resumes with `Last-Event-ID` on
  any replica, as with Redis;
- the session limits count the live rows of the tenant.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import orjson
from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert

from toolweave.server.mcp.events_db import DatabaseEvents
from toolweave.server.mcp.shared import SessionSharing
from toolweave.services.change_feed import feed_identity
from toolweave.services.pg_channel import PostgresChannel
from toolweave.store.database import Database
from toolweave.store.tables import mcp_sessions

logger = logging.getLogger("toolweave.server")

DB_SECONDS = 10.0
"""A statement that takes longer is given up (the database is down or stuck); longer than Redis's
2 s: a loaded PostgreSQL's commit can take seconds, and giving up loses the session's sharing."""
SWEEP_SECONDS = 60.0
"""Expired session rows are removed at most this often per gateway."""
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
        self.notifications = PostgresChannel(db, self.namespace)
        self.events = DatabaseEvents(self)
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
        if not self.available:
            return
        try:
            async with asyncio.timeout(DB_SECONDS):
                await self.notifications.publish(orjson.dumps(message).decode())
        except Exception as error:  # noqa: BLE001
            self._down(error)

    async def _listen(self) -> None:
        """Take the others' messages for sessions held here; reconnect when the database is back."""

        async def received(payload: str) -> None:
            await self._heard(payload.encode())

        await self.notifications.follow(received, self._down, self._connected)

    def _connected(self) -> None:
        self._down_logged = False
        self._down_until = 0.0

    async def close(self) -> None:
        await super().close()
        await self.notifications.close()
