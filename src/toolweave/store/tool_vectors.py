"""Search mode's tool vectors in the database: computed once per tool text and model, kept
across restarts and shared by the gateways of one database."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from sqlalchemy import select

from toolweave.store.database import Database
from toolweave.store.tables import tool_vectors

CHUNK = 500
"""Keys per `IN (...)` query: well under SQLite's and PostgreSQL's parameter limits."""


class SqlVectorStore:
    """`catalog.semantic.VectorStore` over the `tool_vectors` table."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def load(self, model: str, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        async with self._db.read() as conn:
            for start in range(0, len(keys), CHUNK):
                chunk = list(keys[start : start + CHUNK])
                query = select(tool_vectors.c.text_key, tool_vectors.c.vector).where(
                    tool_vectors.c.model == model, tool_vectors.c.text_key.in_(chunk)
                )
                found.update({row.text_key: row.vector for row in (await conn.execute(query)).all()})
        return found

    async def save(self, model: str, vectors: Mapping[str, bytes]) -> None:
        """Insert the vectors not stored yet (another gateway may have stored the same ones)."""
        if not vectors:
            return
        known = await self.load(model, list(vectors))
        rows = [
            {"model": model, "text_key": key, "vector": vector, "created_at": time.time()}
            for key, vector in vectors.items()
            if key not in known
        ]
        if rows:
            async with self._db.write() as conn:
                await conn.execute(tool_vectors.insert(), rows)
