"""Backends added in the web UI (`managed_backends`): each one's `[[backends]]` entry, encrypted
whole with the connections' key (`crypto.SecretBox`), since its environment, headers and auth hold
secrets. Each add or change is audited in its own transaction, naming the secret keys, never their
values. Operator-wide: backends are shared by every tenant (docs/ui.md).
"""

from __future__ import annotations

import os
import time
from typing import Any

import orjson
from sqlalchemy import delete, select, update

from toolweave.actor import Actor
from toolweave.store.audit import write_audit
from toolweave.store.crypto import SecretBox
from toolweave.store.database import Database
from toolweave.store.errors import SecretKeyError
from toolweave.store.tables import managed_backends


def secret_names(entry: dict[str, Any]) -> list[str]:
    """The keys of the entry whose values are secrets: env variables, headers, auth credentials."""
    found = [f"env.{name}" for name in entry.get("env") or {}]
    found += [f"headers.{name}" for name in entry.get("headers") or {}]
    auth = entry.get("auth")
    if not isinstance(auth, dict):
        auth = {}
    found += [f"auth.{key}" for key in ("value", "token", "password") if auth.get(key)]
    return found


class ManagedBackendRepository:
    def __init__(
        self, db: Database, box: SecretBox | None = None, *, key_file: str | os.PathLike[str] | None = None
    ) -> None:
        self._db = db
        self._box = box
        self._key_file = key_file

    @property
    def box(self) -> SecretBox:
        if self._box is None:
            self._box = SecretBox.resolve(self._db, key_file=self._key_file)
        return self._box

    async def list(self) -> list[dict[str, Any]]:
        """Every stored entry, decrypted, by name."""
        query = select(managed_backends.c.name, managed_backends.c.entry).order_by(managed_backends.c.name)
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [self._open(row.entry, row.name) for row in rows]

    async def versions(self) -> dict[str, float]:
        """Name → when last stored: one cheap query that tells a gateway what changed elsewhere."""
        query = select(managed_backends.c.name, managed_backends.c.updated_at)
        async with self._db.read() as conn:
            return {row.name: row.updated_at for row in (await conn.execute(query)).all()}

    async def get(self, name: str) -> dict[str, Any] | None:
        query = select(managed_backends.c.entry).where(managed_backends.c.name == name)
        async with self._db.read() as conn:
            row = (await conn.execute(query)).one_or_none()
        return self._open(row.entry, name) if row is not None else None

    async def put(
        self, entry: dict[str, Any], transport: str, *, actor: Actor | None = None
    ) -> tuple[bool, float]:
        """Store `entry` (already validated) under its name: (True when it is new, when stored). The
        audit record (`backend.created` / `backend.updated`) commits with it."""
        name = str(entry["name"])
        blob = self.box.encrypt(orjson.dumps({"name": name, "entry": entry}))
        now = time.time()
        async with self._db.write() as conn:
            changed = await conn.execute(
                update(managed_backends)
                .where(managed_backends.c.name == name)
                .values(transport=transport, entry=blob, updated_at=now)
            )
            created = changed.rowcount == 0
            if created:
                await conn.execute(
                    managed_backends.insert().values(
                        name=name, transport=transport, entry=blob, created_at=now, updated_at=now
                    )
                )
            await write_audit(
                conn,
                actor,
                "backend.created" if created else "backend.updated",
                tenant=None,
                object_type="backend",
                object_id=name,
                object_name=name,
                detail={"transport": transport, "secrets": secret_names(entry)},
            )
        return created, now

    async def delete(self, name: str, *, actor: Actor | None = None) -> bool:
        """Remove `name`; False when it was not stored. The audit record (`backend.deleted`) commits with it."""
        async with self._db.write() as conn:
            gone = await conn.execute(delete(managed_backends).where(managed_backends.c.name == name))
            if gone.rowcount:
                await write_audit(
                    conn, actor, "backend.deleted", tenant=None, object_type="backend", object_id=name,
                    object_name=name,
                )  # fmt: skip
        return bool(gone.rowcount)

    def _open(self, blob: bytes, name: str) -> dict[str, Any]:
        what = f"the backend {name!r} added in the UI"
        payload: Any = orjson.loads(self.box.decrypt(bytes(blob), what))
        if payload.get("name") != name or not isinstance(payload.get("entry"), dict):
            raise SecretKeyError(f"{what} holds data encrypted for another backend; refusing it")
        return dict(payload["entry"])
