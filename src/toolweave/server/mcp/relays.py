"""What the gateway passes between its MCP clients and its backends besides tool calls.

- During a call, a backend's requests (sampling, elicitation, roots) and log messages go to the
  client whose call caused them (`CallerChannel`, set by the front for every `tools/call`).
- `logging/setLevel`: remembered per connection (log messages below it are not passed on) and
  forwarded to every backend that declares logging (backends may log without declaring it).
- `completion/complete`: to the backend of the prompt or resource template, under its own names.
- `resources/subscribe` / `unsubscribe`: to the resource's backend; its `notifications/resources/updated`
  go to every connection that subscribed.

A feature no backend offers is not advertised, and a request for it is answered as the SDK answers a
method the server lacks ("Method not found").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeGuard, runtime_checkable

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave.backends.base import Backend, naming_backend
from toolweave.common_types import ProgressFn
from toolweave.server.mcp.context import HandlerContext
from toolweave.server.mcp.elicitation import PendingCall
from toolweave.wire import sdk_compat
from toolweave.wire.errors import RelayError
from toolweave.wire.transport import EXCHANGE_OVER

logger = logging.getLogger("toolweave.server")

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""RFC 5424 severities, least severe first (`logging/setLevel` passes on this one and above)."""
_CAPABILITY = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
"""Relayed request → the client capability it needs."""


def method_not_found() -> MCPError:
    """What the SDK answers for a method the server does not serve."""
    return MCPError(code=METHOD_NOT_FOUND, message="Method not found")


class CallerChannel:
    """The client side of one `tools/call` (a `wire.relay.ClientChannel`)."""

    __slots__ = ("_ctx", "_pending", "_relays")

    def __init__(self, ctx: HandlerContext, relays: Relays, *, pending: PendingCall | None = None) -> None:
        self._ctx = ctx
        self._relays = relays
        self._pending = pending
        """2026-07-28: the call running in the background, whose `InputRequiredResult` carries a
        backend's request to the client (there are no server requests on that revision)."""

    def can_answer(self, method: str) -> bool:
        """A client that declared the capability and can be reached: on 2025-11-25 one that still
        listens on its call's stream, on 2026-07-28 one whose call can return input requests."""
        capability = _CAPABILITY.get(method)
        if capability is None:
            return False
        try:
            session = self._ctx.session
            capabilities = session.client_capabilities
        except Exception:  # noqa: BLE001 - a connection without a handshake declared nothing
            return False
        if capabilities is None or getattr(capabilities, capability, None) is None:
            return False
        if self._ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return self._pending is not None
        # a request cannot ride a JSON response (can_send_request), nor a stream the client has left
        return bool(session.can_send_request) and not self.gone()

    def can_elicit_url(self) -> bool:
        """A 2025-11-25 client that declared URL-mode elicitation (`elicitation.url`) and can be asked
        now: an OAuth backend's authorization link is sent to it as one (docs/backends-oauth.md)."""
        if self._ctx.protocol_version in MODERN_PROTOCOL_VERSIONS or not self.can_answer(
            "elicitation/create"
        ):
            return False
        declared = self._ctx.session.client_capabilities
        elicitation = declared.elicitation if declared is not None else None
        return elicitation is not None and elicitation.url is not None

    def gone(self) -> bool:
        """Whether the client's HTTP exchange for this call has ended (it walked away; `wire.transport.ExchangeEnd`)."""
        scope = getattr(getattr(self._ctx, "request", None), "scope", None)
        return isinstance(scope, dict) and scope.get(EXCHANGE_OVER, False) is True

    async def request(
        self, method: str, params: Mapping[str, Any] | None, progress: ProgressFn | None = None
    ) -> dict[str, Any]:
        """Sent as the backend wrote it (no re-validation that would add or drop fields); with `progress`,
        under a progress token of the gateway's, whose progress the client reports goes to `progress`."""
        if self._pending is not None:  # 2026-07-28: a client sends no progress on an input request
            return await self._pending.ask(method, params)
        try:
            return await sdk_compat.send_raw_request(self._ctx.session, method, params, on_progress=progress)
        except MCPError as error:
            raise RelayError(error.code, error.message, error.data) from error

    async def log(self, params: Mapping[str, Any]) -> None:
        level = params.get("level")
        if level not in LEVELS or not self._relays.wants(self._ctx, str(level)):
            return
        with warnings.catch_warnings(), contextlib.suppress(Exception):
            warnings.simplefilter("ignore")
            await self._ctx.session.send_log_message(
                level, params.get("data"), params.get("logger"), related_request_id=self._ctx.request_id
            )


class RelayedGateway(Protocol):
    """What the relays read of what a front serves: the `Gateway`, or one of its `VirtualServer`s."""

    @property
    def backends(self) -> Mapping[str, Backend]: ...

    def resources(self) -> dict[str, tuple[types.Resource, Backend]]: ...

    def prompts(self) -> dict[str, tuple[types.Prompt, Backend, str]]: ...

    def backend_for_template(self, uri: str) -> Backend | None: ...


@runtime_checkable
class McpFeatures(Protocol):
    """A backend that speaks MCP's optional features to its server (`MCPBackend`); which of them the
    server declared, `offers` says."""

    name: str

    def offers(self, feature: str) -> bool: ...

    async def set_logging_level(self, level: str) -> None: ...

    async def complete(self, params: dict[str, Any]) -> dict[str, Any]: ...

    async def subscribe_resource(self, uri: str, subscribe: bool = True) -> None: ...

    def on_resource_updated(self, listener: Callable[[str], Any]) -> Callable[[], None]: ...


class Relays:
    """Logging levels, completions and resource subscriptions for one MCP front."""

    def __init__(
        self, gateway: RelayedGateway, tenant_of: Callable[[Any], str | None] = lambda ctx: None
    ) -> None:
        self.gateway = gateway
        self._tenant_of = tenant_of
        """The tenant of a request's session (whose backends' log messages the connection may hear)."""
        self._levels: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._tenants: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()
        self._logs_watched: dict[str, Any] = {}
        """Backend name → the undo of our listener for its log messages outside calls."""
        self._subscribers: dict[str, weakref.WeakSet[Any]] = {}
        self._watched: dict[str, Any] = {}
        """Backend name → the undo of our resource-update listener on it."""
        self._sends: set[asyncio.Task[None]] = set()
        self.on_change: Callable[[Any], None] | None = None
        """Told of a connection whose log level or subscriptions changed (shared sessions: `shared.py`)."""

    # -- what can be relayed ------------------------------------------------------

    def offered(self, feature: str) -> bool:
        """Whether any connected backend offers `feature` ("logging", "completions", "subscribe")."""
        return any(_offers(backend, feature) for backend in self.gateway.backends.values())

    # -- logging -------------------------------------------------------------------

    def wants(self, ctx: HandlerContext, level: str) -> bool:
        """Whether the client of `ctx` asked for messages at `level` (all, until it sets a level)."""
        minimum = self._levels.get(_connection(ctx))
        return minimum is None or LEVELS.index(level) >= minimum

    async def set_level(self, ctx: HandlerContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
        """Served whatever the backends declare: the gateway filters the messages it passes on itself."""
        connection = _connection(ctx)
        if connection is not None:
            self._remember_level(connection, LEVELS.index(params.level), self._tenant_of(ctx))
            if self.on_change is not None:
                self.on_change(connection)
        backends = [b for b in self.gateway.backends.values() if _offers(b, "logging")]
        outcomes = await asyncio.gather(
            *(backend.set_logging_level(params.level) for backend in backends), return_exceptions=True
        )
        for backend, outcome in zip(backends, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                logger.warning("backend %s: logging/setLevel failed: %s", backend.name, outcome)
        return types.EmptyResult()

    def _remember_level(self, connection: Any, level: int, tenant: str | None) -> None:
        self._levels[connection] = level
        self._tenants[connection] = tenant
        for backend in self.gateway.backends.values():
            self._watch_logs(backend)

    def state_of(self, connection: Any) -> dict[str, Any]:
        """What a connection set here: its log level (a name, or None) and the resources it follows."""
        level = self._levels.get(connection)
        subscribed = sorted(
            uri for uri, subscribers in self._subscribers.items() if connection in subscribers
        )
        return {"level": LEVELS[level] if level is not None else None, "subscriptions": subscribed}

    async def restore(self, connection: Any, tenant: str | None, state: Mapping[str, Any]) -> None:
        """Make a connection (a session another replica opened) as its client set it there."""
        level = state.get("level")
        if level in LEVELS:
            self._remember_level(connection, LEVELS.index(str(level)), tenant)
        elif level is None:
            self._levels.pop(connection, None)
        wanted = state.get("subscriptions")
        wanted = {uri for uri in wanted if isinstance(uri, str)} if isinstance(wanted, list) else set()
        for uri, subscribers in list(self._subscribers.items()):
            if connection in subscribers and uri not in wanted:
                subscribers.discard(connection)
        for uri in sorted(wanted):
            backend = self._backend_of(uri)
            if backend is None or not _offers(backend, "subscribe"):
                continue
            subscribers = self._subscribers.setdefault(uri, weakref.WeakSet())
            if connection in subscribers:
                continue
            self._watch(backend)
            first = not subscribers
            subscribers.add(connection)
            if first:  # this replica's backend client sends updates only once asked
                try:
                    await backend.subscribe_resource(uri, True)
                except Exception as error:  # noqa: BLE001 - the others' updates still reach the client
                    logger.warning("backend %s: resources/subscribe %s failed: %s", backend.name, uri, error)

    def _watch_logs(self, backend: Any) -> None:
        on_log = getattr(backend, "on_log", None)
        if on_log is not None and backend.name not in self._logs_watched:
            self._logs_watched[backend.name] = on_log(functools.partial(self._logged, backend))

    async def _logged(self, backend: Any, params: dict[str, Any]) -> None:
        """A backend's log message outside any call: to every connection that set a level at or below
        its level and may see that backend (a shared one, or its tenant's own)."""
        level = params.get("level")
        if level not in LEVELS:
            return
        severity = LEVELS.index(str(level))
        for connection, minimum in list(self._levels.items()):
            if severity < minimum or (
                backend.owner is not None and self._tenants.get(connection) != backend.owner
            ):
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await connection.log(level, params.get("data"), params.get("logger"))
            except Exception:  # noqa: BLE001 - a closed connection is simply forgotten
                self._levels.pop(connection, None)

    # -- completion -----------------------------------------------------------------

    async def complete(
        self, ctx: HandlerContext, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        wire.pop("_meta", None)
        ref = params.ref
        backend: Backend | None
        if isinstance(ref, types.PromptReference):
            found = self.gateway.prompts().get(ref.name)
            if found is None:
                raise MCPError(code=INVALID_PARAMS, message=f"unknown prompt {ref.name!r}")
            _prompt, backend, original = found
            wire["ref"] = {**wire["ref"], "name": original}
        else:
            backend = self.gateway.backend_for_template(str(ref.uri))
            if backend is None:
                raise MCPError(code=INVALID_PARAMS, message=f"unknown resource template {ref.uri!r}")
        if not _offers(backend, "completions"):
            raise method_not_found()
        try:
            answer = await backend.complete(wire)
        except MCPError:
            raise
        except Exception as error:
            raise MCPError(code=-32603, message=naming_backend(backend.name, error)) from error
        return types.CompleteResult.model_validate(answer, by_name=False)

    # -- resource subscriptions ------------------------------------------------------

    def _backend_of(self, uri: str) -> Backend | None:
        found = self.gateway.resources().get(uri)
        return found[1] if found else self.gateway.backend_for_template(uri)

    async def subscribe(
        self, ctx: HandlerContext, params: Any, *, subscribe: bool = True
    ) -> types.EmptyResult:
        uri = str(params.uri)
        backend = self._backend_of(uri)
        if backend is None:
            raise MCPError(code=-32002, message=f"unknown resource {uri!r}")
        if not _offers(backend, "subscribe"):
            raise method_not_found()
        connection = _connection(ctx)  # the client's connection: a request's session ends with the request
        if connection is None:
            raise method_not_found()  # 2026-07-28 has no resources/subscribe (it has subscriptions/listen)
        subscribers = self._subscribers.setdefault(uri, weakref.WeakSet())
        if subscribe:
            self._watch(backend)
            subscribers.add(connection)
        else:
            subscribers.discard(connection)
        if self.on_change is not None:
            self.on_change(connection)
        if subscribe or not subscribers:  # the backend stops sending only when nobody listens any more
            try:
                await backend.subscribe_resource(uri, subscribe)
            except MCPError:
                raise
            except Exception as error:
                raise MCPError(code=-32603, message=naming_backend(backend.name, error)) from error
        return types.EmptyResult()

    def _watch(self, backend: McpFeatures) -> None:
        if backend.name not in self._watched:
            self._watched[backend.name] = backend.on_resource_updated(self._updated)

    def _updated(self, uri: str) -> None:
        for connection in list(self._subscribers.get(uri, ())):
            task = asyncio.get_running_loop().create_task(self._send_update(connection, uri))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)

    async def _send_update(self, connection: Any, uri: str) -> None:
        try:
            await connection.send_resource_updated(uri)
        except Exception:  # noqa: BLE001 - a closed connection is simply forgotten
            for subscribers in self._subscribers.values():
                subscribers.discard(connection)

    def close(self) -> None:
        for undo in [*self._watched.values(), *self._logs_watched.values()]:
            undo()
        self._watched.clear()
        self._logs_watched.clear()
        for task in self._sends:
            task.cancel()


def _offers(backend: Backend, feature: str) -> TypeGuard[McpFeatures]:
    """Whether `backend` speaks MCP's optional features and its server declared `feature`."""
    return isinstance(backend, McpFeatures) and backend.offers(feature)


def _connection(ctx: HandlerContext) -> Any:
    return sdk_compat.connection_of(ctx.session)
