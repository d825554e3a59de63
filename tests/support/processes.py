"""Child processes and waiting: free loopback ports, the test MCP servers over HTTP, conditions."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from support.paths import APISERVER, HEADERSERVER, PYTHON, SERVERS, TESTSERVER


async def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    """Poll a condition (a backend's status, a catalog change) until it holds.

    It returns as soon as it holds; the timeout only bounds a failure. 30 s, not 5: conditions that
    hold within milliseconds on an idle machine took over 5 s in a whole run at load ~12 (test_relays'
    log after a call, a cancelled call leaving the backend), failing tests on the clock."""
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
def http_server(
    script: Path, port: int | None = None, **env: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A test MCP server script (`--http PORT`) serving streamable HTTP on loopback; yields (url, process)."""
    port = port or free_port()
    process = subprocess.Popen(
        [PYTHON, str(script), "--http", str(port)],
        env=subprocess_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        stop_process(process)


@contextlib.contextmanager
def http_testserver(port: int | None = None, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """tests/servers/testserver.py serving streamable HTTP on loopback; yields (url, process)."""
    with http_server(TESTSERVER, port, **env) as found:
        yield found


@contextlib.contextmanager
def header_server() -> Iterator[str]:
    """tests/servers/headerserver.py on loopback (it echoes request headers); yields its MCP URL."""
    with http_server(HEADERSERVER) as (url, _process):
        yield url


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


def stop_process(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@contextlib.contextmanager
def oauth_server() -> Iterator[str]:
    """tests/servers/oauthserver.py (an MCP server behind its own OAuth authorization server) on
    loopback; yields its MCP URL. Waits longer than other servers: it imports the SDK and Starlette."""
    port = free_port()
    process = subprocess.Popen(
        [PYTHON, str(SERVERS / "oauthserver.py"), "--http", str(port)],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, timeout=60)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)
