"""The live calls behind Try it, without a browser: what a page may start is bounded, a call is its
session's alone, and a question's answer reaches the waiting call (the browser tests cover the pages)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from support.api import database_url, drop_schema
from support.configs import python_backend
from support.fixtures import OpenGateway
from support.processes import free_port
from toolweave.composite.base import ElicitOutcome
from toolweave.composite.errors import ElicitUnavailable
from toolweave.executor import Session
from toolweave.server.ui.errors import LiveCallRefused
from toolweave.server.ui.live_calls import (
    MAX_QUESTIONS,
    MAX_RUNNING_PER_SESSION,
    STALE_SECONDS,
    LiveCall,
    LiveCalls,
)
from toolweave.services import live_share
from toolweave.services.live_share import DatabaseLiveShare, LiveShare, RedisLiveShare
from toolweave.store import Database

REDIS_ENV = "TOOLWEAVE_TEST_REDIS_URL"


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


# -- followed from another gateway (services.live_share) ------------------------------------------------


@contextlib.asynccontextmanager
async def _two_shares(broker: str, tmp_path: Path) -> AsyncIterator[tuple[LiveShare, LiveShare]]:
    """The shares of two gateways on one deployment: over Redis, or PostgreSQL without it."""
    if broker == "redis" and not os.environ.get(REDIS_ENV):
        pytest.skip(f"set {REDIS_ENV}")
    url, schema = database_url("sqlite" if broker == "redis" else "postgres", tmp_path)
    try:
        async with Database.from_url(url) as one, Database.from_url(url) as two:
            shares: list[LiveShare] = (
                [RedisLiveShare(db, os.environ[REDIS_ENV]) for db in (one, two)]
                if broker == "redis"
                else [DatabaseLiveShare(db) for db in (one, two)]
            )
            for share in shares:
                await share.start()
            try:
                for share in shares:
                    await asyncio.wait_for(share.listening.wait(), 10)
                yield shares[0], shares[1]
            finally:
                for share in shares:
                    await share.close()
    finally:
        if schema is not None:
            await drop_schema(url.split("?")[0], schema)


@pytest.mark.parametrize("broker", ["redis", "postgres"])
async def test_a_call_is_followed_answered_and_cancelled_from_another_gateway(
    open_gateway: OpenGateway, tmp_path: Path, broker: str
) -> None:
    gateway = await open_gateway({"backends": [python_backend()]})
    async with _two_shares(broker, tmp_path) as (here_share, there_share):
        here, there = LiveCalls(here_share), LiveCalls(there_share)
        call = here.start(gateway, Session(), "page", "py__nap", {"seconds": 30})
        await here.published()
        seen = await there.find("page", call.id)
        assert seen is not None and seen.running and seen.tool == "py__nap" and seen.instance
        assert await there.find("another page", call.id) is None  # only its own browser session
        # a question the call asks shows on the other gateway, whose answer reaches the call
        asking = asyncio.create_task(
            call.ask(
                "Your name?",
                {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                10,
            )
        )
        await _until(lambda: _question_of(there, call.id))
        seen = await there.find("page", call.id)
        assert seen is not None and seen.question is not None and seen.question.message == "Your name?"
        assert [field.name for field in seen.question.fields] == ["name"]
        assert await there.answer(seen, seen.question, ElicitOutcome("accept", {"name": "Ada"}))
        assert (await asyncio.wait_for(asking, 5)).content == {"name": "Ada"}
        await _until(lambda: _no_question(there, call.id))
        # cancelled from the other gateway: the call stops here, and there it shows its end
        assert await there.stop(seen)
        await asyncio.wait_for(asyncio.gather(call.task, return_exceptions=True), 5)  # type: ignore[arg-type]
        assert call.result is not None and "cancelled" in call.result.texts[0]

        async def ended() -> bool:
            found = await there.find("page", call.id)
            return found is not None and not found.running

        await _until(ended)
        found = await there.find("page", call.id)
        assert found is not None and found.result is not None and "cancelled" in found.result.texts[0]


async def _question_of(live: LiveCalls, call_id: str) -> bool:
    found = await live.find("page", call_id)
    return found is not None and found.question is not None


async def _no_question(live: LiveCalls, call_id: str) -> bool:
    found = await live.find("page", call_id)
    return found is not None and found.question is None


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    async with asyncio.timeout(10):
        while not await check():  # noqa: ASYNC110 - another gateway's writes, polled as its page does
            await asyncio.sleep(0.05)


async def test_a_call_whose_gateway_stopped_is_not_shown_running(tmp_path: Path) -> None:
    snapshot = {"id": "c", "tool": "t", "running": True, "renewed_at": time.time() - 2 * STALE_SECONDS}
    call = LiveCall.from_snapshot(snapshot, "page")
    assert (
        not call.running and call.result is not None and "stopped before it finished" in call.result.texts[0]
    )
    fresh = LiveCall.from_snapshot({**snapshot, "renewed_at": time.time()}, "page")
    assert fresh.running


async def test_a_store_that_failed_is_not_asked_again_for_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis unreachable: the first write fails (a finished call's last state is kept for the next
    renewal), and for DOWN_SECONDS nothing asks the store, so a stuck broker holds no page's poll."""
    monkeypatch.setattr(live_share, "DOWN_SECONDS", 0.3)
    async with Database.from_url(f"sqlite:///{tmp_path / 'tw.db'}") as db:
        share = RedisLiveShare(db, f"redis://127.0.0.1:{free_port()}/0")
        asked = 0
        real = share._read

        async def counted(call_id: str) -> Any:
            nonlocal asked
            asked += 1
            return await real(call_id)

        monkeypatch.setattr(share, "_read", counted)
        try:
            share.track("c1", lambda: {"id": "c1", "running": False})
            await share.flush()
            assert not share.available and "c1" in share._tracked  # its last write is still due
            assert await share.read("c1") is None and asked == 0  # not asked while it is down
            assert not await share.order("elsewhere", {"t": "cancel"})
            await asyncio.sleep(0.35)
            assert await share.read("c1") is None and asked == 1  # asked again after the pause
        finally:
            await share.close()
