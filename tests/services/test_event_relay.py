"""`GET /api/v1/events` across gateways: events published over a real Redis reach the subscribers
of another gateway, tenant-filtered; nobody listening costs one probe a second, not every call."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolweave.services import event_relay
from toolweave.services.event_relay import EventRelay
from toolweave.services.events import EventStream
from toolweave.store import Database

REDIS_ENV = "TOOLWEAVE_TEST_REDIS_URL"


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[Database]:
    """A database of its own: its identity (a random path) names the test's private channel."""
    database = Database.from_url(f"sqlite:///{tmp_path / f'{uuid.uuid4().hex}.db'}")
    await database.start()
    yield database
    await database.close()


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get(REDIS_ENV)
    if not url:
        pytest.skip(f"set {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0) to run the Redis cases")
    return url


async def streams(db: Database, redis_url: str, count: int) -> list[EventStream]:
    made = []
    for _ in range(count):
        stream = EventStream(EventRelay(db, redis_url))
        assert stream.relay is not None
        await stream.relay.start(stream.deliver)
        made.append(stream)
    return made


def event(tool: str, tenant: str | None) -> dict[str, object]:
    return {"type": "tool_result", "tool": tool, "tenant": tenant, "status": "ok"}


async def next_tool(queue: asyncio.Queue[dict[str, object]]) -> object:
    return (await asyncio.wait_for(queue.get(), 10))["tool"]


async def test_a_follower_on_one_gateway_sees_the_calls_of_the_others(
    db: Database, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_relay, "PROBE_SECONDS", 0.05)
    a, b, c = await streams(db, redis_url, 3)
    try:
        operator = c.subscribe(None, everything=True)
        acme = c.subscribe("acme", everything=False)

        async def delivered() -> None:  # the publishers learn that someone listens
            while not operator.queue.qsize():
                for stream in (a, b):
                    if stream.relay.wanted():  # type: ignore[union-attr]
                        stream.relay.send(event("probe", "nobody"))  # type: ignore[union-attr]
                await asyncio.sleep(0.02)

        await asyncio.wait_for(delivered(), 10)
        while not operator.queue.empty():
            operator.queue.get_nowait()
        await asyncio.sleep(0.2)  # both publishers have heard of the listener by now
        assert a.relay.wanted() and b.relay.wanted()  # type: ignore[union-attr]
        for stream, tool, tenant in ((a, "on_a", "acme"), (b, "on_b", "globex"), (a, "again_a", "acme")):
            stream.relay.send(event(tool, tenant))  # type: ignore[union-attr]
            await asyncio.sleep(0.05)  # keep the order across two publishers
        assert [await next_tool(operator.queue) for _ in range(3)] == ["on_a", "on_b", "again_a"]
        assert [await next_tool(acme.queue) for _ in range(2)] == ["on_a", "again_a"]  # no globex
        assert acme.queue.empty()

        c.unsubscribe(operator)
        c.unsubscribe(acme)  # nobody follows any more: the publishers stop after their next probe
        await asyncio.sleep(0.2)
        for stream in (a, b):
            stream.relay.send(event("unheard", None))  # type: ignore[union-attr]
        await asyncio.sleep(0.3)
        assert a.relay._listeners == b.relay._listeners == 0  # type: ignore[union-attr]
    finally:
        for stream in (a, b, c):
            await stream.relay.close()  # type: ignore[union-attr]


async def test_a_gateway_never_hears_its_own_events_twice(db: Database, redis_url: str) -> None:
    (only,) = await streams(db, redis_url, 1)
    try:
        follower = only.subscribe(None, everything=True)
        await asyncio.sleep(0.3)  # subscribed on Redis
        only.deliver(event("local", None))  # what observe() does with its own event...
        only.relay.send(event("local", None))  # type: ignore[union-attr]  ...and the copy for the others
        await asyncio.sleep(0.3)
        assert follower.queue.qsize() == 1
    finally:
        await only.relay.close()  # type: ignore[union-attr]
