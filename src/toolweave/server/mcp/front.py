"""The MCP front: the SDK's low-level `Server`, with handlers that delegate to the gateway.

One `ToolExecutor` pool set per client session (so the serial pool is per
session: a handshake-era connection, or on the sessionless 2026-07-28 revision
the authenticated principal), list changes announced on both protocol
revisions, resources and prompts passed through under namespaced names.

Hot path: `tools/list` and plain `tools/call` are answered by a `Server.middleware`
(`MCPFront._fast_path`) with wire dicts, skipping the SDK's per-request params
validation and result re-validation (docs/performance.md). Requests the fast path
does not fully understand (cursors, input responses, an elicitation that needs the
2026-07-28 background path, a connection before its handshake) go through the SDK
handlers unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import mcp_types as types
import orjson
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave import __version__
from toolweave.executor.admission import Pools
from toolweave.executor.executor import Session, ToolExecutor
from toolweave.gateway import Gateway
from toolweave.server.mcp.elicitation import InputBroker, client_can_elicit, legacy_elicit

logger = logging.getLogger("toolweave.server")
SESSION_SCOPE_KEY = "toolweave.session"
"""ASGI scope key where the auth middleware leaves the caller's `Session` (tenant, scopes)."""
MAX_PRINCIPAL_POOLS = 1024
"""Pool sets kept for 2026-07-28 callers (one per principal), least recently used dropped first."""
MAX_LISTINGS = 256
"""Prebuilt `tools/list` answers kept per catalog snapshot (one per tenant and protocol version)."""

_ENVELOPE_KEYS = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY}
)
"""`_meta` keys of a 2026-07-28 request (validated by the SDK's inbound ladder before middleware runs)."""


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
        self._connection_pools: weakref.WeakKeyDictionary[Any, Pools] = weakref.WeakKeyDictionary()
        """Handshake-era sessions: one pool set per connection, gone with the connection."""
        self._principal_pools: OrderedDict[tuple[Any, ...], Pools] = OrderedDict()
        """2026-07-28 (no sessions): one pool set per caller identity, bounded LRU."""
        self._legacy_connections: weakref.WeakSet[Any] = weakref.WeakSet()
        self._announcements: set[asyncio.Task[None]] = set()
        self._listings: tuple[Any, dict[tuple[str | None, str], tuple[dict[str, Any], bytes | None]]] = (
            None,
            {},
        )
        self._annotated: tuple[Any, dict[str, bool]] = (None, {})
        self.server = self._build()
        self._stamp = self.server.server_info_stamp
        """The `serverInfo` stamp of 2026-07-28 results: the server's identity is fixed, and nothing mutates it."""
        # no OpenTelemetry span per message; toolweave's own fast path instead (provisional SDK seam,
        # covered by tests/server/test_front_fast_path.py)
        self.server.middleware = [self._fast_path]
        self._unsubscribe = gateway.on_tools_changed(self._tools_changed)

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """A dict lookup, so the SDK's `Mcp-Param-*` header check never runs our tools/list per call.

        None (nothing to check) for a tool without `x-mcp-header` annotations: the SDK's check
        would walk the schema per call to find none.
        """
        catalog = self.gateway.catalog
        entry = catalog.get(name)
        if entry is None:
            return None
        known, annotated = self._annotated
        if known is not catalog:
            annotated = {}
            self._annotated = (catalog, annotated)
        found = annotated.get(name)
        if found is None:
            schema = entry.tool.input_schema
            found = annotated[name] = find_invalid_x_mcp_header(schema) is None and bool(
                x_mcp_header_map(schema)
            )
        return entry.tool.input_schema if found else None

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
        return self._session_of_scope(getattr(request, "scope", None))

    def _session_of_scope(self, scope: Any) -> Session:
        if isinstance(scope, dict) and isinstance(scope.get(SESSION_SCOPE_KEY), Session):
            return scope[SESSION_SCOPE_KEY]
        return self.default_session

    def _pools_for(self, ctx: Any, base: Session) -> Pools:
        """The admission pools of the caller's session.

        A handshake-era (2025-11-25) connection is a session: its pools live as long as
        it does. On 2026-07-28 every request is self-contained (the SDK builds a new
        `Connection` per request), so the session is the authenticated principal: the
        API key (tenant, key label, scopes), or the local operator when auth is off.
        """
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            connection = getattr(ctx.session, "_connection", None)
            if connection is not None:
                pools = self._connection_pools.get(connection)
                if pools is None:
                    pools = self._connection_pools[connection] = self._new_pools()
                return pools
        return self._principal_pools_for(base)

    def _principal_pools_for(self, base: Session) -> Pools:
        key = (base.tenant, base.label, base.scopes)
        pools = self._principal_pools.get(key)
        if pools is None:
            pools = self._principal_pools[key] = self._new_pools()
            if len(self._principal_pools) > MAX_PRINCIPAL_POOLS:
                self._principal_pools.popitem(last=False)
        else:
            self._principal_pools.move_to_end(key)
        return pools

    def _new_pools(self) -> Pools:
        policy = self.gateway.config.policy
        return Pools.create(policy.read_width, policy.concurrent_width)

    def _remember_legacy(self, ctx: Any) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None:
            self._legacy_connections.add(connection)

    def _tools_changed(self) -> None:
        task = asyncio.get_running_loop().create_task(self._announce_tools_changed())
        self._announcements.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._announcements.discard)

    async def _announce_tools_changed(self) -> None:
        await self.bus.publish(ToolsListChanged())
        for connection in list(self._legacy_connections):
            try:
                await connection.send_tool_list_changed()
            except Exception:  # noqa: BLE001 - a closed connection is simply forgotten
                self._legacy_connections.discard(connection)

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
        return ToolExecutor(self.gateway, session, pools=self._pools_for(ctx, base))

    # -- the fast path ---------------------------------------------------------

    async def _fast_path(self, ctx: Any, call_next: Any) -> Any:
        """`Server.middleware`: `tools/list` and plain `tools/call` answered with wire dicts.

        A middleware that returns without `call_next` is trusted as-is by the SDK (no
        params validation, no result re-validation), so this does what those steps
        would have done for the requests it takes, and hands everything else on.
        """
        method = ctx.method
        if method == "tools/call":
            arguments = self._plain_call(ctx)
            if arguments is not None:
                return await self._fast_call(ctx, arguments)
        elif method == "tools/list" and self._plain_list(ctx):
            self._remember_legacy(ctx)
            return self._listing(ctx)
        return await call_next(ctx)

    def _ready(self, ctx: Any) -> bool:
        """Past the handshake (the SDK's init gate), or a 2026-07-28 request (born ready)."""
        if ctx.request_id is None:
            return False
        connection = getattr(ctx.session, "_connection", None)
        return connection is not None and connection.initialize_accepted

    def _plain_call(self, ctx: Any) -> dict[str, Any] | None:
        """The arguments of a `tools/call` the fast path takes, else None (the SDK handler takes it)."""
        if not self._ready(ctx):
            return None
        found = _plain_call_params(ctx.params)
        if found is None:
            return None
        name, arguments = found
        if (
            ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            and client_can_elicit(ctx)
            and self._may_ask(name)
        ):
            return None  # may need the 2026-07-28 background path (InputBroker)
        return arguments

    async def _fast_call(self, ctx: Any, arguments: dict[str, Any]) -> dict[str, Any]:
        self._remember_legacy(ctx)
        base = self._session(ctx)
        if "tools:call" not in base.scopes:
            raise MCPError(code=-32001, message="this API key lacks the tools:call scope")
        version = ctx.protocol_version
        elicit = None if version in MODERN_PROTOCOL_VERSIONS else legacy_elicit(ctx)
        executor = self._executor(ctx, base, elicit)
        return await self._wire_call(executor, version, ctx.params["name"], arguments, _progress_fn(ctx))

    async def _wire_call(
        self, executor: ToolExecutor, version: str, name: str, arguments: dict[str, Any], progress: Any
    ) -> dict[str, Any]:
        """Call, and shape the result for the wire exactly as the SDK's runner would."""
        result = await executor.call(name, arguments, progress=progress)
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if version in MODERN_PROTOCOL_VERSIONS:
            dumped["resultType"] = "complete"
            return self._stamped(dumped)
        return _methods.serialize_server_result("tools/call", version, dumped)

    def _plain_list(self, ctx: Any) -> bool:
        return (
            _plain_list_params(ctx.params)
            and "tools/list" not in self.server.cache_hints
            and self._ready(ctx)
        )

    def _listing(self, ctx: Any) -> dict[str, Any]:
        listing, _encoded = self._listing_for(self._session(ctx).tenant, ctx.protocol_version)
        return dict(listing)

    def _listing_for(self, tenant: str | None, version: str) -> tuple[dict[str, Any], bytes | None]:
        """The wire `tools/list` result (stamped on 2026-07-28), built once per catalog snapshot, tenant
        and protocol version; and its JSON once the plain lane asked for it."""
        catalog = self.gateway.catalog
        known, listings = self._listings
        if known is not catalog:
            listings = {}
            self._listings = (catalog, listings)
        key = (tenant, version)
        found = listings.get(key)
        if found is None:
            model = types.ListToolsResult(tools=self.gateway.list_tools(tenant))
            dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
            listing = _methods.serialize_server_result("tools/list", version, dumped)
            if version in MODERN_PROTOCOL_VERSIONS:
                listing = self._stamped(listing)
            if len(listings) >= MAX_LISTINGS:
                listings.pop(next(iter(listings)))
            found = listings[key] = (listing, None)
        return found

    def _stamped(self, result: dict[str, Any]) -> dict[str, Any]:
        """The 2026-07-28 `serverInfo` stamp the SDK puts on every result (the gateway, never a backend)."""
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = {SERVER_INFO_META_KEY: self._stamp}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            result["_meta"] = {**meta, SERVER_INFO_META_KEY: self._stamp}
        return result

    # -- the plain 2026-07-28 lane (straight off HTTP: server/app.py `PlainModernLane`) ----

    @property
    def lane_open(self) -> bool:
        """Whether requests may bypass the SDK's request pipeline (nobody changed the server's middleware)."""
        return self.server.middleware == [self._fast_path] and "tools/list" not in self.server.cache_hints

    async def plain_call(self, scope: Any, verdict: Any, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The wire result of a plain 2026-07-28 `tools/call` whose envelope and headers passed the SDK's
        inbound ladder (`verdict`), or None when the SDK must take it (progress, input, a missing scope)."""
        found = _plain_call_params(params)
        if found is None:
            return None
        meta = params.get("_meta")
        if isinstance(meta, Mapping) and ("progressToken" in meta or LOG_LEVEL_META_KEY in meta):
            return None
        name, arguments = found
        base = self._session_of_scope(scope)
        if "tools:call" not in base.scopes:
            return None  # the SDK path answers with the scope error
        version = verdict.protocol_version
        connection = Connection.from_envelope(version, verdict.client_info, verdict.client_capabilities)
        capabilities = connection.client_capabilities
        if capabilities is not None and capabilities.elicitation is not None and self._may_ask(name):
            return None  # the InputBroker path
        session = Session(tenant=base.tenant, scopes=base.scopes, label=base.label, extra=base.extra)
        executor = ToolExecutor(self.gateway, session, pools=self._principal_pools_for(base))
        return await self._wire_call(executor, version, name, arguments, None)

    def plain_listing(self, scope: Any, verdict: Any, params: Any) -> bytes | None:
        """The JSON of a plain 2026-07-28 `tools/list` result (cached per snapshot), or None."""
        if not _plain_list_params(params):
            return None
        tenant = self._session_of_scope(scope).tenant
        version = verdict.protocol_version
        listing, encoded = self._listing_for(tenant, version)
        if encoded is None:
            encoded = orjson.dumps(listing)
            _catalog, listings = self._listings
            if (tenant, version) in listings:
                listings[(tenant, version)] = (listing, encoded)
        return encoded

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


def _plain_call_params(params: Any) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of `tools/call` params that need no validation beyond their shape, else None."""
    if not isinstance(params, Mapping):
        return None
    name = params.get("name")
    arguments = params.get("arguments")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    for key in params:
        if key not in ("name", "arguments", "_meta"):
            return None  # inputResponses, requestState, task, ...: the SDK path
    if not _plain_meta(params.get("_meta")):
        return None
    return name, arguments if arguments is not None else {}


def _plain_list_params(params: Any) -> bool:
    """`tools/list` params with no cursor and nothing to validate."""
    if params is None:
        return True
    if not isinstance(params, Mapping):
        return False
    return all(key == "_meta" for key in params) and _plain_meta(params.get("_meta"))


def _plain_meta(meta: Any) -> bool:
    """A `_meta` the fast path needs no validation for: absent, or the envelope and a progress token."""
    if meta is None:
        return True
    if not isinstance(meta, Mapping):
        return False
    for key, value in meta.items():
        if key == "progressToken":
            if isinstance(value, bool) or not isinstance(value, str | int):
                return False
        elif key not in _ENVELOPE_KEYS:
            return False
    return True


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
