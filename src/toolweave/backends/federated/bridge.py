"""`toolweave federate`: any stdio MCP server, connected out to a gateway as a federated client.

The bridge relays MCP messages between the gateway's socket and the server's
stdin/stdout, one JSON message per frame and per line. Each connection gets a
fresh server process (a server accepts one `initialize`), so a reconnect is a
clean start. The bridge itself answers the gateway's heartbeat `ping` (it is
the bridge that must be alive; a busy server stays connected), adds tracing
metadata to the tools the server lists, and reads the gateway's answer to the
registration. When the server exits, the connection is closed (1011) and the
bridge reconnects with a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Sequence
from typing import Any

import orjson

from toolweave.backends.federated import protocol
from toolweave.backends.federated.client import Registration, connect_forever, socket_url
from toolweave.common_types import object_at

logger = logging.getLogger("toolweave.federation.bridge")

LINE_LIMIT = 16 << 20
STOP_GRACE = 3.0


class StdioBridge:
    """Relays one gateway connection at a time to a fresh `command` process."""

    def __init__(
        self,
        gateway: str,
        key: str | None,
        command: Sequence[str],
        *,
        namespace: str,
        toolkit: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        if not command:
            raise ValueError("give the command of a stdio MCP server after --")
        self.url = socket_url(gateway, namespace)
        self.key = key
        self.command = list(command)
        self.namespace = namespace
        self.toolkit = toolkit
        self.env = env
        self.registration: Registration | None = None
        self._stop = asyncio.Event()

    async def run(self) -> None:
        """Serve until `stop()`; `FederationRefused` when the gateway refuses for good."""
        await connect_forever(self.url, self.key, self._serve, max_frame_bytes=LINE_LIMIT, stop=self._stop)

    def stop(self) -> None:
        self._stop.set()

    async def _serve(self, socket: Any) -> Registration | None:
        process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
            env={**os.environ, **(self.env or {})},
        )
        relay = _Relay(self, socket, process)
        try:
            await relay.run()
        finally:
            await _stop_process(process)
        self.registration = relay.registration
        return relay.registration


class _Relay:
    def __init__(self, bridge: StdioBridge, socket: Any, process: asyncio.subprocess.Process) -> None:
        self.bridge = bridge
        self.socket = socket
        self.process = process
        self.registration: Registration | None = None
        self._listing: set[Any] = set()
        """Ids of the gateway's `tools/list` requests (their answers get tracing metadata)."""

    async def run(self) -> None:
        down = asyncio.create_task(self._gateway_to_server())
        up = asyncio.create_task(self._server_to_gateway())
        try:
            done, _ = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
            if up in done:  # the server's stdout ended: it exited
                code = await self.process.wait()
                reason = f"the local MCP server exited (code {code})"
                logger.warning("federation bridge: %s", reason)
                with contextlib.suppress(Exception):
                    await self.socket.close(protocol.INTERNAL, reason)
        finally:
            for task in (down, up):
                task.cancel()
            await asyncio.gather(down, up, return_exceptions=True)

    async def _gateway_to_server(self) -> None:
        from websockets.exceptions import ConnectionClosed

        stdin = self.process.stdin
        assert stdin is not None
        with contextlib.suppress(ConnectionClosed):
            async for frame in self.socket:
                message = orjson.loads(frame)
                if await self._handled_here(message):
                    continue
                stdin.write(orjson.dumps(message) + b"\n")
                await stdin.drain()

    async def _handled_here(self, message: dict[str, Any]) -> bool:
        method = message.get("method")
        if method == "ping" and "id" in message:
            await self.socket.send(protocol.response(message["id"], {}))
            return True
        if method == protocol.REGISTRATION:
            self._registered(message.get("params") or {})
            return True
        if method == "tools/list" and "id" in message:
            self._listing.add(message["id"])
        return False

    def _registered(self, params: dict[str, Any]) -> None:
        self.registration = Registration.from_params(params)
        if self.registration.accepted:
            logger.info("federation bridge: registered %s", ", ".join(self.registration.tools))
        else:
            for problem in self.registration.problems:
                logger.error(
                    "federation bridge: refused: %s: %s",
                    problem.get("path") or "(manifest)",
                    problem.get("message"),
                )

    async def _server_to_gateway(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # longer than the limit: the gateway would refuse it anyway
                logger.error("federation bridge: the server wrote a line over %d bytes; dropped", LINE_LIMIT)
                continue
            if not line:
                return
            try:
                message = orjson.loads(line)
            except orjson.JSONDecodeError:
                logger.warning(
                    "federation bridge: the server wrote a non-JSON line to stdout: %r", line[:200]
                )
                continue
            if isinstance(message, dict) and message.get("id") in self._listing and "result" in message:
                self._listing.discard(message["id"])
                self._add_meta(message["result"])
            await self.socket.send(orjson.dumps(message).decode())

    def _add_meta(self, result: Any) -> None:
        """Every listed tool says where it runs: the tool's name in this command, and the toolkit."""
        tools = result.get("tools") if isinstance(result, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict):
                continue
            meta = object_at(tool, "_meta")
            found = {
                "handler": str(tool.get("name")),
                "source": os.path.basename(self.bridge.command[0]),
                "toolkit": self.bridge.toolkit,
            }
            meta.setdefault(protocol.META_KEY, {k: v for k, v in found.items() if v is not None})
            tool["_meta"] = meta


async def _stop_process(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), STOP_GRACE)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
