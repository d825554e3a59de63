"""MCP over streamable HTTP, the fast way: 2026-07-28 requests that cannot receive notifications
are answered as plain JSON (`ModernJsonRouter`), and plain `tools/call` / `tools/list` among them
without the SDK's per-request pipeline (`PlainModernLane`). Everything else is the SDK's."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from typing import Any, Protocol

import orjson
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request

_VERSION_HEADER = b"mcp-protocol-version"
EXCHANGE_OVER = "toolweave.exchange_over"
"""Set (True) in an `/mcp` request's ASGI scope once its HTTP exchange has ended: the response is complete
or the client went away. A call still running after that cannot reach its client (`ExchangeEnd`)."""
WATCH_AFTER = 0.05
"""Seconds a JSON-answered request runs before its connection is watched for a disconnect."""


class ModernJsonRouter:
    """Sends each 2026-07-28 POST that cannot receive notifications to a JSON-response session manager.

    The SDK's SSE-capable mode runs every modern request as a sibling task in a task group,
    with a zero-buffer stream, a deferral window and a disconnect watcher, even when it ends
    up answering JSON (~0.1-0.7 ms, docs/performance-notes.md §3.1). A modern request can only
    receive notifications when it asks for progress (`_meta.progressToken`) or log messages
    (`_meta["io.modelcontextprotocol/logLevel"]`), or is `subscriptions/listen` (always a
    stream); everything else is answered as plain JSON. Handshake-era requests, GETs, DELETEs,
    clients that do not accept SSE (refused with 406 as before) and anything unparsable go to
    the SSE-capable app unchanged.

    On the JSON path a client that disconnects cancels its request, as closing the response
    stream does on the SSE path (2026-07-28 has no other cancellation).
    """

    def __init__(
        self, sse_app: Any, json_app: Any, *, max_body: int, lane: PlainModernLane | None = None
    ) -> None:
        self.sse_app = sse_app
        self.json_app = json_app
        self.max_body = max_body
        self.lane = lane

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not _modern_sse_capable(scope):
            await self.sse_app(scope, receive, send)
            return
        body, more = await self._read_body(receive)
        replayed = _replay(body, more, receive)
        if more:
            await self.sse_app(scope, replayed, send)
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            message = None
        if _needs_stream(message):
            await self.sse_app(scope, replayed, send)
            return
        app = self.json_app
        if self.lane is not None and self.lane.takes(message):
            app = functools.partial(self.lane, message, self.json_app)
        await _cancel_on_disconnect(app, scope, replayed, receive, send)

    async def _read_body(self, receive: Any) -> tuple[bytes, bool]:
        """The request body, or its first part (`more` True) once it exceeds the size limit."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(parts), True  # a disconnect: let the SDK path see it
            chunk = message.get("body", b"")
            parts.append(chunk)
            size += len(chunk)
            if not message.get("more_body", False):
                return b"".join(parts), False
            if size > self.max_body:
                return b"".join(parts), True


def _modern_sse_capable(scope: Any) -> bool:
    """A 2026-07-28 request (not a handshake-era one) from a client that accepts SSE."""
    version = None
    accepts_sse = False
    for name, value in scope["headers"]:
        if name == _VERSION_HEADER:
            version = value
        elif name == b"accept" and b"text/event-stream" in value:
            accepts_sse = True
    return (
        accepts_sse and version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
    )


def _needs_stream(message: Any) -> bool:
    """Whether a modern request may get notifications before its response (or cannot be judged)."""
    if not isinstance(message, dict) or message.get("method") == "subscriptions/listen":
        return True
    params = message.get("params")
    if params is None:
        return False
    if not isinstance(params, dict):
        return True
    meta = params.get("_meta")
    if meta is None:
        return False
    return not isinstance(meta, dict) or "progressToken" in meta or LOG_LEVEL_META_KEY in meta


def _replay(body: bytes, more: bool, receive: Any) -> Any:
    """A `receive` that hands out the already-read body first, then defers to the real one."""
    pending = [{"type": "http.request", "body": body, "more_body": more}]

    async def replayed() -> Any:
        if pending:
            return pending.pop()
        return await receive()

    return replayed


async def _cancel_on_disconnect(app: Any, scope: Any, receive: Any, real_receive: Any, send: Any) -> None:
    """Run `app`, cancelling it if the client disconnects before the response is complete.

    The watcher starts only once the request has run for `WATCH_AFTER` seconds: most calls
    are answered sooner, and a disconnect in the meantime is seen as soon as it starts.
    """
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    state = {"done": False, "cancelled": False}
    watcher: asyncio.Task[None] | None = None

    async def watch() -> None:
        while True:
            message = await real_receive()
            if message["type"] == "http.disconnect":
                if not state["done"]:
                    state["cancelled"] = True
                    task.cancel()
                return

    def start_watching() -> None:
        nonlocal watcher
        if not state["done"]:
            watcher = loop.create_task(watch())

    async def tracked_send(message: Any) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            state["done"] = True
        await send(message)

    timer = loop.call_later(WATCH_AFTER, start_watching)
    try:
        await app(scope, receive, tracked_send)
    except asyncio.CancelledError:
        if not state["cancelled"] or task.uncancel() > 0:
            raise  # cancelled from outside, not (only) by the disconnect
    finally:
        state["done"] = True
        timer.cancel()
        if watcher is not None:
            watcher.cancel()


class ExchangeEnd:
    """Marks each `/mcp` request's scope with `EXCHANGE_OVER` when its HTTP exchange ends.

    A handshake-era client that walks away from a call (closes its response stream) leaves the call
    running, as the spec asks (a disconnect is not a cancellation), but nothing can reach that client
    on the call's stream any more: the gateway keeps no event store, so a request or log message
    related to the call would be dropped and a relayed backend request would wait for an answer that
    never comes. The handler sees the same scope (`ctx.request.scope`), so `relays.CallerChannel` can
    tell a client that is still listening from one that left.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            scope[EXCHANGE_OVER] = True


class LaneFront(Protocol):
    """What `PlainModernLane` needs of the MCP front it answers for (`server.mcp.front.MCPFront`).

    The lane speaks the wire; the front decides: whether the lane may run at all, who the caller is
    (from the ASGI `scope`), what a call or listing answers. `verdict` is the SDK's
    `InboundModernRoute` (the request's version and envelope, already checked).
    """

    @property
    def lane_open(self) -> bool:
        """False once someone changed the SDK server's middleware: then every request is the SDK's."""
        ...

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of `name` when it has `x-mcp-header` annotations to check, else None."""
        ...

    async def listing_ready(self) -> None:
        """Wait, as a call does, for backends still making their first connection."""
        ...

    def plain_listing(self, scope: Any, verdict: InboundModernRoute, params: Any) -> bytes | None:
        """The JSON of the `tools/list` result, or None when the SDK must answer."""
        ...

    async def plain_call(
        self, scope: Any, verdict: InboundModernRoute, params: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The wire result of the `tools/call`, or None when the SDK must answer."""
        ...


class PlainModernLane:
    """Answers a plain 2026-07-28 `tools/call` or `tools/list` without the SDK's per-request pipeline.

    Only once the request has passed the SDK's own checks, run here with the SDK's own
    helpers in the SDK's order (DNS-rebinding and content-type checks, `Accept`, the
    JSON-RPC shape, duplicated routing headers, the envelope/header ladder, `Mcp-Param-*`
    headers), and only for what the `Server.middleware` fast path would answer the same
    way: no progress token or log level, no cursor, no input responses, no composite that
    may ask the user, the `tools:call` scope present. Anything else, and every failure,
    goes to the SDK's JSON-response app with the body replayed, so every error answer is
    the SDK's. Saves the request/connection/session objects, the middleware chain and
    the two pydantic passes over the response: ~60-80 us of CPU per call
    (docs/performance.md).
    """

    def __init__(self, front: LaneFront, security_settings: Any) -> None:
        self.front = front
        self.security = TransportSecurityMiddleware(security_settings)

    def takes(self, message: Any) -> bool:
        """A cheap first look: a well-formed request for one of the two methods."""
        if type(message) is not dict or message.get("jsonrpc") != "2.0":
            return False
        if message.get("method") not in ("tools/call", "tools/list") or not self.front.lane_open:
            return False
        request_id = message.get("id")
        if type(request_id) is not int and type(request_id) is not str:
            return False
        return all(key in ("jsonrpc", "id", "method", "params") for key in message)

    async def __call__(
        self, message: dict[str, Any], fallback: Any, scope: Any, receive: Any, send: Any
    ) -> None:
        answer = await self._answer(message, scope, receive)
        if answer is None:
            await fallback(scope, receive, send)
            return
        status, body = answer
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, message: dict[str, Any], scope: Any, receive: Any) -> tuple[int, bytes] | None:
        request = Request(scope, receive)
        if await self.security.validate_request(request, is_post=True) is not None:
            return None
        if not check_accept_headers(request)[0]:
            return None
        lines = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"]]
        if find_duplicated_routing_header(lines) is not None:
            return None
        verdict = classify_inbound_request(message, headers=_folded(lines))
        if not isinstance(verdict, InboundModernRoute):
            return None
        params = message.get("params")
        request_id = orjson.dumps(message["id"])
        if message["method"] == "tools/list":
            await self.front.listing_ready()
            listing = self.front.plain_listing(scope, verdict, params)
            if listing is None:
                return None
            return 200, b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (request_id, listing)
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return None
        arguments = params.get("arguments")
        schema = self.front.input_schema(params["name"])
        if (
            schema is not None
            and isinstance(arguments, dict | None)
            and validate_mcp_param_headers(schema, arguments or {}, request.headers) is not None
        ):
            return None
        try:
            result = await self.front.plain_call(scope, verdict, params)
        except Exception as error:  # noqa: BLE001 - answered as the SDK's modern entry answers a handler that raised
            failure = modern_error_data(error)
            status = ERROR_CODE_HTTP_STATUS.get(failure.code, 200)
            body = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": failure.model_dump(mode="json", exclude_none=True),
            }
            return status, orjson.dumps(body)
        if result is None:
            return None
        return 200, b'{"jsonrpc":"2.0","id":%b,"result":%b}' % (request_id, orjson.dumps(result))


def _folded(lines: list[tuple[str, str]]) -> dict[str, str]:
    """Header lines as one mapping, the first of repeated names winning, as `dict(request.headers)`
    folds them, without its lookup per name (each a scan of every line)."""
    folded: dict[str, str] = {}
    for name, value in lines:
        folded.setdefault(name, value)
    return folded
