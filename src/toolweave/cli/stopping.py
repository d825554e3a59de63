"""How `toolweave serve` stops: uvicorn, told what a gateway is waiting for.

uvicorn alone waited silently for every connection to close (a workflow still
running, or an MCP client's open event stream: forever), and a second Ctrl-C made
it skip the app's shutdown, so asyncio cancelled the calls under a closed database
(121 lines of `CancelledError`, "Internal Server Error" to the caller, the run
recorded `cancelled` and not resumable). Here:

1. The first Ctrl-C (or SIGTERM) stops accepting connections and says what it waits
   for: the calls in flight, by name and run. Once none is left, connections that
   only listen (event streams) are closed after `STREAM_GRACE` seconds.
2. The second stops those calls now (`Gateway.stop_calls`): each caller is answered
   with an error saying the gateway is shutting down, each run is left
   `interrupted` for `toolweave runs resume`.
3. A third leaves at once, without cleaning up (runs left `running` become
   `interrupted` when the next gateway on this database sees their heartbeat stale).

The app's shutdown (backends, run store, database) always runs, and nothing prints a traceback.

sse-starlette (the MCP SDK's event streams) ends every open stream, the one a call's answer is
coming on included, within half a second of the first signal, its "graceful drain": the caller got
"SSE stream ended without a response" while the gateway waited for its call. It is turned off while
`serve` runs; streams end (`AppStatus.should_exit`) once no call is left in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable
from typing import Any

import uvicorn
from sse_starlette.sse import AppStatus

from toolweave.executor.in_flight import CallInFlight
from toolweave.gateway import Gateway

STREAM_GRACE = 1.0
"""Seconds after the last call in flight ended that connections still open (event streams) are closed."""
POLL = 0.1
TICK = 1.0
"""Seconds between two ticks of uvicorn's main loop (its `date` header; uvicorn's own: 0.1)."""


class GatewayServer(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        gateway: Gateway,
        say: Callable[[str], None],
        on_shutdown: Callable[[], None] | None = None,
    ) -> None:
        self._should_exit = False
        self._exit_asked: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        super().__init__(config)
        self.gateway = gateway
        self.say = say
        """Tells the operator (the terminal, or a JSON log line under `--log-json`)."""
        self.on_shutdown = on_shutdown
        self._signals = 0
        self.stopped_by: int | None = None
        """The signal that stopped this server (the first one), else None."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        AppStatus.enable_automatic_graceful_drain = False
        try:
            await super().serve(sockets)
        finally:  # process-wide flags: as they were, for another server in this process
            AppStatus.should_exit = False
            AppStatus.enable_automatic_graceful_drain = True

    @property
    def should_exit(self) -> bool:
        """uvicorn's flag (set by a signal, a failed start-up, a test); setting it wakes `main_loop`."""
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value  # from a signal handler too: the loop is woken thread-safely
        if value and self._exit_asked is not None and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._exit_asked.set)

    async def main_loop(self) -> None:
        """uvicorn's loop, woken once a second (the `date` header) or when asked to stop, not ten times a
        second: an idle gateway, and one between calls, wakes ~9 times a second less."""
        self._loop = asyncio.get_running_loop()
        self._exit_asked = asked = asyncio.Event()
        counter = 0  # uvicorn's on_tick refreshes the `date` header when the counter is a multiple of 10
        while not await self.on_tick(counter):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK):
                    await asked.wait()
            counter += 10

    def handle_exit(self, sig: int, frame: Any) -> None:
        """A signal handler (between two bytecodes of the loop's thread): only flags and callbacks."""
        self._signals += 1
        if self._signals == 1:
            self.stopped_by = sig
            super().handle_exit(sig, frame)
        elif self._signals == 2 and self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop_calls)
        else:
            os.write(2, b"toolweave: stopped at once, without closing its backends or its database\n")
            os._exit(130)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_shutdown is not None:
            self.on_shutdown()
        calls = self.gateway.calls_in_flight()
        if calls:
            self.say(
                f"stopping: waiting for {_count(calls)} in flight to finish: {_listed(calls)}. "
                f"Press Ctrl-C again to stop {'them' if len(calls) > 1 else 'it'} now (runs are left "
                "interrupted; `toolweave runs resume ID` continues them)."
            )
        closer = asyncio.create_task(self._close_streams_when_idle())
        try:
            await super().shutdown(sockets)
        finally:
            closer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await closer
        lifespan = getattr(self, "lifespan", None)
        done = getattr(lifespan, "shutdown_event", None)
        if lifespan is not None and done is not None and not done.is_set():
            await lifespan.shutdown()  # skipped by uvicorn once connections were dropped: the app's own stop

    def _stop_calls(self) -> None:
        calls = self.gateway.calls_in_flight()
        if not calls:
            return
        self.say(f"stopping {_count(calls)} now: {_listed(calls)}; runs are left interrupted.")
        self.gateway.stop_calls()

    async def _close_streams_when_idle(self) -> None:
        """Once no call is in flight, what still holds a connection open only listens (an MCP event
        stream, which ends with the app): stop waiting for it."""
        while self.gateway.calls_in_flight():  # noqa: ASYNC110 - no event says the last call ended
            await asyncio.sleep(POLL)
        AppStatus.should_exit = True  # sse-starlette ends its streams (within its 0.5 s poll)
        await asyncio.sleep(STREAM_GRACE)
        self.force_exit = True


def _count(calls: list[CallInFlight]) -> str:
    return f"{len(calls)} call{'s' if len(calls) != 1 else ''}"


def _listed(calls: list[CallInFlight]) -> str:
    shown = [f"{call.name} (run {call.run_id})" if call.run_id else call.name for call in calls[:5]]
    more = f" and {len(calls) - 5} more" if len(calls) > 5 else ""
    return ", ".join(shown) + more
