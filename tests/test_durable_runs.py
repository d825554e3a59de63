"""Durable workflow runs end to end: a gateway killed mid-run, its run `interrupted`, resumed by
`toolweave runs resume` and `POST /api/v1/runs/{id}/resume` without re-running completed steps.

The backend is tests/servers/durableserver.py over HTTP, its own process, so what it counts
survives the gateway: it logs every `write` / `put` call when it starts, and a call with
`wait: true` stays in flight until the test opens its label's gate (no timing involved).
Every test runs on a SQLite file and, with TOOLWEAVE_TEST_POSTGRES_URL, on PostgreSQL (a
schema of its own, dropped afterwards). Every process a test starts is killed at its end.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from mcp import Client
from sqlalchemy import text as sql
from typer.testing import CliRunner

from support.cli import Ran, toolweave_here, toolweave_here_async
from support.paths import PYTHON, SERVERS, TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from toolweave.cli import app as cli_app
from toolweave.config import parse_config
from toolweave.executor.resume import REDACTED
from toolweave.runs import RunRecord, StepRecord, new_run_id
from toolweave.server.app import server_app
from toolweave.store import Database, KeyRepository, SqlRunStore

POSTGRES_ENV = "TOOLWEAVE_TEST_POSTGRES_URL"
SECRET_KEY = "durable-runs-test-secret"
TOKEN = "tok-SECRET-4711"
"""The workflows' secret argument: it must never reach a run record, an error or the database."""

FAST_HEARTBEAT = {"TOOLWEAVE_RUN_HEARTBEAT_SECONDS": "0.2", "TOOLWEAVE_RUN_STALE_AFTER_SECONDS": "2"}
"""For the gateways the tests kill: the next gateway sees the dead one's runs stale within seconds."""

PARAMETERS = {
    "type": "object",
    "properties": {
        "tag": {"type": "string"},
        "token": {"type": "string", "format": "password", "writeOnly": True},
    },
    "required": ["tag", "token"],
}


def step(step_id: str, tool: str, label: str, **extra: Any) -> dict[str, Any]:
    arguments = {"label": f"{{{{ params.tag }}}}-{label}", **extra.pop("arguments", {})}
    return {"id": step_id, "tool": tool, "arguments": arguments, **extra}


PLAIN = {
    "name": "durable_plain",
    "description": "first, then a slow non-idempotent write, then third",
    "parameters": PARAMETERS,
    "steps": [
        step("first", "d/write", "first", arguments={"token": "{{ params.token }}"}),
        step("second", "d/write", "second", arguments={"wait": True}, dependsOn=["first"]),
        step("third", "d/write", "third", dependsOn=["second"]),
    ],
}
"""The step in flight at the crash is not idempotent and does not retry: a resume must not repeat it."""

SAFE = {
    "name": "durable_safe",
    "description": "first, then an idempotent and a retrying slow write side by side, then last",
    "parameters": PARAMETERS,
    "steps": [
        step("first", "d/write", "first", arguments={"token": "{{ params.token }}"}),
        step("second", "d/put", "second", arguments={"wait": True}, dependsOn=["first"]),
        step(
            "third",
            "d/write",
            "third",
            arguments={"wait": True},
            dependsOn=["first"],
            onError={"action": "retry", "retryCount": 1, "retryDelay": "10ms"},
        ),
        step(
            "last",
            "d/write",
            "last",
            arguments={"token": "{{ params.token }}"},
            dependsOn=["second", "third"],
        ),
    ],
}
"""Both steps in flight at the crash may run again: `put` is idempotent, `third` retries."""

FANOUTS = [
    {"name": "fan_write", "description": "not idempotent", "tools": ["d/write"]},
    {"name": "fan_put", "description": "idempotent", "tools": ["d/put"]},
]


def gateway_config(database: str, backend_url: str) -> dict[str, Any]:
    return {
        "gateway": {"database": database},
        "backends": [{"name": "d", "url": backend_url, "concurrent": True}],
        "composite_tools": [PLAIN, SAFE, *FANOUTS],
    }


# -- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def durable_server() -> Iterator[str]:
    """tests/servers/durableserver.py over HTTP for the module; it outlives every gateway."""
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


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A private HOME and a fixed secret key (PostgreSQL needs one), here and in every subprocess."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TOOLWEAVE_SECRET_KEY", SECRET_KEY)
    monkeypatch.delenv("TOOLWEAVE_SECRET_KEY_FILE", raising=False)
    for name in FAST_HEARTBEAT:
        monkeypatch.delenv(name, raising=False)
    return subprocess_env(HOME=str(tmp_path / "home"), TOOLWEAVE_SECRET_KEY=SECRET_KEY)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def database(request: pytest.FixtureRequest, tmp_path: Path, env: dict[str, str]) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'durable.db'}"
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(
            f"set {POSTGRES_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test) to run the PostgreSQL cases"
        )
    schema = f"tw_durable_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{url}{'&' if '?' in url else '?'}schema={schema}"
    finally:
        engine = Database.from_url(url)._create_engine()
        try:
            async with engine.begin() as conn:
                await conn.execute(sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        finally:
            await engine.dispose()


@pytest.fixture
def tag() -> str:
    """Labels unique to the test: the durable server is shared by the module."""
    return uuid.uuid4().hex[:10]


# -- helpers -------------------------------------------------------------------------------------------


async def backend(url: str, tool: str, **arguments: Any) -> Any:
    async with Client(url) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result
    return result.structured_content


async def started(url: str, label: str) -> list[str]:
    """The tools called with `label`, in the order the calls started."""
    found = await backend(url, "calls", label=label)
    return [entry["tool"] for entry in found["calls"]]


async def poll(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 30.0) -> None:
    try:
        async with asyncio.timeout(timeout):
            while not await check():  # noqa: ASYNC110 - polls another process; no event to wait on
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"gave up waiting for {what}") from None


def step_statuses(steps: list[dict[str, Any]]) -> dict[str, str]:
    return {entry["id"]: entry["status"] for entry in steps}


def crashed_run(tool: str, tag: str, *, tenant: str | None = None, **fields: Any) -> RunRecord:
    """What a gateway that died during step `second` leaves behind: `first` done, `second` in flight."""
    first = {"tool": "write", "label": f"{tag}-first", "calls": 1}
    view = {"status": "completed", "output": first, "content": [], "error": None, "attempts": 1}
    return RunRecord(
        id=new_run_id(),
        tool=tool,
        kind="workflow",
        tenant=tenant,
        arguments={"tag": tag, "token": REDACTED},
        steps=[StepRecord("first", "completed", attempts=1, output=first), StepRecord("second", "running")],
        state={"steps": {"first": view}},
        **fields,
    )


async def leave_interrupted(database: str, *records: RunRecord) -> None:
    """Record runs as a gateway would, then stop that gateway: its unfinished runs become interrupted."""
    async with Database.from_url(database) as db:
        crashed = SqlRunStore(db)
        for record in records:
            await crashed.start_run(record)
        await crashed.close()


# -- the REST API on an in-process gateway -----------------------------------------------------------


class Api:
    def __init__(self, app: Any) -> None:
        self.app = app
        self.runtime = app.state.runtime

    def client(self, key: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.ASGITransport(app=self.app, client=("127.0.0.1", 50000))
        return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1/api/v1", headers=headers)

    async def key(self, tenant: str) -> str:
        scopes = ["tools:read", "tools:call"]
        return (await KeyRepository(self.runtime.db).create(tenant, scopes))[1]


@pytest.fixture
async def open_api(database: str, durable_server: str) -> AsyncIterator[Callable[..., Awaitable[Api]]]:
    """`await open_api(require_auth=...)`: a started gateway app on the test's database.

    Opening one stops those opened before (a restart with another config): a SQLite file is
    served by one gateway at a time.
    """
    opened: list[Api] = []

    async def open_(*, require_auth: bool, **sections: Any) -> Api:
        for earlier in opened:
            if earlier.runtime.started:
                await earlier.runtime.close()
        cfg = parse_config({**gateway_config(database, durable_server), **sections})
        assert cfg is not None
        app = server_app(cfg, require_auth=require_auth)
        await app.state.runtime.start()
        opened.append(Api(app))
        return opened[-1]

    yield open_
    for api in opened:
        if api.runtime.started:
            await api.runtime.close()


@pytest.fixture
async def api(open_api: Callable[..., Awaitable[Api]]) -> Api:
    return await open_api(require_auth=True)


async def test_resume_over_rest(api: Api, database: str, durable_server: str, tag: str) -> None:
    safe, plain = (
        crashed_run("durable_safe", tag, tenant="acme"),
        crashed_run("durable_plain", tag, tenant="acme"),
    )
    await leave_interrupted(database, safe, plain)
    for label in ("second", "third"):
        await backend(durable_server, "open_gate", label=f"{tag}-{label}")
    acme, globex = await api.key("acme"), await api.key("globex")
    async with api.client(acme) as client, api.client(globex) as other:
        listed = (await client.get("/runs", params={"status": "interrupted"})).json()["runs"]
        assert {run["id"] for run in listed} == {safe.id, plain.id}
        assert (await other.get("/runs", params={"status": "interrupted"})).json()["runs"] == []

        missing = await client.post(f"/runs/{safe.id}/resume")
        assert missing.status_code == 422, missing.text
        error = missing.json()["error"]
        assert error["code"] == "missing_secret" and "token" in error["message"]
        assert [p["path"] for p in error["problems"]] == ["arguments.token"]
        changed = await client.post(
            f"/runs/{safe.id}/resume", json={"arguments": {"token": TOKEN, "tag": "x"}}
        )
        assert (
            changed.status_code == 422 and changed.json()["error"]["problems"][0]["path"] == "arguments.tag"
        )
        typo = await client.post(f"/runs/{safe.id}/resume", json={"argument": {"token": TOKEN}})
        assert typo.status_code == 422 and typo.json()["error"]["problems"][0]["path"] == "body.argument"
        assert TOKEN not in missing.text + changed.text + typo.text
        assert (
            await other.post(f"/runs/{safe.id}/resume", json={"arguments": {"token": TOKEN}})
        ).status_code == 404
        assert (await client.post("/runs/nope/resume", json={})).status_code == 404
        assert (await client.get(f"/runs/{safe.id}")).json()[
            "status"
        ] == "interrupted"  # refusals change nothing
        assert await started(durable_server, f"{tag}-second") == []

        body = {"arguments": {"token": TOKEN, "tag": tag}}  # resending a recorded argument is fine
        answer = await client.post(f"/runs/{safe.id}/resume", json=body)
        assert answer.status_code == 200, answer.text
        result = answer.json()
        assert result["isError"] is False, result
        meta = result["_meta"]["toolweave"]
        assert meta["run_id"] == safe.id
        steps = {s["id"]: s for s in meta["steps"]}
        assert steps["first"]["resumed"] is True
        assert (steps["second"]["interrupted"], steps["second"]["rerun"]) == (True, True)
        assert step_statuses(meta["steps"]) == dict.fromkeys(
            ("first", "second", "third", "last"), "completed"
        )
        # `first` was restored, `second` ran again (idempotent), the rest ran once
        assert await started(durable_server, f"{tag}-first") == []
        assert await started(durable_server, f"{tag}-second") == ["put"]
        last = (await backend(durable_server, "calls", label=f"{tag}-last"))["calls"]
        assert [entry["token_length"] for entry in last] == [len(TOKEN)]  # the supplied secret was used

        record = (await client.get(f"/runs/{safe.id}")).json()
        assert (record["status"], record["arguments"]["token"]) == ("completed", REDACTED)
        assert step_statuses(record["steps"])["second"] == "completed" and record["finishedAt"] is not None
        again = await client.post(f"/runs/{safe.id}/resume", json=body)
        assert again.status_code == 409 and again.json()["error"]["code"] == "not_interrupted"

        refused = await client.post(f"/runs/{plain.id}/resume", json={"arguments": {"token": TOKEN}})
        assert refused.status_code == 200
        assert refused.json()["isError"] is True
        assert "step 'second' was running when the gateway stopped" in refused.json()["content"][0]["text"]
        assert await started(durable_server, f"{tag}-third") == ["write"]  # safe's; plain never got there
    await assert_no_plaintext(database)


async def test_two_resumes_at_once_only_one_runs(
    api: Api, open_api: Callable[..., Awaitable[Api]], database: str, durable_server: str, tag: str
) -> None:
    record = crashed_run("durable_safe", tag)
    await leave_interrupted(database, record)
    for label in ("second", "third"):
        await backend(durable_server, "open_gate", label=f"{tag}-{label}")
    async with api.client(await api.key("acme")) as acme, api.client() as anonymous:
        assert (await anonymous.post(f"/runs/{record.id}/resume")).status_code == 401
        assert (
            await acme.post(f"/runs/{record.id}/resume")
        ).status_code == 404  # tenant-less: the operator's
    operator = await open_api(require_auth=False)  # no tenant, as without --auth
    async with operator.client() as client:
        body = {"arguments": {"token": TOKEN}}
        answers = await asyncio.gather(
            *(client.post(f"/runs/{record.id}/resume", json=body) for _ in range(3))
        )
    assert sorted(a.status_code for a in answers) == [200, 409, 409]
    assert {a.json()["error"]["code"] for a in answers if a.status_code == 409} <= {
        "already_claimed",
        "not_interrupted",
    }
    assert await started(durable_server, f"{tag}-last") == ["write"]


async def test_runs_that_cannot_be_resumed(
    open_api: Callable[..., Awaitable[Api]], database: str, durable_server: str, tag: str
) -> None:
    fanned = RunRecord(id=new_run_id(), tool="fan_write", kind="fanout", arguments={"label": f"{tag}-fan"})
    idempotent = RunRecord(id=new_run_id(), tool="fan_put", kind="fanout", arguments={"label": f"{tag}-put"})
    gone = crashed_run("no_such_tool", tag)
    await leave_interrupted(database, fanned, idempotent, gone)
    running, finished = (
        crashed_run("durable_plain", tag),
        crashed_run("durable_plain", tag, status="completed"),
    )
    async with Database.from_url(database) as db:
        live = SqlRunStore(db)
        await live.start_run(running)
        await live.finish_run(finished)
    api = await open_api(require_auth=False)
    async with api.client() as client:
        for run, code in [
            (fanned, "not_resumable"),
            (gone, "not_served"),
            (running, "not_interrupted"),
            (finished, "not_interrupted"),
        ]:
            answer = await client.post(f"/runs/{run.id}/resume", json={"arguments": {"token": TOKEN}})
            assert (answer.status_code, answer.json()["error"]["code"]) == (409, code), answer.text
        assert (
            "is not idempotent" in (await client.post(f"/runs/{fanned.id}/resume")).json()["error"]["message"]
        )
        assert "heartbeat" in (await client.post(f"/runs/{running.id}/resume")).json()["error"]["message"]
        # a fan-out has no steps to continue from: an idempotent one is simply called again
        again = await client.post(f"/runs/{idempotent.id}/resume")
        assert again.status_code == 200 and again.json()["isError"] is False, again.text
    assert await started(durable_server, f"{tag}-fan") == []
    assert await started(durable_server, f"{tag}-put") == ["put"]


async def test_recorded_direct_calls(
    open_api: Callable[..., Awaitable[Api]], database: str, durable_server: str, tag: str
) -> None:
    """A recorded direct call is one call: resumed (called again) only when its tool is idempotent."""
    put = RunRecord(id=new_run_id(), tool="d__put", kind="direct", arguments={"label": f"{tag}-put"})
    write = RunRecord(id=new_run_id(), tool="d__write", kind="direct", arguments={"label": f"{tag}-write"})
    await leave_interrupted(database, put, write)
    unrecorded = await open_api(require_auth=False)
    async with unrecorded.client() as client:
        answer = await client.post(f"/runs/{put.id}/resume")
        assert answer.status_code == 409 and "record_direct_calls" in answer.json()["error"]["message"]
    recorded = await open_api(require_auth=False, gateway={"database": database, "record_direct_calls": True})
    async with recorded.client() as client:
        assert (await client.post(f"/runs/{write.id}/resume")).status_code == 409
        answer = await client.post(f"/runs/{put.id}/resume")
        assert answer.status_code == 200 and answer.json()["isError"] is False, answer.text
        assert (await client.get(f"/runs/{put.id}")).json()["status"] == "completed"
    assert await started(durable_server, f"{tag}-put") == ["put"]
    assert await started(durable_server, f"{tag}-write") == []


async def test_a_resume_refused_by_policy_leaves_the_run_interrupted(
    open_api: Callable[..., Awaitable[Api]], database: str, durable_server: str, tag: str
) -> None:
    record = crashed_run("durable_safe", tag, tenant="acme")
    await leave_interrupted(database, record)
    await backend(durable_server, "open_gate", label=f"{tag}-third")
    api = await open_api(require_auth=True, policy={"rules": [{"tenant": "acme", "deny": ["d__put"]}]})
    async with api.client(await api.key("acme")) as client:
        answer = await client.post(f"/runs/{record.id}/resume", json={"arguments": {"token": TOKEN}})
        assert answer.status_code == 200 and answer.json()["isError"] is True  # policy applies inside
        assert "d__put" in answer.json()["content"][0]["text"]
        denied = RunRecord(
            id=new_run_id(), tool="fan_put", kind="fanout", tenant="acme", arguments={"label": tag}
        )
        await leave_interrupted(database, denied)
    api = await open_api(require_auth=True, policy={"rules": [{"tenant": "acme", "deny": ["fan_*"]}]})
    async with api.client(await api.key("acme")) as client:
        answer = await client.post(f"/runs/{denied.id}/resume")
        assert answer.status_code == 200 and answer.json()["isError"] is True, answer.text
        assert (await client.get(f"/runs/{denied.id}")).json()["status"] == "interrupted"  # still resumable
    assert await started(durable_server, tag) == []


async def assert_no_plaintext(database: str) -> None:
    """The supplied secret reached the backend, but no row of the database."""
    async with Database.from_url(database) as db, db.read() as conn:
        for table in ("runs", "run_steps"):
            rows = (await conn.execute(sql(f"SELECT * FROM {table}"))).all()
            assert rows and TOKEN not in repr(rows)


# -- a real crash: `toolweave serve` killed with SIGKILL, then `runs resume` ----------------------------


class Served:
    """`toolweave serve` as a subprocess; killed (never left running) when the test ends."""

    def __init__(self, config: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [str(TOOLWEAVE), "serve", "-c", str(config), "--port", str(self.port)],
            env={**env, **FAST_HEARTBEAT},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.api = f"http://127.0.0.1:{self.port}/api/v1"

    async def ready(self) -> Served:
        await asyncio.to_thread(wait_for_port, self.port, self.process, 60)
        return self

    async def runs(self, **params: str) -> list[dict[str, Any]]:
        async with httpx.AsyncClient() as client:
            answer = await client.get(f"{self.api}/runs", params=params)
        answer.raise_for_status()
        return answer.json()["runs"]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


@pytest.fixture
def serve(env: dict[str, str]) -> Iterator[Callable[[Path], Awaitable[Served]]]:
    started_: list[Served] = []

    async def start(config: Path) -> Served:
        served = Served(config, env)
        started_.append(served)
        return await served.ready()

    yield start
    for served in started_:
        served.kill()


async def call_over_mcp(url: str, tool: str, arguments: dict[str, Any]) -> None:
    async with Client(url) as client:
        await client.call_tool(tool, arguments)


async def test_a_killed_gateway_s_run_is_resumed_without_repeating_completed_steps(
    database: str, durable_server: str, tag: str, env: dict[str, str], serve: Any, tmp_path: Path
) -> None:
    config = tmp_path / "toolweave.yaml"
    config.write_text(yaml.safe_dump(gateway_config(database, durable_server), sort_keys=False))
    first = await serve(config)
    arguments = {"tag": tag, "token": TOKEN}
    calls = [
        asyncio.create_task(call_over_mcp(f"http://127.0.0.1:{first.port}/mcp", name, arguments))
        for name in ("durable_plain", "durable_safe")
    ]

    async def both_in_flight() -> bool:
        runs = {run["tool"]: run for run in await first.runs()}
        if {"durable_plain", "durable_safe"} - set(runs):
            return False
        plain, safe = (
            step_statuses(runs["durable_plain"]["steps"]),
            step_statuses(runs["durable_safe"]["steps"]),
        )
        return (
            plain == {"first": "completed", "second": "running"}
            and safe == {"first": "completed", "second": "running", "third": "running"}
            and sorted(await started(durable_server, f"{tag}-second")) == ["put", "write"]
            and await started(durable_server, f"{tag}-third") == ["write"]
        )

    try:
        await poll(both_in_flight, "both workflows to have a step in flight")
        first.kill()  # SIGKILL: no shutdown hook marks anything
    finally:
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
    runs = {run["tool"]: run["id"] for run in await asyncio.to_thread(_runs_in_db, config)}
    for label in ("second", "third"):  # the orphaned calls may finish now; resumed ones must not block
        await backend(durable_server, "open_gate", label=f"{tag}-{label}")

    second = await serve(config)

    async def interrupted() -> bool:
        return {run["id"] for run in await second.runs(status="interrupted")} == set(runs.values())

    await poll(interrupted, "the killed gateway's runs to become interrupted")

    async def cli(*args: str) -> Ran:  # not about their process: in this process (support.cli)
        return await toolweave_here_async(*args, "-c", str(config))

    listed = json.loads((await cli("runs", "--status", "interrupted", "--json")).stdout)
    assert {run["id"] for run in listed} == set(runs.values())

    # the CLI: a missing secret and malformed --args are refused, naming the parameter, never a value
    plain = runs["durable_plain"]
    missing = await cli("runs", "resume", plain)
    assert missing.returncode == 1 and "token" in missing.stderr and missing.stdout == ""
    malformed = await cli("runs", "resume", plain, "--args", "{token:")
    assert malformed.returncode == 2 and "--args is not valid JSON" in malformed.stderr
    unknown = await cli("runs", "resume", "nope", "--args", "{}")
    assert unknown.returncode == 1 and "run 'nope' not found" in unknown.stderr

    # the in-flight step is not idempotent and does not retry: the resumed run fails, saying why
    done = await cli("runs", "resume", plain, "--args", json.dumps({"token": TOKEN}))
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["isError"] is True and result["_meta"]["toolweave"]["run_id"] == plain
    assert step_statuses(result["_meta"]["toolweave"]["steps"]) == {
        "first": "completed",
        "second": "failed",
        "third": "cancelled",
    }
    assert "'second' was running when the gateway stopped" in result["content"][0]["text"]
    assert TOKEN not in done.stdout + done.stderr + missing.stderr
    again = await cli("runs", "resume", plain, "--args", json.dumps({"token": TOKEN}))
    assert again.returncode == 1 and "is failed, not interrupted" in again.stderr

    async with httpx.AsyncClient(timeout=60) as client:
        answer = await client.post(
            f"{second.api}/runs/{runs['durable_safe']}/resume", json={"arguments": {"token": TOKEN}}
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["isError"] is False, answer.text
    assert step_statuses(answer.json()["_meta"]["toolweave"]["steps"]) == dict.fromkeys(
        ("first", "second", "third", "last"), "completed"
    )

    # what the backend saw: each completed step once, the non-idempotent in-flight step once (before the
    # kill), the idempotent and the retrying ones twice, the steps after them once
    assert await started(durable_server, f"{tag}-first") == ["write", "write"]  # one per workflow
    assert sorted(await started(durable_server, f"{tag}-second")) == ["put", "put", "write"]
    assert await started(durable_server, f"{tag}-third") == ["write", "write"]
    assert await started(durable_server, f"{tag}-last") == ["write"]
    for label, count in (("first", 2), ("last", 1)):  # the secret: the callers', then the resume's
        found = (await backend(durable_server, "calls", label=f"{tag}-{label}"))["calls"]
        assert [entry["token_length"] for entry in found] == [len(TOKEN)] * count

    final = {run["tool"]: run for run in await second.runs()}
    assert final["durable_plain"]["status"] == "failed" and final["durable_safe"]["status"] == "completed"
    await assert_no_plaintext(database)


def _runs_in_db(config: Path) -> list[dict[str, Any]]:
    listed = toolweave_here("runs", "--json", "-c", str(config))
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


# -- the CLI's own refusals (no gateway needed) -----------------------------------------------------------


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [("{token:", "--args is not valid JSON"), ("[1]", "--args must be a JSON object, got list")],
)
def test_malformed_args_are_a_usage_error(args: str, message: str, tmp_path: Path) -> None:
    done = runner.invoke(cli_app, ["runs", "resume", "r1", "--args", args, "-c", str(tmp_path / "none.yaml")])
    assert done.exit_code == 2 and message in done.stderr and done.stdout == ""


def test_unknown_and_unfinished_runs_are_refused_before_any_backend_starts(
    database: str, tmp_path: Path, env: dict[str, str]
) -> None:
    config = tmp_path / "toolweave.yaml"
    unreachable = {**gateway_config(database, "http://127.0.0.1:9/mcp")}
    config.write_text(yaml.safe_dump(unreachable, sort_keys=False))
    record = crashed_run("durable_plain", "t", status="completed")

    async def seed() -> None:
        async with Database.from_url(database) as db:
            await SqlRunStore(db).finish_run(record)

    asyncio.run(seed())
    unknown = runner.invoke(cli_app, ["runs", "resume", "nope", "-c", str(config)])
    assert unknown.exit_code == 1 and "run 'nope' not found" in unknown.stderr
    finished = runner.invoke(cli_app, ["runs", "resume", record.id, "-c", str(config)])
    assert finished.exit_code == 1 and "is completed, not interrupted" in finished.stderr
