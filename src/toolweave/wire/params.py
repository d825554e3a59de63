"""The shape of a `tools/call` or `tools/list` request the lean lanes may answer without the SDK's
validation, and the SDK's wire shape of a listing: what both the plain HTTP lane
(`wire.transport.PlainModernLane`) and the front's middleware fast path judge a request by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
)

from toolweave.wire import sdk_compat

_ENVELOPE_KEYS = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY}
)
"""`_meta` keys of a 2026-07-28 request (validated by the SDK's inbound ladder before middleware runs)."""


def plain_call_params(params: Any) -> tuple[str, dict[str, Any]] | None:
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
    if not plain_meta(params.get("_meta")):
        return None
    return name, arguments if arguments is not None else {}


def plain_list_params(params: Any) -> bool:
    """`tools/list` params with no cursor and nothing to validate."""
    if params is None:
        return True
    if not isinstance(params, Mapping):
        return False
    return all(key == "_meta" for key in params) and plain_meta(params.get("_meta"))


def plain_meta(meta: Any) -> bool:
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


def wire_listing(tools: list[types.Tool], version: str) -> dict[str, Any]:
    model = types.ListToolsResult(tools=tools)
    dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return sdk_compat.serialize_server_result("tools/list", version, dumped)
