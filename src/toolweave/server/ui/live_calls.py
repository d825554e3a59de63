"""Try it, live: a call made from the page runs in the background while the page follows it.

The page polls the call (HTMX, twice a second) and sees its progress (the
tool's progress notifications, a workflow's finished steps, a backend's log
messages) and any question the call asks: a workflow's elicitation step, an
approval the policy requires (`executor.approval`), or a backend's own
`elicitation/create` (relayed to the page as to an MCP client,
`wire.relay`). The call goes through the executor with the page's
caller, so policy, validation and approval apply exactly as for any client;
the page is simply this caller's way to be asked (its `elicit`).

A call belongs to the browser session that started it: only that session
can follow, answer or cancel it. Everything is bounded: calls running per
session, calls kept, questions open per call, progress lines kept, and how
long a finished call is kept for its page. The call runs in this process;
with a `services.live_share.LiveShare` (Redis, or PostgreSQL without it) its
state is also written for the other gateways, so a page's poll reaching
another gateway behind a round-robin balancer shows the call, and an answer
or a cancel posted there is relayed to the gateway running it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import mcp_types as types
import orjson

from toolweave.common_types import JSONObject, object_at
from toolweave.composite.base import ElicitOutcome
from toolweave.composite.errors import ElicitUnavailable
from toolweave.executor import Session
from toolweave.executor.approval import APPROVAL_SCHEMA
from toolweave.gateway import Gateway
from toolweave.results import error_result
from toolweave.server.ui.errors import LiveCallRefused
from toolweave.server.ui.try_view import FormField, ResultView, form_fields, result_view
from toolweave.services.live_share import RENEW_SECONDS, LiveShare
from toolweave.wire.relay import client_of_call

logger = logging.getLogger("toolweave.ui")

MAX_RUNNING_PER_SESSION = 4
"""Calls one browser session may have running at once (a fifth is refused with the reason)."""
MAX_KEPT = 500
"""Calls kept in all (running or finished); the oldest finished ones go first."""
KEEP_SECONDS = 900.0
"""How long a finished call's result stays available to its page."""
MAX_QUESTIONS = 16
"""Questions one call may have open at once (a workflow's parallel elicitation steps)."""
MAX_PROGRESS = 50
"""Progress lines kept per call (the newest)."""
MAX_MESSAGE = 2_000
"""Characters of a progress line or question shown (a backend controls them)."""


MAX_SHARED_RESULT = 4 * 1024 * 1024
"""Bytes of a result shared with the other gateways; a larger one is shown there as too large."""
STALE_SECONDS = 2.5 * RENEW_SECONDS
"""A call another gateway runs whose state was not renewed for this long: that gateway stopped."""

CANCELLED = "the call was cancelled from the page before it finished"
GATEWAY_STOPPED = (
    "the gateway running this call stopped before it finished; if the tool keeps a run, "
    "find it under Runs (it may be resumed there)"
)
Action = Literal["accept", "decline", "cancel"]


def owner_tag(owner: str) -> str:
    """What the shared state says of the browser session owning a call: a hash, never its cookie."""
    return hashlib.sha256(owner.encode()).hexdigest()[:32]


def _noop() -> None:
    return None


@dataclass(slots=True)
class Question:
    """Something the running call asks the person at the page; answered through `answer`."""

    id: str
    message: str
    fields: list[FormField]
    approval: bool
    """An approval (yes / no) rather than a form."""
    answer: asyncio.Future[ElicitOutcome]
    asked_at: float = field(default_factory=time.time)
    schema: JSONObject = field(default_factory=dict)
    """The requested schema (another gateway builds the form from it)."""


@dataclass(slots=True)
class LiveCall:
    id: str
    owner: str
    """The browser session that started it."""
    tool: str
    started_at: float = field(default_factory=time.time)
    progress: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_PROGRESS))
    done_steps: float = 0.0
    total_steps: float | None = None
    questions: list[Question] = field(default_factory=list)
    result: ResultView | None = None
    finished_at: float | None = None
    task: asyncio.Task[None] | None = None
    raw_result: JSONObject | None = None
    """The result as JSON (what the other gateways are given)."""
    instance: str | None = None
    """For a call another gateway runs: that gateway (orders go to it); None: it runs here."""
    changed: Callable[[], None] = _noop
    """Called on every change the page would show (the shared state is written behind)."""

    @property
    def running(self) -> bool:
        return self.finished_at is None

    @property
    def question(self) -> Question | None:
        """The question to show now (the oldest open one)."""
        return self.questions[0] if self.questions else None

    @property
    def elapsed(self) -> float:
        return (self.finished_at or time.time()) - self.started_at

    # -- the call's channels back to the page ---------------------------------

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        self.done_steps, self.total_steps = progress, total
        if message:
            self.progress.append(message[:MAX_MESSAGE])
        self.changed()

    async def ask(self, message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
        """The call's `elicit`: show the question in the page and wait for the answer (or the timeout)."""
        if len(self.questions) >= MAX_QUESTIONS:
            raise ElicitUnavailable(f"this call already has {MAX_QUESTIONS} questions waiting in the page")
        approval = schema == APPROVAL_SCHEMA
        fields = [] if approval else form_fields(schema)
        question = Question(
            id=secrets.token_urlsafe(8),
            message=message[:MAX_MESSAGE],
            fields=fields,
            approval=approval,
            answer=asyncio.get_running_loop().create_future(),
            schema=schema,
        )
        self.questions.append(question)
        self.changed()
        try:
            async with asyncio.timeout(timeout):
                return await question.answer
        finally:
            self.settle(question)

    def settle(self, question: Question) -> None:
        """The question is answered (or given up): no longer shown, so the page goes back to following."""
        if question in self.questions:
            self.questions.remove(question)
            self.changed()

    def find_question(self, question_id: str) -> Question | None:
        return next((q for q in self.questions if q.id == question_id), None)

    # -- shared with the other gateways ----------------------------------------------------

    def snapshot(self) -> JSONObject:
        """What a page shows of the call, as JSON (`services.live_share`)."""
        return {
            "id": self.id,
            "owner": owner_tag(self.owner),
            "tool": self.tool,
            "started_at": self.started_at,
            "progress": list(self.progress),
            "done_steps": self.done_steps,
            "total_steps": self.total_steps,
            "questions": [
                {"id": q.id, "message": q.message, "schema": q.schema, "approval": q.approval}
                for q in self.questions
            ],
            "result": self.raw_result,
            "finished_at": self.finished_at,
            "running": self.running,
        }

    @classmethod
    def from_snapshot(cls, data: JSONObject, owner: str) -> LiveCall:
        """A call another gateway runs, as its last snapshot shows it (questions cannot be answered
        on it: `LiveCalls.answer` relays them)."""
        loop = asyncio.get_running_loop()
        call = cls(
            id=str(data.get("id")),
            owner=owner,
            tool=str(data.get("tool")),
            started_at=_float(data.get("started_at")) or time.time(),
            done_steps=_float(data.get("done_steps")) or 0.0,
            total_steps=_float(data.get("total_steps")),
            finished_at=_float(data.get("finished_at")),
            instance=str(data.get("instance") or ""),
        )
        call.progress.extend(str(line)[:MAX_MESSAGE] for line in _list(data.get("progress"))[-MAX_PROGRESS:])
        for asked in _list(data.get("questions"))[:MAX_QUESTIONS]:
            if not isinstance(asked, dict):
                continue
            schema = object_at(asked, "schema")
            approval = bool(asked.get("approval"))
            call.questions.append(
                Question(
                    id=str(asked.get("id")),
                    message=str(asked.get("message"))[:MAX_MESSAGE],
                    fields=[] if approval else form_fields(schema),
                    approval=approval,
                    answer=loop.create_future(),
                    schema=schema,
                )
            )
        result = data.get("result")
        if data.get("running"):
            renewed = _float(data.get("renewed_at")) or 0.0
            if time.time() - renewed > STALE_SECONDS:  # its gateway died (or lost its store)
                call.questions.clear()
                call.finished_at = renewed or time.time()
                call.result = result_view(error_result(GATEWAY_STOPPED))
        elif isinstance(result, dict):
            call.finished_at = call.finished_at or time.time()
            try:
                call.result = result_view(types.CallToolResult.model_validate(result))
            except ValueError:
                call.result = result_view(error_result("the result could not be read"))
        else:
            call.finished_at = call.finished_at or time.time()
            call.result = result_view(error_result("the result was too large to share between gateways"))
        return call


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class PageChannel:
    """The page as the calling client of a backend (`wire.relay.ClientChannel`): it answers
    `elicitation/create` and shows log messages; sampling and roots it cannot answer."""

    def __init__(self, call: LiveCall) -> None:
        self.call = call

    def can_answer(self, method: str) -> bool:
        return method == "elicitation/create"

    async def request(self, method: str, params: Any, progress: Any = None) -> dict[str, Any]:
        params = params if isinstance(params, dict) else {}
        schema = params.get("requestedSchema")
        message = str(params.get("message") or "")
        try:
            outcome = await self.call.ask(message, schema if isinstance(schema, dict) else {}, None)
        except ElicitUnavailable:
            return {"action": "cancel"}
        if outcome.action == "accept":
            return {"action": "accept", "content": outcome.content or {}}
        return {"action": outcome.action}

    async def log(self, params: Any) -> None:
        level = params.get("level") if isinstance(params, dict) else None
        data = params.get("data") if isinstance(params, dict) else None
        text = data if isinstance(data, str) else repr(data)
        self.call.progress.append(f"[{level}] {text}"[:MAX_MESSAGE])
        self.call.changed()


class LiveCalls:
    """The calls pages have started, by id, each owned by one browser session."""

    def __init__(self, share: LiveShare | None = None) -> None:
        self._calls: OrderedDict[str, LiveCall] = OrderedDict()
        self.share = share
        """The other gateways' view of the calls (None: one gateway, nothing shared)."""
        if share is not None:
            share.handlers.append(self._ordered)

    def get(self, owner: str, call_id: str) -> LiveCall | None:
        """A call running (or kept) here."""
        self._expire()
        found = self._calls.get(call_id)
        return found if found is not None and found.owner == owner else None

    async def find(self, owner: str, call_id: str) -> LiveCall | None:
        """A call of `owner`'s, running here or (as its last shared state) on another gateway."""
        found = self.get(owner, call_id)
        if found is not None or self.share is None:
            return found
        data = await self.share.read(call_id)
        if data is None or data.get("owner") != owner_tag(owner) or data.get("id") != call_id:
            return None
        return LiveCall.from_snapshot(data, owner)

    async def published(self) -> None:
        """Until the calls started so far are visible to the other gateways (before the page that
        follows one is sent: its first poll may reach another gateway)."""
        if self.share is not None:
            await self.share.flush()

    async def answer(self, call: LiveCall, question: Question, outcome: ElicitOutcome) -> bool:
        """Give the call its answer (relayed to the gateway running it); False when the question is
        no longer waiting here or the answer could not be relayed."""
        if call.instance is None:
            if question.answer.done():
                return False
            question.answer.set_result(outcome)
            call.settle(question)
            return True
        if self.share is None:
            return False
        order = {
            "t": "answer",
            "call": call.id,
            "owner": owner_tag(call.owner),
            "question": question.id,
            "action": outcome.action,
            "content": outcome.content,
        }
        sent = await self.share.order(call.instance, order)
        if sent:
            call.settle(question)
        return sent

    async def stop(self, call: LiveCall) -> bool:
        """Cancel a running call, here or on the gateway running it; False if it had ended."""
        if call.instance is None:
            return self.cancel(call)
        if not call.running or self.share is None:
            return False
        order = {"t": "cancel", "call": call.id, "owner": owner_tag(call.owner)}
        return await self.share.order(call.instance, order)

    async def _ordered(self, order: JSONObject) -> None:
        """An answer or a cancel posted to another gateway for a call running here."""
        call = self._calls.get(str(order.get("call")))
        if call is None or owner_tag(call.owner) != order.get("owner"):
            return
        if order.get("t") == "cancel":
            self.cancel(call)
            return
        question = call.find_question(str(order.get("question")))
        action = order.get("action")
        content = order.get("content")
        if question is None or question.answer.done() or action not in ("accept", "decline", "cancel"):
            return
        outcome = ElicitOutcome(cast(Action, action), content if isinstance(content, dict) else None)
        question.answer.set_result(outcome)
        call.settle(question)

    def start(
        self, gateway: Gateway, caller: Session, owner: str, name: str, arguments: dict[str, Any]
    ) -> LiveCall:
        """Start calling `name` as `caller`, asking the page's person when the call needs an answer."""
        self._expire()
        running = sum(1 for call in self._calls.values() if call.owner == owner and call.running)
        if running >= MAX_RUNNING_PER_SESSION:
            raise LiveCallRefused(
                f"{running} calls from this page are still running (at most {MAX_RUNNING_PER_SESSION}); "
                "wait for one to finish or cancel it"
            )
        call = LiveCall(id=secrets.token_urlsafe(16), owner=owner, tool=name)
        if self.share is not None:
            share = self.share
            call.changed = lambda: share.changed(call.id)
            share.track(call.id, call.snapshot)
        executor = gateway.executor(caller.asking_with(call.ask))
        task = asyncio.get_running_loop().create_task(
            self._run(call, executor, arguments), name=f"ui-call:{name}"
        )
        call.task = task
        # a task cancelled before it ever ran never enters `_run`: it must still end its call (or the
        # call would count as running for good, holding one of the session's slots)
        task.add_done_callback(lambda _task: self._finish(call, error_result(CANCELLED)))
        self._calls[call.id] = call
        self._trim()
        return call

    async def _run(self, call: LiveCall, executor: Any, arguments: dict[str, Any]) -> None:
        try:
            with client_of_call(PageChannel(call)):  # a backend asking its client mid-call asks the page
                result = await executor.call(call.tool, arguments, progress=call.report)
        except asyncio.CancelledError:
            result = error_result(CANCELLED)
        except Exception as error:
            logger.exception("a call from the UI failed")
            result = error_result(f"the call failed inside the gateway: {type(error).__name__}: {error}")
        self._finish(call, result)

    def _finish(self, call: LiveCall, result: types.CallToolResult) -> None:
        if call.finished_at is not None:
            return
        call.result = result_view(result)
        if self.share is not None:
            raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            if len(orjson.dumps(raw)) <= MAX_SHARED_RESULT:
                call.raw_result = raw
        call.finished_at = time.time()
        for question in call.questions:
            if not question.answer.done():
                question.answer.cancel()
        call.changed()

    def cancel(self, call: LiveCall) -> bool:
        """Stop a running call (the executor records its run as cancelled); False if it had ended."""
        if call.task is not None and not call.task.done():
            call.task.cancel()
            return True
        return False

    def _expire(self) -> None:
        oldest = time.time() - KEEP_SECONDS
        for call_id in [
            c.id for c in self._calls.values() if c.finished_at is not None and c.finished_at < oldest
        ]:
            del self._calls[call_id]
            if self.share is not None:
                self.share.forget(call_id)

    def _trim(self) -> None:
        """Beyond MAX_KEPT, forget the oldest finished calls (running ones are never dropped)."""
        excess = len(self._calls) - MAX_KEPT
        for call_id in [c.id for c in self._calls.values() if not c.running][: max(excess, 0)]:
            del self._calls[call_id]

    async def close(self) -> None:
        """Cancel every running call (the gateway is stopping)."""
        tasks = [c.task for c in self._calls.values() if c.task is not None and not c.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
