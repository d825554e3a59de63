"""MCP backends over stdio and streamable HTTP, through the official SDK client.

One `mcp.Client` per backend, opened once and reused for every call. A
supervisor task owns the client (the SDK's context managers must be entered
and left in one task) and reconnects with exponential backoff when the
connection is lost: that session lifecycle is this module (`MCPBackend`).
The other concerns are objects it holds, each in its own module:

- `listing.py` (`Listings`): the tool, resource and prompt lists, kept fresh;
- `calls.py` (`CallPath`): admission and one `tools/call`, through the lean
  HTTP caller (`wire.http_caller`) on the wire the SDK client negotiated, the
  SDK client taking over the rare calls that need it;
- `requests.py` (`ServerRequests`): the backend's requests and logs, relayed
  to the client whose call caused them;
- `describe.py`: failures as one line, results without the backend's stamp.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave.backends.base import Backend, TokenAuth, logger, unavailable_result
from toolweave.backends.environment import child_env
from toolweave.backends.mcp.calls import CallPath, open_lean_caller
from toolweave.backends.mcp.describe import brief, describe_error, is_connection_error, unstamped
from toolweave.backends.mcp.listing import Listings
from toolweave.backends.mcp.requests import ServerRequests
from toolweave.backends.stderr import StderrRelay, backend_secrets
from toolweave.common_types import ProgressFn
from toolweave.config.models import BackendConfig
from toolweave.results import error_result
from toolweave.wire import sdk_compat
from toolweave.wire.http_caller import HttpToolCaller

INITIAL_BACKOFF = 0.25
MAX_BACKOFF = 30.0
STDERR_WAIT = 1.0
"""Seconds a failed stdio connection waits for the child's stderr to end, to quote its last lines."""
HEALTH_INTERVAL = 15.0


class MCPBackend(Backend):
    """A stdio subprocess or a streamable HTTP server, kept connected."""

    asks_clients = True

    def __init__(
        self, config: BackendConfig, *, errlog: Any = None, token_auth: TokenAuth | None = None
    ) -> None:
        super().__init__(config)
        self.token_auth = token_auth
        """`[backends.oauth]`: the token flow of this connection (its user's or the shared grant's)."""
        self._authorized = asyncio.Event()
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._lost = asyncio.Event()
        self._stopping = False
        self._errlog = errlog
        """Where a stdio child's stderr goes raw; None (the default): log records (`stderr.StderrRelay`)."""
        self._stderr: StderrRelay | None = None
        self._http_error: str | None = None
        self._session_id: str | None = None
        """The handshake-era `Mcp-Session-Id` the server gave the SDK client (HTTP only)."""
        self._caller: HttpToolCaller | None = None
        """The lean `tools/call` path of an HTTP backend while it is connected."""
        self._update_listeners: list[Callable[[str], Any]] = []
        self.requests = ServerRequests(self.name, lambda: self._client)
        self.listings = Listings(self, lambda: self._client, lambda: self._caller, self._changed)
        self.calls = CallPath(config.max_concurrency, self.requests.callers, self.listings.schedule_refresh)

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"backend:{self.name}")

    async def stop(self) -> None:
        self._stopping = True
        self._lost.set()
        await self.listings.stop()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._client = None
        await self._close_stderr()
        self._set_status("stopped")

    def _prepare_restart(self) -> None:
        self._stopping = False
        self._task = None

    async def _close_stderr(self) -> None:
        relay, self._stderr = self._stderr, None
        if relay is not None:
            await relay.close()

    async def stop_when_idle(self, grace: float | None = None) -> None:
        """Stop once the calls already in flight have answered (at most `grace` seconds, the call timeout).

        A session replaced on purpose (a tenant's connection changed) must not fail the calls it is
        still serving: new calls already go to its successor, so it only has to drain.
        """
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                self.calls.idle.wait(), grace if grace is not None else self.config.timeout
            )
        await self.stop()

    async def _supervise(self) -> None:
        backoff = INITIAL_BACKOFF
        while not self._stopping:
            if self._needs_person():  # nobody has authorized this OAuth backend yet: nothing to try
                await self._wait_for_authorization()
                continue
            try:
                await self._connect_and_serve()
                backoff = INITIAL_BACKOFF
            except asyncio.CancelledError as cancelled:
                if self._stopping or _was_cancelled():
                    raise
                if self._needs_person():
                    await self._wait_for_authorization()
                    backoff = INITIAL_BACKOFF
                    continue
                # Not our cancellation: the transport's task group (an anyio cancel scope hosted by this
                # task) failed, e.g. an HTTP server went away. That is a lost connection: reconnect.
                message = describe_error(ConnectionError(self.last_error or f"connection lost ({cancelled})"))
                message = await self._with_stderr(message)
                self._set_status("failed" if not self._ready.is_set() else "reconnecting", message)
                logger.warning("backend %s: %s (retrying in %.1fs)", self.name, message, backoff)
            except BaseException as error:
                if _was_cancelled():  # a transport turned our cancellation into its own error: end
                    raise asyncio.CancelledError() from error
                if self._needs_person():
                    await self._wait_for_authorization()
                    backoff = INITIAL_BACKOFF
                    continue
                message = await self._with_stderr(describe_error(error, self._http_error))
                first = not self._ready.is_set()
                self._set_status("failed" if first else "reconnecting", message)
                logger.warning("backend %s: %s (retrying in %.1fs)", self.name, message, backoff)
            self._client = None
            self._ready.set()
            if self._stopping:
                break
            if self.status == "connected":
                self._set_status("reconnecting", self.last_error or "connection lost")
            await asyncio.sleep(backoff * (0.8 + 0.4 * random.random()))
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _with_stderr(self, message: str) -> str:
        """A stdio child's connection error, with the last lines it wrote to stderr: the cause (a
        certificate it refused, a package it could not fetch) is there, not in "Connection closed"."""
        relay = self._stderr
        if relay is None or self._stopping:
            return message
        lines = await relay.tail(STDERR_WAIT)
        return f"{message}; its stderr ended with: {' | '.join(lines)}" if lines else message

    def _needs_person(self) -> bool:
        return self._person_needed() is not None

    def _person_needed(self) -> str | None:
        """What a person must do before this OAuth backend can be used (None: nothing)."""
        return self.token_auth.required if self.token_auth is not None else None

    async def _wait_for_authorization(self) -> None:
        """An OAuth backend nobody has authorized (or whose grant was revoked): no retry loop, which
        would only ask again; it waits as `unauthorized` until `authorized()` says a grant was stored."""
        assert self.token_auth is not None
        self._client = None
        self._set_status("unauthorized", self.token_auth.required)
        self._ready.set()
        logger.warning("backend %s: %s", self.name, self.token_auth.required)
        self._authorized.clear()
        await self._authorized.wait()
        self.token_auth.required = None
        self._set_status("reconnecting")

    def authorized(self) -> None:
        """A grant was stored for this connection's user: connect again now."""
        if self.token_auth is not None:
            self.token_auth.required = None
        self._authorized.set()

    async def _connect_and_serve(self) -> None:
        self._lost = asyncio.Event()
        async with asyncio.timeout(self.config.connect_timeout):
            client = await self._open_client()
        try:
            self._client = client
            self.server_info = client.server_info
            await self.listings.refresh(client)
            self._caller = self._lean_caller(client)
            self._set_status("connected")
            self.last_error = None
            self.last_error_at = None
            self._ready.set()
            logger.info("backend %s connected (%d tools)", self.name, len(self.tools))
            await self._watch(client)
            if not self._stopping:
                raise ConnectionError(self.last_error or "connection lost")
        finally:
            self._client = None
            caller, self._caller = self._caller, None
            if caller is not None:
                await caller.close()
            with contextlib.suppress(BaseException):
                await client.__aexit__(None, None, None)

    async def _open_client(self) -> Client:
        client = Client(
            await self._transport(),
            message_handler=self._on_message,
            cache=None,
            sampling_callback=self.requests.sampling,
            elicitation_callback=self.requests.elicitation,
            list_roots_callback=self.requests.roots,
            logging_callback=self.requests.log,
        )
        try:
            await client.__aenter__()
        finally:
            if self._stderr is not None:
                self._stderr.child_started()
        return client

    async def _transport(self) -> Any:
        """What the SDK client connects through: a stdio child or streamable HTTP. One place, so the
        test suite's in-process backend (tests/support/inprocess.py) can swap the child for an object."""
        config = self.config
        if config.command:
            params = StdioServerParameters(
                command=config.command,
                args=config.args,
                env=child_env(config.env, config.env_passthrough),
                cwd=config.cwd,
            )
            if self._errlog is None:
                await self._close_stderr()
                self._stderr = StderrRelay(self.name, backend_secrets(config))
                self._stderr.start()
                errlog: Any = self._stderr.child_end
            else:
                errlog = _subprocess_stream(self._errlog)
            return stdio_client(params, errlog=errlog)
        return self._http_transport(config.url or "", dict(config.headers))

    @contextlib.asynccontextmanager
    async def _http_transport(self, url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
        """Streamable HTTP on an HTTP client we own: closed with the connection (the SDK leaves a client it
        is given open), and remembering the last HTTP error status, which the SDK's error does not name."""
        self._http_error = None
        self._session_id = None

        async def remember(
            response: Any,
        ) -> None:  # the latest answer only: a failed probe may be followed by success
            failed = response.status_code >= 400
            self._http_error = (
                f"HTTP {response.status_code} {response.reason_phrase}".strip() if failed else None
            )
            session_id = response.headers.get("mcp-session-id")
            if session_id:
                self._session_id = session_id

        auth = self.token_auth.auth if self.token_auth is not None else None
        async with sdk_compat.create_http_client(headers or None, auth=auth) as http:
            http.event_hooks["response"].append(remember)
            async with streamable_http_client(url, http_client=http) as streams:
                yield streams

    async def _watch(self, client: Client) -> None:
        """Return when the connection is lost (or the backend stops)."""
        watchers = [asyncio.create_task(self._lost.wait()), asyncio.create_task(self._health(client))]
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            watchers.append(asyncio.create_task(self._listen(client)))
        try:
            await asyncio.wait(watchers, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in watchers:
                task.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)

    async def _health(self, client: Client) -> None:
        while True:
            await asyncio.sleep(HEALTH_INTERVAL)
            try:
                async with asyncio.timeout(self.config.connect_timeout):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        await client.send_ping()
            except MCPError as error:
                if is_connection_error(error):
                    self.last_error = "health check: " + str(error)
                    return
            except (TimeoutError, OSError) as error:
                self.last_error = f"health check failed: {describe_error(error)}"
                return

    async def _listen(self, client: Client) -> None:
        """2026-07-28 servers announce list changes on a `subscriptions/listen` stream."""
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as subscription:
                async for _event in subscription:
                    self.listings.schedule_refresh()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001
            if is_connection_error(error):
                self.last_error = describe_error(error)
                return
            logger.debug("backend %s: no list-change subscription (%s)", self.name, error)
        await asyncio.Event().wait()  # a server without subscriptions still serves calls

    async def _on_message(self, message: Any) -> None:
        """Handshake-era servers send `notifications/*/list_changed` and resource updates as plain notifications."""
        if isinstance(message, Exception):
            return
        root = getattr(message, "root", message)
        method = getattr(root, "method", "")
        params = getattr(root, "params", None)
        dumped = (
            params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else {}
        )
        if isinstance(method, str):
            self._backend_notification(method, dumped)

    def _backend_notification(self, method: str, params: dict[str, Any]) -> None:
        if method.endswith("/list_changed"):
            self.listings.schedule_refresh()
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            for listener in list(self._update_listeners):
                try:
                    listener(params["uri"])
                except Exception:  # noqa: BLE001 - one listener must not stop the others
                    logger.exception("resource update listener failed for backend %s", self.name)

    def on_resource_updated(self, listener: Callable[[str], Any]) -> Callable[[], None]:
        """Call `listener(uri)` when the backend says a subscribed resource changed; returns the undo."""
        self._update_listeners.append(listener)
        return lambda: self._update_listeners.remove(listener) if listener in self._update_listeners else None

    def on_log(self, listener: Callable[[dict[str, Any]], Any]) -> Callable[[], None]:
        """Await `listener(params)` for each log message the backend sends outside any call; returns the undo."""
        return self.requests.on_log(listener)

    # -- what the backend offers besides tools ----------------------------------

    def offers(self, feature: str) -> bool:
        """Whether the connected server declared `feature`: "logging", "completions" or "subscribe"."""
        client = self._client
        if client is None:
            return False
        caps = client.server_capabilities
        if feature == "subscribe":
            return caps.resources is not None and bool(caps.resources.subscribe)
        return getattr(caps, feature, None) is not None

    async def set_logging_level(self, level: str) -> None:
        client = self._require_client()
        async with asyncio.timeout(self.config.timeout):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.set_logging_level(level)  # type: ignore[arg-type]

    async def complete(self, params: dict[str, Any]) -> dict[str, Any]:
        """`completion/complete` with the backend's own names in `params` (the wire dicts)."""
        client = self._require_client()
        request = types.CompleteRequestParams.model_validate(params, by_name=False)
        context = request.context.arguments if request.context is not None else None
        async with asyncio.timeout(self.config.timeout):
            result = await client.complete(
                request.ref, {"name": request.argument.name, "value": request.argument.value}, context
            )
        return unstamped(result).model_dump(by_alias=True, mode="json", exclude_none=True)

    async def subscribe_resource(self, uri: str, subscribe: bool = True) -> None:
        client = self._require_client()
        async with asyncio.timeout(self.config.timeout):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if subscribe:
                    await client.subscribe_resource(uri)
                else:
                    await client.unsubscribe_resource(uri)

    # -- calls ---------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: ProgressFn | None = None,
    ) -> types.CallToolResult:
        client = self._client
        if client is None:
            if (needed := self._person_needed()) is not None:
                return error_result(f"backend {self.name!r}: {needed}")
            return unavailable_result(self.name, self.status, self.last_error)
        limit = timeout if timeout is not None else self.config.timeout
        try:
            async with self.calls.admitted():
                return await self.calls.call(client, self._caller, name, arguments, limit, progress)
        except TimeoutError:
            return error_result(
                f"tool {name!r} on backend {self.name!r} timed out after {limit:g}s; "
                "try again, or with a smaller request"
            )
        except MCPError as error:
            if (needed := self._person_needed()) is not None:
                return error_result(f"backend {self.name!r}: {needed}")
            if is_connection_error(error):
                return self._connection_lost(error)
            return error_result(f"backend {self.name!r} rejected the call to {name!r}: {error}")
        except (OSError, EOFError) as error:
            return self._connection_lost(error)
        except Exception as error:  # noqa: BLE001 - garbage from a backend must not end the session
            if (needed := self._person_needed()) is not None:
                return error_result(f"backend {self.name!r}: {needed}")
            return error_result(
                f"backend {self.name!r} returned an invalid answer for {name!r}: {brief(error)}"
            )

    def _lean_caller(self, client: Client) -> HttpToolCaller | None:
        """The lean call path of this connection (None: calls go through the SDK client)."""
        return open_lean_caller(
            self.name,
            self.config,
            client,
            session_id=self._session_id,
            tools=self.tools,
            on_notification=self._backend_notification,
            authorization=self.token_auth.bearer if self.token_auth is not None else None,
        )

    def _connection_lost(self, error: BaseException) -> types.CallToolResult:
        self.last_error = describe_error(error)
        self._lost.set()
        return unavailable_result(self.name, "connection lost", self.last_error)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        client = self._require_client()
        async with asyncio.timeout(self.config.timeout):
            return unstamped(await client.read_resource(uri))

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        client = self._require_client()
        async with asyncio.timeout(self.config.timeout):
            return unstamped(await client.get_prompt(name, arguments))

    def _require_client(self) -> Client:
        if self._client is None:
            raise ConnectionError(f"backend {self.name!r} is unavailable ({self.status})")
        return self._client


def _subprocess_stream(stream: Any) -> Any:
    """A stream a child process can write its stderr to: it needs a real file descriptor, which a
    replaced `sys.stderr` (Jupyter, pytest capture, Click's test runner) does not have."""
    for candidate in (stream, sys.__stderr__):
        try:
            if candidate is not None and candidate.fileno() >= 0:
                return candidate
        except (AttributeError, OSError, ValueError):
            continue
    return subprocess.DEVNULL


def _was_cancelled() -> bool:
    """Whether someone cancelled the running task (an expired `asyncio.timeout` uncancels its own)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
