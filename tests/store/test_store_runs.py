from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select, update

from toolweave.runs import MemoryRunStore, RunRecord, RunStore, StepRecord, new_run_id
from toolweave.store import Database, SqlRunStore
from toolweave.store.runs import INTERRUPTED_ERROR
from toolweave.store.tables import gateway_instances, runs


@pytest.fixture
async def store(db: Database) -> SqlRunStore:
    return SqlRunStore(db)


def make_run(tool: str = "deploy", tenant: str | None = "acme", **fields: Any) -> RunRecord:
    return RunRecord(id=new_run_id(), tool=tool, kind="workflow", tenant=tenant, **fields)


async def age_instance(db: Database, instance_id: str, seconds: float) -> None:
    async with db.write() as conn:
        statement = update(gateway_instances).where(gateway_instances.c.id == instance_id)
        await conn.execute(statement.values(last_seen=time.time() - seconds))


# -- the RunStore protocol, checked against MemoryRunStore ------------------------


@pytest.mark.parametrize("method", ["start_run", "checkpoint", "finish_run", "get_run", "list_runs"])
def test_signatures_match_the_protocol(method: str) -> None:
    assert inspect.signature(getattr(SqlRunStore, method)) == inspect.signature(getattr(RunStore, method))
    assert inspect.iscoroutinefunction(getattr(SqlRunStore, method))


Scenario = Callable[[RunStore, list[RunRecord]], Awaitable[None]]


async def workflow_with_retries(store: RunStore, records: list[RunRecord]) -> None:
    record = records[0]
    await store.start_run(record)
    await store.checkpoint(record.id, StepRecord("apply", "running"), {"apply": None})
    await store.checkpoint(record.id, StepRecord("probe", "completed", 1, 3.5, {"ok": True}), {"probe": 1})
    await store.checkpoint(record.id, StepRecord("apply", "completed", 2, 12.25, [1, "two"]), {"apply": 2})
    await store.checkpoint("no-such-run", StepRecord("x", "completed"))
    record.status, record.latency_ms, record.finished_at = "completed", 20.5, record.started_at + 1
    await store.finish_run(record)


async def router_and_fanout(store: RunStore, records: list[RunRecord]) -> None:
    for index, record in enumerate(records):
        await store.start_run(record)
        record.status = "failed" if index % 2 else "completed"
        record.operation, record.reason = "generic", "default operation"
        record.steps = [StepRecord("generic", record.status, 1, 4.0, None, "boom" if index % 2 else None)]
        await store.finish_run(record)


def scenario_records() -> list[RunRecord]:
    base = time.time()
    records = [
        make_run("deploy", "acme", arguments={"env": "prod", "token": "***"}, started_at=base),
        make_run("scrape", "globex", started_at=base + 1),
        make_run("scrape", None, started_at=base + 2),
        make_run("scrape", "acme", started_at=base + 3),
    ]
    return records


@pytest.mark.parametrize("scenario", [workflow_with_retries, router_and_fanout])
async def test_behaves_like_the_memory_store(store: SqlRunStore, scenario: Scenario) -> None:
    records = scenario_records()
    memory = MemoryRunStore()
    await scenario(memory, copy.deepcopy(records))
    await scenario(store, copy.deepcopy(records))
    for record in records:
        for tenant in (None, "acme", "globex"):
            expected = await memory.get_run(record.id, tenant)
            actual = await store.get_run(record.id, tenant)
            assert (actual.to_dict() if actual else None) == (expected.to_dict() if expected else None)
    for filters in (
        {},
        {"tenant": "acme"},
        {"tenant": "globex"},
        {"tool": "scrape"},
        {"status": "failed"},
        {"tool": "scrape", "limit": 2},
    ):
        expected_list = [r.to_dict() for r in await memory.list_runs(**filters)]
        assert [r.to_dict() for r in await store.list_runs(**filters)] == expected_list, filters


async def test_round_trips_every_field(store: SqlRunStore) -> None:
    record = make_run(
        operation="linkedin",
        reason="url contains 'linkedin.com'",
        error=None,
        latency_ms=12.345678,
        state={"steps": {"a": {"output": {"nested": [1, 2.5, None, True]}}}},
        arguments={"url": "https://x", "n": 3},
    )
    record.steps = [StepRecord("a", "completed", 3, 1.5, {"text": "é ✓"}, None)]
    record.finished_at = record.started_at + 0.25
    record.status = "completed"
    await store.finish_run(record)
    loaded = await store.get_run(record.id)
    assert loaded is not None and loaded.to_dict() == record.to_dict()


@pytest.mark.parametrize("output", [7, 2.5, -3, "7", True, None, [], "", 2**53])
async def test_scalar_outputs_keep_their_type(store: SqlRunStore, output: Any) -> None:
    record = make_run()
    await store.start_run(record)
    await store.checkpoint(record.id, StepRecord("a", "completed", output=output))
    loaded = await store.get_run(record.id)
    assert loaded is not None
    assert loaded.steps[0].output == output
    assert type(loaded.steps[0].output) is type(output)


async def test_values_json_cannot_hold_are_stringified(store: SqlRunStore) -> None:
    record = make_run()
    await store.start_run(record)
    moment = datetime(2025, 1, 2, tzinfo=UTC)
    output = {"when": moment, "tags": {"x"}, 1: "int key"}
    await store.checkpoint(record.id, StepRecord("a", "completed", output=output), {"when": moment})
    loaded = await store.get_run(record.id)
    assert loaded is not None
    assert loaded.steps[0].output == {"when": moment.isoformat(), "tags": "{'x'}", "1": "int key"}
    assert loaded.state == {"when": moment.isoformat()}


async def test_finish_merges_checkpoints_the_caller_did_not_keep(store: SqlRunStore) -> None:
    record = make_run(state={"given": 1})
    await store.start_run(record)
    await store.checkpoint(record.id, StepRecord("a", "completed"), {"a": "out", "given": 0})
    finished = make_run()
    finished.id, finished.started_at, finished.status = record.id, record.started_at, "completed"
    finished.state = {"given": 2}
    finished.steps = [StepRecord("b", "completed")]
    await store.finish_run(finished)
    loaded = await store.get_run(record.id)
    assert loaded is not None
    assert loaded.state == {"given": 2, "a": "out"}
    assert [s.id for s in loaded.steps] == ["a", "b"]


async def test_finish_without_start_inserts(store: SqlRunStore) -> None:
    record = make_run(status="failed", error="policy denied")
    await store.finish_run(record)
    loaded = await store.get_run(record.id, "acme")
    assert loaded is not None and loaded.error == "policy denied"


async def test_long_names_are_recorded(store: SqlRunStore) -> None:
    record = make_run("t" * 300, operation="o" * 300)
    record.steps = [StepRecord("s" * 300, "completed")]
    await store.finish_run(record)
    loaded = await store.get_run(record.id)
    assert loaded is not None and loaded.to_dict() == record.to_dict()


async def test_unknown_runs(store: SqlRunStore) -> None:
    assert await store.get_run("missing") is None
    assert await store.list_runs(tenant="nobody") == []


@pytest.mark.parametrize("limit", [0, -1, True, 2.5])
async def test_bad_limits(store: SqlRunStore, limit: Any) -> None:
    with pytest.raises(ValueError, match="limit"):
        await store.list_runs(limit=limit)


def test_stale_window_must_exceed_heartbeat(db: Database) -> None:
    with pytest.raises(ValueError, match="stale_after_seconds"):
        SqlRunStore(db, heartbeat_seconds=30, stale_after_seconds=30)


async def test_retention_removes_old_finished_runs(store: SqlRunStore) -> None:
    old = make_run(status="completed", started_at=100.0, finished_at=101.0)
    old.steps = [StepRecord("a", "completed")]
    recent = make_run(status="completed", finished_at=time.time())
    running = make_run(started_at=100.0)
    for record in (old, recent):
        await store.finish_run(record)
    await store.start_run(running)
    assert await store.delete_finished_before(time.time() - 60) == 1
    assert {r.id for r in await store.list_runs()} == {recent.id, running.id}


# -- interrupted runs ---------------------------------------------------------------


async def test_startup_interrupts_runs_of_dead_gateways_only(db: Database) -> None:
    crashed, alive = SqlRunStore(db), SqlRunStore(db)
    orphan, live = make_run(), make_run()
    await crashed.start_run(orphan)
    await alive.start_run(live)
    done = make_run(status="completed", finished_at=time.time())
    await crashed.finish_run(done)
    await age_instance(db, crashed.instance_id, 3600)

    starting = SqlRunStore(db)
    assert await starting.mark_interrupted_on_start() == 1
    interrupted = await starting.get_run(orphan.id)
    assert interrupted is not None
    assert (interrupted.status, interrupted.error) == ("interrupted", INTERRUPTED_ERROR)
    assert interrupted.finished_at is None
    assert (await starting.get_run(live.id)).status == "running"  # type: ignore[union-attr]
    assert (await starting.get_run(done.id)).status == "completed"  # type: ignore[union-attr]
    assert [r.id for r in await starting.list_interrupted()] == [orphan.id]
    async with db.read() as conn:
        instances = set((await conn.execute(select(gateway_instances.c.id))).scalars())
    assert instances == {alive.instance_id, starting.instance_id}


async def test_runs_without_an_owner_are_interrupted(db: Database, store: SqlRunStore) -> None:
    record = make_run()
    await store.start_run(record)
    async with db.write() as conn:
        await conn.execute(update(runs).where(runs.c.id == record.id).values(owner=None))
    assert await SqlRunStore(db).mark_interrupted_on_start() == 1


async def test_clean_close_interrupts_own_unfinished_runs(db: Database) -> None:
    gateway, other = SqlRunStore(db), SqlRunStore(db)
    mine, theirs, finished = make_run(), make_run(), make_run(status="completed")
    await gateway.start_run(mine)
    await other.start_run(theirs)
    await gateway.finish_run(finished)
    await gateway.close()
    assert (await other.get_run(mine.id)).status == "interrupted"  # type: ignore[union-attr]
    assert (await other.get_run(theirs.id)).status == "running"  # type: ignore[union-attr]
    assert (await other.get_run(finished.id)).status == "completed"  # type: ignore[union-attr]


async def test_exactly_one_gateway_claims_an_interrupted_run(db: Database) -> None:
    crashed = SqlRunStore(db)
    record = make_run(tenant="acme")
    await crashed.start_run(record)
    await crashed.checkpoint(record.id, StepRecord("a", "completed", output=1), {"a": 1})
    await crashed.close()

    contenders = [SqlRunStore(db) for _ in range(4)]
    results = await asyncio.gather(*(c.claim(record.id) for c in contenders))
    winners = [(c, r) for c, r in zip(contenders, results, strict=True) if r is not None]
    assert len(winners) == 1
    winner, claimed = winners[0]
    assert claimed is not None
    assert (claimed.status, claimed.error, claimed.state) == ("running", None, {"a": 1})
    assert [s.id for s in claimed.steps] == ["a"]
    assert await winner.claim(record.id) is None

    await winner.start_run(claimed)
    await winner.checkpoint(record.id, StepRecord("b", "completed"), {"b": 2})
    claimed.status = "completed"
    await winner.finish_run(claimed)
    final = await winner.get_run(record.id)
    assert final is not None
    assert ([s.id for s in final.steps], final.state, final.status) == (
        ["a", "b"],
        {"a": 1, "b": 2},
        "completed",
    )


async def test_claim_respects_the_tenant(db: Database, store: SqlRunStore) -> None:
    record = make_run(tenant="acme")
    await store.start_run(record)
    await store.close()
    assert await SqlRunStore(db).claim(record.id, tenant="globex") is None
    assert await SqlRunStore(db).claim(record.id, tenant="acme") is not None


async def test_start_keeps_the_instance_alive(db: Database) -> None:
    gateway = SqlRunStore(db, heartbeat_seconds=0.05, stale_after_seconds=5)
    assert await gateway.start() == 0
    try:
        async with db.read() as conn:
            query = select(gateway_instances.c.last_seen).where(gateway_instances.c.id == gateway.instance_id)
            first = (await conn.execute(query)).scalar_one()
        await asyncio.sleep(0.3)
        async with db.read() as conn:
            later = (await conn.execute(query)).scalar_one()
        assert later > first
    finally:
        await gateway.close()
    async with db.read() as conn:
        assert (await conn.execute(query)).one_or_none() is None


async def test_the_heartbeat_interrupts_runs_of_gateways_that_died_after_it_started(db: Database) -> None:
    """A gateway restarted right after a crash sees the dead one as alive at first; its heartbeat catches up."""
    survivor = SqlRunStore(db, heartbeat_seconds=0.05, stale_after_seconds=5)
    crashed = SqlRunStore(db)
    orphan = make_run()
    await crashed.start_run(orphan)
    assert await survivor.start() == 0  # the crashed instance was seen just now
    try:
        await age_instance(db, crashed.instance_id, 3600)
        async with asyncio.timeout(10):
            while (await survivor.get_run(orphan.id)).status != "interrupted":  # type: ignore[union-attr]  # noqa: ASYNC110
                await asyncio.sleep(0.02)
    finally:
        await survivor.close()


async def test_each_orphaned_run_is_handed_to_exactly_one_sweeping_gateway(db: Database) -> None:
    """Gateways sweeping at once (the lease of a dead one lapsed): every orphaned run is reported to
    one of them, none twice, so exactly one gateway takes each over; a one-shot store never sweeps."""
    crashed = SqlRunStore(db)
    orphans = [make_run() for _ in range(12)]
    for record in orphans:
        await crashed.start_run(record)
    await age_instance(db, crashed.instance_id, 3600)
    handed: list[list[str]] = []
    command = SqlRunStore(db, sweeps=False)
    assert await command.interrupt_orphans() == []  # a `toolweave runs` beside the gateways moves nothing
    sweepers = [SqlRunStore(db, on_orphaned=handed.append) for _ in range(3)]
    moved = await asyncio.gather(*(store.interrupt_orphans() for store in sweepers))
    ids = [run_id for each in moved for run_id in each]
    assert sorted(ids) == sorted(record.id for record in orphans)  # all of them, none twice
    for store, each in zip(sweepers, moved, strict=True):
        store._hand_over(each)
    assert sorted(run_id for each in handed for run_id in each) == sorted(ids)
    assert await sweepers[0].interrupt_orphans() == []  # already interrupted: nobody is handed them again


def test_intervals_from_the_environment(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWEAVE_RUN_HEARTBEAT_SECONDS", "0.5")
    monkeypatch.setenv("TOOLWEAVE_RUN_STALE_AFTER_SECONDS", "3")
    store = SqlRunStore(db)
    assert (store._heartbeat_seconds, store._stale_after) == (0.5, 3.0)
    assert SqlRunStore(db, heartbeat_seconds=1, stale_after_seconds=2)._stale_after == 2  # arguments win
    for bad in ("soon", "0", "-1", "inf", "nan"):
        monkeypatch.setenv("TOOLWEAVE_RUN_STALE_AFTER_SECONDS", bad)
        with pytest.raises(ValueError, match="TOOLWEAVE_RUN_STALE_AFTER_SECONDS must be a positive number"):
            SqlRunStore(db)
    monkeypatch.setenv("TOOLWEAVE_RUN_STALE_AFTER_SECONDS", "0.25")
    with pytest.raises(ValueError, match="stale_after_seconds must exceed heartbeat_seconds"):
        SqlRunStore(db)


async def test_a_paused_gateway_that_wakes_after_a_takeover_writes_nothing(db: Database) -> None:
    """The first gateway runs a workflow, is paused (SIGSTOP: no heartbeat), the second takes the run
    over (sweep and claim); the first wakes and records the step it was in and the run's end: every
    write is refused (the run stays the second's, as it was), and the first knows it lost the run."""
    paused, other = SqlRunStore(db), SqlRunStore(db)
    record = make_run(status="running", started_at=time.time())
    paused.start_run_nowait(record)
    await paused.flush()
    assert not paused.lost(record.id)
    await age_instance(db, paused.instance_id, 3600)  # its heartbeat stopped while paused
    assert await other.interrupt_orphans() == [record.id]
    claimed = await other.claim(record.id)
    assert claimed is not None
    other.checkpoint_nowait(record.id, StepRecord(id="fetch", status="completed", output={"by": "other"}))
    await other.flush()

    # the first wakes: its write-behind and awaited writes for the run are all refused
    paused.checkpoint_nowait(record.id, StepRecord(id="fetch", status="completed", output={"by": "paused"}))
    paused.finish_run_nowait(dataclasses.replace(record, status="completed", finished_at=time.time()))
    await paused.flush()
    assert paused.lost(record.id) and not other.lost(record.id)
    await paused.checkpoint(record.id, StepRecord(id="send", status="running"))
    await paused.finish_run(dataclasses.replace(record, status="failed", finished_at=time.time()))
    async with db.read() as conn:
        row = (await conn.execute(select(runs.c.owner, runs.c.status).where(runs.c.id == record.id))).one()
    assert (row.owner, row.status) == (other.instance_id, "running")
    seen = await other.get_run(record.id)
    assert seen is not None and [(s.id, s.output) for s in seen.steps] == [("fetch", {"by": "other"})]


async def test_the_heartbeat_finds_a_lost_lease_before_the_next_write(db: Database) -> None:
    """A run interrupted by another gateway's sweep (not yet claimed) is lost too: it may be claimed
    any moment, so the gateway that wakes must not go on with it."""
    paused, other = SqlRunStore(db), SqlRunStore(db)
    record = make_run(status="running", started_at=time.time())
    paused.start_run_nowait(record)
    await paused.flush()
    assert await paused.check_leases() == []
    await age_instance(db, paused.instance_id, 3600)
    assert await other.interrupt_orphans() == [record.id]
    assert await paused.check_leases() == [record.id] and paused.lost(record.id)


async def test_a_woken_gateway_stops_the_workflow_it_lost(db: Database) -> None:
    """The workflow's first step is in flight when its gateway is taken for dead and the run taken
    over; when that step returns, the next step (not safe to run twice, so its `running` marker is
    written first) finds the lease lost: it is not called, and the run stays the other gateway's."""
    from support.fakes import FakeCalls
    from support.workflows import build, catalog_for

    paused, other = SqlRunStore(db), SqlRunStore(db)
    record = make_run(tool="wf", status="running", started_at=time.time())
    paused.start_run_nowait(record)
    await paused.flush()
    steps = [{"id": "a", "tool": "x/a"}, {"id": "b", "tool": "x/b", "dependsOn": ["a"]}]
    calls = FakeCalls(delays={"x__a": 0.3})
    running = asyncio.create_task(
        build(steps, catalog_for("x/a", "x/b")).run({}, calls.context(runs=paused, run_id=record.id))
    )
    await calls.wait_started(1)
    await age_instance(db, paused.instance_id, 3600)  # paused mid-step: its heartbeat went stale
    assert await other.interrupt_orphans() == [record.id] and await other.claim(record.id) is not None
    result = await running
    assert result.is_error and [name for name, _ in calls.calls] == ["x__a"]
    assert "another gateway took this run over" in str(result.content)
    assert paused.lost(record.id)
    seen = await other.get_run(record.id)
    assert seen is not None and seen.status == "running"  # only what was written before the pause:
    assert [(step.id, step.status) for step in seen.steps] == [("a", "running")]
