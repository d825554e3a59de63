"""Finding 1 of hardening II: one federated socket flooding frames no longer freezes every tenant.

As found: a `tools:federate` connection sending valid notifications as fast as it could (no
registration needed) held another tenant's plain REST call at ~12 s for as long as it sent: frames
the server had queued came back from `receive` without suspending, so the reader never yielded.
Now the reader yields after every frame, and a connection past its frame or byte budget is closed
(4429) with a reason naming the setting.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from support.federation import FAST_HEARTBEAT, raw_client, served
from toolweave.backends.federated import protocol, serve_client
from toolweave.backends.federated.federation import Federation
from toolweave.config.models import Config, FederationConfig

NOTE = orjson.dumps(
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 7, "progress": 1}}
).decode()


class _Channel:
    def __init__(self) -> None:
        self.closed: tuple[int, str] | None = None

    async def send(self, text: str) -> None:
        return None

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)


async def _flood(frame: str, frames: int, **settings: Any) -> tuple[_Channel, int, int]:
    """Serve one client whose frames are all queued already; (channel, frames read, ticks seen)."""
    config = Config(federation=FederationConfig(**settings))
    federation = Federation(config, lookup=lambda _name: None, changed=lambda: None)
    channel = _Channel()
    ticks = 0
    read = 0
    ticks_while_reading = 0

    async def bystander() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def receive() -> str | None:  # never suspends: like frames the server has queued
        nonlocal read, ticks_while_reading
        if read >= frames or channel.closed is not None:
            ticks_while_reading = ticks
            return None
        read += 1
        return frame

    other = asyncio.create_task(bystander())
    await asyncio.sleep(0)
    start_ticks = ticks
    try:
        await serve_client(
            federation, channel, receive, namespace="flood", tenant="mallory", key_id="k", origin="test"
        )
    finally:
        other.cancel()
    return channel, read, ticks_while_reading - start_ticks


async def test_queued_frames_let_the_loop_run_between_them() -> None:
    _channel, read, ticks = await _flood(NOTE, 300, max_frames_per_second=1000)
    assert read == 300
    assert ticks >= 100, f"the reader held the loop for {read} frames ({ticks} turns for anyone else)"


async def test_a_frame_flood_closes_that_connection_naming_the_setting() -> None:
    channel, read, _ticks = await _flood(NOTE, 5000, max_frames_per_second=100)
    assert channel.closed is not None and channel.closed[0] == protocol.FLOODED, channel.closed
    assert "max_frames_per_second" in channel.closed[1]
    assert read < 1000  # the burst (two seconds' worth) and a little, never the whole flood


async def test_a_byte_flood_closes_that_connection_naming_the_setting() -> None:
    big = orjson.dumps(
        {"jsonrpc": "2.0", "method": "notifications/x", "params": {"p": "x" * 60_000}}
    ).decode()
    channel, read, _ticks = await _flood(big, 200, max_bytes_per_second=100_000, max_frame_bytes=65_536)
    assert channel.closed is not None and channel.closed[0] == protocol.FLOODED, channel.closed
    assert "max_bytes_per_second" in channel.closed[1]
    assert read < 10


async def test_a_flooding_socket_is_closed_and_a_bystander_is_served(sqlite_app) -> None:
    api = await sqlite_app({"federation": {**FAST_HEARTBEAT, "max_frames_per_second": 50}}, require_auth=True)
    flooder = await api.key("mallory", "tools:federate")
    bystander = api.client(await api.key("bob"))
    async with served(api) as base, raw_client(base, flooder, "flood") as client:

        async def flood() -> None:
            for _ in range(2000):
                await client.socket.send(NOTE)

        sending = asyncio.create_task(flood())
        answer = await bystander.get("/api/v1/ai-tools")
        code, reason = await client.closed()
        sending.cancel()
        async with raw_client(base, flooder, "flood") as again:  # at once: no fresh burst for it
            code_again, reason_again = await again.closed()
    assert answer.status_code == 200
    assert code == protocol.FLOODED and "max_frames_per_second" in reason, (code, reason)
    assert code_again == protocol.FLOODED and "reconnect after" in reason_again, (code_again, reason_again)
