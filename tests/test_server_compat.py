"""Contract tests for `toolweave.server_compat`, the one home of every reach into uvicorn's and
Starlette's private API: each reach is checked under a real uvicorn server, for each of its
WebSocket implementations, so a release that moves one fails here by name.
"""

from __future__ import annotations

import asyncio
import contextlib
from importlib.metadata import version

import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from support.serving import serve_asgi
from toolweave import server_compat


def test_the_installed_uvicorn_is_the_tested_minor() -> None:
    assert version("uvicorn").startswith(server_compat.TESTED_UVICORN_MINOR + "."), (
        f"uvicorn {version('uvicorn')} is not the minor version server_compat was tested on "
        f"({server_compat.TESTED_UVICORN_MINOR}): run these tests, then move TESTED_UVICORN_MINOR"
    )


@pytest.mark.parametrize("ws", ["auto", "websockets-sansio", "websockets"])
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_drop_connection_aborts_the_tcp_connection_under_uvicorn(ws: str) -> None:
    """The server drops the socket without a closing handshake: the client sees no close frame."""
    dropped: list[bool] = []
    seen = asyncio.Event()

    async def endpoint(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.receive_text()
        dropped.append(server_compat.drop_connection(websocket))
        with contextlib.suppress(TimeoutError):  # the connection must end now, not when this returns
            await asyncio.wait_for(seen.wait(), 5)

    app = Starlette(routes=[WebSocketRoute("/ws", endpoint)])
    async with (
        serve_asgi(app, lifespan="off", ws=ws) as base,
        connect(base.replace("http://", "ws://") + "/ws") as socket,
    ):
        await socket.send("hello")
        async with asyncio.timeout(3):
            with pytest.raises(ConnectionClosed) as closed:
                await socket.recv()
        seen.set()
    assert dropped == [True], f"uvicorn ({ws}) moved: its receive or its transport is not where it was"
    assert closed.value.rcvd is None, "a close frame came: the connection was closed, not dropped"


def test_drop_connection_says_false_off_uvicorn() -> None:
    """Under another ASGI server (any `receive` not bound to a uvicorn protocol) nothing happens."""

    async def receive() -> dict[str, str]:
        return {"type": "websocket.connect"}

    async def send(_message: object) -> None:
        return None

    websocket = WebSocket({"type": "websocket", "path": "/", "headers": []}, receive, send)
    assert server_compat.drop_connection(websocket) is False
