"""The MCP client whose call is running: where a backend's requests and log messages during that call go.

A backend may ask its client something mid-call (`sampling/createMessage`, `elicitation/create`,
`roots/list`) and log (`notifications/message`). Through the gateway, "its client" is the client
whose `tools/call` caused it: the MCP front sets that client's `ClientChannel` for the duration of the
call (`calling_client`, a context variable, so composite steps and fan-out tasks inherit it), and the
backend's lean HTTP caller or SDK client callbacks relay to it. Without a channel (a REST call, a
client that lacks the capability) the backend gets what an SDK client with no callback answers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Protocol

from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND

from toolweave.common_types import ProgressFn
from toolweave.wire.errors import RelayError

RELAYED_REQUESTS = ("sampling/createMessage", "elicitation/create", "roots/list")
"""Requests a backend may send its client that the gateway passes on."""

REFUSALS = {
    "sampling/createMessage": "Sampling not supported",
    "elicitation/create": "Elicitation not supported",
    "roots/list": "List roots not supported",
}
"""What the SDK client's default callbacks answer: the backend's answer when no client can."""
RELAY_TIMEOUT = 600.0
"""How long a relayed request waits for the client (a person may be answering); then the backend hears an error."""


class ClientChannel(Protocol):
    """One client's side of one call, as the MCP front gives it."""

    def can_answer(self, method: str) -> bool:
        """Whether the client declared the capability `method` needs (sampling, elicitation, roots)."""
        ...

    async def request(
        self, method: str, params: Mapping[str, Any] | None, progress: ProgressFn | None = None
    ) -> dict[str, Any]:
        """The client's result for a request; raises RelayError with the client's error. `progress`: where
        the client's progress on it goes (the backend asked for it with `_meta.progressToken`)."""
        ...

    async def log(self, params: Mapping[str, Any]) -> None:
        """Pass a backend's `notifications/message` to the client (at the level it asked for)."""
        ...


_calling: ContextVar[ClientChannel | None] = ContextVar("toolweave_calling_client", default=None)


def calling_client() -> ClientChannel | None:
    """The channel to the client whose call is running in this context, if any."""
    return _calling.get()


@contextlib.contextmanager
def client_of_call(channel: ClientChannel | None) -> Iterator[None]:
    """Within the block, backends relay to `channel` (None: to nobody)."""
    token = _calling.set(channel)
    try:
        yield
    finally:
        _calling.reset(token)


def progress_token(params: Mapping[str, Any] | None) -> str | int | None:
    """The `_meta.progressToken` a backend put on its request (it wants the client's progress on it)."""
    meta = params.get("_meta") if params is not None else None
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


async def answer_server_request(
    channel: ClientChannel | None,
    method: str,
    params: Mapping[str, Any] | None,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """The JSON-RPC answer body (`{"result": ...}` or `{"error": ...}`) for a backend's request."""
    if method == "ping":
        return {"result": {}}
    if method not in RELAYED_REQUESTS:
        return {"error": {"code": METHOD_NOT_FOUND, "message": "Method not found"}}
    if channel is None or not channel.can_answer(method):
        return {"error": {"code": INVALID_REQUEST, "message": REFUSALS[method]}}
    try:
        async with asyncio.timeout(RELAY_TIMEOUT):
            return {"result": await channel.request(method, params, progress)}
    except TimeoutError:
        message = f"the client did not answer {method} within {RELAY_TIMEOUT:g}s"
        return {"error": {"code": INTERNAL_ERROR, "message": message}}
    except RelayError as error:
        body: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.data is not None:
            body["data"] = error.data
        return {"error": body}
    except Exception as error:  # noqa: BLE001 - the client went away or timed out: the backend must hear
        return {"error": {"code": INTERNAL_ERROR, "message": f"the client could not be asked: {error}"}}
