"""Browser sessions of the web UI: an opaque cookie, its CSRF token, and (once logged in) the key.

The cookie is a random id (HttpOnly, SameSite=Strict). Nothing about a browser lives in one
gateway's memory, so any gateway behind a plain round-robin balancer serves any request:

- **CSRF** is derived from the cookie (`HMAC-SHA256(cookie, "toolweave-ui-csrf")`), so a login
  form served by one gateway is accepted by another, and a browser that never logged in
  costs no storage at all (a flood of cookie-less requests writes nothing). Knowing the token
  does not reveal the cookie; a page of another site can read neither.
- **A login** is a row in the shared database (`store.ui_sessions`): the cookie's SHA-256 and the
  id of the API key, never the key. Each request looks the key up by id (briefly cached), so a
  revoked key ends its sessions on every gateway.

A login and a logout each start a new id (no fixation).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from toolweave.store.ui_sessions import UiSessionRepository

COOKIE = "tw_ui_session"
ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
MAX_ID_LENGTH = 64
"""A cookie longer than this, or with other characters, is no session: a fresh one starts."""
_CSRF_CONTEXT = b"toolweave-ui-csrf"


def csrf_for(session_id: str) -> str:
    return hmac.new(session_id.encode(), _CSRF_CONTEXT, hashlib.sha256).hexdigest()


@dataclass(slots=True)
class UiSession:
    """One browser's session: its id and, once logged in, the id of the API key it acts with."""

    id: str
    key_id: str | None = None
    identity: dict[str, Any] | None = None
    """For a login through an identity provider: tenant, subject, scopes, issuer, expires_at."""

    @property
    def csrf(self) -> str:
        return csrf_for(self.id)

    def csrf_matches(self, token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), self.csrf.encode())


class SessionStore:
    """Anonymous sessions are the cookie alone; logged-in ones are rows of the shared database."""

    def __init__(self, repository: UiSessionRepository) -> None:
        self._logins = repository

    @staticmethod
    def well_formed(session_id: str | None) -> bool:
        return bool(session_id) and len(session_id) <= MAX_ID_LENGTH and set(session_id) <= ID_CHARS  # type: ignore[arg-type]

    async def get(self, session_id: str | None, *, logins: bool = True) -> UiSession | None:
        """The cookie's session, None for no or a malformed cookie. With `logins` (auth on) the
        database says whether it is logged in; without, no page view queries anything."""
        if session_id is None or not self.well_formed(session_id):
            return None
        found = await self._logins.login_of(session_id) if logins else None
        if found is None:
            return UiSession(id=session_id)
        return UiSession(id=session_id, key_id=found[0], identity=found[1])

    @staticmethod
    def create() -> UiSession:
        """A new anonymous session (nothing stored until it logs in)."""
        return UiSession(id=secrets.token_urlsafe(32))

    async def log_in(self, key_id: str, identity: dict[str, Any] | None = None) -> UiSession:
        """A new session id acting with the key `key_id`, or (`identity`) as what an identity
        provider's token said (a login always gets a new id: no fixation)."""
        session = UiSession(id=secrets.token_urlsafe(32), key_id=key_id, identity=identity)
        await self._logins.create(session.id, key_id, identity)
        return session

    async def drop(self, session_id: str) -> None:
        await self._logins.drop(session_id)
