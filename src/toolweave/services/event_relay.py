"""`GET /api/v1/events` across gateways: every gateway's `tool_result` events over Redis.

A client following the live trace is connected to ONE gateway, behind a balancer, while the
calls it wants to see land on all of them. With `gateway.redis_url` each gateway publishes
its events on one channel per deployment (`toolweave:events:<id>`, `<id>` as the change
feed's) and, while it has subscribers of its own, listens on it and hands what the others
published to them, tenant-filtered exactly like its own events.

Cheap when nobody follows: Redis answers each PUBLISH with the number of listeners, and a
gateway that heard "0" stops publishing, asking again (one event) at most once a `PROBE_SECONDS`,
so a follower on another gateway sees every event from within that long after it subscribed.
Publishing is a bounded queue drained by a background task: a call never waits for Redis, a
burst beyond `QUEUE_SIZE` loses its oldest events, and Redis down costs other gateways'
events only (logged once, retried).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from typing import Any

import orjson

from toolweave.services.change_feed import feed_identity, follow_channels, import_redis
from toolweave.store import Database
from toolweave.waiting import set_within, within

logger = logging.getLogger("toolweave.events")

PROBE_SECONDS = 1.0
"""With no listener heard of, one event is published this often to ask again."""
QUEUE_SIZE = 1000
PUBLISH_SECONDS = 2.0
"""A PUBLISH that takes longer is given up (the broker is down or stuck)."""
MAX_MESSAGE_BYTES = 64 * 1024
"""A message from the channel larger than this is dropped unread."""


class EventRelay:
    """One gateway's part: `send` its events, `deliver` the others' to its own subscribers."""

    def __init__(self, db: Database, redis_url: str) -> None:
        self.instance = uuid.uuid4().hex
        self.channel = f"toolweave:events:{feed_identity(db)}"
        self._url = redis_url
        self._redis: Any = None
        """Made by `start` (the package is only needed once a gateway serves)."""
        self._outbox: collections.deque[dict[str, Any]] = collections.deque(maxlen=QUEUE_SIZE)
        self._wake = asyncio.Event()
        self._listeners = 0
        """Other gateways' listeners, as the last PUBLISH counted them."""
        self._last_probe = 0.0
        self._publisher: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._deliver: Any = None
        self._down_logged = False

    def wanted(self) -> bool:
        """Whether an event should go out now: someone listens, or it is time to ask again."""
        if self._publisher is None:
            return False
        return self._listeners > 0 or time.monotonic() - self._last_probe >= PROBE_SECONDS

    def send(self, event: dict[str, Any]) -> None:
        """Queue an event for the other gateways (never blocks, never raises)."""
        if self._listeners == 0:
            self._last_probe = time.monotonic()
        self._outbox.append(event)
        self._wake.set()

    async def start(self, deliver: Any) -> None:
        """Publish from now on; `deliver(event)` is what the others' events are handed to."""
        self._deliver = deliver
        self._redis = import_redis().from_url(self._url, socket_connect_timeout=5, socket_keepalive=True)
        self._publisher = asyncio.create_task(self._publish_loop(), name="toolweave-event-publisher")

    def listening(self, wanted: bool) -> None:
        """Listen while this gateway has subscribers of its own (`EventStream` says when)."""
        if self._redis is None:
            return
        if wanted and (self._listener is None or self._listener.done()):
            self._listener = asyncio.get_running_loop().create_task(
                self._listen(), name="toolweave-event-listener"
            )
        elif not wanted and self._listener is not None:
            self._listener.cancel()
            self._listener = None

    async def close(self) -> None:
        for task in (self._publisher, self._listener):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._publisher = self._listener = None
        if self._redis is not None:
            with contextlib.suppress(Exception):
                await self._redis.aclose()
            self._redis = None

    async def _publish_loop(self) -> None:
        while True:
            await set_within(self._wake, None)
            self._wake.clear()
            while self._outbox:
                event = self._outbox.popleft()
                message = orjson.dumps({"from": self.instance, "event": event})
                try:
                    heard = await within(PUBLISH_SECONDS, self._redis.publish(self.channel, message))
                except asyncio.CancelledError:
                    raise
                except Exception as error:  # noqa: BLE001 - Redis down: only other gateways' followers lose
                    self._down(error)
                    self._outbox.clear()
                    self._listeners = 0
                    break
                self._up()
                own = 1 if self._listener is not None and not self._listener.done() else 0
                self._listeners = max(0, int(heard) - own)

    async def _listen(self) -> None:
        await follow_channels(self._redis, [self.channel], self._received, self._down)

    def _received(self, raw: bytes | str) -> None:
        if len(raw) > MAX_MESSAGE_BYTES:
            return
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if not isinstance(message, dict) or message.get("from") == self.instance:
            return
        event = message.get("event")
        if isinstance(event, dict) and isinstance(event.get("type"), str) and "tenant" in event:
            self._deliver(event)

    def _down(self, error: BaseException) -> None:
        if not self._down_logged:
            logger.warning(
                "event relay: Redis unavailable (%s); other gateways' events are not followed", error
            )
            self._down_logged = True

    def _up(self) -> None:
        if self._down_logged:
            logger.info("event relay: Redis is back")
            self._down_logged = False
