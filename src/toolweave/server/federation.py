"""The WebSocket endpoint federated clients connect out to: `/api/v1/federation?namespace=NAME`.

Authentication is the API key (`Authorization: Bearer tw_...`) with the
`tools:federate` scope, checked here because the HTTP auth middleware only
sees HTTP requests. The socket is accepted first and then closed with a code
and a reason (4401 bad key, 4403 missing scope, 4404 federation off), so the
client can print why instead of a bare failed handshake. What follows is the
core's `serve_client`: this module only adapts Starlette's WebSocket to it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from toolweave.backends.federated import protocol, serve_client
from toolweave.gateway import Gateway
from toolweave.server.auth import bearer_token
from toolweave.server_compat import drop_connection
from toolweave.services.keys import KeyCache
from toolweave.store import ApiKeyInfo

logger = logging.getLogger("toolweave.federation")

FEDERATE_SCOPE = "tools:federate"


class _SocketChannel:
    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket

    async def send(self, text: str) -> None:
        await self.websocket.send_text(text)

    async def close(self, code: int, reason: str) -> None:
        if self.websocket.application_state == WebSocketState.DISCONNECTED:
            return
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):  # the client is gone already
            await self.websocket.close(code, reason)
        if code == protocol.FLOODED:
            drop_connection(self.websocket)  # a flooder would keep costing the loop until it answers


def federation_route(
    gateway: Gateway, *, require_auth: bool = False, keys: Callable[[], KeyCache | None] = lambda: None
) -> WebSocketRoute:
    """The route; `keys()`: the key cache once the runtime has started (None: no keys can be checked)."""

    async def endpoint(websocket: WebSocket) -> None:
        offered = websocket.scope.get("subprotocols") or []
        await websocket.accept(subprotocol=protocol.SUBPROTOCOL if protocol.SUBPROTOCOL in offered else None)
        if not gateway.config.federation.enabled:
            await websocket.close(
                protocol.DISABLED, "federation is disabled on this gateway ([federation] enabled)"
            )
            return
        caller = await _caller(websocket, require_auth, keys())
        if caller is None:
            return
        tenant, key_id, who = caller
        client = websocket.client
        origin = f"{client.host if client else '?'}, {who}"
        channel = _SocketChannel(websocket)
        await serve_client(
            gateway.federation,
            channel,
            lambda: _receive(websocket),
            namespace=websocket.query_params.get("namespace"),
            tenant=tenant,
            key_id=key_id,
            origin=origin,
        )
        await channel.close(1000, "")

    return WebSocketRoute(protocol.PATH, endpoint, name="federation")


async def _caller(
    websocket: WebSocket, require_auth: bool, keys: KeyCache | None
) -> tuple[str | None, str | None, str] | None:
    """(tenant, key id, how to name it) of an allowed caller; None after closing on a refused one."""
    token = bearer_token(websocket.scope)
    if not require_auth and (token is None or keys is None):
        return None, None, "local"
    info: ApiKeyInfo | None = await keys.verify(token) if keys is not None and token is not None else None
    if info is None:
        reason = "an API key is required" if token is None else "the API key is unknown, malformed or revoked"
        await websocket.close(protocol.UNAUTHORIZED, reason)
        return None
    if FEDERATE_SCOPE not in info.scopes:
        await websocket.close(protocol.FORBIDDEN, f"this API key lacks the {FEDERATE_SCOPE} scope")
        return None
    return info.tenant, info.id, f"key {info.prefix}"


async def _receive(websocket: WebSocket) -> Any:
    try:
        message = await websocket.receive()
    except (WebSocketDisconnect, RuntimeError):
        return None
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    return text if text is not None else message.get("bytes", b"")
