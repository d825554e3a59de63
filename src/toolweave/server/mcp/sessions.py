"""Open MCP sessions per API key and per tenant: one key cannot take the sessions everyone shares.

A handshake-era client (2025-11-25 and older) opens a session with `initialize` and
holds server state until it sends DELETE or goes idle. The SDK caps sessions for the
whole process only, so one key opening thousands would leave every tenant with
`503 Too many open sessions`. `SessionQuota` wraps `/mcp`: before a request that may
open a session runs, it counts that key's and that tenant's live sessions (and the
openings in flight, so concurrent openings cannot overshoot) and refuses with a
`429` naming the limit; the session ID in the answer is remembered as the key's.
Sessions that ended (DELETE, `limits.mcp_session_idle`, a crash) are forgotten the
next time that tenant opens one, by asking the session managers which are alive.

With Redis (`shared.py`) the limits count the sessions of every replica.

A session also answers only the key that opened it (another key gets the SDK's own
`404 Session not found`). 2026-07-28 requests hold no session and are not counted.
The local operator (auth off) is held to `limits.mcp_sessions_total` only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

import orjson

from toolweave.config.models import LimitsConfig
from toolweave.server.mcp.shared import SessionSharing
from toolweave.server.request_session import scope_session

Scope = MutableMapping[str, Any]
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"
Principal = tuple[str, str]
"""(tenant, key label) of the API key that opened a session."""


class SessionQuota:
    """ASGI wrapper of `/mcp` enforcing `limits.mcp_sessions_per_key` and `_per_tenant`."""

    def __init__(
        self,
        app: Any,
        limits: LimitsConfig,
        *,
        live: Callable[[str], bool],
        shared: SessionSharing | None = None,
    ) -> None:
        self.app = app
        self.per_key = limits.mcp_sessions_per_key
        self.per_tenant = limits.mcp_sessions_per_tenant
        self._live = live
        """Whether a session ID is still open in a session manager."""
        self._owners: dict[str, Principal] = {}
        self._by_tenant: dict[str, dict[str, set[str]]] = {}
        """tenant → key label → open session IDs."""
        self._opening: dict[Principal, int] = {}
        self.shared = shared
        """With Redis, the limits count every replica's sessions (`shared.py`)."""
        if shared is not None:
            shared.adopted_listeners.append(self._remember)

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        session = scope_session(scope) if scope["type"] == "http" else None
        if session is None or session.tenant is None:
            await self.app(scope, receive, send)
            return
        principal = (session.tenant, session.label)
        session_id, modern = _session_headers(scope)
        if session_id is not None:
            owner = self._owners.get(session_id)
            if owner is not None and owner != principal:
                await _answer(send, 404, -32600, "Session not found")
                return
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST" or modern:
            await self.app(scope, receive, send)
            return
        refusal = await self._cluster_refusal(principal) if self.shared is not None else None
        if refusal is None:
            refusal = self._refusal(principal)
        if refusal is not None:
            await _answer(send, 429, -32000, refusal)
            return
        await self._open(principal, scope, receive, send)

    async def _open(self, principal: Principal, scope: Scope, receive: Any, send: Any) -> None:
        """Run a request that may open a session, counted as an opening until its answer starts."""
        self._opening[principal] = self._opening.get(principal, 0) + 1
        counted = True

        def release() -> None:
            nonlocal counted
            if counted:
                counted = False
                left = self._opening.get(principal, 1) - 1
                if left > 0:
                    self._opening[principal] = left
                else:
                    self._opening.pop(principal, None)

        async def watched(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                opened = _header(message.get("headers") or (), SESSION_HEADER)
                if opened is not None and message.get("status", 500) < 400:
                    self._remember(opened, principal)
                    if self.shared is not None:
                        await self.shared.counted(opened, principal)
                release()
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            release()

    def held_by(self, tenant: str, label: str) -> list[str]:
        """The open sessions one key opened (its key was revoked: they are to end now)."""
        return sorted(self._prune(tenant).get(label, ()))

    def _remember(self, session_id: str, principal: Principal) -> None:
        tenant, label = principal
        self._owners[session_id] = principal
        self._by_tenant.setdefault(tenant, {}).setdefault(label, set()).add(session_id)

    async def _cluster_refusal(self, principal: Principal) -> str | None:
        """The refusal counting every replica's open sessions (None: within the limits, or Redis
        cannot say and this replica's own count decides)."""
        assert self.shared is not None
        tenant = principal[0]
        held = await self.shared.held(tenant)
        if held is None:
            return None
        self._prune(tenant)
        return self._refusal(principal, {key: set(ids) for key, ids in held.items()})

    def _refusal(self, principal: Principal, keys: dict[str, set[str]] | None = None) -> str | None:
        tenant, label = principal
        if keys is None:
            keys = self._prune(tenant)
        mine = len(keys.get(label, ())) + self._opening.get(principal, 0)
        if mine >= self.per_key:
            return (
                f"this API key has {mine} open MCP sessions, its limit (limits.mcp_sessions_per_key = "
                f"{self.per_key}); close one (DELETE /mcp with its Mcp-Session-Id) or let an idle one expire"
            )
        opening = sum(count for (owner, _), count in self._opening.items() if owner == tenant)
        theirs = sum(len(ids) for ids in keys.values()) + opening
        if theirs >= self.per_tenant:
            return (
                f"tenant {tenant!r} has {theirs} open MCP sessions, its limit (limits.mcp_sessions_per_tenant "
                f"= {self.per_tenant}); close some (DELETE /mcp) or let idle ones expire"
            )
        return None

    def _prune(self, tenant: str) -> dict[str, set[str]]:
        """The tenant's open sessions, after forgetting those that ended (bounded by its limit)."""
        keys = self._by_tenant.get(tenant, {})
        for label in list(keys):
            ended = {sid for sid in keys[label] if not self._live(sid)}
            for sid in ended:
                self._owners.pop(sid, None)
            keys[label] -= ended
            if not keys[label]:
                del keys[label]
        if not keys:
            self._by_tenant.pop(tenant, None)
        return keys


def _session_headers(scope: Scope) -> tuple[str | None, bool]:
    session_id = None
    modern = False
    for name, value in scope.get("headers") or ():
        if name == SESSION_HEADER:
            session_id = value.decode("latin-1")
        elif name == VERSION_HEADER:
            modern = value >= b"2026"
    return session_id, modern


def _header(headers: Iterable[tuple[bytes, bytes]], wanted: bytes) -> str | None:
    for name, value in headers:
        if name.lower() == wanted:
            return value.decode("latin-1")
    return None


async def _answer(send: Any, status: int, code: int, message: str) -> None:
    """A JSON-RPC error without a request id, as the SDK answers transport-level refusals."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
