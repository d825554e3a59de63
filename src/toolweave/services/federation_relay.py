"""Federated tools across gateways: registrations seen everywhere, calls relayed to the client's gateway.

A client is connected to ONE gateway; with Redis configured (`gateway.redis_url`,
as for the change feed), every gateway sharing the database serves its tools:

- each gateway announces the namespaces its own clients serve (on every change,
  and every `ANNOUNCE_SECONDS`), on `toolweave:federation:<database>:registry`;
  the others add a relayed server for each to their catalog, and drop it when
  the announcement says so or stops coming (`EXPIRE_AFTER` intervals: a gateway
  that died);
- a call that reaches gateway B for a namespace whose client is on gateway A is
  published to A's own channel, run there on a local client, and the result
  published back to B's channel; B's timeout or cancellation reaches A, and
  from A the client.

Messages are small JSON objects; a malformed one is logged and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

import mcp_types as types
import orjson

from toolweave.backends.errors import PeerLost
from toolweave.backends.federated import FederatedBackend, Federation
from toolweave.backends.federated.manifest import read_manifest
from toolweave.common_types import str_at
from toolweave.results import error_result
from toolweave.services.change_feed import feed_identity, follow_channels, import_redis
from toolweave.store import Database
from toolweave.waiting import set_within, within

logger = logging.getLogger("toolweave.federation.relay")

FIRST_ATTEMPT_SECONDS = 5.0
"""How long `start()` waits for the listener's first subscription attempt: a broker that refuses the
connection ends the wait at once, one that does not answer at all ends it here."""
PUBLISH_SECONDS = 5.0
"""The longest a publish to Redis may take before it counts as Redis being down."""
ANNOUNCE_SECONDS = 2.0
EXPIRE_AFTER = 3
"""Announcements a gateway may miss before its clients are dropped here."""
RELAY_MARGIN = 2.0
"""How much longer than the call's own timeout a relayed call waits for the other gateway."""


class RemoteServer:
    """A client of `namespace` connected to another gateway, reached through Redis."""

    relayed = True

    def __init__(self, relay: FederationRelay, gateway: str, namespace: str, clients: int) -> None:
        self.relay = relay
        self.gateway = gateway
        self.namespace = namespace
        self.clients = clients
        self.label = f"{namespace} (via gateway {gateway[:8]}, {clients} client(s))"
        self.in_flight = 0
        self.seen = time.monotonic()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout: float, progress: Any
    ) -> dict[str, Any]:
        self.in_flight += 1
        try:
            return await self.relay.call_remote(self, name, arguments, timeout)
        except (PeerLost, TimeoutError, asyncio.CancelledError):
            raise
        except Exception as error:  # noqa: BLE001 - Redis is down: the client cannot be reached from here
            raise PeerLost(f"cannot reach its gateway through Redis: {error}") from None
        finally:
            self.in_flight -= 1


class FederationRelay:
    """One gateway's part of the relay (start after the gateway, close before it)."""

    def __init__(self, federation: Federation, db: Database, redis_url: str) -> None:
        self.federation = federation
        self.instance = uuid.uuid4().hex
        prefix = f"toolweave:federation:{feed_identity(db)}"
        self.registry_channel = f"{prefix}:registry"
        self._prefix = prefix
        self.own_channel = self._gateway_channel(self.instance)
        aioredis = import_redis()
        self._redis = aioredis.from_url(redis_url, socket_connect_timeout=5, socket_keepalive=True)
        self.remote: dict[tuple[str, str], RemoteServer] = {}
        """(gateway, namespace) → the relayed server this gateway calls."""
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        """Calls relayed TO this gateway, by id (a cancel message cancels one)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._announce_now = asyncio.Event()
        self._first_attempt = asyncio.Event()
        """Set once the listener has subscribed or failed to: `start()` waits for either, not for success."""
        self.relayed_calls = 0
        self._down_logged = False
        self._refused: set[tuple[str, str]] = set()

    def _gateway_channel(self, instance: str) -> str:
        return f"{self._prefix}:gw:{instance}"

    async def start(self) -> None:
        self.federation.local_listeners.append(self._announce_now.set)
        self._tasks = [
            asyncio.create_task(self._listen(), name="federation-relay-listen"),
            asyncio.create_task(self._announcer(), name="federation-relay-announce"),
        ]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_attempt.wait(), FIRST_ATTEMPT_SECONDS)
        try:
            await self._publish(self.registry_channel, {"t": "hello", "from": self.instance})
        except Exception as error:  # noqa: BLE001 - Redis down at startup: serving goes on, the relay retries
            self._down(error)

    async def close(self) -> None:
        if self._announce_now.set in self.federation.local_listeners:
            self.federation.local_listeners.remove(self._announce_now.set)
        with contextlib.suppress(Exception):
            await self._publish(
                self.registry_channel, {"t": "announce", "from": self.instance, "namespaces": []}
            )
        for task in [*self._tasks, *self._running.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._running.values(), return_exceptions=True)
        for server in list(self.remote.values()):
            self._drop(server, "this gateway is shutting down")
        with contextlib.suppress(Exception):
            await self._redis.aclose()

    # -- announcements ------------------------------------------------------------------

    def _local_namespaces(self) -> list[dict[str, Any]]:
        announced = []
        for namespace, backend in self.federation.namespaces.items():
            local = self.federation.local_servers(namespace)
            if not local:
                continue
            announced.append(
                {
                    "namespace": namespace,
                    "tenant": backend.tenant,
                    "tools": [
                        t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in backend.tools
                    ],
                    "clients": len(local),
                }
            )
        return announced

    async def _announcer(self) -> None:
        while True:
            await set_within(self._announce_now, ANNOUNCE_SECONDS)
            self._announce_now.clear()
            try:
                await self._publish(
                    self.registry_channel,
                    {"t": "announce", "from": self.instance, "namespaces": self._local_namespaces()},
                )
            except Exception as error:  # noqa: BLE001 - Redis down: the next round tries again
                self._down(error)
            self._expire()

    def _announced(self, gateway: str, namespaces: Any) -> None:
        current: set[str] = set()
        for item in namespaces if isinstance(namespaces, list) else []:
            if isinstance(item, dict) and isinstance(item.get("namespace"), str):
                current.add(item["namespace"])
                self._remote_namespace(gateway, item)
        for (other, namespace), server in list(self.remote.items()):
            if other == gateway and namespace not in current:
                self._drop(server, f"its clients on gateway {gateway[:8]} left")

    def _remote_namespace(self, gateway: str, item: dict[str, Any]) -> None:
        namespace = item["namespace"]
        announced = item.get("clients")
        clients = announced if isinstance(announced, int) else 1
        server = self.remote.get((gateway, namespace))
        if server is not None:
            server.seen = time.monotonic()
            server.clients = clients
            return
        manifest, problems = read_manifest(namespace, item.get("tools"), self.federation.settings.max_tools)
        tenant = str_at(item, "tenant", None)
        if manifest is not None:
            problems = self.federation.check(manifest, tenant)
        if manifest is None or problems:
            if (gateway, namespace) not in self._refused:  # announced every round: said once
                self._refused.add((gateway, namespace))
                logger.warning(
                    "federation relay: namespace %s of gateway %s not served here: %s",
                    namespace,
                    gateway[:8],
                    "; ".join(map(str, problems)),
                )
            return
        self._refused.discard((gateway, namespace))
        server = RemoteServer(self, gateway, namespace, clients)
        self.remote[(gateway, namespace)] = server
        self.federation.attach(server, manifest, tenant)

    def _expire(self) -> None:
        limit = ANNOUNCE_SECONDS * EXPIRE_AFTER
        now = time.monotonic()
        for server in list(self.remote.values()):
            if now - server.seen > limit:
                self._drop(server, f"gateway {server.gateway[:8]} stopped announcing for {limit:g}s")

    def _drop(self, server: RemoteServer, reason: str) -> None:
        self.remote.pop((server.gateway, server.namespace), None)
        self.federation.detach(server)
        for call_id, future in list(self._waiting.items()):
            if call_id.startswith(f"{server.gateway}:{server.namespace}:") and not future.done():
                future.set_exception(PeerLost(reason))

    # -- calls --------------------------------------------------------------------------

    async def call_remote(
        self, server: RemoteServer, name: str, arguments: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        """Publish a call to the gateway whose client runs it; its result (or PeerLost / TimeoutError)."""
        call_id = f"{server.gateway}:{server.namespace}:{uuid.uuid4().hex}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = future
        message = {
            "t": "call",
            "from": self.instance,
            "id": call_id,
            "ns": server.namespace,
            "tool": name,
            "args": arguments,
            "timeout": timeout,
        }
        try:
            await self._publish(self._gateway_channel(server.gateway), message)
            self.relayed_calls += 1
            async with asyncio.timeout(timeout + RELAY_MARGIN):
                return await future
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(Exception):
                await self._publish(self._gateway_channel(server.gateway), {"t": "cancel", "id": call_id})
            raise
        finally:
            self._waiting.pop(call_id, None)

    def _call_arrived(self, message: dict[str, Any]) -> None:
        call_id, reply = message.get("id"), message.get("from")
        if not isinstance(call_id, str) or not isinstance(reply, str):
            return
        task = asyncio.create_task(self._run_call(call_id, reply, message))
        self._running[call_id] = task
        task.add_done_callback(lambda _t: self._running.pop(call_id, None))

    async def _run_call(self, call_id: str, reply: str, message: dict[str, Any]) -> None:
        namespace, tool = message.get("ns"), message.get("tool")
        backend = self.federation.namespaces.get(namespace) if isinstance(namespace, str) else None
        timeout = message.get("timeout")
        arguments = message.get("args")
        if (
            not isinstance(backend, FederatedBackend)
            or not isinstance(namespace, str)
            or not isinstance(tool, str)
            or not isinstance(arguments, dict)
        ):
            result = error_result(
                f"no client of federated namespace {namespace!r} is connected to the gateway it was sent to"
            )
        else:
            result = await backend.call_on(
                self.federation.local_servers(namespace),
                tool,
                arguments,
                timeout=float(timeout) if isinstance(timeout, int | float) else None,
            )
        await self._publish(
            self._gateway_channel(reply),
            {"t": "result", "id": call_id, "result": _dump(result)},
        )

    def _result_arrived(self, message: dict[str, Any]) -> None:
        future = self._waiting.get(str_at(message, "id", ""))
        result = message.get("result")
        if future is not None and not future.done() and isinstance(result, dict):
            future.set_result(result)

    # -- the wire -----------------------------------------------------------------------

    def _down(self, error: BaseException) -> None:
        """Log a Redis outage once (until it is back); calls to other gateways' clients fail meanwhile."""
        self._first_attempt.set()
        if not self._down_logged:
            logger.warning("federation relay: Redis unavailable (%s); retrying", error)
            self._down_logged = True

    async def _publish(self, channel: str, message: dict[str, Any]) -> None:
        """Bounded: a broker that stops answering must not hold a call, an announcement or shutdown."""
        await within(PUBLISH_SECONDS, self._redis.publish(channel, orjson.dumps(message)))

    async def _listen(self) -> None:
        channels = [self.registry_channel, self.own_channel]
        await follow_channels(self._redis, channels, self._received, self._down, self._subscribed_now)

    def _subscribed_now(self) -> None:
        self._first_attempt.set()
        if self._down_logged:
            logger.info("federation relay: Redis is back")
            self._down_logged = False
            self._announce_now.set()

    def _received(self, raw: bytes | str) -> None:
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            logger.debug("federation relay: dropped a message that is not JSON")
            return
        if not isinstance(message, dict) or message.get("from") == self.instance:
            return
        kind = message.get("t")
        if kind == "announce" and isinstance(message.get("from"), str):
            self._announced(message["from"], message.get("namespaces"))
        elif kind == "hello":
            self._announce_now.set()
        elif kind == "call":
            self._call_arrived(message)
        elif kind == "result":
            self._result_arrived(message)
        elif kind == "cancel":
            task = self._running.get(str_at(message, "id", ""))
            if task is not None:
                task.cancel()


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")
