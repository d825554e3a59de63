"""Helpers shared by the gateway-core tests: where the test servers are, config builders, small waits.

Importable from any test module (pytest puts `tests/` on `sys.path` for the root conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types

from toolweave import Gateway
from toolweave.backends.base import Backend
from toolweave.config import Config, parse_config

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SERVERS = TESTS / "servers"
TESTSERVER = SERVERS / "testserver.py"
PYTHON = sys.executable
BIN = Path(sys.executable).parent
TIME_SERVER = BIN / "mcp-server-time"
TOOLWEAVE = BIN / "toolweave"
PYTOOLS = "tw_pytools"
"""The in-process test module (`tests/servers/tw_pytools.py`) for `python = "..."` backends."""

OpenGateway = Callable[..., Awaitable[Gateway]]
"""The `open_gateway` fixture: `await open_gateway(config_or_dict, **Gateway options)`."""
WriteConfig = Callable[..., Path]
"""The `write_config` fixture: `write_config(data_or_text, suffix=".yaml")` → path."""
ServeGateway = Callable[..., Awaitable[str]]
"""The `serve_gateway` fixture: `url = await serve_gateway(gateway)`."""


def stdio_backend(name: str = "ts", **extra: Any) -> dict[str, Any]:
    """A `[[backends]]` entry running tests/servers/testserver.py over stdio."""
    return {"name": name, "command": PYTHON, "args": [str(TESTSERVER)], **extra}


def time_backend(name: str = "time", **extra: Any) -> dict[str, Any]:
    """The third-party `mcp-server-time` over stdio."""
    return {"name": name, "command": str(TIME_SERVER), **extra}


def python_backend(name: str = "py", module: str = PYTOOLS, **extra: Any) -> dict[str, Any]:
    return {"name": name, "python": module, **extra}


def http_backend(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "url": url, **extra}


def config(*backends: dict[str, Any], **sections: Any) -> Config:
    """A validated config from backend entries and other top-level sections."""
    raw: dict[str, Any] = {"backends": list(backends), **sections}
    parsed = parse_config(raw)
    assert parsed is not None
    return parsed


def text(result: types.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))


def names(tools: list[types.Tool]) -> list[str]:
    return [tool.name for tool in tools]


async def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll a condition (a backend's status, a catalog change) until it holds."""
    async with asyncio.timeout(timeout):
        while not predicate():  # noqa: ASYNC110 - polls state that has no event to wait on
            await asyncio.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen[Any] | None = None, timeout: float = 10.0) -> None:
    """Block until something accepts TCP connections on loopback `port`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for child processes: tests/servers importable (the python backend module)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVERS), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


@contextlib.contextmanager
def http_testserver(port: int | None = None, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """tests/servers/testserver.py serving streamable HTTP on loopback; yields (url, process)."""
    port = port or free_port()
    process = subprocess.Popen(
        [PYTHON, str(TESTSERVER), "--http", str(port)],
        env=subprocess_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


class FakeBackend(Backend):
    """A backend with a fixed tool list, for catalog tests that need no process."""

    def __init__(self, backend_config: Any, tools: list[types.Tool]) -> None:
        super().__init__(backend_config)
        self.tools = list(tools)
        self.status = "connected"
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def start(self) -> None:
        self._ready.set()

    async def stop(self) -> None:
        self._set_status("stopped")

    async def call_tool(self, name: str, arguments: dict[str, Any], **_: Any) -> types.CallToolResult:
        self.calls.append((name, arguments))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{self.name}:{name}")])


def tool(
    name: str,
    *,
    description: str = "",
    properties: dict[str, Any] | None = None,
    required: list[str] | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
) -> types.Tool:
    schema: dict[str, Any] = {"type": "object", "properties": properties or {}}
    if required:
        schema["required"] = required
    annotations = None
    if read_only is not None or destructive is not None:
        annotations = types.ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive)
    return types.Tool(name=name, description=description, input_schema=schema, annotations=annotations)


APISERVER = SERVERS / "apiserver.py"
"""A REST API with its own OpenAPI document (tests/servers/apiserver_openapi.yaml), for HTTP API backends."""


@contextlib.contextmanager
def api_testserver(port: int | None = None) -> Iterator[str]:
    """tests/servers/apiserver.py on loopback; yields its base URL (`/openapi.json` is its document)."""
    port = port or free_port()
    process = subprocess.Popen(
        [PYTHON, str(APISERVER), str(port)],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def openapi_backend(name: str, base: str, **extra: Any) -> dict[str, Any]:
    """A `[[backends]]` entry for the test API's OpenAPI document."""
    return {"name": name, "openapi": f"{base}/openapi.json", **extra}
