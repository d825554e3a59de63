"""Handshake-era sessions shared over Redis (`server/mcp/shared.py`), two gateways in one process: a
session opened on one is adopted by the other with what its client set there (the found tools of search
mode, its log level), changes made on either reach the other's copy, and DELETE ends both.
Across real replicas behind HAProxy: tests/test_replicas.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from mcp_types import JSONRPCNotification, JSONRPCResponse
from sqlalchemy import text

from support.api import AppFactory, database_url, drop_schema
from support.configs import python_backend
from support.fixtures import OpenGateway
from support.processes import free_port
from support.serving import serve_asgi
from toolweave.server.app import create_app
from toolweave.server.mcp import events, shared
from toolweave.server.mcp.shared import SessionSharing
from toolweave.server.mcp.shared_db import DatabaseSessionSharing
from toolweave.store import Database
from toolweave.wire import sdk_compat

REDIS_ENV = "TOOLWEAVE_TEST_REDIS_URL"
needs_redis = pytest.mark.skipif(not os.environ.get(REDIS_ENV), reason=f"set {REDIS_ENV}")
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2025-11-25",
}
CONFIG = {
    "backends": [python_backend(hide=["drop_table"])],
    "gateway": {"tool_exposure": "search"},
    "search": {"list_found": 2},
}


@contextlib.asynccontextmanager
async def two_gateways(
    open_gateway: OpenGateway, tmp_path: Path | None = None
) -> AsyncIterator[list[tuple[str, Any]]]:
    """(base URL, app) of two gateways sharing sessions under a namespace of this test's own: over
    Redis, or (`tmp_path` given) through a fresh PostgreSQL schema both gateways use, without Redis."""
    namespace = f"toolweave:test-mcp:{uuid.uuid4().hex[:10]}"
    url, schema = database_url("postgres", tmp_path) if tmp_path is not None else (None, None)
    served = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(2):
                if url is None:
                    gateway = await open_gateway(CONFIG)
                    sharing = SessionSharing(os.environ[REDIS_ENV], namespace, idle_seconds=60)
                else:
                    gateway = await open_gateway(CONFIG)
                    db = await stack.enter_async_context(Database.from_url(url))  # each its own
                    sharing = DatabaseSessionSharing(db, idle_seconds=60)
                app = create_app(gateway, start_gateway=False, sharing=sharing)
                served.append((await stack.enter_async_context(serve_asgi(app)), app))
            yield served
    finally:
        if url is not None and schema is not None:
            await drop_schema(url.split("?")[0], schema)


async def rpc(base: str, method: str, params: Any = None, session: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method}
    if params is not None:
        body["params"] = params
    headers = {**HEADERS, **({"mcp-session-id": session} if session else {})}
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(f"{base}/mcp", content=orjson.dumps(body), headers=headers)


def result(answer: httpx.Response) -> Any:
    assert answer.status_code == 200, answer.text
    data = answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        data = next(line[6:] for line in data.splitlines() if line.startswith("data: ") and '"id"' in line)
    message = orjson.loads(data)
    assert "error" not in message, message
    return message["result"]


async def eventually(check: Callable[[], Awaitable[bool] | bool], what: str) -> None:
    async with asyncio.timeout(10):
        while True:
            outcome = check()
            if outcome if isinstance(outcome, bool) else await outcome:
                return
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("broker", ["redis", "postgres"])
async def test_a_session_and_what_its_client_set_move_between_gateways(
    open_gateway: OpenGateway, tmp_path: Path, broker: str
) -> None:
    """Over Redis, or through PostgreSQL when there is no Redis."""
    if broker == "redis" and not os.environ.get(REDIS_ENV):
        pytest.skip(f"set {REDIS_ENV}")
    on_postgres = tmp_path if broker == "postgres" else None
    async with two_gateways(open_gateway, on_postgres) as [(first, first_app), (second, second_app)]:
        opened = await rpc(
            first,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        found = result(
            await rpc(
                first,
                "tools/call",
                {"name": "find_tools", "arguments": {"query": "multiply two numbers"}},
                session,
            )
        )
        assert "py__multiply" in found["content"][0]["text"]

        async def listed_on_second() -> bool:  # the found tools are listed to the session there too
            tools = result(await rpc(second, "tools/list", session=session))["tools"]
            return "py__multiply" in {tool["name"] for tool in tools}

        await eventually(listed_on_second, "the second gateway to list the found tool")
        # each copy numbers its requests to the client apart (an answer relayed to both settles one)
        copies = [app.state.front.connection_of_session(session) for app in (first_app, second_app)]
        assert len({copy.outbound._allocate_id() for copy in copies}) == 2
        product = result(
            await rpc(second, "tools/call", {"name": "py__multiply", "arguments": {"a": 6, "b": 7}}, session)
        )
        assert product["structuredContent"] == {"product": 42.0}

        # a change on the second reaches the first's copy
        result(await rpc(second, "logging/setLevel", {"level": "error"}, session))
        front = first_app.state.front
        await eventually(
            lambda: front.relays.state_of(front.connection_of_session(session))["level"] == "error",
            "the first gateway's copy to take the level",
        )

        # an unknown session is the SDK's 404; so is a record holding only state (written after it
        # expired), not a 500
        assert (await rpc(second, "tools/list", session=uuid.uuid4().hex)).status_code == 404
        partial = uuid.uuid4().hex
        assert await first_app.state.front.sharing.sharing.save(
            partial, {"path": "/mcp", "tenant": "", "label": "mcp", "state": b"{}"}
        )
        assert (await rpc(second, "tools/list", session=partial)).status_code == 404

        async with httpx.AsyncClient(timeout=30) as http:
            ended = await http.delete(f"{second}/mcp", headers={**HEADERS, "mcp-session-id": session})
        assert ended.status_code == 200
        manager = first_app.state.front.server.session_manager
        await eventually(lambda: session not in sdk_compat.open_sessions(manager), "the first's copy to end")
        assert (await rpc(first, "tools/list", session=session)).status_code == 404
        assert second_app is not None


async def test_a_broker_that_failed_is_not_asked_again_for_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis unreachable: the first command fails (the session is not shared), and for DOWN_SECONDS
    the store answers "unknown" without asking, so a stuck broker cannot hold every initialize."""
    monkeypatch.setattr(shared, "DOWN_SECONDS", 0.3)
    sharing = SessionSharing(f"redis://127.0.0.1:{free_port()}/0", "toolweave:test-down", idle_seconds=60)
    asked = 0
    real = sharing.redis.hgetall

    async def counted(*args: Any) -> Any:
        nonlocal asked
        asked += 1
        return await real(*args)

    monkeypatch.setattr(sharing.redis, "hgetall", counted)
    try:
        assert await sharing.load("s1") is None and asked == 1 and not sharing.available
        assert await sharing.load("s1") is None and asked == 1  # not asked while it is down
        assert not await sharing.save("s1", {"path": "/mcp"})
        await asyncio.sleep(0.35)
        assert sharing.available
        assert await sharing.load("s1") is None and asked == 2  # asked again after the pause
    finally:
        await sharing.close()


async def sse_events(
    response: httpx.Response | AsyncIterator[str], until: Callable[[dict[str, str]], bool]
) -> list[dict[str, str]]:
    """The SSE events of `response` (each `{"id":…, "data":…}`, read from its lines or from an
    iterator of them, which a later call goes on with) up to the first `until` accepts."""
    lines = response.aiter_lines() if isinstance(response, httpx.Response) else response
    events: list[dict[str, str]] = []
    event: dict[str, str] = {}
    async with asyncio.timeout(10):
        async for line in lines:
            if line:
                name, _, value = line.partition(":")
                event[name] = value.removeprefix(" ")
                continue
            if event:
                events.append(event)
                if until(event):
                    return events
                event = {}
    return events


def initialize_params() -> dict[str, Any]:
    return {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


@needs_redis
def _broker(broker: str, tmp_path: Path) -> Path | None:
    """`two_gateways`' argument for a broker: None for Redis (skipped without it), a path for
    PostgreSQL without Redis."""
    if broker == "redis" and not os.environ.get(REDIS_ENV):
        pytest.skip(f"set {REDIS_ENV}")
    return tmp_path if broker == "postgres" else None


@pytest.mark.parametrize("broker", ["redis", "postgres"])
async def test_a_broken_stream_resumes_with_last_event_id_on_the_other_gateway(
    open_gateway: OpenGateway, tmp_path: Path, broker: str
) -> None:
    """A POST's stream breaks after its priming event; its client reconnects with Last-Event-ID to the
    other gateway, which replays the answer the first stored, from Redis or PostgreSQL (without an
    event store there is no priming event, and the other gateway has nothing to replay)."""
    async with two_gateways(open_gateway, _broker(broker, tmp_path)) as [
        (first, _first_app),
        (second, _second_app),
    ]:
        session = (await rpc(first, "initialize", initialize_params())).headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": session}
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "find_tools", "arguments": {"query": "multiply two numbers"}},
        }
        async with httpx.AsyncClient(timeout=30) as http:
            async with http.stream(
                "POST", f"{first}/mcp", content=orjson.dumps(call), headers=headers
            ) as post:
                primed = await sse_events(post, lambda event: True)  # then the connection breaks
            assert primed[0]["data"] == "" and primed[0]["id"].endswith(":r"), primed
            replayed: list[dict[str, str]] = []
            last = primed[0]["id"]
            for _attempt in range(20):  # as a client does: a replay that ends early is asked again
                resumed = {**headers, "last-event-id": last}
                async with http.stream("GET", f"{second}/mcp", headers=resumed) as get:
                    assert get.status_code == 200
                    replayed += await sse_events(get, lambda event: '"id":7' in event.get("data", ""))
                if replayed and '"id":7' in replayed[-1].get("data", ""):
                    break
                last = replayed[-1]["id"] if replayed else last
                await asyncio.sleep(0.1)  # the call still runs on the first gateway
        answer = orjson.loads(replayed[-1]["data"])
        assert answer["id"] == 7 and "py__multiply" in answer["result"]["content"][0]["text"], replayed
        assert all(event["id"].endswith(":r") for event in replayed)

        # an ID of another session or a made-up one replays nothing (the stream just ends)
        async with httpx.AsyncClient(timeout=30) as http:
            made_up = {**headers, "last-event-id": "1-0:r"}
            async with http.stream("GET", f"{second}/mcp", headers=made_up) as get:
                assert [
                    event for event in await sse_events(get, lambda event: False) if event.get("data")
                ] == []


@pytest.mark.parametrize("broker", ["redis", "postgres"])
async def test_the_get_stream_resumes_on_the_other_gateway_with_what_it_missed_once(
    open_gateway: OpenGateway, tmp_path: Path, broker: str
) -> None:
    """The client's GET stream is on the first gateway, breaks, and a `list_changed` is sent meanwhile;
    reconnecting to the second with Last-Event-ID replays it once (only the replica that served the
    last GET keeps the GET stream's events), and the stream then goes on live there."""
    async with two_gateways(open_gateway, _broker(broker, tmp_path)) as [
        (first, _first_app),
        (second, _second_app),
    ]:
        session = (await rpc(first, "initialize", initialize_params())).headers["mcp-session-id"]
        headers = {**HEADERS, "mcp-session-id": session}

        def changed(event: dict[str, str]) -> bool:
            return "notifications/tools/list_changed" in event.get("data", "")

        async def find(base: str, query: str) -> None:
            found = result(
                await rpc(base, "tools/call", {"name": "find_tools", "arguments": {"query": query}}, session)
            )
            assert not found["isError"], found

        async with httpx.AsyncClient(timeout=30) as http:
            async with http.stream("GET", f"{first}/mcp", headers=headers) as get:
                await find(first, "multiply two numbers")
                seen = await sse_events(get, changed)
            last = seen[-1]["id"]
            assert last.endswith(":g"), seen
            await find(first, "greet someone by name")  # missed: the stream is down
            resumed = {**headers, "last-event-id": last}
            async with http.stream("GET", f"{second}/mcp", headers=resumed) as get:
                lines = get.aiter_lines()
                missed = await sse_events(lines, changed)
                assert [event["id"] != last for event in missed if changed(event)] == [True]
                await find(second, "squared distance of a point")  # live on the second now
                live = await sse_events(lines, changed)
                assert live[-1]["id"].endswith(":g") and live[-1]["id"] != missed[-1]["id"]


def note(n: int, size: int = 10) -> JSONRPCNotification:
    return JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"n": n, "p": "x" * size}
    )


@contextlib.asynccontextmanager
async def _one_sharing(broker: str, tmp_path: Path) -> AsyncIterator[Any]:
    """One gateway's `SessionSharing` over Redis, or over PostgreSQL (a fresh schema) without it."""
    if broker == "redis":
        if not os.environ.get(REDIS_ENV):
            pytest.skip(f"set {REDIS_ENV}")
        sharing = SessionSharing(
            os.environ[REDIS_ENV], f"toolweave:test-ev:{uuid.uuid4().hex[:10]}", idle_seconds=60
        )
        try:
            yield sharing
        finally:
            await sharing.close()
        return
    url, schema = database_url("postgres", tmp_path)
    try:
        async with Database.from_url(url) as db:
            sharing = DatabaseSessionSharing(db, idle_seconds=60)
            try:
                yield sharing
            finally:
                await sharing.close()
    finally:
        await drop_schema(url.split("?")[0], schema or "")


@pytest.mark.parametrize("broker", ["redis", "postgres"])
async def test_a_sessions_events_are_bounded_in_count_and_bytes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, broker: str
) -> None:
    """The oldest events go first, past `MAX_EVENTS` or `MAX_BYTES` (in PostgreSQL: trimmed to 90% of
    both once past either); an oversized event is kept as a placeholder that resumes but replays
    nothing."""
    monkeypatch.setattr(events, "MAX_EVENTS", 5)
    monkeypatch.setattr(events, "MAX_BYTES", 1000)
    monkeypatch.setattr(events, "MAX_EVENT_BYTES", 300)
    async with _one_sharing(broker, tmp_path) as sharing:
        await _bounded(sharing, broker)


async def _bounded(sharing: Any, broker: str) -> None:
    store = sharing.events.for_session("s1", holds_get=True)
    tag = sharing.events.tag
    try:
        ids = []
        for n in range(8):  # one write each, as calls spread over time would be
            ids.append(await store.store_event(sdk_compat.GET_STREAM_KEY, note(n)))
            await sharing.events.settle()
        kept = await sharing.events.entries("s1", tag, 1)
        # Redis keeps the last 5; PostgreSQL trims to 4 (90%) when a 6th arrives, then holds 4-5
        expected = ids[3:] if broker == "redis" else ids[4:]
        assert kept is not None and [f"{tag}.{entry.seq}:g" for entry in kept] == expected
        for n in (8, 9, 10):
            await store.store_event(sdk_compat.GET_STREAM_KEY, note(n, size=200))
        await sharing.events.settle()
        kept = await sharing.events.entries("s1", tag, 1)
        assert kept is not None and sum(len(entry.data) + len(entry.stream_id) for entry in kept) <= 1000
        assert len(kept) < 5
        big = await store.store_event(sdk_compat.GET_STREAM_KEY, note(11, size=400))
        replayed: list[Any] = []

        async def collect(event: Any) -> None:
            replayed.append(event)

        assert await store.replay_events_after(ids[-1], collect) == sdk_compat.GET_STREAM_KEY
        assert [event.message.params["n"] for event in replayed] == [8, 9, 10]  # the placeholder is skipped
        replayed.clear()
        assert await store.replay_events_after(big, collect) == sdk_compat.GET_STREAM_KEY and replayed == []
        assert await store.replay_events_after("not-an-id", collect) is None
    finally:
        await sharing.events.forget("s1")
    assert await sharing.events.entries("s1", tag, 1) == []
    if broker == "redis":
        assert not await sharing.redis.keys(f"{sharing.namespace}:*")


@needs_redis
async def test_events_are_written_behind_in_one_batch_and_replayed_by_another_replica(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`store_event` answers an ID without waiting for Redis; the buffer is written once per tick in one
    command for every session; another replica replays them (waiting a tick when the last one is not
    written yet); DELETE's `forget` removes every replica's events of the session."""
    monkeypatch.setattr(events, "FLUSH_SECONDS", 0.2)
    namespace = f"toolweave:test-ev:{uuid.uuid4().hex[:10]}"
    first, second = (SessionSharing(os.environ[REDIS_ENV], namespace, idle_seconds=60) for _ in range(2))
    commands: list[int] = []
    try:
        monitor = second.redis
        original = first.events._write

        async def counted(batch: Any) -> None:
            commands.append(len(batch))
            await original(batch)

        monkeypatch.setattr(first.events, "_write", counted)
        stores = [first.events.for_session(sid, holds_get=True) for sid in ("a", "b")]
        primed = await stores[0].store_event("7", None)
        progress = await stores[0].store_event("7", note(1))
        await stores[1].store_event(sdk_compat.GET_STREAM_KEY, note(2))
        answer = await stores[0].store_event(
            "7", JSONRPCResponse(jsonrpc="2.0", id=7, result={"content": [], "isError": False})
        )
        assert commands == [] and not await monitor.keys(f"{namespace}:*")  # nothing written yet
        replayed: list[Any] = []

        async def collect(event: Any) -> None:
            replayed.append(event)

        elsewhere = second.events.for_session("a", holds_get=False)
        assert await elsewhere.replay_events_after(primed, collect) is None  # waited for the tick
        assert [event.event_id for event in replayed] == [progress, answer]
        assert commands == [4]  # one command for both sessions' four events
        await second.events.for_session("a", holds_get=True).store_event(sdk_compat.GET_STREAM_KEY, note(3))
        await first.events.settle()
        await second.events.settle()
        assert len(await monitor.keys(f"{namespace}:e:a:*")) == 4  # two replicas' streams and counts
        await second.events.forget("a")
        assert await monitor.keys(f"{namespace}:e:a*") == []
        await first.events.forget("b")
    finally:
        await first.close()
        await second.close()


@pytest.mark.postgres
async def test_served_gateways_on_postgresql_without_redis_share_sessions(
    tmp_path: Path, api_env: None
) -> None:
    """`serve` on PostgreSQL without `redis_url` shares its sessions through the database by itself:
    a session opened on one gateway is served by the other; its streams are resumable (each opens
    with a priming event carrying an ID)."""
    url, schema = database_url("postgres", tmp_path)
    factory = AppFactory(url)
    try:
        apps = [await factory(CONFIG) for _ in range(2)]
        async with serve_asgi(apps[0].app) as first, serve_asgi(apps[1].app) as second:
            assert isinstance(apps[1].app.state.front.sharing.sharing, DatabaseSessionSharing)
            session = (await rpc(first, "initialize", initialize_params())).headers["mcp-session-id"]
            tools = result(await rpc(second, "tools/list", session=session))["tools"]
            assert "find_tools" in {tool["name"] for tool in tools}
            answer = await rpc(
                second, "tools/call", {"name": "find_tools", "arguments": {"query": "multiply"}}, session
            )
            assert answer.headers["content-type"].startswith("text/event-stream")
            assert "id: " in answer.text  # the event store in PostgreSQL: resumable
    finally:
        await factory.close_all()
        await drop_schema(url.split("?")[0], schema or "")


@pytest.mark.postgres
async def test_expired_session_rows_are_swept_when_a_session_opens(tmp_path: Path) -> None:
    """The local operator's sessions (auth off) are counted by no tenant, so `held` never removes
    them: opening a session removes every expired row (at most once a minute per gateway)."""
    url, schema = database_url("postgres", tmp_path)
    try:
        async with Database.from_url(url) as db:
            sharing = DatabaseSessionSharing(db, idle_seconds=60)
            record = {"path": "/mcp", "tenant": "", "label": "mcp", "version": "2025-11-25", "client": b"{}"}
            assert await sharing.save("old", record)
            sharing.idle = -1  # written already expired
            assert await sharing.save("older", record)
            sharing.idle = 60
            assert await sharing.load("older") is None
            sharing._swept = float("-inf")
            assert await sharing.save("new", record)
            async with db.read() as conn:
                left = (await conn.execute(text("SELECT id FROM mcp_sessions ORDER BY id"))).scalars().all()
            assert left == ["new", "old"]
    finally:
        await drop_schema(url.split("?")[0], schema or "")


@pytest.mark.postgres
async def test_a_large_message_reaches_the_other_gateway_over_postgresql(tmp_path: Path) -> None:
    """A client's answer to a server request larger than NOTIFY carries (8000 bytes) is relayed to the
    gateway holding the session: the notification carries a row id, the answer is in the database
    (before: logged as too large and dropped)."""
    url, schema = database_url("postgres", tmp_path)
    heard: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    class Holder:
        path = "/mcp"

        def holds(self, session_id: str) -> bool:
            return session_id == "s1"

        async def heard(self, session_id: str, message: dict[str, Any]) -> None:
            await heard.put(message)

    try:
        async with Database.from_url(url) as one, Database.from_url(url) as two:
            sender, holder = (
                DatabaseSessionSharing(one, idle_seconds=60),
                DatabaseSessionSharing(two, idle_seconds=60),
            )
            holder.register(Holder())  # type: ignore[arg-type]
            await holder.start()
            try:
                body = orjson.dumps({"jsonrpc": "2.0", "id": 3, "result": {"content": "x" * 50_000}}).decode()
                for _attempt in range(50):  # until the holder's listener is connected
                    await sender.publish({"t": "reply", "sid": "s1", "body": "small"})
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(heard.get(), 0.2)
                        break
                await sender.publish({"t": "reply", "sid": "s1", "body": body})
                message = await asyncio.wait_for(heard.get(), 10)
                assert message["body"] == body
            finally:
                await holder.close()
                await sender.close()
    finally:
        await drop_schema(url.split("?")[0], schema or "")
