"""Asking the user through the MCP client, on both protocol revisions.

Handshake-era clients (2025-11-25) get a server-initiated `elicitation/create`
request. On 2026-07-28 there are no server-initiated requests: the call
returns an `InputRequiredResult` naming what it needs, the client answers by
retrying the call with `inputResponses` and our opaque `requestState`, and
the composite — still running in the background — continues from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter

from toolweave.composite.base import ElicitOutcome
from toolweave.composite.errors import ElicitUnavailable
from toolweave.server.mcp.context import HandlerContext

_INPUT_REQUEST: TypeAdapter[Any] = TypeAdapter(types.InputRequest)
PENDING_TTL = 600.0
"""How long a call waits for the client to come back with answers before it is cancelled."""
MAX_UNSENT_PROGRESS = 1000
"""Progress notifications kept for a call while the client is answering its questions."""


def client_capabilities(ctx: HandlerContext) -> types.ClientCapabilities | None:
    """What the client of `ctx` declared (its handshake, or a 2026-07-28 request's envelope)."""
    try:
        declared: types.ClientCapabilities | None = ctx.session.client_capabilities
        return declared
    except Exception:  # noqa: BLE001 - a connection without a handshake declared nothing
        return None


def client_can_elicit(ctx: HandlerContext) -> bool:
    capabilities = client_capabilities(ctx)
    return bool(capabilities is not None and capabilities.elicitation is not None)


def legacy_elicit(
    ctx: HandlerContext,
) -> Callable[[str, dict[str, Any], float | None], Awaitable[ElicitOutcome]]:
    """An ElicitFn that sends `elicitation/create` on a handshake-era connection."""

    async def elicit(message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
        if not client_can_elicit(ctx):
            raise ElicitUnavailable("the client did not declare the elicitation capability")
        try:
            async with asyncio.timeout(timeout):
                answer = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
        except TimeoutError:
            raise
        except Exception as error:
            raise ElicitUnavailable(f"the client could not be asked: {error}") from error
        return ElicitOutcome(action=answer.action, content=dict(answer.content or {}) or None)

    return elicit


@dataclass(eq=False)
class PendingCall:
    """A call running in the background while the client answers its questions."""

    token: str
    task: asyncio.Task[types.CallToolResult] | None = None
    questions: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    """(key, an `InputRequest`): the gateway's own elicitations and a backend's relayed requests."""
    answers: dict[str, asyncio.Future[ElicitOutcome]] = field(default_factory=dict)
    """key → the answer to one of the gateway's own questions."""
    relayed: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    """key → the client's wire result dict for a backend's request."""
    touched: float = field(default_factory=time.monotonic)
    _counter: int = 0
    _sink: Any = None
    """Where progress goes: the ProgressFn of the client request currently waiting on this call."""
    _unsent: list[tuple[float, float | None, str | None]] = field(default_factory=list)

    async def progress(self, value: float, total: float | None = None, message: str | None = None) -> None:
        """A ProgressFn for the background call.

        The request that started the call has returned (with an
        `InputRequiredResult`) by the time later steps finish, so progress goes
        to whichever retry of the call is waiting now; while none is (the
        client is answering), it is kept and sent when the next one arrives.
        """
        if self._sink is None:
            if len(self._unsent) < MAX_UNSENT_PROGRESS:
                self._unsent.append((value, total, message))
            return
        await self._sink(value, total, message)

    async def attach(self, sink: Any) -> None:
        """Send progress to `sink` (None detaches), after what was kept while no request waited."""
        if sink is None:
            self._sink = None
            return
        while self._unsent:  # in order; progress reported meanwhile queues behind
            await sink(*self._unsent.pop(0))
        self._sink = sink

    async def elicit(self, message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
        self._counter += 1
        key = f"q{self._counter}"
        future: asyncio.Future[ElicitOutcome] = asyncio.get_running_loop().create_future()
        self.answers[key] = future
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        await self.questions.put((key, request))
        try:
            async with asyncio.timeout(timeout):
                return await future
        finally:
            self.answers.pop(key, None)

    async def ask(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """A backend's request (`sampling/createMessage`, `elicitation/create`, `roots/list`) put to the
        client as an input request of this call; its answer as the client sent it (a wire dict)."""
        wire: dict[str, Any] = {"method": method}
        if params is not None:
            wire["params"] = dict(params)
        request = _INPUT_REQUEST.validate_python(wire, by_name=False)
        self._counter += 1
        key = f"q{self._counter}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.relayed[key] = future
        await self.questions.put((key, request))
        try:
            return await future
        finally:
            self.relayed.pop(key, None)

    def deliver(self, responses: dict[str, Any] | None) -> None:
        for key, response in (responses or {}).items():
            relayed = self.relayed.get(key)
            if relayed is not None:
                if not relayed.done():
                    relayed.set_result(response.model_dump(by_alias=True, mode="json", exclude_none=True))
                continue
            future = self.answers.get(key)
            if future is None or future.done():
                continue
            if isinstance(response, types.ElicitResult):
                future.set_result(
                    ElicitOutcome(action=response.action, content=dict(response.content or {}) or None)
                )
            else:
                future.set_exception(
                    ElicitUnavailable("the client answered with something other than a form")
                )


class InputBroker:
    """Keeps the calls that are waiting for the client's answers (2026-07-28)."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingCall] = {}

    def new(self) -> PendingCall:
        self._expire()
        pending = PendingCall(token="tw-" + secrets.token_urlsafe(24))
        self._pending[pending.token] = pending
        return pending

    def resume(self, token: str | None, responses: dict[str, Any] | None) -> PendingCall | None:
        pending = self._pending.get(token or "")
        if pending is None:
            return None
        pending.touched = time.monotonic()
        pending.deliver(responses)
        return pending

    async def wait(
        self, pending: PendingCall, progress: Any = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The call's result when it finishes, or the questions it is waiting on.

        `progress` is this request's ProgressFn: the call's progress is sent
        there while this request waits.
        """
        assert pending.task is not None
        getter = asyncio.ensure_future(pending.questions.get())
        try:
            await pending.attach(progress)
            await asyncio.wait([pending.task, getter], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            getter.cancel()
            self.drop(pending)
            raise
        finally:
            await pending.attach(None)
        if pending.task.done():
            getter.cancel()
            self._pending.pop(pending.token, None)
            return pending.task.result()
        questions = {}
        key, request = getter.result()
        questions[key] = request
        while not pending.questions.empty():
            key, request = pending.questions.get_nowait()
            questions[key] = request
        return types.InputRequiredResult(input_requests=questions, request_state=pending.token)

    def drop(self, pending: PendingCall) -> None:
        self._pending.pop(pending.token, None)
        if pending.task is not None and not pending.task.done():
            pending.task.cancel()

    def _expire(self) -> None:
        now = time.monotonic()
        for pending in list(self._pending.values()):
            if now - pending.touched > PENDING_TTL:
                self.drop(pending)

    async def close(self) -> None:
        for pending in list(self._pending.values()):
            self.drop(pending)
            if pending.task is not None:
                with contextlib.suppress(BaseException):
                    await pending.task
