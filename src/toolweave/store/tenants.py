"""Tenants: the owners of keys, composite tools and connections.

A tenant row is created implicitly by the first thing that belongs to it, so
this repository is for listing and removal rather than sign-up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select, update

from toolweave.store._sql import check_tenant, ensure_tenant
from toolweave.store.database import Database
from toolweave.store.errors import NotFound
from toolweave.store.tables import oauth_proxy_grants, oauth_proxy_tokens, tenants


@dataclass(frozen=True, slots=True)
class TenantInfo:
    id: str
    created_at: datetime


class TenantRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def ensure(self, tenant: str) -> TenantInfo:
        """Create the tenant if missing; returns it either way (idempotent)."""
        check_tenant(tenant)
        async with self._db.write() as conn:
            await ensure_tenant(conn, tenant)
            row = (await conn.execute(select(tenants).where(tenants.c.id == tenant))).one()
        return TenantInfo(id=row.id, created_at=row.created_at)

    async def list(self) -> list[TenantInfo]:
        async with self._db.read() as conn:
            rows = (await conn.execute(select(tenants).order_by(tenants.c.id))).all()
        return [TenantInfo(id=row.id, created_at=row.created_at) for row in rows]

    async def delete(self, tenant: str) -> None:
        """Remove the tenant with its keys, composite tools and connections.

        Run records stay: they are an audit trail and carry the tenant id as plain text. The OAuth
        proxy's grants to the tenant's people are revoked, so the gateway's tokens of the tenant stop
        working (such a tenant may have no row: an identity provider's tenant claim names it).
        """
        check_tenant(tenant)
        async with self._db.write() as conn:
            result = await conn.execute(delete(tenants).where(tenants.c.id == tenant))
            ids = select(oauth_proxy_grants.c.id).where(oauth_proxy_grants.c.tenant == tenant)
            await conn.execute(delete(oauth_proxy_tokens).where(oauth_proxy_tokens.c.grant_id.in_(ids)))
            revoked = await conn.execute(
                update(oauth_proxy_grants)
                .where(oauth_proxy_grants.c.tenant == tenant, oauth_proxy_grants.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
        if result.rowcount == 0 and revoked.rowcount == 0:
            raise NotFound(f"tenant {tenant!r} not found")
