"""The Backend contract: one long-lived connection to a source of tools.

A backend caches its tool list, reconnects by itself, and turns every
failure of a call into an `isError` result naming the backend, so the
executor never needs a try/except on the hot path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Literal

import mcp_types as types

from toolweave.config.models import BackendConfig

BackendStatus = Literal[
    "starting", "connected", "reconnecting", "failed", "stopped", "disabled", "unauthorized"
]
"""`unauthorized`: an OAuth backend (`[backends.oauth]`) waits for a person to authorize it; no retry loop."""


class TokenAuth:
    """What an OAuth backend connection presents (built by `toolweave.credentials`, never by a backend).

    `auth`: the SDK's `httpx2.Auth` flow (discovery, registration, tokens, refresh, step-up) on the
    SDK client's requests; `bearer()`: the current `Authorization` value for the lean call path, which
    hands a 401/403 over to the SDK client; `required`: set when the flow needs a person (the URL to
    visit, or why not), so the connection waits as `unauthorized` instead of retrying.
    """

    __slots__ = ("auth", "bearer", "required")

    def __init__(self, auth: Any, bearer: Callable[[], str | None]) -> None:
        self.auth = auth
        self.bearer = bearer
        self.required: str | None = None

    def __repr__(self) -> str:
        return "TokenAuth(***)"


ChangeListener = Callable[["Backend"], None]

logger = logging.getLogger("toolweave.backends")


class Backend(ABC):
    """Base of every backend kind (MCP over stdio/HTTP, in-process Python)."""

    asks_clients = False
    """Whether a call may send the calling client requests mid-call (an MCP server's sampling,
    elicitation, roots): a 2026-07-28 client's call then runs where it can return input requests."""

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        self.name = config.name
        self.owner: str | None = None
        """The tenant whose tools these are (a tenant's own backend); None: shared by every tenant."""
        self.status: BackendStatus = "starting"
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        """When `last_error` happened (epoch seconds): a status page says how stale it is."""
        self.connected_at: float | None = None
        self.tools: list[types.Tool] = []
        self.server_info: types.Implementation | None = None
        """Who the server says it is (`initialize`): its name, title and description are searched."""
        self.resources: list[types.Resource] = []
        self.resource_templates: list[types.ResourceTemplate] = []
        self.prompts: list[types.Prompt] = []
        self._listeners: list[ChangeListener] = []
        self._ready = asyncio.Event()
        """Set once the first connection attempt has finished, successfully or not."""
        self.reconnects = 0
        """How many reconnects were forced (`reconnect`, an operator's action) since start."""
        self._reconnecting = False

    # -- lifecycle -----------------------------------------------------------

    @abstractmethod
    async def start(self) -> None:
        """Begin connecting in the background; returns at once."""

    @abstractmethod
    async def stop(self) -> None:
        """Close the connection and stop reconnecting."""

    async def reconnect(self) -> None:
        """Drop the connection and connect again now, skipping any backoff wait (an operator's action).

        Calls in flight on the old connection fail as on any lost connection. Returns once the
        new attempt has begun; the status says how it goes (`reconnecting`, then `connected`).
        """
        if self._reconnecting:
            return  # one forced reconnect at a time: a second ask would drop the fresh connection
        self._reconnecting = True
        try:
            self.reconnects += 1
            await self.stop()
            self._prepare_restart()
            self._set_status("reconnecting")
            await self.start()
        finally:
            self._reconnecting = False

    def _prepare_restart(self) -> None:  # noqa: B027 - a hook: most kinds need nothing undone
        """Undo what `stop` did that would keep `start` from starting again (per kind)."""

    async def wait_ready(self, timeout: float) -> bool:
        """Wait until the first connection attempt finished; True if connected."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            return False
        return self.status == "connected"

    # -- calls ---------------------------------------------------------------

    @abstractmethod
    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: Callable[[float, float | None, str | None], Any] | None = None,
    ) -> types.CallToolResult:
        """Call one tool; failures come back as `isError` results naming the backend."""

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        raise LookupError(f"backend {self.name!r} has no resources")

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        raise LookupError(f"backend {self.name!r} has no prompts")

    # -- change notification -------------------------------------------------

    def on_change(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:
                logger.exception("change listener failed for backend %s", self.name)

    def _set_status(self, status: BackendStatus, error: str | None = None) -> None:
        changed = status != self.status
        self.status = status
        if error is not None:
            self.last_error = error
            self.last_error_at = time.time()
        if status == "connected":
            self.connected_at = time.time()
        if changed:
            self._changed()

    def describe(self) -> dict[str, Any]:
        """Status for `GET /backends` and `toolweave serve`'s startup table."""
        return {
            "name": self.name,
            "transport": self.config.transport,
            "status": self.status,
            "tools": len(self.tools),
            "resources": len(self.resources),
            "prompts": len(self.prompts),
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
        }


def naming_backend(backend: str, error: BaseException) -> str:
    """An error's message, prefixed with the backend's name unless it already names it
    (never `backend 'x': backend 'x' is unavailable`)."""
    message = str(error)
    return message if message.startswith(f"backend {backend!r}") else f"backend {backend!r}: {message}"


def unavailable_result(backend: str, status: str, detail: str | None) -> types.CallToolResult:
    from toolweave.results import error_result

    why = f": {detail}" if detail else ""
    return error_result(
        f"backend {backend!r} is unavailable ({status}{why}); the gateway is reconnecting, try again shortly"
    )
