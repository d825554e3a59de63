"""An MCP backend's call path: admission (the in-flight count, `max_concurrency`) and one
`tools/call`, through the lean HTTP caller when the backend has one, else the SDK client.

The lean caller (`wire.http_caller.HttpToolCaller`: pooled keep-alive connections, dicts,
orjson) speaks the wire the SDK client negotiated; the SDK client takes over the rare calls that
need its own logic (a redirect, a stale `Mcp-Param-*` header, a backend asking for input),
always before anything ran.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    HEADER_MISMATCH,
    PROTOCOL_VERSION_META_KEY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave import tracing
from toolweave.backends.base import logger
from toolweave.backends.mcp.describe import unstamped
from toolweave.backends.mcp.listing import header_maps
from toolweave.config.models import BackendConfig
from toolweave.wire import relay, sdk_compat
from toolweave.wire.errors import Redirected, RpcError, Unauthorized
from toolweave.wire.http_caller import HttpToolCaller, proxied


class CallPath:
    """The calls of one backend: how many are in flight, and each one's way to the server."""

    def __init__(
        self,
        max_concurrency: int | None,
        callers: list[relay.ClientChannel],
        stale_headers: Callable[[], None],
    ) -> None:
        self._semaphore = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        self._callers = callers
        """Where the client of each call in flight is registered (`ServerRequests.callers`)."""
        self._stale_headers = stale_headers
        """Our `Mcp-Param-*` headers are stale: refresh the tool list."""
        self.in_flight = 0
        self.idle = asyncio.Event()
        """Set while no call is in flight (what `stop_when_idle` waits for)."""
        self.idle.set()

    @contextlib.asynccontextmanager
    async def admitted(self) -> AsyncIterator[None]:
        """Count a call in flight, register its client, and hold a `max_concurrency` slot."""
        self.in_flight += 1
        self.idle.clear()
        caller = relay.calling_client()
        if caller is not None:
            self._callers.append(caller)
        try:
            if self._semaphore is None:
                yield
            else:
                async with self._semaphore:
                    yield
        finally:
            if caller is not None:
                self._callers.remove(caller)
            self.in_flight -= 1
            if not self.in_flight:
                self.idle.set()

    async def call(
        self,
        client: Client,
        caller: HttpToolCaller | None,
        name: str,
        arguments: dict[str, Any],
        limit: float,
        progress: Any,
    ) -> types.CallToolResult:
        """One `tools/call` within `limit` seconds: the lean caller when there is one, else the SDK client.
        Failures raise (the backend turns them into results naming itself)."""
        async with asyncio.timeout(limit):
            if caller is not None:
                return await self._lean(client, caller, name, arguments, progress)
            traced = tracing.outgoing()
            if (
                traced is not None
            ):  # the W3C trace context in `_meta`, as MCP's 2026-07-28 revision carries it
                called = await client.call_tool(name, arguments, progress_callback=progress, meta=traced)  # type: ignore[arg-type]
                return unstamped(called)
            return unstamped(await client.call_tool(name, arguments, progress_callback=progress))

    async def _lean(
        self, client: Client, caller: HttpToolCaller, name: str, arguments: dict[str, Any], progress: Any
    ) -> types.CallToolResult:
        """One POST; the SDK client takes over only where its own logic is needed (nothing ran yet)."""
        try:
            raw = await caller.call(name, arguments, progress=progress)
        except RpcError as error:
            if error.code == HEADER_MISMATCH and caller.modern:
                # our Mcp-Param-* headers are stale: the SDK re-lists the tool and sends once more
                self._stale_headers()
                return unstamped(await client.call_tool(name, arguments, progress_callback=progress))
            raise MCPError(code=error.code, message=error.message, data=error.data) from None
        except (Redirected, Unauthorized):  # nothing ran: the SDK client (and its OAuth flow) takes over
            return unstamped(await client.call_tool(name, arguments, progress_callback=progress))
        kind = raw.get("resultType")
        if kind is not None and kind != "complete":
            if kind != "input_required":
                raise ValueError(f"unexpected resultType {kind!r}")
            return unstamped(await _drive_input_required(client, name, arguments, progress, raw))
        result = types.CallToolResult.model_validate(raw, by_name=False)
        if not result.is_error:  # the tool's output schema, checked as the SDK client does
            await client.session.validate_tool_result(name, result)
        return unstamped(result)


async def _drive_input_required(
    client: Client, name: str, arguments: dict[str, Any], progress: Any, raw: dict[str, Any]
) -> types.CallToolResult:
    """The backend asks for input: the SDK client's driver answers and retries, exactly as on its own path."""
    first = types.InputRequiredResult.model_validate(raw, by_name=False)

    async def retry(responses: Any, state: str | None) -> Any:
        return await client.session.call_tool(
            name,
            arguments,
            progress_callback=progress,
            input_responses=responses,
            request_state=state,
            allow_input_required=True,
            allow_claimed=True,
        )

    # the SDK's private driver is untyped: it returns what `retry` (a tools/call) returns
    result: types.CallToolResult = await sdk_compat.drive_input_required(client, first, retry)
    return result


def open_lean_caller(
    name: str,
    config: BackendConfig,
    client: Client,
    *,
    session_id: str | None,
    tools: list[types.Tool],
    on_notification: Callable[[str, dict[str, Any]], None],
    authorization: Callable[[], str | None] | None = None,
) -> HttpToolCaller | None:
    """The lean tools/call path of an HTTP backend on the wire its SDK client negotiated (None: SDK only)."""
    url = config.url
    if not url or config.command or proxied(url):
        return None
    version = client.protocol_version
    try:
        envelope = modern_envelope(client, version) if version in MODERN_PROTOCOL_VERSIONS else None
        return HttpToolCaller(
            url,
            protocol_version=version,
            headers=dict(config.headers),
            envelope=envelope,
            session_id=None if envelope is not None else session_id,
            header_maps=header_maps(tools) if envelope is not None else None,
            on_notification=on_notification,
            authorization=authorization,
        )
    except Exception as error:  # noqa: BLE001 - the SDK path still works
        logger.warning("backend %s: no lean call path (%s); calls go through the SDK client", name, error)
        return None


def modern_envelope(client: Client, version: str) -> dict[str, Any]:
    """The `_meta` envelope the SDK client stamps on its 2026-07-28 requests (client info, capabilities)."""
    keys = (PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY)
    return sdk_compat.client_envelope(client, version, keys)
