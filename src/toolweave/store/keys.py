"""API keys: created once, shown once, stored only as a SHA-256 hash.

A key is `tw_` + 43 URL-safe characters (32 random bytes). That entropy is why
a plain SHA-256 is enough: nothing short of guessing 256 bits inverts it, and
unlike a slow password hash it keeps `verify` cheap on every request. The first
8 random characters are kept as a `prefix` so a user can tell keys apart in a
list; they narrow the lookup, and the hash comparison is constant-time.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import re
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, Select, func, select, update

from toolweave.actor import Actor
from toolweave.store._sql import check_tenant, ensure_tenant
from toolweave.store.audit import write_audit
from toolweave.store.database import Database
from toolweave.store.errors import NotFound
from toolweave.store.tables import api_keys, utcnow

VALID_SCOPES: frozenset[str] = frozenset({"tools:read", "tools:call", "tools:admin", "tools:federate"})
SERVER_SCOPE_RE = re.compile(r"^servers:[a-z0-9][a-z0-9_-]{0,63}$")
"""A scope naming a virtual server (`servers:support`), which that server's `access.scopes` may admit."""
KEY_PREFIX = "tw_"
_RANDOM_BYTES = 32
_RANDOM_CHARS = 43
"""Length of `secrets.token_urlsafe(32)`: 32 bytes in unpadded base64."""
_DISPLAY_CHARS = 8
MAX_NAME_LENGTH = 200
LAST_USED_RESOLUTION = timedelta(seconds=60)
"""`last_used_at` is refreshed at most this often, so verifying a key is normally a read only."""


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    """Everything about a key except the key itself, which is never stored."""

    id: str
    tenant: str
    name: str | None
    prefix: str
    """`tw_` plus the first 8 random characters: enough to recognise a key, useless to use it."""
    scopes: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


def key_digest(plaintext: str) -> str:
    """What is stored of a key, and what the verified-key cache is keyed by (`services/keys.py`)."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def _check_scopes(scopes: Iterable[str] | str) -> tuple[str, ...]:
    requested = [scopes] if isinstance(scopes, str) else list(scopes)
    unknown = sorted({str(scope) for scope in requested} - VALID_SCOPES - _server_scopes(requested))
    if unknown:
        valid = ", ".join(sorted(VALID_SCOPES)) + ", servers:<name> (a virtual server's `access.scopes`)"
        raise ValueError(f"invalid scope(s): {', '.join(unknown)} (valid: {valid})")
    if not requested:
        raise ValueError(f"a key needs at least one scope (valid: {', '.join(sorted(VALID_SCOPES))})")
    return tuple(sorted(set(requested)))


def _server_scopes(requested: Iterable[object]) -> set[str]:
    """The `servers:<name>` scopes among `requested`: what a virtual server's `access.scopes` may admit."""
    return {s for s in requested if isinstance(s, str) and SERVER_SCOPE_RE.match(s)}


def _split(plaintext: str) -> str | None:
    """The display prefix of a well-formed key, or None so malformed input never reaches the database."""
    if not isinstance(plaintext, str) or not plaintext.startswith(KEY_PREFIX):
        return None
    if len(plaintext) != len(KEY_PREFIX) + _RANDOM_CHARS:
        return None
    return plaintext[: len(KEY_PREFIX) + _DISPLAY_CHARS]


def _info(row: Row[Any]) -> ApiKeyInfo:
    return ApiKeyInfo(
        id=row.id,
        tenant=row.tenant,
        name=row.name,
        prefix=row.prefix,
        scopes=tuple(row.scopes),
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )


class KeyRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self, tenant: str, scopes: Iterable[str] | str, name: str | None = None, *, actor: Actor | None = None
    ) -> tuple[ApiKeyInfo, str]:
        """Returns the key's info and the plaintext key; the plaintext cannot be recovered later.
        With `actor`, the audit record (prefix and scopes, never the key) commits with the key."""
        if tenant is None:
            raise ValueError("an API key needs a tenant")
        check_tenant(tenant)
        if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME_LENGTH):
            raise ValueError(f"a key name is a string of at most {MAX_NAME_LENGTH} characters")
        checked = _check_scopes(scopes)
        plaintext = KEY_PREFIX + secrets.token_urlsafe(_RANDOM_BYTES)
        info = ApiKeyInfo(
            id=uuid.uuid4().hex,
            tenant=tenant,
            name=name,
            prefix=plaintext[: len(KEY_PREFIX) + _DISPLAY_CHARS],
            scopes=checked,
            created_at=utcnow(),
            last_used_at=None,
            revoked_at=None,
        )
        values = {
            "id": info.id,
            "tenant": tenant,
            "name": name,
            "prefix": info.prefix,
            "key_hash": key_digest(plaintext),
            "scopes": list(checked),
            "created_at": info.created_at,
        }
        async with self._db.write() as conn:
            await ensure_tenant(conn, tenant)
            await conn.execute(api_keys.insert().values(**values))
            detail = {"prefix": info.prefix, "scopes": list(checked)}
            await _audit(conn, actor, "key.created", tenant, info.id, name, detail)
        return info, plaintext

    async def verify(self, plaintext: str) -> ApiKeyInfo | None:
        """The key's info if it exists and is not revoked; None for anything else."""
        prefix = _split(plaintext)
        if prefix is None:
            return None
        digest = key_digest(plaintext)
        async with self._db.read() as conn:
            rows = (await conn.execute(select(api_keys).where(api_keys.c.prefix == prefix))).all()
        match = next((row for row in rows if hmac.compare_digest(row.key_hash, digest)), None)
        if match is None or match.revoked_at is not None:
            return None
        return await self._touch(_info(match))

    async def _touch(self, info: ApiKeyInfo) -> ApiKeyInfo:
        now = utcnow()
        if info.last_used_at is not None and now - info.last_used_at < LAST_USED_RESOLUTION:
            return info
        async with self._db.write() as conn:
            await conn.execute(update(api_keys).where(api_keys.c.id == info.id).values(last_used_at=now))
        return replace(info, last_used_at=now)

    async def get(self, key_id: str, tenant: str | None = None) -> ApiKeyInfo:
        """One key by id; with `tenant`, only that tenant's keys are visible."""
        async with self._db.read() as conn:
            row = (await conn.execute(_by_id(key_id, tenant))).one_or_none()
        if row is None:
            raise NotFound(f"API key {key_id!r} not found")
        return _info(row)

    async def list(self, tenant: str | None = None, *, include_revoked: bool = True) -> list[ApiKeyInfo]:
        """All keys (tenant None, for an operator) or one tenant's, oldest first."""
        query = select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id)
        if tenant is not None:
            query = query.where(api_keys.c.tenant == tenant)
        if not include_revoked:
            query = query.where(api_keys.c.revoked_at.is_(None))
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [_info(row) for row in rows]

    async def revoked(self) -> builtins.list[ApiKeyInfo]:
        """Every revoked key (a gateway told only that some key changed finds what to close)."""
        query = select(api_keys).where(api_keys.c.revoked_at.is_not(None))
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [_info(row) for row in rows]

    async def revoked_count(self) -> int:
        """How many keys were ever revoked: it only grows, so a change means a new revocation."""
        query = select(func.count(api_keys.c.revoked_at))
        async with self._db.read() as conn:
            return int((await conn.execute(query)).scalar_one())

    async def revoke(
        self, key_id: str, tenant: str | None = None, *, actor: Actor | None = None
    ) -> ApiKeyInfo:
        """Revoke now; revoking twice keeps the first revocation time (and writes no second record)."""
        async with self._db.write() as conn:
            row = (await conn.execute(_by_id(key_id, tenant).with_for_update())).one_or_none()
            if row is None:
                raise NotFound(f"API key {key_id!r} not found")
            if row.revoked_at is not None:
                return _info(row)
            now = utcnow()
            await conn.execute(update(api_keys).where(api_keys.c.id == key_id).values(revoked_at=now))
            await _audit(conn, actor, "key.revoked", row.tenant, key_id, row.name, {"prefix": row.prefix})
        return replace(_info(row), revoked_at=now)


async def _audit(
    conn: Any,
    actor: Actor | None,
    action: str,
    tenant: str,
    key_id: str,
    name: str | None,
    detail: dict[str, Any],
) -> None:
    await write_audit(
        conn,
        actor,
        action,
        tenant=tenant,
        object_type="key",
        object_id=key_id,
        object_name=name,
        detail=detail,
    )


def _by_id(key_id: str, tenant: str | None) -> Select[Any]:
    query = select(api_keys).where(api_keys.c.id == key_id)
    return query if tenant is None else query.where(api_keys.c.tenant == tenant)
