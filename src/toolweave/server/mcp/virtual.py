"""`/servers/{name}/mcp`: each virtual server served as an MCP endpoint of its own.

A request finds its server by one dict lookup (the selection was computed when the catalog
changed, `catalog/servers.py`), is refused unless the caller may use that server, and goes to
the server's endpoint (`endpoint.py`): its own SDK server (`serverInfo`, `instructions`),
session managers, listing cache and `list_changed` announcements, built on its first request
(and again should the server's definition object change). Its session managers run in a task of their
own until the app shuts down or the server is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import orjson

from toolweave.config.models import LimitsConfig
from toolweave.executor.session import Session
from toolweave.gateway import Gateway
from toolweave.identity import quotable
from toolweave.server.auth import RESOURCE_SCOPE_KEY, answer_jsonrpc
from toolweave.server.mcp.endpoint import McpEndpoint, build_endpoint
from toolweave.server.mcp.front import Identity, MCPFront
from toolweave.server.mcp.scopes import SCOPE_ERROR_CODE
from toolweave.server.mcp.shared import SessionSharing
from toolweave.server.request_session import scope_session
from toolweave.servers import VirtualServer

logger = logging.getLogger("toolweave.server")


@dataclass(slots=True)
class _Serving:
    server: VirtualServer
    endpoint: McpEndpoint
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


def identity_of(server: VirtualServer) -> Identity:
    config = server.config
    return Identity(
        name=config.name,
        title=config.title,
        description=config.description,
        instructions=config.instructions,
    )


class VirtualEndpoints:
    """The ASGI app of `/servers/{name}/mcp` for every virtual server of one gateway."""

    def __init__(
        self,
        gateway: Gateway,
        limits: LimitsConfig,
        *,
        host: str,
        json_response: bool,
        local: Session,
        sharing: SessionSharing | None = None,
    ) -> None:
        self._gateway = gateway
        self._limits = limits
        self._host = host
        self._json_response = json_response
        self._local = local
        self._sharing = sharing
        self._serving: dict[str, _Serving] = {}
        self._closed = False

    def is_open(self, session_id: str) -> bool:
        return any(serving.endpoint.is_open(session_id) for serving in self._serving.values())

    async def end(self, session_id: str) -> bool:
        for serving in list(self._serving.values()):
            if await serving.endpoint.end(session_id):
                return True
        return False

    def resolve(self, name: str, session: Session) -> VirtualServer | tuple[int, str]:
        """The server a request for `/servers/{name}/mcp` goes to, or (status, why not): one dict lookup
        and the access check, on every request (the selection was computed when the catalog changed)."""
        server = self._gateway.servers.by_name.get(name)
        if server is None or (server.owner is not None and session.tenant != server.owner):
            known = sorted(s.name for s in self._gateway.servers.visible_to(session))
            return 404, f"no virtual server {name!r} (yours: {', '.join(known) or 'none'})"
        if not server.allows(session):
            return 403, (
                f"this caller may not use virtual server {name!r}: its access admits other tenants, "
                "scopes or claims"
            )
        return server

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        name = scope.get("path_params", {}).get("name", "")
        session = scope_session(scope)
        if session is None:
            session = self._local
        server = self.resolve(name, session)
        if isinstance(server, tuple):
            status, message = server
            await _refuse(scope, send, status, message, f"servers:{name}")
            return
        serving = self._serving.get(name)
        if serving is None or serving.server is not server:
            serving = await self._start(server)
        else:
            await serving.ready.wait()
        await serving.endpoint.app(scope, receive, send)

    async def _start(self, server: VirtualServer) -> _Serving:
        """Build the server's endpoint and run its session managers (the one it replaces is stopped)."""
        if self._closed:
            raise RuntimeError("the gateway is shutting down")
        old = self._serving.get(server.name)
        front = MCPFront(server, default_session=self._local, identity=identity_of(server))
        endpoint = build_endpoint(
            front,
            self._limits,
            host=self._host,
            json_response=self._json_response,
            path=f"/servers/{server.name}/mcp",
            sharing=self._sharing,
        )
        serving = _Serving(server, endpoint)
        self._serving[server.name] = serving
        serving.task = asyncio.get_running_loop().create_task(_run(serving))
        if old is not None:
            await _stop(old)
        await serving.ready.wait()
        return serving

    async def close(self) -> None:
        self._closed = True
        serving, self._serving = list(self._serving.values()), {}
        await asyncio.gather(*(_stop(s) for s in serving), return_exceptions=True)


async def _run(serving: _Serving) -> None:
    try:
        async with contextlib.AsyncExitStack() as stack:
            for manager in serving.endpoint.managers:
                await stack.enter_async_context(manager.run())
            serving.ready.set()
            await serving.stop.wait()
    except Exception:
        logger.exception("virtual server %s: its MCP endpoint stopped", serving.server.name)
    finally:
        serving.ready.set()


async def _stop(serving: _Serving) -> None:
    serving.stop.set()
    if serving.task is not None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await serving.task
    if serving.endpoint.shared is not None:
        serving.endpoint.shared.close()
    await serving.endpoint.front.close()


async def _refuse(scope: Any, send: Any, status: int, message: str, wanted: str) -> None:
    """As the auth middleware refuses on an MCP path: a JSON-RPC error (SDK clients show its message);
    a 403 carries the `insufficient_scope` challenge naming `servers:{name}`, the scope an API key or
    token may hold to be admitted (with the protected-resource metadata when the gateway accepts tokens)."""
    if status == 404:
        body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}})
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    resource = scope.get(RESOURCE_SCOPE_KEY)
    if resource is not None:
        challenge = resource.insufficient_scope(wanted, message, scope.get("path", ""))
    else:
        challenge = f'Bearer realm="toolweave", error="insufficient_scope", scope="{wanted}", ' + (
            f'error_description="{quotable(message)}"'
        )
    await answer_jsonrpc(send, 403, SCOPE_ERROR_CODE, message, challenge)
