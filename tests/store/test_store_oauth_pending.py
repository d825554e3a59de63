"""Authorizations in progress shared by the gateways on one database (`store.oauth_pending`), on
SQLite and PostgreSQL: a callback claims one once, the starter reads the redirect, the outcome
travels back; expired, unknown and already claimed ones are refused; no state or code in clear."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from toolweave.store import Database, PendingAuthorizations, SecretBox
from toolweave.store.tables import oauth_pending

BOX = SecretBox("test-key", "the test")


async def _two(make_db: Callable[[], Database]) -> tuple[PendingAuthorizations, PendingAuthorizations]:
    first, second = make_db(), make_db()
    await first.start()
    await second.start()
    return PendingAuthorizations(first, BOX), PendingAuthorizations(second, BOX)


async def test_a_claim_is_taken_once_and_the_outcome_goes_back(make_db: Callable[[], Database]) -> None:
    starter, other = await _two(make_db)
    await starter.add("state-1", "people", ttl=60)
    redirect = {"code": "the-code-abc", "iss": "http://as", "error": None}
    assert await other.redirects(["state-1"]) == {}
    assert await other.claim("state-1", redirect) == "people"
    assert await other.claim("state-1", redirect) is None  # used once
    assert await starter.redirects(["state-1", "state-2"]) == {"state-1": redirect}
    assert await other.outcome("state-1") is None
    await starter.finish("state-1", True, "people")
    assert await other.outcome("state-1") == (True, "people")
    assert await starter.redirects(["state-1"]) == {}  # finished: not picked up again
    await other.forget("state-1")
    assert await other.outcome("state-1") is None


async def test_unknown_and_expired_authorizations_are_refused(make_db: Callable[[], Database]) -> None:
    starter, other = await _two(make_db)
    assert await other.claim("never-started", {"code": "c"}) is None
    await starter.add("old", "people", ttl=-1)
    assert await other.claim("old", {"code": "c"}) is None
    await starter.add("state-zzz", "people", ttl=60)  # adding drops the expired rows
    assert await other.claim("state-zzz", {"code": "code-qqq"}) == "people"
    db = make_db()
    await db.start()
    async with db.read() as conn:
        rows: list[Any] = (await conn.execute(select(oauth_pending))).all()
    assert len(rows) == 1
    assert "state-zzz" not in repr(rows) and len(rows[0].state_hash) == 64  # its hash, not the state
    assert b"code-qqq" not in bytes(rows[0].redirect)  # the code, encrypted
