"""Request bodies are capped on every route (`limits.max_body_bytes`): one ASGI middleware.

Why: a 50 MB body was accepted, parsed and (as a composite's description) stored,
after which every `tools/list` carried it. Everything behind this middleware may
assume a body is at most `max_body_bytes`: a declared `Content-Length` above it is
refused before anything is read, and a body without one (chunked) is read here up
to the limit, then handed on whole — or refused, having held at most the limit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from toolweave.server.auth import ASGIApp, Receive, Scope, Send, deny

Message = MutableMapping[str, Any]


class BodyLimitMiddleware:
    """`413 payload_too_large` for a request body over `max_bytes`, before any route reads it."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, chunked = _body_headers(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send, declared)
            return
        if declared is None and chunked:
            body = await _read_up_to(receive, self.max_bytes)
            if body is None:
                await self._refuse(send, None)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, size: int | None) -> None:
        what = f"{size} bytes" if size is not None else "more than that"
        await deny(
            send,
            413,
            "payload_too_large",
            f"the request body is {what}; the limit is {self.max_bytes} bytes (limits.max_body_bytes)",
        )


def _body_headers(scope: Scope) -> tuple[int | None, bool]:
    declared: int | None = None
    chunked = False
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                declared = None
        elif name == b"transfer-encoding":
            chunked = True
    return declared, chunked


async def _read_up_to(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes `limit` bytes."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Callable[[], Awaitable[Message]]:
    """A `receive` that gives the body read here once, then whatever the client sends next."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
