"""SSE events of shared MCP sessions kept in PostgreSQL (no Redis), so a stream resumes with
`Last-Event-ID` on any replica there too.

The same store as `events.RedisEvents` (read its docstring: event IDs, what is kept, the replay rules),
with rows of `mcp_events` in place of Redis Streams: one row per event, keyed by (session, replica,
that replica's sequence number).

- **Written behind** like the Redis store: `store_event` numbers the event and queues it; one
  multi-row INSERT every `FLUSH_SECONDS` writes every queued event of the replica, in one transaction.
- **Bounded per session and replica** like it: at most `MAX_EVENTS` events and `MAX_BYTES` bytes. The
  replica counts what it wrote of each session; past either bound the same transaction deletes the
  oldest rows down to `TRIM_TO` of both (one statement; so a long session is trimmed every ~100
  events, not on every write), always keeping the newest.
- **Expiry**: each row expires `idle` seconds after its write; a sweep (at most every `SWEEP_SECONDS`
  per replica, in a write's transaction) deletes the events of a session and replica whose newest
  row expired, as Redis drops a stream `idle` seconds after its last event. `forget` (DELETE, a
  revoked key) removes a session's rows at once.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol

from sqlalchemy import delete, select, text

from toolweave.server.mcp import events
from toolweave.server.mcp.events import Entry, Pending, SharedEvents, Sharing
from toolweave.store.database import Database
from toolweave.store.tables import mcp_events

DB_SECONDS = 10.0
"""A statement that takes longer is given up (as `shared_db.DB_SECONDS`)."""
SWEEP_SECONDS = 60.0
TRIM_TO = 0.9
"""A session past a bound is trimmed to this fraction of both bounds."""

_TRIM = text(
    """
DELETE FROM mcp_events
WHERE session_id = :session AND replica = :replica AND seq < (
    SELECT min(seq) FROM (
        SELECT seq, row_number() OVER w AS n, sum(size) OVER w AS total
        FROM mcp_events WHERE session_id = :session AND replica = :replica
        WINDOW w AS (ORDER BY seq DESC)
    ) AS ranked
    WHERE n = 1 OR (n <= :count AND total <= :bytes)
)
"""
)
"""The oldest events of a session and replica, past `count` events or `bytes` bytes counted from the
newest (which is always kept): one scan for the first sequence number kept (an InitPlan), then one
range delete (a join with the ranked rows planned as a nested loop: quadratic, 1.1 s at 1000 rows)."""
_INSERT = (
    "INSERT INTO mcp_events (session_id, replica, seq, stream_id, data, size, expires_at) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING"
)
_KEPT = text(
    "SELECT count(*), coalesce(sum(size), 0) FROM mcp_events WHERE session_id = :session AND replica = :replica"
)
_SWEEP = text(
    """
DELETE FROM mcp_events AS e WHERE e.expires_at < :now AND NOT EXISTS (
    SELECT 1 FROM mcp_events AS n
    WHERE n.session_id = e.session_id AND n.replica = e.replica AND n.expires_at >= :now
)
"""
)


class DatabaseSharing(Sharing, Protocol):
    """And its database (`shared_db.DatabaseSessionSharing`)."""

    db: Database


class DatabaseEvents(SharedEvents):
    """In PostgreSQL: rows of `mcp_events`."""

    def __init__(self, sharing: DatabaseSharing) -> None:
        super().__init__(sharing)
        self.db = sharing.db
        self._kept: dict[str, list[int]] = {}
        """Session → [events, bytes] this replica wrote of it and has not trimmed (an estimate: rows
        swept or forgotten elsewhere are still counted until the next trim recounts them)."""
        self._swept = time.monotonic()

    async def _write(self, batch: list[Pending]) -> None:
        sharing = self.sharing
        if not sharing.available:
            return
        expires = time.time() + sharing.idle
        rows: list[tuple[str, str, int, str, str, int, float]] = []
        for event in batch:
            data = self._encoded(event).decode()
            size = len(data) + len(event.stream_id)
            rows.append((event.session_id, self.tag, event.seq, event.stream_id, data, size, expires))
            if len(self._kept) > 10_000:
                self._kept.clear()  # bounded: forgetting only delays a session's next trim
            kept = self._kept.setdefault(event.session_id, [0, 0])
            kept[0] += 1
            kept[1] += size
        over = [
            session_id
            for session_id, (count, size) in self._kept.items()
            if count > events.MAX_EVENTS or size > events.MAX_BYTES
        ]
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.write() as conn:
                # the driver's own executemany (one prepared statement, pipelined): a flush through
                # SQLAlchemy's executemany cost 0.1-0.3 ms more CPU per flush of 10-40 events
                driver: Any = (await conn.get_raw_connection()).driver_connection
                await driver.executemany(_INSERT, rows)
                for session_id in over:
                    where = {"session": session_id, "replica": self.tag}
                    await conn.execute(
                        _TRIM,
                        {
                            **where,
                            "count": int(events.MAX_EVENTS * TRIM_TO),
                            "bytes": int(events.MAX_BYTES * TRIM_TO),
                        },
                    )
                    count, size = (await conn.execute(_KEPT, where)).one()
                    self._kept[session_id] = [int(count), int(size)]
                if time.monotonic() - self._swept >= SWEEP_SECONDS:
                    self._swept = time.monotonic()
                    await conn.execute(_SWEEP, {"now": time.time()})
                    self._kept.clear()  # recounted from zero: an underestimate until the next trim
        except Exception as error:  # noqa: BLE001 - the database is down: these events were sent, not kept
            sharing._down(error)
        else:
            self._full_logged = False

    async def _read(self, session_id: str, tag: str, first: int) -> list[Entry] | None:
        sharing = self.sharing
        if not sharing.available:
            return None
        columns = mcp_events.c
        query = (
            select(columns.seq, columns.stream_id, columns.data)
            .where(columns.session_id == session_id, columns.replica == tag, columns.seq >= first)
            .order_by(columns.seq)
            .limit(events.MAX_EVENTS + 1)
        )
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.read() as conn:
                found = (await conn.execute(query)).all()
        except Exception as error:  # noqa: BLE001
            sharing._down(error)
            return None
        return [Entry(int(seq), stream_id, data.encode()) for seq, stream_id, data in found]

    async def forget(self, session_id: str) -> None:
        sharing = self.sharing
        self._kept.pop(session_id, None)
        if not sharing.available:
            return
        try:
            async with asyncio.timeout(DB_SECONDS), self.db.write() as conn:
                await conn.execute(delete(mcp_events).where(mcp_events.c.session_id == session_id))
        except Exception as error:  # noqa: BLE001
            sharing._down(error)
