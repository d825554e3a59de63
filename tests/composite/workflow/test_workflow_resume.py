"""Durable workflow runs at the engine level: `running` checkpoints, and what a resumed run re-runs.

In-process fakes only (`support.workflows`, `support.fakes`): the run store is a MemoryRunStore that also writes its
checkpoints into the backend's event log, so order is asserted from one log, never from time.
A "crash" is a cancelled call whose run store keeps exactly what was checkpointed until then.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from support.fakes import FakeCalls, FakeCatalog
from support.results import meta, texts
from support.workflows import build, catalog_for, statuses
from toolweave.composite.base import ElicitOutcome
from toolweave.runs import MemoryRunStore, RunRecord, StepRecord


class EventStore(MemoryRunStore):
    """Logs every checkpoint as `(status, step id)` into the backend's event log."""

    def __init__(self, events: list[tuple[str, str]]) -> None:
        super().__init__()
        self.events = events

    async def checkpoint(self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None) -> None:
        self.events.append((step.status, step.id))
        await super().checkpoint(run_id, step, state)


def entry(output: Any, status: str = "completed") -> dict[str, Any]:
    """A step as `state["steps"]` keeps it."""
    return {"status": status, "output": output, "content": [], "error": None, "attempts": 1}


def interrupted(done: dict[str, Any], running: list[str], started_at: float = 1_000_000.0) -> RunRecord:
    """The record of a run whose gateway stopped: `done` steps finished, `running` ones in flight."""
    steps = [StepRecord(step_id, "completed", attempts=1, output=output) for step_id, output in done.items()]
    steps += [StepRecord(step_id, "running") for step_id in running]
    return RunRecord(
        id="r1",
        tool="wf",
        kind="workflow",
        status="interrupted",
        steps=steps,
        state={"steps": {step_id: entry(output) for step_id, output in done.items()}},
        started_at=started_at,
    )


CHAIN = [
    {"id": "a", "tool": "x/a"},
    {"id": "b", "tool": "x/b", "dependsOn": ["a"], "arguments": {"v": "{{ steps.a.output.v }}"}},
    {"id": "c", "tool": "x/c", "dependsOn": ["b"]},
]


# -- running checkpoints -----------------------------------------------------------------------------


async def test_a_step_is_checkpointed_running_before_its_call_and_again_when_it_finishes() -> None:
    backend = FakeCalls(answers={"x__a": {"v": 1}})
    store = EventStore(backend.events)
    await store.start_run(RunRecord(id="r1", tool="wf", kind="workflow"))
    result = await build(CHAIN, catalog_for("x/a", "x/b", "x/c")).run(
        {}, backend.context(runs=store, run_id="r1")
    )
    assert not result.is_error
    assert backend.events == [
        ("running", "a"),
        ("start", "x__a"),
        ("end", "x__a"),
        ("completed", "a"),
        ("running", "b"),
        ("start", "x__b"),
        ("end", "x__b"),
        ("completed", "b"),
        ("running", "c"),
        ("start", "x__c"),
        ("end", "x__c"),
        ("completed", "c"),
    ]


async def test_skipped_and_elicitation_steps_get_no_running_checkpoint() -> None:
    backend = FakeCalls()
    store = EventStore(backend.events)
    await store.start_run(RunRecord(id="r1", tool="wf", kind="workflow"))
    steps = [
        {"id": "ask", "message": "ok?", "schema": {"type": "boolean"}, "defaultResponse": True},
        {"id": "never", "tool": "x/a", "condition": "{{ false }}"},
    ]
    result = await build(steps, catalog_for("x/a")).run({}, backend.context(runs=store, run_id="r1"))
    assert not result.is_error, texts(result)
    assert backend.events == [("completed", "ask"), ("skipped", "never")]


async def test_without_a_run_id_nothing_is_checkpointed() -> None:
    backend = FakeCalls()
    store = EventStore(backend.events)
    await build(CHAIN, catalog_for("x/a", "x/b", "x/c")).run({}, backend.context(runs=store))
    assert [event for event in backend.events if event[0] not in ("start", "end")] == []


# -- a crash, then resume ----------------------------------------------------------------------------


async def test_after_a_crash_mid_step_the_completed_step_is_not_run_again() -> None:
    """Cancel a call while step b is in flight (the gateway dies); resume from what the store kept."""
    first = FakeCalls(answers={"x__a": {"v": 7}}, delays={"x__b": 3600})  # b stays in flight
    store = MemoryRunStore()
    await store.start_run(RunRecord(id="r1", tool="wf", kind="workflow"))
    workflow = build(CHAIN, catalog_for("x/a", "x/b", "x/c"))
    call = asyncio.create_task(workflow.run({}, first.context(runs=store, run_id="r1")))
    async with asyncio.timeout(5):
        while ("start", "x__b") not in first.events:  # noqa: ASYNC110 - the fake has no event to wait on
            await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    saved = await store.get_run("r1")
    assert saved is not None
    assert [(s.id, s.status) for s in saved.steps] == [("a", "completed"), ("b", "running")]
    saved.status = "interrupted"

    second = FakeCalls()
    result = await workflow.run({}, second.context(runs=store, run_id="r1", resume=saved))
    assert second.calls == []  # a restored, b not idempotent, c never reached
    assert result.is_error
    assert statuses(result) == {"a": "completed", "b": "failed", "c": "cancelled"}
    assert texts(result)[0].splitlines()[1] == (
        "Step 'b' failed: step 'b' was running when the gateway stopped and its tool 'x__b' is not "
        "idempotent (no idempotentHint, no onError retry); not re-run, as it may already have taken effect"
    )
    steps = {s["id"]: s for s in meta(result)["steps"]}
    assert steps["a"]["resumed"] is True
    assert (steps["b"]["interrupted"], steps["b"]["rerun"], steps["b"]["attempts"]) == (True, False, 1)
    final = await store.get_run("r1")
    assert final is not None and final.state["steps"]["b"]["status"] == "failed"


@pytest.mark.parametrize(
    ("hints", "extra"),
    [
        ({"idempotent": True}, {}),
        ({"read_only": True}, {}),
        ({}, {"onError": {"action": "retry", "retryCount": 2, "retryDelay": "1ms"}}),
    ],
    ids=["idempotentHint", "readOnlyHint", "retry"],
)
async def test_an_in_flight_step_runs_again_when_that_is_safe(
    hints: dict[str, bool], extra: dict[str, Any]
) -> None:
    catalog = FakeCatalog().add("x/a").add("x/b", **hints).add("x/c")
    steps = [CHAIN[0], {**CHAIN[1], **extra}, CHAIN[2]]
    backend = FakeCalls(answers={"x__b": {"w": 2}})
    store = MemoryRunStore()
    resume = interrupted({"a": {"v": 7}}, ["b"])
    await store.start_run(resume)
    result = await build(steps, catalog).run({}, backend.context(runs=store, run_id="r1", resume=resume))
    assert not result.is_error, texts(result)
    assert backend.calls == [("x__b", {"v": 7}), ("x__c", {})]
    b = next(s for s in meta(result)["steps"] if s["id"] == "b")
    assert (b["status"], b["interrupted"], b["rerun"]) == ("completed", True, True)


async def test_an_in_flight_step_not_run_again_is_a_failure_that_onerror_continue_absorbs() -> None:
    steps = [
        CHAIN[0],
        {**CHAIN[1], "onError": {"action": "continue"}, "defaultResults": {"w": 0}},
        {"id": "c", "tool": "x/c", "dependsOn": ["b"], "arguments": {"w": "{{ steps.b.output.w }}"}},
    ]
    backend = FakeCalls()
    resume = interrupted({"a": {"v": 7}}, ["b"])
    result = await build(steps, catalog_for("x/a", "x/b", "x/c")).run({}, backend.context(resume=resume))
    assert not result.is_error, texts(result)
    assert statuses(result) == {"a": "completed", "b": "failed", "c": "completed"}
    assert backend.calls == [("x__c", {"w": 0})]


async def test_failure_mode_continue_runs_the_other_steps() -> None:
    steps = [CHAIN[0], CHAIN[1], {"id": "d", "tool": "x/d", "dependsOn": ["a"]}]
    backend = FakeCalls()
    resume = interrupted({"a": {"v": 7}}, ["b", "d"])
    result = await build(
        steps, FakeCatalog().add("x/a").add("x/b").add("x/d", idempotent=True), failureMode="continue"
    ).run({}, backend.context(resume=resume))
    assert result.is_error
    assert statuses(result) == {"a": "completed", "b": "failed", "d": "completed"}
    assert backend.called() == ["x__d"]


# -- forEach, elicitation, context ------------------------------------------------------------------


def for_each(**inner: Any) -> list[dict[str, Any]]:
    return [
        {
            "id": "each",
            "collection": "{{ params.items }}",
            "step": {"tool": "x/put", "arguments": {"item": "{{ item }}"}, **inner},
        }
    ]


@pytest.mark.parametrize(("idempotent", "reran"), [(True, True), (False, False)])
async def test_an_in_flight_for_each_is_one_unit(idempotent: bool, reran: bool) -> None:
    catalog = FakeCatalog().add("x/put", idempotent=idempotent)
    backend = FakeCalls()
    result = await build(for_each(), catalog, parameters={"type": "object", "properties": {"items": {}}}).run(
        {"items": [1, 2, 3]}, backend.context(resume=interrupted({}, ["each"]))
    )
    assert result.is_error is not reran
    assert backend.calls == ([("x__put", {"item": i}) for i in (1, 2, 3)] if reran else [])


async def test_an_in_flight_for_each_whose_inner_step_retries_runs_again() -> None:
    inner = {"onError": {"action": "retry", "retryCount": 1, "retryDelay": "1ms"}}
    backend = FakeCalls()
    result = await build(
        for_each(**inner), catalog_for("x/put"), parameters={"type": "object", "properties": {"items": {}}}
    ).run({"items": [1, 2]}, backend.context(resume=interrupted({}, ["each"])))
    assert not result.is_error, texts(result)
    assert len(backend.calls) == 2


async def test_a_completed_for_each_is_restored_with_its_iterations() -> None:
    output = {"iterations": [], "count": 2, "completed": 2, "failed": 0}
    backend = FakeCalls()
    result = await build(
        for_each(), catalog_for("x/put"), parameters={"type": "object", "properties": {"items": {}}}
    ).run({"items": [1, 2]}, backend.context(resume=interrupted({"each": output}, [])))
    assert not result.is_error
    assert backend.calls == [] and result.structured_content == output


async def test_an_in_flight_elicitation_is_asked_again() -> None:
    asked: list[str] = []

    async def elicit(message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
        asked.append(message)
        return ElicitOutcome("accept", {"value": True})

    steps = [{"id": "ask", "message": "go?", "schema": {"type": "boolean"}}]
    backend = FakeCalls()
    result = await build(steps, FakeCatalog()).run(
        {}, backend.context(elicit=elicit, resume=interrupted({}, ["ask"]))
    )
    assert not result.is_error and asked == ["go?"]


async def test_a_resumed_run_keeps_its_id_and_start_time_for_templates() -> None:
    steps = [
        {"id": "a", "tool": "x/a"},
        {
            "id": "b",
            "tool": "x/b",
            "dependsOn": ["a"],
            "arguments": {
                "id": "{{ workflow.id }}",
                "at": "{{ workflow.started_at }}",
                "n": "{{ workflow.step_count }}",
            },
        },
    ]
    backend = FakeCalls()
    resume = interrupted({"a": {}}, [], started_at=1_700_000_000.5)
    await build(steps, catalog_for("x/a", "x/b")).run({}, backend.context(run_id="r1", resume=resume))
    at = datetime.fromtimestamp(1_700_000_000.5, UTC).isoformat()
    assert backend.calls == [("x__b", {"id": "r1", "at": at, "n": 1})]


async def test_steps_recorded_failed_run_again() -> None:
    """A failed step had no effect to repeat (or the workflow tolerated it): a resume tries it again."""
    resume = interrupted({"a": {"v": 7}}, [])
    resume.state["steps"]["b"] = entry({}, status="failed")
    backend = FakeCalls()
    result = await build(CHAIN, catalog_for("x/a", "x/b", "x/c")).run({}, backend.context(resume=resume))
    assert not result.is_error
    assert backend.called() == ["x__b", "x__c"]
