"""Every reach into the ASGI server's (uvicorn's) and Starlette's private API, in one place.

The ASGI interface has no way to say "drop this connection now", which a gateway that closes a
flooding WebSocket needs (see `drop_connection`). Each such reach is a function here, and
`tests/test_server_compat.py` checks each against the installed uvicorn and Starlette under a real
uvicorn server, so a release that moves one fails there, loudly, by name, rather than silently
costing the event loop again. Under another ASGI server these functions do nothing and say so
(`False`); the server's own limits then apply.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.websockets import WebSocket

logger = logging.getLogger("toolweave.server")

TESTED_UVICORN_MINOR = "0.55"
"""The uvicorn minor version the contract tests last ran on (the tests fail on another one, to be
run again and this moved)."""

_warned = False


def drop_connection(websocket: WebSocket) -> bool:
    """Abort `websocket`'s TCP connection now, without waiting for the client's closing handshake.

    After sending a close frame, uvicorn keeps reading (and parsing) the client's frames until the
    client answers it, for up to 10 s: a flooder that never answers would keep costing the event
    loop all that time. This reaches the server protocol through the `receive` Starlette was given
    (private `WebSocket._receive`: uvicorn's bound `asgi_receive`) and aborts its transport
    (private `transport`). True when the connection was dropped; False (and a warning, once) when
    the server is not uvicorn or its private API moved.
    """
    protocol = getattr(getattr(websocket, "_receive", None), "__self__", None)
    transport: Any = getattr(protocol, "transport", None)
    abort = getattr(transport, "abort", None)
    if not callable(abort):
        _warn_once(protocol)
        return False
    abort()
    return True


def _warn_once(protocol: Any) -> None:
    global _warned
    if not _warned:
        _warned = True
        logger.warning(
            "cannot drop a flooding WebSocket at once (%s has no transport to abort): the ASGI "
            "server's own close timeout applies",
            type(protocol).__name__ if protocol is not None else "the ASGI server",
        )
