"""One MCP endpoint over streamable HTTP: a front, its session managers and the ASGI app in front of them.

`/mcp` is one; each virtual server's `/servers/{name}/mcp` is another (`virtual.py`), built the
same way so both protocol revisions, the JSON lane and the plain lane behave identically on each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from toolweave.config.models import LimitsConfig
from toolweave.server.mcp.front import MCPFront
from toolweave.server.mcp.shared import SessionSharing, SharedEndpoint
from toolweave.wire.sdk_compat import end_session, holds_session
from toolweave.wire.transport import ModernJsonRouter, PlainModernLane


@dataclass(slots=True)
class McpEndpoint:
    front: MCPFront
    app: Any
    """The ASGI app answering this endpoint's requests (before the session quota and `ExchangeEnd`)."""
    managers: list[StreamableHTTPSessionManager]
    """Run them (`manager.run()`) for as long as the endpoint serves."""
    shared: SharedEndpoint | None = None
    """Its part in sessions shared across replicas (with Redis)."""

    def is_open(self, session_id: str) -> bool:
        """Whether one of the managers still serves the session (the SDK keeps no public view of them)."""
        return any(holds_session(manager, session_id) for manager in self.managers)

    async def end(self, session_id: str) -> bool:
        """End the session now (its key was revoked); False when this endpoint does not hold it."""
        for manager in self.managers:
            if await end_session(manager, session_id):
                return True
        return False


def build_endpoint(
    front: MCPFront,
    limits: LimitsConfig,
    *,
    host: str,
    json_response: bool,
    path: str = "/mcp",
    sharing: SessionSharing | None = None,
) -> McpEndpoint:
    """With `json_response=False` (the default) a 2026-07-28 request that cannot receive
    notifications is still answered with plain JSON (`ModernJsonRouter`); requests that
    can (progress, log messages, `subscriptions/listen`) and every handshake-era
    request take the SDK's SSE-capable path. `json_response=True` answers JSON always.

    `sharing`: handshake-era sessions are shared with the other replicas (`shared.py`)."""
    front.server.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        host=host,
        # Host/Origin are checked once, for every route, by HostOriginMiddleware
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        session_idle_timeout=limits.mcp_session_idle,
        max_sessions=limits.mcp_sessions_total,
    )
    session_manager = front.server.session_manager
    managers = [session_manager]
    endpoint: Any = StreamableHTTPASGIApp(session_manager)
    if not json_response:
        json_manager = StreamableHTTPSessionManager(
            app=front.server,
            json_response=True,
            security_settings=session_manager.security_settings,
            max_request_body_size=session_manager.max_request_body_size,
            session_idle_timeout=limits.mcp_session_idle,
            max_sessions=limits.mcp_sessions_total,
        )
        managers.append(json_manager)
        endpoint = ModernJsonRouter(
            endpoint,
            StreamableHTTPASGIApp(json_manager),
            max_body=session_manager.max_request_body_size,
            lane=PlainModernLane(front, session_manager.security_settings),
        )
    shared = None
    if sharing is not None:
        shared = SharedEndpoint(endpoint, path=path, manager=session_manager, front=front, sharing=sharing)
        endpoint = shared
    return McpEndpoint(front, endpoint, managers, shared)
