"""The client side of federated tools: connect out to a gateway and serve tools from here.

`@federated_tool` marks a function as a tool (schema from its type hints, as
`@toolweave.tool` does; `toolkit` groups tools in traces), and
`FederatedClient(url, key, manifest).run()` keeps a connection to the gateway
open, reconnecting with backoff, and runs each call in this process — with
this process's credentials, which never leave it. Over the socket the client
is a plain MCP server (`initialize`, `tools/list`, `tools/call`, `ping`,
cancellation); `connect_forever` is the reconnect loop it shares with the
stdio bridge (`toolweave federate`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit, urlunsplit

import mcp_types as types
import orjson
from pydantic import ValidationError

from toolweave.backends.errors import FederationRefused
from toolweave.backends.federated import protocol
from toolweave.backends.python import ToolSpec, to_result, tool_annotations, tool_spec
from toolweave.results import error_result
from toolweave.waiting import set_within

logger = logging.getLogger("toolweave.federation.client")

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__toolweave_federated__"
INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 30.0
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")


# -- declaring tools -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FederatedToolSpec:
    spec: ToolSpec
    toolkit: str | None
    handler: str

    def definition(self) -> dict[str, Any]:
        tool = self.spec.definition()
        meta = {"handler": self.handler, "source": "python", "toolkit": self.toolkit}
        return {
            **tool.model_dump(by_alias=True, exclude_none=True, mode="json"),
            "_meta": {protocol.META_KEY: {k: v for k, v in meta.items() if v is not None}},
        }


def federated_tool(
    name: str | None = None,
    *,
    description: str | None = None,
    toolkit: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    title: str | None = None,
) -> Callable[[F], F]:
    """Mark a function as a federated tool; it runs in the process that serves it with `FederatedClient`."""

    def mark(fn: F) -> F:
        annotations = tool_annotations(read_only, destructive, idempotent, open_world, title)
        spec = tool_spec(fn, name, description, annotations)
        module = "" if fn.__module__ == "__main__" else f"{fn.__module__}."
        setattr(fn, _MARK, FederatedToolSpec(spec, toolkit, module + fn.__qualname__))
        return fn

    return mark


@dataclass(frozen=True)
class ClientManifest:
    """What a client registers: its namespace and its `@federated_tool` functions."""

    namespace: str
    tools: Sequence[Callable[..., Any]]

    def specs(self) -> dict[str, FederatedToolSpec]:
        found: dict[str, FederatedToolSpec] = {}
        for function in self.tools:
            spec = getattr(function, _MARK, None)
            if spec is None:
                raise TypeError(f"{function!r} is not marked with @federated_tool")
            found[spec.spec.name] = spec
        return found


# -- the MCP server on the socket ------------------------------------------------------


@dataclass
class Registration:
    """The gateway's answer to a registration."""

    accepted: bool
    namespace: str | None
    tools: list[str] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Registration:
        """The registration notification's params, as the client and the bridge both read them."""
        return cls(
            accepted=bool(params.get("accepted")),
            namespace=params.get("namespace"),
            tools=list(params.get("tools") or []),
            problems=list(params.get("problems") or []),
        )


class ToolServer:
    """Answers the gateway's MCP requests with the manifest's functions (one per connection)."""

    def __init__(self, manifest: ClientManifest, send: Callable[[str], Awaitable[None]]) -> None:
        self.manifest = manifest
        self.specs = manifest.specs()
        self._send = send
        self._calls: dict[Any, asyncio.Task[None]] = {}
        self.registration: Registration | None = None
        self.registered = asyncio.Event()

    async def handle(self, frame: str) -> None:
        message = orjson.loads(frame)
        method = message.get("method")
        request_id = message.get("id")
        params = message.get("params") or {}
        if method is None:
            return  # this server sends no requests, so expects no answers
        if request_id is None:
            self._notified(method, params)
            return
        if method == "tools/call":
            task = asyncio.create_task(self._call(request_id, params))
            self._calls[request_id] = task
            task.add_done_callback(lambda _t: self._calls.pop(request_id, None))
            return
        answer = self._answer(method, params)
        if answer is None:
            await self._send(protocol.error_response(request_id, -32601, f"method not found: {method}"))
        else:
            await self._send(protocol.response(request_id, answer))

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "initialize":
            asked = params.get("protocolVersion")
            return {
                "protocolVersion": asked if asked in SUPPORTED_VERSIONS else protocol.PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": self.manifest.namespace, "version": "1"},
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [spec.definition() for spec in self.specs.values()]}
        return None

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/cancelled":
            task = self._calls.get(params.get("requestId"))
            if task is not None:
                task.cancel()
        elif method == protocol.REGISTRATION:
            self.registration = Registration.from_params(params)
            if self.registration.accepted:
                logger.info(
                    "registered %s: %s", self.registration.namespace, ", ".join(self.registration.tools)
                )
                self.registered.set()

    async def _call(self, request_id: Any, params: dict[str, Any]) -> None:
        result = await self._run(params.get("name"), params.get("arguments") or {})
        with contextlib.suppress(Exception):  # the connection is gone: the gateway failed the call already
            await self._send(
                protocol.response(
                    request_id, result.model_dump(by_alias=True, exclude_none=True, mode="json")
                )
            )

    async def _run(self, name: Any, arguments: Any) -> types.CallToolResult:
        found = self.specs.get(name) if isinstance(name, str) else None
        if found is None:
            return error_result(f"this client serves no tool {name!r}")
        spec = found.spec
        try:
            values = spec.model.model_validate(arguments)
        except ValidationError as error:
            return error_result(f"invalid arguments for {name!r}: {error.errors()[0]['msg']}")
        kwargs = {key: getattr(values, key) for key in type(values).model_fields}
        try:
            if inspect.iscoroutinefunction(spec.function):
                value = await spec.function(**kwargs)
            else:
                value = await asyncio.to_thread(spec.function, **kwargs)
        except Exception as error:  # noqa: BLE001 - the handler's exception is the agent's error result
            return error_result(f"{name} failed: {error}")
        return to_result(value)

    def cancel_all(self) -> None:
        for task in list(self._calls.values()):
            task.cancel()


# -- connecting ----------------------------------------------------------------------------


def socket_url(gateway: str, namespace: str) -> str:
    """`http://host:8080` (or a `ws://` URL) → the federation endpoint's `ws://` URL for `namespace`."""
    parts = urlsplit(gateway)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(
            f"the gateway URL must start with http://, https://, ws:// or wss:// (got {gateway!r})"
        )
    path = parts.path.rstrip("/")
    if not path.endswith(protocol.PATH):
        path = path.removesuffix("/mcp") + protocol.PATH
    return urlunsplit((scheme, parts.netloc, path, urlencode({"namespace": namespace}), ""))


Session = Callable[[Any], Awaitable[Registration | None]]
"""Serves one open connection until it closes; returns the gateway's answer to the registration."""


async def connect_forever(
    url: str,
    key: str | None,
    session: Session,
    *,
    max_frame_bytes: int = 16 << 20,
    stop: asyncio.Event | None = None,
) -> None:
    """Connect, serve, and reconnect with backoff until `stop` is set; `FederationRefused` when it is final."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidHandshake

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    backoff = INITIAL_BACKOFF
    stop = stop or asyncio.Event()
    while not stop.is_set():
        registration: Registration | None = None
        code, reason = 1006, "no connection"
        try:
            async with connect(
                url,
                additional_headers=headers,
                subprotocols=[protocol.SUBPROTOCOL],  # type: ignore[list-item]
                max_size=max_frame_bytes,
                proxy=None,
            ) as socket:
                registration = await _until_stopped(session(socket), stop)
                with contextlib.suppress(Exception):
                    await socket.close()
            if socket.close_code is not None:
                code, reason = socket.close_code, socket.close_reason or ""
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else 1006
            reason = closed.rcvd.reason if closed.rcvd else str(closed)
        except (OSError, InvalidHandshake, TimeoutError) as error:
            reason = f"cannot connect: {error}"
        if stop.is_set():
            return
        if code in protocol.FINAL_CODES:
            raise FederationRefused(code, reason, registration.problems if registration else ())
        if registration is not None and registration.accepted:
            backoff = INITIAL_BACKOFF
        delay = backoff * (0.8 + 0.4 * random.random())
        logger.warning(
            "federation: connection to the gateway ended (%s %s); reconnecting in %.1fs", code, reason, delay
        )
        await set_within(stop, delay)
        backoff = min(backoff * 2, MAX_BACKOFF)


async def _until_stopped(work: Awaitable[Registration | None], stop: asyncio.Event) -> Registration | None:
    task = asyncio.ensure_future(work)
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return None
    return task.result()


class FederatedClient:
    """Serve `@federated_tool` functions to a gateway: `await FederatedClient(url, key, manifest).run()`."""

    def __init__(
        self,
        url: str,
        key: str | None,
        manifest: ClientManifest | Mapping[str, Any],
        *,
        max_frame_bytes: int = 16 << 20,
    ) -> None:
        self.manifest = manifest if isinstance(manifest, ClientManifest) else ClientManifest(**manifest)
        self.manifest.specs()  # an unmarked function is a programming error: raise now, not on connect
        self.url = socket_url(url, self.manifest.namespace)
        self.key = key
        self.max_frame_bytes = max_frame_bytes
        self.registered = asyncio.Event()
        """Set while the gateway has accepted this client's registration."""
        self.registration: Registration | None = None
        self._stop = asyncio.Event()

    async def run(self) -> None:
        """Serve until `stop()`; reconnects with backoff; raises `FederationRefused` when refused for good."""
        self._stop.clear()
        await connect_forever(
            self.url, self.key, self._serve, max_frame_bytes=self.max_frame_bytes, stop=self._stop
        )

    def stop(self) -> None:
        self._stop.set()

    async def _serve(self, socket: Any) -> Registration | None:
        server = ToolServer(self.manifest, socket.send)
        watcher = asyncio.create_task(self._watch_registration(server))
        from websockets.exceptions import ConnectionClosed

        try:
            async for frame in socket:
                await server.handle(frame if isinstance(frame, str) else frame.decode())
        except ConnectionClosed:
            pass  # `connect_forever` reads the code and reason
        finally:
            watcher.cancel()
            server.cancel_all()
            self.registered.clear()
        self.registration = server.registration
        return server.registration

    async def _watch_registration(self, server: ToolServer) -> None:
        await server.registered.wait()
        self.registration = server.registration
        self.registered.set()
