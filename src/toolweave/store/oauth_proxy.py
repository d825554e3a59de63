"""The OAuth proxy's state, in the database every gateway replica shares (`[auth.proxy]`).

Nothing here is a usable secret: one-time secrets (logins in progress, authorization codes, refresh
tokens) are kept by their SHA-256 and made usable once by one conditional UPDATE (two replicas
redeeming the same code: exactly one wins, the other sees a reuse); client secrets by their SHA-256;
the signing keys encrypted with the gateway's secret key (`SecretBox`, as connection secrets).
A grant is one person's consent to one client; every token minted from it names it, so revoking
the grant ends them all. Expired rows are removed as new ones are written.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, delete, func, select, update

from toolweave.actor import Actor
from toolweave.store.audit import write_audit
from toolweave.store.database import Database
from toolweave.store.tables import (
    oauth_proxy_clients,
    oauth_proxy_grants,
    oauth_proxy_keys,
    oauth_proxy_tokens,
)


def secret_hash(secret: str) -> str:
    """How a one-time secret or a client secret is stored and looked up."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ProxyClient:
    client_id: str
    secret_hash: str | None
    client: dict[str, Any]
    source: str
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    client_id: str
    tenant: str
    subject: str
    scope: str
    resource: str
    expires_at: float
    revoked_at: float | None

    @property
    def live(self) -> bool:
        return self.revoked_at is None and self.expires_at > time.time()


@dataclass(frozen=True, slots=True)
class Taken:
    """A one-time secret presented: its data when this was its first use; `reused` otherwise."""

    client_id: str
    grant_id: str | None
    data: dict[str, Any]
    expires_at: float
    reused: bool


class OAuthProxyRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    # clients

    async def client(self, client_id: str) -> ProxyClient | None:
        query = select(oauth_proxy_clients).where(oauth_proxy_clients.c.client_id == client_id)
        async with self._db.read() as conn:
            row = (await conn.execute(query)).one_or_none()
        if row is None:
            return None
        return ProxyClient(row.client_id, row.secret_hash, dict(row.client), row.source, row.expires_at)

    async def client_counts(self, since: float) -> tuple[int, int]:
        """(clients held, clients registered or fetched since `since`), after dropping expired
        metadata documents."""
        async with self._db.write() as conn:
            await conn.execute(
                delete(oauth_proxy_clients).where(oauth_proxy_clients.c.expires_at < time.time())
            )
        async with self._db.read() as conn:
            held = (await conn.execute(select(func.count()).select_from(oauth_proxy_clients))).scalar_one()
            recent = (
                await conn.execute(
                    select(func.count())
                    .select_from(oauth_proxy_clients)
                    .where(oauth_proxy_clients.c.created_at >= since)
                )
            ).scalar_one()
        return int(held), int(recent)

    async def put_client(self, client: ProxyClient, actor: Actor | None = None) -> None:
        """Insert (or, for a refetched metadata document, replace) a client; `oauth_client.registered`
        is recorded for a dynamic registration (`actor`: the anonymous registrant's address)."""
        async with self._db.write() as conn:
            await write_audit(
                conn,
                actor,
                "oauth_client.registered",
                tenant=None,
                object_type="oauth_client",
                object_id=client.client_id,
                object_name=str(client.client.get("client_name") or "") or None,
                detail={
                    "redirect_uris": client.client.get("redirect_uris"),
                    "token_endpoint_auth_method": client.client.get("token_endpoint_auth_method"),
                },
            )
            await conn.execute(
                delete(oauth_proxy_clients).where(oauth_proxy_clients.c.client_id == client.client_id)
            )
            await conn.execute(
                oauth_proxy_clients.insert().values(
                    client_id=client.client_id,
                    secret_hash=client.secret_hash,
                    client=client.client,
                    source=client.source,
                    created_at=time.time(),
                    expires_at=client.expires_at,
                )
            )

    # one-time secrets

    async def put_secret(
        self,
        kind: str,
        secret: str,
        client_id: str,
        data: dict[str, Any],
        expires_at: float,
        grant_id: str | None = None,
    ) -> None:
        async with self._db.write() as conn:
            await conn.execute(
                delete(oauth_proxy_tokens).where(oauth_proxy_tokens.c.expires_at < time.time())
            )
            await conn.execute(
                oauth_proxy_tokens.insert().values(
                    token_hash=secret_hash(secret),
                    kind=kind,
                    grant_id=grant_id,
                    client_id=client_id,
                    data=data,
                    expires_at=expires_at,
                )
            )

    async def peek_secret(self, kind: str, secret: str) -> Taken | None:
        """A one-time secret's record without using it up (a login's consent page)."""
        query = select(oauth_proxy_tokens).where(
            oauth_proxy_tokens.c.token_hash == secret_hash(secret), oauth_proxy_tokens.c.kind == kind
        )
        async with self._db.read() as conn:
            row = (await conn.execute(query)).one_or_none()
        if row is None:
            return None
        return Taken(row.client_id, row.grant_id, dict(row.data), row.expires_at, row.used_at is not None)

    async def take_secret(self, kind: str, secret: str) -> Taken | None:
        """Use a one-time secret up: its record (`reused` when it was used before), None when unknown."""
        digest = secret_hash(secret)
        mine = (oauth_proxy_tokens.c.token_hash == digest, oauth_proxy_tokens.c.kind == kind)
        async with self._db.write() as conn:
            first = await conn.execute(
                update(oauth_proxy_tokens)
                .where(*mine, oauth_proxy_tokens.c.used_at.is_(None))
                .values(used_at=time.time())
            )
            row = (await conn.execute(select(oauth_proxy_tokens).where(*mine))).one_or_none()
        if row is None:
            return None
        return Taken(row.client_id, row.grant_id, dict(row.data), row.expires_at, first.rowcount == 0)

    # grants

    async def add_grant(self, grant: Grant, actor: Actor | None = None) -> None:
        """Record a person's consent and login (`oauth_proxy.granted`, the person as the actor)."""
        async with self._db.write() as conn:
            now = time.time()
            await write_audit(
                conn,
                actor,
                "oauth_proxy.granted",
                tenant=grant.tenant,
                object_type="oauth_grant",
                object_id=grant.id,
                object_name=grant.client_id,
                detail={"client_id": grant.client_id, "scope": grant.scope, "resource": grant.resource},
            )
            await conn.execute(delete(oauth_proxy_grants).where(oauth_proxy_grants.c.expires_at < now))
            await conn.execute(
                oauth_proxy_grants.insert().values(
                    id=grant.id,
                    client_id=grant.client_id,
                    tenant=grant.tenant,
                    subject=grant.subject,
                    scope=grant.scope,
                    resource=grant.resource,
                    created_at=now,
                    expires_at=grant.expires_at,
                    revoked_at=None,
                )
            )

    async def grant(self, grant_id: str) -> Grant | None:
        query = select(oauth_proxy_grants).where(oauth_proxy_grants.c.id == grant_id)
        async with self._db.read() as conn:
            row = (await conn.execute(query)).one_or_none()
        if row is None:
            return None
        return Grant(
            row.id,
            row.client_id,
            row.tenant,
            row.subject,
            row.scope,
            row.resource,
            row.expires_at,
            row.revoked_at,
        )

    async def revoke_grant(self, grant_id: str, actor: Actor | None = None, reason: str = "") -> bool:
        """End a grant and every token of it; whether it was live (then `oauth_proxy.revoked`)."""
        async with self._db.write() as conn:
            result = await conn.execute(
                update(oauth_proxy_grants)
                .where(oauth_proxy_grants.c.id == grant_id, oauth_proxy_grants.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
            await conn.execute(delete(oauth_proxy_tokens).where(oauth_proxy_tokens.c.grant_id == grant_id))
            if result.rowcount:
                row = (
                    await conn.execute(
                        select(oauth_proxy_grants.c.tenant, oauth_proxy_grants.c.client_id).where(
                            oauth_proxy_grants.c.id == grant_id
                        )
                    )
                ).one()
                await write_audit(
                    conn,
                    actor,
                    "oauth_proxy.revoked",
                    tenant=row.tenant,
                    object_type="oauth_grant",
                    object_id=grant_id,
                    object_name=row.client_id,
                    detail={"reason": reason},
                )
        return bool(result.rowcount)

    async def revoke_matching(
        self,
        actor: Actor | None,
        *,
        tenant: str | None = None,
        subject: str | None = None,
        client_id: str | None = None,
    ) -> int:
        """End every live grant matching all the given fields (none given: every grant); how many."""
        mine: list[ColumnElement[bool]] = [oauth_proxy_grants.c.revoked_at.is_(None)]
        if tenant is not None:
            mine.append(oauth_proxy_grants.c.tenant == tenant)
        if subject is not None:
            mine.append(oauth_proxy_grants.c.subject == subject)
        if client_id is not None:
            mine.append(oauth_proxy_grants.c.client_id == client_id)
        async with self._db.read() as conn:
            ids = [row.id for row in (await conn.execute(select(oauth_proxy_grants.c.id).where(*mine))).all()]
        reason = "revoked by the operator"
        return sum([await self.revoke_grant(grant_id, actor, reason) for grant_id in ids])

    # signing keys

    async def signing_keys(self) -> list[tuple[str, bytes, float | None]]:
        """(kid, encrypted private JWK, retired_at), newest first."""
        query = select(oauth_proxy_keys).order_by(oauth_proxy_keys.c.created_at.desc())
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [(row.kid, bytes(row.secret), row.retired_at) for row in rows]

    async def add_signing_key(self, kid: str, secret: bytes, *, retire_others: bool = False) -> None:
        async with self._db.write() as conn:
            now = time.time()
            if retire_others:
                await conn.execute(
                    update(oauth_proxy_keys)
                    .where(oauth_proxy_keys.c.retired_at.is_(None))
                    .values(retired_at=now)
                )
            await conn.execute(oauth_proxy_keys.insert().values(kid=kid, secret=secret, created_at=now))
