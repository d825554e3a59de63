"""The MCP front: the SDK's low-level `Server`, with handlers that delegate to the gateway.

Every `tools/call` goes through the one lane of `calls.py`; admission pools
belong to the caller's session inside the executor (a handshake-era
connection, or on the sessionless 2026-07-28 revision the authenticated
principal). List changes are announced on both protocol revisions; resources
and prompts are passed through under namespaced names.

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
import functools
import logging
import warnings
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import orjson
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundModernRoute, find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave import __version__
from toolweave.backends.base import naming_backend
from toolweave.executor import Session
from toolweave.gateway import Gateway
from toolweave.server.mcp.calls import CallLane
from toolweave.server.mcp.context import HandlerContext
from toolweave.server.mcp.elicitation import (
    InputBroker,
    client_can_elicit,
    client_capabilities,
    legacy_elicit,
)
from toolweave.server.mcp.found import FoundTools
from toolweave.server.mcp.relays import CallerChannel, Relays
from toolweave.server.mcp.scopes import missing_scope, require_scope
from toolweave.server.request_session import scope_session
from toolweave.servers import VirtualServer
from toolweave.wire import sdk_compat
from toolweave.wire.params import plain_list_params, wire_listing
from toolweave.wire.relay import client_of_call

logger = logging.getLogger("toolweave.server")
MAX_LISTINGS = 256
"""Prebuilt `tools/list` answers kept per catalog snapshot (one per tenant and protocol version)."""


class _GatewayServer(Server[Any]):
    relays: Relays | None = None

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        """What the SDK derives from our handlers, less what no connected backend offers to relay."""
        capabilities = super().get_capabilities(*args, **kwargs)
        relays = self.relays
        if relays is None:
            return capabilities
        update: dict[str, Any] = {}
        if capabilities.completions is not None and not relays.offered("completions"):
            update["completions"] = None
        resources = capabilities.resources
        if resources is not None and resources.subscribe and not relays.offered("subscribe"):
            update["resources"] = resources.model_copy(update={"subscribe": False})
        return capabilities.model_copy(update=update) if update else capabilities

    def create_initialization_options(self, notification_options=None, *args: Any, **kwargs: Any):  # type: ignore[no-untyped-def]
        options = notification_options or NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return super().create_initialization_options(options, *args, **kwargs)


@dataclass(frozen=True, slots=True)
class Identity:
    """What an MCP server says it is (`serverInfo`) and tells the client's model (`instructions`)."""

    name: str = "toolweave"
    title: str | None = None
    description: str | None = None
    instructions: str | None = "One gateway in front of many MCP servers, plus composite tools."


class MCPFront:
    """Builds and owns the SDK server for one gateway, or one of its virtual servers (`servers.py`:
    a `VirtualServer` offers the same catalog, registry, listings and change listeners)."""

    def __init__(
        self,
        gateway: Gateway | VirtualServer,
        *,
        default_session: Session | None = None,
        identity: Identity | None = None,
    ) -> None:
        self.gateway = gateway
        self.identity = identity or Identity()
        self.default_session = default_session or Session(label="mcp")
        self.bus = InMemorySubscriptionBus()
        self.listening = ListenHandler(self.bus)
        """The 2026-07-28 `subscriptions/listen` streams: ended gracefully by `stop_listening`."""
        self.broker = InputBroker()
        self.lane = CallLane(gateway.registry, self._stamped)
        self.relays = Relays(gateway, lambda ctx: self._session(ctx).tenant)
        self.relays.on_change = self._state_changed
        self.sharing: Any = None
        """The endpoint's `shared.SharedEndpoint` when sessions are shared across replicas (Redis)."""
        self._legacy_connections: weakref.WeakSet[Any] = weakref.WeakSet()
        self._announcements: set[asyncio.Task[None]] = set()
        self._listings: tuple[Any, dict[tuple[str | None, str], tuple[dict[str, Any], bytes | None]]] = (
            None,
            {},
        )
        self._annotated: tuple[Any, dict[str, bool]] = (None, {})
        self._found: weakref.WeakKeyDictionary[Any, FoundTools] = weakref.WeakKeyDictionary()
        """Per handshake-era connection: the found tools it lists (`[search] list_found`, found.py)."""
        self.server = self._build()
        self.server.relays = self.relays
        self._stamp = self.server.server_info_stamp
        """The `serverInfo` stamp of 2026-07-28 results: the server's identity is fixed, and nothing mutates it."""
        # no OpenTelemetry span per message; toolweave's own fast path instead (provisional SDK seam,
        # covered by tests/server/mcp/test_front_fast_path.py)
        sdk_compat.set_fast_path(self.server, self._fast_path)
        self._unsubscribe = gateway.on_tools_changed(self._tools_changed)
        gateway.registry.found_listeners.append(self._tools_found)

    def input_schema(self, name: str) -> dict[str, Any] | None:
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

    def _build(self) -> _GatewayServer:
        with warnings.catch_warnings():  # logging/setLevel is deprecated on 2026-07-28; still relayed before
            warnings.simplefilter("ignore")
            return self._server()

    def _server(self) -> _GatewayServer:
        identity = self.identity
        return _GatewayServer(
            identity.name,
            version=__version__,
            title=identity.title,
            description=identity.description,
            instructions=identity.instructions,
            get_tool_input_schema=self.input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_subscriptions_listen=self.listening,
            on_set_logging_level=self.relays.set_level,
            on_completion=self.relays.complete,
            on_subscribe_resource=self.relays.subscribe,
            on_unsubscribe_resource=functools.partial(self.relays.subscribe, subscribe=False),
        )

    # -- sessions ------------------------------------------------------------

    def _session(self, ctx: HandlerContext) -> Session:
        request = getattr(ctx, "request", None)
        return self._session_of_scope(getattr(request, "scope", None))

    def session_of_scope(self, scope: Any) -> Session:
        """The caller of a request (its ASGI scope): the authenticated key, else the local operator."""
        return self._session_of_scope(scope)

    def _session_of_scope(self, scope: Any) -> Session:
        found = scope_session(scope)
        return found if found is not None else self.default_session

    @staticmethod
    def _connection_of(ctx: HandlerContext) -> Any:
        """The handshake-era connection (a session whose pools live as long as it does), else None.

        On 2026-07-28 every request is self-contained (the SDK builds a new `Connection`
        per request), so the session is the authenticated principal: the API key
        (tenant, key label, scopes), or the local operator when auth is off.
        """
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        return sdk_compat.connection_of(ctx.session)

    def _remember_legacy(self, ctx: HandlerContext) -> None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        connection = sdk_compat.connection_of(ctx.session)
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

    def _tools_found(self, session: Session, names: Sequence[str]) -> bool:
        """`Registry.found_listeners`: list what `find_tools` returned to a handshake-era connection,
        and announce the change to it alone. True when the names are now listed to it."""
        connection = session.owner
        catalog = self.gateway.catalog
        if catalog.list_found == 0 or connection not in self._legacy_connections:
            return False
        found = self._found.get(connection)
        if found is None:
            found = self._found[connection] = FoundTools()
        if found.add(catalog, session.tenant, names):
            self._announce(connection.send_tool_list_changed())
            self._state_changed(connection)
        return True

    # -- shared sessions (shared.py) ---------------------------------------------------------

    def _state_changed(self, connection: Any) -> None:
        """A handshake-era connection's log level, subscriptions or found tools changed: shared."""
        sharing = self.sharing
        session_id = getattr(connection, "session_id", None)
        if sharing is not None and session_id is not None:
            sharing.changed(session_id, self.state_of(connection))

    def state_of(self, connection: Any) -> dict[str, Any]:
        found = self._found.get(connection)
        return {**self.relays.state_of(connection), "found": found.names() if found else []}

    async def restore(self, connection: Any, tenant: str | None, state: dict[str, Any]) -> None:
        """A session opened on another replica, served here: as its client set it up there."""
        self._legacy_connections.add(connection)
        await self.relays.restore(connection, tenant, state)
        names = state.get("found")
        if isinstance(names, list) and names:
            found = self._found.get(connection)
            if found is None:
                found = self._found[connection] = FoundTools()
            found.replace(self.gateway.catalog, tenant, [n for n in names if isinstance(n, str)])

    def connection_of_session(self, session_id: str) -> Any:
        """The handshake-era connection of a session held here, or None."""
        for connection in list(self._legacy_connections):
            if getattr(connection, "session_id", None) == session_id:
                return connection
        return None

    async def _opened(self, ctx: HandlerContext, result: Any) -> None:
        """`initialize` answered: the session's record, so any replica can serve it."""
        connection = sdk_compat.connection_of(ctx.session)
        session_id = getattr(connection, "session_id", None)
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if session_id is None or not isinstance(version, str) or not isinstance(ctx.params, Mapping):
            return
        self._legacy_connections.add(connection)
        sdk_compat.distinct_request_ids(connection)  # the copies other replicas adopt number theirs apart
        session = self._session(ctx)
        await self.sharing.opened(
            session_id, (session.tenant or "", session.label), version, dict(ctx.params)
        )

    def _announce(self, sending: Any) -> None:
        """Send a notification in the background (a closed connection is simply not told)."""

        async def send() -> None:
            with contextlib.suppress(Exception):
                await sending

        task = asyncio.get_running_loop().create_task(send())
        self._announcements.add(task)
        task.add_done_callback(self._announcements.discard)

    def _touch_found(self, ctx: HandlerContext, name: str) -> None:
        """A call of a listed found tool makes it the session's most recently used."""
        if self._found:
            found = self._found.get(self._connection_of(ctx))
            if found is not None:
                found.touch(name)

    def _with_found(
        self, ctx: HandlerContext, tenant: str | None, tools: list[types.Tool]
    ) -> list[types.Tool]:
        """`tools` plus the found tools this connection lists (`[search] list_found`)."""
        found = self._found.get(self._connection_of(ctx)) if self._found else None
        if not found:
            return tools
        return [*tools, *found.tools(self.gateway.catalog, tenant)]

    # -- tools -----------------------------------------------------------------

    async def _list_tools(
        self, ctx: HandlerContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self._remember_legacy(ctx)
        session = self._session(ctx)
        require_scope(session, "tools/list")
        await self.listing_ready()
        tools = self.gateway.list_tools(session.tenant)
        return types.ListToolsResult(tools=self._with_found(ctx, session.tenant, tools))

    async def _call_tool(
        self, ctx: HandlerContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        self._remember_legacy(ctx)  # a client that calls without listing first still hears of changes
        base = self._session(ctx)
        require_scope(base, "tools/call")
        with client_of_call(CallerChannel(ctx, self.relays)):
            return await self._call_tool_as(ctx, base, params)

    async def _call_tool_as(
        self, ctx: HandlerContext, base: Session, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        progress = _progress_fn(ctx)
        arguments = params.arguments or {}
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._touch_found(ctx, params.name)
            executor = self.lane.executor(base, legacy_elicit(ctx), self._connection_of(ctx))
            return await executor.call(params.name, arguments, progress=progress)
        pending = self.broker.resume(params.request_state, params.input_responses)
        if pending is not None:
            return await self.broker.wait(pending, progress)
        if self.lane.may_ask(params.name, client_capabilities(ctx)):
            pending = self.broker.new()
            executor = self.lane.executor(base, pending.elicit if client_can_elicit(ctx) else None)
            # progress follows the call across the client's retries (each retry is a new request)
            relay = pending.progress if progress is not None else None
            # a backend's requests mid-call become questions of this pending call
            with client_of_call(CallerChannel(ctx, self.relays, pending=pending)):
                pending.task = asyncio.create_task(executor.call(params.name, arguments, progress=relay))
            return await self.broker.wait(pending, progress)
        return await self.lane.executor(base, None).call(params.name, arguments, progress=progress)

    # -- the fast path ---------------------------------------------------------

    async def _fast_path(self, ctx: HandlerContext, call_next: Any) -> Any:
        """`Server.middleware`: `tools/list` and plain `tools/call` answered with wire dicts.

        A middleware that returns without `call_next` is trusted as-is by the SDK (no
        params validation, no result re-validation), so this does what those steps
        would have done for the requests it takes, and hands everything else on. Every method's
        scope is checked here first (`scopes.METHOD_SCOPES`), whichever handler answers it.
        """
        method = ctx.method
        require_scope(self._session(ctx), method)
        if method == "initialize" and self.sharing is not None:
            result = await call_next(ctx)
            await self._opened(ctx, result)
            return result
        if method == "tools/call":
            call = self._plain_call(ctx)
            if call is not None:
                return await self._fast_call(ctx, call)
        elif method == "tools/list" and self._plain_list(ctx):
            self._remember_legacy(ctx)
            await self.listing_ready()
            return self._listing(ctx)
        return await call_next(ctx)

    async def listing_ready(self) -> None:
        """Before a `tools/list` is answered: while a backend makes its first connection attempt, wait for
        it (at most gateway.startup_timeout from start), as a call does. Clients that list once and
        ignore `list_changed` would otherwise never see the tools of a backend that is only late."""
        if self.gateway.first_connections_pending():
            await self.gateway.wait_for_first_connections()

    def _ready(self, ctx: HandlerContext) -> bool:
        """Past the handshake (the SDK's init gate), or a 2026-07-28 request (born ready)."""
        if ctx.request_id is None:
            return False
        connection = sdk_compat.connection_of(ctx.session)
        return connection is not None and connection.initialize_accepted

    def _plain_call(self, ctx: HandlerContext) -> tuple[Session, str, dict[str, Any]] | None:
        """(session, name, arguments) of a `tools/call` the fast path takes, else None (the SDK handler)."""
        if not self._ready(ctx):
            return None
        session = self._session(ctx)
        found = self.lane.fast_call(
            ctx.params, ctx.protocol_version, session, capabilities=client_capabilities(ctx)
        )
        return (session, *found) if found is not None else None

    async def _fast_call(
        self, ctx: HandlerContext, call: tuple[Session, str, dict[str, Any]]
    ) -> dict[str, Any]:
        self._remember_legacy(ctx)
        version = ctx.protocol_version
        legacy = version not in MODERN_PROTOCOL_VERSIONS
        session, name, arguments = call
        if legacy:
            self._touch_found(ctx, name)
        with client_of_call(CallerChannel(ctx, self.relays)):
            return await self.lane.answer(
                session,
                version,
                name,
                arguments,
                elicit=legacy_elicit(ctx) if legacy else None,
                owner=self._connection_of(ctx),
                progress=_progress_fn(ctx),
            )

    def _plain_list(self, ctx: HandlerContext) -> bool:
        return (
            plain_list_params(ctx.params) and "tools/list" not in self.server.cache_hints and self._ready(ctx)
        )

    def _listing(self, ctx: HandlerContext) -> dict[str, Any]:
        tenant = self._session(ctx).tenant
        found = self._found.get(self._connection_of(ctx)) if self._found else None
        if found:
            return self._listing_with_found(found, tenant, ctx.protocol_version)
        listing, _encoded = self._listing_for(tenant, ctx.protocol_version)
        return dict(listing)

    def _listing_with_found(self, found: FoundTools, tenant: str | None, version: str) -> dict[str, Any]:
        """The wire `tools/list` of a connection that lists found tools (built again when they change)."""
        catalog = self.gateway.catalog
        key = (catalog, tenant, version)
        listing = found.cached(key)
        if listing is None:
            tools = [*self.gateway.list_tools(tenant), *found.tools(catalog, tenant)]
            listing = wire_listing(tools, version)
            found.remember(key, listing)
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
            listing = wire_listing(self.gateway.list_tools(tenant), version)
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

    async def plain_call(
        self, scope: Any, verdict: InboundModernRoute, params: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The wire result of a plain 2026-07-28 `tools/call` whose envelope and headers passed the SDK's
        inbound ladder (`verdict`), or None when the SDK must take it (progress, input, a missing scope)."""
        version = verdict.protocol_version
        capabilities = sdk_compat.envelope_capabilities(verdict.client_capabilities)
        session = self._session_of_scope(scope)
        call = self.lane.fast_call(params, version, session, capabilities=capabilities, can_notify=False)
        if call is None:
            return None
        name, arguments = call
        return await self.lane.answer(session, version, name, arguments)

    def plain_listing(self, scope: Any, verdict: InboundModernRoute, params: Any) -> bytes | None:
        """The JSON of a plain 2026-07-28 `tools/list` result (cached per snapshot), or None."""
        session = self._session_of_scope(scope)
        if not plain_list_params(params) or missing_scope(session, "tools/list") is not None:
            return None  # the SDK answers (a missing scope: the error of `_fast_path`)
        tenant = session.tenant
        version = verdict.protocol_version
        listing, encoded = self._listing_for(tenant, version)
        if encoded is None:
            encoded = orjson.dumps(listing)
            _catalog, listings = self._listings
            if (tenant, version) in listings:
                listings[(tenant, version)] = (listing, encoded)
        return encoded

    # -- resources and prompts -------------------------------------------------

    async def _list_resources(self, ctx: HandlerContext, params: Any) -> types.ListResourcesResult:
        require_scope(self._session(ctx), "resources/list")
        return types.ListResourcesResult(resources=[r for r, _ in self.gateway.resources().values()])

    async def _list_resource_templates(
        self, ctx: HandlerContext, params: Any
    ) -> types.ListResourceTemplatesResult:
        require_scope(self._session(ctx), "resources/templates/list")
        return types.ListResourceTemplatesResult(resource_templates=self.gateway.resource_templates())

    async def _read_resource(
        self, ctx: HandlerContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        require_scope(self._session(ctx), "resources/read")
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
            raise MCPError(code=-32603, message=naming_backend(backend.name, error)) from error

    async def _list_prompts(self, ctx: HandlerContext, params: Any) -> types.ListPromptsResult:
        require_scope(self._session(ctx), "prompts/list")
        return types.ListPromptsResult(prompts=[p for p, _, _ in self.gateway.prompts().values()])

    async def _get_prompt(
        self, ctx: HandlerContext, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        require_scope(self._session(ctx), "prompts/get")
        found = self.gateway.prompts().get(params.name)
        if found is None:
            raise MCPError(code=-32602, message=f"unknown prompt {params.name!r}")
        _prompt, backend, original = found
        try:
            return await backend.get_prompt(original, params.arguments)
        except MCPError:
            raise
        except Exception as error:
            raise MCPError(code=-32603, message=naming_backend(backend.name, error)) from error

    def stop_listening(self) -> None:
        """A stopping server: end every `subscriptions/listen` stream gracefully now (each client gets the
        stream's final result), so the server does not wait for streams that never end by themselves."""
        self.listening.close()

    async def close(self) -> None:
        self._unsubscribe()
        with contextlib.suppress(ValueError):
            self.gateway.registry.found_listeners.remove(self._tools_found)
        self.relays.close()
        with contextlib.suppress(Exception):
            await self.broker.close()


def _progress_fn(ctx: HandlerContext) -> Any:
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
