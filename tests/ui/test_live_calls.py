"""The live calls behind Try it, without a browser: what a page may start is bounded, a call is its
session's alone, and a question's answer reaches the waiting call (the browser tests cover the pages)."""

from __future__ import annotations

import asyncio

import pytest

from support.configs import python_backend
from support.fixtures import OpenGateway
from toolweave.composite.base import ElicitOutcome
from toolweave.composite.errors import ElicitUnavailable
from toolweave.executor import Session
from toolweave.server.ui.errors import LiveCallRefused
from toolweave.server.ui.live_calls import MAX_QUESTIONS, MAX_RUNNING_PER_SESSION, LiveCall, LiveCalls


async def _settled(calls: list[LiveCall]) -> None:
    await asyncio.gather(*(call.task for call in calls if call.task is not None), return_exceptions=True)


async def test_a_session_may_run_only_so_many_calls_and_cancel_them(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [python_backend()]})
    live = LiveCalls()
    started = [
        live.start(gateway, Session(), "page-a", "py__nap", {"seconds": 30})
        for _ in range(MAX_RUNNING_PER_SESSION)
    ]
    with pytest.raises(LiveCallRefused, match=f"at most {MAX_RUNNING_PER_SESSION}"):
        live.start(gateway, Session(), "page-a", "py__nap", {"seconds": 30})
    other = live.start(
        gateway, Session(), "page-b", "py__greet", {"name": "Bo"}
    )  # another session is not held up
    assert live.get("page-a", other.id) is None and live.get("page-b", other.id) is other
    for call in started:
        live.cancel(call)
    await _settled([*started, other])
    assert all(call.result is not None and call.result.is_error for call in started)
    assert "cancelled" in started[0].result.texts[0]  # type: ignore[union-attr]
    assert other.result is not None and other.result.texts == ["Hello, Bo."]
    # finished calls no longer count: the session may start again
    again = live.start(gateway, Session(), "page-a", "py__greet", {"name": "Al"})
    await _settled([again])
    assert again.result is not None and not again.result.is_error


async def test_questions_are_bounded_and_answers_reach_the_call() -> None:
    call = LiveCall(id="c", owner="page", tool="t")
    asking = [
        asyncio.create_task(call.ask(f"q{i}?", {"type": "object", "properties": {}}, 5))
        for i in range(MAX_QUESTIONS)
    ]
    await asyncio.sleep(0)
    assert len(call.questions) == MAX_QUESTIONS
    with pytest.raises(ElicitUnavailable, match=str(MAX_QUESTIONS)):
        await call.ask("one too many?", {}, 5)
    first = call.question
    assert first is not None and first.message == "q0?"
    first.answer.set_result(ElicitOutcome("accept", {"ok": True}))
    call.settle(first)
    assert (await asyncio.wait_for(asking[0], 1)).content == {"ok": True}
    assert call.question is not None and call.question.message == "q1?"
    with pytest.raises(TimeoutError):  # an unanswered question times out as the asker said
        await call.ask("quick?", {}, 0.05)
    for task in asking[1:]:
        task.cancel()
    await asyncio.gather(*asking[1:], return_exceptions=True)
    assert call.questions == []
