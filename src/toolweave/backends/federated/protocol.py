"""The wire of federated tools: MCP JSON-RPC messages, one per WebSocket text frame.

Both ends share these names: the close codes (so a client knows which
closings are final and which are worth a reconnect), the notification that
answers a registration, the `_meta` key of a tool's tracing metadata, and the
one parser of incoming frames, which turns anything malformed into a
`FrameError` carrying the close code and a reason a person can act on.
"""

from __future__ import annotations

from typing import Any

import orjson

from toolweave.backends.errors import FrameError

PATH = "/api/v1/federation"
"""The gateway's WebSocket endpoint."""
SUBPROTOCOL = "mcp"
"""The WebSocket subprotocol both ends offer (the name MCP's WebSocket transports use)."""
PROTOCOL_VERSION = "2025-06-18"
"""The MCP version the gateway offers in `initialize` (the client's answer decides)."""

REGISTRATION = "notifications/toolweave/registration"
"""Gateway → client, after `tools/list`: `{accepted, namespace, tools, problems}`."""
META_KEY = "toolweave/federation"
"""A tool's `_meta` entry with its tracing metadata: `{handler, source, toolkit}`."""

# close codes: 1xxx are WebSocket's own, 44xx final (a reconnect would be refused the same way)
GOING_AWAY = 1001
UNSUPPORTED = 1003
INVALID = 1007
TOO_BIG = 1009
INTERNAL = 1011
UNAUTHORIZED = 4401
FORBIDDEN = 4403
HEARTBEAT = 4408
FLOODED = 4429
"""Sent more frames or bytes a second than `[federation] max_frames_per_second` / `max_bytes_per_second`
allow; not final: the client reconnects after its backoff."""
REJECTED = 4422
DISABLED = 4404
FINAL_CODES = frozenset({UNSUPPORTED, INVALID, TOO_BIG, UNAUTHORIZED, FORBIDDEN, REJECTED, DISABLED})
"""Closings a client must not retry: the same frames, key or manifest would be refused again."""

MAX_REASON = 120
"""A WebSocket close reason holds at most 123 bytes."""


def parse_frame(frame: str | bytes, max_bytes: int) -> dict[str, Any]:
    """One JSON-RPC message (request, notification or response) from a text frame, or `FrameError`."""
    if isinstance(frame, bytes):
        raise FrameError(UNSUPPORTED, "binary frames are not accepted: send each JSON-RPC message as text")
    if len(frame) > max_bytes or (len(frame) * 4 > max_bytes and len(frame.encode()) > max_bytes):
        raise FrameError(TOO_BIG, f"a message is larger than the limit of {max_bytes} bytes")
    try:
        message = orjson.loads(frame)
    except orjson.JSONDecodeError as error:
        raise FrameError(INVALID, f"a frame is not JSON ({error.msg} at character {error.pos})") from None
    if isinstance(message, list):
        raise FrameError(INVALID, "JSON-RPC batches are not accepted: send one message per frame")
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise FrameError(INVALID, 'a frame is not a JSON-RPC 2.0 message (an object with "jsonrpc": "2.0")')
    has_method = isinstance(message.get("method"), str)
    if not has_method and "id" not in message:
        raise FrameError(INVALID, "a JSON-RPC message has neither a method nor an id")
    if not has_method and "result" not in message and "error" not in message:
        raise FrameError(INVALID, "a JSON-RPC response has neither a result nor an error")
    return message


def dumps(message: dict[str, Any]) -> str:
    return orjson.dumps(message).decode()


def request(request_id: int | str, method: str, params: dict[str, Any] | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message)


def notification(method: str, params: dict[str, Any] | None = None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return dumps(message)


def response(request_id: Any, result: dict[str, Any]) -> str:
    return dumps({"jsonrpc": "2.0", "id": request_id, "result": result})


def error_response(request_id: Any, code: int, message: str) -> str:
    return dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def short_reason(text: str) -> str:
    """A close reason that fits the frame (the full text goes in the registration notification or logs)."""
    encoded = text.encode()
    if len(encoded) <= MAX_REASON:
        return text
    return encoded[: MAX_REASON - 3].decode(errors="ignore") + "..."
