"""Virtual servers defined through the API, with their version history.

As composite tools (store/composites.py): every change writes a new version row and bumps
`version`, so an editor can pass `expected_version` and never overwrite someone else's edit;
deletion is soft (the versions stay) and frees the name. A server's name is one URL path
segment (`/servers/{name}/mcp`), so it is unique across tenants, not per tenant.

The store keeps its own invariants only (a mapping with a usable name, JSON-serializable);
validating a definition against the config model and the catalog is the caller's job
(`services/servers.py`), done before it is stored. Each change writes its audit record in
its own transaction.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Select, and_, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from toolweave.actor import Actor
from toolweave.config.servers import SERVER_NAME_RE
from toolweave.store._sql import check_tenant, ensure_tenant, is_unique_violation, lock_name, require_json
from toolweave.store.audit import write_audit
from toolweave.store.database import Database
from toolweave.store.errors import Conflict, Forbidden, NotFound
from toolweave.store.tables import utcnow
from toolweave.store.tables import virtual_server_versions as versions_t
from toolweave.store.tables import virtual_servers as servers_t


@dataclass(frozen=True, slots=True)
class StoredServer:
    id: str
    tenant: str | None
    """None: the operator's, shared like the config file's."""
    name: str
    version: int
    definition: dict[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ServerVersion:
    server_id: str
    version: int
    definition: dict[str, Any]
    note: str | None
    created_at: datetime


def _name_of(definition: Any) -> str:
    if not isinstance(definition, Mapping):
        raise ValueError("a virtual server definition must be a mapping")
    name = definition.get("name")
    if not isinstance(name, str) or not SERVER_NAME_RE.match(name):
        raise ValueError(f"server name {name!r} must match {SERVER_NAME_RE.pattern}")
    require_json(definition, "the virtual server definition")
    return name


def _visible(tenant: str | None) -> Any:
    """A tenant sees its own servers; the operator (no tenant) sees every one."""
    alive = servers_t.c.deleted_at.is_(None)
    return alive if tenant is None else and_(alive, servers_t.c.tenant == tenant)


def _current() -> Select[Any]:
    joined = servers_t.join(
        versions_t,
        and_(versions_t.c.server_id == servers_t.c.id, versions_t.c.version == servers_t.c.version),
    )
    return select(servers_t, versions_t.c.definition).select_from(joined)


def _stored(row: Row[Any]) -> StoredServer:
    return StoredServer(
        id=row.id,
        tenant=row.tenant,
        name=row.name,
        version=row.version,
        definition=row.definition,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def _find(conn: AsyncConnection, id_or_name: str, tenant: str | None) -> Row[Any]:
    query = _current().where(
        or_(servers_t.c.id == id_or_name, servers_t.c.name == id_or_name), _visible(tenant)
    )
    row: Row[Any] | None = (await conn.execute(query.limit(1))).one_or_none()
    if row is None:
        raise NotFound(f"virtual server {id_or_name!r} not found")
    return row


async def _find_writable(conn: AsyncConnection, id_or_name: str, tenant: str | None) -> Row[Any]:
    found = await _find(conn, id_or_name, tenant)
    query = select(servers_t).where(servers_t.c.id == found.id, servers_t.c.deleted_at.is_(None))
    row = (await conn.execute(query.with_for_update())).one_or_none()
    if row is None:
        raise NotFound(f"virtual server {id_or_name!r} not found")
    if tenant is not None and row.tenant != tenant:
        raise Forbidden(f"virtual server {row.name!r} is not this tenant's")
    return row


async def _check_name_free(conn: AsyncConnection, name: str, exclude_id: str | None = None) -> None:
    await lock_name(conn, "server", name)
    query = select(servers_t.c.id).where(servers_t.c.name == name, servers_t.c.deleted_at.is_(None))
    if exclude_id is not None:
        query = query.where(servers_t.c.id != exclude_id)
    if (await conn.execute(query.limit(1))).one_or_none() is not None:
        raise Conflict(f"a virtual server named {name!r} already exists on this gateway")


async def _add_version(
    conn: AsyncConnection, server_id: str, version: int, definition: Mapping[str, Any], note: str | None
) -> None:
    values = {"server_id": server_id, "version": version, "definition": dict(definition), "note": note}
    await conn.execute(versions_t.insert().values(**values, created_at=utcnow()))


async def _audit(
    conn: AsyncConnection,
    actor: Actor | None,
    action: str,
    tenant: str | None,
    server_id: str,
    name: str,
    before: int | None,
    after: int | None,
    detail: dict[str, Any],
) -> None:
    await write_audit(
        conn,
        actor,
        action,
        tenant=tenant,
        object_type="server",
        object_id=server_id,
        object_name=name,
        before=before,
        after=after,
        detail={key: value for key, value in detail.items() if value is not None} or None,
    )


class ServerRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self,
        tenant: str | None,
        definition: Mapping[str, Any],
        note: str | None = None,
        *,
        actor: Actor | None = None,
    ) -> StoredServer:
        """A new server at version 1; with `actor`, its audit record in the same transaction."""
        check_tenant(tenant)
        name = _name_of(definition)
        server_id = str(uuid.uuid4())
        now = utcnow()
        values = {"id": server_id, "tenant": tenant, "name": name, "version": 1}
        try:
            async with self._db.write() as conn:
                await ensure_tenant(conn, tenant)
                await _check_name_free(conn, name)
                await conn.execute(servers_t.insert().values(**values, created_at=now, updated_at=now))
                await _add_version(conn, server_id, 1, definition, note)
                await _audit(conn, actor, "server.created", tenant, server_id, name, None, 1, {"note": note})
        except IntegrityError as error:
            if is_unique_violation(error):
                raise Conflict(f"a virtual server named {name!r} already exists on this gateway") from None
            raise
        return await self.get(server_id, tenant)

    async def get(self, id_or_name: str, tenant: str | None) -> StoredServer:
        async with self._db.read() as conn:
            return _stored(await _find(conn, id_or_name, tenant))

    async def list(self, tenant: str | None) -> list[StoredServer]:
        query = _current().where(_visible(tenant)).order_by(servers_t.c.name)
        async with self._db.read() as conn:
            return [_stored(row) for row in (await conn.execute(query)).all()]

    async def list_all(self) -> builtins.list[StoredServer]:
        """Every tenant's servers (not deleted), oldest first: for the gateway itself."""
        query = (
            _current()
            .where(servers_t.c.deleted_at.is_(None))
            .order_by(servers_t.c.created_at, servers_t.c.id)
        )
        async with self._db.read() as conn:
            return [_stored(row) for row in (await conn.execute(query)).all()]

    async def update(
        self,
        id_or_name: str,
        tenant: str | None,
        definition: Mapping[str, Any],
        note: str | None = None,
        expected_version: int | None = None,
        *,
        actor: Actor | None = None,
    ) -> StoredServer:
        """Store `definition` as the next version; Conflict if `expected_version` is not current."""
        if expected_version is not None and (
            isinstance(expected_version, bool)
            or not isinstance(expected_version, int)
            or expected_version < 1
        ):
            raise ValueError(f"expected_version must be a positive integer, not {expected_version!r}")
        name = _name_of(definition)
        try:
            async with self._db.write() as conn:
                row = await _find_writable(conn, id_or_name, tenant)
                if expected_version is not None and row.version != expected_version:
                    raise Conflict(
                        f"virtual server {row.name!r} is at version {row.version}, not {expected_version}: "
                        "reload it and apply the change again"
                    )
                if name != row.name:
                    await _check_name_free(conn, name, exclude_id=row.id)
                bumped = await conn.execute(
                    update(servers_t)
                    .where(servers_t.c.id == row.id, servers_t.c.version == row.version)
                    .values(name=name, version=row.version + 1, updated_at=utcnow())
                )
                if bumped.rowcount != 1:
                    raise Conflict(
                        f"virtual server {row.name!r} was changed concurrently: reload it and try again"
                    )
                await _add_version(conn, row.id, row.version + 1, definition, note)
                detail = {"note": note, "renamed_from": row.name if name != row.name else None}
                before, after = row.version, row.version + 1
                await _audit(conn, actor, "server.updated", row.tenant, row.id, name, before, after, detail)
        except IntegrityError as error:
            if is_unique_violation(error):
                raise Conflict(f"a virtual server named {name!r} already exists on this gateway") from None
            raise
        return await self.get(row.id, tenant)

    async def delete(
        self, id_or_name: str, tenant: str | None, *, actor: Actor | None = None
    ) -> StoredServer:
        async with self._db.write() as conn:
            row = await _find_writable(conn, id_or_name, tenant)
            found = _stored(await _find(conn, row.id, tenant))
            now = utcnow()
            await conn.execute(
                update(servers_t).where(servers_t.c.id == row.id).values(deleted_at=now, updated_at=now)
            )
            await _audit(conn, actor, "server.deleted", row.tenant, row.id, row.name, row.version, None, {})
        return found

    async def versions(self, id_or_name: str, tenant: str | None) -> builtins.list[ServerVersion]:
        """Oldest first, each with its full definition."""
        async with self._db.read() as conn:
            row = await _find(conn, id_or_name, tenant)
            query = select(versions_t).where(versions_t.c.server_id == row.id).order_by(versions_t.c.version)
            rows = (await conn.execute(query)).all()
        return [
            ServerVersion(
                server_id=r.server_id,
                version=r.version,
                definition=r.definition,
                note=r.note,
                created_at=r.created_at,
            )
            for r in rows
        ]
