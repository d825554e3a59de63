"""The DAG executor: each step starts as soon as its own dependencies finish.

ToolHive runs a workflow level by level, so one slow step holds back every
step of the next level even when they do not depend on it. Here the
scheduler keeps in-degrees: a finished step releases exactly its dependents,
and up to `maxParallel` ready steps run at once.

What happens when a step fails:
- `onError: continue` absorbs it: the step is recorded as failed, its
  `defaultResults` become its output, and the workflow goes on.
- otherwise, `failureMode: abort` (default) cancels the running steps and
  stops; `failureMode: continue` records the failure and runs everything else
  (the workflow still ends `failed`, like a fan-out with a failed target).
- an elicitation answered with `skip_remaining` skips every step not yet
  started (running ones finish) and the workflow completes.
- the workflow timeout cancels whatever is running and ends `timed_out`.

Durable runs. With a run store (`ctx.runs` and `ctx.run_id`), a tool or
forEach step is checkpointed as `running` when it starts (after its
condition) and again when it finishes, with the outputs so far in
`state["steps"]`. A resumed run (`ctx.resume`) restores the steps recorded
`completed` or `skipped` without running them. A step recorded `running` was
in flight when the gateway stopped, so it may or may not have taken effect:
it runs again only when that is safe — its tool is read-only or
`idempotentHint: true`, or the step retries (`onError: retry`); a forEach is
one unit, judged by its inner step. Otherwise it fails saying so, and
`onError` / `failureMode` decide as for any failure. Elicitation steps are
simply asked again. Failed steps run again (a failure had no effect to
repeat, or the step tolerated it).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import mcp_types as types

from toolweave.composite.base import RunContext
from toolweave.composite.errors import OutputError
from toolweave.composite.workflow.plan import StepPlan, WorkflowPlan
from toolweave.composite.workflow.steps import (
    StepOutcome,
    condition_holds,
    default_output,
    failed,
    run_call,
    run_elicitation,
    run_for_each,
    skipped,
)
from toolweave.results import error_result, json_text, ok_result, text
from toolweave.runs import StepRecord
from toolweave.secrets import redact_text, scrub_secrets, secret_values
from toolweave.templates import TemplateError, copy_json, run_bounded

logger = logging.getLogger(__name__)

RESTORABLE = frozenset({"completed", "skipped"})
SKIP_REMAINING = "skip_remaining"
RUNNING: Final = "running"


@dataclass
class StepState:
    """One step of one run: whether and when it started, and how it ended.

    One object per step rather than parallel lists indexed by step, so what
    the scheduler, the checkpoints and the result read about a step is in one
    place.
    """

    started: bool = False
    clock: float = 0.0
    """`perf_counter()` at the start: the latency of a step the workflow cancels."""
    start_ms: float | None = None
    """Milliseconds from the run's origin to the start (a resumed step keeps its saved one)."""
    outcome: StepOutcome | None = None
    record: StepRecord | None = None
    """The finished step's record for `_meta` and the run store; None until it ends."""

    def begin(self, origin: float) -> None:
        """Mark the step started now; `origin` is the run's start in epoch seconds."""
        self.started = True
        self.clock = time.perf_counter()
        self.start_ms = round((time.time() - origin) * 1000, 3)


class WorkflowRun:
    """The state of one call: step views for templates, records for `_meta`, the final result."""

    def __init__(self, plan: WorkflowPlan, arguments: Mapping[str, Any], ctx: RunContext) -> None:
        self.plan = plan
        self.ctx = ctx
        params = {**copy_json(plan.defaults), **arguments}
        self.secrets = secret_values(plan.secret_params, params)
        self.views: dict[str, dict[str, Any]] = {}
        started = ctx.resume.started_at if ctx.resume is not None else time.time()
        self.origin = started
        """The run's start (epoch seconds): each step's `start_ms` counts from it (a resumed run's too)."""
        self.workflow: dict[str, Any] = {
            "id": ctx.run_id or uuid.uuid4().hex,
            "name": plan.name,
            "started_at": datetime.fromtimestamp(started, UTC).isoformat(),
            "step_count": 0,
        }
        self.context: dict[str, Any] = {"params": params, "steps": self.views, "workflow": self.workflow}
        self.states = [StepState() for _ in plan.steps]
        self.entries: dict[str, dict[str, Any]] = {}
        self.failures: list[int] = []
        self.skipped_by: int | None = None
        self.in_flight: frozenset[int] = frozenset()
        """Steps a resumed run had running when the gateway stopped."""
        self.rerun: set[int] = set()
        self.stopping = False
        self.timed_out = False
        self.finished = 0

    # -- scheduling ------------------------------------------------------------

    async def execute(self) -> None:
        """Run the DAG under the workflow timeout; the result is read with `result()`."""
        timer = asyncio.timeout(self.plan.timeout)
        try:
            async with timer:
                await self._schedule()
        except TimeoutError:
            if not timer.expired():
                raise
            self.timed_out = True

    async def _schedule(self) -> None:
        plan = self.plan
        remaining = list(plan.indegree)
        for index in self._restore():
            for dependent in plan.steps[index].dependents:
                remaining[dependent] -= 1
        ready = deque(
            step.index
            for step in plan.steps
            if remaining[step.index] == 0 and not self.states[step.index].started
        )
        running: dict[asyncio.Task[StepOutcome], int] = {}
        try:
            while True:
                while ready and len(running) < plan.max_parallel and not self.stopping:
                    index = ready.popleft()
                    self.states[index].begin(self.origin)
                    running[asyncio.create_task(self._run_step(plan.steps[index]))] = index
                if not running:
                    break
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=running.__getitem__):
                    index = running.pop(task)
                    await self._finish(index, task.result())
                    if not self.stopping:
                        self._release(plan.steps[index], remaining, ready)
                if self.stopping and self.skipped_by is None:
                    await self._cancel(running)
            if self.skipped_by is not None:
                await self._skip_unstarted()
        finally:
            await self._cancel(running)
            self._close_unstarted()

    def _release(self, step: StepPlan, remaining: list[int], ready: deque[int]) -> None:
        for dependent in step.dependents:
            remaining[dependent] -= 1
            if remaining[dependent] == 0 and not self.states[dependent].started:
                ready.append(dependent)

    async def _cancel(self, running: dict[asyncio.Task[StepOutcome], int]) -> None:
        """Cancel running steps and record them as `cancelled` (the abort or timeout stopped them)."""
        if not running:
            return
        tasks = list(running)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        now = time.perf_counter()
        for task in tasks:
            index = running.pop(task)
            if not task.cancelled() and task.exception() is None:
                self._record(index, task.result(), task.result().latency_ms)
                continue
            cancelled = StepOutcome("cancelled", output={}, error="cancelled: the workflow stopped")
            self._record(index, cancelled, (now - self.states[index].clock) * 1000)

    async def _skip_unstarted(self) -> None:
        """After skip_remaining: every step not started is skipped, and reported like any finished step."""
        for step in self.plan.steps:
            if self.states[step.index].record is None:
                await self._report(self._record(step.index, skipped(step, SKIP_REMAINING), 0.0))

    def _close_unstarted(self) -> None:
        """Steps that never started: skipped after skip_remaining, else cancelled by an abort or timeout."""
        for step in self.plan.steps:
            if self.states[step.index].record is not None:
                continue
            if self.skipped_by is not None:
                self._record(step.index, skipped(step, SKIP_REMAINING), 0.0)
            else:
                self._record(step.index, StepOutcome("cancelled", output={}, error="not started"), 0.0)

    # -- one step --------------------------------------------------------------

    async def _run_step(self, step: StepPlan) -> StepOutcome:
        """Evaluate the condition, run the step, apply `onError: continue`. Never raises for failures."""
        started = time.perf_counter()
        try:
            outcome = await self._dispatch(step)
        except Exception as error:
            logger.exception("workflow %s: step %s crashed", self.plan.name, step.id)
            outcome = failed(f"internal error: {type(error).__name__}: {error}")
        if outcome.error:
            outcome.error = scrub_secrets(redact_text(outcome.error, self.secrets))
        if outcome.status == "failed" and step.action == "continue":
            outcome.output = default_output(step)
            outcome.reason = "continue"
        outcome.latency_ms = (time.perf_counter() - started) * 1000
        return outcome

    async def _dispatch(self, step: StepPlan) -> StepOutcome:
        if step.index in self.in_flight:
            refusal = self._not_rerun(step)
            if refusal is not None:
                return refusal
            self.rerun.add(step.index)
        try:
            if not await run_bounded(condition_holds, step, self.context):
                return skipped(step, "condition is false")
        except TemplateError as error:
            return failed(f"condition: {error}")
        if step.elicit is not None:
            return await run_elicitation(self.ctx, step, self.context)
        ctx = self.ctx
        if ctx.runs is not None and ctx.run_id is not None:
            await self._checkpoint_running(step)
            if ctx.runs.lost(ctx.run_id):  # this gateway was taken for dead; another runs it now
                self.stopping = True
                return failed("another gateway took this run over (this one lost its lease); not run here")
        if step.call is not None:
            return await run_call(ctx, step.call, self.context, step.timeout)
        try:
            async with asyncio.timeout(step.timeout):
                return await run_for_each(self.ctx, step, self.context)
        except TimeoutError:
            return failed(f"timed out after {step.timeout:g}s")

    async def _finish(self, index: int, outcome: StepOutcome) -> None:
        step = self.plan.steps[index]
        record = self._record(index, outcome, outcome.latency_ms)
        if outcome.status == "failed" and step.action != "continue":
            self.failures.append(index)
            if self.plan.failure_mode == "abort":
                self.stopping = True
        if outcome.skip_remaining and self.skipped_by is None:
            self.skipped_by = index
            self.stopping = True
        await self._report(record, step)

    def _record(self, index: int, outcome: StepOutcome, latency_ms: float) -> StepRecord:
        """Keep a finished step's outcome: its record for `_meta`, its view for later templates."""
        step = self.plan.steps[index]
        state = self.states[index]
        state.outcome = outcome
        secret = _derives_secret(step)
        record = state.record = StepRecord(
            id=step.id,
            status=outcome.status,
            attempts=outcome.attempts,
            latency_ms=round(latency_ms, 3),
            output=None if secret else outcome.output,
            error=outcome.error,
            start_ms=state.start_ms,
        )
        view = {
            "status": outcome.status,
            "output": outcome.output,
            "content": outcome.content,
            "error": outcome.error,
            "attempts": outcome.attempts,
        }
        self.views[step.id] = view
        # what is checkpointed: a step computed from a secret parameter may have echoed it, so its
        # output is not kept (a resumed run sees it completed, with an empty output)
        entry = {**view, "output": {}, "content": [], "redacted": True} if secret else dict(view)
        entry["start_ms"] = state.start_ms  # kept by a resume: the timeline stays true
        self.entries[step.id] = entry
        if outcome.status == "completed":
            self.workflow["step_count"] += 1
        return record

    async def _report(self, record: StepRecord, step: StepPlan | None = None) -> None:
        """Progress to the client and a checkpoint to the run store; neither may fail the workflow.

        The checkpoint goes through the store's write-behind (if it has one) unless the step
        must not run twice: then it is durable before the workflow goes on, so a resume after
        a crash finds the step done rather than "may have taken effect".
        """
        self.finished += 1
        ctx = self.ctx
        if ctx.progress is not None:
            try:
                await ctx.progress(self.finished, len(self.plan.steps), f"step {record.id} {record.status}")
            except Exception:
                logger.warning("workflow %s: progress notification failed", self.plan.name, exc_info=True)
        if ctx.runs is not None and ctx.run_id is not None:
            try:
                if ctx.runs.write_behind and (step is None or self._not_rerun(step) is None):
                    ctx.runs.checkpoint_nowait(ctx.run_id, record, state=self._saved())
                else:
                    await ctx.runs.checkpoint(ctx.run_id, record, state=self._saved())
            except Exception:
                logger.warning("workflow %s: checkpoint failed", self.plan.name, exc_info=True)

    def _saved(self) -> dict[str, Any]:
        """What a checkpoint keeps: the step entries, scrubbed of every secret value (and form of one)
        the run has seen, since a step's output may quote one (a resumed run sees `[redacted]`)."""
        return {"steps": scrub_secrets(dict(self.entries))}

    async def _checkpoint_running(self, step: StepPlan) -> None:
        """Say a step is in flight, so a resume after a crash knows it may have taken effect.

        Only a step that must not run twice waits for the database (the marker has to be
        durable before its call is made); a step that is safe to run again after a crash
        is marked through the store's write-behind, if it has one.
        """
        ctx = self.ctx
        assert ctx.runs is not None and ctx.run_id is not None
        try:
            if ctx.runs.write_behind and self._not_rerun(step) is None:
                ctx.runs.checkpoint_nowait(ctx.run_id, self._running(step))
            else:
                await ctx.runs.checkpoint(ctx.run_id, self._running(step))
        except Exception:
            logger.warning("workflow %s: checkpoint failed", self.plan.name, exc_info=True)

    def _running(self, step: StepPlan) -> StepRecord:
        return StepRecord(id=step.id, status=RUNNING, start_ms=self.states[step.index].start_ms)

    def _not_rerun(self, step: StepPlan) -> StepOutcome | None:
        """A step that was in flight at the crash: None when running it again is safe, else its failure."""
        call = step.call if step.call is not None else step.for_each.call if step.for_each else None
        if call is None or call.idempotent or call.retry.retries > 0 or step.action == "retry":
            return None
        return failed(
            f"step {step.id!r} was running when the gateway stopped and its tool {call.target!r} is not "
            "idempotent (no idempotentHint, no onError retry); not re-run, as it may already have taken effect",
            attempts=1,
        )

    def _restore(self) -> list[int]:
        """Steps a resumed run already completed: restored, not re-run. Notes the steps that were in flight."""
        resume = self.ctx.resume
        if resume is None:
            return []
        saved = resume.state.get("steps") if isinstance(resume.state, dict) else None
        if not isinstance(saved, dict):
            saved = {}
        running = {record.id for record in resume.steps if record.status == RUNNING}
        restored = []
        in_flight = []
        for step in self.plan.steps:
            entry = saved.get(step.id)
            if not isinstance(entry, dict) or entry.get("status") not in RESTORABLE:
                if step.id in running:
                    in_flight.append(step.index)
                continue
            outcome = StepOutcome(
                entry["status"],
                output=entry.get("output"),
                attempts=int(entry.get("attempts") or 0),
                content=list(entry.get("content") or []),
                reason="restored",
            )
            state = self.states[step.index]
            state.started = True
            start = entry.get("start_ms")
            state.start_ms = float(start) if isinstance(start, int | float) else None
            self._record(step.index, outcome, 0.0)
            self.finished += 1
            restored.append(step.index)
        self.in_flight = frozenset(in_flight)
        return restored

    # -- the result --------------------------------------------------------------

    @property
    def status(self) -> str:
        if self.timed_out:
            return "timed_out"
        return "failed" if self.failures else "completed"

    def meta(self, status: str) -> dict[str, Any]:
        steps = []
        for index, state in enumerate(self.states):
            if state.record is None:
                continue
            summary = state.record.summary()
            if state.outcome is not None and state.outcome.reason == "restored":
                summary["resumed"] = True
            elif index in self.in_flight:
                summary["interrupted"] = True
                summary["rerun"] = index in self.rerun
            steps.append(summary)
        return {"kind": "workflow", "steps": steps, "run_id": self.ctx.run_id, "status": status}

    def result(self) -> types.CallToolResult:
        status = self.status
        if status == "completed":
            try:
                return self._success(self.meta(status))
            except OutputError as error:
                message = f"Workflow '{self.plan.name}' ran, but its output could not be built: {error}"
                return error_result(
                    scrub_secrets(redact_text(message, self.secrets)), meta=self.meta("failed")
                )
        return self._failure(status)

    def _success(self, meta: dict[str, Any]) -> types.CallToolResult:
        if self.plan.output is not None:
            structured = self.plan.output.build(self.context)
            return ok_result([text(json_text(structured))], structured=structured, meta=meta)
        return self._last_step_result(meta)

    def _last_step_result(self, meta: dict[str, Any]) -> types.CallToolResult:
        """Without `output`, the result is the last declared step's."""
        last = len(self.plan.steps) - 1
        outcome = self.states[last].outcome
        step = self.plan.steps[last]
        if outcome is None:
            return ok_result([text(f"step {step.id!r} did not run")], meta=meta)
        note = self._note(step, outcome)
        if outcome.result is not None and outcome.status == "completed":
            structured = outcome.result.structured_content
            return ok_result(
                list(outcome.result.content),
                structured=structured if isinstance(structured, dict) else None,
                meta=meta,
            )
        output = outcome.output if isinstance(outcome.output, dict) else {"value": outcome.output}
        content = [text(note)] if note else []
        if output or not note:
            content.append(text(json_text(output)))
        return ok_result(content, structured=output, meta=meta)

    def _note(self, step: StepPlan, outcome: StepOutcome) -> str | None:
        """Why the last step has no result of its own (skipped, or failed and continued past)."""
        if outcome.reason == SKIP_REMAINING and self.skipped_by is not None:
            return self._skip_note()
        if outcome.status == "skipped":
            return f"Step {step.id!r} was skipped ({outcome.reason})."
        if outcome.status == "failed":
            return f"Step {step.id!r} failed and was continued past: {outcome.error}"
        return None

    def _skip_note(self) -> str:
        assert self.skipped_by is not None
        trigger = self.plan.steps[self.skipped_by]
        answer = self.states[self.skipped_by].outcome
        names = [
            s.id
            for s in self.plan.steps
            if (found := self.states[s.index].outcome) and found.reason == SKIP_REMAINING
        ]
        return (
            f"Stopped at step '{trigger.id}' (answer: {answer.reason if answer else 'none'}, "
            f"handled with skip_remaining); skipped the remaining steps: {', '.join(names)}."
        )

    def _failure(self, status: str) -> types.CallToolResult:
        message = self._failure_message(status)
        result = error_result(scrub_secrets(redact_text(message, self.secrets)), meta=self.meta(status))
        if status == "failed" and self.plan.failure_mode == "continue":
            self._append_partial(result)
        return result

    def _failure_message(self, status: str) -> str:
        name = self.plan.name
        if status == "timed_out":
            cancelled = [s.id for s in self.plan.steps if self._status_of(s) == "cancelled"]
            head = f"Workflow '{name}' timed out after {self.plan.timeout:g}s."
            return head + (f" Cancelled steps: {', '.join(cancelled)}." if cancelled else "")
        lines = [f"Workflow '{name}' failed."]
        for index in self.failures:
            outcome = self.states[index].outcome
            lines.append(
                f"Step '{self.plan.steps[index].id}' failed: {outcome.error if outcome else 'unknown error'}"
            )
        done = [s.id for s in self.plan.steps if self._status_of(s) == "completed"]
        stopped = [s.id for s in self.plan.steps if self._status_of(s) == "cancelled"]
        if done:
            lines.append(f"Completed steps: {', '.join(done)}.")
        if stopped:
            lines.append(f"Cancelled when the workflow stopped: {', '.join(stopped)}.")
        return "\n".join(lines)

    def _status_of(self, step: StepPlan) -> str | None:
        outcome = self.states[step.index].outcome
        return outcome.status if outcome is not None else None

    def _append_partial(self, result: types.CallToolResult) -> None:
        """`failureMode: continue` keeps what the other steps produced, like a fan-out keeps its successes."""
        try:
            partial = self._success({})
        except (OutputError, TemplateError):
            return
        result.content.extend(partial.content)
        result.structured_content = partial.structured_content


def _derives_secret(step: StepPlan) -> bool:
    """Whether the step's call arguments are computed from a secret parameter."""
    call = step.call if step.call is not None else (step.for_each.call if step.for_each is not None else None)
    return call is not None and bool(call.secret_fields)
