"""What an MCP backend's failures read as: one line for a person or an agent, and the backend's
identity taken off what it answers. Shared by the session (`__init__.py`), the call path
(`calls.py`) and the relayed requests (`requests.py`)."""

from __future__ import annotations

from typing import TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import SERVER_INFO_META_KEY
from pydantic import ValidationError

R = TypeVar("R", types.CallToolResult, types.ReadResourceResult, types.GetPromptResult, types.CompleteResult)


def brief(error: Exception) -> str:
    """One line for an agent: pydantic's multi-line report becomes `field: problem; ...`."""
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}" for e in error.errors())
    return str(error) or type(error).__name__


def unstamped(result: R) -> R:
    """Drop the backend's `serverInfo` stamp: to our clients the server is the gateway, which stamps its own
    (2026-07-28 only), so a backend's identity must not leak into results, least of all to legacy clients."""
    meta = result.meta
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        rest = {key: value for key, value in meta.items() if key != SERVER_INFO_META_KEY}
        result.meta = rest or None
    return result


_CONNECTION_MARKERS = ("connection closed", "connection lost", "closed resource", "broken", "eof")


def is_connection_error(error: BaseException) -> bool:
    text = str(error).lower()
    return any(marker in text for marker in _CONNECTION_MARKERS)


def describe_error(error: BaseException, http_error: str | None = None) -> str:
    """One readable line for a connection failure, unwrapping exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if http_error is not None and isinstance(error, MCPError):  # the SDK's error does not name the status
        status = http_error.split()[1]
        hint = {
            "401": " (check the backend's headers and credentials)",
            "403": " (check the backend's headers and credentials)",
            "404": " (is the url the server's MCP endpoint, e.g. ending in /mcp?)",
        }.get(status, "")
        return f"the server answered {http_error}{hint}"
    if isinstance(error, FileNotFoundError):
        return f"command not found: {error.filename or error}"
    if isinstance(error, TimeoutError):
        return "timed out while connecting"
    text = str(error) or type(error).__name__
    if "ConnectError" in type(error).__name__ or "connection refused" in text.lower():
        return f"cannot connect: {text}"
    return f"{type(error).__name__}: {text}" if type(error).__name__ not in text else text
