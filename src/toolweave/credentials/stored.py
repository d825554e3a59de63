"""The Python API's grants: in the config's database (`gateway.database`), where `toolweave login`
keeps them, so a script's `Gateway.from_config(...)` calls a `[backends.oauth]` backend as the user
who logged in, and the grants it obtains or refreshes outlive the process.

The database is opened at the first use of a grant, not at construction (a gateway whose OAuth
backends are never used never opens it), and closed with the gateway.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolweave.store import Database, OAuthTokenRepository


class StoredGrants:
    """A `GrantStore` on the database at `url` (`store.OAuthTokenRepository`, encrypted as ever)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._db: Database | None = None
        self._repo: OAuthTokenRepository | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"StoredGrants({self.url!r})"

    async def _ready(self) -> OAuthTokenRepository:
        if self._repo is not None:
            return self._repo
        async with self._lock:
            if self._repo is None:
                from toolweave.store import Database, OAuthTokenRepository

                db = Database.from_url(self.url)
                await db.start()
                self._db, self._repo = db, OAuthTokenRepository(db)
        return self._repo

    async def get(self, tenant: str | None, subject: str, backend: str) -> dict[str, Any] | None:
        return await (await self._ready()).get(tenant, subject, backend)

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
        await (await self._ready()).put(tenant, subject, backend, grant, scope=scope, expires_at=expires_at)

    async def delete(self, tenant: str | None, subject: str, backend: str) -> bool:
        return await (await self._ready()).delete(tenant, subject, backend)

    async def latest_subject(self, backend: str) -> tuple[str | None, str] | None:
        return await (await self._ready()).latest_subject(backend)

    async def close(self) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = self._repo = None
