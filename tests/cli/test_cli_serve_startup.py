"""`toolweave serve` start-up: the port is checked before anything else, the gateway listens before its
backends are up, and each backend's tools appear (announced with list_changed) as it connects."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from mcp import Client

from support.configs import python_backend, stdio_backend
from support.fixtures import WriteConfig
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from support.results import text
from toolweave.cli.serve import listen_or_exit

WAITING = 1.0
"""Seconds a call (or a REST request) sent while the slow backend is held back must stay unanswered."""


def slow_backend(gate: Path) -> dict[str, object]:
    """The test server, held back until the test creates `gate` (TESTSERVER_START_GATE): slow to start
    for exactly as long as the test needs, however loaded the machine (a fixed nap was 8-20 s here)."""
    return stdio_backend("slow", env={"TESTSERVER_START_GATE": str(gate)}, connect_timeout="120s")


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return {"database": f"sqlite:///{tmp_path / 'toolweave.db'}"}


def serve(path: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(TOOLWEAVE), "serve", "-c", str(path), *args],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def names(tools: list[object]) -> set[str]:
    return {tool.name for tool in tools}  # type: ignore[attr-defined]


async def test_serve_listens_before_a_slow_backend_and_announces_its_tools_when_it_connects(
    write_config: WriteConfig, gateway: dict[str, str], tmp_path: Path
) -> None:
    gate = tmp_path / "slow-may-start"
    slow = slow_backend(gate)
    both = {"name": "echo_both", "tools": ["slow/echo", "py/greet"]}  # names a tool of the slow backend
    # a listing waits for a backend's first attempt at most startup_timeout from start: the slow one is held
    settings = {**gateway, "startup_timeout": "1s"}
    path = write_config(
        {"gateway": settings, "backends": [slow, python_backend()], "composite_tools": [both]}
    )
    port = free_port()
    process = serve(path, "--port", str(port))
    try:
        await asyncio.to_thread(wait_for_port, port, process, 30)
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="auto") as client:
            first = names((await client.list_tools()).tools)
            assert "py__greet" in first, "a backend that is up is served at once"
            assert "slow__echo" not in first, "the gateway did not wait for the slow backend"
            async with client.listen(tools_list_changed=True) as changes:
                gate.touch()
                while "slow__echo" not in names((await client.list_tools()).tools):
                    async with asyncio.timeout(60):
                        await anext(aiter(changes))
    finally:
        gate.touch()
        stop_process(process)
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert f"MCP at http://127.0.0.1:{port}/mcp" in stderr
    assert "✓ slow (stdio)" in stderr and "✓ py (python)" in stderr, stderr
    assert "session manager started" not in stderr, "the SDK's start-up chatter is not shown at info"
    assert "catalog:" not in stderr, "no problem is reported for a backend that is only slow to start"


def test_a_busy_port_is_reported_at_once_naming_the_option(
    write_config: WriteConfig, gateway: dict[str, str], tmp_path: Path
) -> None:
    started = tmp_path / "backend-started"
    spy = {"name": "spy", "command": "sh", "args": ["-c", f"touch {started}; sleep 30"]}
    path = write_config({"gateway": gateway, "backends": [spy]})
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [str(TOOLWEAVE), "serve", "--port", str(port), "-c", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            env=subprocess_env(),
        )
    message = done.stderr.replace("\n", " ")
    assert done.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in message
    assert "--port N" in message and "(this one came from --port" in message
    assert "Errno" not in message and "listening" not in message
    assert not started.exists(), "the port is checked before any backend is started"


def test_a_busy_port_from_the_config_says_where_it_came_from(
    write_config: WriteConfig, gateway: dict[str, str]
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = write_config({"gateway": {**gateway, "port": port}, "backends": [python_backend()]})
        done = subprocess.run(
            [str(TOOLWEAVE), "serve", "-c", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            env=subprocess_env(),
        )
    message = done.stderr.replace("\n", " ")
    assert done.returncode == 1
    assert "gateway.port in the config" in message and "--port N" in message


async def test_a_call_to_a_backend_still_starting_waits_for_it_instead_of_failing(
    write_config: WriteConfig, gateway: dict[str, str], tmp_path: Path
) -> None:
    gate = tmp_path / "slow-may-start"
    path = write_config({"gateway": {**gateway, "startup_timeout": "120s"}, "backends": [slow_backend(gate)]})
    port = free_port()
    process = serve(path, "--port", str(port))
    try:
        await asyncio.to_thread(wait_for_port, port, process, 30)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            call = asyncio.create_task(client.call_tool("slow__echo", {"text": "worth the wait"}))
            finished, _ = await asyncio.wait({call}, timeout=WAITING)
            assert not finished, (
                f"the call waits while the backend starts: {call.result() if finished else ''}"
            )
            gate.touch()
            result = await asyncio.wait_for(call, 60)
            assert text(result) == "worth the wait"
            unknown = await client.call_tool("slow__nope", {})
            assert unknown.is_error and "unknown tool 'slow__nope'" in text(unknown)
    finally:
        gate.touch()
        stop_process(process)


async def test_a_composite_made_while_its_backend_starts_is_accepted_and_a_restart_reports_nothing(
    write_config: WriteConfig, gateway: dict[str, str], tmp_path: Path
) -> None:
    """Right after start-up a REST-made composite naming a tool of a backend still connecting waits
    for it instead of a 422 "unknown tool"; after a restart, the stored composite is not logged as
    degraded while that backend is only slow to come up."""
    gate = tmp_path / "slow-may-start"
    path = write_config({"gateway": {**gateway, "startup_timeout": "120s"}, "backends": [slow_backend(gate)]})
    router = {
        "name": "echo_router",
        "description": "Echo some text.",
        "routing": "agent_driven",
        "operations": [{"slug": "echo", "tool": "slow/echo"}],
    }
    for restart in (False, True):
        gate.unlink(missing_ok=True)  # held back again at the restart
        port = free_port()
        process = serve(path, "--port", str(port))
        try:
            await asyncio.to_thread(wait_for_port, port, process, 30)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as api:
                if not restart:
                    made = asyncio.create_task(
                        api.post("/api/v1/composite-tools", json={"definition": router})
                    )
                    finished, _ = await asyncio.wait({made}, timeout=WAITING)
                    assert not finished, f"it waits for the backend: {made.result().text if finished else ''}"
                    gate.touch()
                    created = await made
                    assert created.status_code == 201, created.text
                    assert created.json()["status"] == "active"
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    call = asyncio.create_task(
                        client.call_tool("echo_router", {"operation": "echo", "text": "hi"})
                    )
                    if restart:
                        finished, _ = await asyncio.wait({call}, timeout=WAITING)
                        assert not finished, (
                            f"the call waits for the backend: {call.result() if finished else ''}"
                        )
                        gate.touch()
                    result = await asyncio.wait_for(call, 60)
                    assert text(result) == "hi", result
                stored = (await api.get("/api/v1/composite-tools/echo_router")).json()
                assert stored["status"] == "active" and not stored.get("validationErrors"), stored
        finally:
            gate.touch()
            stop_process(process)
        stderr = process.stderr.read().decode() if process.stderr else ""
        assert "degraded" not in stderr, stderr


async def test_served_connections_send_without_nagle_delay() -> None:
    """Every accepted connection has TCP_NODELAY (asyncio sets it only when the listening socket says
    TCP): without it a response written in two parts waited ~40 ms for the client's delayed ACK."""
    listener = listen_or_exit("127.0.0.1", 0, from_option=True)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def connected(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(connected, sock=listener)
    try:
        _reader, writer = await asyncio.open_connection(*listener.getsockname()[:2])
        assert await asyncio.wait_for(accepted, 10) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


async def test_with_log_json_every_start_up_line_is_json(
    write_config: WriteConfig, gateway: dict[str, str]
) -> None:
    """The listening line and each backend's line were plain text among the JSON log lines, which a
    log shipper parsing the stream choked on."""
    path = write_config({"gateway": gateway, "backends": [python_backend()]})
    port = free_port()
    process = serve(path, "--port", str(port), "--log-json")
    try:
        await asyncio.to_thread(wait_for_port, port, process, 30)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as api:
            async with asyncio.timeout(30):
                while (await api.get("/api/v1/backends")).json()["backends"][0]["status"] != "connected":  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
    finally:
        stop_process(process)
    lines = [line for line in (process.stderr.read().decode() if process.stderr else "").splitlines() if line]
    messages = [json.loads(line)["message"] for line in lines]  # every line is a JSON object
    assert any(m.startswith(f"toolweave listening · MCP at http://127.0.0.1:{port}/mcp") for m in messages)
    assert any(m.startswith("✓ py (python):") for m in messages), messages
