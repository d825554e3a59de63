"""The recording stage: a run record for every composite call (and, when configured, every direct
call): who called what, the arguments with secrets redacted, the outcome, steps and latency.

Recording never fails or slows the call it records: a store with write-behind
is written without waiting, and a failing store is logged, not raised.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from toolweave.catalog.catalog import Entry
from toolweave.results import toolweave_meta
from toolweave.runs import RunRecord, RunStore, StepRecord, is_run_status, new_run_id
from toolweave.secrets import DERIVED_SECRETS, TAINTED, redact_arguments

logger = logging.getLogger("toolweave.executor")

resuming: contextvars.ContextVar[list[RunRecord] | None] = contextvars.ContextVar(
    "toolweave_resuming", default=None
)
"""Set by `executor.resume`: the next recorded call continues this run record (popped once)."""


def open_record(
    entry: Entry, arguments: Mapping[str, Any], tenant: str | None, subject: str | None = None
) -> tuple[RunRecord, RunRecord | None]:
    """The record for this call, and the interrupted run it continues (if `resume_run` asked for one)."""
    pending = resuming.get()
    resume = pending.pop() if pending else None
    record = resume or RunRecord(
        id=new_run_id(),
        tool=entry.name,
        kind=entry.kind if entry.composite else "direct",
        tenant=tenant,
        subject=subject,
        arguments=redact_arguments(arguments, entry.secrets | DERIVED_SECRETS.get()),
    )
    return record, resume


async def started(runs: RunStore, record: RunRecord) -> None:
    await _write(runs, record, finished=False)


async def cancelled(runs: RunStore, record: RunRecord, since: float) -> None:
    record.status = "cancelled"
    record.latency_ms = elapsed_ms(since)
    await _write(runs, record, finished=True)


async def finished(
    runs: RunStore, record: RunRecord, entry: Entry, result: types.CallToolResult, since: float
) -> types.CallToolResult:
    """Complete the record from the result's `_meta["toolweave"]` (a composite's gets `run_id` and
    `latency_ms` added), write it, and hand the result back."""
    latency = elapsed_ms(since)
    if entry.composite is not None:
        meta = toolweave_meta(result)
        meta["run_id"] = record.id
        meta["latency_ms"] = latency
    else:
        meta = (result.meta or {}).get("toolweave", {})
    status = meta.get("status")  # a composite's own run status; anything else in that key is not one
    record.status = status if is_run_status(status) else ("failed" if result.is_error else "completed")
    record.operation = meta.get("operation")
    record.reason = meta.get("reason")
    record.steps = [
        StepRecord(
            id=step["id"],
            status=step["status"],
            attempts=step.get("attempts", 0),
            latency_ms=step.get("latency_ms", 0),
            start_ms=step.get("start_ms"),
        )
        for step in meta.get("steps", [])
        if isinstance(step, Mapping) and "id" in step
    ] or record.steps
    if result.is_error:
        record.error = _first_text(result)
    record.latency_ms = latency
    record.finished_at = time.time()
    await _write(runs, record, finished=True)
    return result


def elapsed_ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 3)


async def _write(runs: RunStore, record: RunRecord, *, finished: bool) -> None:
    _scrub(record)
    try:
        if runs.write_behind:
            (runs.finish_run_nowait if finished else runs.start_run_nowait)(record)
        elif finished:
            await runs.finish_run(record)
        else:
            await runs.start_run(record)
    except Exception:
        logger.exception("recording a run failed")


def _scrub(record: RunRecord) -> None:
    """Remove the call's secret values, and every form templates made of them, from what is recorded
    (a backend's error or a step's output may quote them, after any filter): `secrets.TAINTED`."""
    tainted = TAINTED.get()
    if tainted is None or not len(tainted):
        return
    record.arguments = tainted.scrub_value(record.arguments)
    if record.error is not None:
        record.error = tainted.scrub(record.error)
    record.events = tainted.scrub_value(record.events)
    for step in record.steps:  # a fan-out's targets keep what they answered, which may quote them
        step.output = tainted.scrub_value(step.output)
        if step.error is not None:
            step.error = tainted.scrub(step.error)
    if record.state:
        record.state = tainted.scrub_value(record.state)


def _first_text(result: types.CallToolResult) -> str:
    for item in result.content:
        if isinstance(item, types.TextContent):
            return item.text[:2000]
    return "error"
