"""Hardening II, left over: a key's connections still registering, and a tenant's registration rate.

As found: a key could open any number of federated sockets and never register (never answer
`initialize`): each one held a reader, a peer and a pending request on the gateway until
`register_timeout`, and each new one of a churning tenant cost a manifest read and a catalog
change. Now a key holds at most `[federation] max_pending_per_key` connections still registering,
and a tenant opens at most `registrations_per_second_per_tenant` a second (bursts of ten seconds'
worth); one more is closed at once (4429, not final: the client retries after its backoff), with
a reason naming the setting, before anything is read from it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from toolweave.backends.federated import protocol, serve_client
from toolweave.backends.federated.federation import Federation
from toolweave.config.models import Config, FederationConfig


class _Channel:
    """A client that never answers: its connection stays `still registering` until closed."""

    def __init__(self) -> None:
        self.closed: tuple[int, str] | None = None
        self.sent: list[str] = []
        self.ended = asyncio.Event()

    async def send(self, text: str) -> None:
        self.sent.append(text)

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)
        self.ended.set()

    async def receive(self) -> str | None:
        await self.ended.wait()
        return None


@contextlib.asynccontextmanager
async def connections(federation: Federation) -> AsyncIterator[Any]:
    """`open(key, tenant)`: a new silent connection (its channel, once the gateway has had a turn)."""
    tasks: list[asyncio.Task[None]] = []

    async def open_one(key: str | None, tenant: str | None) -> _Channel:
        channel = _Channel()
        tasks.append(
            asyncio.create_task(
                serve_client(
                    federation,
                    channel,
                    channel.receive,
                    namespace="ns",
                    tenant=tenant,
                    key_id=key,
                    origin="test",
                )
            )
        )
        for _ in range(5):
            await asyncio.sleep(0)
        return channel

    try:
        yield open_one
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def federation(**settings: Any) -> Federation:
    config = Config(federation=FederationConfig(register_timeout=60, **settings))
    return Federation(config, lookup=lambda _name: None, changed=lambda: None)


async def test_a_key_holds_at_most_its_share_of_connections_still_registering() -> None:
    async with connections(federation(max_pending_per_key=3, registrations_per_second_per_tenant=0)) as open_:
        held = [await open_("k1", "mallory") for _ in range(3)]
        assert all(channel.closed is None and channel.sent for channel in held)  # asked to initialize
        refused = await open_("k1", "mallory")
        other_key = await open_("k2", "mallory")
    assert refused.closed is not None and refused.closed[0] == protocol.FLOODED, refused.closed
    assert "max_pending_per_key" in refused.closed[1] and len(refused.closed[1].encode()) <= 123
    assert refused.sent == []  # refused before anything was asked or read
    assert other_key.closed is None and other_key.sent  # another key's share is its own


async def test_a_tenants_new_connections_are_rate_limited() -> None:
    async with connections(
        federation(max_pending_per_key=1000, registrations_per_second_per_tenant=0.5)
    ) as open_:
        burst = [await open_("k1", "mallory") for _ in range(5)]  # ten seconds' worth of 0.5 a second
        refused = await open_("k2", "mallory")  # another key of the same tenant shares its rate
        bystander = await open_("k3", "bob")
    assert all(channel.closed is None for channel in burst)
    assert refused.closed is not None and refused.closed[0] == protocol.FLOODED, refused.closed
    assert "registrations_per_second_per_tenant" in refused.closed[1] and "retry in" in refused.closed[1]
    assert refused.sent == []
    assert bystander.closed is None and bystander.sent


async def test_the_local_operator_is_not_limited() -> None:
    async with connections(
        federation(max_pending_per_key=1, registrations_per_second_per_tenant=0.1)
    ) as open_:
        local = [await open_(None, None) for _ in range(4)]  # auth off: no key, no tenant
    assert all(channel.closed is None and channel.sent for channel in local)
