"""`GatewayServer.main_loop`: uvicorn's loop ticks once a second (the `date` header) instead of ten
times, and whatever asks it to stop (a signal handler, a failed start-up, another thread) wakes it at
once. In process: no server is started, only the loop under test."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import pytest
import uvicorn
from sse_starlette.sse import AppStatus

from toolweave.cli import stopping
from toolweave.cli.stopping import GatewayServer
from toolweave.gateway import Gateway


async def _app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("no request is served here")


def _server() -> GatewayServer:
    config = uvicorn.Config(_app, log_level="warning")
    config.load()
    return GatewayServer(config, cast(Gateway, None), say=lambda _line: None)


@pytest.fixture(autouse=True)
def _an_hour_per_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick longer than any test: only the wake-up can end the loop."""
    monkeypatch.setattr(stopping, "TICK", 3600.0)


@pytest.fixture(autouse=True)
def _sse_flags_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """sse-starlette's `AppStatus` is process-wide and its `handle_exit` is uvicorn's: a signal handled
    outside `serve()` (which turns the drain off) sets `should_exit`, and every SSE stream this worker
    serves afterwards would end at once. Restored after each test."""
    monkeypatch.setattr(AppStatus, "should_exit", AppStatus.should_exit)
    monkeypatch.setattr(
        AppStatus, "enable_automatic_graceful_drain", AppStatus.enable_automatic_graceful_drain
    )


async def _ticking(server: GatewayServer) -> asyncio.Task[None]:
    """The loop, running, once its first tick is over (it now waits for the next or a wake-up)."""
    ticked = asyncio.Event()
    on_tick = server.on_tick

    async def tick(counter: int) -> bool:
        stop = await on_tick(counter)
        ticked.set()
        return stop

    setattr(server, "on_tick", tick)  # noqa: B010 - an instance's method replaced for the test
    loop = asyncio.create_task(server.main_loop())
    await ticked.wait()
    return loop


async def test_setting_should_exit_wakes_the_loop() -> None:
    server = _server()
    loop = await _ticking(server)
    await asyncio.sleep(0.05)
    assert not loop.done()
    server.should_exit = True
    await asyncio.wait_for(loop, 30)


async def test_should_exit_set_from_another_thread_wakes_the_loop() -> None:
    server = _server()
    loop = await _ticking(server)
    setter = threading.Thread(target=setattr, args=(server, "should_exit", True))
    setter.start()
    setter.join()
    await asyncio.wait_for(loop, 30)


async def test_a_signal_wakes_the_loop() -> None:
    server = _server()
    loop = await _ticking(server)
    server.handle_exit(2, None)  # what the SIGINT handler runs
    await asyncio.wait_for(loop, 30)


async def test_already_asked_to_stop_the_loop_returns_at_once() -> None:
    server = _server()
    server.should_exit = True
    await asyncio.wait_for(server.main_loop(), 30)


async def test_each_tick_refreshes_the_date_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopping, "TICK", 0.01)
    server = _server()
    ticks: list[int] = []
    on_tick = server.on_tick

    async def counted(counter: int) -> bool:
        ticks.append(counter)
        return len(ticks) >= 3 or await on_tick(counter)

    monkeypatch.setattr(server, "on_tick", counted)
    await asyncio.wait_for(server.main_loop(), 30)
    assert all(counter % 10 == 0 for counter in ticks)  # uvicorn refreshes `date` on these
    assert len(ticks) == 3
