"""Authentication for `/mcp`, `/api/v1` and (off loopback) `/metrics`, as pure ASGI middleware.

Two credentials, one identity: an API key (`tw_...`, verified through
`toolweave.services.keys.KeyCache`: every MCP message is an HTTP request, so the
database is asked once per key and a short while) or an access token of a
configured issuer (`toolweave.identity.TokenVerifier`, cached until it expires).
Either becomes a `Session(tenant, scopes, subject)` in `scope["toolweave.session"]`,
where the MCP front and the REST API read it.

Refusals on `/mcp` speak MCP authorization: a 401 carries a `WWW-Authenticate`
challenge naming the protected-resource metadata (so a client can find the issuer
and log its user in) and a JSON-RPC error body whose message is the reason (SDK
clients show it); a token lacking the scope of the method it sends gets a 403
`insufficient_scope` naming that scope (so a client can step up). An API key
lacking a scope keeps getting the JSON-RPC scope error it always got (a key cannot
step up). Elsewhere refusals are the REST error shape, with the same challenge.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import orjson

from toolweave.executor.session import ALL_SCOPES, Session
from toolweave.identity import Identity, ProtectedResource, TokenRejected, TokenVerifier, quotable
from toolweave.server.mcp.scopes import SCOPE_ERROR_CODE, missing_scope
from toolweave.server.request_session import SESSION_SCOPE_KEY
from toolweave.services.keys import KeyCache
from toolweave.store import ApiKeyInfo

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PROTECTED_PREFIXES = ("/mcp", "/api/v1")
METRICS_PATH = "/metrics"
MCP_PATH = "/mcp"
KEY_PREFIX = "tw_"
UNAUTHORIZED_CODE = -32000
"""The JSON-RPC error code of a 401 on `/mcp` (the scope error of a 403 keeps `scopes.SCOPE_ERROR_CODE`)."""
TOKEN_FLAG = "toolweave.token"
"""Set in a session's `extra` when an access token (not an API key) made it: such a caller is answered
403 `insufficient_scope` over HTTP, so its client can step up."""

CLAIMS_KEY = "claims"
"""Where a token's verified claims are in its session's `extra` (virtual servers' `access.claims`)."""
RESOURCE_SCOPE_KEY = "toolweave.resource"
"""ASGI scope key of the gateway's `ProtectedResource` (when it accepts tokens), for the challenges
of routes that refuse after this middleware (a virtual server's access)."""

logger = logging.getLogger("toolweave.auth")


def local_session() -> Session:
    """Who calls when auth is off: the operator, with every scope and no tenant."""
    return Session(tenant=None, scopes=ALL_SCOPES, label="local", subject="local")


def key_label(info: ApiKeyInfo) -> str:
    """How a key's callers are named in sessions and records (`key:` and its prefix; never the key)."""
    return f"key:{info.prefix}"


def session_for(info: ApiKeyInfo) -> Session:
    label = key_label(info)
    return Session(tenant=info.tenant, scopes=frozenset(info.scopes), label=label, subject=label)


def session_for_token(identity: Identity) -> Session:
    """An access token's caller: the tenant, scopes and subject its claims say (`identity/claims.py`)."""
    return Session(
        tenant=identity.tenant,
        scopes=identity.scopes,
        label=f"oauth:{identity.subject}@{identity.issuer}",
        extra={TOKEN_FLAG: True, CLAIMS_KEY: identity.claims},
        subject=identity.subject,
    )


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


def is_mcp_path(path: str) -> bool:
    """`/mcp`, or a virtual server's MCP endpoint `/servers/{name}/mcp`."""
    if path == MCP_PATH:
        return True
    return path.startswith("/servers/") and path.endswith("/mcp") and path.count("/") == 3


def _protected(path: str) -> bool:
    if is_mcp_path(path):
        return True
    return any(path == prefix or path.startswith(prefix + "/") for prefix in PROTECTED_PREFIXES)


def bearer_token(scope: Scope) -> str | None:
    headers: Iterable[tuple[bytes, bytes]] = scope.get("headers") or ()
    for name, value in headers:
        if name == b"authorization":
            text = value.decode("latin-1").strip()
            kind, _, token = text.partition(" ")
            if kind.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


class AuthMiddleware:
    """Puts the caller's Session into the scope; answers 401 itself when a credential is required and
    missing or bad (403 for a token lacking a method's scope on `/mcp`).

    `/openapi.json`, `/docs` and the protected-resource metadata stay public (they describe the
    API, they do not open it). `/metrics` without a credential is the operator's to loopback
    clients; others need one with `tools:read` when auth is required, and a caller (from
    anywhere) reads its own tenant's series only.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        required: bool,
        cache: Callable[[], KeyCache | None],
        tokens: TokenVerifier | None = None,
        resource: ProtectedResource | None = None,
    ) -> None:
        self.app = app
        self.required = required
        self._cache = cache
        self._tokens = tokens
        self._resource = resource
        self._local = local_session()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._resource is not None:
            scope[RESOURCE_SCOPE_KEY] = self._resource
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
            wanted = "an API key or an access token" if self._tokens else "an API key"
            await self.refuse(scope, send, f"{wanted} is required: send 'Authorization: Bearer ...'", None)
            return
        session = await self._session(scope, send, token)
        if session is None:
            return
        if metrics and "tools:read" not in session.scopes:
            await deny(send, 403, "forbidden", "reading metrics needs the tools:read scope")
            return
        scope[SESSION_SCOPE_KEY] = session
        if is_mcp_path(path) and TOKEN_FLAG in session.extra and not session.scopes >= _MCP_SCOPES:
            await self._mcp_with_scopes(session, scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _session(self, scope: Scope, send: Send, token: str) -> Session | None:
        """The credential's session, or None once it has been refused."""
        if self._tokens is not None and not token.startswith(KEY_PREFIX):
            try:
                return session_for_token(await self._tokens.verify(token))
            except TokenRejected as error:
                logger.info("access token refused (client %s): %s", _client(scope), error)
                await self.refuse(scope, send, f"the access token is refused: {error}", str(error))
                return None
        cache = self._cache()
        info = await cache.verify(token) if cache is not None else None
        if info is None:
            reason = "the API key is unknown, malformed or revoked"
            await self.refuse(scope, send, reason, reason)
            return None
        return session_for(info)

    async def refuse(self, scope: Scope, send: Send, message: str, description: str | None) -> None:
        """401 with the challenge: a JSON-RPC error on `/mcp`, the REST error shape elsewhere."""
        if self._resource is not None:
            challenge = self._resource.unauthorized(description, scope.get("path", ""))
        else:
            challenge = 'Bearer realm="toolweave"'
            if description is not None:
                challenge += f', error="invalid_token", error_description="{quotable(description)}"'
        if is_mcp_path(scope.get("path", "")):
            await answer_jsonrpc(send, 401, UNAUTHORIZED_CODE, message, challenge)
        else:
            await deny(send, 401, "unauthorized", message, challenge)

    async def _mcp_with_scopes(self, session: Session, scope: Scope, receive: Receive, send: Send) -> None:
        """A token lacking `tools:read` or `tools:call`: the methods it sends are looked at first, and
        one needing a scope it lacks is refused 403 `insufficient_scope` before the MCP server runs."""
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, more = await _read_body(receive)
        needed = None if more else _scope_needed(session, body)
        if needed is not None:
            method, wanted = needed
            message = f"this access token lacks the {wanted} scope, which {method} needs"
            challenge = (
                self._resource.insufficient_scope(wanted, message, scope.get("path", ""))
                if self._resource is not None
                else f'Bearer error="insufficient_scope", scope="{wanted}"'
            )
            await answer_jsonrpc(send, 403, SCOPE_ERROR_CODE, message, challenge)
            return
        await self.app(scope, _replay(body, more, receive), send)


_MCP_SCOPES = frozenset({"tools:read", "tools:call"})


def _scope_needed(session: Session, body: bytes) -> tuple[str, str] | None:
    """(method, scope) of the first message in `body` that `session` lacks the scope for."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None  # the MCP server answers a parse error
    for item in message if isinstance(message, list) else [message]:
        method = item.get("method") if isinstance(item, dict) else None
        if isinstance(method, str) and "id" in item:
            wanted = missing_scope(session, method)
            if wanted is not None:
                return method, wanted
    return None


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The request body (the body limit middleware bounds it); `more` when a disconnect cut it short."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts), True
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts), False


def _replay(body: bytes, more: bool, receive: Receive) -> Receive:
    pending = [{"type": "http.request", "body": body, "more_body": more}]

    async def replayed() -> MutableMapping[str, Any]:
        if pending:
            return pending.pop()
        return await receive()

    return replayed


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "?"


async def answer_jsonrpc(send: Send, status: int, code: int, message: str, challenge: str) -> None:
    """An HTTP refusal of an MCP request whose body is a JSON-RPC error (SDK clients show its message)."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", challenge.encode("latin-1")),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def deny(send: Send, status: int, code: str, message: str, challenge: str | None = None) -> None:
    """An error answer in the REST error shape, sent before any route runs."""
    body = orjson.dumps({"error": {"code": code, "message": message, "problems": []}})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", (challenge or 'Bearer realm="toolweave"').encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
