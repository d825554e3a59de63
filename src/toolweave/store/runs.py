"""Run records in the database: `toolweave.runs.RunStore` for gateways with a database.

Interrupted runs. Every store is one gateway *instance* (a random id) that
writes itself into `gateway_instances` and refreshes `last_seen` (a
background heartbeat, plus piggy-backed on run writes). Each run row records
its `owner` instance. `start()` / `mark_interrupted_on_start()` turn `running`
rows whose owner has not been seen for `stale_after` seconds into
`interrupted`, and every heartbeat repeats that check, so the runs of a
gateway that crashed shortly before this one started are interrupted too,
once its heartbeat is stale; `close()` does the same for the instance's own
runs on a clean shutdown. `TOOLWEAVE_RUN_HEARTBEAT_SECONDS` and
`TOOLWEAVE_RUN_STALE_AFTER_SECONDS` change the two intervals. A heartbeat
rather than "everything running is dead" because several gateways may share
one PostgreSQL database, and one starting must not interrupt another's live
runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row, bindparam, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from toolweave.actor import Actor
from toolweave.runs import RunRecord, StepRecord, visible_to
from toolweave.store._sql import upsert
from toolweave.store.audit import write_audit
from toolweave.store.database import Database
from toolweave.store.tables import gateway_instances, run_steps, runs

WRITE_BEHIND_SECONDS = 0.1
"""How long recorded runs and checkpoints may wait before they are written (in one batch)."""
DEFAULT_HEARTBEAT_SECONDS = 3.0
DEFAULT_STALE_AFTER_SECONDS = 10.0
"""A gateway's heartbeat is its lease on the runs it executes: another gateway finds them
orphaned within stale-after plus one heartbeat (13 s) and takes them over (`on_orphaned`)."""
HEARTBEAT_ENV = "TOOLWEAVE_RUN_HEARTBEAT_SECONDS"
STALE_AFTER_ENV = "TOOLWEAVE_RUN_STALE_AFTER_SECONDS"
INTERRUPTED_ERROR = "the gateway stopped while this run was in progress"

_RUN_FIELDS = (
    "tool",
    "kind",
    "tenant",
    "subject",
    "status",
    "arguments",
    "operation",
    "reason",
    "error",
    "latency_ms",
    "started_at",
    "finished_at",
    "state",
    "events",
)
_STEP_FIELDS = ("status", "attempts", "latency_ms", "output", "error", "start_ms")

log = logging.getLogger(__name__)


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, not {limit!r}")


def _seconds_from_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds, not {raw!r}")
    return value


def _run_values(record: RunRecord) -> dict[str, Any]:
    values = {name: getattr(record, name) for name in _RUN_FIELDS}
    values["arguments"] = dict(record.arguments)
    values["state"] = dict(record.state)
    values["events"] = list(record.events)
    return values


def _step_record(row: Row[Any]) -> StepRecord:
    return StepRecord(
        id=row.step_id,
        status=row.status,
        attempts=row.attempts,
        latency_ms=row.latency_ms,
        output=row.output,
        error=row.error,
        start_ms=row.start_ms,
    )


def _run_record(row: Row[Any], steps: list[StepRecord]) -> RunRecord:
    fields = {name: getattr(row, name) for name in _RUN_FIELDS}
    fields["events"] = fields["events"] or []  # rows written before the column existed
    return RunRecord(id=row.id, steps=steps, **fields)


async def _upsert_steps(
    conn: AsyncConnection, run_id: str, steps: Sequence[StepRecord], *, move_to_end: bool
) -> None:
    """New steps go to the end in the order given. A step written again by `checkpoint` moves to
    the end too (as in MemoryRunStore); `finish_run` leaves stored steps where they are, because
    its record may predate the latest checkpoints."""
    if not steps:
        return
    query = select(func.coalesce(func.max(run_steps.c.seq), 0)).where(run_steps.c.run_id == run_id)
    base = (await conn.execute(query)).scalar_one()
    refreshed = (*_STEP_FIELDS, "seq") if move_to_end else _STEP_FIELDS
    for offset, step in enumerate(steps, start=1):
        values = {name: getattr(step, name) for name in _STEP_FIELDS}
        values.update(run_id=run_id, step_id=step.id, seq=base + offset)
        await upsert(conn, run_steps, values, ["run_id", "step_id"], refreshed)


async def _steps_by_run(conn: AsyncConnection, run_ids: Iterable[str]) -> dict[str, list[StepRecord]]:
    ids = list(run_ids)
    grouped: dict[str, list[StepRecord]] = {run_id: [] for run_id in ids}
    if ids:
        query = select(run_steps).where(run_steps.c.run_id.in_(ids)).order_by(run_steps.c.seq)
        for row in (await conn.execute(query)).all():
            grouped[row.run_id].append(_step_record(row))
    return grouped


class SqlRunStore:
    """Implements `toolweave.runs.RunStore`; tenant filtering mirrors `MemoryRunStore` exactly."""

    write_behind = True
    durable = True

    def __init__(
        self,
        db: Database,
        *,
        instance_id: str | None = None,
        heartbeat_seconds: float | None = None,
        stale_after_seconds: float | None = None,
        on_orphaned: Callable[[list[str]], None] | None = None,
        sweeps: bool = True,
    ) -> None:
        """The intervals default to `$TOOLWEAVE_RUN_HEARTBEAT_SECONDS` (else 3) and
        `$TOOLWEAVE_RUN_STALE_AFTER_SECONDS` (else 10). `on_orphaned(run_ids)` is told of the
        runs THIS store just moved from `running` to `interrupted` because their gateway's lease
        lapsed (no other store moved the same ones): a served gateway takes them over.
        `sweeps=False` (a one-shot command beside serving gateways) never moves other gateways'
        runs, which would keep the gateways from taking them over."""
        if heartbeat_seconds is None:
            heartbeat_seconds = _seconds_from_env(HEARTBEAT_ENV, DEFAULT_HEARTBEAT_SECONDS)
        if stale_after_seconds is None:
            stale_after_seconds = _seconds_from_env(STALE_AFTER_ENV, DEFAULT_STALE_AFTER_SECONDS)
        if stale_after_seconds <= heartbeat_seconds:
            raise ValueError("stale_after_seconds must exceed heartbeat_seconds, or live gateways look dead")
        self._db = db
        self._on_orphaned = on_orphaned
        self._sweeps = sweeps
        self.instance_id = instance_id or uuid.uuid4().hex
        self._heartbeat_seconds = heartbeat_seconds
        self._stale_after = stale_after_seconds
        self._last_beat = 0.0
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._pending: list[_Op] = []
        self._writer: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        """Set when something is recorded: the writer starts a batch."""
        self._kick: asyncio.Event | None = None
        """Set by `flush`: the batch is written now, without waiting for more."""
        self._idle: asyncio.Event | None = None
        """Set while nothing is pending or being written."""
        self._active: set[str] = set()
        """Runs this instance executes (started or claimed here, not finished)."""
        self._lost: set[str] = set()
        """Runs this instance executed until it lost their lease (see `lost`)."""

    def __repr__(self) -> str:
        return f"SqlRunStore({self._db!r}, instance_id={self.instance_id!r})"

    # -- write-behind --------------------------------------------------------

    def start_run_nowait(self, record: RunRecord) -> None:
        """`start_run`, written in the background (the record is copied now)."""
        self._enqueue(_Op("start", record.id, values=_run_values(record), steps=list(record.steps)))

    def checkpoint_nowait(self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None) -> None:
        """`checkpoint`, written in the background."""
        self._enqueue(
            _Op("checkpoint", run_id, steps=[step], state=dict(state) if state is not None else None)
        )

    def finish_run_nowait(self, record: RunRecord) -> None:
        """`finish_run`, written in the background (the record is copied now)."""
        self._enqueue(_Op("finish", record.id, values=_run_values(record), steps=list(record.steps)))

    def _enqueue(self, op: _Op) -> None:
        self._pending.append(op)
        if self._writer is None or self._writer.done():
            self._wake, self._kick, self._idle = asyncio.Event(), asyncio.Event(), asyncio.Event()
            self._writer = asyncio.get_running_loop().create_task(
                self._write_behind(), name="toolweave-run-writer"
            )
        assert self._wake is not None and self._idle is not None
        self._idle.clear()
        self._wake.set()

    async def flush(self) -> None:
        """Wait until everything recorded with the `*_nowait` methods is in the database."""
        writer = self._writer
        if writer is None or writer.done() or writer.get_loop() is not asyncio.get_running_loop():
            if self._pending:  # no writer in this loop (a store reused across event loops): write now
                batch, self._pending = self._pending, []
                await self._write_batch(batch)
            return
        assert self._wake is not None and self._kick is not None and self._idle is not None
        while self._pending or not self._idle.is_set():
            self._kick.set()
            self._wake.set()
            await self._idle.wait()

    async def _write_behind(self) -> None:
        """Each batch: wait for the first event, then `WRITE_BEHIND_SECONDS` (or a flush) for more."""
        assert self._wake is not None and self._kick is not None and self._idle is not None
        wake, kick, idle = self._wake, self._kick, self._idle
        while True:
            if not self._pending:
                idle.set()
                wake.clear()
                await wake.wait()
                continue
            if not kick.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(WRITE_BEHIND_SECONDS):
                        await kick.wait()
            kick.clear()
            batch, self._pending = self._pending, []
            try:
                await self._write_batch(batch)
            except asyncio.CancelledError:
                self._pending[:0] = batch  # close() writes them
                raise
            except Exception:  # noqa: BLE001 - whatever the database refused, retry run by run
                await self._write_run_by_run(batch)

    async def _write_run_by_run(self, batch: list[_Op]) -> None:
        """A batch the database refused: write each run's events alone, so one bad record loses only itself."""
        by_run: dict[str, list[_Op]] = {}
        for op in batch:
            by_run.setdefault(op.run_id, []).append(op)
        for run_id, ops in by_run.items():
            try:
                await self._write_batch(ops)
            except Exception:
                log.exception("recording %d event(s) of run %s failed; they are lost", len(ops), run_id)

    async def _write_batch(self, batch: list[_Op]) -> None:
        """Apply `batch` in one transaction, as the awaited methods would have, one after the other."""
        runs_ops: dict[str, list[_Op]] = {}
        for op in batch:
            if op.run_id in self._lost:
                continue  # another gateway holds the run now: nothing of this one's is written
            runs_ops.setdefault(op.run_id, []).append(op)
            if op.kind == "start":
                self._active.add(op.run_id)
            elif op.kind == "finish":
                self._active.discard(op.run_id)
        async with self._db.write() as conn:
            await self._beat(conn)
            rows_now = await self._fenced(conn, runs_ops)
            for run_id in [run_id for run_id in runs_ops if run_id in self._lost]:
                del runs_ops[run_id]
            existing = {
                run_id: row.state for run_id, row in rows_now.items() if runs_ops[run_id][0].kind != "start"
            }
            with_steps = [run_id for run_id, ops in runs_ops.items() if any(op.steps for op in ops)]
            seqs: dict[str, dict[str, int]] = {run_id: {} for run_id in with_steps}
            if with_steps:
                query = select(run_steps.c.run_id, run_steps.c.step_id, run_steps.c.seq).where(
                    run_steps.c.run_id.in_(with_steps)
                )
                for seq_row in (await conn.execute(query)).all():
                    seqs[seq_row.run_id][seq_row.step_id] = seq_row.seq
            rows: list[dict[str, Any]] = []
            states: list[dict[str, Any]] = []
            steps: list[dict[str, Any]] = []
            for run_id, ops in runs_ops.items():
                row, state, touched = _replay(ops, existing.get(run_id), run_id in existing, seqs.get(run_id))
                if row is not None:
                    rows.append({**row, "id": run_id, "state": state, "owner": self.instance_id})
                elif state is not None:
                    states.append({"run_id": run_id, "new_state": state})
                steps += touched
            if rows:
                await _upsert_many(conn, runs, rows, ["id"], [*_RUN_FIELDS, "owner"])
            if states:
                statement = (
                    update(runs).where(runs.c.id == bindparam("run_id")).values(state=bindparam("new_state"))
                )
                await conn.execute(statement, states)
            if steps:
                await _upsert_many(conn, run_steps, steps, ["run_id", "step_id"], [*_STEP_FIELDS, "seq"])

    # -- fencing -------------------------------------------------------------

    def lost(self, run_id: str) -> bool:
        """True once this instance found it no longer holds the run's lease: another gateway
        interrupted it (this one looked dead, e.g. paused) and may be running it now. Every write
        this instance makes for the run from then on is refused; its executor stops the run."""
        return run_id in self._lost

    def _lose(self, run_ids: Iterable[str]) -> None:
        for run_id in run_ids:
            if run_id not in self._lost:
                log.warning("run %s: this gateway lost its lease (another took it over); stopping it", run_id)
            self._active.discard(run_id)
            if len(self._lost) >= 10_000:
                self._lost.clear()  # bounded: a run that old is long finished elsewhere
            self._lost.add(run_id)

    async def _fenced(self, conn: AsyncConnection, run_ids: Iterable[str]) -> dict[str, Any]:
        """Lock the existing rows of `run_ids` (for this transaction) and return them by id, less
        those this instance lost: a row another instance owns, or no longer `running` (another
        gateway's sweep interrupted it). A run with no row yet (being started here) is not fenced."""
        ids = list(dict.fromkeys(run_ids))
        if not ids:
            return {}
        query = (
            select(runs.c.id, runs.c.state, runs.c.owner, runs.c.status)
            .where(runs.c.id.in_(ids))
            .with_for_update()
        )
        rows = {row.id: row for row in (await conn.execute(query)).all()}
        self._lose(run_id for run_id, row in rows.items() if _taken(row, self.instance_id))
        return {run_id: row for run_id, row in rows.items() if run_id not in self._lost}

    async def check_leases(self) -> list[str]:
        """The runs executed here whose lease another gateway took since (now `lost`); the heartbeat
        asks, so a gateway that wakes from a pause stops such a run before its next step."""
        if not self._active:
            return []
        active = list(self._active)
        async with self._db.read() as conn:
            query = select(runs.c.id, runs.c.owner, runs.c.status).where(runs.c.id.in_(active))
            rows = (await conn.execute(query)).all()
        lost = [row.id for row in rows if _taken(row, self.instance_id)]
        self._lose(lost)
        return lost

    # -- RunStore protocol -------------------------------------------------

    async def start_run(self, record: RunRecord) -> None:
        """Insert, or take over an existing row (a resumed run) with this instance as owner."""
        await self.flush()
        values = {**_run_values(record), "owner": self.instance_id}
        async with self._db.write() as conn:
            await self._beat(conn)
            await upsert(conn, runs, {"id": record.id, **values}, ["id"], list(values))
            await _upsert_steps(conn, record.id, record.steps, move_to_end=False)

    async def checkpoint(self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None) -> None:
        """Unknown runs are ignored, as in MemoryRunStore: a lost checkpoint must not fail a call."""
        await self.flush()
        async with self._db.write() as conn:
            row = (await self._fenced(conn, [run_id])).get(run_id)
            if row is None:
                return  # unknown, or another gateway holds it now (`lost`)
            await self._beat(conn)
            await _upsert_steps(conn, run_id, [step], move_to_end=True)
            if state is not None:
                merged = {**row.state, **state}
                await conn.execute(update(runs).where(runs.c.id == run_id).values(state=merged))

    async def finish_run(self, record: RunRecord) -> None:
        """Write the final record. State and steps merge with the checkpoints, the record winning.

        MemoryRunStore hands `checkpoint` the very object the caller holds, so callers
        may rely on the record already containing its checkpoints; merging gives the
        same result when it does, and loses nothing when it does not.
        """
        await self.flush()
        async with self._db.write() as conn:
            existing = (await self._fenced(conn, [record.id])).get(record.id)
            if record.id in self._lost:
                return  # another gateway holds the run now
            self._active.discard(record.id)
            values = {**_run_values(record), "owner": self.instance_id}
            if existing is not None:
                values["state"] = {**existing.state, **values["state"]}
            await upsert(conn, runs, {"id": record.id, **values}, ["id"], list(values))
            await _upsert_steps(conn, record.id, record.steps, move_to_end=False)

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord | None:
        """The run if `tenant` may see it (`runs.visible_to`), else None."""
        await self.flush()
        async with self._db.read() as conn:
            row = (await conn.execute(select(runs).where(runs.c.id == run_id))).one_or_none()
            if row is None or not visible_to(row.tenant, tenant):
                return None
            steps = await _steps_by_run(conn, [row.id])
        return _run_record(row, steps[row.id])

    async def list_runs(
        self,
        *,
        tenant: str | None = None,
        tool: str | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> list[RunRecord]:
        """Newest first. A tenant filter matches exactly: `runs.visible_to` in SQL."""
        _check_limit(limit)
        await self.flush()
        query = select(runs).order_by(runs.c.started_at.desc(), runs.c.id.desc()).limit(limit)
        for column, value in ((runs.c.tenant, tenant), (runs.c.tool, tool), (runs.c.status, status)):
            if value is not None:
                query = query.where(column == value)
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
            steps = await _steps_by_run(conn, (row.id for row in rows))
        return [_run_record(row, steps[row.id]) for row in rows]

    # -- interrupted runs --------------------------------------------------

    async def list_interrupted(
        self, *, tenant: str | None = None, tool: str | None = None, limit: int = 50
    ) -> list[RunRecord]:
        """Runs cut off by a stopped gateway: candidates to resume (see `claim`)."""
        return await self.list_runs(tenant=tenant, tool=tool, status="interrupted", limit=limit)

    async def claim(
        self, run_id: str, tenant: str | None = None, *, actor: Actor | None = None
    ) -> RunRecord | None:
        """Atomically move an interrupted run back to `running` under this instance.

        None if it is not interrupted (any more): two gateways can never both resume it.
        With `actor`, the `run.resumed` audit record commits with the claim.
        """
        statement = (
            update(runs)
            .where(runs.c.id == run_id, runs.c.status == "interrupted")
            .values(status="running", owner=self.instance_id, error=None)
        )
        if tenant is not None:
            statement = statement.where(runs.c.tenant == tenant)
        await self.flush()
        async with self._db.write() as conn:
            await self._beat(conn)
            claimed = (await conn.execute(statement)).rowcount == 1
            if claimed and actor is not None:
                await _audit_resumed(conn, actor, run_id)
        if not claimed:
            return None
        self._lost.discard(run_id)
        self._active.add(run_id)
        return await self.get_run(run_id)

    async def start(self) -> int:
        """Call once at gateway startup: recover orphaned runs and keep this instance alive."""
        orphaned = await self.interrupt_orphans()
        if self._heartbeat_task is None:
            self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(), name="toolweave-run-heartbeat")
        self._hand_over(orphaned)
        return len(orphaned)

    async def mark_interrupted_on_start(self) -> int:
        """Register this instance, then mark runs of instances not seen lately as interrupted."""
        return len(await self.interrupt_orphans())

    async def interrupt_orphans(self) -> list[str]:
        """Register this instance, then move the runs of instances not seen lately to `interrupted`.

        Returns the ids this call moved: the UPDATE is atomic, so when several gateways sweep
        at once each orphaned run is moved (and reported) by exactly one of them. The heartbeat
        repeats this, so it also catches gateways that stopped after this one started.
        """
        cutoff = time.time() - self._stale_after
        live = select(gateway_instances.c.id).where(gateway_instances.c.last_seen >= cutoff)
        orphaned = runs.c.owner.is_(None) | runs.c.owner.not_in(live)
        await self.flush()
        async with self._db.write() as conn:
            await self._beat(conn, force=True)
            if not self._sweeps:
                return []
            result = await conn.execute(
                update(runs)
                .where(runs.c.status == "running", orphaned)
                .values(**_interrupted_values(_last_seen_of_owner(time.time())))
                .returning(runs.c.id)
            )
            moved = [str(row.id) for row in result.all()]
            await conn.execute(delete(gateway_instances).where(gateway_instances.c.last_seen < cutoff))
        if moved:
            log.warning("marked %d run(s) left running by a stopped gateway as interrupted", len(moved))
        return moved

    def _hand_over(self, run_ids: list[str]) -> None:
        if run_ids and self._on_orphaned is not None:
            try:
                self._on_orphaned(run_ids)
            except Exception:
                log.exception("handing over %d orphaned run(s) failed; they stay interrupted", len(run_ids))

    async def note_interrupted(self, run_id: str, error: str) -> None:
        """Say why an interrupted run waits (a secret to supply, a step not safe to repeat)."""
        async with self._db.write() as conn:
            await conn.execute(
                update(runs).where(runs.c.id == run_id, runs.c.status == "interrupted").values(error=error)
            )

    async def heartbeat(self) -> None:
        await self.flush()
        async with self._db.write() as conn:
            await self._beat(conn, force=True)

    async def close(self) -> None:
        """Clean shutdown: this instance's unfinished runs become interrupted, then it deregisters."""
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
            self._heartbeat_task = None
        await self._stop_writer()
        async with self._db.write() as conn:
            await conn.execute(
                update(runs)
                .where(runs.c.status == "running", runs.c.owner == self.instance_id)
                .values(**_interrupted_values(time.time()))
            )
            await conn.execute(delete(gateway_instances).where(gateway_instances.c.id == self.instance_id))
        self._last_beat = 0.0

    async def delete_finished_before(self, timestamp: float) -> int:
        """Retention: drop finished runs (and their steps) that ended before `timestamp` (epoch seconds)."""
        statement = delete(runs).where(runs.c.finished_at.is_not(None), runs.c.finished_at < timestamp)
        await self.flush()
        async with self._db.write() as conn:
            return (await conn.execute(statement)).rowcount

    async def _stop_writer(self) -> None:
        """Write what is pending, then end the writer task."""
        with contextlib.suppress(Exception):
            await self.flush()
        writer, self._writer = self._writer, None
        if writer is not None and not writer.done() and writer.get_loop() is asyncio.get_running_loop():
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
        if self._pending:
            batch, self._pending = self._pending, []
            try:
                await self._write_batch(batch)
            except Exception:
                log.exception("recording %d run event(s) failed at close; they are lost", len(batch))

    async def _beat(self, conn: AsyncConnection, *, force: bool = False) -> None:
        now = time.time()
        if not force and now - self._last_beat < self._heartbeat_seconds:
            return
        values = {
            "hostname": socket.gethostname()[:255],
            "pid": os.getpid(),
            "started_at": now,
            "last_seen": now,
        }
        await upsert(conn, gateway_instances, {"id": self.instance_id, **values}, ["id"], ["last_seen"])
        self._last_beat = now

    async def _heartbeat_loop(self) -> None:
        """Keeps `last_seen` fresh while runs sit in long steps, and interrupts the runs of gateways
        whose heartbeat went stale since; a failed beat is retried, not fatal."""
        while True:
            await asyncio.sleep(self._heartbeat_seconds)
            try:
                self._hand_over(await self.interrupt_orphans())
                await self.check_leases()
            except Exception:
                log.warning(
                    "run store heartbeat failed; retrying in %ss", self._heartbeat_seconds, exc_info=True
                )


@dataclass(slots=True)
class _Op:
    """One recorded event waiting for the writer: a start, a checkpoint, or a finish."""

    kind: str
    run_id: str
    values: dict[str, Any] | None = None
    steps: list[StepRecord] = field(default_factory=list)
    state: dict[str, Any] | None = None


def _replay(
    ops: list[_Op], state: dict[str, Any] | None, exists: bool, seqs: dict[str, int] | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[dict[str, Any]]]:
    """One run's events of a batch, replayed in memory exactly as the awaited methods apply them.

    Returns the run row to write (or None), its state (None when unchanged), and the step rows
    with their final `seq`. `state`/`exists` describe the row before the batch; `seqs` the
    steps it had (step id -> seq).
    """
    row: dict[str, Any] | None = None
    changed = False
    seqs = dict(seqs or {})
    written: dict[str, StepRecord] = {}
    for op in ops:
        if op.kind == "checkpoint":
            if not exists:
                continue  # unknown runs are ignored
            _place(seqs, written, op.steps, move_to_end=True)
            if op.state is not None:
                state = {**(state or {}), **op.state}
                changed = True
            continue
        assert op.values is not None
        row = op.values
        if op.kind == "start" or not exists:
            state = dict(op.values["state"])
        else:
            state = {**(state or {}), **op.values["state"]}
        exists = changed = True
        _place(seqs, written, op.steps, move_to_end=False)
    steps = [
        {**{name: getattr(step, name) for name in _STEP_FIELDS}, "run_id": ops[0].run_id, "step_id": step_id}
        | {"seq": seqs[step_id]}
        for step_id, step in written.items()
    ]
    return row, state if changed else None, steps


def _place(
    seqs: dict[str, int], written: dict[str, StepRecord], steps: list[StepRecord], *, move_to_end: bool
) -> None:
    """`_upsert_steps` in memory: new steps after the current last; `move_to_end` moves rewritten ones too."""
    if not steps:
        return
    base = max(seqs.values(), default=0)
    for offset, step in enumerate(steps, start=1):
        if move_to_end or step.id not in seqs:
            seqs[step.id] = base + offset
        written[step.id] = step


async def _upsert_many(
    conn: AsyncConnection, table: Any, rows: list[dict[str, Any]], keys: list[str], update_columns: list[str]
) -> None:
    """INSERT ... ON CONFLICT DO UPDATE for many rows in one executemany."""
    dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    statement = dialect_insert(table)
    changes = {name: statement.excluded[name] for name in update_columns}
    await conn.execute(statement.on_conflict_do_update(index_elements=keys, set_=changes), rows)


def _taken(row: Any, instance_id: str) -> bool:
    """Whether a run's row says its lease is no longer `instance_id`'s: another instance owns it, or
    a sweep interrupted it (it looked dead) and another may claim it any moment."""
    return bool(row.owner != instance_id or row.status == "interrupted")


def _interrupted_values(stopped: Any) -> dict[str, Any]:
    """An interrupted run keeps how long it ran, until `stopped` (epoch seconds, or an SQL expression
    of them): its page draws the step it was in for that long, not as a zero-length "running" step.
    `finished_at` stays empty: the run is not finished (retention keeps it, resuming continues it)."""
    return {
        "status": "interrupted",
        "error": func.coalesce(runs.c.error, INTERRUPTED_ERROR),
        "latency_ms": (stopped - runs.c.started_at) * 1000.0,
    }


def _last_seen_of_owner(now: float) -> Any:
    """When a run's gateway was last seen (its heartbeat), the best guess of when it stopped; `now`
    for a run no gateway owns."""
    seen = select(gateway_instances.c.last_seen).where(gateway_instances.c.id == runs.c.owner)
    return func.coalesce(seen.scalar_subquery(), now)


async def _audit_resumed(conn: AsyncConnection, actor: Actor, run_id: str) -> None:
    row = (await conn.execute(select(runs.c.tool, runs.c.tenant).where(runs.c.id == run_id))).one()
    await write_audit(
        conn,
        actor,
        "run.resumed",
        tenant=row.tenant,
        object_type="run",
        object_id=run_id,
        object_name=row.tool,
        detail={"status_before": "interrupted", "status": "running"},
    )
