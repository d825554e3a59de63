"""Several gateways on one database: the change feed (Redis pub/sub, PostgreSQL LISTEN/NOTIFY, polling).

Two gateways (two apps from `toolweave.server.factory`) share one PostgreSQL
schema. A is driven in-process through its REST API; B serves MCP under
uvicorn on loopback where a real MCP client must hear `list_changed`.

To show that a change arrived through the transport under test (not through
polling or a cache expiring), the event-driven cases poll only once an hour
and keep verified keys for an hour; the polling cases turn the transport off
or cut it. Every wait is a loop bounded in time that watches the state.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from support.api import GREETER, POSTGRES_ENV, POSTGRES_SKIP, drop_schema
from support.configs import python_backend
from support.processes import free_port, header_server
from support.results import names
from support.serving import serve_asgi
from toolweave import Gateway
from toolweave.config import parse_config
from toolweave.executor import Session
from toolweave.server.app import server_app
from toolweave.services import change_feed, federation_relay
from toolweave.services.change_feed import Change, ChangeFeed, announce, plan
from toolweave.services.errors import SyncError
from toolweave.services.runtime import ServerRuntime
from toolweave.store import Database, KeyRepository

API = "/api/v1"
REDIS_ENV = "TOOLWEAVE_TEST_REDIS_URL"
REDIS_SKIP = f"set {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0) to run the Redis cases"
HOUR = 3600
"""Poll interval and key-cache lifetime of the event-driven cases: nothing but the event can act."""
WAIT = 20.0
"""Upper bound of every wait; a passing test is done as soon as the state holds."""
SECRET = "sync-test-token-5d41402abc"


# -- fixtures and helpers ----------------------------------------------------------


@pytest.fixture
async def pg_url(api_env: None) -> AsyncIterator[str]:
    """A PostgreSQL URL with a fresh schema of this test's own, dropped afterwards."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(POSTGRES_SKIP)
    schema = f"tw_sync_{uuid.uuid4().hex[:16]}"
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}schema={schema}"
    finally:
        await drop_schema(url, schema)


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get(REDIS_ENV)
    if not url:
        pytest.skip(REDIS_SKIP)
    return url


@dataclass
class Node:
    """One gateway of the pair: its app, gateway and runtime."""

    app: Any
    gateway: Gateway

    @property
    def runtime(self) -> ServerRuntime:
        return self.app.state.runtime

    @property
    def feed(self) -> ChangeFeed:
        assert self.runtime.sync is not None, "this gateway has no change feed"
        return self.runtime.sync

    def client(self, key: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.ASGITransport(app=self.app, client=("127.0.0.1", 50000))
        return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers)


def make_node(
    url: str,
    *,
    redis: str = "",
    interval: float = HOUR,
    mode: str = "auto",
    require_auth: bool = False,
    backends: list[dict[str, Any]] | None = None,
) -> Node:
    raw = {
        "backends": backends or [python_backend()],
        "gateway": {"database": url, "redis_url": redis, "sync_interval": interval},
    }
    cfg = parse_config(raw)
    assert cfg is not None
    runtime = ServerRuntime(cfg, require_auth=require_auth, sync=mode)  # type: ignore[arg-type]
    return Node(server_app(runtime=runtime), runtime.gateway)


@contextlib.asynccontextmanager
async def started(node: Node) -> AsyncIterator[Node]:
    """The node's runtime started in-process (its REST API through httpx), stopped afterwards."""
    await node.runtime.start()
    try:
        yield node
    finally:
        await node.runtime.close()


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = WAIT) -> None:
    """Re-check state until it holds; fail naming `what` after `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():  # noqa: ASYNC110 - watches state that has no event to wait on
                await asyncio.sleep(0.05)
    except TimeoutError:
        pytest.fail(f"timed out waiting until {what}")


def listed(node: Node, tenant: str | None = None) -> list[str]:
    return names(node.gateway.list_tools(tenant))


async def connected(*nodes: Node) -> None:
    for node in nodes:
        await node.feed.wait_connected(WAIT)


# (B's transport) -> (redis url for both, sync mode, poll interval)
TRANSPORTS = {
    "redis": ("redis", "auto", HOUR),
    "listen_notify": ("", "auto", HOUR),
    "poll_only": ("", "poll", 0.1),
}


def transport_settings(name: str, redis: str | None) -> dict[str, Any]:
    redis_setting, mode, interval = TRANSPORTS[name]
    return {"redis": redis if redis_setting else "", "mode": mode, "interval": interval}


@pytest.fixture(params=list(TRANSPORTS))
def transport(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Settings of both gateways for one transport; the Redis case skips without TOOLWEAVE_TEST_REDIS_URL."""
    name = request.param
    redis = request.getfixturevalue("redis_url") if name == "redis" else None
    return {"name": name, **transport_settings(name, redis)}


def node_for(pg_url: str, transport: dict[str, Any], **extra: Any) -> Node:
    return make_node(
        pg_url, redis=transport["redis"], interval=transport["interval"], mode=transport["mode"], **extra
    )


# -- definitions ---------------------------------------------------------------------


async def test_a_router_created_on_a_is_listed_and_invoked_on_b(
    pg_url: str, transport: dict[str, Any]
) -> None:
    """Create, update, delete through A's REST API; B's MCP client hears list_changed each time."""
    a = node_for(pg_url, transport)
    b = node_for(pg_url, transport)
    expected = {"redis": "redis", "listen_notify": "postgres", "poll_only": "poll"}[transport["name"]]
    async with (
        started(a),
        serve_asgi(b.app) as base,
        Client(f"{base}/mcp", mode="auto") as mcp,
        mcp.listen(tools_list_changed=True) as events,
        a.client() as api,
    ):
        assert a.feed.transport_name == b.feed.transport_name == expected
        if transport["name"] != "poll_only":
            await connected(a, b)
        assert "greeter" not in names((await mcp.list_tools()).tools)

        created = await api.post(f"{API}/composite-tools", json={"definition": GREETER})
        assert created.status_code == 201, created.text
        async with asyncio.timeout(WAIT):
            await anext(aiter(events))  # list_changed reached B's MCP client
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert "greeter" in tools
        result = await mcp.call_tool("greeter", {"operation": "multiply", "a": 3, "b": 4})
        assert not result.is_error and result.structured_content == {"product": 12.0}
        async with httpx.AsyncClient() as http:  # B's own REST API serves it too
            invoked = await http.post(
                f"{base}{API}/composite-tools/invoke",
                json={"tool": "greeter", "params": {"operation": "greet", "name": "B"}},
            )
        assert invoked.json()["success"], invoked.text

        patched = await api.patch(
            f"{API}/composite-tools/greeter", json={"definition": {"description": "Greet (edited on A)."}}
        )
        assert patched.status_code == 200, patched.text

        async def description_changed() -> bool:
            tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
            return "edited on A" in (tools["greeter"].description or "")

        async with asyncio.timeout(WAIT):
            while not await description_changed():
                await anext(aiter(events))

        disabled = await api.patch(f"{API}/composite-tools/greeter", json={"status": "disabled"})
        assert disabled.status_code == 200, disabled.text
        async with asyncio.timeout(WAIT):
            while "greeter" in names((await mcp.list_tools()).tools):
                await anext(aiter(events))
        enabled = await api.patch(f"{API}/composite-tools/greeter", json={"status": "active"})
        assert enabled.status_code == 200, enabled.text
        async with asyncio.timeout(WAIT):
            while "greeter" not in names((await mcp.list_tools()).tools):
                await anext(aiter(events))

        assert (await api.delete(f"{API}/composite-tools/greeter")).status_code == 204
        async with asyncio.timeout(WAIT):
            while "greeter" in names((await mcp.list_tools()).tools):
                await anext(aiter(events))
        assert "greeter" not in b.gateway.catalog.entries
        async with httpx.AsyncClient() as http:
            gone = await http.post(
                f"{base}{API}/composite-tools/invoke", json={"tool": "greeter", "params": {}}
            )
        assert gone.status_code == 404
        if transport["name"] != "poll_only":
            assert b.feed.received_count >= 5 and b.feed.polls == 0  # events did it, not polling


async def test_a_tenant_tool_created_on_a_stays_the_tenants_on_b(pg_url: str) -> None:
    a = make_node(pg_url, require_auth=True)
    b = make_node(pg_url, require_auth=True)
    async with started(a), started(b):
        await connected(a, b)
        keys = KeyRepository(a.runtime.db)
        _i, alice = await keys.create("alice", ["tools:read", "tools:call", "tools:admin"])
        _i, bob = await keys.create("bob", ["tools:read", "tools:call"])
        async with a.client(alice) as api:
            assert (await api.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201

        await eventually(lambda: _true("greeter" in listed(b, "alice")), "B lists alice's tool")
        assert "greeter" not in listed(b, "bob") and "greeter" not in listed(b)
        async with b.client(alice) as as_alice, b.client(bob) as as_bob:
            mine = await as_alice.post(
                f"{API}/composite-tools/invoke",
                json={"tool": "greeter", "params": {"operation": "greet", "name": "x"}},
            )
            assert mine.json()["success"], mine.text
            theirs = await as_bob.post(
                f"{API}/composite-tools/invoke", json={"tool": "greeter", "params": {}}
            )
            assert theirs.status_code == 404


async def test_a_server_defined_on_a_is_served_by_b(pg_url: str, transport: dict[str, Any]) -> None:
    """A virtual server created, edited and deleted through A's REST API is served, changed and
    dropped by B (through the transport under test; polling only in the poll case)."""
    a = node_for(pg_url, transport)
    b = node_for(pg_url, transport)
    async with started(a), started(b), a.client() as api:
        if transport["name"] != "poll_only":
            await connected(a, b)

        def on_b() -> list[str] | None:
            server = b.gateway.servers.get("desk")
            return None if server is None else names(server.list_tools())

        desk = {"name": "desk", "tools": ["py__greet"]}
        assert (await api.post(f"{API}/servers", json={"definition": desk})).status_code == 201
        await eventually(lambda: _true(on_b() == ["py__greet"]), "B serves desk")
        edit = {"definition": {"tools": ["py__multiply"]}}
        assert (await api.patch(f"{API}/servers/desk", json=edit)).status_code == 200
        await eventually(lambda: _true(on_b() == ["py__multiply"]), "B serves desk's new selection")
        assert (await api.delete(f"{API}/servers/desk")).status_code == 204
        await eventually(lambda: _true(on_b() is None), "B drops desk")
        if transport["name"] != "poll_only":
            assert b.feed.received_count >= 3 and b.feed.polls == 0  # events did it, not polling


async def _true(value: bool) -> bool:
    return value


# -- keys ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["redis", "listen_notify"])
async def test_a_key_revoked_on_a_is_refused_by_b_without_waiting_for_its_cache(
    pg_url: str, name: str, request: pytest.FixtureRequest
) -> None:
    redis = request.getfixturevalue("redis_url") if name == "redis" else None
    settings = transport_settings(name, redis)
    a = node_for(pg_url, settings, require_auth=True)
    b = node_for(pg_url, settings, require_auth=True)
    async with started(a), started(b):
        await connected(a, b)
        b.runtime.key_cache._ttl = HOUR  # only the feed can make B look at the key again
        info, key = await KeyRepository(a.runtime.db).create("alice", ["tools:read"])
        async with b.client(key) as on_b, a.client(key) as on_a:
            assert (await on_b.get(f"{API}/composite-tools")).status_code == 200  # verified, now cached
            assert (await on_a.get(f"{API}/composite-tools")).status_code == 200

            revoked = await a.runtime.revoke_key(info.id)
            assert revoked.revoked
            assert (await on_a.get(f"{API}/composite-tools")).status_code == 401  # A: at once

            async def refused_on_b() -> bool:
                return (await on_b.get(f"{API}/composite-tools")).status_code == 401

            await eventually(refused_on_b, "B refuses the revoked key")
        assert b.feed.polls == 0


async def test_a_key_revoked_by_the_cli_is_found_by_polling(pg_url: str) -> None:
    """`toolweave keys revoke` writes the database only: B's poll finds it (the cache lasts an hour here)."""
    b = make_node(pg_url, require_auth=True, mode="poll", interval=0.1)
    async with started(b):
        b.runtime.key_cache._ttl = HOUR
        info, key = await KeyRepository(b.runtime.db).create("alice", ["tools:read"])
        async with b.client(key) as on_b:
            assert (await on_b.get(f"{API}/composite-tools")).status_code == 200
            db = Database.from_url(pg_url)  # another process's handle, as the CLI's
            await db.start()
            try:
                await KeyRepository(db).revoke(info.id)
            finally:
                await db.close()

            async def refused() -> bool:
                return (await on_b.get(f"{API}/composite-tools")).status_code == 401

            await eventually(refused, "B refuses the key revoked elsewhere")


@pytest.mark.parametrize("name", ["redis", "listen_notify"])
async def test_a_one_shot_process_announces_a_revocation_to_running_gateways(
    pg_url: str, name: str, request: pytest.FixtureRequest
) -> None:
    """What `toolweave keys revoke` can do: revoke in the database, then `announce` it."""
    redis = request.getfixturevalue("redis_url") if name == "redis" else None
    b = node_for(pg_url, transport_settings(name, redis), require_auth=True)
    async with started(b):
        await connected(b)
        b.runtime.key_cache._ttl = HOUR
        info, key = await KeyRepository(b.runtime.db).create("alice", ["tools:read"])
        async with b.client(key) as on_b:
            assert (await on_b.get(f"{API}/composite-tools")).status_code == 200
            db = Database.from_url(pg_url)  # the one-shot process's own handle
            await db.start()
            try:
                await KeyRepository(db).revoke(info.id)
                assert await announce(db, Change("key", id=info.id), redis_url=redis or "")
            finally:
                await db.close()

            async def refused() -> bool:
                return (await on_b.get(f"{API}/composite-tools")).status_code == 401

            await eventually(refused, "B refuses the key the one-shot process revoked")
        assert b.feed.polls == 0


async def test_announce_without_a_feed_or_broker_reports_false(tmp_path: Path, api_env: None) -> None:
    db = Database.from_url(f"sqlite:///{tmp_path / 'tw.db'}")
    assert not await announce(db, Change("key", id="k"))  # SQLite without Redis: nothing to tell
    dead = f"redis://127.0.0.1:{free_port()}/0"
    assert not await announce(db, Change("key", id="k"), redis_url=dead, timeout=2)


# -- connections ---------------------------------------------------------------------


@pytest.fixture
def header_url() -> Any:
    with header_server() as url:
        yield url


def fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


@pytest.mark.parametrize("name", ["redis", "listen_notify", "poll_only"])
async def test_a_connection_changed_on_a_closes_the_tenants_session_on_b(
    pg_url: str, header_url: str, name: str, request: pytest.FixtureRequest
) -> None:
    redis = request.getfixturevalue("redis_url") if name == "redis" else None
    settings = transport_settings(name, redis)
    backends = [{"name": "hdr", "url": header_url}, python_backend()]
    a = node_for(pg_url, settings, require_auth=True, backends=backends)
    b = node_for(pg_url, settings, require_auth=True, backends=backends)
    seen: list[bytes] = []
    async with started(a), started(b), _redis_spy(redis, b, seen):
        if name != "poll_only":
            await connected(a, b)
        _i, alice = await KeyRepository(a.runtime.db).create(
            "alice", ["tools:read", "tools:call", "tools:admin"]
        )
        alice_session = Session(tenant="alice", scopes=frozenset({"tools:call"}))
        async with a.client(alice) as api:
            put = await api.put(f"{API}/connections/hdr", json={"headers": {"X-Token": SECRET}})
            assert put.status_code == 200, put.text

            async def whoami() -> str | None:
                result = await b.gateway.executor(alice_session).call("hdr__whoami", {})
                assert not result.is_error, result
                return (result.structured_content or {}).get("token")

            async def uses(secret: str) -> bool:
                return await whoami() == fingerprint(secret)

            # B had no session for alice yet: the first call loads her connection (a put on A
            # also drops a cached "no connection" on B, which the second put below relies on)
            async def opened_with(secret: str) -> bool:
                # polling may deliver A's put after this call opened the session, and close it
                # once: it counts as opened when a call uses the secret and the session stays
                return await uses(secret) and ("alice", "hdr") in b.runtime.tenant_backends.opened()

            await eventually(lambda: opened_with(SECRET), "B calls with alice's connection")

            rotated = SECRET + "-rotated"
            put = await api.put(f"{API}/connections/hdr", json={"headers": {"X-Token": rotated}})
            assert put.status_code == 200
            await eventually(
                lambda: _true(("alice", "hdr") not in b.runtime.tenant_backends.opened()),
                "B closes alice's old session",
            )
            assert await uses(rotated)

            assert (await api.delete(f"{API}/connections/hdr")).status_code == 204
            await eventually(
                lambda: _true(("alice", "hdr") not in b.runtime.tenant_backends.opened()),
                "B closes alice's session after the delete",
            )
            assert await whoami() is None  # back on the shared session, without her headers
    for payload in seen:  # what crossed the broker: kinds and names, never a secret
        assert SECRET.encode() not in payload and b"X-Token" not in payload


@contextlib.asynccontextmanager
async def _redis_spy(url: str | None, node: Node, seen: list[bytes]) -> AsyncIterator[None]:
    """Record every message on the node's Redis channel (nothing without Redis)."""
    if url is None or node.runtime.sync is None or node.feed.transport_name != "redis":
        yield
        return
    import redis.asyncio as aioredis

    client = aioredis.from_url(url)
    pubsub = client.pubsub()
    await pubsub.subscribe(node.feed.transport.channel)  # type: ignore[union-attr]

    async def record() -> None:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
            if message is not None:
                seen.append(message["data"])

    task = asyncio.create_task(record())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await pubsub.aclose()
        await client.aclose()


# -- a broker that is down -------------------------------------------------------------


class CuttableProxy:
    """A TCP proxy on loopback in front of Redis whose connections can be cut (a broker outage)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.down = False
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.down:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(Exception):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self.writers -= {writer, up_writer}

    def cut(self) -> None:
        self.down = True
        for writer in list(self.writers):
            writer.transport.abort()

    def restore(self) -> None:
        self.down = False

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


async def test_a_change_while_redis_is_down_is_polled_and_events_resume_after_reconnecting(
    pg_url: str, redis_url: str
) -> None:
    target = httpx.URL(redis_url.replace("redis://", "http://", 1))
    proxy = CuttableProxy(target.host, target.port or 6379)
    await proxy.start()
    via_proxy = f"redis://127.0.0.1:{proxy.port}{target.path or '/0'}"
    a = make_node(pg_url, redis=via_proxy, interval=0.2)
    b = make_node(pg_url, redis=via_proxy, interval=0.2)
    try:
        async with started(a), started(b), a.client() as api:
            await connected(a, b)
            proxy.cut()
            await eventually(
                lambda: _true(not a.feed.connected and not b.feed.connected), "both notice the loss"
            )

            created = await api.post(f"{API}/composite-tools", json={"definition": GREETER})
            assert created.status_code == 201  # the gateway serves on while its broker is down
            await eventually(
                lambda: _true("greeter" in listed(b)), "B polls the tool created during the outage"
            )
            assert b.feed.received_count == 0

            proxy.restore()
            await connected(a, b)  # both listeners came back by themselves
            assert (await api.delete(f"{API}/composite-tools/greeter")).status_code == 204
            await eventually(
                lambda: _true(b.feed.received_count > 0 and "greeter" not in listed(b)),
                "B hears of the delete through Redis again",
            )
    finally:
        await proxy.close()


async def test_an_unreachable_redis_at_startup_does_not_stop_the_gateway(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nor hold its start: a broker that refuses the connection is not waited for (each listener's
    first-attempt bound set to an hour here, so a start waiting for a subscription would time out)."""
    monkeypatch.setattr(change_feed, "FIRST_CONNECT_SECONDS", HOUR)
    monkeypatch.setattr(federation_relay, "FIRST_ATTEMPT_SECONDS", HOUR)
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    a = make_node(pg_url, redis=dead, interval=0.1)
    b = make_node(pg_url, redis=dead, interval=0.1)
    async with contextlib.AsyncExitStack() as stack:
        async with asyncio.timeout(3 * WAIT):  # a hang guard: an hour's wait fails here
            await stack.enter_async_context(started(a))
            await stack.enter_async_context(started(b))
        api = await stack.enter_async_context(a.client())
        assert not a.feed.connected and not b.feed.connected
        assert (await api.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201
        await eventually(lambda: _true("greeter" in listed(b)), "B polls the new tool")


# -- configuration and units (no database server needed) -----------------------------


async def test_sqlite_has_no_feed_unless_redis_is_configured(tmp_path: Path, api_env: None) -> None:
    url = f"sqlite:///{tmp_path / 'tw.db'}"
    assert plan("", Database.from_url(url)) == "off"
    assert plan("redis://127.0.0.1:6379/0", Database.from_url(url)) == "redis"
    assert plan("redis://127.0.0.1:6379/0", Database.from_url("sqlite:///:memory:")) == "off"
    assert plan("", Database.from_url("postgresql://u@h/db")) == "postgres"
    assert plan("redis://x", Database.from_url("postgresql://u@h/db"), "poll") == "poll"
    node = make_node(url)
    async with started(node):
        assert node.runtime.sync is None


async def test_redis_configured_without_the_package_is_a_clear_startup_error(
    tmp_path: Path, api_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)  # import fails as if not installed
    node = make_node(f"sqlite:///{tmp_path / 'tw.db'}", redis="redis://127.0.0.1:6379/0")
    with pytest.raises(SyncError, match=r"pip install 'toolweave\[redis\]'"):
        await node.runtime.start()
    assert not node.runtime.started
    await node.runtime.close()


def test_redis_url_must_be_a_redis_url() -> None:
    assert parse_config({"gateway": {"redis_url": ""}}) is not None
    assert parse_config({"gateway": {"redis_url": "rediss://:pw@cache:6380/1"}}) is not None
    assert parse_config({"gateway": {"sync_interval": "500ms"}}).gateway.sync_interval == 0.5  # type: ignore[union-attr]
    from toolweave.problems import ConfigError

    with pytest.raises(ConfigError, match="redis_url"):
        parse_config({"gateway": {"redis_url": "http://cache:6379"}})


def test_changes_carry_names_only_and_foreign_messages_are_ignored() -> None:
    change = Change("connection", tenant="alice", backend="hdr", origin="x")
    assert Change.decode(change.encode()) == change
    assert Change.decode(b"not json") is None
    assert Change.decode(b'{"v": 1, "kind": "drop tables"}') is None
    assert Change.decode(b'{"v": 1, "kind": "key", "id": 5}') is None
    assert Change.decode(b"x" * 10_000) is None
