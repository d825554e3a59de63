"""Federated clients for tests: the CLI bridge and the Python API as subprocesses, a raw socket client.

A served gateway is an `ApiApp` (the `make_app`/`sqlite_app` factories) put on a real
loopback port with `serve_asgi(..., lifespan="off")` (the factory has started its
runtime already); clients connect to it like any client on the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson

from support.paths import PYTHON, SERVERS, TESTSERVER, TIME_SERVER, TOOLWEAVE
from support.processes import subprocess_env, wait_until
from support.serving import serve_asgi

FAST_HEARTBEAT = {"heartbeat_interval": 0.3, "heartbeat_timeout": 0.7, "register_timeout": 5.0}
"""`[federation]` settings that notice a silent client within about a second."""


@contextlib.asynccontextmanager
async def served(api: Any) -> AsyncIterator[str]:
    """An already started `ApiApp` on a loopback port; yields its base URL."""
    async with serve_asgi(api.app, lifespan="off") as base:
        yield base


def _start(argv: list[str], **env: str) -> subprocess.Popen[bytes]:
    # a session of its own, so `kill_group` reaches the client and the server it runs
    return subprocess.Popen(
        argv,
        env=subprocess_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


@contextlib.contextmanager
def bridge(
    base: str, key: str | None, namespace: str, *command: str, **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`toolweave federate --gateway BASE --namespace NAMESPACE -- COMMAND...` as a subprocess."""
    argv = [str(TOOLWEAVE), "federate", "--gateway", base, "--namespace", namespace, "-v"]
    if key:
        argv += ["--key", key]
    process = _start([*argv, "--", *(command or (str(TIME_SERVER),))], **env)
    try:
        yield process
    finally:
        kill_group(process, signal.SIGTERM)


def sleepy_server_command() -> tuple[str, ...]:
    """The test MCP server over stdio (its `sleep` tool makes calls that stay in flight)."""
    return (PYTHON, str(TESTSERVER))


@contextlib.contextmanager
def python_client(
    base: str, key: str | None, namespace: str, **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """tests/servers/federated_tools.py (the `@federated_tool` API) as a subprocess."""
    process = _start(
        [PYTHON, str(SERVERS / "federated_tools.py"), base, namespace], TOOLWEAVE_KEY=key or "", **env
    )
    try:
        yield process
    finally:
        kill_group(process, signal.SIGTERM)


def kill_group(process: subprocess.Popen[bytes], signum: int) -> None:
    """Signal the client and everything it started (`kill -9` when `signum` is SIGKILL)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


async def registered(gateway: Any, name: str, timeout: float = 20.0) -> None:
    await wait_until(lambda: gateway.catalog.get(name) is not None, timeout, f"{name} registered")


async def gone(gateway: Any, name: str, timeout: float = 10.0) -> None:
    await wait_until(lambda: gateway.catalog.get(name) is None, timeout, f"{name} gone")


def stderr_of(process: subprocess.Popen[bytes]) -> str:
    """What a finished client printed (its reasons and problems)."""
    assert process.stderr is not None
    return process.stderr.read().decode(errors="replace")


class RawClient:
    """A hand-driven client socket: answers the handshake with the tools it is given, or misbehaves."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.registration: dict[str, Any] | None = None

    async def register(self, tools: list[dict[str, Any]]) -> dict[str, Any]:
        """Answer `initialize` and `tools/list`; the gateway's registration notification."""
        while True:
            message = orjson.loads(await self.socket.recv())
            method, request_id = message.get("method"), message.get("id")
            if method == "initialize":
                await self.answer(
                    request_id,
                    {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "raw", "version": "1"},
                    },
                )
            elif method == "tools/list":
                await self.answer(request_id, {"tools": tools})
            elif method == "notifications/toolweave/registration":
                self.registration = message["params"]
                return message["params"]

    async def next_message(self, timeout: float = 10.0) -> dict[str, Any]:
        """The gateway's next message that is not a heartbeat `ping` (those are answered)."""
        async with asyncio.timeout(timeout):
            while True:
                message = orjson.loads(await self.socket.recv())
                if message.get("method") != "ping":
                    return message
                await self.answer(message["id"], {})

    async def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        await self.socket.send(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).decode())

    async def closed(self, timeout: float = 10.0) -> tuple[int | None, str | None]:
        """Read (and ignore) until the gateway closes; its (code, reason)."""
        from websockets.exceptions import ConnectionClosed

        with contextlib.suppress(ConnectionClosed):
            async with asyncio.timeout(timeout):
                while True:
                    await self.socket.recv()
        return self.socket.close_code, self.socket.close_reason


@contextlib.asynccontextmanager
async def raw_client(base: str, key: str | None, namespace: str = "raw") -> AsyncIterator[RawClient]:
    from websockets.asyncio.client import connect

    from toolweave.backends.federated.client import socket_url

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with connect(
        socket_url(base, namespace), additional_headers=headers, proxy=None, max_size=None
    ) as socket:
        yield RawClient(socket)


def tool(name: str, **schema: Any) -> dict[str, Any]:
    """A tool as `tools/list` answers it."""
    return {"name": name, "description": f"{name} tool", "inputSchema": {"type": "object", **schema}}
