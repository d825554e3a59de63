"""SSE events of shared MCP sessions kept in Redis, so a stream resumes with `Last-Event-ID` on any replica.

A 2025-11-25 client whose SSE stream breaks (a POST's stream, or its GET stream) reconnects with a GET
carrying the ID of the last event it got. The balancer may send that GET to another replica, which
never saw the stream. With the SDK's `EventStore` seam the transport stores every event it sends
(and a priming event opening each POST stream) and asks the store to replay what follows an ID;
here both go to Redis, one Redis Stream per session (`<ns>:e:<session>`):

- Bounded per session: at most `MAX_EVENTS` entries and `MAX_BYTES` bytes (the oldest are dropped,
  atomically, by one Lua script per event), and they expire `idle` seconds after the last event (the
  session's own idle time). An event larger than `MAX_EVENT_BYTES` is kept as an empty placeholder
  (its ID stays valid, its content is not replayed).
- An event's ID is `<entry ID>:g` (the session's GET stream) or `<entry ID>:r` (a request's stream).
- Only one replica stores the GET stream's events: the one that last served the client's GET (at
  first the one that answered `initialize`). Every replica's copy of a session receives each
  `list_changed` (see `shared.py`), so without this a replay would hand the client one copy per
  replica.
- A request's stream is replayed up to its response; if the response is not there yet and the request
  runs on this replica, the stream goes on live here; if it runs on another replica, the replayed
  stream ends and the client reconnects (with the new last ID) for what comes next.
- Redis unreachable: events get IDs that replay nothing (`down:g`, `down:r`) and streams go on live.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter

from toolweave.wire import sdk_compat

logger = logging.getLogger("toolweave.server")

MAX_EVENTS = 1000
"""Events kept per session (the oldest are dropped first)."""
MAX_BYTES = 4 * 1024 * 1024
"""Bytes of events kept per session."""
MAX_EVENT_BYTES = 1024 * 1024
"""A larger event is stored as a placeholder: its ID resumes, its content is not replayed."""
REDIS_SECONDS = 2.0
_EVENT_ID = re.compile(r"(\d{1,20}-\d{1,20}|down):([gr])")
_RESPONSES = (JSONRPCResponse, JSONRPCError)

_APPEND = """
local size = tonumber(ARGV[3])
local id = redis.call('XADD', KEYS[1], '*', 's', ARGV[1], 'm', ARGV[2], 'n', size)
local total = redis.call('INCRBY', KEYS[2], size)
local count = redis.call('XLEN', KEYS[1])
while count > 1 and (count > tonumber(ARGV[4]) or total > tonumber(ARGV[5])) do
  local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
  local fields = first[2]
  local n = 0
  for i = 1, #fields, 2 do
    if fields[i] == 'n' then n = tonumber(fields[i + 1]) end
  end
  redis.call('XDEL', KEYS[1], first[1])
  total = redis.call('INCRBY', KEYS[2], -n)
  count = count - 1
end
redis.call('EXPIRE', KEYS[1], ARGV[6])
redis.call('EXPIRE', KEYS[2], ARGV[6])
return id
"""


class RedisEvents:
    """The deployment's event store: one `SessionEvents` per session, all in one Redis."""

    def __init__(self, sharing: Any) -> None:
        self.sharing = sharing
        """The `SessionSharing` whose Redis connection, namespace and outage pause are used."""
        self._append: Any = None

    def stream_key(self, session_id: str) -> str:
        return f"{self.sharing.namespace}:e:{session_id}"

    def for_session(self, session_id: str, *, holds_get: bool) -> SessionEvents:
        return SessionEvents(self, session_id, holds_get=holds_get)

    async def append(self, session_id: str, stream_id: str, data: bytes) -> str | None:
        """Store one event; its Redis entry ID, None when Redis failed."""
        sharing = self.sharing
        if not sharing.available:
            return None
        if self._append is None:
            self._append = sharing.redis.register_script(_APPEND)
        key = self.stream_key(session_id)
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                entry = await self._append(
                    keys=[key, f"{key}:n"],
                    args=[stream_id, data, len(data) + len(stream_id), MAX_EVENTS, MAX_BYTES, sharing.idle],
                )
        except Exception as error:  # noqa: BLE001 - Redis down: the event is sent, not kept
            sharing._down(error)
            return None
        return entry.decode() if isinstance(entry, bytes) else str(entry)

    async def entries(
        self, session_id: str, start: str, end: str = "+"
    ) -> list[tuple[str, str, bytes]] | None:
        """(entry ID, stream, message) from `start` to `end` (Redis `XRANGE` bounds); None when Redis failed."""
        sharing = self.sharing
        if not sharing.available:
            return None
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                found = await sharing.redis.xrange(self.stream_key(session_id), start, end, count=MAX_EVENTS)
        except Exception as error:  # noqa: BLE001
            sharing._down(error)
            return None
        return [
            (entry.decode(), fields.get(b"s", b"").decode(), fields.get(b"m", b"")) for entry, fields in found
        ]

    async def forget(self, session_id: str) -> None:
        """The session ended everywhere: its events go too."""
        sharing = self.sharing
        if not sharing.available:
            return
        key = self.stream_key(session_id)
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                await sharing.redis.delete(key, f"{key}:n")
        except Exception as error:  # noqa: BLE001
            sharing._down(error)


class SessionEvents(EventStore):
    """The SDK `EventStore` of one session's transport on this replica."""

    def __init__(self, events: RedisEvents, session_id: str, *, holds_get: bool) -> None:
        self.events = events
        self.session_id = session_id
        self.holds_get = holds_get
        """Whether this replica stores the GET stream's events (it served the client's last GET)."""
        self._running: set[str] = set()
        """Request streams this replica stored events of and whose response has not been sent yet."""
        self._last_get = "down"

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        get = stream_id == sdk_compat.GET_STREAM_KEY
        tag = "g" if get else "r"
        if get and not self.holds_get:
            return f"{self._last_get}:g"  # another replica keeps the GET stream's events
        data = b"" if message is None else message.model_dump_json(by_alias=True, exclude_none=True).encode()
        if not get:
            if isinstance(message, _RESPONSES):
                self._running.discard(stream_id)
            elif len(self._running) < 10_000:
                self._running.add(stream_id)
        if len(data) > MAX_EVENT_BYTES:
            logger.warning(
                "MCP session %s: an event of %d bytes is not kept for replay", self.session_id, len(data)
            )
            data = b""
        entry = await self.events.append(self.session_id, stream_id, data)
        if entry is None:
            return f"down:{tag}"
        if get:
            self._last_get = entry
        return f"{entry}:{tag}"

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        """Send the stream's events after `last_event_id`; the stream to follow live here, or None when
        it ended (a request's response was replayed, or the request runs on another replica)."""
        parsed = _EVENT_ID.fullmatch(last_event_id)
        if parsed is None:
            return None
        entry, tag = parsed.groups()
        if tag == "g":
            self.holds_get = True
            stream: str | None = sdk_compat.GET_STREAM_KEY
        elif entry == "down":
            return None
        else:
            own = await self.events.entries(self.session_id, entry, entry)
            stream = own[0][1] if own else None
        if stream is None:
            return None
        later = [] if entry == "down" else await self.events.entries(self.session_id, f"({entry}")
        for found, of, data in later or ():
            if of != stream or not data:
                continue
            message = jsonrpc_message_adapter.validate_json(data, by_name=False)
            await send_callback(EventMessage(message, f"{found}:{tag}"))
            if tag == "r" and isinstance(message, _RESPONSES):
                return None
        if tag == "g" or stream in self._running:
            return stream
        return None
