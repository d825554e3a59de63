"""OAuth grants to backends, per (tenant, user, backend), encrypted at rest like connections.

A grant is what an OAuth client keeps between calls: the tokens (access, refresh) and the client
registration they were issued to (a dynamically registered client's id and secret). Both live in
one encrypted payload that also names its owner, so a blob copied onto another row fails to
decrypt instead of handing one person's tokens to another. The granted scope and the expiry are
kept in clear beside it, for status pages; neither is a credential.

`subject` is the user: the caller's identity (`credentials.user_of`); `SHARED` is the one grant of
a backend the operator authorized for everybody.

A grant that starts holding tokens, or whose tokens come back with other scopes, is a change of
who may do what, so `put` writes an `oauth.granted` audit record in its own transaction (the
scopes before and after, never a token); refreshing tokens for the same scopes is not a change.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, TypedDict

import orjson
from sqlalchemy import ColumnElement, and_, delete, select, update

from toolweave.actor import Actor, Via
from toolweave.fields import BACKEND_NAME_RE
from toolweave.store._sql import check_tenant, ensure_tenant, lock_name
from toolweave.store.audit import write_audit
from toolweave.store.crypto import SecretBox
from toolweave.store.database import Database
from toolweave.store.errors import SecretKeyError
from toolweave.store.tables import oauth_tokens, utcnow

SHARED = "*"
"""The subject of a backend's one operator-authorized grant (`per_user = false`, client credentials)."""


class GrantSummary(TypedDict):
    backend: str
    subject: str
    authorized: bool
    """Whether the grant holds tokens (a client registration alone is kept too, for reuse)."""
    scope: str | None
    expires_at: datetime | None
    updated_at: datetime


def _check(tenant: str | None, subject: str, backend: str) -> None:
    check_tenant(tenant)
    if not isinstance(subject, str) or not 0 < len(subject) <= 255:
        raise ValueError("a grant's user must be a string of 1-255 characters")
    if not isinstance(backend, str) or not BACKEND_NAME_RE.match(backend):
        raise ValueError(f"invalid backend name {backend!r}: must match ^[a-z0-9][a-z0-9_-]{{0,31}}$")


def _owner(tenant: str | None, subject: str, backend: str) -> ColumnElement[bool]:
    who = oauth_tokens.c.tenant.is_(None) if tenant is None else oauth_tokens.c.tenant == tenant
    return and_(who, oauth_tokens.c.subject == subject, oauth_tokens.c.backend == backend)


class OAuthTokenRepository:
    """`get`/`put` the decrypted grant (a dict: `tokens`, `client`, `obtained_at`); never logs a value."""

    def __init__(self, db: Database, box: SecretBox | None = None, *, via: Via | None = None) -> None:
        """`via`: the door grants come through, for their audit records (`ui` for a gateway's
        callback, `cli` for `toolweave login`); None: grants are not audited (the library alone)."""
        self._db = db
        self._box = box
        self._via = via

    def __repr__(self) -> str:
        return f"OAuthTokenRepository({self._db!r})"

    @property
    def box(self) -> SecretBox:
        if self._box is None:
            self._box = SecretBox.resolve(self._db)
        return self._box

    async def get(self, tenant: str | None, subject: str, backend: str) -> dict[str, Any] | None:
        _check(tenant, subject, backend)
        query = select(oauth_tokens.c.secret).where(_owner(tenant, subject, backend))
        async with self._db.read() as conn:
            row = (await conn.execute(query)).one_or_none()
        if row is None:
            return None
        what = f"the OAuth grant of {subject!r} to backend {backend!r}"
        payload: Any = orjson.loads(self.box.decrypt(bytes(row.secret), what))
        if payload.get("owner") != [tenant, subject, backend]:
            raise SecretKeyError(f"{what} holds data encrypted for another user or backend; refusing it")
        grant: dict[str, Any] = payload["grant"]
        return grant

    async def put(
        self,
        tenant: str | None,
        subject: str,
        backend: str,
        grant: dict[str, Any],
        *,
        scope: str | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        _check(tenant, subject, backend)
        blob = self.box.encrypt(orjson.dumps({"owner": [tenant, subject, backend], "grant": grant}))
        now = utcnow()
        values = {
            "secret": blob,
            "authorized": bool(grant.get("tokens")),
            "scope": scope,
            "expires_at": expires_at,
            "updated_at": now,
        }
        async with self._db.write() as conn:
            await ensure_tenant(conn, tenant)
            await lock_name(conn, "oauth", f"{tenant or ''}/{subject}/{backend}")
            query = select(oauth_tokens.c.authorized, oauth_tokens.c.scope).where(
                _owner(tenant, subject, backend)
            )
            before = (await conn.execute(query)).one_or_none()
            done = await conn.execute(
                update(oauth_tokens).where(_owner(tenant, subject, backend)).values(**values)
            )
            if done.rowcount == 0:
                row = {"id": uuid.uuid4().hex, "tenant": tenant, "subject": subject, "backend": backend}
                await conn.execute(oauth_tokens.insert().values(**row, **values, created_at=now))
            if values["authorized"] and (before is None or not before.authorized or before.scope != scope):
                await self._audit_grant(conn, tenant, subject, backend, scope, before)

    async def _audit_grant(
        self, conn: Any, tenant: str | None, subject: str, backend: str, scope: str | None, before: Any
    ) -> None:
        """`oauth.granted`: the grant's owner, its scopes now and (a re-grant) before."""
        if self._via is None:
            return
        who = "operator (shared grant)" if subject == SHARED else subject
        detail: dict[str, Any] = {"subject": subject, "scope": scope}
        if before is not None and before.authorized:
            detail["scope_before"] = before.scope
        await write_audit(
            conn,
            Actor(tenant=tenant, who=who, via=self._via),
            "oauth.granted",
            tenant=tenant,
            object_type="backend",
            object_id=backend,
            object_name=backend,
            detail=detail,
        )

    async def delete(self, tenant: str | None, subject: str, backend: str) -> bool:
        """Forget the grant; False when there was none."""
        _check(tenant, subject, backend)
        async with self._db.write() as conn:
            done = await conn.execute(delete(oauth_tokens).where(_owner(tenant, subject, backend)))
        return bool(done.rowcount)

    async def summaries(self, tenant: str | None, subject: str | None = None) -> list[GrantSummary]:
        """The grants of a tenant (of one user when `subject` is given): names, scopes, expiry, no token."""
        query = select(
            oauth_tokens.c.backend,
            oauth_tokens.c.subject,
            oauth_tokens.c.authorized,
            oauth_tokens.c.scope,
            oauth_tokens.c.expires_at,
            oauth_tokens.c.updated_at,
        ).where(oauth_tokens.c.tenant.is_(None) if tenant is None else oauth_tokens.c.tenant == tenant)
        if subject is not None:
            query = query.where(oauth_tokens.c.subject == subject)
        async with self._db.read() as conn:
            rows = (await conn.execute(query.order_by(oauth_tokens.c.backend))).all()
        return [
            {
                "backend": r.backend,
                "subject": r.subject,
                "authorized": bool(r.authorized),
                "scope": r.scope,
                "expires_at": r.expires_at,
                "updated_at": r.updated_at,
            }
            for r in rows
        ]

    async def latest_subject(self, backend: str) -> tuple[str | None, str] | None:
        """(tenant, user) of the grant to `backend` refreshed last: whose token lists a per-user backend's tools."""
        query = (
            select(oauth_tokens.c.tenant, oauth_tokens.c.subject)
            .where(oauth_tokens.c.backend == backend, oauth_tokens.c.authorized.is_(True))
            .order_by(oauth_tokens.c.updated_at.desc())
            .limit(1)
        )
        async with self._db.read() as conn:
            row = (await conn.execute(query)).one_or_none()
        return None if row is None else (row.tenant, row.subject)
