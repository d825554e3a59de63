"""Cancelling a batch: one result per call, always; not-yet-started calls are never made.

The moment to cancel is found structurally, not by sleeping: with
`record_direct_calls` the executor writes a run record right after a call
takes its permits, and `SignallingRunStore` turns that into an event.
"""

from __future__ import annotations

import asyncio

from support.executor import MakeGateway, SignallingRunStore, backend, sleep, span, write
from support.results import text
from toolweave import Gateway
from toolweave.composite.base import ElicitOutcome
from toolweave.executor import Session
from toolweave.executor.batch import CANCELLED_BEFORE, CANCELLED_WHILE_RUNNING

RECORDED = "[gateway]\nrecord_direct_calls = true\n"
GUARD = 20  # seconds: only a hang guard; a working cancel returns long before


async def _recording_gateway(
    make_gateway: MakeGateway, policy: str = ""
) -> tuple[Gateway, SignallingRunStore]:
    store = SignallingRunStore()
    gw = await make_gateway(RECORDED + backend() + policy, runs=store)
    return gw, store


async def test_cancel_mid_batch(make_gateway: MakeGateway) -> None:
    gw, store = await _recording_gateway(make_gateway)
    cancel = asyncio.Event()
    calls = [sleep("a", 0.05), write("w", 60), sleep("b", 0.05), sleep("c", 0.05)]
    batch = asyncio.create_task(gw.execute_batch(calls, cancel=cancel))
    await store.started["t__slow_write"].wait()  # run 1 is done, the write is running
    cancel.set()
    async with asyncio.timeout(GUARD):
        results = await batch
    assert len(results) == 4
    assert span(results[0]).label == "a"
    assert results[1].is_error and text(results[1]) == CANCELLED_WHILE_RUNNING
    assert all(r.is_error and text(r) == CANCELLED_BEFORE for r in results[2:])
    # nothing after the cancel was made: only the read and the write have run records
    assert {r.tool for r in await gw.runs.list_runs()} == {"t__sleep", "t__slow_write"}
    assert (await gw.runs.list_runs(tool="t__slow_write"))[0].status == "cancelled"


async def test_cancel_within_a_serial_run_marks_the_waiting_writes_not_started(
    make_gateway: MakeGateway,
) -> None:
    gw, store = await _recording_gateway(make_gateway)
    cancel = asyncio.Event()
    calls = [write("w1", 60), write("w2", 0), write("w3", 0)]  # one run, serialised by the width-1 pool
    batch = asyncio.create_task(gw.execute_batch(calls, cancel=cancel))
    await store.started["t__slow_write"].wait()
    cancel.set()
    async with asyncio.timeout(GUARD):
        results = await batch
    assert [text(r) for r in results] == [CANCELLED_WHILE_RUNNING, CANCELLED_BEFORE, CANCELLED_BEFORE]
    assert len(await gw.runs.list_runs(tool="t__slow_write")) == 1


async def test_cancel_before_the_batch_runs_nothing(gw: Gateway) -> None:
    cancel = asyncio.Event()
    cancel.set()
    results = await gw.execute_batch([sleep("a"), write("w"), sleep("b")], cancel=cancel)
    assert [text(r) for r in results] == [CANCELLED_BEFORE] * 3
    assert (await gw.call("t__counter")).structured_content == {"value": 0}


async def test_a_call_waiting_for_approval_is_cancelled_before_execution(make_gateway: MakeGateway) -> None:
    gw, _ = await _recording_gateway(make_gateway, '[policy]\napproval = ["t__increment"]\n')
    asked = asyncio.Event()

    async def elicit(message: str, schema: dict, timeout: float | None) -> ElicitOutcome:
        asked.set()
        await asyncio.Event().wait()  # the user never answers
        raise AssertionError("unreachable")

    ex = gw.executor(Session(elicit=elicit))
    cancel = asyncio.Event()
    batch = asyncio.create_task(ex.execute_batch([{"id": "1", "name": "t__increment"}], cancel=cancel))
    await asked.wait()
    cancel.set()
    async with asyncio.timeout(GUARD):
        (result,) = await batch
    assert text(result) == CANCELLED_BEFORE
    assert (await gw.call("t__counter")).structured_content == {"value": 0}


async def test_the_backend_still_works_after_a_cancelled_call(make_gateway: MakeGateway) -> None:
    gw, store = await _recording_gateway(make_gateway)
    cancel = asyncio.Event()
    batch = asyncio.create_task(gw.execute_batch([sleep("long", 60)], cancel=cancel))
    await store.started["t__sleep"].wait()
    cancel.set()
    async with asyncio.timeout(GUARD):
        await batch
    # the session goes on: the same executor, the same backend connection
    results = await gw.execute_batch([sleep("again", 0.01)])
    assert span(results[0]).label == "again"
