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
long a finished call is kept for its page. The state lives in this
process's memory (unlike UI logins, which are in the database): behind
several gateways without stickiness, following a call live needs its page
to reach the gateway running it (docs/ui.md); its run record is shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolweave.composite.base import ElicitOutcome
from toolweave.composite.errors import ElicitUnavailable
from toolweave.executor import Session
from toolweave.executor.approval import APPROVAL_SCHEMA
from toolweave.gateway import Gateway
from toolweave.results import error_result
from toolweave.server.ui.errors import LiveCallRefused
from toolweave.server.ui.try_view import FormField, ResultView, form_fields, result_view
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


CANCELLED = "the call was cancelled from the page before it finished"


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
        )
        self.questions.append(question)
        try:
            async with asyncio.timeout(timeout):
                return await question.answer
        finally:
            self.settle(question)

    def settle(self, question: Question) -> None:
        """The question is answered (or given up): no longer shown, so the page goes back to following."""
        if question in self.questions:
            self.questions.remove(question)

    def find_question(self, question_id: str) -> Question | None:
        return next((q for q in self.questions if q.id == question_id), None)


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


class LiveCalls:
    """The calls pages have started, by id, each owned by one browser session."""

    def __init__(self) -> None:
        self._calls: OrderedDict[str, LiveCall] = OrderedDict()

    def get(self, owner: str, call_id: str) -> LiveCall | None:
        self._expire()
        found = self._calls.get(call_id)
        return found if found is not None and found.owner == owner else None

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
        call.finished_at = time.time()
        for question in call.questions:
            if not question.answer.done():
                question.answer.cancel()

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
