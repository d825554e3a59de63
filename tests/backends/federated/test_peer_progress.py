"""A federated client's `notifications/progress` reaches the caller's progress callback, which is a
coroutine function (`common_types.ProgressFn`): the peer awaits it in order, frame by frame."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from toolweave.backends.federated.peer import FederatedPeer


class Frames:
    """The peer's channel, kept in memory: what the gateway sends its client."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

    async def send(self, text: str) -> None:
        self.sent.append(json.loads(text))
        self.arrived.set()

    async def close(self, code: int, reason: str) -> None:
        pass


async def test_a_clients_progress_is_awaited_by_the_callers_callback() -> None:
    frames = Frames()
    peer = FederatedPeer(frames, label="ns#1", tenant=None, key_id=None, max_frame_bytes=1 << 20)
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        await asyncio.sleep(0)
        seen.append((value, total, message))

    call = asyncio.create_task(
        peer.request("tools/call", {"name": "slow", "arguments": {}}, timeout=10, progress=progress)
    )
    await asyncio.wait_for(frames.arrived.wait(), 10)
    request_id = frames.sent[0]["id"]
    assert frames.sent[0]["params"]["_meta"]["progressToken"] == request_id
    for step in (1, 2):
        notification = {"progress": step, "total": 2, "message": f"step {step}", "progressToken": request_id}
        await peer.received(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": notification})
        )
    await peer.received(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}))
    assert await asyncio.wait_for(call, 10) == {"content": []}
    assert seen == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]
