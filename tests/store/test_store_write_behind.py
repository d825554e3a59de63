"""`SqlRunStore`'s write-behind (`*_nowait`): the same records as the awaited methods, written in batches;
every other method of the store reads what was recorded before it."""

from __future__ import annotations

import asyncio
import copy
import random
import time
from typing import Any

import pytest

from toolweave.runs import RunRecord, StepRecord, new_run_id
from toolweave.store import Database, SqlRunStore
from toolweave.store import runs as runs_module


def make_run(tool: str = "deploy", tenant: str | None = "acme", **fields: Any) -> RunRecord:
    return RunRecord(id=new_run_id(), tool=tool, kind="workflow", tenant=tenant, **fields)


class NoWait:
    """The RunStore protocol over the write-behind methods, for scenarios written against the protocol."""

    def __init__(self, store: SqlRunStore) -> None:
        self.store = store

    async def start_run(self, record: RunRecord) -> None:
        self.store.start_run_nowait(record)

    async def checkpoint(self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None) -> None:
        self.store.checkpoint_nowait(run_id, step, state)

    async def finish_run(self, record: RunRecord) -> None:
        self.store.finish_run_nowait(record)


def random_script(seed: int, count: int = 6) -> list[tuple[str, int, Any]]:
    """Interleaved starts, checkpoints (some of unknown runs, some rewriting a step) and finishes."""
    rng = random.Random(seed)
    script: list[tuple[str, int, Any]] = []
    started: list[int] = []
    for index in range(count):
        script.append(("start", index, {"given": index}))
        started.append(index)
        for _ in range(rng.randint(0, 6)):
            run = rng.choice(started)
            step = rng.choice("abcd")
            script.append(
                ("checkpoint", run, (step, rng.choice(["running", "completed"]), {step: rng.random()}))
            )
        if rng.random() < 0.3:
            script.append(("checkpoint", 999, ("z", "completed", None)))  # a run nobody started
    for index in started:
        steps = [rng.choice("abce") for _ in range(rng.randint(0, 3))]
        script.append(("finish", index, (steps, {"final": index})))
    rng.shuffle(script[count:])  # finishes and late checkpoints interleave
    return script


async def play(store: Any, script: list[tuple[str, int, Any]], records: dict[int, RunRecord]) -> None:
    finished: set[int] = set()
    for kind, index, data in script:
        if kind == "start":
            record = records[index]
            record.state = dict(data)
            await store.start_run(record)
        elif kind == "checkpoint":
            step, status, state = data
            run_id = records[index].id if index in records else "no-such-run"
            await store.checkpoint(run_id, StepRecord(step, status, 1, 2.0, {"v": step}), state)
        elif index not in finished:
            finished.add(index)
            record = records[index]
            steps, state = data
            record.status, record.finished_at = "completed", record.started_at + 1
            record.steps = [StepRecord(step, "completed", 2, 3.0) for step in steps]
            record.state = dict(state)
            await store.finish_run(record)


@pytest.mark.parametrize("seed", range(6))
async def test_the_same_records_as_the_awaited_methods(db: Database, seed: int) -> None:
    script = random_script(seed)
    base = time.time()
    template = {i: make_run(f"t{i}", started_at=base + i) for i in range(6)}
    awaited, batched = SqlRunStore(db), SqlRunStore(db)
    records_a = copy.deepcopy(template)
    records_b = {i: copy.deepcopy(record) for i, record in template.items()}
    for record in records_b.values():
        record.id = new_run_id()
    await play(awaited, script, records_a)
    await play(NoWait(batched), script, records_b)
    for index in template:
        expected = await awaited.get_run(records_a[index].id)
        actual = await batched.get_run(records_b[index].id)  # waits for the batch
        assert expected is not None and actual is not None
        assert {**actual.to_dict(), "id": None} == {**expected.to_dict(), "id": None}, index


async def test_reads_and_writes_wait_for_what_was_recorded(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_module, "WRITE_BEHIND_SECONDS", 30.0)  # nothing would be written on its own
    store = SqlRunStore(db)
    record = make_run()
    store.start_run_nowait(record)
    store.checkpoint_nowait(record.id, StepRecord("a", "completed"), {"a": 1})
    assert (await store.get_run(record.id)).state == {"a": 1}  # type: ignore[union-attr]
    store.checkpoint_nowait(record.id, StepRecord("b", "running"))
    await store.checkpoint(record.id, StepRecord("a", "completed", 2), {"a": 2})  # after the pending one
    loaded = await store.get_run(record.id)
    assert loaded is not None and [s.id for s in loaded.steps] == ["b", "a"] and loaded.state == {"a": 2}
    record.status = "completed"
    store.finish_run_nowait(record)
    record.status = "mutated after recording"  # the record was copied when it was recorded
    assert [r.status for r in await store.list_runs()] == ["completed"]


async def test_close_writes_what_is_pending(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_module, "WRITE_BEHIND_SECONDS", 30.0)
    store = SqlRunStore(db)
    await store.start()
    record = make_run(status="completed")
    store.finish_run_nowait(record)
    await store.close()
    loaded = await SqlRunStore(db).get_run(record.id)
    assert loaded is not None and loaded.status == "completed"


async def test_written_in_the_background(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runs_module, "WRITE_BEHIND_SECONDS", 0.01)
    store, other = SqlRunStore(db), SqlRunStore(db)  # another gateway sharing the database reads them
    expected: set[str] = set()
    for _wave in range(3):  # the writer goes idle between waves and must wake up for the next
        records = [make_run(status="completed") for _ in range(10)]
        for record in records:
            store.start_run_nowait(record)
            store.finish_run_nowait(record)
        expected |= {record.id for record in records}
        async with asyncio.timeout(10):
            while {r.id for r in await other.list_runs(limit=100)} != expected:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    assert store._pending == []


async def test_one_record_the_database_refuses_loses_only_itself(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs_module, "WRITE_BEHIND_SECONDS", 30.0)  # everything below is one batch
    store = SqlRunStore(db)
    good, bad = make_run(status="running"), make_run(status="running")
    store.start_run_nowait(good)
    store.start_run_nowait(bad)
    store.checkpoint_nowait(bad.id, StepRecord(id="a", status="completed"), {"a": "\ud800"})  # no UTF-8
    good.status = "completed"
    store.finish_run_nowait(good)
    await store.flush()
    loaded = await store.get_run(good.id)
    assert loaded is not None and loaded.status == "completed"
    await store.close()
