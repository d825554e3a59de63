"""SSE events of shared MCP sessions kept in Redis, so a stream resumes with `Last-Event-ID` on any replica.

A 2025-11-25 client whose SSE stream breaks (a POST's stream, or its GET stream) reconnects with a GET
carrying the ID of the last event it got. The balancer may send that GET to another replica, which
never saw the stream. With the SDK's `EventStore` seam the transport stores every event it sends
(and a priming event opening each POST stream) and asks the store to replay what follows an ID.

**Written behind.** The SDK awaits `store_event` before it sends each event, so a Redis round trip
there is paid twice per call (the priming event, the response) on the request's path: it cost
~0.6 ms and ~580 us of CPU per 2025-11-25 call. Instead each replica numbers its events itself and
keeps them in a bounded in-process buffer, which one task writes to Redis every `FLUSH_SECONDS` in
one command (a Lua script appending the whole batch). So `store_event` never waits, and the write
costs one round trip per tick for every session of the replica together. The price, documented in
docs/deployment.md: an event is in Redis up to `FLUSH_SECONDS` (plus a round trip) after it was
sent. A replica that dies loses the events of its last tick (those of the calls it was running,
which die with it anyway, and of answers sent just before). A replica replaying its own events
first writes its buffer; one replaying another's first waits `OTHERS_SECONDS`, two of that
replica's ticks (the SDK client itself waits 1 s before reconnecting).

Layout: one Redis Stream per session and replica, `<ns>:e:<session>:<replica>`, whose entry IDs are
the replica's own sequence numbers (`0-<seq>`), and a set `<ns>:e:<session>` of the replicas that
stored events of the session (so DELETE removes them all). An event's ID is
`<replica>.<seq>:g` (the session's GET stream) or `<replica>.<seq>:r` (a request's stream): it
names the Redis Stream to read.

- Bounded per session and replica: at most `MAX_EVENTS` entries and `MAX_BYTES` bytes (the oldest are
  dropped by the same script), expiring `idle` seconds after the last event (the session's own idle
  time). An event larger than `MAX_EVENT_BYTES` is kept as an empty placeholder (its ID stays valid,
  its content is not replayed). At most `MAX_PENDING` events wait for a write; past that (Redis
  slower than the replica's events) new ones are sent but not kept.
- Only one replica stores the GET stream's events: the one that last served the client's GET (at
  first the one that answered `initialize`). Every replica's copy of a session receives each
  `list_changed` (see `shared.py`), so without this a replay would hand the client one copy per
  replica.
- A request's stream is replayed up to its response; if the response is not there yet and the request
  runs on this replica, the stream goes on live here; if it runs on another replica, the replayed
  stream ends and the client reconnects (with the new last ID) for what comes next.
- Redis unreachable: events get IDs that replay nothing (`down:g`, `down:r`) and streams go on live; a
  batch whose write fails is lost (its events replay nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter

from toolweave.wire import sdk_compat

logger = logging.getLogger("toolweave.server")

MAX_EVENTS = 1000
"""Events kept per session and replica (the oldest are dropped first)."""
MAX_BYTES = 4 * 1024 * 1024
"""Bytes of events kept per session and replica."""
MAX_EVENT_BYTES = 1024 * 1024
"""A larger event is stored as a placeholder: its ID resumes, its content is not replayed."""
MAX_PENDING = 10_000
"""Events waiting for their write, at most (then new ones are not kept)."""
FLUSH_SECONDS = 0.05
"""How long an event waits in the buffer for others to share its write."""
OTHERS_SECONDS = 2 * FLUSH_SECONDS
"""A replay of another replica's events waits this long first: two of its write ticks, so the events it
sent up to the reconnection are in Redis (replays are rare: a stream broke, its client reconnected)."""
SETTLE_TRIES = 3
"""A replay of another replica's events whose last ID is still not in Redis looks again this many
times, `FLUSH_SECONDS` apart (that replica's writes may lag)."""
REDIS_SECONDS = 2.0
TAG_LENGTH = 12
"""Hex digits of a replica's instance ID in its event IDs."""
_EVENT_ID = re.compile(rf"(?:([0-9a-f]{{{TAG_LENGTH}}})\.(\d{{1,19}})|down):([gr])")
_RESPONSES = (JSONRPCResponse, JSONRPCError)

_APPEND = """
-- KEYS: per session a triple: its set of replicas, this replica's stream of its events, their bytes
-- ARGV: idle, max events, max bytes, replica tag, then per event: triple index, entry ID, stream, data
local idle, max_count, max_bytes, tag = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local touched = {}
for i = 5, #ARGV, 4 do
  local at = tonumber(ARGV[i])
  local size = #ARGV[i + 2] + #ARGV[i + 3]
  local added = redis.pcall('XADD', KEYS[at + 1], ARGV[i + 1], 's', ARGV[i + 2], 'm', ARGV[i + 3], 'n', size)
  if type(added) ~= 'table' or not added.err then
    redis.call('INCRBY', KEYS[at + 2], size)
  end
  touched[at] = true
end
for at, _ in pairs(touched) do
  local key, total_key = KEYS[at + 1], KEYS[at + 2]
  local total = tonumber(redis.call('GET', total_key) or '0')
  local count = redis.call('XLEN', key)
  while count > 1 and (count > max_count or total > max_bytes) do
    local first = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)[1]
    local fields = first[2]
    local n = 0
    for j = 1, #fields, 2 do
      if fields[j] == 'n' then n = tonumber(fields[j + 1]) end
    end
    redis.call('XDEL', key, first[1])
    total = redis.call('INCRBY', total_key, -n)
    count = count - 1
  end
  redis.call('SADD', KEYS[at], tag)
  for k = at, at + 2 do
    redis.call('EXPIRE', KEYS[k], idle)
  end
end
return 1
"""


class Sharing(Protocol):
    """What a store uses of `shared.SessionSharing`: its instance, namespace, idle time, outage pause."""

    instance: str
    namespace: str
    idle: int

    @property
    def available(self) -> bool: ...

    def _down(self, error: BaseException) -> None: ...


class RedisSharing(Sharing, Protocol):
    """And its Redis connection (`RedisEvents`)."""

    @property
    def redis(self) -> Any: ...


@dataclass(slots=True)
class Pending:
    """One event waiting for its write (serialized only then, off the request's path)."""

    session_id: str
    seq: int
    stream_id: str
    message: JSONRPCMessage | None


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored event: its replica's sequence number, its stream, its JSON (empty: a priming event
    or a placeholder)."""

    seq: int
    stream_id: str
    data: bytes


class SharedEvents(ABC):
    """The deployment's event store as one replica sees it: one `SessionEvents` per session, this
    replica's events written behind in batches, anyone's read back. Where they are kept is the
    subclass's: `RedisEvents`, `events_db.DatabaseEvents` (PostgreSQL without Redis)."""

    def __init__(self, sharing: Sharing) -> None:
        self.sharing: Sharing = sharing
        """The `SessionSharing` whose namespace, idle time and outage pause are used."""
        self.tag = sharing.instance[:TAG_LENGTH]
        """This replica's part of its event IDs."""
        self._seq = 0
        self._pending: list[Pending] = []
        self._settled = 0
        """Every event up to this sequence number is written (or given up)."""
        self._flusher: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()
        self._append: Any = None
        self._full_logged = False

    def for_session(self, session_id: str, *, holds_get: bool) -> SessionEvents:
        return SessionEvents(self, session_id, holds_get=holds_get)

    # -- writing -----------------------------------------------------------------------------

    def append(self, session_id: str, stream_id: str, message: JSONRPCMessage | None) -> str | None:
        """Number one event and queue it for the next write: its `<replica>.<seq>`, None when Redis is
        known to be down (the event is sent, not kept)."""
        if not self.sharing.available:
            return None
        self._seq += 1
        if len(self._pending) >= MAX_PENDING:
            if not self._full_logged:
                self._full_logged = True
                logger.warning("MCP session events: %d wait for Redis; newer ones are not kept", MAX_PENDING)
        else:
            self._pending.append(Pending(session_id, self._seq, stream_id, message))
            if self._flusher is None:
                self._flusher = asyncio.get_running_loop().create_task(
                    self._flush_soon(), name="toolweave-mcp-events"
                )
        return f"{self.tag}.{self._seq}"

    async def _flush_soon(self) -> None:
        """Write what is buffered every `FLUSH_SECONDS`, until nothing is."""
        try:
            while self._pending:
                await asyncio.sleep(FLUSH_SECONDS)
                await self._write_pending()
        finally:
            self._flusher = None

    async def _write_pending(self) -> None:
        """Write the buffer as one batch; one batch at a time, so entry IDs reach Redis in order."""
        async with self._writing:
            batch, self._pending = self._pending, []
            if batch:
                try:
                    await self._write(batch)
                finally:
                    self._settled = max(self._settled, batch[-1].seq)

    @abstractmethod
    async def _write(self, batch: list[Pending]) -> None:
        """Write a batch of this replica's events (in one round trip); a failure is told to
        `sharing._down` (those events were sent, not kept)."""

    def _encoded(self, event: Pending) -> bytes:
        if event.message is None:
            return b""
        data = event.message.model_dump_json(by_alias=True, exclude_none=True).encode()
        if len(data) > MAX_EVENT_BYTES:
            logger.warning(
                "MCP session %s: an event of %d bytes is not kept for replay", event.session_id, len(data)
            )
            return b""
        return data

    async def settle(self) -> None:
        """Until every event numbered so far is written (or given up): a replay of this replica's own
        events reads them all."""
        wanted = self._seq
        while self._settled < wanted and (self._pending or self._writing.locked()):
            await self._write_pending()

    async def close(self) -> None:
        """Write what is buffered, once (a replica stopping cleanly keeps its streams resumable)."""
        flusher = self._flusher
        if flusher is not None:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await flusher
        with contextlib.suppress(Exception):
            await self._write_pending()

    # -- reading -----------------------------------------------------------------------------

    async def entries(self, session_id: str, tag: str, first: int) -> list[Entry] | None:
        """Replica `tag`'s events of a session from sequence number `first` on; None when Redis
        failed."""
        if tag == self.tag:
            await self.settle()
        else:
            await asyncio.sleep(OTHERS_SECONDS)  # what that replica sent just before is written by then
        tries = 0
        while True:
            found = await self._read(session_id, tag, first)
            if found is None or (found and found[0].seq == first) or tag == self.tag:
                return found
            tries += 1
            if tries > SETTLE_TRIES:
                return found
            await asyncio.sleep(FLUSH_SECONDS)  # another replica may not have written it yet

    @abstractmethod
    async def _read(self, session_id: str, tag: str, first: int) -> list[Entry] | None:
        """Replica `tag`'s events of a session from sequence number `first` on (at most
        `MAX_EVENTS + 1`); None when the store failed."""

    @abstractmethod
    async def forget(self, session_id: str) -> None:
        """The session ended everywhere: every replica's events of it go too."""


class RedisEvents(SharedEvents):
    """In Redis: one Stream per session and replica (entry IDs are the replica's sequence numbers),
    trimmed by the append script."""

    def __init__(self, sharing: RedisSharing) -> None:
        super().__init__(sharing)
        self.redis_sharing = sharing

    def stream_key(self, session_id: str, tag: str | None = None) -> str:
        """The Redis Stream of one replica's events of a session (this replica's by default)."""
        return f"{self.sharing.namespace}:e:{session_id}:{tag or self.tag}"

    def replicas_key(self, session_id: str) -> str:
        return f"{self.sharing.namespace}:e:{session_id}"

    async def _write(self, batch: list[Pending]) -> None:
        """One script call appending the batch (and noting this replica in each session's set)."""
        sharing = self.redis_sharing
        if not sharing.available:
            return
        if self._append is None:
            self._append = sharing.redis.register_script(_APPEND)
        at: dict[str, int] = {}
        keys: list[str] = []
        args: list[Any] = [sharing.idle, MAX_EVENTS, MAX_BYTES, self.tag]
        for event in batch:
            index = at.get(event.session_id)
            if index is None:
                index = at[event.session_id] = len(keys) + 1
                stream = self.stream_key(event.session_id)
                keys += (self.replicas_key(event.session_id), stream, f"{stream}:n")
            args += (index, f"0-{event.seq}", event.stream_id, self._encoded(event))
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                await self._append(keys=keys, args=args)
        except Exception as error:  # noqa: BLE001 - Redis down: these events were sent, not kept
            sharing._down(error)
        else:
            self._full_logged = False

    async def _read(self, session_id: str, tag: str, first: int) -> list[Entry] | None:
        sharing = self.redis_sharing
        if not sharing.available:
            return None
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                found = await sharing.redis.xrange(
                    self.stream_key(session_id, tag), f"0-{first}", "+", count=MAX_EVENTS + 1
                )
        except Exception as error:  # noqa: BLE001
            sharing._down(error)
            return None
        return [
            Entry(int(entry.split(b"-")[1]), fields.get(b"s", b"").decode(), fields.get(b"m", b""))
            for entry, fields in found
        ]

    async def forget(self, session_id: str) -> None:
        """The session ended everywhere: every replica's events of it go too."""
        sharing = self.redis_sharing
        if not sharing.available:
            return
        replicas = self.replicas_key(session_id)
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                tags = {tag.decode() for tag in await sharing.redis.smembers(replicas)} | {self.tag}
                streams = [self.stream_key(session_id, tag) for tag in sorted(tags)]
                await sharing.redis.delete(replicas, *streams, *(f"{stream}:n" for stream in streams))
        except Exception as error:  # noqa: BLE001
            sharing._down(error)


class SessionEvents(EventStore):
    """The SDK `EventStore` of one session's transport on this replica."""

    def __init__(self, events: SharedEvents, session_id: str, *, holds_get: bool) -> None:
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
        if not get:
            if isinstance(message, _RESPONSES):
                self._running.discard(stream_id)
            elif len(self._running) < 10_000:
                self._running.add(stream_id)
        entry = self.events.append(self.session_id, stream_id, message)
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
        origin, number, tag = parsed.groups()
        if tag == "g":
            self.holds_get = True
        if origin is None:  # an event sent while Redis was down: nothing to replay
            return sdk_compat.GET_STREAM_KEY if tag == "g" else None
        seq = int(number)
        found = await self.events.entries(self.session_id, origin, seq)
        if tag == "g":
            stream: str = sdk_compat.GET_STREAM_KEY  # what follows is replayed even if the last one is gone
        elif found and found[0].seq == seq:
            stream = found[0].stream_id
        else:
            return None  # a request's last event is gone (expired, never written): nothing to follow
        for entry in found or ():
            if entry.seq <= seq or entry.stream_id != stream or not entry.data:
                continue
            message = jsonrpc_message_adapter.validate_json(entry.data, by_name=False)
            await send_callback(EventMessage(message, f"{origin}.{entry.seq}:{tag}"))
            if tag == "r" and isinstance(message, _RESPONSES):
                return None
        if tag == "g" or stream in self._running:
            return stream
        return None
