"""Bounded waits that never lose their task's cancellation.

On Python 3.11 `asyncio.wait_for` returns the result when the awaited thing finishes at the moment
its task is cancelled, and the cancellation is gone: a background loop (`while True: await
wait_for(event.wait(), 30)`) then carries on, and the `close()` that cancelled it and gathers it
waits forever (a gateway's stop hung this way when Redis came back as it stopped). `asyncio.timeout`
keeps the two apart, so every loop a `close()` cancels waits through these.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(seconds: float | None, awaitable: Awaitable[T]) -> T:
    """`await awaitable`, or `TimeoutError` after `seconds` (None: no bound)."""
    async with asyncio.timeout(seconds):
        return await awaitable


async def set_within(event: asyncio.Event, seconds: float | None) -> bool:
    """Whether `event` is set within `seconds` (None: wait until it is)."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True
