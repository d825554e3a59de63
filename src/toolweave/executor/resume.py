"""Resuming an interrupted run: `toolweave runs resume ID` and `POST /api/v1/runs/{id}/resume`.

A run becomes `interrupted` when its gateway stopped while it was in
progress (see `toolweave.store.runs`). `resume_run` continues it as the same
run record, through the same executor as any call (policy, approval,
admission pools, a tenant's connections):

1. The run is loaded for the caller's tenant (someone else's is "not found")
   and must be `interrupted`; its tool must still be served, as the same kind.
2. Arguments: the record's, which have every secret (`writeOnly`,
   `format: password`) redacted. The request supplies those again; a missing
   one is refused, naming the parameter. Other parameters come from the
   record and cannot be changed (resending the recorded value is fine).
3. `claim` moves the run back to `running` under this gateway atomically, so
   exactly one request or gateway resumes it.
4. The tool runs with `RunContext.resume` set: a workflow restores its
   completed and skipped steps and decides about the step that was in flight
   (see `toolweave.composite.workflow.engine`). Fan-outs, routers and
   recorded direct calls have no steps to continue from: they are run again
   as a whole when their tool is read-only or idempotent, else refused.
5. The executor finishes the same record: status, steps, latency, error.

Refusals are `ResumeError`s carrying the HTTP status and error code the API
answers with; nothing has changed when one is raised.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from toolweave.actor import Actor
from toolweave.catalog.catalog import Entry
from toolweave.composite.annotations import effective_hints
from toolweave.executor.errors import ResumeError
from toolweave.executor.executor import ToolExecutor
from toolweave.executor.recording import resuming
from toolweave.runs import RunRecord, RunStore
from toolweave.secrets import REDACTED


async def resume_run(
    executor: ToolExecutor,
    run_id: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    actor: Actor | None = None,
) -> types.CallToolResult:
    """Continue an interrupted run as `executor`'s session; the result is the call's, with the same run id.
    `actor` (who asked, from where) is handed to the run store's `claim` for its audit record.

    Raises ResumeError (404 unknown or another tenant's run, 409 not interrupted, already
    claimed or not resumable, 422 missing secrets or bad arguments) before anything runs.
    """
    registry = executor.registry
    runs = registry.runs
    tenant = executor.session.tenant
    record = await interrupted_run(runs, run_id, tenant)
    if record.tenant != tenant:  # the operator (no tenant) resumes a tenant's run as that tenant
        executor = ToolExecutor(registry, dataclasses.replace(executor.session, tenant=record.tenant))
    entry = _entry(executor, record)
    supplied = _check_supplied(arguments)
    merged = _arguments(entry, record, supplied)
    problems = entry.validator.problems(merged)
    if problems:
        raise ResumeError(
            422,
            "invalid_arguments",
            f"the arguments of run {run_id!r} are not valid for {entry.name!r} any more; nothing was resumed",
            [("arguments", problem) for problem in problems],
        )
    if not runs.durable:
        raise ResumeError(
            409, "not_resumable", "this gateway keeps runs in memory; only a database can resume them"
        )
    claimed = await runs.claim(run_id, record.tenant, actor=actor)
    if claimed is None:
        raise ResumeError(
            409, "already_claimed", f"run {run_id!r} was resumed by another request or gateway just now"
        )
    state = claimed.state
    claimed.state = {**state, "resumed_at": [*_list(state.get("resumed_at")), time.time()]}
    pending = [claimed]
    token = resuming.set(pending)
    try:
        result = await executor.call(entry.name, merged)
    except asyncio.CancelledError:
        if pending:
            await _release(runs, claimed, state, record.error)
        raise
    finally:
        resuming.reset(token)
    if pending:  # refused before it ran (policy, approval): the run stays resumable
        await _release(runs, claimed, state, record.error)
    return result


async def _release(runs: Any, claimed: RunRecord, state: dict[str, Any], error: str | None) -> None:
    """Give back a claimed run that never started: interrupted again, as it was."""
    claimed.status = "interrupted"
    claimed.state = state
    claimed.error = error
    await runs.finish_run(claimed)


async def interrupted_run(runs: RunStore, run_id: str, tenant: str | None) -> RunRecord:
    """The run, if `tenant` may resume it now (no tenant: any run); else the ResumeError saying why."""
    record = await runs.get_run(run_id, tenant)
    if record is None:
        raise ResumeError(404, "not_found", f"run {run_id!r} not found")
    if record.status != "interrupted":
        raise ResumeError(409, "not_interrupted", _not_interrupted(record))
    return record


def _not_interrupted(record: RunRecord) -> str:
    if record.status == "running":
        return (
            f"run {record.id!r} is running, not interrupted: only interrupted runs can be resumed. A run whose "
            "gateway stopped becomes interrupted when that gateway's heartbeat is stale (10 s by default)"
        )
    return f"run {record.id!r} is {record.status}, not interrupted: only interrupted runs can be resumed"


def _entry(executor: ToolExecutor, record: RunRecord) -> Entry:
    """The run's tool as the caller sees it now; a workflow must still be a workflow, and other
    kinds are only run again when calling their tool twice is harmless."""
    registry = executor.registry
    entry = registry.catalog.get(record.tool)
    if entry is None or not entry.listed_to(executor.session.tenant):
        raise ResumeError(
            409, "not_served", f"run {record.id!r} called {record.tool!r}, which is not served any more"
        )
    kind = entry.kind if entry.composite is not None else "direct"
    if kind != record.kind:
        raise ResumeError(
            409,
            "not_resumable",
            f"run {record.id!r} was a {record.kind} run, but {record.tool!r} is now a {kind}; it cannot be resumed",
        )
    if kind == "direct" and not registry.limits.record_direct_calls:
        raise ResumeError(
            409,
            "not_resumable",
            f"run {record.id!r} recorded a direct call, but gateway.record_direct_calls is off now",
        )
    if kind != "workflow" and not effective_hints(entry.tool).idempotent:
        raise ResumeError(
            409,
            "not_resumable",
            f"run {record.id!r} ({kind} {record.tool!r}) was in flight when the gateway stopped and has no steps "
            f"to continue from; {record.tool!r} is not idempotent (no readOnlyHint or idempotentHint), so it is "
            "not run again, as it may already have taken effect",
        )
    return entry


def _check_supplied(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise ResumeError(
            422, "invalid_arguments", f"arguments must be a JSON object, got {type(arguments).__name__}"
        )
    return dict(arguments)


def _arguments(entry: Entry, record: RunRecord, supplied: dict[str, Any]) -> dict[str, Any]:
    """The record's arguments with the redacted secrets supplied again; never quotes a value."""
    merged = dict(record.arguments)
    redacted = {key for key, value in merged.items() if value == REDACTED}
    secret = entry.secrets | redacted
    problems = []
    for key, value in supplied.items():
        if key in secret:
            merged[key] = value
        elif key not in merged or merged[key] != value:
            problems.append(
                (
                    f"arguments.{key}",
                    "only secret parameters (writeOnly or format: password) can be supplied when resuming; "
                    "the others come from the run record and cannot change",
                )
            )
    if problems:
        raise ResumeError(
            422, "invalid_arguments", f"cannot change the arguments of run {record.id!r}", problems
        )
    missing = sorted(key for key in redacted if key not in supplied)
    if missing:
        names = ", ".join(missing)
        raise ResumeError(
            422,
            "missing_secret",
            f"resuming run {record.id!r} needs the secret argument(s) {names}: run records do not keep secret "
            "values, so supply them again (`toolweave runs resume ID --args JSON`, or the body "
            '`{"arguments": {...}}`); nothing was resumed',
            [
                (f"arguments.{key}", "a secret the run record does not keep; supply it again")
                for key in missing
            ],
        )
    return merged


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []
