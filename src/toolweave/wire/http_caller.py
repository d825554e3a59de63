"""A lean `tools/call` for streamable-HTTP backends: one POST on a pooled HTTP/1.1 keep-alive connection.

`MCPBackend` keeps its `mcp.Client` for connecting (discovery or the handshake),
listings, resources, prompts, health pings and `subscriptions/listen`; only the hot
`tools/call` goes through here. The SDK client costs ~0.3-0.4 ms of CPU per call and
its HTTP stack (httpx2) another ~0.5 ms over a real socket; this caller is a few
dozen microseconds: dicts in, dicts out, asyncio streams, orjson
(docs/performance-notes.md §2, §5.5).

Wire, per the revision the SDK client negotiated:
- 2026-07-28: every request self-contained: `MCP-Protocol-Version`, `Mcp-Method`,
  `Mcp-Name`, `Mcp-Param-*` (the SDK's own helpers, from the tool's listed
  `x-mcp-header` annotations) and the `_meta` envelope the SDK client sends.
  Cancelling a call closes its connection, which is the cancellation signal.
- 2025-11-25: the SDK handshake's `Mcp-Session-Id` and `MCP-Protocol-Version`; a cancelled call is
  also announced with `notifications/cancelled`, as the SDK client does.

A response is `application/json` or `text/event-stream` (progress notifications,
then the response). Events with no data (a resumable server's priming event: just an
`id:` and a `retry:`) carry no message; a stream that ends before its response after an
event with an `id` is resumed with a GET and `Last-Event-ID`, as the SDK client does,
never re-sent (the tool already runs). An answer whose JSON-RPC id is not the
request's is rejected, not taken for its answer. A request that failed on a *reused* keep-alive connection before
any byte of the answer arrived is sent once more on a fresh one (the server may have
closed an idle connection just then); once an answer has started, never.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import itertools
import logging
import ssl
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson
from mcp.shared.inbound import encode_header_value, mcp_param_headers
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

from toolweave import tracing
from toolweave.common_types import ProgressFn
from toolweave.wire import relay
from toolweave.wire.errors import Redirected, RpcError, Unauthorized

logger = logging.getLogger("toolweave.backends")

NotificationHook = Callable[[str, dict[str, Any]], None]
"""Told of the server's other notifications on a call's stream (list changes, resource updates)."""
HeaderMap = Mapping[tuple[str, ...], str]

MAX_IDLE_CONNECTIONS = 32
"""Idle keep-alive connections kept per backend; more are closed when they come back."""
DRAIN_TIMEOUT = 5.0
"""How long the end of an SSE body may take after its response event before the connection is dropped."""
RESUME_ATTEMPTS = 2
"""Consecutive failed resumptions of one call's stream before it fails (the SDK client's limit)."""
DEFAULT_RESUME_DELAY = 1.0
"""Seconds before resuming a stream whose server named no `retry:` (the SDK client's default)."""
MAX_RESUME_DELAY = 30.0
"""A server's `retry:` is honoured up to this; the call's own timeout bounds the whole call anyway."""
FIRST_REQUEST_ID = 1 << 40
"""This caller's JSON-RPC ids start far above the SDK client's (which counts from 0 on the same session):
an id must be unique in a session, and a server routes its requests and replies by it."""
_HEAD_LIMIT = 1 << 16
_OWN_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "accept",
        "connection",
        "transfer-encoding",
        "mcp-protocol-version",
        "mcp-session-id",
        "mcp-method",
        "mcp-name",
    }
)
"""Headers this caller writes itself; a configured header of the same name is not sent twice."""


class _Stale(Exception):
    """A reused connection failed before any byte of the answer: safe to send again."""


def proxied(url: str) -> bool:
    """Whether the environment routes `url` through a proxy (httpx2 would honour it; this caller does not)."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    if not proxies.get(parts.scheme) and not proxies.get("all"):
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


class _Connection:
    __slots__ = ("reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        transport = self.writer.transport
        if not transport.is_closing():
            transport.abort()


class HttpToolCaller:
    """`tools/call` for one streamable-HTTP backend; shared by every session and composite step."""

    def __init__(
        self,
        url: str,
        *,
        protocol_version: str,
        headers: Mapping[str, str] | None = None,
        envelope: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        header_maps: Mapping[str, HeaderMap] | None = None,
        on_notification: NotificationHook | None = None,
        authorization: Callable[[], str | None] | None = None,
    ) -> None:
        """`authorization`: the current `Authorization` header value of an OAuth backend, asked per call
        (tokens are refreshed by the SDK client's flow, so they change under a running caller)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.modern = envelope is not None
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        common = [f"host: {parts.netloc.rsplit('@', 1)[-1]}", f"mcp-protocol-version: {protocol_version}"]
        if session_id:
            common.append(f"mcp-session-id: {session_id}")
        for name, value in (headers or {}).items():
            if name.lower() not in _OWN_HEADERS:
                common.append(f"{name}: {value}")
        post = [
            f"POST {target} HTTP/1.1",
            "content-type: application/json",
            "accept: application/json, text/event-stream",
            *(["mcp-method: tools/call"] if self.modern else []),
            *common,
        ]
        self._head = _head_bytes(post)
        self._resume_head = _head_bytes([f"GET {target} HTTP/1.1", "accept: text/event-stream", *common])
        """Resuming a call's stream: a GET that names the last event seen in a `last-event-id` line."""
        self._envelope = dict(envelope) if envelope is not None else None
        self.header_maps: Mapping[str, HeaderMap] = header_maps or {}
        self._on_notification = on_notification
        self._authorization = authorization
        self._ids = itertools.count(FIRST_REQUEST_ID)
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._closed = False
        self._background: set[asyncio.Task[None]] = set()

    # -- pool ------------------------------------------------------------------

    async def _acquire(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable():
                connection.reused = True
                return connection
            connection.close()
        reader, writer = await asyncio.open_connection(
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._host if self._ssl else None,
            limit=_HEAD_LIMIT,
        )
        return _Connection(reader, writer)

    def _release(self, connection: _Connection, reusable: bool) -> None:
        if reusable and not self._closed and len(self._idle) < MAX_IDLE_CONNECTIONS and connection.usable():
            self._idle.append(connection)
        else:
            connection.close()

    async def close(self) -> None:
        """Close every connection (idle and in flight); calls in flight fail as connection errors."""
        self._closed = True
        for connection in [*self._idle, *self._busy]:
            connection.close()
        self._idle.clear()
        for task in list(self._background):
            task.cancel()

    # -- calls -----------------------------------------------------------------

    async def call(
        self, name: str, arguments: Mapping[str, Any], *, progress: ProgressFn | None = None
    ) -> dict[str, Any]:
        """The backend's `result` object for `tools/call name arguments`; raises RpcError for an error answer."""
        request_id = next(self._ids)
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        meta: dict[str, Any] | None = dict(self._envelope) if self._envelope is not None else None
        if progress is not None:
            meta = meta if meta is not None else {}
            meta["progressToken"] = request_id
        traced = tracing.outgoing()
        if traced is not None:  # the W3C trace context, in `_meta` and as HTTP headers
            meta = {**(meta or {}), **traced}
        if meta is not None:
            params["_meta"] = meta
        body = orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        extra = f"mcp-name: {encode_header_value(name)}\r\n"
        if self._authorization is not None:
            value = self._authorization()
            if value:
                extra += f"authorization: {value}\r\n"
        if traced is not None:
            extra += "".join(f"{header}: {value}\r\n" for header, value in traced.items())
        header_map = self.header_maps.get(name) if self.modern else None
        if header_map:
            for header, value in mcp_param_headers(header_map, arguments).items():
                extra += f"{header}: {value}\r\n"
        request = b"".join(
            (self._head, extra.encode("latin-1"), b"content-length: %d\r\n\r\n" % len(body), body)
        )
        try:
            try:
                return await self._exchange(request, request_id, progress)
            except _Stale:
                return await self._exchange(request, request_id, progress, fresh_only=True)
        except asyncio.CancelledError:
            if not self.modern:  # 2026-07-28: the closed connection is the signal; before, a notification
                self._notify_cancelled(request_id)
            raise

    def _notify_cancelled(self, request_id: int) -> None:
        """`notifications/cancelled` for a handshake-era call its caller gave up on (the SDK client sends it too)."""
        params = {"requestId": request_id, "reason": "the caller cancelled the call"}
        body = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})
        task = asyncio.get_running_loop().create_task(self._post_reply(body))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _exchange(
        self, request: bytes, request_id: int, progress: ProgressFn | None, *, fresh_only: bool = False
    ) -> dict[str, Any]:
        if fresh_only:
            for connection in self._idle:
                connection.close()
            self._idle.clear()
        events = _SseEvents()
        connection = await self._acquire()
        self._busy.add(connection)
        reusable = False
        try:
            try:
                connection.writer.write(request)
                head = await connection.reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as error:
                partial = getattr(error, "partial", b"")
                if connection.reused and not partial:
                    raise _Stale from error
                raise
            message, reusable = await self._response(connection, head, request_id, progress, events)
        except (EOFError, ConnectionError):
            if events.last_id is None:
                raise
            message = None  # the stream broke after an event we can resume from
        finally:
            self._busy.discard(connection)
            self._release(connection, reusable)
        if message is None:
            message = await self._resume(request_id, progress, events)
        return _result_of(message)

    async def _response(
        self,
        connection: _Connection,
        head: bytes,
        request_id: int,
        progress: ProgressFn | None,
        events: _SseEvents,
    ) -> tuple[dict[str, Any] | None, bool]:
        """The JSON-RPC response for `request_id` (None: its stream ended early) and whether the
        connection can be reused."""
        status, headers = _parse_head(head)
        reader = connection.reader
        keep_alive = headers.get("connection", "").lower() != "close"
        content_type = headers.get("content-type", "").lower()
        if 300 <= status < 400:
            await _read_body(reader, headers)
            raise Redirected(f"HTTP {status} to {headers.get('location', '?')}")
        if status == 202:
            await _read_body(reader, headers)
            raise RpcError(INVALID_REQUEST, "server answered a request with 202 Accepted")
        if status in (401, 403) and self._authorization is not None:
            await _read_body(reader, headers)
            raise Unauthorized(f"HTTP {status}")
        if status >= 400:
            body = await _read_body(reader, headers)
            raise _http_error(status, content_type, body, modern=self.modern)
        if content_type.startswith("application/json"):
            body = await _read_body(reader, headers)
            try:
                message = orjson.loads(body)
            except orjson.JSONDecodeError as error:
                raise RpcError(PARSE_ERROR, f"Failed to parse JSON response: {error}") from error
            return _checked_message(message, request_id), keep_alive and _delimited(headers)
        if content_type.startswith("text/event-stream"):
            return await self._sse(reader, headers, request_id, progress, keep_alive, events)
        await _read_body(reader, headers)
        raise RpcError(INVALID_REQUEST, f"Unexpected content type: {content_type}")

    async def _sse(
        self,
        reader: asyncio.StreamReader,
        headers: dict[str, str],
        request_id: int,
        progress: ProgressFn | None,
        keep_alive: bool,
        events: _SseEvents,
    ) -> tuple[dict[str, Any] | None, bool]:
        """The response on an event stream, or None when the stream ended (cleanly) before it."""
        chunks = _body_chunks(reader, headers)
        response: dict[str, Any] | None = None
        try:
            async for data in chunks:
                for payload in events.feed(data):
                    message = orjson.loads(payload)
                    if not isinstance(message, dict):
                        continue
                    if "method" in message:
                        await self._server_message(message, request_id, progress)
                    elif "result" in message or "error" in message:
                        response = _checked_message(message, request_id)
                        break
                if response is not None:
                    break
            if response is None:
                return None, keep_alive and _delimited(headers)
            # read to the end of the body so the connection can carry the next call
            try:
                async with asyncio.timeout(DRAIN_TIMEOUT):
                    async for _rest in chunks:
                        pass
            except TimeoutError:
                return response, False
            return response, keep_alive and _delimited(headers)
        finally:
            await chunks.aclose()

    async def _resume(
        self, request_id: int, progress: ProgressFn | None, events: _SseEvents
    ) -> dict[str, Any]:
        """The response of a call whose stream ended early: GET with `Last-Event-ID`, as the SDK client does.

        The call already runs on the server, so it is never sent again. A stream that ends without an
        event id cannot be resumed: that call fails (the SDK's answer), the backend's session stays.
        """
        failures = 0
        last_failure: BaseException | None = None
        while events.last_id is not None and failures < RESUME_ATTEMPTS:
            await asyncio.sleep(events.resume_delay())
            seen = events.last_id
            try:
                message = await self._resume_once(request_id, progress, events)
            except (OSError, EOFError, ValueError, RpcError) as error:
                last_failure = error
                failures += 1
                continue
            if message is not None:
                return message
            failures = 0 if events.last_id != seen else failures + 1
        if events.last_id is None:
            raise RpcError(CONNECTION_CLOSED, "SSE stream ended without a response")
        if isinstance(last_failure, OSError):
            raise last_failure  # the server is gone: a lost connection, as any other
        raise RpcError(CONNECTION_CLOSED, "SSE stream ended and reconnection attempts were exhausted")

    async def _resume_once(
        self, request_id: int, progress: ProgressFn | None, events: _SseEvents
    ) -> dict[str, Any] | None:
        last_id = (events.last_id or "").replace("\r", "").replace("\n", "")
        request = self._resume_head + f"last-event-id: {last_id}\r\n\r\n".encode("latin-1", "replace")
        connection = await self._acquire()
        self._busy.add(connection)
        reusable = False
        try:
            connection.writer.write(request)
            status, headers = _parse_head(await connection.reader.readuntil(b"\r\n\r\n"))
            keep_alive = headers.get("connection", "").lower() != "close"
            if status != 200 or not headers.get("content-type", "").lower().startswith("text/event-stream"):
                await _read_body(connection.reader, headers)
                reusable = keep_alive and _delimited(headers)
                raise RpcError(INTERNAL_ERROR, f"resuming the stream: HTTP {status}")
            message, reusable = await self._sse(
                connection.reader, headers, request_id, progress, keep_alive, events
            )
            return message
        except asyncio.IncompleteReadError as error:
            raise EOFError("the connection closed while resuming the stream") from error
        finally:
            self._busy.discard(connection)
            self._release(connection, reusable)

    async def _server_message(
        self, message: dict[str, Any], request_id: int, progress: ProgressFn | None
    ) -> None:
        method = message.get("method")
        params = message.get("params") or {}
        if "id" in message:  # a request from the server (handshake era): relayed to the calling client
            self._answer_later(message)
            return
        if method == "notifications/progress":
            if progress is None or params.get("progressToken") != request_id:
                return
            value = params.get("progress")
            if isinstance(value, int | float) and not isinstance(value, bool):
                outcome = progress(value, params.get("total"), params.get("message"))
                if inspect.isawaitable(outcome):
                    await outcome
        elif method == "notifications/message":
            client = relay.calling_client()
            if client is not None and isinstance(params, dict):
                await client.log(params)
        elif isinstance(method, str) and self._on_notification:
            self._on_notification(method, params if isinstance(params, dict) else {})

    def _answer_later(self, request: dict[str, Any]) -> None:
        """Answer a server request in the background (the call's stream goes on meanwhile): relayed to the
        client whose call this is, else refused as an SDK client without callbacks refuses it."""
        client = relay.calling_client()
        task = asyncio.get_running_loop().create_task(self._relay_reply(client, request))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _relay_reply(self, client: relay.ClientChannel | None, request: dict[str, Any]) -> None:
        params = request.get("params")
        params = params if isinstance(params, dict) else None
        token = relay.progress_token(params)
        progress = functools.partial(self._send_progress, token) if token is not None else None
        answer = await relay.answer_server_request(client, str(request.get("method")), params, progress)
        await self._post_reply(orjson.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}))

    async def _send_progress(
        self, token: str | int, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """The client's progress on a relayed request, to the backend under the backend's own token."""
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._post_reply(
            orjson.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        )

    async def _post_reply(self, body: bytes) -> None:
        request = b"".join((self._head, b"content-length: %d\r\n\r\n" % len(body), body))
        connection = await self._acquire()
        reusable = False
        try:
            connection.writer.write(request)
            _status, headers = _parse_head(await connection.reader.readuntil(b"\r\n\r\n"))
            await _read_body(connection.reader, headers)
            reusable = True
        except (OSError, EOFError, ValueError):
            logger.debug("answering a server request failed", exc_info=True)
        finally:
            self._release(connection, reusable)


# -- HTTP/1.1 and SSE parsing ------------------------------------------------------


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    status_line = lines[0].split(" ", 2)
    if len(status_line) < 2 or not status_line[0].startswith("HTTP/"):
        raise ValueError(f"not an HTTP response: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, _, value = line.partition(":")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return int(status_line[1]), headers


def _chunked(headers: Mapping[str, str]) -> bool:
    return "chunked" in headers.get("transfer-encoding", "").lower()


def _delimited(headers: Mapping[str, str]) -> bool:
    """A body with a known end (a length, or chunked); one that runs to the connection's end ends it."""
    return "content-length" in headers or _chunked(headers)


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if _chunked(headers):
        return b"".join([chunk async for chunk in _body_chunks(reader, headers)])
    length = headers.get("content-length")
    if length is not None:
        return await reader.readexactly(int(length))
    return await reader.read()  # delimited by the end of the connection


async def _body_chunks(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> Any:
    """The body as it arrives: chunk by chunk (chunked), or in reads up to its length or the end."""
    if _chunked(headers):
        while True:
            size_line = await reader.readline()
            if not size_line.endswith(b"\n"):
                raise EOFError("the connection closed inside a chunked body")
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            chunk = await reader.readexactly(size)
            await reader.readexactly(2)
            yield chunk
    length = headers.get("content-length")
    if length is not None:
        remaining = int(length)
        while remaining > 0:
            chunk = await reader.read(min(remaining, 1 << 16))
            if not chunk:
                raise EOFError("the connection closed inside the body")
            remaining -= len(chunk)
            yield chunk
        return
    while chunk := await reader.read(1 << 16):
        yield chunk


class _SseEvents:
    """Incremental `text/event-stream` parsing: the `data` of each complete `message` event.

    Remembers the last event id and `retry:` delay, which resuming a stream needs. An event without
    data (a priming event) or of another type carries no message and yields nothing, as in the SDK.
    """

    __slots__ = ("_buffer", "last_id", "retry")

    def __init__(self) -> None:
        self._buffer = b""
        self.last_id: str | None = None
        self.retry: float | None = None

    def feed(self, data: bytes) -> list[bytes]:
        buffer = (self._buffer + data).replace(b"\r\n", b"\n")
        events: list[bytes] = []
        while True:
            end = buffer.find(b"\n\n")
            if end < 0:
                break
            event, buffer = buffer[:end], buffer[end + 2 :]
            payload = self._event(event)
            if payload:
                events.append(payload)
        self._buffer = buffer
        return events

    def _event(self, event: bytes) -> bytes | None:
        data: list[bytes] = []
        kind = b"message"
        for line in event.split(b"\n"):
            name, colon, value = line.partition(b":")
            if not colon or not name:
                continue  # a comment (`: ...`) or a line that is no field
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
            elif name == b"id" and b"\0" not in value:
                self.last_id = value.decode("utf-8", "replace") or None
            elif name == b"retry" and value.isdigit():
                self.retry = int(value) / 1000
            elif name == b"event":
                kind = value or b"message"
        if kind != b"message":
            return None
        return b"\n".join(data)

    def resume_delay(self) -> float:
        return min(self.retry if self.retry is not None else DEFAULT_RESUME_DELAY, MAX_RESUME_DELAY)


def _checked_message(message: Any, request_id: int) -> dict[str, Any]:
    if not isinstance(message, dict) or ("result" not in message and "error" not in message):
        raise ValueError("the answer is not a JSON-RPC response")
    answered = message.get("id")
    if answered != request_id or isinstance(answered, bool):
        if answered is None and "error" in message:
            return message  # an error the server could not tie to a request (e.g. its parse error)
        raise ValueError(f"the answer is for request id {answered!r}, not {request_id}")
    return message


def _head_bytes(lines: list[str]) -> bytes:
    """Request line and headers, each ended by CRLF; the caller adds its own headers and the blank line."""
    return ("\r\n".join(lines) + "\r\n").encode("latin-1", "replace")


def _result_of(message: dict[str, Any]) -> dict[str, Any]:
    error = message.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise ValueError("malformed JSON-RPC error")
        raise RpcError(
            int(error.get("code", INTERNAL_ERROR)), str(error.get("message", "")), error.get("data")
        )
    result = message["result"]
    if not isinstance(result, dict):
        raise ValueError("the JSON-RPC result is not an object")
    return result


def _http_error(status: int, content_type: str, body: bytes, *, modern: bool) -> RpcError:
    """What the SDK's streamable-HTTP transport makes of a non-2xx answer."""
    if content_type.startswith("application/json"):
        with contextlib.suppress(ValueError):
            message = orjson.loads(body)
            error = message.get("error") if isinstance(message, dict) else None
            if isinstance(error, dict) and "code" in error:
                return RpcError(int(error["code"]), str(error.get("message", "")), error.get("data"))
    if status == 404:
        if modern:
            return RpcError(METHOD_NOT_FOUND, "Not Found")
        return RpcError(INVALID_REQUEST, "Session terminated")
    return RpcError(INTERNAL_ERROR, "Server returned an error response")
