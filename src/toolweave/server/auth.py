"""API key authentication for `/mcp`, `/api/v1` and (off loopback) `/metrics`, as pure ASGI middleware.

The caller's identity becomes a `Session(tenant, scopes, subject)` in
`scope["toolweave.session"]`, where the MCP front and the REST API read it.
Keys are verified through `toolweave.services.keys.KeyCache` (every MCP
message is an HTTP request, so the database is asked once per key and a
short while).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from toolweave.executor.session import ALL_SCOPES, Session
from toolweave.server.mcp.front import SESSION_SCOPE_KEY
from toolweave.services.keys import KeyCache
from toolweave.store import ApiKeyInfo

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PROTECTED_PREFIXES = ("/mcp", "/api/v1")
METRICS_PATH = "/metrics"


def local_session() -> Session:
    """Who calls when auth is off: the operator, with every scope and no tenant."""
    return Session(tenant=None, scopes=ALL_SCOPES, label="local", subject="local")


def session_for(info: ApiKeyInfo) -> Session:
    label = f"key:{info.prefix}"
    return Session(tenant=info.tenant, scopes=frozenset(info.scopes), label=label, subject=label)


def is_loopback_client(scope: Scope) -> bool:
    client = scope.get("client")
    host = client[0] if client else None
    if not host:
        return False
    if host in ("localhost", "testclient", "testserver"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _protected(path: str) -> bool:
    if path.startswith("/servers/") and path.endswith("/mcp") and path.count("/") == 3:
        return True  # a virtual server's MCP endpoint, `/servers/{name}/mcp`
    return any(path == prefix or path.startswith(prefix + "/") for prefix in PROTECTED_PREFIXES)


def bearer_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            text = value.decode("latin-1").strip()
            kind, _, token = text.partition(" ")
            if kind.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


class AuthMiddleware:
    """Puts the caller's Session into the scope; answers 401 itself when a key is required and missing or bad.

    `/openapi.json` and `/docs` stay public (they describe the API, they do
    not open it). `/metrics` without a key is the operator's to loopback
    clients; others need a key with `tools:read` when auth is required, and
    a key (from anywhere) reads its own tenant's series only.
    """

    def __init__(self, app: ASGIApp, *, required: bool, cache: Callable[[], KeyCache | None]) -> None:
        self.app = app
        self.required = required
        self._cache = cache
        self._local = local_session()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        metrics = path == METRICS_PATH
        if not self.required or not (metrics or _protected(path)):
            scope[SESSION_SCOPE_KEY] = self._local
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope)
        if metrics and token is None and is_loopback_client(scope):
            scope[SESSION_SCOPE_KEY] = self._local  # a local scrape is the operator's: every tenant
            await self.app(scope, receive, send)
            return
        if token is None:
            await deny(
                send, 401, "unauthorized", "an API key is required: send 'Authorization: Bearer tw_...'"
            )
            return
        cache = self._cache()
        info = await cache.verify(token) if cache is not None else None
        if info is None:
            await deny(send, 401, "unauthorized", "the API key is unknown, malformed or revoked")
            return
        session = session_for(info)
        if metrics and "tools:read" not in session.scopes:
            await deny(send, 403, "forbidden", "reading metrics needs the tools:read scope")
            return
        scope[SESSION_SCOPE_KEY] = session
        await self.app(scope, receive, send)


async def deny(send: Send, status: int, code: str, message: str) -> None:
    """An error answer in the REST error shape, sent before any route runs."""
    body = orjson.dumps({"error": {"code": code, "message": message, "problems": []}})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="toolweave"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
