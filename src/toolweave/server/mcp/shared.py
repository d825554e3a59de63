"""Handshake-era MCP sessions (2025-11-25 and older) shared by every gateway on one Redis.

A 2025-11-25 client opens a session with `initialize` on one replica and sends every later request
with its `Mcp-Session-Id` to whichever replica the balancer picks. Without this, the SDK's session
table is per process and the other replicas answer `404 Session not found`.

The design keeps the hot path local:
- `initialize` answered here writes the session's record to Redis (`<ns>:s:<id>`: the endpoint,
  the API key that opened it, the negotiated protocol version, the client's `initialize` params)
  before its answer leaves, so the client's next request finds it anywhere.
- A replica that gets a request for a session it does not serve reads the record once, checks the
  API key, and *adopts* the session: the SDK serves it from then on as if `initialize` had been
  answered here (`sdk_compat.adopt_session`). Every later request of that session on this replica
  is served from memory, exactly as a local session is; Redis is touched only to keep the record's
  expiry (at most once per `TOUCH_SECONDS` per session and replica, in the background).
- What the client changes on a session (its log level, resource subscriptions, the found tools it
  lists) is written to the record and announced on the deployment's channel (`<ns>:bus`); the
  replicas that hold a copy read it again. `DELETE` ends the copies everywhere.
- A server-to-client request (elicitation, sampling, roots) goes out on the stream of the call that
  caused it, on the replica running the call; the client POSTs its answer to whichever replica the
  balancer picks. That POST is served locally and also published on the channel, where the replica
  waiting for it takes it into its session (an answer nobody waits for is dropped by the SDK).
- Notifications that are not tied to a request (`list_changed`, resource updates, log messages)
  are sent by every replica to its own copy of the session; only the copy whose replica holds the
  client's GET stream has somewhere to send them, so the client hears each once.

A replica's death loses the calls it was running (their streams were on it) and nothing else.
Redis down: sessions already held keep working where they are held; a session cannot be opened or
adopted elsewhere (404, the client initializes again) until Redis is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from toolweave.server.mcp.events import RedisEvents, SessionEvents, SharedEvents
from toolweave.wire import sdk_compat

if TYPE_CHECKING:
    from toolweave.executor import Session

logger = logging.getLogger("toolweave.server")

TOUCH_SECONDS = 15.0
"""A session's record expiry is renewed at most this often per replica (in the background)."""
REDIS_SECONDS = 2.0
"""A Redis command that takes longer is given up (the broker is down or stuck)."""
DOWN_SECONDS = 5.0
"""After a failed Redis command, the session store is not asked for this long (a stuck broker would
otherwise hold every `initialize` and adoption for `REDIS_SECONDS`); the listener's reconnection or
the next command after it ends the pause."""
MAX_RECORD_BYTES = 256 * 1024
"""A session record (client params, state) larger than this is not shared (the session stays local)."""
MAX_REPLY_BYTES = 4 * 1024 * 1024
"""A client's answer to a server request larger than this is not relayed."""
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"

Principal = tuple[str, str]
"""(tenant or "", key label) of the caller that opened a session."""


def _redis_module() -> Any:
    from toolweave.services.change_feed import import_redis

    return import_redis()


class SessionSharing:
    """One gateway's part in the shared sessions: the records, the channel, the endpoints it serves."""

    broker = "Redis"
    """Where the records and the channel are (named in the outage warning)."""

    def __init__(self, redis_url: str, namespace: str, *, idle_seconds: float) -> None:
        self.instance = uuid.uuid4().hex
        self.namespace = namespace
        self.channel = f"{namespace}:bus"
        self.idle = max(1, int(idle_seconds))
        self._url = redis_url
        self._redis: Any = None
        self._listener: asyncio.Task[None] | None = None
        self._endpoints: dict[str, SharedEndpoint] = {}
        self._touched: dict[str, float] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self.adopted_listeners: list[Callable[[str, Principal], None]] = []
        """Told of each session adopted here (the session quota counts and revokes it like its own)."""
        self._down_logged = False
        self._down_until = 0.0
        self.events: SharedEvents | None = RedisEvents(self)
        """SSE events of the sessions, so a stream resumes on any replica (`events.py`; in PostgreSQL
        without Redis: `events_db.py`); None: streams are not resumable."""

    @property
    def available(self) -> bool:
        """False for `DOWN_SECONDS` after Redis failed: the store answers "unknown" at once meanwhile."""
        return time.monotonic() >= self._down_until

    # -- life ------------------------------------------------------------------------------

    @property
    def redis(self) -> Any:
        if self._redis is None:
            self._redis = _redis_module().from_url(self._url, socket_connect_timeout=2, socket_keepalive=True)
        return self._redis

    def register(self, endpoint: SharedEndpoint) -> None:
        self._endpoints[endpoint.path] = endpoint

    def unregister(self, endpoint: SharedEndpoint) -> None:
        if self._endpoints.get(endpoint.path) is endpoint:
            del self._endpoints[endpoint.path]

    async def start(self) -> None:
        """Listen on the deployment's channel (for as long as the gateway serves)."""
        if self._listener is None:
            self._listener = asyncio.create_task(self._listen(), name="toolweave-mcp-sessions")

    async def close(self) -> None:
        tasks = [task for task in (self._listener, *self._background) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._listener = None
        if self.events is not None:
            await self.events.close()
        if self._redis is not None:
            with contextlib.suppress(Exception):
                await self._redis.aclose()
            self._redis = None

    # -- records -----------------------------------------------------------------------------

    def key(self, session_id: str) -> str:
        return f"{self.namespace}:s:{session_id}"

    async def save(self, session_id: str, fields: Mapping[str, bytes | str]) -> bool:
        """Write (part of) a session's record and renew its expiry; False when Redis failed."""
        if not self.available:
            return False
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                async with self.redis.pipeline(transaction=True) as pipe:
                    pipe.hset(self.key(session_id), mapping=dict(fields))
                    pipe.expire(self.key(session_id), self.idle)
                    await pipe.execute()
        except Exception as error:  # noqa: BLE001 - Redis down: the session stays this replica's
            self._down(error)
            return False
        self._touched[session_id] = time.monotonic()
        self._down_logged = False
        return True

    async def load(self, session_id: str) -> dict[str, bytes] | None:
        if not self.available:
            return None
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                record = await self.redis.hgetall(self.key(session_id))
        except Exception as error:  # noqa: BLE001
            self._down(error)
            return None
        if not record:
            return None
        return {(k.decode() if isinstance(k, bytes) else k): v for k, v in record.items()}

    async def forget(self, session_id: str) -> None:
        """The session ended (DELETE, a revoked key): no replica serves it any more."""
        self._touched.pop(session_id, None)
        if not self.available:
            return
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                await self.redis.delete(self.key(session_id))
        except Exception as error:  # noqa: BLE001
            self._down(error)
        if self.events is not None:
            await self.events.forget(session_id)
        await self.publish({"t": "end", "sid": session_id})

    def touch(self, session_id: str) -> None:
        """A request of the session was served here: renew its record's expiry now and then."""
        now = time.monotonic()
        last = self._touched.get(session_id)
        if last is not None and now - last < TOUCH_SECONDS:
            return
        self._touched[session_id] = now
        if len(self._touched) > 4 * len(self._endpoints or (0,)) * 10_000:
            self._touched.clear()  # bounded: forgetting only costs an early renewal
        self._spawn(self._expire(session_id))

    async def _expire(self, session_id: str) -> None:
        if not self.available:
            return
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                await self.redis.expire(self.key(session_id), self.idle)
        except Exception as error:  # noqa: BLE001
            self._down(error)

    # -- cluster-wide counts (the session quota) ----------------------------------------------------

    def _tenant_key(self, tenant: str) -> str:
        return f"{self.namespace}:t:{tenant}"

    async def counted(self, session_id: str, principal: Principal) -> None:
        """A session `principal` opened here, counted against its limits on every replica."""
        tenant, label = principal
        if not self.available:
            return
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                async with self.redis.pipeline(transaction=False) as pipe:
                    pipe.sadd(self._tenant_key(tenant), f"{label}\n{session_id}")
                    pipe.expire(self._tenant_key(tenant), 2 * self.idle)
                    await pipe.execute()
        except Exception as error:  # noqa: BLE001
            self._down(error)

    async def held(self, tenant: str) -> dict[str, list[str]] | None:
        """Key label → the live sessions of a tenant across replicas (ended ones are forgotten now);
        None when Redis cannot say. Bounded by the tenant's session limit."""
        key = self._tenant_key(tenant)
        if not self.available:
            return None
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                members = [m.decode() for m in await self.redis.smembers(key)]
                async with self.redis.pipeline(transaction=False) as pipe:
                    for member in members:
                        pipe.exists(self.key(member.rpartition("\n")[2]))
                    alive = await pipe.execute()
                dead = [member for member, live in zip(members, alive, strict=True) if not live]
                if dead:
                    await self.redis.srem(key, *dead)
        except Exception as error:  # noqa: BLE001
            self._down(error)
            return None
        keys: dict[str, list[str]] = {}
        for member, live in zip(members, alive, strict=True):
            if live:
                label, _, session_id = member.rpartition("\n")
                keys.setdefault(label, []).append(session_id)
        return keys

    # -- the channel ---------------------------------------------------------------------------

    async def publish(self, message: dict[str, Any]) -> None:
        message["from"] = self.instance
        if not self.available:
            return
        try:
            async with asyncio.timeout(REDIS_SECONDS):
                await self.redis.publish(self.channel, orjson.dumps(message))
        except Exception as error:  # noqa: BLE001
            self._down(error)

    def publish_soon(self, message: dict[str, Any]) -> None:
        self._spawn(self.publish(message))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _listen(self) -> None:
        """Take the others' messages for sessions held here; reconnect when Redis comes back."""
        while True:
            pubsub = None
            try:
                pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
                await pubsub.subscribe(self.channel)
                self._down_logged = False
                self._down_until = 0.0
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        await self._heard(message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - Redis down: retried
                self._down(error)
            finally:
                if pubsub is not None:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()
            await asyncio.sleep(1.0)

    async def _heard(self, data: bytes) -> None:
        if len(data) > MAX_REPLY_BYTES + 4096:
            return
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(message, dict) or message.get("from") == self.instance:
            return
        session_id = message.get("sid")
        if not isinstance(session_id, str):
            return
        for endpoint in list(self._endpoints.values()):
            if endpoint.holds(session_id):
                try:
                    await endpoint.heard(session_id, message)
                except Exception:
                    logger.exception("shared session %s: message %r failed", session_id, message.get("t"))

    def _down(self, error: BaseException) -> None:
        self._down_until = time.monotonic() + DOWN_SECONDS
        if not self._down_logged:
            self._down_logged = True
            logger.warning(
                "%s unreachable for shared MCP sessions (%s): sessions stay on the replica that "
                "holds them until it is back",
                self.broker,
                str(error) or type(error).__name__,
            )


class SharingFront(Protocol):
    """What shared sessions use of an MCP front (`front.MCPFront`, which is handed this endpoint as
    its `sharing`)."""

    sharing: Any

    def session_of_scope(self, scope: Any) -> Session: ...

    def connection_of_session(self, session_id: str) -> Any: ...

    async def restore(self, connection: Any, tenant: str | None, state: dict[str, Any]) -> None: ...


class SharedEndpoint:
    """ASGI wrapper of one MCP endpoint (`/mcp`, a virtual server's): adopts sessions other replicas
    opened, relays clients' answers to server requests, and ends copies of deleted sessions."""

    def __init__(
        self, app: Any, *, path: str, manager: Any, front: SharingFront, sharing: SessionSharing
    ) -> None:
        self.app = app
        self.path = path
        self.manager = manager
        self.front = front
        self.sharing = sharing
        self._adopting: dict[str, asyncio.Future[bool]] = {}
        self._versions: dict[str, str] = {}
        """Session → its protocol version, for the answers relayed into it."""
        self._owners: dict[str, Principal] = {}
        """Sessions adopted here → the key that opened them."""
        self._events: dict[str, SessionEvents] = {}
        """Session → the event store of its transport here."""
        front.sharing = self
        sharing.register(self)
        if sharing.events is not None:
            sdk_compat.give_event_stores(
                manager, lambda session_id: self._event_store(session_id, holds_get=True)
            )

    def _event_store(self, session_id: str, *, holds_get: bool) -> SessionEvents | None:
        """A session opened here keeps its GET stream's events until its client's GET goes elsewhere."""
        if self.sharing.events is None:
            return None
        store = self.sharing.events.for_session(session_id, holds_get=holds_get)
        self._events[session_id] = store
        return store

    def holds(self, session_id: str) -> bool:
        return session_id in sdk_compat.open_sessions(self.manager)

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session_id, version = _session_headers(scope)
        if session_id is None or (version is not None and version >= "2026"):
            await self.app(scope, receive, send)
            return
        if not self.holds(session_id) and not await self._adopt(session_id, scope):
            await self.app(scope, receive, send)  # the SDK's own 404
            return
        self.sharing.touch(session_id)
        method = scope["method"]
        if method == "POST":
            receive = await self._relay_answers(session_id, receive)
        elif method == "DELETE":
            send = self._on_delete(session_id, send)
        elif method == "GET":
            self._take_get_stream(session_id)
        await self.app(scope, receive, send)

    def _take_get_stream(self, session_id: str) -> None:
        """The client's GET stream is here now: this replica keeps its events, the others stop."""
        store = self._events.get(session_id)
        if store is not None and not store.holds_get:
            store.holds_get = True
        self.sharing.publish_soon({"t": "get", "sid": session_id})

    # -- adoption ----------------------------------------------------------------------------

    async def _adopt(self, session_id: str, scope: Mapping[str, Any]) -> bool:
        """Serve a session another replica opened (once, however many requests ask at once)."""
        pending = self._adopting.get(session_id)
        if pending is not None:  # another request adopts it now: this one must be of the same key
            return await asyncio.shield(pending) and self._owners.get(session_id) == principal_of(
                scope, self.front
            )
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._adopting[session_id] = future
        adopted = False
        try:
            adopted = await self._take(session_id, scope)
        finally:
            future.set_result(adopted)
            del self._adopting[session_id]
        return adopted

    async def _take(self, session_id: str, scope: Mapping[str, Any]) -> bool:
        record = await self.sharing.load(session_id)
        if record is None or record.get("path", b"").decode() != self.path:
            return False
        if "version" not in record or "client" not in record:
            return False  # only state was written (the record had expired meanwhile): not adoptable
        principal = (record.get("tenant", b"").decode(), record.get("label", b"").decode())
        if principal != principal_of(scope, self.front):
            return False  # another key's session: answered as an unknown one
        version = record["version"].decode()
        client = orjson.loads(record["client"])
        state = orjson.loads(record["state"]) if record.get("state") else {}
        connections: list[Any] = []

        def prepare(connection: Any) -> None:
            sdk_compat.born_ready(connection, version, client)
            sdk_compat.distinct_request_ids(connection)
            connections.append(connection)

        self._prune()
        await sdk_compat.adopt_session(
            self.manager, session_id, prepare, event_store=self._event_store(session_id, holds_get=False)
        )
        self._versions[session_id] = version
        self._owners[session_id] = principal
        if connections:
            await self.front.restore(connections[0], principal[0] or None, state)
        for listener in self.sharing.adopted_listeners:
            listener(session_id, principal)
        logger.debug("adopted MCP session %s on %s", session_id, self.path)
        return True

    # -- recording ------------------------------------------------------------------------------

    async def opened(self, session_id: str, principal: Principal, version: str, client: Any) -> None:
        """`initialize` was answered here: the record every replica can adopt the session from."""
        encoded = orjson.dumps(client)
        if len(encoded) > MAX_RECORD_BYTES:
            return
        self._prune()
        self._versions[session_id] = version
        await self.sharing.save(
            session_id,
            {
                "path": self.path,
                "tenant": principal[0],
                "label": principal[1],
                "version": version,
                "client": encoded,
                "state": b"{}",
            },
        )

    def changed(self, session_id: str, state: dict[str, Any]) -> None:
        """The client changed what its session holds (log level, subscriptions, found tools): write it
        and tell the replicas that hold a copy (in the background: the request is not held up)."""
        encoded = orjson.dumps(state)
        if len(encoded) > MAX_RECORD_BYTES:
            return

        async def save() -> None:
            if await self.sharing.save(session_id, {"state": encoded}):
                await self.sharing.publish({"t": "state", "sid": session_id})

        self.sharing._spawn(save())

    # -- messages from the other replicas ----------------------------------------------------------

    async def heard(self, session_id: str, message: Mapping[str, Any]) -> None:
        kind = message.get("t")
        if kind == "end":
            await sdk_compat.end_session(self.manager, session_id)
        elif kind == "get":
            store = self._events.get(session_id)
            if store is not None:
                store.holds_get = False
        elif kind == "state":
            record = await self.sharing.load(session_id)
            connection = self.front.connection_of_session(session_id)
            if record is not None and connection is not None:
                tenant = record.get("tenant", b"").decode() or None
                state = orjson.loads(record["state"]) if record.get("state") else {}
                await self.front.restore(connection, tenant, state)
        elif kind == "reply" and isinstance(message.get("body"), str):
            await self._deliver(session_id, message["body"].encode())

    async def _deliver(self, session_id: str, body: bytes) -> None:
        """A client's answer POSTed to another replica, into this replica's copy of the session (the
        SDK takes it if a request of ours waits for it, else drops it)."""
        transport = sdk_compat.open_sessions(self.manager).get(session_id)
        if transport is None:
            return
        version = self._versions.get(session_id, "2025-11-25")
        scope = {
            "type": "http",
            "method": "POST",
            "path": self.path,
            "raw_path": self.path.encode(),
            "query_string": b"",
            "headers": [
                (b"content-type", b"application/json"),
                (b"accept", b"application/json, text/event-stream"),
                (SESSION_HEADER, session_id.encode()),
                (VERSION_HEADER, version.encode()),
                (b"content-length", b"%d" % len(body)),
            ],
            "server": ("127.0.0.1", 0),
            "client": ("127.0.0.1", 0),
            "scheme": "http",
        }
        sent = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> Any:
            if sent:
                return sent.pop()
            await asyncio.Event().wait()  # never: the request is complete

        async def discard(_message: Any) -> None:
            return None

        await transport.handle_request(scope, receive, discard)

    async def _relay_answers(self, session_id: str, receive: Any) -> Any:
        """A POST that answers a server request (no `method`) is also offered to the other replicas:
        the request may have gone out from one of them. Anything else passes untouched."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return _replay(b"".join(parts), False, receive, message)
            chunk = message.get("body", b"")
            parts.append(chunk)
            size += len(chunk)
            if not message.get("more_body", False) or size > MAX_REPLY_BYTES:
                body = b"".join(parts)
                more = message.get("more_body", False)
                if not more and b'"method"' not in body and (b'"result"' in body or b'"error"' in body):
                    self.sharing.publish_soon(
                        {"t": "reply", "sid": session_id, "body": body.decode("utf-8", "replace")}
                    )
                return _replay(body, more, receive)

    def _on_delete(self, session_id: str, send: Any) -> Any:
        async def watched(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                self._versions.pop(session_id, None)
                self.sharing._spawn(self.sharing.forget(session_id))
            await send(message)

        return watched

    def _prune(self) -> None:
        """Forget what is kept about sessions no longer served here (now and then, bounded)."""
        if len(self._versions) < 1024 or len(self._versions) < 2 * len(
            sdk_compat.open_sessions(self.manager)
        ):
            return
        held = sdk_compat.open_sessions(self.manager)
        for table in (self._versions, self._owners, self._events):
            for session_id in [sid for sid in table if sid not in held]:
                del table[session_id]

    def close(self) -> None:
        self.sharing.unregister(self)


def principal_of(scope: Mapping[str, Any], front: SharingFront) -> Principal:
    session = front.session_of_scope(scope)
    return (session.tenant or "", session.label)


def _session_headers(scope: Mapping[str, Any]) -> tuple[str | None, str | None]:
    session_id = version = None
    for name, value in scope.get("headers") or ():
        if name == SESSION_HEADER:
            session_id = value.decode("latin-1")
        elif name == VERSION_HEADER:
            version = value.decode("latin-1")
    return session_id, version


def _replay(body: bytes, more: bool, receive: Any, after: Any = None) -> Any:
    """A `receive` that hands out the already-read body first (then `after`), then the real one."""
    pending: list[Any] = [{"type": "http.request", "body": body, "more_body": more}]
    if after is not None:
        pending.insert(0, after)

    async def replayed() -> Any:
        if pending:
            return pending.pop()
        return await receive()

    return replayed
