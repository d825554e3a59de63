"""Small SQL helpers the repositories share, hiding the two dialects' differences."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Table, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from toolweave.store.tables import tenants, utcnow

TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$")


def check_tenant(tenant: str | None) -> None:
    """Reject ids that would be confusing in URLs, logs or a UI before they reach the database."""
    if tenant is not None and (not isinstance(tenant, str) or not TENANT_RE.match(tenant)):
        raise ValueError(
            f"invalid tenant id {tenant!r}: 1-128 characters, letters, digits and _ . : @ -, "
            "starting with a letter or digit"
        )


def require_json(value: Any, what: str) -> None:
    """Definitions must round-trip exactly; the engine's lenient serializer would quietly stringify."""
    try:
        orjson.dumps(value)
    except TypeError as error:
        raise ValueError(f"{what} is not JSON-serializable: {error}") from None


async def upsert(
    conn: AsyncConnection,
    table: Table,
    values: dict[str, Any],
    keys: Sequence[str],
    update: Sequence[str] = (),
) -> None:
    """INSERT, or on a key clash UPDATE `update` columns (nothing when empty), in one statement."""
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = dialect_insert(table).values(**values)
    if update:
        changes = {name: statement.excluded[name] for name in update}
        statement = statement.on_conflict_do_update(index_elements=list(keys), set_=changes)
    else:
        statement = statement.on_conflict_do_nothing(index_elements=list(keys))
    await conn.execute(statement)


async def ensure_tenant(conn: AsyncConnection, tenant: str | None) -> None:
    """Tenants come into being with their first key, tool or connection; no separate sign-up step."""
    if tenant is not None:
        await upsert(conn, tenants, {"id": tenant, "created_at": utcnow()}, ["id"])


async def lock_name(conn: AsyncConnection, namespace: str, name: str) -> None:
    """Serialise writers touching one name on PostgreSQL for the rest of the transaction.

    Unique indexes catch clashes within one tenant; a clash between a tenant's tool and
    a shared one spans two index keys, so the check-then-insert needs this lock. SQLite
    writers already hold the database write lock (BEGIN IMMEDIATE).
    """
    if conn.dialect.name != "postgresql":
        return
    digest = hashlib.sha256(f"{namespace}:{name}".encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})


def is_unique_violation(error: IntegrityError) -> bool:
    """True for duplicate keys on either dialect (asyncpg's sqlstate 23505, SQLite's UNIQUE message)."""
    original = error.orig
    sqlstate = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    if sqlstate is not None:
        return str(sqlstate) == "23505"
    return "UNIQUE constraint failed" in str(original)
