"""`toolweave.waiting`: a background loop's bounded wait never loses the cancellation that stops it
(Python 3.11's `asyncio.wait_for` does when the wait ends at that moment; a gateway's stop hung on it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from toolweave.waiting import pause, set_within, within


async def _stopped_as_its_event_fires(loop_body: Callable[[asyncio.Event], Awaitable[None]]) -> bool:
    """Start a loop waiting on an event, set the event and let the wait end, then cancel the loop before
    it runs again: whether the loop ended (a lost cancellation leaves it waiting for the next event)."""
    event = asyncio.Event()

    async def loop() -> None:
        while True:
            await loop_body(event)
            event.clear()

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # the loop waits
    event.set()
    await asyncio.sleep(0)  # the wait sees it
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1)
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return bool(done) and task.cancelled()


async def test_a_loop_waiting_on_an_event_stops_when_cancelled_as_the_event_fires() -> None:
    async def body(event: asyncio.Event) -> None:
        await set_within(event, 30)

    assert await _stopped_as_its_event_fires(body)


async def test_a_loop_awaiting_a_bounded_call_stops_when_cancelled_as_the_call_ends() -> None:
    async def body(event: asyncio.Event) -> None:
        await within(30, event.wait())

    assert await _stopped_as_its_event_fires(body)


async def test_a_loop_whose_cancellation_a_library_swallowed_stops_at_its_next_wait() -> None:
    """As redis-py's client does when cancelled mid-reconnect: the error is taken for an outage."""
    calls = 0

    async def swallowing_call() -> None:
        nonlocal calls
        calls += 1
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise ConnectionError("connection closed") from None

    async def loop() -> None:
        while True:
            with contextlib.suppress(Exception):  # the loop's "broker down, retry later" branch
                await swallowing_call()
            await pause(0.01)
            await set_within(asyncio.Event(), 30)

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1)
    assert done and task.cancelled() and calls == 1


async def test_waits_end_at_their_bound() -> None:
    assert await set_within(asyncio.Event(), 0.01) is False
    try:
        await within(0.01, asyncio.Event().wait())
    except TimeoutError:
        pass
    else:
        raise AssertionError("within() let an unbounded wait run past its bound")
