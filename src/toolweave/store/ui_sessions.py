"""The web UI's logged-in browser sessions, in the database every gateway shares.

A row holds the SHA-256 of the session cookie (the cookie itself is never stored, so
reading the table gives no way into a session) and the id of the API key the browser
logged in with (never the key: every request looks the key up by id, so a revoked or
deleted key ends its sessions on every gateway). `last_seen` is refreshed at most every
`TOUCH_SECONDS`, so a page view is normally one indexed read. Sessions idle longer than
the UI's `session_idle` are gone; each login removes the expired ones and keeps at most
`MAX_PER_KEY` sessions per key (the oldest go), so no key can grow the table without bound.

A login through an identity provider has no key: its `key_id` is `sso:` and a hash of the
issuer and subject (so one person, too, holds at most `MAX_PER_KEY` sessions) and `identity`
holds what the provider's token said (tenant, subject, scopes, expiry); it ends when the token
would have expired.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from sqlalchemy import delete, select, update

from toolweave.store.database import Database
from toolweave.store.tables import ui_sessions

TOUCH_SECONDS = 60.0
"""At most this often a session's `last_seen` is written (the idle timeout is that coarse)."""
MAX_PER_KEY = 50
"""Logged-in sessions one API key may hold at once; a new login drops the oldest beyond it."""


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class UiSessionRepository:
    def __init__(self, db: Database, idle_seconds: float) -> None:
        self._db = db
        self.idle_seconds = idle_seconds

    async def create(self, session_id: str, key_id: str, identity: dict[str, Any] | None = None) -> None:
        """Record a login; expired sessions, and this key's oldest beyond `MAX_PER_KEY`, are removed."""
        now = time.time()
        async with self._db.write() as conn:
            await conn.execute(delete(ui_sessions).where(ui_sessions.c.last_seen < now - self.idle_seconds))
            await conn.execute(
                ui_sessions.insert().values(
                    id_hash=session_hash(session_id),
                    key_id=key_id,
                    created_at=now,
                    last_seen=now,
                    identity=identity,
                )
            )
            kept = (
                select(ui_sessions.c.id_hash)
                .where(ui_sessions.c.key_id == key_id)
                .order_by(ui_sessions.c.last_seen.desc(), ui_sessions.c.created_at.desc())
                .limit(MAX_PER_KEY)
            )
            await conn.execute(
                delete(ui_sessions).where(ui_sessions.c.key_id == key_id, ui_sessions.c.id_hash.not_in(kept))
            )

    async def key_of(self, session_id: str) -> str | None:
        """The API key id a live session acts with (None: unknown or expired, which is then dropped)."""
        found = await self.login_of(session_id)
        return found[0] if found is not None else None

    async def login_of(self, session_id: str) -> tuple[str, dict[str, Any] | None] | None:
        """(key id, identity) of a live session (None: unknown or expired, which is then dropped)."""
        digest = session_hash(session_id)
        async with self._db.read() as conn:
            row = (
                await conn.execute(
                    select(ui_sessions.c.key_id, ui_sessions.c.last_seen, ui_sessions.c.identity).where(
                        ui_sessions.c.id_hash == digest
                    )
                )
            ).one_or_none()
        if row is None:
            return None
        now = time.time()
        if now - row.last_seen > self.idle_seconds:
            await self.drop(session_id)
            return None
        if now - row.last_seen > min(TOUCH_SECONDS, self.idle_seconds / 10):
            async with self._db.write() as conn:
                await conn.execute(
                    update(ui_sessions).where(ui_sessions.c.id_hash == digest).values(last_seen=now)
                )
        return str(row.key_id), row.identity

    async def drop(self, session_id: str) -> None:
        async with self._db.write() as conn:
            await conn.execute(delete(ui_sessions).where(ui_sessions.c.id_hash == session_hash(session_id)))
