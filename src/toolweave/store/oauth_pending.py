"""Authorizations a served gateway started and a person has not finished yet, shared by every gateway
on the database: the `/oauth/callback` a browser brings back may reach any replica.

A row is keyed by the SHA-256 of the authorization's `state` (the state itself is a credential and
is never stored) and lives `LOGIN_TTL` seconds. The gateway that started the authorization keeps the
flow, and its PKCE verifier, in memory (the verifier never leaves the process that made it, so a
code read from here is useless to anyone else). Whichever gateway the callback reaches *claims* the
row, once (an atomic update: a second callback with the same link is refused), writing the redirect's
code into it encrypted; the starting gateway picks it up, exchanges it, and writes the outcome, which
the callback's gateway shows the person.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import orjson
from sqlalchemy import and_, delete, select, update

from toolweave.store.crypto import SecretBox
from toolweave.store.database import Database
from toolweave.store.tables import oauth_pending


def state_key(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


class PendingAuthorizations:
    """`add` a started authorization, `claim` it with its redirect (once), `redirects` for the starter
    to pick up, `finish` with the outcome, `outcome` for the claimer to show."""

    def __init__(self, db: Database, box: SecretBox | None = None) -> None:
        self._db = db
        self._box = box

    def __repr__(self) -> str:
        return f"PendingAuthorizations({self._db!r})"

    @property
    def box(self) -> SecretBox:
        if self._box is None:
            self._box = SecretBox.resolve(self._db)
        return self._box

    async def add(self, state: str, backend: str, ttl: float) -> None:
        """Record a started authorization (and drop the expired ones)."""
        now = time.time()
        row = {"state_hash": state_key(state), "backend": backend, "expires_at": now + ttl}
        async with self._db.write() as conn:
            await conn.execute(delete(oauth_pending).where(oauth_pending.c.expires_at < now))
            await conn.execute(oauth_pending.insert().values(**row))

    async def claim(self, state: str, redirect: dict[str, Any]) -> str | None:
        """Hand the redirect (`code`, `iss`, `error`) to the authorization of `state`: its backend, or
        None when there is none to complete (unknown, expired or already claimed)."""
        key = state_key(state)
        blob = self.box.encrypt(orjson.dumps({"state": key, "redirect": redirect}))
        claimable = and_(
            oauth_pending.c.state_hash == key,
            oauth_pending.c.redirect.is_(None),
            oauth_pending.c.expires_at >= time.time(),
        )
        async with self._db.write() as conn:
            done = await conn.execute(update(oauth_pending).where(claimable).values(redirect=blob))
            if done.rowcount != 1:
                return None
            row = (
                await conn.execute(select(oauth_pending.c.backend).where(oauth_pending.c.state_hash == key))
            ).one()
        return str(row.backend)

    async def redirects(self, states: list[str]) -> dict[str, dict[str, Any]]:
        """The claimed redirects among `states` whose outcome is not written yet, by state."""
        by_key = {state_key(state): state for state in states}
        query = select(oauth_pending.c.state_hash, oauth_pending.c.redirect).where(
            oauth_pending.c.state_hash.in_(list(by_key)),
            oauth_pending.c.redirect.is_not(None),
            oauth_pending.c.outcome.is_(None),
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        found: dict[str, dict[str, Any]] = {}
        for row in rows:
            payload = orjson.loads(self.box.decrypt(bytes(row.redirect), "a pending OAuth authorization"))
            if payload.get("state") == row.state_hash:  # a blob copied onto another row is refused
                found[by_key[row.state_hash]] = payload["redirect"]
        return found

    async def finish(self, state: str, ok: bool, outcome: str) -> None:
        """The starter's word on how the authorization ended (for the gateway that took the callback)."""
        values = {"ok": ok, "outcome": outcome[:500] or "failed", "redirect": None}
        async with self._db.write() as conn:
            await conn.execute(
                update(oauth_pending).where(oauth_pending.c.state_hash == state_key(state)).values(**values)
            )

    async def outcome(self, state: str) -> tuple[bool, str] | None:
        """(succeeded, backend or why not) once the starter finished; None while it has not."""
        query = select(oauth_pending.c.ok, oauth_pending.c.outcome).where(
            oauth_pending.c.state_hash == state_key(state), oauth_pending.c.outcome.is_not(None)
        )
        async with self._db.read() as conn:
            row = (await conn.execute(query)).one_or_none()
        return None if row is None else (bool(row.ok), str(row.outcome))

    async def forget(self, state: str) -> None:
        async with self._db.write() as conn:
            await conn.execute(delete(oauth_pending).where(oauth_pending.c.state_hash == state_key(state)))
