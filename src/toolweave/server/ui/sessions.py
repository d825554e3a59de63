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
"""Oldest sessions are dropped beyond this: what anonymous visitors can make the gateway keep is bounded."""


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
    """Sessions in memory, least recently used first; idle ones expire."""

    def __init__(self, idle_seconds: float, max_sessions: int = MAX_SESSIONS) -> None:
        self.idle_seconds = idle_seconds
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, UiSession] = OrderedDict()

    def get(self, session_id: str | None) -> UiSession | None:
        if not session_id:
            return None
        found = self._sessions.get(session_id)
        if found is None:
            return None
        now = time.monotonic()
        if now - found.last_seen > self.idle_seconds:
            del self._sessions[session_id]
            return None
        found.last_seen = now
        self._sessions.move_to_end(session_id)
        return found

    def create(self, api_key: str | None = None) -> UiSession:
        """A new session with a fresh id and CSRF token (a login always gets a new id: no fixation)."""
        session = UiSession(id=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32), api_key=api_key)
        self._sessions[session.id] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    def drop(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)
