"""MCP backends over stdio and streamable HTTP, through the official SDK client.

One `mcp.Client` per backend, opened once and reused for every call. A
supervisor task owns the client (the SDK's context managers must be entered
and left in one task), reconnects with exponential backoff when the
connection is lost, and keeps the tool, resource and prompt lists fresh.

Streamable-HTTP backends make their `tools/call`s through a lean caller
(`wire.http_caller.HttpToolCaller`: pooled keep-alive connections, dicts, orjson) on
the wire the SDK client negotiated; the SDK client still connects, lists,
reads resources and prompts, pings, listens, and takes over the rare calls that
need it (a redirect, a stale `Mcp-Param-*` header, a backend asking for input).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    HEADER_MISMATCH,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import TypeAdapter, ValidationError

from toolweave import tracing
from toolweave.backends.base import Backend, TokenAuth, logger, unavailable_result
from toolweave.backends.environment import child_env
from toolweave.backends.stderr import StderrRelay, backend_secrets
from toolweave.common_types import ProgressFn
from toolweave.results import error_result
from toolweave.wire import relay, sdk_compat
from toolweave.wire.errors import Redirected, RpcError, Unauthorized
from toolweave.wire.http_caller import HttpToolCaller, proxied

INITIAL_BACKOFF = 0.25
MAX_BACKOFF = 30.0
STDERR_WAIT = 1.0
"""Seconds a failed stdio connection waits for the child's stderr to end, to quote its last lines."""
HEALTH_INTERVAL = 15.0
_PAGE_CAP = 100
_SAMPLING_RESULT: TypeAdapter[Any] = TypeAdapter(
    types.CreateMessageResult | types.CreateMessageResultWithTools
)
_ELICIT_RESULT: TypeAdapter[Any] = TypeAdapter(types.ElicitResult)
_ROOTS_RESULT: TypeAdapter[Any] = TypeAdapter(types.ListRootsResult)
_R = TypeVar(
    "_R", types.CallToolResult, types.ReadResourceResult, types.GetPromptResult, types.CompleteResult
)


class MCPBackend(Backend):
    """A stdio subprocess or a streamable HTTP server, kept connected."""

    asks_clients = True

    def __init__(self, config, *, errlog: Any = None, token_auth: TokenAuth | None = None) -> None:  # type: ignore[no-untyped-def]
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
        self._semaphore = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None
        self._refresh_task: asyncio.Task[None] | None = None
        self._refresh_wanted = False
        self._http_error: str | None = None
        self._session_id: str | None = None
        """The handshake-era `Mcp-Session-Id` the server gave the SDK client (HTTP only)."""
        self._caller: HttpToolCaller | None = None
        """The lean `tools/call` path of an HTTP backend while it is connected."""
        self._calls_in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._callers: list[relay.ClientChannel] = []
        """The clients of the calls in flight: where the SDK client's callbacks relay, when it is one."""
        self._update_listeners: list[Callable[[str], Any]] = []
        self._log_listeners: list[Callable[[dict[str, Any]], Any]] = []

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"backend:{self.name}")

    async def stop(self) -> None:
        self._stopping = True
        self._lost.set()
        for task in (self._refresh_task, self._task):
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
            await asyncio.wait_for(self._idle.wait(), grace if grace is not None else self.config.timeout)
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
                task = asyncio.current_task()
                if self._stopping or (task is not None and task.cancelling()):
                    raise
                if self._needs_person():
                    await self._wait_for_authorization()
                    backoff = INITIAL_BACKOFF
                    continue
                # Not our cancellation: the transport's task group (an anyio cancel scope hosted by this
                # task) failed, e.g. an HTTP server went away. That is a lost connection: reconnect.
                message = _describe_error(
                    ConnectionError(self.last_error or f"connection lost ({cancelled})")
                )
                message = await self._with_stderr(message)
                self._set_status("failed" if not self._ready.is_set() else "reconnecting", message)
                logger.warning("backend %s: %s (retrying in %.1fs)", self.name, message, backoff)
            except BaseException as error:  # noqa: BLE001 - any failure of a backend is a status, not a crash
                if self._needs_person():
                    await self._wait_for_authorization()
                    backoff = INITIAL_BACKOFF
                    continue
                message = await self._with_stderr(_describe_error(error, self._http_error))
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
        return self.token_auth is not None and self.token_auth.required is not None

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
            await self._refresh_lists(client)
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
            sampling_callback=self._relay_sampling,
            elicitation_callback=self._relay_elicitation,
            list_roots_callback=self._relay_roots,
            logging_callback=self._relay_log,
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
                if _is_connection_error(error):
                    self.last_error = "health check: " + str(error)
                    return
            except (TimeoutError, OSError) as error:
                self.last_error = f"health check failed: {_describe_error(error)}"
                return

    async def _listen(self, client: Client) -> None:
        """2026-07-28 servers announce list changes on a `subscriptions/listen` stream."""
        try:
            async with client.listen(
                tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
            ) as subscription:
                async for _event in subscription:
                    self._schedule_refresh()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001
            if _is_connection_error(error):
                self.last_error = _describe_error(error)
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
            self._schedule_refresh()
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

    # -- relaying the backend's requests to the client whose call caused them ----

    def _calling_client(self, method: str | None = None) -> relay.ClientChannel | None:
        """The client of this call: the context's (lean path, input-required driver), else the one client
        with a call in flight that can answer `method`. The SDK client runs its callbacks in its own task
        and a server may send a request on its standalone stream, so which call caused it is not on the
        wire; with several candidates, nobody is asked (never another caller's client)."""
        found = relay.calling_client()
        if found is not None:
            return found
        candidates = {id(c): c for c in self._callers if method is None or c.can_answer(method)}
        return next(iter(candidates.values())) if len(candidates) == 1 else None

    async def _relay(self, method: str, params: Any, result_type: TypeAdapter[Any]) -> Any:
        dumped = (
            params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else None
        )
        token = relay.progress_token(dumped)
        progress = functools.partial(self._send_progress, token) if token is not None else None
        answer = await relay.answer_server_request(self._calling_client(method), method, dumped, progress)
        if "error" in answer:
            return types.ErrorData.model_validate(answer["error"])
        try:
            return result_type.validate_python(answer["result"], by_name=False)
        except ValidationError as error:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the client's answer: {_brief(error)}")

    async def _send_progress(
        self, token: str | int, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """The client's progress on a relayed request, to the backend under the backend's own token."""
        client = self._client
        if client is not None:
            await client.session.send_progress_notification(token, progress, total, message)

    async def _relay_sampling(self, context: Any, params: Any) -> Any:
        return await self._relay("sampling/createMessage", params, _SAMPLING_RESULT)

    async def _relay_elicitation(self, context: Any, params: Any) -> Any:
        return await self._relay("elicitation/create", params, _ELICIT_RESULT)

    async def _relay_roots(self, context: Any) -> Any:
        return await self._relay("roots/list", None, _ROOTS_RESULT)

    async def _relay_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message to the client of the call it belongs to; outside any call, to the log listeners
        (the MCP front: every connection that set a level). During calls of several clients it belongs
        to no one the gateway can tell, and is not passed on (never to another caller's client)."""
        dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        client = self._calling_client()
        if client is not None:
            await client.log(dumped)
        elif not self._callers:
            for listener in list(self._log_listeners):
                try:
                    await listener(dumped)
                except Exception:  # noqa: BLE001 - one listener must not stop the others
                    logger.exception("log listener failed for backend %s", self.name)

    def on_log(self, listener: Callable[[dict[str, Any]], Any]) -> Callable[[], None]:
        """Await `listener(params)` for each log message the backend sends outside any call; returns the undo."""
        self._log_listeners.append(listener)
        return lambda: self._log_listeners.remove(listener) if listener in self._log_listeners else None

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
        return _unstamped(result).model_dump(by_alias=True, mode="json", exclude_none=True)

    async def subscribe_resource(self, uri: str, subscribe: bool = True) -> None:
        client = self._require_client()
        async with asyncio.timeout(self.config.timeout):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if subscribe:
                    await client.subscribe_resource(uri)
                else:
                    await client.unsubscribe_resource(uri)

    def _schedule_refresh(self) -> None:
        self._refresh_wanted = True  # a change announced during a refresh gets a refresh of its own
        if self._refresh_task is None or self._refresh_task.done():
            self._refresh_task = asyncio.create_task(self._refresh_after_change())

    async def _refresh_after_change(self) -> None:
        while self._refresh_wanted:
            self._refresh_wanted = False
            client = self._client
            if client is None:
                return
            try:
                await self._refresh_lists(client)
            except Exception as error:  # noqa: BLE001
                logger.warning("backend %s: refreshing lists failed: %s", self.name, _describe_error(error))
                return
            self._changed()

    async def _refresh_lists(self, client: Client) -> None:
        caps = client.server_capabilities
        self.tools = await _all_pages(
            lambda cursor: client.list_tools(cursor=cursor, cache_mode="refresh"), "tools"
        )
        if self._caller is not None:
            self._caller.header_maps = _header_maps(self.tools)
        if caps.resources is not None:
            self.resources = await _all_pages(
                lambda cursor: client.list_resources(cursor=cursor, cache_mode="refresh"), "resources"
            )
            with contextlib.suppress(MCPError):
                self.resource_templates = await _all_pages(
                    lambda cursor: client.list_resource_templates(cursor=cursor, cache_mode="refresh"),
                    "resource_templates",
                )
        if caps.prompts is not None:
            self.prompts = await _all_pages(
                lambda cursor: client.list_prompts(cursor=cursor, cache_mode="refresh"), "prompts"
            )

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
            if self._needs_person():
                return error_result(f"backend {self.name!r}: {self.token_auth.required}")  # type: ignore[union-attr]
            return unavailable_result(self.name, self.status, self.last_error)
        limit = timeout if timeout is not None else self.config.timeout
        self._calls_in_flight += 1
        self._idle.clear()
        caller = relay.calling_client()
        if caller is not None:
            self._callers.append(caller)
        try:
            if self._semaphore is None:
                return await self._call(client, name, arguments, limit, progress)
            async with self._semaphore:
                return await self._call(client, name, arguments, limit, progress)
        except TimeoutError:
            return error_result(
                f"tool {name!r} on backend {self.name!r} timed out after {limit:g}s; "
                "try again, or with a smaller request"
            )
        except MCPError as error:
            if self._needs_person():
                return error_result(f"backend {self.name!r}: {self.token_auth.required}")  # type: ignore[union-attr]
            if _is_connection_error(error):
                return self._connection_lost(error)
            return error_result(f"backend {self.name!r} rejected the call to {name!r}: {error}")
        except (OSError, EOFError) as error:
            return self._connection_lost(error)
        except Exception as error:  # noqa: BLE001 - garbage from a backend must not end the session
            if self._needs_person():
                return error_result(f"backend {self.name!r}: {self.token_auth.required}")  # type: ignore[union-attr]
            return error_result(
                f"backend {self.name!r} returned an invalid answer for {name!r}: {_brief(error)}"
            )
        finally:
            if caller is not None:
                self._callers.remove(caller)
            self._calls_in_flight -= 1
            if not self._calls_in_flight:
                self._idle.set()

    async def _call(
        self, client: Client, name: str, arguments: dict[str, Any], limit: float, progress: Any
    ) -> types.CallToolResult:
        caller = self._caller
        async with asyncio.timeout(limit):
            if caller is not None:
                return await self._lean_call(client, caller, name, arguments, progress)
            traced = tracing.outgoing()
            if (
                traced is not None
            ):  # the W3C trace context in `_meta`, as MCP's 2026-07-28 revision carries it
                called = await client.call_tool(name, arguments, progress_callback=progress, meta=traced)  # type: ignore[arg-type]
                return _unstamped(called)
            return _unstamped(await client.call_tool(name, arguments, progress_callback=progress))

    async def _lean_call(
        self, client: Client, caller: HttpToolCaller, name: str, arguments: dict[str, Any], progress: Any
    ) -> types.CallToolResult:
        """One POST; the SDK client takes over only where its own logic is needed (nothing ran yet)."""
        try:
            raw = await caller.call(name, arguments, progress=progress)
        except RpcError as error:
            if error.code == HEADER_MISMATCH and caller.modern:
                # our Mcp-Param-* headers are stale: the SDK re-lists the tool and sends once more
                self._schedule_refresh()
                return _unstamped(await client.call_tool(name, arguments, progress_callback=progress))
            raise MCPError(code=error.code, message=error.message, data=error.data) from None
        except (Redirected, Unauthorized):  # nothing ran: the SDK client (and its OAuth flow) takes over
            return _unstamped(await client.call_tool(name, arguments, progress_callback=progress))
        kind = raw.get("resultType")
        if kind is not None and kind != "complete":
            if kind != "input_required":
                raise ValueError(f"unexpected resultType {kind!r}")
            return _unstamped(await self._drive_input_required(client, name, arguments, progress, raw))
        result = types.CallToolResult.model_validate(raw, by_name=False)
        if not result.is_error:  # the tool's output schema, checked as the SDK client does
            await client.session.validate_tool_result(name, result)
        return _unstamped(result)

    async def _drive_input_required(
        self, client: Client, name: str, arguments: dict[str, Any], progress: Any, raw: dict[str, Any]
    ) -> types.CallToolResult:
        """The backend asks for input: the SDK client's driver answers and retries, exactly as on its own path."""
        first = types.InputRequiredResult.model_validate(raw, by_name=False)

        async def retry(responses: Any, state: str | None) -> Any:
            return await client.session.call_tool(
                name,
                arguments,
                progress_callback=progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
                allow_claimed=True,
            )

        # the SDK's private driver is untyped: it returns what `retry` (a tools/call) returns
        result: types.CallToolResult = await sdk_compat.drive_input_required(client, first, retry)
        return result

    def _lean_caller(self, client: Client) -> HttpToolCaller | None:
        """The lean tools/call path of an HTTP backend on the wire its SDK client negotiated (None: SDK only)."""
        url = self.config.url
        if not url or self.config.command or proxied(url):
            return None
        version = client.protocol_version
        try:
            envelope = _modern_envelope(client, version) if version in MODERN_PROTOCOL_VERSIONS else None
            return HttpToolCaller(
                url,
                protocol_version=version,
                headers=dict(self.config.headers),
                envelope=envelope,
                session_id=None if envelope is not None else self._session_id,
                header_maps=_header_maps(self.tools) if envelope is not None else None,
                on_notification=self._backend_notification,
                authorization=self.token_auth.bearer if self.token_auth is not None else None,
            )
        except Exception as error:  # noqa: BLE001 - the SDK path still works
            logger.warning(
                "backend %s: no lean call path (%s); calls go through the SDK client", self.name, error
            )
            return None

    def _connection_lost(self, error: BaseException) -> types.CallToolResult:
        self.last_error = _describe_error(error)
        self._lost.set()
        return unavailable_result(self.name, "connection lost", self.last_error)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        client = self._require_client()
        async with asyncio.timeout(self.config.timeout):
            return _unstamped(await client.read_resource(uri))

    async def get_prompt(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        client = self._require_client()
        async with asyncio.timeout(self.config.timeout):
            return _unstamped(await client.get_prompt(name, arguments))

    def _require_client(self) -> Client:
        if self._client is None:
            raise ConnectionError(f"backend {self.name!r} is unavailable ({self.status})")
        return self._client


def _modern_envelope(client: Client, version: str) -> dict[str, Any]:
    """The `_meta` envelope the SDK client stamps on its 2026-07-28 requests (client info, capabilities)."""
    keys = (PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY)
    return sdk_compat.client_envelope(client, version, keys)


def _header_maps(tools: list[types.Tool]) -> dict[str, dict[tuple[str, ...], str]]:
    """`Mcp-Param-*` header maps of the listed tools that declare any (what the SDK client mirrors)."""
    maps: dict[str, dict[tuple[str, ...], str]] = {}
    for tool in tools:
        if find_invalid_x_mcp_header(tool.input_schema) is None:
            found = x_mcp_header_map(tool.input_schema)
            if found:
                maps[tool.name] = found
    return maps


def _brief(error: Exception) -> str:
    """One line for an agent: pydantic's multi-line report becomes `field: problem; ...`."""
    if isinstance(error, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'result'}: {e['msg']}" for e in error.errors())
    return str(error) or type(error).__name__


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


def _unstamped(result: _R) -> _R:
    """Drop the backend's `serverInfo` stamp: to our clients the server is the gateway, which stamps its own
    (2026-07-28 only), so a backend's identity must not leak into results, least of all to legacy clients."""
    meta = result.meta
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        rest = {key: value for key, value in meta.items() if key != SERVER_INFO_META_KEY}
        result.meta = rest or None
    return result


async def _all_pages(fetch: Callable[[str | None], Any], attribute: str) -> list[Any]:
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(_PAGE_CAP):
        page = await fetch(cursor)
        items.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


_CONNECTION_MARKERS = ("connection closed", "connection lost", "closed resource", "broken", "eof")


def _is_connection_error(error: BaseException) -> bool:
    text = str(error).lower()
    return any(marker in text for marker in _CONNECTION_MARKERS)


def _describe_error(error: BaseException, http_error: str | None = None) -> str:
    """One readable line for a connection failure, unwrapping exception groups."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if http_error is not None and isinstance(error, MCPError):  # the SDK's error does not name the status
        status = http_error.split()[1]
        hint = {
            "401": " (check the backend's headers and credentials)",
            "403": " (check the backend's headers and credentials)",
            "404": " (is the url the server's MCP endpoint, e.g. ending in /mcp?)",
        }.get(status, "")
        return f"the server answered {http_error}{hint}"
    if isinstance(error, FileNotFoundError):
        return f"command not found: {error.filename or error}"
    if isinstance(error, TimeoutError):
        return "timed out while connecting"
    text = str(error) or type(error).__name__
    if "ConnectError" in type(error).__name__ or "connection refused" in text.lower():
        return f"cannot connect: {text}"
    return f"{type(error).__name__}: {text}" if type(error).__name__ not in text else text
