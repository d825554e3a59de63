"""MCP backends against real servers: our test server and `mcp-server-time` over stdio, streamable HTTP on
loopback, and every way a backend can go wrong (missing command, refused URL, crash, garbage, slowness)."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import SERVER_INFO_META_KEY
from starlette.responses import PlainTextResponse

from support.configs import http_backend, stdio_backend, time_backend
from support.paths import PYTHON, SERVERS
from support.processes import free_port, http_testserver, wait_until
from support.results import text
from support.serving import serve_asgi
from toolweave.backends import mcp as mcp_module
from toolweave.backends.mcp import MCPBackend
from toolweave.config import BackendConfig

OpenBackend = Callable[..., Awaitable[MCPBackend]]


@pytest.fixture
async def open_backend() -> AsyncIterator[OpenBackend]:
    """`await open_backend(entry)` → a started MCPBackend after its first connection attempt; stopped after."""
    started: list[MCPBackend] = []

    async def open_(entry: dict[str, Any], wait: float = 10.0) -> MCPBackend:
        backend = MCPBackend(BackendConfig.model_validate(entry))
        started.append(backend)
        await backend.start()
        await backend.wait_ready(wait)
        return backend

    yield open_
    await asyncio.gather(*(backend.stop() for backend in started))


def names(backend: MCPBackend) -> set[str]:
    return {tool.name for tool in backend.tools}


# -- good backends -------------------------------------------------------------------


async def test_stdio_backend_lists_tools_resources_and_prompts(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend())
    assert backend.status == "connected" and backend.last_error is None and backend.connected_at is not None
    assert {"echo", "add", "search", "sleep", "fail", "crash", "garbage", "add_tool"} <= names(backend)
    assert [r.name for r in backend.resources] == ["readme"]
    assert [t.name for t in backend.resource_templates] == ["item"]
    assert [p.name for p in backend.prompts] == ["greet"]
    described = backend.describe()
    assert described["status"] == "connected" and described["transport"] == "stdio"
    assert described["tools"] == len(backend.tools) and described["prompts"] == 1


async def test_results_and_tool_errors_pass_through(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend())
    added = await backend.call_tool("add", {"a": 2, "b": 3})
    assert not added.is_error and added.structured_content == {"sum": 5}
    failed = await backend.call_tool("fail", {"message": "disk full"})
    assert failed.is_error and "disk full" in text(failed)
    # the backend's own identity stamp is not passed on: to clients, the gateway is the server
    assert SERVER_INFO_META_KEY not in (added.meta or {})
    assert backend.status == "connected"


async def test_resources_and_prompts_are_read_through_the_backend(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend())
    readme = await backend.read_resource("test://readme")
    assert readme.contents[0].text == "readme of testserver"
    item = await backend.read_resource("test://items/42")
    assert item.contents[0].text == "item 42 of testserver"
    prompt = await backend.get_prompt("greet", {"name": "Ada"})
    assert prompt.messages[0].content.text == "Say hello to Ada, from testserver."
    assert SERVER_INFO_META_KEY not in (prompt.meta or {})


async def test_env_reaches_the_subprocess(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend(env={"TESTSERVER_NAME": "custom-name"}))
    result = await backend.call_tool("search", {"query": "q"})
    assert text(result).startswith("custom-name results")


async def test_big_results(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend())
    result = await backend.call_tool("big", {"kilobytes": 2048})
    assert not result.is_error and len(text(result)) == 2048 * 1024


async def test_mcp_server_time_a_server_nobody_here_wrote(open_backend: OpenBackend) -> None:
    backend = await open_backend(time_backend())
    assert backend.status == "connected", backend.last_error
    assert {"get_current_time", "convert_time"} <= names(backend)
    now = await backend.call_tool("get_current_time", {"timezone": "UTC"})
    assert not now.is_error and now.structured_content["timezone"] == "UTC"
    converted = await backend.call_tool(
        "convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    )
    assert not converted.is_error and converted.structured_content["target"]["datetime"].endswith("+09:00")
    bad = await backend.call_tool("get_current_time", {"timezone": "Mars/Olympus_Mons"})
    assert bad.is_error and "Mars/Olympus_Mons" in text(bad)
    assert backend.status == "connected"


async def test_streamable_http_backend(open_backend: OpenBackend, http_server_url: str) -> None:
    backend = await open_backend(http_backend("remote", http_server_url))
    assert backend.status == "connected", backend.last_error
    assert backend.describe()["transport"] == "http"
    result = await backend.call_tool("search", {"query": "over http"})
    assert text(result) == "httpserver results for 'over http' (limit 3)"
    assert (await backend.read_resource("test://readme")).contents[0].text == "readme of httpserver"


@pytest.fixture
async def guarded_url() -> AsyncIterator[str]:
    """The test server's streamable HTTP app in-process, behind a check of `Authorization: Bearer s3cret`."""
    import testserver  # tests/servers is on sys.path

    inner = testserver.server.streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != b"Bearer s3cret":
            await PlainTextResponse("who are you?", status_code=401)(scope, receive, send)
            return
        await inner(scope, receive, send)

    async with serve_asgi(guarded, lifespan="auto", timeout_graceful_shutdown=1) as base:
        yield f"{base}/mcp"


async def test_http_headers_carry_credentials(
    guarded_url: str, open_backend: OpenBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TW_TEST_TOKEN", "s3cret")
    from toolweave.config import parse_config

    entry = parse_config(
        {
            "backends": [
                http_backend("guarded", guarded_url, headers={"Authorization": "Bearer ${TW_TEST_TOKEN}"})
            ]
        }
    ).backends[0]
    backend = await open_backend(entry.model_dump())
    assert backend.status == "connected", backend.last_error
    assert text(await backend.call_tool("echo", {"text": "let in"})) == "let in"


@pytest.mark.parametrize("headers", [{"Authorization": "Bearer wrong"}, {}], ids=["wrong-token", "no-token"])
async def test_http_credentials_refused(
    guarded_url: str, open_backend: OpenBackend, headers: dict[str, str]
) -> None:
    backend = await open_backend(http_backend("guarded", guarded_url, headers=headers))
    assert backend.status in ("failed", "reconnecting")
    assert backend.last_error == (
        "the server answered HTTP 401 Unauthorized (check the backend's headers and credentials)"
    )


# -- bad backends ----------------------------------------------------------------------


async def test_a_command_that_does_not_exist(open_backend: OpenBackend, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    backend = await open_backend({"name": "ghost", "command": missing})
    assert backend.status in ("failed", "reconnecting")
    assert backend.last_error == f"command not found: {missing}"
    result = await backend.call_tool("anything", {})
    assert result.is_error
    assert text(result) == (
        f"backend 'ghost' is unavailable ({backend.status}: command not found: {missing}); "
        "the gateway is reconnecting, try again shortly"
    )


async def test_a_command_that_exits_at_once(open_backend: OpenBackend) -> None:
    backend = await open_backend(
        {"name": "quitter", "command": PYTHON, "args": ["-c", "raise SystemExit(3)"]}
    )
    assert backend.status in ("failed", "reconnecting")
    assert "Connection closed" in (backend.last_error or "")


async def test_a_url_that_refuses_connections(open_backend: OpenBackend) -> None:
    backend = await open_backend(http_backend("closed", f"http://127.0.0.1:{free_port()}/mcp"))
    assert backend.status in ("failed", "reconnecting")
    assert (backend.last_error or "").startswith("cannot connect:")
    result = await backend.call_tool("echo", {"text": "x"})
    assert result.is_error and "backend 'closed' is unavailable" in text(result)


async def test_a_url_that_is_not_an_mcp_endpoint(open_backend: OpenBackend, http_server_url: str) -> None:
    backend = await open_backend(http_backend("wrong", http_server_url.replace("/mcp", "/nothing-here")))
    assert backend.status in ("failed", "reconnecting")
    assert backend.last_error == (
        "the server answered HTTP 404 Not Found (is the url the server's MCP endpoint, e.g. ending in /mcp?)"
    )


async def test_connect_timeout(open_backend: OpenBackend) -> None:
    # reads requests, never answers, and exits when its stdin closes
    silent = {
        "name": "silent",
        "command": PYTHON,
        "args": ["-c", "import sys; sys.stdin.read()"],
        "connect_timeout": "300ms",
    }
    backend = await open_backend(silent)
    assert backend.status in ("failed", "reconnecting")
    assert backend.last_error == "timed out while connecting"


async def test_crash_mid_call_then_the_backend_restarts(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend())
    await backend.call_tool("increment", {"by": 5})
    crashed = await backend.call_tool("crash", {})
    assert crashed.is_error
    assert text(crashed).startswith("backend 'ts' is unavailable (connection lost:")
    assert "reconnecting" in text(crashed)
    await wait_until(lambda: backend.status != "connected", what="crash noticed")
    await wait_until(lambda: backend.status == "connected", what="reconnected")
    counter = await backend.call_tool("counter", {})
    assert counter.structured_content == {"value": 0}  # a fresh process: the counter started over
    assert not (await backend.call_tool("echo", {"text": "back"})).is_error


async def test_garbage_on_stdout_does_not_break_the_session(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend())
    await backend.call_tool("increment", {"by": 2})
    result = await backend.call_tool("garbage", {})
    assert not result.is_error and text(result) == "answered after garbage"
    assert (await backend.call_tool("counter", {})).structured_content == {"value": 2}  # same process
    assert backend.status == "connected"


async def test_malformed_answers_from_a_hand_written_server(open_backend: OpenBackend) -> None:
    """tests/servers/rawserver.py answers with a wrong result shape, a JSON-RPC error, and bare noise."""
    backend = await open_backend(
        {"name": "raw", "command": PYTHON, "args": [str(SERVERS / "rawserver.py")], "timeout": "500ms"}
    )
    assert backend.status == "connected", backend.last_error
    assert backend._client is not None and backend._client.protocol_version == "2025-11-25"  # fell back
    bad = await backend.call_tool("bad_shape", {})
    assert bad.is_error and text(bad) == (
        "backend 'raw' returned an invalid answer for 'bad_shape': content: Input should be a valid list; "
        "isError: Input should be a valid boolean, unable to interpret input"
    )
    refused = await backend.call_tool("error_reply", {})
    assert (
        refused.is_error
        and text(refused) == "backend 'raw' rejected the call to 'error_reply': the backend exploded"
    )
    silent = await backend.call_tool("noise", {})
    assert silent.is_error and "timed out after 0.5s" in text(silent)
    assert text(await backend.call_tool("ok", {})) == "fine"  # the session survived all three
    assert backend.status == "connected"


async def test_timeout_per_backend_and_per_call(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend(timeout="300ms"))
    slow = await backend.call_tool("sleep", {"seconds": 5})
    assert slow.is_error
    assert (
        text(slow)
        == "tool 'sleep' on backend 'ts' timed out after 0.3s; try again, or with a smaller request"
    )
    quick = await backend.call_tool("sleep", {"seconds": 0.5}, timeout=3)
    assert not quick.is_error  # a per-call timeout wins over the backend's
    assert not (await backend.call_tool("echo", {"text": "still here"})).is_error
    assert backend.status == "connected"


def max_overlap(spans: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


async def test_max_concurrency_caps_calls_in_flight(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend(max_concurrency=2))
    results = await asyncio.gather(*(backend.call_tool("sleep", {"seconds": 0.2}) for _ in range(5)))
    spans = [(r.structured_content["start"], r.structured_content["end"]) for r in results]
    assert max_overlap(spans) == 2


async def test_without_a_cap_calls_run_concurrently(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend())
    results = await asyncio.gather(*(backend.call_tool("sleep", {"seconds": 0.3}) for _ in range(4)))
    assert max_overlap([(r.structured_content["start"], r.structured_content["end"]) for r in results]) == 4


# -- list changes and restarts ----------------------------------------------------------


async def test_list_changed_refreshes_the_tools(open_backend: OpenBackend) -> None:
    backend = await open_backend(stdio_backend())
    changes: list[str] = []
    backend.on_change(lambda b: changes.append(b.name))
    assert not (await backend.call_tool("add_tool", {"name": "fresh_tool"})).is_error
    await wait_until(lambda: bool(changes), what="change announced")
    assert "fresh_tool" in names(backend) and set(changes) == {"ts"}
    assert text(await backend.call_tool("fresh_tool", {})) == "I am fresh_tool"


async def test_list_changed_from_a_handshake_era_server(
    open_backend: OpenBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_module, "Client", functools.partial(Client, mode="legacy"))
    backend = await open_backend(stdio_backend())
    assert backend._client is not None and backend._client.protocol_version == "2025-11-25"
    await backend.call_tool("add_tool", {"name": "legacy_tool"})
    await wait_until(lambda: "legacy_tool" in names(backend), what="refreshed tool list")


async def test_http_backend_survives_a_server_restart(open_backend: OpenBackend) -> None:
    port = free_port()
    with http_testserver(port) as (url, _process):
        backend = await open_backend(http_backend("remote", url))
        assert backend.status == "connected"
    # the server is gone
    down = await backend.call_tool("echo", {"text": "anyone?"})
    assert down.is_error and "backend 'remote'" in text(down)
    await wait_until(lambda: backend.status != "connected", what="outage noticed")
    with http_testserver(port):
        await wait_until(lambda: backend.status == "connected", what="reconnected")
        assert text(await backend.call_tool("echo", {"text": "back"})) == "back"


def _children() -> set[int]:
    """Live child processes of this test process (Linux /proc)."""
    found = set()
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
async def test_stop_ends_the_subprocess(open_backend: OpenBackend) -> None:
    before = _children()
    backend = await open_backend(stdio_backend())
    assert _children() - before, "the backend runs as a child process"
    await backend.stop()
    assert backend.status == "stopped"
    await wait_until(lambda: not (_children() - before), what="child process gone")
    result = await backend.call_tool("echo", {"text": "x"})
    assert result.is_error and "unavailable (stopped" in text(result)


async def test_a_cancelled_supervisor_ends_even_when_the_transport_turns_the_cancel_into_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transport's task group can turn the cancellation of a connecting backend into its own error
    (an `ExceptionGroup` of the connect failure): the supervisor must still end, not swallow the
    cancel and retry forever (an event loop shutting down waited on it until a timeout)."""
    connecting = asyncio.Event()

    async def open_client(self: MCPBackend) -> Any:
        connecting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionError("connect failed while the task group was cancelled") from None

    monkeypatch.setattr(MCPBackend, "_open_client", open_client)
    backend = MCPBackend(BackendConfig.model_validate({"name": "remote", "url": "http://127.0.0.1:9/mcp"}))
    await backend.start()
    await asyncio.wait_for(connecting.wait(), 10)
    task = backend._task
    assert task is not None
    task.cancel()  # as asyncio.Runner.close cancels what is left, without stop()
    try:
        await asyncio.wait({task}, timeout=10)
        assert task.done(), "the supervisor swallowed its cancellation and went on retrying"
        assert task.cancelled()
    finally:
        await backend.stop()
