"""The audit log: one append-only record per change of state, in the change's own transaction.

A repository that changes something (a composite, a key, a connection, a run) takes an
`Actor` and calls `write_audit` on the connection of its write transaction, so the
record and the change commit together or not at all: a refused or failed change leaves
no record, and no change is ever without one. Changes that are not rows in the database
(a federated namespace registered, a live call cancelled) are recorded on their own
with `AuditRepository.record`.

A record says when, who (`Actor.who`: subject, key or CLI user), from where (`via`,
`source`), what (`action`, e.g. `composite.updated`), the object (type, id, name) and
its version before and after. Its `detail` holds names and statuses only, never a secret
value: callers pass header names, scopes, key prefixes, not what they protect.

`tenant` is the changed object's tenant (None: shared or gateway-wide); a tenant reads its
own records, the operator every record (`list`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Row, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from toolweave.actor import Actor
from toolweave.store.database import Database
from toolweave.store.tables import audit_log, utcnow

MAX_LISTED = 500
"""The most records one `list` returns; page on with `before`."""
_TEXT_LIMIT = 500
"""Longest actor, source or name kept: a client controls its user agent, and records are forever."""


class _AllTenants:
    def __repr__(self) -> str:
        return "ALL_TENANTS"


ALL_TENANTS: Final = _AllTenants()
"""`list(tenant=ALL_TENANTS)`: every tenant's records and the gateway-wide ones (the operator's view)."""


@dataclass(frozen=True, slots=True)
class AuditRecord:
    id: int
    at: datetime
    tenant: str | None
    actor: str
    via: str
    source: str | None
    action: str
    object_type: str
    object_id: str
    object_name: str | None
    version_before: int | None
    version_after: int | None
    detail: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as the API, `toolweave audit --jsonl` and the export give it."""
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "tenant": self.tenant,
            "actor": self.actor,
            "via": self.via,
            "source": self.source,
            "action": self.action,
            "objectType": self.object_type,
            "objectId": self.object_id,
            "objectName": self.object_name,
            "versionBefore": self.version_before,
            "versionAfter": self.version_after,
            "detail": self.detail,
        }


def _clip(text: str | None) -> str | None:
    return text if text is None or len(text) <= _TEXT_LIMIT else text[: _TEXT_LIMIT - 1] + "…"


async def write_audit(
    conn: AsyncConnection,
    actor: Actor | None,
    action: str,
    *,
    tenant: str | None,
    object_type: str,
    object_id: str,
    object_name: str | None = None,
    before: int | None = None,
    after: int | None = None,
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Record one change inside the caller's write transaction; nothing when `actor` is None
    (the library used directly, the gateway's own bookkeeping: nobody to name)."""
    if actor is None:
        return
    values = {
        "at": utcnow(),
        "tenant": tenant,
        "actor": _clip(actor.who) or "",
        "via": actor.via,
        "source": _clip(actor.source),
        "action": action,
        "object_type": object_type,
        "object_id": _clip(object_id) or "",
        "object_name": _clip(object_name),
        "version_before": before,
        "version_after": after,
        "detail": dict(detail) if detail else None,
    }
    await conn.execute(audit_log.insert().values(**values))


def _record(row: Row[Any]) -> AuditRecord:
    return AuditRecord(
        id=row.id,
        at=row.at,
        tenant=row.tenant,
        actor=row.actor,
        via=row.via,
        source=row.source,
        action=row.action,
        object_type=row.object_type,
        object_id=row.object_id,
        object_name=row.object_name,
        version_before=row.version_before,
        version_after=row.version_after,
        detail=row.detail,
    )


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """What `list` and `export` select; every field optional."""

    action: str | None = None
    """Exact (`key.revoked`), or every action of an object type with a trailing `.*` (`key.*`)."""
    object_type: str | None = None
    object_id: str | None = None
    actor: str | None = None
    since: datetime | None = None
    until: datetime | None = None


class AuditRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def record(
        self,
        actor: Actor,
        action: str,
        *,
        tenant: str | None,
        object_type: str,
        object_id: str,
        object_name: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """A change that is not a row of ours (a federated namespace, a cancelled live call), on its own."""
        async with self._db.write() as conn:
            await write_audit(
                conn,
                actor,
                action,
                tenant=tenant,
                object_type=object_type,
                object_id=object_id,
                object_name=object_name,
                detail=detail,
            )

    async def list(
        self,
        tenant: str | _AllTenants | None,
        where: AuditFilter = AuditFilter(),
        *,
        limit: int = 50,
        before: int | None = None,
    ) -> list[AuditRecord]:
        """Newest first; `before` (a record id) pages on to older ones."""
        if not 1 <= limit <= MAX_LISTED:
            raise ValueError(f"limit must be between 1 and {MAX_LISTED}")
        query = select(audit_log).order_by(audit_log.c.id.desc()).limit(limit)
        if not isinstance(tenant, _AllTenants):
            query = query.where(
                audit_log.c.tenant.is_(None) if tenant is None else audit_log.c.tenant == tenant
            )
        if before is not None:
            query = query.where(audit_log.c.id < before)
        for condition in _conditions(where):
            query = query.where(condition)
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [_record(row) for row in rows]

    async def export(
        self,
        tenant: str | _AllTenants | None,
        where: AuditFilter = AuditFilter(),
    ) -> AsyncIterator[AuditRecord]:
        """Every matching record, newest first, read a page at a time (bounded memory)."""
        before: int | None = None
        while True:
            page = await self.list(tenant, where, limit=MAX_LISTED, before=before)
            for record in page:
                yield record
            if len(page) < MAX_LISTED:
                return
            before = page[-1].id

    async def prune(self, older_than: datetime) -> int:
        """Delete the records from before `older_than` (the `[audit] retention` setting); how many."""
        async with self._db.write() as conn:
            result = await conn.execute(delete(audit_log).where(audit_log.c.at < older_than))
        return int(result.rowcount or 0)


def _conditions(where: AuditFilter) -> list[Any]:
    found: list[Any] = []
    if where.action is not None:
        if where.action.endswith(".*"):
            found.append(audit_log.c.action.startswith(where.action[:-1], autoescape=True))
        else:
            found.append(audit_log.c.action == where.action)
    if where.object_type is not None:
        found.append(audit_log.c.object_type == where.object_type)
    if where.object_id is not None:
        found.append(audit_log.c.object_id == where.object_id)
    if where.actor is not None:
        found.append(audit_log.c.actor == where.actor)
    if where.since is not None:
        found.append(audit_log.c.at >= where.since)
    if where.until is not None:
        found.append(audit_log.c.at < where.until)
    return found
