"""The live trace: every call's `tool_result` event, logged and streamed to subscribers.

The executor tells the served gateway's call observer of every call; this
service turns it into a `tool_result` event (`executor.trace`), logs it on
`toolweave.trace` (INFO: one line per call; raise the log level to silence it)
and hands it to every subscriber of `GET /api/v1/events` that may see it: a
tenant's subscribers see their tenant's calls, the operator (no tenant) sees
all. Each subscriber has a bounded queue; one that does not keep up loses its
oldest events (and is told how many), it never slows a call or another
subscriber. With nobody subscribed and the logger quiet, no event is built.

With Redis, the events of every gateway sharing the database reach every gateway's
subscribers (`services.event_relay`): a follower behind a balancer sees the whole deployment.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolweave.catalog.catalog import Entry
from toolweave.executor.trace import tool_result_event
from toolweave.services.errors import StreamsBusy
from toolweave.waiting import within

if TYPE_CHECKING:
    from toolweave.services.event_relay import EventRelay

logger = logging.getLogger("toolweave.trace")

QUEUE_SIZE = 1000
MAX_SUBSCRIBERS = 100


class Subscriber:
    """One `GET /api/v1/events` stream: the events its tenant may see, oldest dropped when it lags."""

    def __init__(self, tenant: str | None, everything: bool, label: str = "local") -> None:
        self.tenant = tenant
        self.everything = everything
        self.label = label
        """The credential that opened it (`key:tw_...`), for the per-key share."""
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_SIZE)
        self.dropped = 0

    def offer(self, event: dict[str, Any]) -> None:
        if not self.everything and event["tenant"] != self.tenant:
            return
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(event)


class EventStream:
    def __init__(self, relay: EventRelay | None = None, *, per_key: int = 4, per_tenant: int = 16) -> None:
        self.subscribers: set[Subscriber] = set()
        self.relay = relay
        self.per_key = per_key
        self.per_tenant = per_tenant
        """The other gateways' events and ours for them (Redis), or None."""

    def observe(
        self,
        entry: Entry,
        result: types.CallToolResult,
        seconds: float,
        tenant: str | None,
        subject: str | None = None,
    ) -> None:
        """The call observer's part (`tenant`, `subject`: the caller's): must stay cheap and never raise."""
        try:
            relay = self.relay if self.relay is not None and self.relay.wanted() else None
            if not self.subscribers and relay is None and not logger.isEnabledFor(logging.INFO):
                return
            event = tool_result_event(entry, result, seconds, tenant, subject=subject)
            if logger.isEnabledFor(logging.INFO):
                logger.info(
                    "tool_result %s %s %.1fms (%s) by %s",
                    event["tool"],
                    event["status"],
                    event["duration_ms"],
                    event["source"],
                    subject or "-",
                    extra={"event": event},
                )
            self.deliver(event)
            if relay is not None:
                relay.send(event)
        except Exception:
            logger.debug("tracing a call failed", exc_info=True)

    def publish(self, event: dict[str, Any]) -> None:
        """An event of this gateway's own (not a call's): to its subscribers and, with Redis, everyone's."""
        self.deliver(event)
        if self.relay is not None and self.relay.wanted():
            self.relay.send(event)

    def deliver(self, event: dict[str, Any]) -> None:
        """Hand an event (ours, or another gateway's) to every subscriber that may see it."""
        for subscriber in self.subscribers:
            subscriber.offer(event)

    def subscribe(self, tenant: str | None, *, everything: bool, label: str = "local") -> Subscriber:
        """A new subscriber (`everything`: the operator's, who sees every tenant's calls).

        `StreamsBusy` past the caller's share: one key, or one tenant's keys together, may hold only
        part of the gateway's streams, so no tenant can take them all (the local operator, with no
        tenant, is held to the gateway total only).
        """
        if tenant is not None:
            theirs = [s for s in self.subscribers if s.tenant == tenant and not s.everything]
            mine = sum(1 for s in theirs if s.label == label)
            if mine >= self.per_key:
                raise StreamsBusy(
                    429,
                    f"this API key has {mine} event streams open, its limit "
                    f"(limits.event_streams_per_key = {self.per_key}); close one first",
                )
            if len(theirs) >= self.per_tenant:
                raise StreamsBusy(
                    429,
                    f"tenant {tenant!r} has {len(theirs)} event streams open, its limit "
                    f"(limits.event_streams_per_tenant = {self.per_tenant}); close one first",
                )
        if len(self.subscribers) >= MAX_SUBSCRIBERS:
            raise StreamsBusy(503, f"at most {MAX_SUBSCRIBERS} event streams may be open at once")
        subscriber = Subscriber(tenant, everything, label)
        self.subscribers.add(subscriber)
        if self.relay is not None:
            self.relay.listening(True)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)
        if self.relay is not None and not self.subscribers:
            self.relay.listening(False)

    async def follow(
        self, subscriber: Subscriber, keepalive: float = 15.0
    ) -> AsyncIterator[dict[str, Any] | None]:
        """The subscriber's events as they come (None every `keepalive` seconds of silence)."""
        try:
            while True:
                try:
                    event = await within(keepalive, subscriber.queue.get())
                except TimeoutError:
                    yield None
                    continue
                if subscriber.dropped:
                    yield {"type": "dropped", "count": subscriber.dropped}
                    subscriber.dropped = 0
                yield event
        finally:
            self.unsubscribe(subscriber)
