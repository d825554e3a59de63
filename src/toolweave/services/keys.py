"""Verified API keys, briefly cached: the database is asked once per key and `CACHE_SECONDS`.

Keyed by the key's SHA-256 (the plaintext is never kept). Revoking a key in
this process (`forget_key`) takes effect at once; a key revoked elsewhere (the
CLI, another gateway) stops working when the change feed (or, on SQLite
without one, the runtime's count of revoked keys) says so, or within
`CACHE_SECONDS`.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from toolweave.store import ApiKeyInfo, KeyRepository, NotFound, key_digest

CACHE_SECONDS = 10.0
"""How long a verified (or rejected) key is trusted without asking the database again."""
CACHE_SIZE = 4096


class KeyCache:
    """Verified keys by SHA-256, briefly; failures are cached too so a bad key cannot hammer the database."""

    def __init__(self, keys: KeyRepository, ttl: float = CACHE_SECONDS, size: int = CACHE_SIZE) -> None:
        self._keys = keys
        self._ttl = ttl
        self._size = size
        self._entries: OrderedDict[str, tuple[float, ApiKeyInfo | None]] = OrderedDict()
        self._by_id: OrderedDict[str, tuple[float, ApiKeyInfo | None]] = OrderedDict()
        """Keys looked up by id (the web UI's sessions keep the id, never the key)."""

    async def verify(self, plaintext: str) -> ApiKeyInfo | None:
        digest = key_digest(plaintext)
        now = time.monotonic()
        found = self._entries.get(digest)
        if found is not None and found[0] > now:
            return found[1]
        info = await self._keys.verify(plaintext)
        self._entries[digest] = (now + self._ttl, info)
        self._entries.move_to_end(digest)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return info

    async def by_id(self, key_id: str) -> ApiKeyInfo | None:
        """The key with this id while it is valid (None: unknown, deleted or revoked), cached alike."""
        now = time.monotonic()
        found = self._by_id.get(key_id)
        if found is not None and found[0] > now:
            return found[1]
        try:
            info: ApiKeyInfo | None = await self._keys.get(key_id)
        except NotFound:
            info = None
        if info is not None and info.revoked:
            info = None
        self._by_id[key_id] = (now + self._ttl, info)
        self._by_id.move_to_end(key_id)
        while len(self._by_id) > self._size:
            self._by_id.popitem(last=False)
        return info

    def forget_key(self, key_id: str) -> None:
        """Drop a key (revoked in this process) so its next request is checked again."""
        self._by_id.pop(key_id, None)
        for digest, (_expiry, info) in list(self._entries.items()):
            if info is not None and info.id == key_id:
                self._entries.pop(digest, None)

    def clear(self) -> None:
        self._entries.clear()
        self._by_id.clear()
