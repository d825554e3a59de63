"""Backend credentials per tenant ("connections"), encrypted at rest.

Only the key *names* are stored in clear, so listing works without the secret
key and shows what is configured without showing any value. The encrypted
payload also names its tenant and backend: a blob copied onto another row
fails to decrypt instead of handing one tenant's credentials to another.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict

import orjson
from sqlalchemy import ColumnElement, and_, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from toolweave.actor import Actor
from toolweave.fields import BACKEND_NAME_RE
from toolweave.store._sql import check_tenant, ensure_tenant, lock_name
from toolweave.store.audit import write_audit
from toolweave.store.crypto import SecretBox, SecretDict
from toolweave.store.database import Database
from toolweave.store.errors import NotFound, SecretKeyError
from toolweave.store.tables import connections, utcnow


class ConnectionSummary(TypedDict):
    backend: str
    keys: list[str]
    """Names only: the values never leave `get`."""
    updated_at: datetime


def _check_backend(backend: str) -> None:
    if not isinstance(backend, str) or not BACKEND_NAME_RE.match(backend):
        raise ValueError(f"invalid backend name {backend!r}: must match ^[a-z0-9][a-z0-9_-]{{0,31}}$")


def _check_secrets(values: Mapping[str, str]) -> dict[str, str]:
    """Messages name the offending key, never its value."""
    if not isinstance(values, Mapping) or not values:
        raise ValueError("a connection needs at least one secret, given as a mapping of name to value")
    for name, value in values.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError("secret names must be non-empty strings")
        if not isinstance(value, str):
            raise ValueError(f"the value of secret {name!r} must be a string")
    return {name: values[name] for name in sorted(values)}


def _scope(tenant: str | None, backend: str) -> ColumnElement[bool]:
    owner = connections.c.tenant.is_(None) if tenant is None else connections.c.tenant == tenant
    return and_(owner, connections.c.backend == backend)


def _describe(tenant: str | None, backend: str) -> str:
    return (
        f"the connection of tenant {tenant!r} to backend {backend!r}"
        if tenant
        else f"the connection {backend!r}"
    )


class ConnectionRepository:
    """`tenant=None` is the connection used when auth is off (or a deliberate operator-wide one).

    The secret key is resolved on first encrypt/decrypt (see `crypto`), so listing and
    deleting work even where no key is configured.
    """

    def __init__(
        self, db: Database, box: SecretBox | None = None, *, key_file: str | os.PathLike[str] | None = None
    ) -> None:
        self._db = db
        self._box = box
        self._key_file = key_file

    def __repr__(self) -> str:
        return f"ConnectionRepository({self._db!r})"

    @property
    def box(self) -> SecretBox:
        if self._box is None:
            self._box = SecretBox.resolve(self._db, key_file=self._key_file)
        return self._box

    async def put(
        self, tenant: str | None, backend: str, secrets: Mapping[str, str], *, actor: Actor | None = None
    ) -> ConnectionSummary:
        """Create or replace the tenant's secrets for `backend` (the whole set, not a merge).
        With `actor`, the audit record (the header names, never their values) commits with it."""
        check_tenant(tenant)
        _check_backend(backend)
        values = _check_secrets(secrets)
        payload = orjson.dumps({"tenant": tenant, "backend": backend, "secrets": values})
        blob = self.box.encrypt(payload)
        now = utcnow()
        async with self._db.write() as conn:
            await ensure_tenant(conn, tenant)
            await lock_name(conn, "connection", f"{tenant or ''}/{backend}")
            await _save(conn, tenant, backend, {"key_names": list(values), "secret": blob, "updated_at": now})
            await _audit(conn, actor, "connection.stored", tenant, backend, {"keys": list(values)})
        return {"backend": backend, "keys": list(values), "updated_at": now}

    async def get(self, tenant: str | None, backend: str) -> SecretDict | None:
        """The decrypted secrets, or None when the tenant has no connection to `backend`."""
        async with self._db.read() as conn:
            row = (
                await conn.execute(select(connections.c.secret).where(_scope(tenant, backend)))
            ).one_or_none()
        if row is None:
            return None
        return self._open(row.secret, tenant, backend)

    async def list(self, tenant: str | None) -> list[ConnectionSummary]:
        query = (
            select(connections.c.backend, connections.c.key_names, connections.c.updated_at)
            .where(connections.c.tenant.is_(None) if tenant is None else connections.c.tenant == tenant)
            .order_by(connections.c.backend)
        )
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [{"backend": r.backend, "keys": list(r.key_names), "updated_at": r.updated_at} for r in rows]

    async def delete(self, tenant: str | None, backend: str, *, actor: Actor | None = None) -> None:
        async with self._db.write() as conn:
            result = await conn.execute(delete(connections).where(_scope(tenant, backend)))
            if result.rowcount == 1:
                await _audit(conn, actor, "connection.deleted", tenant, backend, None)
        if result.rowcount == 0:
            raise NotFound(f"{_describe(tenant, backend)} does not exist")

    async def check_key(self) -> None:
        """Decrypt the newest connection, so a wrong key is reported at startup, not at the first call."""
        query = select(connections).order_by(connections.c.updated_at.desc()).limit(1)
        async with self._db.read() as conn:
            row = (await conn.execute(query)).one_or_none()
        if row is not None:
            self._open(row.secret, row.tenant, row.backend)

    def _open(self, blob: bytes, tenant: str | None, backend: str) -> SecretDict:
        what = _describe(tenant, backend)
        payload: Any = orjson.loads(self.box.decrypt(bytes(blob), what))
        if payload.get("tenant") != tenant or payload.get("backend") != backend:
            raise SecretKeyError(f"{what} holds data encrypted for another tenant or backend; refusing it")
        return SecretDict(payload["secrets"])


async def _audit(
    conn: AsyncConnection,
    actor: Actor | None,
    action: str,
    tenant: str | None,
    backend: str,
    detail: dict[str, Any] | None,
) -> None:
    await write_audit(
        conn,
        actor,
        action,
        tenant=tenant,
        object_type="connection",
        object_id=backend,
        object_name=backend,
        detail=detail,
    )


async def _save(conn: AsyncConnection, tenant: str | None, backend: str, values: dict[str, Any]) -> None:
    """Update in place or insert; the caller holds the name lock, so there is no insert race."""
    result = await conn.execute(update(connections).where(_scope(tenant, backend)).values(**values))
    if result.rowcount == 0:
        row = {
            "id": uuid.uuid4().hex,
            "tenant": tenant,
            "backend": backend,
            "created_at": values["updated_at"],
        }
        await conn.execute(connections.insert().values(**row, **values))
