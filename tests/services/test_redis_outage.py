"""Redis stopped and started again under two gateways sharing PostgreSQL: they degrade, then recover.

A Redis server of the test's own (never the machine's, which other tests use) on a free port.
While it is down, calls and workflows go on, a composite created through one gateway reaches
the other by polling the database, and the event stream shows each gateway's own calls; when
it is back, another gateway's calls reach the event stream again, without a restart.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from support.api import GREETER, AppFactory, database_url, drop_schema
from support.configs import python_backend
from support.processes import free_port, wait_for_port
from toolweave.services import event_relay

REDIS_SERVER = shutil.which("redis-server")
WORKFLOW = {
    "name": "greet_twice",
    "description": "Greet, then greet the greeting.",
    "parameters": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    "steps": [
        {"id": "one", "tool": "py/greet", "arguments": {"name": "{{ params.name }}"}},
        {"id": "two", "tool": "py/greet", "arguments": {"name": "again"}, "dependsOn": ["one"]},
    ],
}


class OwnRedis:
    """`redis-server` on a port of its own, without persistence; stop() kills it, start() again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.process, 10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def own_redis() -> Iterator[OwnRedis]:
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    redis = OwnRedis()
    redis.start()
    try:
        yield redis
    finally:
        redis.stop()


@pytest.fixture
async def shared_postgres(tmp_path: Path, api_env: None) -> AsyncIterator[AppFactory]:
    url, schema = database_url("postgres", tmp_path)
    factory = AppFactory(url)
    try:
        yield factory
    finally:
        await factory.close_all()
        if schema is not None:
            await drop_schema(url.split("?")[0], schema)


async def until(check: object, what: str, timeout: float = 20.0) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not await check():  # type: ignore[operator]  # noqa: ASYNC110 - other gateways' work
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"gave up waiting for {what}") from None


async def test_gateways_degrade_to_the_database_while_redis_is_down_and_recover(
    own_redis: OwnRedis, shared_postgres: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_relay, "PROBE_SECONDS", 0.1)
    raw = {
        "gateway": {"redis_url": own_redis.url, "sync_interval": "0.5s"},
        "backends": [python_backend()],
        "composite_tools": [WORKFLOW],
    }
    a, b = await shared_postgres(raw), await shared_postgres(raw)
    follower = b.runtime.events.subscribe(None, everything=True)

    async def a_call_reaches_b() -> bool:
        async with a.client() as client:
            answer = await client.post("/api/v1/tools/py__greet/call", json={"name": "x"})
            assert answer.status_code == 200, answer.text
        await asyncio.sleep(0.1)
        found = False
        while not follower.queue.empty():
            event = follower.queue.get_nowait()
            found = found or event.get("tool") == "py__greet"
        return found

    await until(a_call_reaches_b, "a call on gateway A to reach B's event stream over Redis")

    own_redis.stop()
    async with a.client() as client:  # Redis down: calls, workflows and changes go on
        for _ in range(3):
            answer = await client.post("/api/v1/tools/greet_twice/call", json={"name": "down"})
            assert answer.status_code == 200 and answer.json()["isError"] is False, answer.text
        created = await client.post("/api/v1/composite-tools", json={"definition": GREETER})
        assert created.status_code == 201, created.text

    async def b_serves_the_new_composite() -> bool:
        return b.gateway.catalog.get("greeter") is not None

    await until(b_serves_the_new_composite, "gateway B to find A's composite by polling the database")
    async with b.client() as client:
        answer = await client.post("/api/v1/tools/greeter/call", json={"operation": "greet", "name": "b"})
        assert answer.status_code == 200 and answer.json()["isError"] is False, answer.text

    while not follower.queue.empty():  # B's own calls above; only A's may count from here
        follower.queue.get_nowait()
    own_redis.start()  # back on the same port: everything reconnects by itself
    await until(a_call_reaches_b, "A's calls to reach B's event stream again once Redis is back", timeout=40)
    b.runtime.events.unsubscribe(follower)
