"""The Host and Origin checks of every route (`/mcp`, `/api/v1`, `/metrics`, `/docs`, ...): one ASGI middleware.

Why: a web page the user visits can point its own host name at 127.0.0.1 (DNS
rebinding) or send requests from its own origin. A loopback gateway without
auth treats every request as the operator's, so the only thing that tells such
a request apart is its `Host` and `Origin` headers. The check sits outside
everything else, so no route (present or future) is served without it.

- `Host`: `gateway.allowed_hosts`; empty means the loopback names
  (`127.0.0.1`, `localhost`, `[::1]`, any port) when the gateway is bound to a
  loopback address, and any host otherwise (then API keys are required).
- `Origin` (sent by browsers): absent, or the gateway's own origin (same scheme,
  host and port as the request), or one of `gateway.allowed_origins`; empty
  means the loopback origins (`http://localhost:*` ...) on a loopback bind,
  and no other origin otherwise.

A refused request gets `421` (Host) or `403` (Origin) in the REST error shape.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from toolweave.server.auth import ASGIApp, Receive, Scope, Send, deny

LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
LOOPBACK_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
MAX_HEADER_CHARS = 200
"""A Host or Origin quoted in an error is clipped to this."""
POLICY_VIOLATION = 1008
"""The WebSocket close code for a refused handshake (the server answers it with HTTP 403)."""
WEBSOCKET_REASON_BYTES = 123
"""The longest close reason a WebSocket frame can carry."""


def is_loopback_bind(host: str) -> bool:
    """Whether the gateway listens on a loopback address only (then only local names are served)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def matches(value: str, patterns: Sequence[str]) -> bool:
    """`value` (a Host, or an Origin) against `name`, `name:port` or `name:*` (any port, or none)."""
    value = value.lower()
    for pattern in patterns:
        pattern = pattern.lower()
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-2]
            if value == base or (value.startswith(base + ":") and value[len(base) + 1 :].isdigit()):
                return True
    return False


@dataclass(frozen=True, slots=True)
class HostRules:
    """What a gateway bound to `bind` serves; `hosts` None: any Host."""

    hosts: tuple[str, ...] | None
    origins: tuple[str, ...]

    @classmethod
    def for_bind(cls, bind: str, hosts: Sequence[str] = (), origins: Sequence[str] = ()) -> HostRules:
        loopback = is_loopback_bind(bind)
        allowed_hosts = tuple(hosts) if hosts else (LOOPBACK_HOSTS if loopback else None)
        allowed_origins = tuple(origins) if origins else (LOOPBACK_ORIGINS if loopback else ())
        return cls(allowed_hosts, allowed_origins)

    def host_refusal(self, host: str | None) -> str | None:
        if self.hosts is None:
            return None
        if host and matches(host, self.hosts):
            return None
        shown = repr(_clip(host)) if host else "missing"
        return (
            f"the Host header {shown} is not a name this gateway serves (allowed: {', '.join(self.hosts)}); "
            "set gateway.allowed_hosts to serve another name"
        )

    def origin_refusal(self, origin: str | None, scheme: str, host: str | None) -> str | None:
        if origin is None:
            return None
        if host and origin.lower() == f"{scheme}://{host}".lower():
            return None  # the gateway's own pages
        if matches(origin, self.origins):
            return None
        allowed = ", ".join(self.origins) if self.origins else "only the gateway's own"
        return (
            f"requests from origin {_clip(origin)!r} are not accepted (allowed: {allowed}); "
            "set gateway.allowed_origins to accept another"
        )


class HostOriginMiddleware:
    """Refuses a request whose Host or Origin header is not the gateway's, before any route sees it."""

    def __init__(self, app: ASGIApp, *, rules: HostRules) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host, origin = _headers(scope)
        refusal = self.rules.host_refusal(host)
        if refusal is not None:
            await _refuse(scope, send, 421, "misdirected_request", refusal)
            return
        scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
        refusal = self.rules.origin_refusal(origin, scheme, host)
        if refusal is not None:
            await _refuse(scope, send, 403, "forbidden_origin", refusal)
            return
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, send: Send, status: int, code: str, message: str) -> None:
    """An HTTP error for a request; for a WebSocket handshake a close, which the server answers with 403.

    ASGI has no HTTP reply on a WebSocket scope (without an extension), so writing one there is a 500.
    """
    if scope["type"] == "websocket":
        reason = message.encode()[:WEBSOCKET_REASON_BYTES].decode(errors="ignore")
        await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": reason})
        return
    await deny(send, status, code, message)


def _headers(scope: Scope) -> tuple[str | None, str | None]:
    host = origin = None
    for name, value in scope.get("headers") or ():
        if name == b"host":
            host = value.decode("latin-1")
        elif name == b"origin":
            origin = value.decode("latin-1")
    return host, origin


def _clip(text: str) -> str:
    return text if len(text) <= MAX_HEADER_CHARS else text[:MAX_HEADER_CHARS] + "..."
