"""Run records in the database: `toolweave.runs.RunStore` for gateways with a database.

Interrupted runs. Every store is one gateway *instance* (a random id) that
writes itself into `gateway_instances` and refreshes `last_seen` (a
background heartbeat, plus piggy-backed on run writes). Each run row records
its `owner` instance. `start()` / `mark_interrupted_on_start()` turn `running`
rows whose owner has not been seen for `stale_after` seconds into
`interrupted`; `close()` does the same for the instance's own runs on a clean
shutdown. A heartbeat rather than "everything running is dead" because
several gateways may share one PostgreSQL database, and one starting must not
interrupt another's live runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Row, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from toolweave.runs import RunRecord, StepRecord
from toolweave.store._sql import upsert
from toolweave.store.database import Database
from toolweave.store.tables import gateway_instances, run_steps, runs

DEFAULT_HEARTBEAT_SECONDS = 30.0
DEFAULT_STALE_AFTER_SECONDS = 120.0
INTERRUPTED_ERROR = "the gateway stopped while this run was in progress"

_RUN_FIELDS = (
    "tool",
    "kind",
    "tenant",
    "status",
    "arguments",
    "operation",
    "reason",
    "error",
    "latency_ms",
    "started_at",
    "finished_at",
    "state",
)
_STEP_FIELDS = ("status", "attempts", "latency_ms", "output", "error")

log = logging.getLogger(__name__)


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, not {limit!r}")


def _run_values(record: RunRecord) -> dict[str, Any]:
    values = {name: getattr(record, name) for name in _RUN_FIELDS}
    values["arguments"] = dict(record.arguments)
    values["state"] = dict(record.state)
    return values


def _step_record(row: Row[Any]) -> StepRecord:
    return StepRecord(
        id=row.step_id,
        status=row.status,
        attempts=row.attempts,
        latency_ms=row.latency_ms,
        output=row.output,
        error=row.error,
    )


def _run_record(row: Row[Any], steps: list[StepRecord]) -> RunRecord:
    fields = {name: getattr(row, name) for name in _RUN_FIELDS}
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

    def __init__(
        self,
        db: Database,
        *,
        instance_id: str | None = None,
        heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS,
        stale_after_seconds: float = DEFAULT_STALE_AFTER_SECONDS,
    ) -> None:
        if stale_after_seconds <= heartbeat_seconds:
            raise ValueError("stale_after_seconds must exceed heartbeat_seconds, or live gateways look dead")
        self._db = db
        self.instance_id = instance_id or uuid.uuid4().hex
        self._heartbeat_seconds = heartbeat_seconds
        self._stale_after = stale_after_seconds
        self._last_beat = 0.0
        self._heartbeat_task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"SqlRunStore({self._db!r}, instance_id={self.instance_id!r})"

    # -- RunStore protocol -------------------------------------------------

    async def start_run(self, record: RunRecord) -> None:
        """Insert, or take over an existing row (a resumed run) with this instance as owner."""
        values = {**_run_values(record), "owner": self.instance_id}
        async with self._db.write() as conn:
            await self._beat(conn)
            await upsert(conn, runs, {"id": record.id, **values}, ["id"], list(values))
            await _upsert_steps(conn, record.id, record.steps, move_to_end=False)

    async def checkpoint(self, run_id: str, step: StepRecord, state: dict[str, Any] | None = None) -> None:
        """Unknown runs are ignored, as in MemoryRunStore: a lost checkpoint must not fail a call."""
        async with self._db.write() as conn:
            query = select(runs.c.state).where(runs.c.id == run_id).with_for_update()
            row = (await conn.execute(query)).one_or_none()
            if row is None:
                return
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
        async with self._db.write() as conn:
            query = select(runs.c.state).where(runs.c.id == record.id).with_for_update()
            existing = (await conn.execute(query)).one_or_none()
            values = {**_run_values(record), "owner": self.instance_id}
            if existing is not None:
                values["state"] = {**existing.state, **values["state"]}
            await upsert(conn, runs, {"id": record.id, **values}, ["id"], list(values))
            await _upsert_steps(conn, record.id, record.steps, move_to_end=False)

    async def get_run(self, run_id: str, tenant: str | None = None) -> RunRecord | None:
        """A tenant sees its own runs and tenant-less ones; no tenant sees everything."""
        async with self._db.read() as conn:
            row = (await conn.execute(select(runs).where(runs.c.id == run_id))).one_or_none()
            if row is None or (tenant is not None and row.tenant not in (None, tenant)):
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
        """Newest first. A tenant filter matches exactly (as MemoryRunStore does)."""
        _check_limit(limit)
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

    async def claim(self, run_id: str, tenant: str | None = None) -> RunRecord | None:
        """Atomically move an interrupted run back to `running` under this instance.

        None if it is not interrupted (any more): two gateways can never both resume it.
        """
        statement = (
            update(runs)
            .where(runs.c.id == run_id, runs.c.status == "interrupted")
            .values(status="running", owner=self.instance_id, error=None)
        )
        if tenant is not None:
            statement = statement.where(runs.c.tenant == tenant)
        async with self._db.write() as conn:
            await self._beat(conn)
            claimed = (await conn.execute(statement)).rowcount == 1
        return await self.get_run(run_id) if claimed else None

    async def start(self) -> int:
        """Call once at gateway startup: recover orphaned runs and keep this instance alive."""
        count = await self.mark_interrupted_on_start()
        if self._heartbeat_task is None:
            self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(), name="toolweave-run-heartbeat")
        return count

    async def mark_interrupted_on_start(self) -> int:
        """Register this instance, then mark runs of instances not seen lately as interrupted."""
        cutoff = time.time() - self._stale_after
        live = select(gateway_instances.c.id).where(gateway_instances.c.last_seen >= cutoff)
        orphaned = runs.c.owner.is_(None) | runs.c.owner.not_in(live)
        async with self._db.write() as conn:
            await self._beat(conn, force=True)
            result = await conn.execute(
                update(runs).where(runs.c.status == "running", orphaned).values(**_interrupted_values())
            )
            await conn.execute(delete(gateway_instances).where(gateway_instances.c.last_seen < cutoff))
        if result.rowcount:
            log.warning("marked %d run(s) left running by a stopped gateway as interrupted", result.rowcount)
        return result.rowcount

    async def heartbeat(self) -> None:
        async with self._db.write() as conn:
            await self._beat(conn, force=True)

    async def close(self) -> None:
        """Clean shutdown: this instance's unfinished runs become interrupted, then it deregisters."""
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat_task
            self._heartbeat_task = None
        async with self._db.write() as conn:
            await conn.execute(
                update(runs)
                .where(runs.c.status == "running", runs.c.owner == self.instance_id)
                .values(**_interrupted_values())
            )
            await conn.execute(delete(gateway_instances).where(gateway_instances.c.id == self.instance_id))
        self._last_beat = 0.0

    async def delete_finished_before(self, timestamp: float) -> int:
        """Retention: drop finished runs (and their steps) that ended before `timestamp` (epoch seconds)."""
        statement = delete(runs).where(runs.c.finished_at.is_not(None), runs.c.finished_at < timestamp)
        async with self._db.write() as conn:
            return (await conn.execute(statement)).rowcount

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
        """Keeps `last_seen` fresh while runs sit in long steps; a failed beat is retried, not fatal."""
        while True:
            await asyncio.sleep(self._heartbeat_seconds)
            try:
                await self.heartbeat()
            except Exception:
                log.warning(
                    "run store heartbeat failed; retrying in %ss", self._heartbeat_seconds, exc_info=True
                )


def _interrupted_values() -> dict[str, Any]:
    return {"status": "interrupted", "error": func.coalesce(runs.c.error, INTERRUPTED_ERROR)}
