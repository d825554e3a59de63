"""Composite tool definitions created through the API, with their version history.

Every change writes a new version row and bumps `version` on the tool, so a
UI can show history and an editor can pass `expected_version` to avoid
overwriting someone else's edit. Deletion is soft: the versions stay as an
audit trail, and the name becomes free again.

The store checks only what it needs to keep its own invariants (a mapping
with a usable name and kind, JSON-serializable); validating a definition
against the config models and the catalog is the caller's job, done before
it is stored so a rejected definition never replaces a working one.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, and_, case, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from toolweave.actor import Actor
from toolweave.composite.kinds import infer_kind
from toolweave.composite.workflow.toolhive import TOOLHIVE_KIND
from toolweave.fields import EXPOSED_NAME_RE
from toolweave.store._sql import check_tenant, ensure_tenant, is_unique_violation, lock_name, require_json
from toolweave.store.audit import write_audit
from toolweave.store.database import Database
from toolweave.store.errors import Conflict, Forbidden, NotFound
from toolweave.store.tables import composite_tool_versions as versions_t
from toolweave.store.tables import composite_tools as tools_t
from toolweave.store.tables import utcnow

COMPOSITE_KINDS: tuple[str, ...] = ("fanout", "router", "workflow")
COMPOSITE_STATUSES: tuple[str, ...] = ("draft", "active", "disabled", "degraded")


@dataclass(frozen=True, slots=True)
class StoredComposite:
    id: str
    tenant: str | None
    """None: shared, visible to every tenant."""
    name: str
    kind: str
    status: str
    version: int
    definition: dict[str, Any]
    validation_errors: tuple[str, ...] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class VersionInfo:
    tool_id: str
    version: int
    definition: dict[str, Any]
    note: str | None
    created_at: datetime


def _identity(definition: Any) -> tuple[str, str]:
    """(name, kind) of a native or ToolHive definition, or ValueError naming what is missing."""
    if not isinstance(definition, Mapping):
        raise ValueError("a composite tool definition must be a mapping")
    if definition.get("kind") == TOOLHIVE_KIND:
        spec = definition.get("spec")
        name: object = spec.get("name") if isinstance(spec, Mapping) else None
        kind: str | None = "workflow"
    else:
        name, kind = definition.get("name"), infer_kind(definition)
    if not isinstance(name, str) or not EXPOSED_NAME_RE.match(name):
        raise ValueError(f"composite tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
    if kind not in COMPOSITE_KINDS:
        raise ValueError(f"unknown composite kind {kind!r} (known: {', '.join(COMPOSITE_KINDS)})")
    require_json(definition, "the composite tool definition")
    return name, kind


def _check_status(status: str) -> None:
    if status not in COMPOSITE_STATUSES:
        raise ValueError(f"invalid status {status!r} (valid: {', '.join(COMPOSITE_STATUSES)})")


def _check_expected(expected_version: int | None) -> None:
    if expected_version is not None and (
        isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 1
    ):
        raise ValueError(f"expected_version must be a positive integer, not {expected_version!r}")


def _visible(tenant: str | None) -> ColumnElement[bool]:
    """A tenant sees its own tools and the shared ones; no tenant sees only the shared ones."""
    scope: ColumnElement[bool] = tools_t.c.tenant.is_(None)
    if tenant is not None:
        scope = or_(tools_t.c.tenant == tenant, scope)
    return and_(scope, tools_t.c.deleted_at.is_(None))


def _current() -> Select[Any]:
    joined = tools_t.join(
        versions_t, and_(versions_t.c.tool_id == tools_t.c.id, versions_t.c.version == tools_t.c.version)
    )
    return select(tools_t, versions_t.c.definition).select_from(joined)


def _stored(row: Row[Any]) -> StoredComposite:
    errors = row.validation_errors
    return StoredComposite(
        id=row.id,
        tenant=row.tenant,
        name=row.name,
        kind=row.kind,
        status=row.status,
        version=row.version,
        definition=row.definition,
        validation_errors=tuple(errors) if errors is not None else None,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def _find(conn: AsyncConnection, id_or_name: str, tenant: str | None) -> Row[Any]:
    """By id first, then by name; the tenant's own tool before a shared one."""
    matches = or_(tools_t.c.id == id_or_name, tools_t.c.name == id_or_name)
    query = (
        _current()
        .where(matches, _visible(tenant))
        .order_by(
            case((tools_t.c.id == id_or_name, 0), else_=1),
            case((tools_t.c.tenant.is_(None), 1), else_=0),
        )
        .limit(1)
    )
    row: Row[Any] | None = (await conn.execute(query)).one_or_none()
    if row is None:
        raise NotFound(f"composite tool {id_or_name!r} not found")
    return row


async def _lock(conn: AsyncConnection, tool_id: str, shown_as: str) -> Row[Any]:
    """Lock the tool row alone: PostgreSQL re-checks a locked row against the query after
    waiting, and a join on the (now outdated) current version would make it vanish."""
    query = select(tools_t).where(tools_t.c.id == tool_id, tools_t.c.deleted_at.is_(None))
    row = (await conn.execute(query.with_for_update())).one_or_none()
    if row is None:
        raise NotFound(f"composite tool {shown_as!r} not found")
    return row


async def _find_writable(conn: AsyncConnection, id_or_name: str, tenant: str | None) -> Row[Any]:
    row = await _lock(conn, (await _find(conn, id_or_name, tenant)).id, id_or_name)
    if row.tenant != tenant:
        raise Forbidden(f"composite tool {row.name!r} is shared; only an operator (no tenant) can change it")
    return row


async def _check_name_free(
    conn: AsyncConnection, name: str, tenant: str | None, exclude_id: str | None = None
) -> None:
    """A name must be unambiguous for every tenant that can see it, shared tools included."""
    await lock_name(conn, "composite", name)
    query = select(tools_t.c.tenant).where(tools_t.c.name == name, tools_t.c.deleted_at.is_(None))
    if tenant is not None:
        query = query.where(or_(tools_t.c.tenant == tenant, tools_t.c.tenant.is_(None)))
    if exclude_id is not None:
        query = query.where(tools_t.c.id != exclude_id)
    clash = (await conn.execute(query.limit(1))).one_or_none()
    if clash is None:
        return
    if clash.tenant == tenant:
        raise Conflict(f"a composite tool named {name!r} already exists")
    if clash.tenant is None:
        raise Conflict(f"the name {name!r} is taken by a shared composite tool")
    raise Conflict(f"the name {name!r} is already used by tenant {clash.tenant!r}'s composite tool")


async def _add_version(
    conn: AsyncConnection, tool_id: str, version: int, definition: Mapping[str, Any], note: str | None
) -> None:
    values = {"tool_id": tool_id, "version": version, "definition": dict(definition), "note": note}
    await conn.execute(versions_t.insert().values(**values, created_at=utcnow()))


class CompositeRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self,
        tenant: str | None,
        definition: Mapping[str, Any],
        status: str = "active",
        note: str | None = None,
        *,
        actor: Actor | None = None,
    ) -> StoredComposite:
        """A new tool at version 1; with `actor`, its audit record in the same transaction."""
        check_tenant(tenant)
        _check_status(status)
        name, kind = _identity(definition)
        tool_id = str(uuid.uuid4())
        now = utcnow()
        values: dict[str, object] = {
            "id": tool_id,
            "tenant": tenant,
            "name": name,
            "kind": kind,
            "status": status,
        }
        values.update(version=1, validation_errors=None, created_at=now, updated_at=now)
        try:
            async with self._db.write() as conn:
                await ensure_tenant(conn, tenant)
                await _check_name_free(conn, name, tenant)
                await conn.execute(tools_t.insert().values(**values))
                await _add_version(conn, tool_id, 1, definition, note)
                detail = {"kind": kind, "status": status, "note": note}
                await _audit(conn, actor, "composite.created", tenant, tool_id, name, None, 1, detail)
        except IntegrityError as error:
            if is_unique_violation(error):
                raise Conflict(f"a composite tool named {name!r} already exists") from None
            raise
        return await self.get(tool_id, tenant)

    async def get(self, id_or_name: str, tenant: str | None) -> StoredComposite:
        async with self._db.read() as conn:
            return _stored(await _find(conn, id_or_name, tenant))

    async def list(
        self, tenant: str | None, kind: str | None = None, status: str | None = None
    ) -> builtins.list[StoredComposite]:
        query = _current().where(_visible(tenant)).order_by(tools_t.c.name, tools_t.c.tenant.is_(None))
        if kind is not None:
            query = query.where(tools_t.c.kind == kind)
        if status is not None:
            query = query.where(tools_t.c.status == status)
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [_stored(row) for row in rows]

    async def list_all(self) -> builtins.list[StoredComposite]:
        """Every tool of every tenant (not deleted), oldest first, in one query: for the gateway itself."""
        query = _current().where(tools_t.c.deleted_at.is_(None)).order_by(tools_t.c.created_at, tools_t.c.id)
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [_stored(row) for row in rows]

    async def update(
        self,
        id_or_name: str,
        tenant: str | None,
        definition: Mapping[str, Any],
        note: str | None = None,
        expected_version: int | None = None,
        *,
        status: str | None = None,
        actor: Actor | None = None,
    ) -> StoredComposite:
        """Store `definition` as the next version; Conflict if `expected_version` is not current.

        `status`, when given, changes in the same transaction (one change, one audit record).
        Validation errors are kept: the caller revalidates and calls `set_validation`, because
        only it knows the catalog.
        """
        if status is not None:
            _check_status(status)
        _check_expected(expected_version)
        name, kind = _identity(definition)
        try:
            async with self._db.write() as conn:
                row = await _find_writable(conn, id_or_name, tenant)
                _check_version(row, expected_version)
                if name != row.name:
                    await _check_name_free(conn, name, tenant, exclude_id=row.id)
                await _bump(conn, row, name=name, kind=kind)
                await _add_version(conn, row.id, row.version + 1, definition, note)
                detail: dict[str, Any] = {"kind": kind, "note": note}
                if status is not None and status != row.status:
                    await _touch(conn, row.id, status=status)
                    detail.update(status_before=row.status, status=status)
                if name != row.name:
                    detail["renamed_from"] = row.name
                before, after = row.version, row.version + 1
                await _audit(
                    conn, actor, "composite.updated", row.tenant, row.id, name, before, after, detail
                )
        except IntegrityError as error:
            if is_unique_violation(error):
                raise Conflict(f"a composite tool named {name!r} already exists") from None
            raise
        return await self.get(row.id, tenant)

    async def set_status(
        self, id_or_name: str, tenant: str | None, status: str, *, actor: Actor | None = None
    ) -> StoredComposite:
        _check_status(status)
        async with self._db.write() as conn:
            row = await _find_writable(conn, id_or_name, tenant)
            await _touch(conn, row.id, status=status)
            detail = {"status_before": row.status, "status": status}
            version = row.version
            await _audit(
                conn, actor, "composite.status", row.tenant, row.id, row.name, version, version, detail
            )
        return await self.get(row.id, tenant)

    async def set_validation(self, tool_id: str, errors: Sequence[str] | None) -> StoredComposite:
        """Record the catalog's verdict on a tool, for the gateway (not scoped to a tenant).

        Errors move an `active` tool to `degraded` and no errors move it back, so a
        tool whose backend tool vanished stops being offered without losing its
        definition; `draft` and `disabled` are the user's choice and stay as they are.
        """
        listed = [errors] if isinstance(errors, str) else list(errors or [])
        cleaned = [str(error) for error in listed] or None
        async with self._db.write() as conn:
            row = await _lock(conn, tool_id, tool_id)
            status = _status_after_validation(row.status, has_errors=cleaned is not None)
            await _touch(conn, row.id, status=status, validation_errors=cleaned)
        return await self.get(row.id, row.tenant)

    async def delete(self, id_or_name: str, tenant: str | None, *, actor: Actor | None = None) -> None:
        async with self._db.write() as conn:
            row = await _find_writable(conn, id_or_name, tenant)
            await _touch(conn, row.id, deleted_at=utcnow())
            detail = {"kind": row.kind, "status": row.status}
            await _audit(
                conn, actor, "composite.deleted", row.tenant, row.id, row.name, row.version, None, detail
            )

    async def versions(self, id_or_name: str, tenant: str | None) -> builtins.list[VersionInfo]:
        """Oldest first, each with its full definition."""
        async with self._db.read() as conn:
            row = await _find(conn, id_or_name, tenant)
            query = select(versions_t).where(versions_t.c.tool_id == row.id).order_by(versions_t.c.version)
            rows = (await conn.execute(query)).all()
        return [
            VersionInfo(
                tool_id=r.tool_id,
                version=r.version,
                definition=r.definition,
                note=r.note,
                created_at=r.created_at,
            )
            for r in rows
        ]


def _check_version(row: Row[Any], expected_version: int | None) -> None:
    if expected_version is not None and row.version != expected_version:
        raise Conflict(
            f"composite tool {row.name!r} is at version {row.version}, not {expected_version}: "
            "reload it and apply the change again"
        )


def _status_after_validation(status: str, *, has_errors: bool) -> str:
    if has_errors and status == "active":
        return "degraded"
    if not has_errors and status == "degraded":
        return "active"
    return status


async def _bump(conn: AsyncConnection, row: Row[Any], *, name: str, kind: str) -> None:
    """Compare-and-set on the version, so a concurrent edit can never be silently overwritten."""
    statement = (
        update(tools_t)
        .where(tools_t.c.id == row.id, tools_t.c.version == row.version)
        .values(name=name, kind=kind, version=row.version + 1, updated_at=utcnow())
    )
    if (await conn.execute(statement)).rowcount != 1:
        raise Conflict(f"composite tool {row.name!r} was changed concurrently: reload it and try again")


async def _audit(
    conn: AsyncConnection,
    actor: Actor | None,
    action: str,
    tenant: str | None,
    tool_id: str,
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
        object_type="composite",
        object_id=tool_id,
        object_name=name,
        before=before,
        after=after,
        detail={key: value for key, value in detail.items() if value is not None},
    )


async def _touch(conn: AsyncConnection, tool_id: str, **values: Any) -> None:
    await conn.execute(update(tools_t).where(tools_t.c.id == tool_id).values(**values, updated_at=utcnow()))
