"""The MCP front: the SDK's low-level `Server`, with handlers that delegate to the gateway.

One `ToolExecutor` pool set per client connection (so the serial pool is per
session), list changes announced on both protocol revisions, resources and
prompts passed through under namespaced names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave import __version__
from toolweave.executor.admission import Pools
from toolweave.executor.executor import Session, ToolExecutor
from toolweave.gateway import Gateway
from toolweave.server.elicitation import InputBroker, client_can_elicit, legacy_elicit

logger = logging.getLogger("toolweave.server")
SESSION_SCOPE_KEY = "toolweave.session"
"""ASGI scope key where the auth middleware leaves the caller's `Session` (tenant, scopes)."""


class _GatewayServer(Server[Any]):
    def create_initialization_options(self, notification_options=None, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        options = notification_options or NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return super().create_initialization_options(options, *args, **kwargs)


class MCPFront:
    """Builds and owns the SDK server for one gateway."""

    def __init__(self, gateway: Gateway, *, default_session: Session | None = None) -> None:
        self.gateway = gateway
        self.default_session = default_session or Session(label="mcp")
        self.bus = InMemorySubscriptionBus()
        self.broker = InputBroker()
        self._pools: dict[int, tuple[Any, Pools]] = {}
        self._legacy_connections: dict[int, Any] = {}
        self._announcements: set[asyncio.Task[None]] = set()
        self.server = self._build()
        self.server.middleware = []  # no OpenTelemetry span per message on the hot path
        self._unsubscribe = gateway.on_tools_changed(self._tools_changed)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """A dict lookup, so the SDK's `Mcp-Param-*` header check never runs our tools/list per call."""
        entry = self.gateway.catalog.get(name)
        return entry.tool.input_schema if entry is not None else None

    def _build(self) -> Server[Any]:
        return _GatewayServer(
            "toolweave",
            version=__version__,
            instructions="One gateway in front of many MCP servers, plus composite tools.",
            get_tool_input_schema=self._input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_subscriptions_listen=ListenHandler(self.bus),
        )

    # -- sessions ------------------------------------------------------------

    def _session(self, ctx: Any) -> Session:
        request = getattr(ctx, "request", None)
        scope = getattr(request, "scope", None)
        if isinstance(scope, dict) and isinstance(scope.get(SESSION_SCOPE_KEY), Session):
            return scope[SESSION_SCOPE_KEY]
        return self.default_session

    def _pools_for(self, ctx: Any) -> Pools:
        connection = getattr(ctx.session, "_connection", None)
        key = id(connection)
        found = self._pools.get(key)
        if found is None or found[0] is not connection:
            policy = self.gateway.config.policy
            found = (connection, Pools.create(policy.read_width, policy.concurrent_width))
            self._pools[key] = found
            if len(self._pools) > 10_000:  # bound memory for servers with many short sessions
                self._pools.pop(next(iter(self._pools)))
        return found[1]

    def _remember_legacy(self, ctx: Any) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None:
            self._legacy_connections[id(connection)] = connection

    def _tools_changed(self) -> None:
        task = asyncio.get_running_loop().create_task(self._announce_tools_changed())
        self._announcements.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._announcements.discard)

    async def _announce_tools_changed(self) -> None:
        await self.bus.publish(ToolsListChanged())
        for key, connection in list(self._legacy_connections.items()):
            try:
                await connection.send_tool_list_changed()
            except Exception:  # noqa: BLE001 - a closed connection is simply forgotten
                self._legacy_connections.pop(key, None)

    # -- tools -----------------------------------------------------------------

    async def _list_tools(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember_legacy(ctx)
        return types.ListToolsResult(tools=self.gateway.list_tools(self._session(ctx).tenant))

    async def _call_tool(
        self, ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        self._remember_legacy(ctx)  # a client that calls without listing first still hears of changes
        base = self._session(ctx)
        if "tools:call" not in base.scopes:
            raise MCPError(code=-32001, message="this API key lacks the tools:call scope")
        progress = _progress_fn(ctx)
        arguments = params.arguments or {}
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        if modern:
            pending = self.broker.resume(params.request_state, params.input_responses)
            if pending is not None:
                return await self.broker.wait(pending, progress)
            if client_can_elicit(ctx) and self._may_ask(params.name):
                pending = self.broker.new()
                executor = self._executor(ctx, base, pending.elicit)
                # progress follows the call across the client's retries (each retry is a new request)
                relay = pending.progress if progress is not None else None
                pending.task = asyncio.create_task(executor.call(params.name, arguments, progress=relay))
                return await self.broker.wait(pending, progress)
            return await self._executor(ctx, base, None).call(params.name, arguments, progress=progress)
        return await self._executor(ctx, base, legacy_elicit(ctx)).call(
            params.name, arguments, progress=progress
        )

    def _may_ask(self, name: str) -> bool:
        """Only calls that can elicit (composites, tools needing approval) take the background path."""
        entry = self.gateway.catalog.get(name)
        if entry is None:
            return False
        policy = self.gateway.policy
        return entry.composite is not None or bool(policy.approval) or policy.approve_destructive

    def _executor(self, ctx: Any, base: Session, elicit: Any) -> ToolExecutor:
        session = Session(
            tenant=base.tenant, scopes=base.scopes, elicit=elicit, label=base.label, extra=base.extra
        )
        return ToolExecutor(self.gateway, session, pools=self._pools_for(ctx))

    # -- resources and prompts -------------------------------------------------

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[r for r, _ in self.gateway.resources().values()])

    async def _list_resource_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=self.gateway.resource_templates())

    async def _read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        found = self.gateway.resources().get(uri)
        backend = found[1] if found else self.gateway.backend_for_template(uri)
        if backend is None:
            raise MCPError(code=-32002, message=f"unknown resource {uri!r}")
        try:
            return await backend.read_resource(uri)
        except MCPError:
            raise
        except Exception as error:
            raise MCPError(code=-32603, message=f"backend {backend.name!r}: {error}") from error

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[p for p, _, _ in self.gateway.prompts().values()])

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        found = self.gateway.prompts().get(params.name)
        if found is None:
            raise MCPError(code=-32602, message=f"unknown prompt {params.name!r}")
        _prompt, backend, original = found
        try:
            return await backend.get_prompt(original, params.arguments)
        except MCPError:
            raise
        except Exception as error:
            raise MCPError(code=-32603, message=f"backend {backend.name!r}: {error}") from error

    async def close(self) -> None:
        self._unsubscribe()
        with contextlib.suppress(Exception):
            await self.broker.close()


def _progress_fn(ctx: Any) -> Any:
    meta = ctx.meta or {}
    token = meta.get("progressToken") if isinstance(meta, dict) else getattr(meta, "progress_token", None)
    if token is None and isinstance(meta, dict):
        token = meta.get("progress_token")
    if token is None:
        return None

    async def progress(value: float, total: float | None = None, message: str | None = None) -> None:
        with contextlib.suppress(Exception):
            await ctx.session.report_progress(value, total, message)

    return progress
