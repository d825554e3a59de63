"""The context the MCP SDK hands each of the front's handlers, named once.

`ServerRequestContext` carries the client's session, the protocol version of the request, its
params and `_meta`, and (over HTTP) the Starlette request whose ASGI scope holds the caller's
`Session` (`request_session.py`). The lifespan context is not used by the front, so it stays `Any`.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from mcp.server import ServerRequestContext
from starlette.requests import Request

HandlerContext: TypeAlias = ServerRequestContext[Any, Request]
"""What a handler of `MCPFront` (and the relays and elicitation it calls) is given as `ctx`."""
