"""Where the auth middleware leaves the caller's `Session` in an ASGI scope, and how it is read.

One key, low in `server/`: the middleware (`auth.py`) writes it, the REST dependencies
(`api/deps.py`), the MCP front, its session limits and the virtual servers read it, and none
of them imports another for it.
"""

from __future__ import annotations

from collections.abc import Mapping

from toolweave.executor import Session

SESSION_SCOPE_KEY = "toolweave.session"
"""ASGI scope key where the auth middleware leaves the caller's `Session` (tenant, scopes)."""


def scope_session(scope: object) -> Session | None:
    """The caller the auth middleware found for a request (its ASGI scope); None when it left none."""
    found = scope.get(SESSION_SCOPE_KEY) if isinstance(scope, Mapping) else None
    return found if isinstance(found, Session) else None
