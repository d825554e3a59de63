"""Browser sessions of the web UI: an opaque cookie naming a server-side record, and its CSRF token.

The API key a person types once is kept only here, in the gateway's memory, never in
the browser: the cookie is a random id (HttpOnly, SameSite=Strict). Every request
re-verifies the key through the key cache, so a revoked key ends its sessions. Each
session has its own CSRF token, which every state-changing request must carry.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

COOKIE = "tw_ui_session"
MAX_SESSIONS = 10_000
"""Logged-in sessions kept at most (the least recently used is dropped beyond it)."""
MAX_ANONYMOUS = 2_000
"""Sessions without a key (a login form, a UI without auth) kept at most, apart from the logged-in
ones: a flood of cookie-less requests can only push out other anonymous sessions, never a login."""


@dataclass(slots=True)
class UiSession:
    """One browser's session: its CSRF token and, once logged in, the API key it acts with."""

    id: str
    csrf: str
    api_key: str | None = None
    last_seen: float = field(default_factory=time.monotonic)

    def csrf_matches(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.csrf.encode())


class SessionStore:
    """Sessions in memory, least recently used first, anonymous and logged-in apart; idle ones expire."""

    def __init__(
        self, idle_seconds: float, max_sessions: int = MAX_SESSIONS, max_anonymous: int = MAX_ANONYMOUS
    ) -> None:
        self.idle_seconds = idle_seconds
        self._limits = {True: max_sessions, False: max_anonymous}
        self._pools: dict[bool, OrderedDict[str, UiSession]] = {True: OrderedDict(), False: OrderedDict()}

    def get(self, session_id: str | None) -> UiSession | None:
        if not session_id:
            return None
        for pool in self._pools.values():
            found = pool.get(session_id)
            if found is None:
                continue
            now = time.monotonic()
            if now - found.last_seen > self.idle_seconds:
                del pool[session_id]
                return None
            found.last_seen = now
            pool.move_to_end(session_id)
            return found
        return None

    def create(self, api_key: str | None = None) -> UiSession:
        """A new session with a fresh id and CSRF token (a login always gets a new id: no fixation)."""
        session = UiSession(id=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32), api_key=api_key)
        logged_in = api_key is not None
        pool = self._pools[logged_in]
        pool[session.id] = session
        while len(pool) > self._limits[logged_in]:
            pool.popitem(last=False)
        return session

    def drop(self, session_id: str) -> None:
        for pool in self._pools.values():
            pool.pop(session_id, None)

    def __len__(self) -> int:
        return sum(len(pool) for pool in self._pools.values())
