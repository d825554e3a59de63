"""Bounded waits that never lose their task's cancellation.

On Python 3.11 `asyncio.wait_for` returns the result when the awaited thing finishes at the moment
its task is cancelled, and the cancellation is gone: a background loop (`while True: await
wait_for(event.wait(), 30)`) then carries on, and the `close()` that cancelled it and gathers it
waits forever (a gateway's stop hung this way when Redis came back as it stopped). `asyncio.timeout`
keeps the two apart, so every loop a `close()` cancels waits through these.

A library can swallow a cancellation too (redis-py's client, cancelled mid-reconnect, raises a
`ConnectionError` that a loop's `except Exception` takes for an outage). The task still counts the
request (`Task.cancelling()`), so each wait here first ends a task that was asked to stop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


def cancel_requested() -> bool:
    """Whether this task was asked to stop, even if the `CancelledError` was swallowed on the way."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _stop_if_asked() -> None:
    if cancel_requested():
        raise asyncio.CancelledError


async def within(seconds: float | None, awaitable: Awaitable[T]) -> T:
    """`await awaitable`, or `TimeoutError` after `seconds` (None: no bound)."""
    if cancel_requested():
        if asyncio.iscoroutine(awaitable):
            awaitable.close()  # never awaited: no "coroutine was never awaited" warning
        raise asyncio.CancelledError
    async with asyncio.timeout(seconds):
        return await awaitable


async def set_within(event: asyncio.Event, seconds: float | None) -> bool:
    """Whether `event` is set within `seconds` (None: wait until it is)."""
    _stop_if_asked()
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


async def pause(seconds: float) -> None:
    """`asyncio.sleep` for a retry loop's backoff, which first ends a task asked to stop."""
    _stop_if_asked()
    await asyncio.sleep(seconds)
