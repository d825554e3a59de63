"""Three `toolweave serve` replicas (auth on) on one PostgreSQL schema and Redis, behind HAProxy
round robin without stickiness: any replica serves any request.

One replica set for the module (starting three gateways and HAProxy is the expensive part), and
a second on PostgreSQL alone (no `redis_url`) for the last test;
the test that kills a replica starts it again on the same port. The backend is
tests/servers/durableserver.py, its own process, so its log of every call it started
survives the replicas: that log proves what ran twice and what did not.

Needs TOOLWEAVE_TEST_POSTGRES_URL, TOOLWEAVE_TEST_REDIS_URL and HAProxy (Debian's `haproxy`,
which .ci/run installs); skips naming what is missing. Redis channels are named after the
test's own PostgreSQL schema (random), so nothing here is heard by anyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import orjson
import pytest
import yaml
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import text as sql

from support.paths import PYTHON, SERVERS, TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from toolweave.store import Database, KeyRepository

POSTGRES_ENV = "TOOLWEAVE_TEST_POSTGRES_URL"
REDIS_ENV = "TOOLWEAVE_TEST_REDIS_URL"
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
REPLICAS = 3
LEASE = {"TOOLWEAVE_RUN_HEARTBEAT_SECONDS": "0.5", "TOOLWEAVE_RUN_STALE_AFTER_SECONDS": "3"}
"""Short leases, so a killed replica's runs are taken over within seconds (the default is 3 / 10 s)."""


def _missing() -> str | None:
    if not os.environ.get(POSTGRES_ENV):
        return f"set {POSTGRES_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test)"
    if not os.environ.get(REDIS_ENV):
        return f"set {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0)"
    if not os.access(HAPROXY, os.X_OK):
        return "HAProxy is not installed (apt-get install haproxy; .ci/run does)"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


def step(step_id: str, tool: str, label: str, **extra: Any) -> dict[str, Any]:
    arguments = {"label": f"{{{{ params.tag }}}}-{label}", **extra.pop("arguments", {})}
    return {"id": step_id, "tool": tool, "arguments": arguments, **extra}


PARAMETERS = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}
RESUMABLE = {
    "name": "replicated_safe",
    "description": "first, then an idempotent slow put, then last",
    "parameters": PARAMETERS,
    "steps": [
        step("first", "d/write", "first"),
        step("second", "d/put", "second", arguments={"wait": True}, dependsOn=["first"]),
        step("last", "d/write", "last", dependsOn=["second"]),
    ],
}
"""The step in flight at the kill is idempotent: the taken-over run completes."""
FRAGILE = {
    "name": "replicated_fragile",
    "description": "first, then a slow write that is not idempotent, then last",
    "parameters": PARAMETERS,
    "steps": [
        step("first", "d/write", "first"),
        step("second", "d/write", "second", arguments={"wait": True}, dependsOn=["first"]),
        step("last", "d/write", "last", dependsOn=["second"]),
    ],
}
"""The step in flight at the kill is not idempotent: the taken-over run fails, saying it was not re-run."""


@dataclass
class Replica:
    port: int
    config: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [str(TOOLWEAVE), "serve", "-c", str(self.config), "--port", str(self.port), "--auth"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)


@dataclass
class ReplicaSet:
    url: str
    """HAProxy's front: every request of the tests goes through it."""
    database: str
    backend: str
    key: str
    replicas: list[Replica] = field(default_factory=list)

    def client(self, **options: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.key}"}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=60, **options)

    @contextlib.asynccontextmanager
    async def mcp(self, **options: Any) -> Any:
        """The official SDK client on a 2025-11-25 session, through the balancer (no stickiness)."""
        headers = {"Authorization": f"Bearer {self.key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
            Client(
                streamable_http_client(f"{self.url}/mcp", http_client=http), mode="legacy", **options
            ) as client,
        ):
            yield client

    def replica_of_pid(self, pid: int) -> Replica:
        return next(r for r in self.replicas if r.process is not None and r.process.pid == pid)


def haproxy_config(front: int, replicas: list[Replica]) -> str:
    """Plain round robin, no stickiness, health checked on /readyz."""
    servers = "\n".join(
        f"    server gw{index} 127.0.0.1:{replica.port} check" for index, replica in enumerate(replicas)
    )
    return f"""global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout check 5s
    timeout client 120s
    timeout server 120s
    retries 2
    option redispatch
frontend gateways
    bind 127.0.0.1:{front}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host localhost
    http-check expect status 200
    default-server inter 500ms fall 3 rise 1
{servers}
"""


@pytest.fixture(scope="module")
def durable_backend() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [PYTHON, str(SERVERS / "durableserver.py"), "--http", str(port)],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


@pytest.fixture(scope="module")
def replica_set(durable_backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicaSet]:
    with _replicas(durable_backend, tmp_path_factory.mktemp("replicas"), os.environ[REDIS_ENV]) as served:
        yield served


@pytest.fixture(scope="module")
def postgres_replica_set(
    durable_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReplicaSet]:
    """The same on PostgreSQL alone: no `redis_url` (sessions, their events, live calls and the
    change feed go through the database)."""
    with _replicas(durable_backend, tmp_path_factory.mktemp("replicas-pg"), None) as served:
        yield served


@contextlib.contextmanager
def _replicas(durable_backend: str, home: Path, redis_url: str | None) -> Iterator[ReplicaSet]:
    base = os.environ[POSTGRES_ENV]
    schema = f"tw_replicas_{uuid.uuid4().hex[:12]}"
    database = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    config = home / "toolweave.yaml"
    gateway: dict[str, Any] = {"database": database, "sync_interval": "1s"}
    if redis_url is not None:
        gateway["redis_url"] = redis_url
    raw = {
        "gateway": gateway,
        "backends": [
            {"name": "d", "url": durable_backend, "concurrent": True},
            {"name": "r", "command": PYTHON, "args": [str(SERVERS / "relayserver.py")]},
        ],
        "composite_tools": [RESUMABLE, FRAGILE],
    }
    config.write_text(yaml.safe_dump(raw, sort_keys=False))
    env = subprocess_env(HOME=str(home), TOOLWEAVE_SECRET_KEY="replicas-test-secret", **LEASE)
    key = asyncio.run(_create_key(database))
    replicas = [Replica(free_port(), config, env) for _ in range(REPLICAS)]
    front = free_port()
    (home / "haproxy.cfg").write_text(haproxy_config(front, replicas))
    haproxy: subprocess.Popen[bytes] | None = None
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            wait_for_port(replica.port, replica.process, 60)
        haproxy = subprocess.Popen(
            [HAPROXY, "-f", str(home / "haproxy.cfg"), "-db"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(front, haproxy, 10)
        served = ReplicaSet(f"http://127.0.0.1:{front}", database, durable_backend, key, replicas)
        asyncio.run(_all_ready(served))
        yield served
    finally:
        if haproxy is not None:
            stop_process(haproxy)
        for replica in replicas:
            replica.kill()
        asyncio.run(_drop_schema(base, schema))


async def _create_key(database: str) -> str:
    async with Database.from_url(database) as db:
        _info, plaintext = await KeyRepository(db).create("acme", ["tools:read", "tools:call", "tools:admin"])
    return plaintext


async def _drop_schema(base: str, schema: str) -> None:
    engine = Database.from_url(base)._create_engine()
    try:
        async with engine.begin() as conn:
            await conn.execute(sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        await engine.dispose()


async def _all_ready(served: ReplicaSet, timeout: float = 60) -> None:
    """Every replica answers /readyz through HAProxy (which has seen them all healthy), its backends
    connected."""
    seen: set[str] = set()
    async with asyncio.timeout(timeout), httpx.AsyncClient(base_url=served.url, timeout=10) as client:
        while len(seen) < len(served.replicas):
            with contextlib.suppress(httpx.HTTPError):
                answer = await client.get("/readyz")
                if answer.status_code == 200 and not answer.json()["backends_not_connected"]:
                    seen.add(answer.json()["instance"])
            await asyncio.sleep(0.05)


async def poll(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 45.0) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not await check():  # noqa: ASYNC110 - polls other processes; no event to wait on
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"gave up waiting for {what}") from None


async def backend(url: str, tool: str, **arguments: Any) -> Any:
    async with Client(url) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result
    return result.structured_content


async def started(url: str, label: str) -> list[str]:
    return [entry["tool"] for entry in (await backend(url, "calls", label=label))["calls"]]


# -- the tests ---------------------------------------------------------------------------------------


async def test_probes_answer_without_a_key_and_the_balancer_spreads_requests(replica_set: ReplicaSet) -> None:
    async with httpx.AsyncClient(base_url=replica_set.url, timeout=10) as client:
        answers = [await client.get("/healthz") for _ in range(2 * REPLICAS)]
        assert all(answer.status_code == 200 for answer in answers), [
            (a.status_code, a.text[:200]) for a in answers
        ]
        assert len({answer.json()["instance"] for answer in answers}) == REPLICAS  # round robin
        metrics = (await client.get("/readyz")).json()
        assert metrics["ready"] is True and metrics["backends_not_connected"] == []


async def test_a_ui_login_and_twenty_pages_across_replicas(replica_set: ReplicaSet) -> None:
    """GET /login and POST /login reach different replicas: the login works, and so do 20 pages."""
    async with httpx.AsyncClient(base_url=replica_set.url, timeout=30) as browser:
        form = await browser.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert form.status_code == 200 and csrf is not None
        login = await browser.post(
            "/login", data={"key": replica_set.key, "csrf": csrf.group(1), "next": "/"}
        )
        assert login.status_code == 303 and login.headers["location"] == "/", login.text
        pages = ["/", "/runs", "/backends", "/tools/replicated_safe", "/admin"] * 4
        for path in pages:
            page = await browser.get(path)
            assert page.status_code == 200, (path, page.status_code, page.text[:300])
            assert "acme" in page.text, path


async def test_the_event_stream_of_one_replica_shows_the_calls_of_all(replica_set: ReplicaSet) -> None:
    tag = uuid.uuid4().hex[:8]
    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    opened = asyncio.Event()

    async def follow() -> None:
        async with replica_set.client() as client, client.stream("GET", "/api/v1/events") as response:
            assert response.status_code == 200
            opened.set()
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    await events.put(orjson.loads(line.removeprefix("data: ")))

    reader = asyncio.create_task(follow())
    try:
        await asyncio.wait_for(opened.wait(), 10)
        await asyncio.sleep(1.5)  # every replica's publisher has probed for listeners since
        async with replica_set.client() as client:
            for index in range(2 * REPLICAS):
                answer = await client.post("/api/v1/tools/d__put/call", json={"label": f"{tag}-{index}"})
                assert answer.status_code == 200 and answer.json()["isError"] is False, answer.text
        seen = 0  # events carry no arguments: count the calls (only this test calls d__put)
        async with asyncio.timeout(15):
            while seen < 2 * REPLICAS:
                event = await events.get()
                if event.get("tool") == "d__put" and event.get("tenant") == "acme":
                    seen += 1
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def test_a_run_whose_replica_is_killed_finishes_on_another(replica_set: ReplicaSet) -> None:
    """kill -9 of the replica running two workflows mid-step: another replica takes both over by
    itself within the lease; completed steps never run again; the idempotent step in flight runs
    again and its run completes; the non-idempotent one is not re-run and its run says so."""
    tag = uuid.uuid4().hex[:10]
    url = replica_set.backend

    async def call(name: str) -> None:
        async with replica_set.client() as client:
            await client.post(f"/api/v1/tools/{name}/call", json={"tag": tag})

    # both calls through the balancer: they may land on different replicas; each dies with its replica
    calls = [asyncio.create_task(call(name)) for name in ("replicated_safe", "replicated_fragile")]
    runs: dict[str, str] = {}

    async def both_in_flight() -> bool:
        async with replica_set.client() as client:
            listed = (await client.get("/api/v1/runs", params={"status": "running"})).json()["runs"]
        for run in listed:
            if run["arguments"].get("tag") == tag:
                runs[run["tool"]] = run["id"]
        return len(runs) == 2 and sorted(await started(url, f"{tag}-second")) == ["put", "write"]

    await poll(both_in_flight, "both workflows to have their second step in flight")
    owners = await _owner_pids(replica_set.database, list(runs.values()))
    killed = [replica_set.replica_of_pid(pid) for pid in set(owners.values())]
    for replica in killed:
        replica.kill()
    await asyncio.gather(*calls, return_exceptions=True)  # the callers' connections died with them
    await backend(url, "open_gate", label=f"{tag}-second")  # the orphaned call may finish now

    async def finished() -> bool:
        async with replica_set.client() as client:
            states = [(await client.get(f"/api/v1/runs/{run_id}")).json() for run_id in runs.values()]
        return all(state["status"] in ("completed", "failed") for state in states)

    await poll(finished, "another replica to take both runs over and finish them")
    async with replica_set.client() as client:
        safe = (await client.get(f"/api/v1/runs/{runs['replicated_safe']}")).json()
        fragile = (await client.get(f"/api/v1/runs/{runs['replicated_fragile']}")).json()
    assert safe["status"] == "completed", safe
    assert {s["id"]: s["status"] for s in safe["steps"]} == dict.fromkeys(
        ("first", "second", "last"), "completed"
    )
    assert fragile["status"] == "failed" and "was running when the gateway stopped" in fragile["error"], (
        fragile
    )
    assert {s["id"]: s["status"] for s in fragile["steps"]}["last"] == "cancelled"
    new_owners = await _owner_pids(replica_set.database, list(runs.values()))
    assert not set(new_owners.values()) & set(owners.values())  # finished by survivors

    # the side-effect log: `first` once per workflow, the idempotent put twice (once per replica),
    # the non-idempotent write once (never re-run), `last` once (only the completed run's)
    assert await started(url, f"{tag}-first") == ["write", "write"]
    assert sorted(await started(url, f"{tag}-second")) == ["put", "put", "write"]
    assert await started(url, f"{tag}-last") == ["write"]

    for replica in killed:  # the set is whole again for the next test
        replica.start()
        wait_for_port(replica.port, replica.process, 60)
    await _all_ready(replica_set)


async def _owner_pids(database: str, run_ids: list[str]) -> dict[str, int]:
    """Run id → the pid of the replica that owns it (from the shared database)."""
    async with Database.from_url(database) as db, db.read() as conn:
        rows = (
            await conn.execute(
                sql(
                    "SELECT runs.id, gateway_instances.pid FROM runs JOIN gateway_instances "
                    "ON runs.owner = gateway_instances.id WHERE runs.id = ANY(:ids)"
                ),
                {"ids": run_ids},
            )
        ).all()
    return {row.id: row.pid for row in rows}


# -- shared MCP sessions (2025-11-25) -------------------------------------------------------------------


async def test_a_session_is_served_by_every_replica(replica_set: ReplicaSet) -> None:
    """The SDK client's 100 calls on one session, spread round robin over the three replicas: all
    succeed (before sessions were shared: "Session not found" for every request off the first one)."""
    async with replica_set.mcp() as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert {"d__put", "r__ask_name"} <= listed
        for index in range(100):
            result = await client.call_tool("d__put", {"label": f"spread-{index}"})
            assert not result.is_error, (index, result)


async def test_a_session_survives_each_replica_killed_in_turn(replica_set: ReplicaSet) -> None:
    """kill -9 of every replica one after the other (the others serve meanwhile): the session and
    the session carries on; no call fails."""
    async with replica_set.mcp() as client:
        for replica in replica_set.replicas:
            replica.kill()
            for index in range(2 * REPLICAS):
                result = await client.call_tool("d__put", {"label": f"survive-{replica.port}-{index}"})
                assert not result.is_error, (replica.port, index, result)
            replica.start()
            wait_for_port(replica.port, replica.process, 60)
            await _all_ready(replica_set)
        assert not (await client.call_tool("d__put", {"label": "survived"})).is_error


async def test_list_changed_reaches_the_client_from_a_change_on_another_replica(
    replica_set: ReplicaSet,
) -> None:
    """A composite created through the REST API (any replica) is announced on the client's GET stream,
    held by whichever replica its GET landed on, once."""
    heard: list[Any] = []
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            heard.append(message)
            changed.set()

    name = f"shared_{uuid.uuid4().hex[:8]}"
    async with replica_set.mcp(message_handler=on_message) as client:
        await client.list_tools()
        await asyncio.sleep(0.5)  # the client's GET stream is open
        async with replica_set.client() as rest:
            created = await rest.post(
                "/api/v1/composite-tools",
                json={
                    "definition": {
                        "name": name,
                        "description": "made through some replica",
                        "parameters": PARAMETERS,
                        "steps": [step("only", "d/put", "only")],
                    }
                },
            )
            assert created.status_code in (200, 201), created.text
        async with asyncio.timeout(15):
            await changed.wait()
        await asyncio.sleep(0.5)
        assert len(heard) == 1  # one replica holds the stream: the others' copies have nowhere to send
        assert name in {tool.name for tool in (await client.list_tools()).tools}


async def test_an_elicitation_is_answered_across_replicas(replica_set: ReplicaSet) -> None:
    """A backend asks the user mid-call; the question goes out on the call's stream (one replica), the
    client's answer is POSTed through the balancer (another replica, mostly): the call completes."""
    asked = 0

    async def elicit(_context: Any, params: Any) -> types.ElicitResult:
        nonlocal asked
        asked += 1
        return types.ElicitResult(action="accept", content={"name": f"Ada{asked}"})

    async with replica_set.mcp(elicitation_callback=elicit) as client:
        for index in range(REPLICAS):
            result = await client.call_tool("r__ask_name", {})
            assert not result.is_error, result
            assert result.content[0].text == f"hello, Ada{index + 1}"  # type: ignore[union-attr]


async def test_the_session_limits_count_every_replica(replica_set: ReplicaSet) -> None:
    """limits.mcp_sessions_per_key (16 by default) counts the sessions a key opened on all replicas."""
    headers = {"Authorization": f"Bearer {replica_set.key}", "Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "n", "version": "1"},
        },
    }
    opened: list[str] = []
    async with httpx.AsyncClient(base_url=replica_set.url, headers=headers, timeout=30) as http:
        try:
            refused = None
            for _ in range(20):
                answer = await http.post("/mcp", json=initialize)
                if answer.status_code == 429:
                    refused = answer
                    break
                assert answer.status_code == 200, answer.text
                opened.append(answer.headers["mcp-session-id"])
            assert refused is not None and "mcp_sessions_per_key" in refused.text, refused
            assert len(opened) <= 16
        finally:
            for session_id in opened:
                await http.delete(
                    "/mcp", headers={"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
                )


# -- Try it in the web UI, followed from any replica -----------------------------------------------------

HX = {"HX-Request": "true"}


async def _ui_login(browser: httpx.AsyncClient, key: str) -> str:
    """Log in (through whatever replicas the requests reach); the CSRF token of the new session."""
    form = await browser.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None, form.text[:300]
    login = await browser.post("/login", data={"key": key, "csrf": csrf.group(1), "next": "/"})
    assert login.status_code == 303, login.text
    page = await browser.get("/tools/d__put")
    token = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert page.status_code == 200 and token is not None, page.text[:300]
    return token.group(1)


def _call_id(fragment: httpx.Response) -> str:
    found = re.search(r'data-call="([^"]+)"', fragment.text)
    assert fragment.status_code == 200 and found is not None, fragment.text[:500]
    return found.group(1)


async def test_a_try_it_call_is_followed_to_its_result_from_every_replica(replica_set: ReplicaSet) -> None:
    """The page's call runs on the replica its form reached; its polls (every one through the round-robin
    balancer, so most reach another replica) show it running, then its result (before: "No such call"
    from every replica but the one running it)."""
    label = f"try-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=replica_set.url, timeout=30) as browser:
        csrf = await _ui_login(browser, replica_set.key)
        started = await browser.post(
            "/tools/d__put/try", data={"csrf": csrf, "label": label, "wait": "true"}, headers=HX
        )
        call_id = _call_id(started)
        for _ in range(2 * REPLICAS):  # each replica twice, while the call waits on its gate
            page = await browser.get(f"/calls/{call_id}", headers=HX)
            assert page.status_code == 200 and 'id="live-state"' in page.text, page.text[:500]
            assert "d__put" in page.text
        await backend(replica_set.backend, "open_gate", label=label)

        async def finished() -> bool:
            page = await browser.get(f"/calls/{call_id}", headers=HX)
            assert page.status_code == 200, page.text[:500]
            return 'id="live-state"' not in page.text

        await poll(finished, "the call's result on the page", timeout=20)
        for _ in range(REPLICAS):
            page = await browser.get(f"/calls/{call_id}", headers=HX)
            assert page.status_code == 200 and label in page.text and "live-state" not in page.text, page.text


async def test_a_try_it_question_and_cancel_are_relayed_to_the_replica_running_the_call(
    replica_set: ReplicaSet,
) -> None:
    """Started on one replica, asked on the page, answered on another and followed on the third; a
    second call cancelled from another replica than the one running it."""
    first, second, third = (f"http://127.0.0.1:{replica.port}" for replica in replica_set.replicas)
    async with httpx.AsyncClient(base_url=replica_set.url, timeout=30) as browser:
        csrf = await _ui_login(browser, replica_set.key)
        call_id = _call_id(
            await browser.post(f"{first}/tools/r__ask_name/try", data={"csrf": csrf}, headers=HX)
        )
        question: str | None = None

        async def asked() -> bool:
            nonlocal question
            page = await browser.get(f"{second}/calls/{call_id}", headers=HX)
            found = re.search(r'name="question" value="([^"]+)"', page.text)
            question = found.group(1) if found else None
            return question is not None

        await poll(asked, "the backend's question on the page, seen on another replica", timeout=20)
        answered = await browser.post(
            f"{second}/calls/{call_id}/answer",
            data={"csrf": csrf, "question": question, "action": "accept", "name": "Ada"},
            headers=HX,
        )
        assert answered.status_code == 200 and "Answer sent" in answered.text, answered.text[:500]

        async def greeted() -> bool:
            page = await browser.get(f"{third}/calls/{call_id}", headers=HX)
            return "hello, Ada" in page.text

        await poll(greeted, "the answered call's result on a third replica", timeout=20)

        label = f"cancel-{uuid.uuid4().hex[:8]}"
        data = {"csrf": csrf, "label": label, "wait": "true"}
        call_id = _call_id(await browser.post(f"{first}/tools/d__put/try", data=data, headers=HX))
        cancelled = await browser.post(f"{second}/calls/{call_id}/cancel", data={"csrf": csrf}, headers=HX)
        assert cancelled.status_code == 200 and "Cancelling" in cancelled.text, cancelled.text[:500]

        async def stopped() -> bool:
            page = await browser.get(f"{third}/calls/{call_id}", headers=HX)
            return "cancelled from the page" in page.text

        await poll(stopped, "the cancelled call's result on a third replica", timeout=20)
        await backend(replica_set.backend, "open_gate", label=label)


# -- on PostgreSQL alone (no Redis) --------------------------------------------------------------------


async def test_without_redis_a_session_a_large_answer_and_a_try_it_call_cross_replicas(
    postgres_replica_set: ReplicaSet,
) -> None:
    """Three replicas on PostgreSQL without Redis, round robin: the SDK client's calls on one session;
    answers to a backend's question of 20 KB (over NOTIFY's 8000 bytes: relayed through the database
    to the replica running the call, before: dropped, and that call waited for good); a Try-it call
    followed to its result."""
    served = postgres_replica_set
    big = "A" * 20_000

    async def elicit(_context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": big})

    async with served.mcp(elicitation_callback=elicit) as client:
        for index in range(2 * REPLICAS):
            result = await client.call_tool("d__put", {"label": f"pg-spread-{index}"})
            assert not result.is_error, (index, result)
        for _ in range(REPLICAS):  # the answer's POST reaches another replica than the call's, mostly
            result = await asyncio.wait_for(client.call_tool("r__ask_name", {}), 30)
            assert not result.is_error and result.content[0].text == f"hello, {big}"  # type: ignore[union-attr]

    label = f"pg-try-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as browser:
        csrf = await _ui_login(browser, served.key)
        call_id = _call_id(
            await browser.post(
                "/tools/d__put/try", data={"csrf": csrf, "label": label, "wait": "true"}, headers=HX
            )
        )
        for _ in range(REPLICAS):
            page = await browser.get(f"/calls/{call_id}", headers=HX)
            assert page.status_code == 200 and 'id="live-state"' in page.text, page.text[:500]
        await backend(served.backend, "open_gate", label=label)

        async def finished() -> bool:
            page = await browser.get(f"/calls/{call_id}", headers=HX)
            assert page.status_code == 200, page.text[:500]
            return label in page.text and 'id="live-state"' not in page.text

        await poll(finished, "the call's result on the page", timeout=20)
