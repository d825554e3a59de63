"""One connected federated client, seen from the gateway: an MCP client on its socket.

The gateway sends requests (`initialize`, `tools/list`, `tools/call`, `ping`)
and matches the answers by id; it forwards `notifications/progress` to the
caller that asked for progress, answers the client's own `ping`, and sends
`notifications/cancelled` when a call times out or its caller goes away. When
the socket drops, every call in flight fails at once with `PeerLost`, whose
message names the client. The peer knows nothing of WebSockets: it is given a
`Channel` to send on, and is handed each frame that arrives (`received` raises
`FrameError` for a frame that breaks the protocol).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from toolweave import tracing
from toolweave.backends.errors import PeerLost
from toolweave.backends.federated import protocol
from toolweave.common_types import ProgressFn
from toolweave.wire.errors import RpcError

logger = logging.getLogger("toolweave.federation")


class Channel(Protocol):
    """How a peer talks to its client: send one frame, or close with a code and a reason."""

    async def send(self, text: str) -> None: ...

    async def close(self, code: int, reason: str) -> None: ...


@dataclass(slots=True)
class _Pending:
    future: asyncio.Future[dict[str, Any]]
    progress: ProgressFn | None = None


class FederatedPeer:
    """The gateway's end of one client connection."""

    relayed = False

    def __init__(
        self,
        channel: Channel,
        *,
        label: str,
        tenant: str | None,
        key_id: str | None,
        max_frame_bytes: int,
    ) -> None:
        self.channel = channel
        self.label = label
        """How errors and logs name this client: `namespace#n from host (key tw_ab...)`."""
        self.tenant = tenant
        self.key_id = key_id
        self.max_frame_bytes = max_frame_bytes
        self.in_flight = 0
        """Calls sent and not yet answered (the least busy client of a namespace gets the next)."""
        self.last_heard = time.monotonic()
        self.closed: str | None = None
        """Why the connection ended, once it has."""
        self.registered = False
        """Its manifest was accepted (until then it counts against `max_pending_per_key`)."""
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self.on_list_changed: Callable[[], None] | None = None

    # -- requests ---------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """The result of one request; `PeerLost`, `RpcError` or `TimeoutError` (the client is told)."""
        if self.closed is not None:
            raise PeerLost(self.closed)
        request_id = next(self._ids)
        if progress is not None:
            given = params or {}
            params = {**given, "_meta": {**given.get("_meta", {}), "progressToken": request_id}}
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = _Pending(future, progress)
        try:
            await self.channel.send(protocol.request(request_id, method, params))
            async with asyncio.timeout(timeout):
                return await future
        except (TimeoutError, asyncio.CancelledError):
            if future.cancelled() or not future.done():  # no answer came (a timeout cancels the future)
                await self._cancel(request_id, "timed out" if not _cancelling() else "the caller went away")
            raise
        finally:
            self._pending.pop(request_id, None)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout: float, progress: ProgressFn | None
    ) -> dict[str, Any]:
        self.in_flight += 1
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        traced = tracing.outgoing()
        if traced is not None:  # the W3C trace context, in `_meta` as for any MCP backend
            params["_meta"] = traced
        try:
            return await self.request("tools/call", params, timeout=timeout, progress=progress)
        finally:
            self.in_flight -= 1

    async def _cancel(self, request_id: int, reason: str) -> None:
        if self.closed is None:
            try:
                await self.channel.send(
                    protocol.notification(
                        "notifications/cancelled", {"requestId": request_id, "reason": reason}
                    )
                )
            except Exception:
                logger.debug("federation: cannot send cancellation to %s", self.label, exc_info=True)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.channel.send(protocol.notification(method, params))

    # -- frames from the client ---------------------------------------------------

    async def received(self, frame: str | bytes) -> None:
        """Handle one frame; `FrameError` when it breaks the protocol (the caller closes the socket)."""
        message = protocol.parse_frame(frame, self.max_frame_bytes)
        self.last_heard = time.monotonic()
        method = message.get("method")
        if method is None:
            self._answered(message)
        elif "id" in message:
            await self._asked(message["id"], method)
        else:
            await self._notified(method, message.get("params"))

    def _answered(self, message: dict[str, Any]) -> None:
        pending = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
        if pending is None or pending.future.done():
            return  # a late answer to a call that timed out or was cancelled
        error = message.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else None
            pending.future.set_exception(
                RpcError(code if isinstance(code, int) else -32603, str(text or error))
            )
            return
        result = message.get("result")
        if not isinstance(result, dict):
            pending.future.set_exception(RpcError(-32603, "the result is not an object"))
            return
        pending.future.set_result(result)

    async def _asked(self, request_id: Any, method: str) -> None:
        if method == "ping":
            await self.channel.send(protocol.response(request_id, {}))
        else:
            await self.channel.send(
                protocol.error_response(
                    request_id, -32601, f"the gateway does not serve {method!r} to federated clients"
                )
            )

    async def _notified(self, method: str, params: Any) -> None:
        if method == "notifications/progress" and isinstance(params, dict):
            token = params.get("progressToken")
            pending = self._pending.get(token) if isinstance(token, int) else None
            progress = params.get("progress")
            if pending is not None and pending.progress is not None and isinstance(progress, int | float):
                total = params.get("total")
                message = params.get("message")
                try:  # awaited here, so a call's progress reaches its caller in order
                    await pending.progress(
                        float(progress),
                        float(total) if isinstance(total, int | float) else None,
                        message if isinstance(message, str) else None,
                    )
                except Exception:
                    logger.debug("federation: progress callback failed", exc_info=True)
        elif method == "notifications/tools/list_changed" and self.on_list_changed is not None:
            self.on_list_changed()

    # -- the end -------------------------------------------------------------------

    def lost(self, reason: str) -> None:
        """The connection ended: every request still waiting fails now with `PeerLost`."""
        if self.closed is None:
            self.closed = reason
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(PeerLost(self.closed))
        self._pending.clear()

    async def close(self, code: int, reason: str) -> None:
        """Disconnect the client (revoked key, heartbeat, shutdown): its calls fail at once."""
        self.lost(reason)
        try:
            await self.channel.close(code, protocol.short_reason(reason))
        except Exception:
            logger.debug("federation: closing %s failed", self.label, exc_info=True)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return bool(task is not None and task.cancelling())
