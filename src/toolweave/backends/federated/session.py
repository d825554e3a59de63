"""One client connection from first frame to last: handshake, registration, heartbeat, the end.

The gateway speaks first, as an MCP client: `initialize`, then `tools/list`.
The manifest (the namespace the client asked for, and its tools) is checked,
and the client is told the outcome in one `notifications/toolweave/registration`
with every problem; a refused client is then closed with code 4422. A
registered client is pinged whenever it has been silent for a heartbeat
interval, and closed (4408) when it does not answer in time. However the
connection ends, its namespace is given up and its calls in flight fail at
once, naming the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from toolweave.backends.errors import FrameError, PeerLost
from toolweave.backends.federated import protocol
from toolweave.backends.federated.federation import Federation
from toolweave.backends.federated.manifest import Manifest, read_manifest
from toolweave.backends.federated.peer import Channel, FederatedPeer
from toolweave.config.models import FederationConfig
from toolweave.problems import Problem
from toolweave.rates import TokenBucket
from toolweave.schemas.check import off_loop
from toolweave.wire.errors import RpcError

logger = logging.getLogger("toolweave.federation")

Receive = Callable[[], Awaitable[str | bytes | None]]
"""The next frame from the client, or None once the connection is closed."""
_PAGE_CAP = 50


async def serve_client(
    federation: Federation,
    channel: Channel,
    receive: Receive,
    *,
    namespace: str | None,
    tenant: str | None,
    key_id: str | None,
    origin: str,
) -> None:
    """Serve one client until its connection ends. `origin`: where it connects from, for its label."""
    settings = federation.settings
    refused = federation.admission(key_id, tenant)
    if refused is not None:
        logger.info("federation: refused a connection (%s): %s", origin, refused)  # an attack: no log flood
        await channel.close(protocol.FLOODED, protocol.short_reason(refused))
        return
    label = f"{namespace or '?'}#{federation.next_number()} ({origin})"
    peer = FederatedPeer(
        channel, label=label, tenant=tenant, key_id=key_id, max_frame_bytes=settings.max_frame_bytes
    )
    federation.peers.add(peer)
    reader = asyncio.create_task(_read(peer, receive, FrameBudget(settings)), name=f"federation-read:{label}")
    try:
        manifest = await _register(federation, peer, namespace, reader)
        if manifest is not None:
            await _serve(federation, peer, reader)
    finally:
        federation.peers.discard(peer)
        federation.detach(peer)
        reason = peer.closed or (reader.result() if reader.done() and not reader.cancelled() else None)
        if reason is not None and reason.startswith(FrameBudget.FLOODING):
            federation.flooded(key_id)
        peer.lost(reason or "the connection ended")
        if not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        logger.info("federation: %s disconnected: %s", label, peer.closed)


class FrameBudget:
    """What one connection may send: frames and characters a second, each with a two-second burst.

    Every frame costs the gateway parsing and dispatch on the event loop that serves every
    tenant, whether or not the client ever registers; a connection sending faster than the budget
    is a flood, and is closed (4429) with a reason naming the setting.
    """

    BURST_SECONDS = 2.0
    FLOODING = "flooding:"

    def __init__(self, settings: FederationConfig) -> None:
        self.settings = settings
        self.frames = TokenBucket(
            settings.max_frames_per_second, settings.max_frames_per_second * self.BURST_SECONDS
        )
        burst = max(settings.max_bytes_per_second * self.BURST_SECONDS, 2.0 * settings.max_frame_bytes)
        self.bytes = TokenBucket(settings.max_bytes_per_second, burst)

    def spend(self, frame: str | bytes) -> str | None:
        """Charge one frame; why the connection must be closed when it is over budget, else None."""
        if not self.frames.take():
            limit = self.settings.max_frames_per_second
            return f"{self.FLOODING} more than {limit} frames a second ([federation] max_frames_per_second)"
        if not self.bytes.take(len(frame)):
            limit = self.settings.max_bytes_per_second
            return f"{self.FLOODING} more than {limit} bytes a second ([federation] max_bytes_per_second)"
        return None


async def _read(peer: FederatedPeer, receive: Receive, budget: FrameBudget) -> str:
    """Hand every frame to the peer; returns why the connection ended.

    Frames already queued by the server come back from `receive` without suspending, so this
    loop yields after each one: connections take turns with each other and with every other
    request on the event loop, instead of one socket's backlog running to its end.
    """
    while True:
        frame = await receive()
        if frame is None:
            reason = "the client closed the connection"
            peer.lost(reason)
            return reason
        flooded = budget.spend(frame)
        if flooded is not None:
            logger.warning("federation: %s closed: %s", peer.label, flooded)
            await peer.close(protocol.FLOODED, flooded)
            return flooded
        try:
            await peer.received(frame)
        except FrameError as error:
            logger.warning("federation: %s sent a bad frame: %s", peer.label, error)
            await peer.close(error.code, str(error))
            return str(error)
        await asyncio.sleep(0)


async def _register(
    federation: Federation, peer: FederatedPeer, namespace: str | None, reader: asyncio.Task[str]
) -> Manifest | None:
    """Handshake and registration; the manifest when the client was accepted, else None (it is closed)."""
    timeout = federation.settings.register_timeout
    try:
        await peer.request(
            "initialize",
            {
                "protocolVersion": protocol.PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "toolweave-gateway", "version": "1"},
            },
            timeout=timeout,
        )
        await peer.notify("notifications/initialized")
        raw_tools = await _list_tools(peer, timeout)
    except PeerLost:
        return None
    except TimeoutError:
        await peer.close(protocol.HEARTBEAT, f"no answer to initialize / tools/list within {timeout:g}s")
        return None
    except RpcError as error:
        await _refuse(peer, namespace, [Problem("", f"the client refused {error}")])
        return None
    if reader.done():
        return None
    manifest, problems = await off_loop(read_manifest, namespace, raw_tools, federation.settings.max_tools)
    if reader.done():
        return None  # the client left while its manifest was read
    if manifest is not None:
        problems = federation.check(manifest, peer.tenant)
    if manifest is None or problems:
        await _refuse(peer, namespace, problems)
        return None
    exposed = federation.attach(peer, manifest, peer.tenant)
    peer.registered = True
    with contextlib.suppress(Exception):  # a client gone already is noticed by the reader
        await peer.notify(
            protocol.REGISTRATION,
            {
                "accepted": True,
                "namespace": manifest.namespace,
                "tools": exposed,
                "problems": [],
                "client": peer.label,
            },
        )
    return manifest


async def _list_tools(peer: FederatedPeer, timeout: float) -> Any:
    """Every page of `tools/list` (None when the answer has no list: reported as a problem)."""
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(_PAGE_CAP):
        page = await peer.request("tools/list", {"cursor": cursor} if cursor else None, timeout=timeout)
        found = page.get("tools")
        if not isinstance(found, list):
            return None
        tools.extend(found)
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return tools


async def _refuse(peer: FederatedPeer, namespace: str | None, problems: list[Problem]) -> None:
    """Tell the client every problem, then close: a refused manifest would be refused again."""
    listed = [{"path": p.path, "message": p.message} for p in problems]
    with contextlib.suppress(Exception):
        await peer.notify(
            protocol.REGISTRATION,
            {"accepted": False, "namespace": namespace, "tools": [], "problems": listed},
        )
    first = str(problems[0]) if problems else "refused"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    logger.warning("federation: refused %s: %s", peer.label, "; ".join(map(str, problems)))
    await peer.close(protocol.REJECTED, f"manifest refused: {first}{more}")


async def _serve(federation: Federation, peer: FederatedPeer, reader: asyncio.Task[str]) -> None:
    heartbeat = asyncio.create_task(_heartbeat(federation, peer), name=f"federation-heartbeat:{peer.label}")
    try:
        await asyncio.wait({reader, heartbeat}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await heartbeat


async def _heartbeat(federation: Federation, peer: FederatedPeer) -> None:
    """Ping a client silent for an interval; one that stays silent past the timeout is closed."""
    interval = federation.settings.heartbeat_interval
    timeout = federation.settings.heartbeat_timeout
    while peer.closed is None:
        await asyncio.sleep(max(0.05, interval - (time.monotonic() - peer.last_heard)))
        if time.monotonic() - peer.last_heard < interval:
            continue
        try:
            await peer.request("ping", None, timeout=timeout)
        except TimeoutError:
            await peer.close(protocol.HEARTBEAT, f"no answer to ping within {timeout:g}s")
            return
        except (PeerLost, RpcError):
            return
